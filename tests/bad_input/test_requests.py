"""Bad request CSVs, and odd request CSVs that are valid (tests/bad_input/harness.py)."""

from __future__ import annotations

import pytest

from tests.bad_input.harness import ROW, A, H, _case, _run

# ---------------------------------------------------------------- request CSVs
CSV_BAD = [
    ("", r"empty file; expected header"),
    ("\n", r"line 1: header must be"),
    ("tick,op,addr,bytes,source\n", r"line 1: header must be"),
    ("tick,op,address,bytes\n", r"line 1: header must be"),
    ("tick,op,address,bytes,source,extra\n", r"line 1: header must be"),
    ("source,tick,op,address,bytes\n", r"line 1: header must be"),
    (ROW, r"line 1: header must be"),
    (H + "0,X,0x4000000000,32,0\n", r"line 2: op must be R or W, not 'X'"),
    (H + "0,,0x4000000000,32,0\n", r"line 2: op must be R or W"),
    (H + "0,RW,0x4000000000,32,0\n", r"line 2: op must be R or W"),
    (H + "0,READ,0x4000000000,32,0\n", r"line 2: op must be R or W"),
    (H + "0,R,0xZZ,32,0\n", r"line 2: address '0xZZ' is not"),
    (H + "0,R,0x,32,0\n", r"line 2: address '0x' is not"),
    (H + "0,R,0x_4000000000,32,0\n", r"line 2: address '0x_4000000000' is not"),
    (H + "0,R,0x40_0000_0000,32,0\n", r"line 2: address .* is not"),
    (H + "0,R,0x-4000000000,32,0\n", r"line 2: address .* is not"),
    (H + "0,R,4e11,32,0\n", r"line 2: address '4e11' is not"),
    (H + "0,R,274877906944.0,32,0\n", r"line 2: address .* is not"),
    (H + "0,R,+274877906944,32,0\n", r"line 2: address .* is not"),
    (H + "0,R,,32,0\n", r"line 2: address '' is not"),
    (H + "0,R,0x10,32,0\n", r"line 2: address 0x10 is outside the HBF range"),
    (H + "0,R,0xc000000000,32,0\n", r"line 2: address 0xc000000000 is outside"),
    (H + "0,R,0xffffffffffffffff,32,0\n", r"line 2: address .* is outside"),
    (H + "0,R,0x10000000000000000,32,0\n", r"line 2: address .* is larger than"),
    (H + "0,R,0x4000000ff0,32,0\n", r"line 2: request at 0x4000000ff0 of 32 bytes crosses"),
    (H + "0,R,0x4000000001,4096,0\n", r"line 2: .* crosses a 4 KiB page"),
    (H + "0,R,0x4000000000,0,0\n", r"line 2: bytes must be 1..4096, not 0"),
    (H + "0,R,0x4000000000,4097,0\n", r"line 2: bytes 4097 is larger than 4096"),
    (H + "0,R,0x4000000000,-32,0\n", r"line 2: bytes must be non-negative"),
    (H + "0,R,0x4000000000,32.5,0\n", r"line 2: bytes '32.5' is not"),
    (H + "0,R,0x4000000000,thirty,0\n", r"line 2: bytes 'thirty' is not"),
    (H + "-1,R,0x4000000000,32,0\n", r"line 2: tick must be non-negative, not -1"),
    (H + "1.5,R,0x4000000000,32,0\n", r"line 2: tick '1.5' is not"),
    (H + "1e3,R,0x4000000000,32,0\n", r"line 2: tick '1e3' is not"),
    (H + ",R,0x4000000000,32,0\n", r"line 2: tick '' is not"),
    (H + "281474976710656,R,0x4000000000,32,0\n", r"line 2: tick 281474976710656 is larger"),
    (H + "4611686018427387904,R,0x4000000000,32,0\n", r"line 2: tick .* is larger than"),
    (H + "9" * 80 + ",R,0x4000000000,32,0\n", r"line 2: tick .* is not"),
    (H + "0x" + "f" * 70 + ",R,0x4000000000,32,0\n", r"line 2: tick .* is not"),
    (H + "0,R,0x4000000000,32,-1\n", r"line 2: source must be non-negative"),
    (H + "0,R,0x4000000000,32,4294967296\n", r"line 2: source 4294967296 is larger"),
    (H + "0,R,0x4000000000,32,a\n", r"line 2: source 'a' is not"),
    (H + "0,R,0x4000000000,32,\u0663\n", r"line 2: source .* is not"),
    (H + "0,R,0x4000000000,32\n", r"line 2: expected 5 fields, found 4"),
    (H + "0,R,0x4000000000,32,0,0\n", r"line 2: expected 5 fields, found 6"),
    (H + "0,R,0x4000000000,32,0,\n", r"line 2: expected 5 fields, found 6"),
    (H + "0;R;0x4000000000;32;0\n", r"line 2: expected 5 fields, found 1"),
    (H + "0\tR\t0x4000000000\t32\t0\n", r"line 2: expected 5 fields, found 1"),
    (H + ROW * 5 + "0,R,0x4000000000,32\n", r"line 7: expected 5 fields"),
    (H + ROW + "\n\n" + "0,Q,0x4000000000,32,0\n", r"line 5: op must be R or W"),
    (H + ROW * 3 + "5,W,0x4000000000,4097,0\n", r"line 5: bytes 4097 is larger"),
    (H + '0,"R,0x4000000000,32,0\n', r"line 2: expected 5 fields"),
    (H + '"0,R",0x4000000000,32,0\n', r"line 2: expected 5 fields, found 4"),
]

CSV_BAD_BYTES = [
    ((H + ROW).encode() + b"0,\xff,0x4000000000,32,0\n", r"r.csv line 3: not UTF-8 text"),
    (b"tick,op,address,bytes,source\xe9\n", r"r.csv line 1: not UTF-8 text"),
    ((H + ROW).encode().replace(b"R", b"R\x00", 1), r"r.csv line 2: NUL byte"),
    ("tick,op,address,bytes,source\n0,R,0x4000000000,32,0\n".encode("utf-16"),
     r"r.csv line 1: not UTF-8 text"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", r"r.csv line 1: not UTF-8 text"),
]


@pytest.mark.parametrize("text,match", CSV_BAD, ids=[f"csv{i}" for i in range(len(CSV_BAD))])
def test_bad_request_csv(tmp_path, monkeypatch, capsys, text, match):
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--trace", "t.csv",
                                          "--stats-json", "s.json"], {"r.csv": text}, match)


@pytest.mark.parametrize("data,match", CSV_BAD_BYTES)
def test_bad_request_csv_bytes(tmp_path, monkeypatch, capsys, data, match):
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--stats-json",
                                          "s.json"], {"r.csv": data}, match)


@pytest.mark.parametrize("argv,files,match", [
    (["run", "--requests", "missing.csv"], {}, r"cannot read requests 'missing.csv'"),
    (["run", "--requests", "d"], {"d": None}, r"cannot read requests 'd': Is a directory"),
    (["run", "--requests", "r.csv", "--config", "c.toml"],
     {"r.csv": H + "0,R,0x4000000000,32,0\n", "c.toml": "base_address = 549755813888\n"},
     r"line 2: address 0x4000000000 is outside"),
])
def test_bad_request_files(tmp_path, monkeypatch, capsys, argv, files, match):
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


CSV_ODD_BUT_VALID = [
    ("crlf", H.replace("\n", "\r\n") + ROW.replace("\n", "\r\n") * 3),
    ("no final newline", H + ROW + ROW.strip()),
    ("blank lines", H + "\n" + ROW + "\n\n" + ROW + "\n"),
    ("whitespace-only lines", H + "   \n" + ROW + "\t\n" + ROW),
    ("comma-only line", H + ROW + ",,,,\n" + ROW),
    ("spaces around fields", H + f" 0 , R , {A} , 32 , 0 \n"),
    ("spaces in header", "tick, op, address, bytes, source\n" + ROW),
    ("lowercase op", H + f"0,r,{A},32,0\n1,w,{A},32,0\n"),
    ("uppercase hex", H + "0,R,0X4000000000,32,0\n0,R,0x40000000AB,32,0\n"),
    ("decimal address", H + "0,R,274877906944,32,0\n"),
    ("quoted fields", H + f'"0","R","{A}","32","0"\n'),
    ("quoted header", '"tick","op","address","bytes","source"\n' + ROW),
    ("bare CR line ends", H.replace("\n", "\r") + ROW.replace("\n", "\r") * 2),
    ("ticks out of order", H + f"10,R,{A},32,0\n0,R,{A},32,1\n5,W,{A},4096,2\n"),
    ("header only", H),
    ("leading zeros", H + "007,R,0x004000000000,0032,0\n"),
    ("one byte, last of page", H + "0,W,0x4000000fff,1,0\n"),
    ("whole page", H + "0,W,0x4000001000,4096,0\n"),
    ("last page of the range", H + "0,R,0xbffffff000,4096,0\n"),
    ("largest tick", H + f"281474976710655,R,{A},32,0\n"),
    ("largest source", H + f"0,R,{A},32,4294967295\n"),
]


@pytest.mark.parametrize("name,text", CSV_ODD_BUT_VALID, ids=[c[0] for c in CSV_ODD_BUT_VALID])
def test_odd_request_csv_is_accepted(tmp_path, monkeypatch, capsys, name, text):
    rc, out, err, _, _ = _run(tmp_path, monkeypatch, capsys,
                              ["run", "--requests", "r.csv", "--stats-json", "s.json"],
                              {"r.csv": text})
    assert rc == 0 and err == "", err
    assert (tmp_path / "s.json").is_file()


def test_bom_request_csv_is_accepted(tmp_path, monkeypatch, capsys):
    rc, _, err, _, _ = _run(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv"],
                            {"r.csv": b"\xef\xbb\xbf" + (H + ROW).encode()})
    assert rc == 0 and err == ""

