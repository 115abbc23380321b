"""The columnar request-CSV reader agrees with the row-by-row reader, block edges included."""

import random

import pytest

from hbfsim.config import load_config
from hbfsim.model import request_columns
from hbfsim.model.requests import InputError, _read_rows, load_requests_csv
from hbfsim.model.mapping import Mapper


def _plain_file(rng, n):
    cfg = load_config()
    lines = ["tick,op,address,bytes,source"]
    for _ in range(n):
        size = rng.choice([1, 32, 128, 4096])
        addr = cfg.base_address + rng.randrange(1 << 20) * 4096 + rng.randrange(4097 - size)
        a = hex(addr) if rng.random() < 0.5 else str(addr)
        sp = " " * rng.randrange(3)
        lines.append(f"{sp}{rng.randrange(1 << 40)},{sp}{rng.choice('RWrw')}{sp},{a},{size},"
                     f"{rng.randrange(1 << 32)}{sp}")
        if rng.random() < 0.05:
            lines.append(rng.choice(["", " ", ",,,,", " , ,"]))
    end = rng.choice(["\n", "\r\n"])
    return end.join(lines) + rng.choice([end, ""])


@pytest.mark.parametrize("seed", range(6))
def test_columnar_equals_row_reader(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(request_columns, "_BLOCK", rng.choice([64, 1000, 1 << 16]))
    text = _plain_file(rng, 800)
    f = tmp_path / "r.csv"
    f.write_text(text, newline="")
    cfg = load_config()
    fast = load_requests_csv(f, cfg)
    slow = _read_rows(f, text, Mapper(cfg))
    for col in ("tick", "write", "addr", "nbytes", "source"):
        assert (getattr(fast.cols, col) == getattr(slow, col)).all(), col
    ticks = [r.arrival for r in fast]
    assert ticks == sorted(ticks) and len(ticks) == len(slow)
    assert fast[0].arrival == ticks[0] and len(fast[:5]) == 5


def test_bad_line_in_a_later_block_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(request_columns, "_BLOCK", 100)
    rows = ["0,R,0x4000000000,32,0"] * 50 + ["0,R,0x4000000000,32,zz"]
    f = tmp_path / "r.csv"
    f.write_text("tick,op,address,bytes,source\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError, match="line 52: source 'zz'"):
        load_requests_csv(f, load_config())
