"""The bad-input corpus (issue 11): every class of malformed input, and odd inputs that are valid.

Each bad case runs the command in-process (``hbfsim.cli.main``) in a fresh folder holding
its input files and asserts: exit code 2, exactly one line on stderr that names the problem
(a regular expression per case), no traceback, and no file in the folder created, changed or
removed. Each odd-but-valid case asserts exit 0 and an empty stderr. Cases that need a real
process (signals, a closed pipe) are in tests/test_outputs.py and at the end of this file.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest

from hbfsim.cli import main

H = "tick,op,address,bytes,source\n"
A = "0x4000000000"          # the first HBF address (base_address, 256 GiB)
ROW = f"0,R,{A},32,0\n"
MODEL_OK = ('{"num_hidden_layers": 1, "hidden_size": 256, "num_attention_heads": 2, '
            '"num_key_value_heads": 1, "head_dim": 128, "intermediate_size": 512, '
            '"vocab_size": 1024, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}')


SWEEP_GRID = ('[sweep]\nname = "t"\nworkloads = ["default"]\n[base]\nprofile = "reference"\n'
              "[grid]\nchannels = [1, 2]\n")


def _snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    digest = hashlib.sha1(fh.read()).hexdigest()
            # a folder's own mtime moves when the writability probe creates and removes its
            # temporary; its contents are compared entry by entry instead
            mtime = None if os.path.isdir(p) else st.st_mtime_ns
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size if mtime else None, mtime,
                                             digest)
    return out


def _write(tmp_path, files):
    for name, content in files.items():
        p = tmp_path / name
        if content is None:
            p.mkdir()
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, newline="")


def _run(tmp_path, monkeypatch, capsys, argv, files):
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, before, _snapshot(tmp_path)


# ---------------------------------------------------------------- configuration files
CONFIG_BAD = [
    ("channels = 5", r"channels must be 1, 2, 4, 8 or 16, not 5"),
    ("channels = 0", r"channels must be 1, 2, 4, 8 or 16"),
    ("channels = -2", r"channels must be"),
    ("channels = 2.0", r"channels must be an integer, not 2.0"),
    ("channels = '2'", r"channels must be an integer, not '2'"),
    ("channels = true", r"channels must be an integer, not True"),
    ("channels = [2]", r"channels must be an integer"),
    ("channels = 64", r"set experimental_channels"),
    ("experimental_channels = true\nchannels = 65", r"channels must be 1..64"),
    ("stacks = 0", r"stacks must be positive, not 0"),
    ("stacks = 99999999999999999999", r"stacks must be at most"),
    ("subarrays_per_channel = 0", r"subarrays_per_channel must be positive"),
    ("active_per_channel = -1", r"active_per_channel must be positive"),
    ("active_total = -1", r"active_total must be non-negative"),
    ("admission = 0", r"admission must be positive"),
    ("admission = 100000000000000000000", r"admission must be at most"),
    ("mshr_entries = 0", r"mshr_entries must be positive"),
    ("mshr_merge = 1", r"mshr_merge must be true or false, not 1"),
    ("mshr_merge = 'yes'", r"mshr_merge must be true or false"),
    ("queue_depth = 0", r"queue_depth must be positive"),
    ("placement = 'diagonal'", r"placement must be one of"),
    ("placement = 7", r"placement must be a string, not 7"),
    ("placement = 'explicit'", r"explicit_map must list"),
    ("placement = 'explicit'\nexplicit_map = [[0, 10, 5]]", r"explicit_map channel 5"),
    ("placement = 'explicit'\nexplicit_map = [[10, 0, 0]]", r"explicit_map range \[10, 0\]"),
    ("explicit_map = 3", r"explicit_map must be a list"),
    ("explicit_map = [[0, 1]]", r"explicit_map entries must be"),
    ("explicit_map = [[0, 1, 'a']]", r"explicit_map entries must be"),
    ("explicit_map = [[0, 1, 100000000000000000000000]]", r"explicit_map entry .* range"),
    ("group_pages = 0", r"group_pages must be positive"),
    ("stack_select = 'random'", r"stack_select must be one of"),
    ("read_mode = 'eager'", r"read_mode must be one of"),
    ("read_agg_window_ticks = -5", r"read_agg_window_ticks must be non-negative"),
    ("read_agg_window_ticks = 1000000000000000000", r"read_agg_window_ticks must be at most"),
    ("read_agg_threshold_bytes = 0", r"read_agg_threshold_bytes must be positive"),
    ("page_buffers = -1", r"page_buffers must be non-negative"),
    ("buffer_hit_ticks = -1", r"buffer_hit_ticks must be non-negative"),
    ("page_cache_pages = -1", r"page_cache_pages must be non-negative"),
    ("cache_hit_ticks = 1e3", r"cache_hit_ticks must be an integer"),
    ("write_buffer_entries = 0", r"write_buffer_entries must be positive"),
    ("write_deadline_ticks = 0", r"write_deadline_ticks must be positive"),
    ("write_deadline_ticks = 1000000000000000000", r"write_deadline_ticks must be at most"),
    ("write_timeout_policy = 'lenient'", r"write_timeout_policy must be strict or partial"),
    ("scheduler = 'lifo'", r"scheduler must be one of"),
    ("scheduler = 'partition-1r3w'", r"needs channels divisible by 4"),
    ("write_drain_high_water = 0", r"write_drain_high_water must be positive"),
    ("write_drain_window_ticks = 0", r"write_drain_window_ticks must be positive"),
    ("channel_bw_gbps = 0", r"channel_bw_gbps must be positive"),
    ("channel_bw_gbps = inf", r"channel_bw_gbps must be a finite number, not inf"),
    ("channel_bw_gbps = nan", r"channel_bw_gbps must be a finite number, not nan"),
    ("channel_bw_gbps = 1e300", r"channel_bw_gbps must be at most"),
    ("channel_bw_gbps = 'fast'", r"channel_bw_gbps must be a number"),
    ("link_burst_bytes = 1024", r"link_burst_bytes must be at least 4096"),
    ("memory_clock_mhz = 0", r"memory_clock_mhz must be positive"),
    ("memory_clock_mhz = -850", r"memory_clock_mhz must be positive"),
    ("memory_clock_mhz = inf", r"memory_clock_mhz must be a finite number"),
    ("memory_clock_mhz = 1e9", r"memory_clock_mhz must be at most"),
    ("gpu_clock_mhz = nan", r"gpu_clock_mhz must be a finite number"),
    ("gpu_clock_mhz = 0", r"gpu_clock_mhz must be positive"),
    ("t_read_us = inf", r"t_read_us must be a finite number, not inf"),
    ("t_read_us = -inf", r"t_read_us must be a finite number"),
    ("t_read_us = nan", r"t_read_us must be a finite number"),
    ("t_read_us = 1e300", r"t_read_us must be at most"),
    ("t_read_us = 0", r"t_read_us must be positive"),
    ("t_read_us = 0.0001", r"t_read_us 0.0001 rounds to 0 ticks"),
    ("t_read_us = 900000000\nmemory_clock_mhz = 900000", r"t_read_us .* more than"),
    ("t_prog_us = -1", r"t_prog_us must be positive"),
    ("t_erase_us = inf", r"t_erase_us must be a finite number"),
    ("media_mode = 'zns'", r"media_mode must be hbf or ssd"),
    ("pages_per_block = 0", r"pages_per_block must be positive"),
    ("blocks_per_zone = 0", r"blocks_per_zone must be positive"),
    ("overprovisioning = 1.0", r"overprovisioning must be"),
    ("overprovisioning = -0.1", r"overprovisioning must be in \[0, 1\)"),
    ("overprovisioning = nan", r"overprovisioning must be a finite number"),
    ("base_address = 4097", r"base_address must be 4 KiB aligned"),
    ("base_address = -4096", r"base_address must be non-negative"),
    ("base_address = 18446744073709547520\ncapacity_bytes = 536870912",
     r"must fit in 64 bits"),
    ("capacity_bytes = 0", r"capacity_bytes must be a positive multiple"),
    ("capacity_bytes = 12345", r"capacity_bytes must be a positive multiple"),
    ("capacity_bytes = 36893488147419103232", r"capacity_bytes must be at most"),
    # geometry (docs/flashaccel.md): dies and megaplanes partition a channel's subarrays
    ("subarrays_per_channel = 5\ncapacity_bytes = 549755813888",
     r"capacity_bytes must be a positive multiple .*\(10485760 B\), not 549755813888"),
    ("planes_per_die = 7", r"planes_per_die must divide subarrays_per_channel \(32\)"),
    ("planes_per_die = -96", r"planes_per_die must be non-negative, not -96"),
    ("planes_per_die = 96.0", r"planes_per_die must be an integer, not 96.0"),
    ("planes_per_die = 100000000000000000000", r"planes_per_die must be at most"),
    ("subarrays_per_channel = 96\nplanes_per_die = 64",
     r"planes_per_die must divide subarrays_per_channel \(96\).* not 64"),
    ("megaplane_planes = 0", r"megaplane_planes must be positive, not 0"),
    ("megaplane_planes = 3", r"megaplane_planes must divide the planes of a die \(32\), "
                             r"not 3"),
    ("subarrays_per_channel = 96\nplanes_per_die = 96\nmegaplane_planes = 64",
     r"megaplane_planes must divide the planes of a die \(96\), not 64"),
    ("megaplane_planes = 'wide'", r"megaplane_planes must be an integer, not 'wide'"),
    ("megaplane_planes = inf", r"megaplane_planes must be an integer, not inf"),
    ("plane_sram_bytes = -1", r"plane_sram_bytes must be non-negative, not -1"),
    ("plane_sram_bytes = nan", r"plane_sram_bytes must be an integer, not nan"),
    ("base_die_sram_bytes = 1e6", r"base_die_sram_bytes must be an integer, not 1000000.0"),
    ("base_die_sram_bytes = 100000000000000000000", r"base_die_sram_bytes must be at most"),
    ("subarrays_per_channel = 4294967296\npages_per_block = 4294967296",
     r"capacity unit .* exceeds the 64-bit address space"),
    ("trace_level = 3", r"trace_level must be 0, 1 or 2, not 3"),
    ("trace_file = 5", r"trace_file must be a string, not 5"),
    ("profile = 'fast'", r"profile must be one of"),
    ("profile = [1]", r"profile must be one of"),
    ("hbf_tR = -1", r"hbf_tR must be a tick count"),
    ("hbf_tR = 1.5", r"hbf_tR must be a tick count"),
    ("hbf_tR = 1000000000000000000", r"hbf_tR must be a tick count in"),
    ("memory_clock_mhz = 0\nhbf_tR = 5", r"memory_clock_mhz must be positive, not 0"),
    ("memory_clock_mhz = 'a'\nhbf_tPROG = 5", r"memory_clock_mhz must be a number"),
    ("hbf_num_channels = 3", r"channels must be 1, 2, 4, 8 or 16, not 3"),
    ("channels = 2\nhbf_num_channels = 2",
     r"'channels' given twice in c.toml \(as 'hbf_num_channels'\)"),
    ("hbf_scheduler = 9", r"scheduler must be a string, not 9"),
    ("hbf_mshr_enabled = 2", r"mshr_merge must be true or false"),
    ("hbf_profile = 'x'", r"unknown configuration key 'hbf_profile'"),
    ("chanels = 2", r"unknown configuration key 'chanels'"),
    ("'' = 1", r"unknown configuration key ''"),
    ("[controller]\nchannels = 2", r"configuration is flat; unexpected table \[controller\]"),
    ("channels = ", r"not valid TOML"),
    ("channels = 2\nchannels = 4", r"not valid TOML"),
    ("channels 2", r"not valid TOML"),
    ("channels = 0x", r"not valid TOML"),
    ('trace_file = "unterminated', r"not valid TOML"),
]

CONFIG_BAD_BYTES = [
    (b"channels = 2\n# \xff\xfe comment\n", r"c.toml line 2: not UTF-8 text \(byte 0xff"),
    (b"\xc3\x28 = 1\n", r"c.toml line 1: not UTF-8 text"),
    (b"channels = 2\x00\n", r"c.toml line 1: NUL byte"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", r"c.toml line 1: not UTF-8 text"),
]


@pytest.mark.parametrize("text,match", CONFIG_BAD, ids=[c[0][:40] for c in CONFIG_BAD])
def test_bad_config(tmp_path, monkeypatch, capsys, text, match):
    _case(tmp_path, monkeypatch, capsys, ["config", "show", "--config", "c.toml"],
          {"c.toml": text + "\n"}, match)


@pytest.mark.parametrize("data,match", CONFIG_BAD_BYTES)
def test_bad_config_bytes(tmp_path, monkeypatch, capsys, data, match):
    _case(tmp_path, monkeypatch, capsys, ["run", "--config", "c.toml"], {"c.toml": data},
          match)


@pytest.mark.parametrize("argv,files,match", [
    (["run", "--config", "missing.toml"], {}, r"cannot read configuration 'missing.toml'"),
    (["run", "--config", "d"], {"d": None}, r"cannot read configuration 'd': it is a dir"),
    (["run", "--config", "c.toml", "--stats-json", "s.json"], {"c.toml": "channels = 5\n"},
     r"channels must be"),
    (["run", "--profile", "nope"], {}, r"profile must be one of"),
    (["config", "show", "--profile", "Reference"], {}, r"profile must be one of"),
])
def test_bad_config_files(tmp_path, monkeypatch, capsys, argv, files, match):
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


def _case(tmp_path, monkeypatch, capsys, argv, files, match):
    rc, out, err, before, after = _run(tmp_path, monkeypatch, capsys, argv, files)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err, out[-300:])
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]
    assert before == after, "the folder changed"


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


# ---------------------------------------------------------------- traces
@pytest.fixture(scope="module")
def good_traces(tmp_path_factory):
    """Level-1 and level-2 traces of the default run, as lists of rows (lists of fields)."""
    d = tmp_path_factory.mktemp("traces")
    out = {}
    for level in (1, 2):
        p = d / f"t{level}.csv"
        assert main(["run", "--trace", str(p), "--trace-level", str(level)]) == 0
        lines = p.read_text().splitlines()
        out[level] = (lines[0], [ln.split(",") for ln in lines[1:]])
    return out


C = {name: i for i, name in enumerate(
    ["sim_cycle", "request_id", "source_subpartition", "op", "address", "page", "channel",
     "subarray", "state", "bytes", "queue_depth", "latency", "cache_hit", "mshr_hit",
     "error"])}


def _set(row_index, col, value):
    def f(rows):
        rows[row_index][C[col]] = value(rows[row_index][C[col]]) if callable(value) else value
        return rows
    return f


def _first(state, op=None):
    def find(rows):
        return next(i for i, r in enumerate(rows) if r[C["state"]] == state
                    and (op is None or r[C["op"]] == op))
    return find


def _at(find, col, value):
    def f(rows):
        i = find(rows)
        rows[i][C[col]] = value(rows[i][C[col]]) if callable(value) else value
        return rows
    return f


def _drop(find):
    def f(rows):
        del rows[find(rows)]
        return rows
    return f


def _dup(find):
    def f(rows):
        i = find(rows)
        rows.insert(i + 1, list(rows[i]))
        return rows
    return f


def _swap_first_two(rows):
    rows[0], rows[1] = rows[1], rows[0]
    return rows


def _other_page_same_channel(rows):
    # give a request of another page the channel of page 0's first row, but keep its page
    page0 = rows[0]
    for r in rows:
        if r[C["page"]] == page0[C["page"]]:
            r[C["channel"]] = str(int(page0[C["channel"]]) + 1)
            break
    return rows


TRACE_BAD = [
    # (level, mutation, match)
    (1, _at(_first("Completed"), "latency", "-5"), r"latency must be non-negative"),
    (1, _at(_first("Ingress"), "latency", lambda v: str(int(v) + 1)),
     r"latency 1 exceeds its cycle 0"),
    (1, _at(_first("Completed"), "latency", lambda v: str(int(v) + 7)), r"implies arrival"),
    (1, _at(_first("Ingress"), "bytes", "0"), r"bytes 0 .* must be 1\.\."),
    (1, _at(_first("Ingress"), "bytes", "5000"), r"bytes 5000"),
    (1, _at(_first("Completed"), "bytes", "64"), r"bytes|differs"),
    (1, _at(_first("Ingress"), "address", "0x10"), r"address 0x10 is outside the HBF range"),
    (1, _at(_first("Ingress"), "address", "0xc000000000"), r"outside the HBF range"),
    (1, _at(_first("Completed"), "address", lambda v: hex(int(v, 16) + 32)),
     r"address .* differs"),
    (1, _at(_first("Completed"), "op", lambda v: "W" if v == "R" else "R"), r"op .* differs"),
    (1, _at(_first("Completed"), "source_subpartition", "99"),
     r"source_subpartition 99 at Completed differs"),
    (1, _at(_first("Ingress"), "page", "123456"), r"page 123456 is not the page of address"),
    (1, _drop(_first("Ingress")), r"has no Ingress row"),
    (1, _drop(_first("Completed")), r"has no Completed row"),
    (1, _dup(_first("Ingress")), r"Ingress row repeated"),
    (1, _dup(_first("Completed")), r"Completed row repeated"),
    (1, _swap_first_two, r"Ingress row after Completed|out of order"),
    (1, _at(_first("Completed"), "sim_cycle", "0"), r"earlier than|implies arrival"),
    (1, _at(_first("Ingress"), "cache_hit", "2"), r"cache_hit must be 0 or 1, not 2"),
    (1, _at(_first("Ingress"), "mshr_hit", "-1"), r"mshr_hit must be non-negative"),
    (1, _at(_first("Ingress"), "error", "1"), r"error is set on a Ingress row"),
    (1, _at(_first("Completed"), "error", "3"), r"error must be 0 or 1"),
    (1, _at(_first("Ingress"), "queue_depth", "-1"), r"queue_depth must be non-negative"),
    (1, _at(_first("Ingress"), "request_id", "-3"), r"request_id must be non-negative"),
    (1, _at(_first("Ingress"), "channel", "-1"), r"channel must be non-negative"),
    (1, _at(_first("Ingress"), "sim_cycle", "4611686018427387904"), r"sim_cycle .* larger"),
    (1, _other_page_same_channel, r"one channel per page"),
    (1, lambda rows: rows[:0], r"no rows"),
    (1, _at(_first("Ingress"), "state", "Teleported"), r"state 'Teleported' is not one of"),
    (1, _at(_first("Ingress"), "state", "ingress"), r"state 'ingress' is not one of"),
    (1, _at(_first("Ingress"), "op", "X"), r"op must be R or W, not 'X'"),
    (1, _at(_first("Ingress"), "address", "zz"), r"address 'zz' is not an integer"),
    (1, _at(_first("Ingress"), "latency", "1.5"), r"latency '1.5' is not an integer"),
    (1, _at(_first("Ingress"), "bytes", ""), r"bytes '' is not an integer"),
    (1, lambda rows: [r[:-1] for r in rows], r"line 2: expected 15 fields, found 14"),
    (1, lambda rows: rows[:3] + [rows[3] + ["x"]] + rows[4:], r"line 5: expected 15 fields"),
    (2, _drop(_first("Mapped")), r"lacks its Mapped row"),
    (2, _drop(_first("Return")), r"lacks its Return row"),
    (2, _drop(_first("Buffered", "W")), r"lacks its Buffered row"),
    (2, _dup(_first("MediaOp")), r"MediaOp row repeated"),
    (2, _dup(_first("Queued")), r"Queued row repeated"),
    (2, _at(_first("Mapped"), "sim_cycle", lambda v: str(int(v) - 1_000_000)),
     r"latency .* implies arrival|earlier than|non-negative"),
    (2, _at(_first("Return"), "address", lambda v: hex(int(v, 16) + 64)), r"differs"),
    (2, _at(_first("Mapped"), "error", "1"), r"error is set on a Mapped row"),
    (2, lambda rows: [r for r in rows if not (r[C["request_id"]] == "0"
                                              and r[C["state"]] not in ("Ingress",
                                                                        "Completed"))],
     r"mixes level-1 and level-2"),
]


@pytest.mark.parametrize("level,mutate,match", TRACE_BAD,
                         ids=[f"L{c[0]}-{i}" for i, c in enumerate(TRACE_BAD)])
@pytest.mark.parametrize("cmd", ["validate", "replay"])
def test_bad_trace(tmp_path, monkeypatch, capsys, good_traces, level, mutate, match, cmd):
    header, rows = good_traces[level]
    rows = mutate([list(r) for r in rows])
    text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    argv = (["trace", "validate", "tr.csv"] if cmd == "validate"
            else ["replay", "tr.csv", "--trace", "out.csv", "--stats-json", "s.json"])
    _case(tmp_path, monkeypatch, capsys, argv, {"tr.csv": text}, match)


TRACE_HEADER_BAD = [
    ("", r"empty file; expected the hbf-trace-v1 header"),
    ("sim_cycle,request_id\n", r"missing column\(s\) source_subpartition"),
    ("sim_cycle,request_id,source_subpartition,op,address,page,channel,subarray,state,bytes,"
     "queue_depth,latency,cache_hit,mshr_hit,error,extra\n", r"unexpected column\(s\) extra"),
    ("request_id,sim_cycle,source_subpartition,op,address,page,channel,subarray,state,bytes,"
     "queue_depth,latency,cache_hit,mshr_hit,error\n", r"column 1 is 'request_id'.*reordered"),
    ("tick,op,address,bytes,source\n" + ROW, r"not hbf-trace-v1: missing column"),
]


@pytest.mark.parametrize("text,match", TRACE_HEADER_BAD)
@pytest.mark.parametrize("cmd", [["trace", "validate", "tr.csv"], ["replay", "tr.csv"]])
def test_bad_trace_header(tmp_path, monkeypatch, capsys, text, match, cmd):
    _case(tmp_path, monkeypatch, capsys, cmd, {"tr.csv": text}, match)


def test_bad_trace_bytes(tmp_path, monkeypatch, capsys, good_traces):
    header, rows = good_traces[1]
    text = (header + "\n" + ",".join(rows[0]) + "\n").encode() + b"\xff\xfe\n"
    _case(tmp_path, monkeypatch, capsys, ["trace", "validate", "tr.csv"], {"tr.csv": text},
          r"tr.csv line 3: not UTF-8 text")


@pytest.mark.parametrize("variant", ["crlf", "blank lines", "spaces in header"])
def test_odd_trace_is_accepted(tmp_path, monkeypatch, capsys, good_traces, variant):
    header, rows = good_traces[1]
    body = [",".join(r) for r in rows]
    if variant == "crlf":
        text = "\r\n".join([header] + body) + "\r\n"
    elif variant == "blank lines":
        text = "\n".join([header, ""] + body[:10] + [""] + body[10:]) + "\n\n"
    else:
        text = "\n".join([header.replace(",", ", ")] + body) + "\n"
    for argv in (["trace", "validate", "tr.csv"], ["replay", "tr.csv"]):
        rc, _, err, _, _ = _run(tmp_path, monkeypatch, capsys, argv, {"tr.csv": text})
        assert rc == 0 and err == "", err


# ---------------------------------------------------------------- model configs (--model)
MODEL_BAD = [
    ("[1, 2]", r"model config .* must be a JSON object"),
    ('"qwen"', r"model config .* must be a JSON object"),
    ("{", r"m.json line 1: not valid JSON"),
    ("", r"m.json line 1: not valid JSON"),
    ('{"hidden_size": NaN}', r"not valid JSON: NaN is not a JSON number"),
    ("{}", r"model config .* lacks key"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": "256"'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 0'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": -256'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 2.5'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 1e400'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 1e3'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": true'), r"hidden_size"),
    (MODEL_OK.replace('"num_hidden_layers": 1', '"num_hidden_layers": 100000000000'),
     r"num_hidden_layers"),
    (MODEL_OK.replace('"vocab_size": 1024', '"vocab_size": null'), r"vocab_size"),
    (MODEL_OK.replace('"num_attention_heads": 2', '"num_attention_heads": 0'),
     r"num_attention_heads"),
    (MODEL_OK.replace('"bfloat16"', '"bfloat17"'), r"torch_dtype must be one of .* not 'bfloat17'"),
    (MODEL_OK.replace('"intermediate_size": 512, ', ''), r"lacks key 'intermediate_size'"),
    (MODEL_OK.replace('"head_dim": 128', '"head_dim": []'), r"head_dim"),
]


@pytest.mark.parametrize("text,match", MODEL_BAD, ids=[f"model{i}" for i in range(len(MODEL_BAD))])
def test_bad_model_config(tmp_path, monkeypatch, capsys, text, match):
    _case(tmp_path, monkeypatch, capsys,
          ["run", "--workload", "llm-decode", "--model", "m.json", "--param", "layers=1",
           "--stats-json", "s.json"], {"m.json": text}, match)


def test_bad_model_config_through_param(tmp_path, monkeypatch, capsys):
    _case(tmp_path, monkeypatch, capsys, ["run", "--workload", "llm-decode", "--param",
                                          "model=m.json"], {"m.json": "[1]"},
          r"must be a JSON object")


def test_bad_model_config_bytes(tmp_path, monkeypatch, capsys):
    _case(tmp_path, monkeypatch, capsys, ["run", "--workload", "llm-decode", "--model",
                                          "m.json"], {"m.json": b'{"a": "\xff"}'},
          r"m.json line 1: not UTF-8 text")


def test_small_model_config_runs(tmp_path, monkeypatch, capsys):
    rc, _, err, _, _ = _run(tmp_path, monkeypatch, capsys,
                            ["run", "--workload", "llm-decode", "--model", "m.json"],
                            {"m.json": MODEL_OK})
    assert rc == 0 and err == "", err


# ---------------------------------------------------------------- command-line usage
USAGE_BAD = [
    ([], r"the following arguments are required: cmd"),
    (["frobnicate"], r"invalid choice: 'frobnicate'"),
    (["run", "--frobnicate"], r"unrecognized arguments: --frobnicate"),
    (["run", "extra"], r"unrecognized arguments: extra"),
    (["run", "--requests"], r"--requests: expected one argument"),
    (["run", "--requests", ""], r"empty argument after --requests"),
    (["run", "--requests="], r"empty value in '--requests='"),
    (["run", "--workload", ""], r"empty argument after --workload"),
    (["run", "--stats-json", ""], r"empty argument after --stats-json"),
    (["run", "--trace", ""], r"empty argument after --trace"),
    (["run", "--config", ""], r"empty argument after --config"),
    (["run", "--profile", ""], r"empty argument after --profile"),
    (["run", "--profile", " "], r"empty argument after --profile"),
    (["run", "--model", ""], r"empty argument after --model"),
    (["run", "--param", ""], r"empty argument after --param"),
    ([""], r"empty argument as the first argument"),
    (["trace", "validate", ""], r"empty argument after validate"),
    (["replay", ""], r"empty argument after replay"),
    (["rtl", "emit", "-o", ""], r"empty argument after -o"),
    (["run", "--trace-level", "7"], r"argument --trace-level: invalid choice"),
    (["run", "--trace-level", "x"], r"argument --trace-level: invalid int value"),
    (["run", "--trace-level", "0"], r"argument --trace-level: invalid choice"),
    (["run", "--requests", "a.csv", "--workload", "conservation"], r"not allowed with"),
    (["run", "--model", "qwen3-1.7b"], r"--model and --param need --workload"),
    (["run", "--param", "a=1"], r"--model and --param need --workload"),
    (["config"], r"required: config_cmd"),
    (["config", "edit"], r"invalid choice: 'edit'"),
    (["trace"], r"required: trace_cmd"),
    (["trace", "validate"], r"required: file"),
    (["rtl"], r"required: rtl_cmd"),
    (["rtl", "emit"], r"required: -o"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "3"], r"--sector-bytes must be a power"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "0"], r"--sector-bytes must be a power"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "8192"], r"--sector-bytes must be"),
    (["rtl", "stats", "--sector-bytes", "x"], r"invalid int value"),
    (["rtl", "emit", "-o", "x.v", "--profile", "flashy"], r"profile must be one of"),
    (["replay"], r"required: file"),
    (["study"], r"required"),
    (["cosim", "run", "--sim", "ghdl"], r"--sim must be one of"),
    (["cosim", "run", "--window", "5:1", "--waves"], r"--window must be A:B"),
    (["cosim", "run", "--param", "a=1"], r"--param goes with --workload"),
    (["cosim", "soak", "--requests", "0"], r"--requests must be at least 1|--sim"),
    (["cosim", "run", "--csv", "r.csv", "--requests", "-5"], r"--requests must be at least 1"),
]


@pytest.mark.parametrize("argv,match", USAGE_BAD, ids=[" ".join(a[0]) or "none"
                                                      for a in USAGE_BAD])
def test_bad_usage(tmp_path, monkeypatch, capsys, argv, match):
    _case(tmp_path, monkeypatch, capsys, argv, {}, match)


# ---------------------------------------------------------------- workloads and --param
PARAM_BAD = [
    (["--workload", "nope"], r"--workload must be one of conservation, shared-staging"),
    (["--workload", "shared_staging2"], r"--workload must be one of"),
    (["--workload", "conservation", "--param", "scale=2"],
     r"workload conservation has no parameter 'scale'; its parameters are requests"),
    (["--workload", "conservation", "--param", "bogus=1"], r"no parameter 'bogus'"),
    (["--workload", "conservation", "--param", "noequals"], r"--param must be KEY=VALUE"),
    (["--workload", "conservation", "--param", "=5"], r"--param must be KEY=VALUE"),
    (["--workload", "conservation", "--param", "requests="], r"empty value|KEY=VALUE"),
    (["--workload", "conservation", "--param", "requests=1", "--param", "requests=2"],
     r"--param requests given twice"),
    (["--workload", "conservation", "--param", "requests=0"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=-5"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=1.5"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=many"],
     r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=true"],
     r"requests must be a positive"),
    (["--workload", "conservation", "--param", "nbytes=48"], r"nbytes must be 32, 64 or 128"),
    (["--workload", "conservation", "--param", "page_stride=0"], r"page_stride must be"),
    (["--workload", "shared-staging", "--param", "requests=inf"], r"requests must be"),
    (["--workload", "mshr-grid", "--param", "order=diagonal"], r"order"),
    (["--workload", "placement", "--param", "mapping=spiral"], r"mapping"),
    (["--workload", "llm-decode", "--param", "scale=0"], r"scale must be a positive"),
    (["--workload", "llm-decode", "--param", "request_bytes=48"], r"request_bytes must be"),
    (["--workload", "llm-decode", "--param", "token_id=99999999"], r"token_id must be below"),
    (["--workload", "llm-decode", "--param", "prefix_tokens=50"], r"prefix_tokens"),
    (["--workload", "llm-decode", "--model", "gpt-9"], r"model must be one of qwen3-1.7b"),
    (["--workload", "conservation", "--model", "qwen3-1.7b"],
     r"--model goes with --workload llm-decode"),
    (["--workload", "media-saturation", "--param", "producers=-1"], r"producers"),
    (["--workload", "layout-decode", "--param", "layout=random"],
     r"layout must be one of declaration, execution, not 'random'"),
    (["--workload", "layout-decode", "--param", "scale=0"], r"scale must be a positive"),
    (["--workload", "layout-decode", "--param", "batch=0"], r"batch must be a positive"),
    (["--workload", "layout-decode", "--param", "layers=-1"], r"layers must be a positive"),
    (["--workload", "layout-decode", "--param", "align=48"],
     r"align must be a power of two >= 32, not 48"),
    (["--workload", "layout-decode", "--param", "token_id=99999999"], r"token_id must be below"),
    (["--workload", "layout-decode", "--param", "issue=random"],
     r"issue must be stream or hyperpage, not 'random'"),
    (["--workload", "layout-decode", "--param", "model=deepseek-v3"],
     r"model must use GQA attention .* \(MLA\)"),
]


@pytest.mark.parametrize("args,match", PARAM_BAD, ids=[" ".join(a[0][1:]) for a in PARAM_BAD])
def test_bad_workload_or_param(tmp_path, monkeypatch, capsys, args, match):
    _case(tmp_path, monkeypatch, capsys, ["run", *args, "--stats-json", "s.json"], {}, match)


# ---------------------------------------------------------------- output paths
OUT_BAD = [
    (["run", "--requests", "r.csv", "--trace", "r.csv"], {"r.csv": H + ROW},
     r"--trace 'r.csv' is the same file as the input --requests"),
    (["run", "--requests", "r.csv", "--stats-json", "r.csv"], {"r.csv": H + ROW},
     r"--stats-json 'r.csv' is the same file as the input --requests"),
    (["run", "--requests", "r.csv", "--stats-json", "./sub/../r.csv"],
     {"r.csv": H + ROW, "sub": None}, r"same file as the input --requests"),
    (["run", "--config", "c.toml", "--stats-json", "c.toml"], {"c.toml": "channels = 2\n"},
     r"--stats-json 'c.toml' is the same file as the input --config"),
    (["run", "--config", "c.toml"], {"c.toml": 'trace_file = "c.toml"\n'},
     r"trace_file 'c.toml' is the same file as the input --config"),
    (["run", "--config", "c.toml", "--requests", "r.csv"],
     {"c.toml": 'trace_file = "r.csv"\n', "r.csv": H + ROW},
     r"trace_file 'r.csv' is the same file as the input --requests"),
    (["run", "--config", "c.toml"], {"c.toml": 'trace_file = "d"\n', "d": None},
     r"trace_file 'd' is a directory"),
    (["run", "--trace", "o.csv", "--stats-json", "o.csv"], {},
     r"--stats-json 'o.csv' is the same file as --trace"),
    (["run", "--trace", "o.csv", "--stats-json", "./o.csv"], {},
     r"--stats-json './o.csv' is the same file as --trace"),
    (["replay", "tr.csv", "--trace", "tr.csv"], {"tr.csv": "x\n"},
     r"--trace 'tr.csv' is the same file as the input trace file"),
    (["replay", "tr.csv", "--stats-json", "tr.csv"], {"tr.csv": "x\n"},
     r"same file as the input trace file"),
    (["run", "--stats-json", "d"], {"d": None}, r"--stats-json 'd' is a directory"),
    (["run", "--trace", "d"], {"d": None}, r"--trace 'd' is a directory"),
    (["run", "--trace", "."], {}, r"--trace '.' is a directory"),
    (["run", "--stats-json", "no/such/dir/s.json"], {}, r"directory .* does not exist"),
    (["run", "--trace", "f.txt/t.csv"], {"f.txt": "x"}, r"Not a directory|does not exist"),
    (["run", "--stats-json", "/sys/hbfsim.json"], {}, r"directory '/sys' is not writable"),
    (["run", "--trace", "/proc/hbfsim.csv"], {}, r"directory '/proc' is not writable"),
    (["rtl", "emit", "-o", "d"], {"d": None}, r"-o 'd' is a directory"),
    (["rtl", "emit", "-o", "no/x.v"], {}, r"-o 'no/x.v': directory .* does not exist"),
    (["rtl", "emit", "-o", "c.toml", "--config", "c.toml"], {"c.toml": "channels = 2\n"},
     r"-o 'c.toml' is the same file as the input --config"),
    (["rtl", "stats", "--json", "d"], {"d": None}, r"--json 'd' is a directory"),
    (["run", "--workload", "llm-decode", "--model", "m.json", "--stats-json", "m.json"],
     {"m.json": MODEL_OK}, r"same file as the input --model"),
    (["run", "--workload", "llm-decode", "--param", "model=m.json", "--trace", "m.json"],
     {"m.json": MODEL_OK}, r"same file as the input --param model"),
    (["sweep", "g.toml", "--out", "o", "--workers", "1"], {"g.toml": SWEEP_GRID, "o": None,
                                                         "o/results.csv": None},
     r"results.csv.*(not a regular file|is a directory)"),
    (["sweep", "g.toml", "--out", "o", "--workers", "1"], {"g.toml": SWEEP_GRID, "o": None,
                                                         "o/points.jsonl": None},
     r"points.jsonl.*(not a regular file|is a directory)"),
    (["study", "media-saturation", "--quick", "--out", "o", "--workers", "1"],
     {"o": None, "o/plot.png": None}, r"o/plot.png' is a directory"),
    (["study", "placement", "--quick", "--out", "o", "--workers", "1"],
     {"o": None, "o/summary.json": None}, r"o/summary.json' is a directory"),
    (["study", "page-service", "--quick", "--out", "f.txt"], {"f.txt": "x"},
     r"output folder 'f.txt' is a file"),
]


@pytest.mark.parametrize("argv,files,match", OUT_BAD, ids=[f"out{i}" for i in range(len(OUT_BAD))])
def test_bad_output(tmp_path, monkeypatch, capsys, argv, files, match):
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


def test_output_hard_link_to_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "r.csv").write_text(H + ROW)
    os.link(tmp_path / "r.csv", tmp_path / "alias.csv")
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--trace", "alias.csv"],
          {}, r"same file as the input --requests")


def test_output_symlink_to_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "r.csv").write_text(H + ROW)
    (tmp_path / "link.csv").symlink_to("r.csv")
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--trace", "link.csv"],
          {}, r"same file as the input --requests")


def test_users_partial_file_survives(tmp_path, monkeypatch, capsys):
    rc, _, err, before, after = _run(tmp_path, monkeypatch, capsys,
                                     ["run", "--trace", "t.csv"], {"t.csv.partial": "mine"})
    assert rc == 0 and (tmp_path / "t.csv.partial").read_text() == "mine"
    assert sorted(after) == ["t.csv", "t.csv.partial"]


@pytest.mark.parametrize("argv", [
    ["run", "--stats-json", "/dev/null"],
    ["run", "--trace", "/dev/null", "--stats-json", "/dev/null"],
    ["replay", "t.csv", "--trace", "/dev/null"],
])
def test_dev_null_outputs(tmp_path, monkeypatch, capsys, argv):
    if "replay" in argv:
        assert main(["run", "--trace", str(tmp_path / "t.csv")]) == 0
        capsys.readouterr()
    rc, _, err, before, after = _run(tmp_path, monkeypatch, capsys, argv, {})
    assert rc == 0 and err == "" and before == after
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


# ---------------------------------------------------------------- configs that are valid
CONFIG_ODD_BUT_VALID = [
    "subarrays_per_channel = 5\n",            # any plane count: the capacity follows
    "subarrays_per_channel = 96\nplanes_per_die = 96\nmegaplane_planes = 32\n",
    "profile = 'flashaccel'\nsubarrays_per_channel = 48\nplanes_per_die = 48\n"
    "megaplane_planes = 16\n",
    "",
    "# only a comment\n",
    "channels = 4 # trailing comment\r\n",
    "\ufeffchannels = 2\n",
    "hbf_num_channels = 4\nhbf_tR = 12750\n",
    "hbf_mshr_enabled = 0\n",
    "hbf_channel_map = 1\n",
    "channels = 16\nscheduler = 'partition-2r2w'\n",
    "t_read_us = 1e-2\n",
    "profile = 'ocp-grade3'\n",
]


@pytest.mark.parametrize("text", CONFIG_ODD_BUT_VALID)
def test_odd_config_is_accepted(tmp_path, monkeypatch, capsys, text):
    rc, out, err, _, _ = _run(tmp_path, monkeypatch, capsys,
                              ["config", "show", "--config", "c.toml"], {"c.toml": text})
    assert rc == 0 and err == "" and "channels = " in out


# ---------------------------------------------------------------- real processes
def test_broken_pipe_is_quiet(tmp_path):
    p = subprocess.run(f"{sys.executable} -m hbfsim.cli run --list-workloads | head -1",
                       shell=True, capture_output=True, text=True, cwd=tmp_path)
    assert p.stdout.strip() and p.stderr == "", p.stderr


def test_corpus_is_big_enough():
    n = (len(CONFIG_BAD) + len(CONFIG_BAD_BYTES) + len(CSV_BAD) + len(CSV_BAD_BYTES)
         + 2 * len(TRACE_BAD) + 2 * len(TRACE_HEADER_BAD) + len(MODEL_BAD) + len(USAGE_BAD)
         + len(PARAM_BAD) + len(OUT_BAD) + len(CSV_ODD_BUT_VALID) + len(CONFIG_ODD_BUT_VALID))
    assert n >= 250, n


def test_cosim_wave_file_refused_before_the_build(tmp_path, monkeypatch, capsys):
    from hbfsim.cosim import runner

    if runner.skip_reason("verilator"):
        pytest.skip(runner.skip_reason("verilator"))
    monkeypatch.setattr(runner, "WAVES_DIR", tmp_path / "waves")
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("built despite the refusal"))
    _case(tmp_path, monkeypatch, capsys, ["cosim", "run", "--scenario", "coverage", "--waves"],
          {"waves": None, "waves/coverage.vcd": None}, r"waves '.*coverage.vcd' is a directory")
