"""Validating a big hbf-trace-v1 file: seconds and peak memory, beside baselines of the run.

    python bench/bench_trace.py [--requests N] [--row-requests M]

Writes a level-1 trace of N requests (2N rows; default 5,000,000 requests = 10 M rows) that
obeys every rule of the format, then measures in fresh processes (each peak RSS its own):

* ``raw read``: reading the file's bytes and counting its lines (numpy): the floor;
* ``hbfsim validate``: ``load_trace`` (parse, check every rule, columns kept), what
  ``hbfsim trace validate`` and ``hbfsim replay`` run;
* ``row reader``: ``read_trace`` + ``validate_trace`` on M requests (default 250,000),
  scaled to N (what both commands ran before the columnar reader).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_CHILD = r"""
import json, sys, time
kind, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if kind == "raw":
    import numpy as np
    n = int(np.count_nonzero(np.fromfile(path, np.uint8) == 10))
else:
    from hbfsim.config import load_config
    cfg = load_config()
    if kind == "load":
        from hbfsim.model.trace_columns import TraceColumns, load_trace
        s, cols = load_trace(path, cfg)
        assert isinstance(cols, TraceColumns)
    else:
        from hbfsim.model.trace import read_trace, validate_trace
        s = validate_trace(read_trace(path), cfg)
    n = s["rows"]
s = time.perf_counter() - t0
rss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status")
           if l.startswith("VmHWM"))
print(json.dumps({"seconds": s, "rss": rss, "n": n}))
"""

HEADER = ("sim_cycle,request_id,source_subpartition,op,address,page,channel,subarray,state,"
          "bytes,queue_depth,latency,cache_hit,mshr_hit,error\n")


def write_trace(path: Path, requests: int, seed: int = 1) -> None:
    """A valid level-1 trace: request i arrives at tick i, completes 12,750+ ticks later."""
    rng = np.random.default_rng(seed)
    base = 256 << 30
    with open(path, "w") as fh:
        fh.write(HEADER)
        block = 500_000
        for start in range(0, requests, block):
            n = min(block, requests - start)
            rid = start + np.arange(n)
            page = rng.integers(0, 1 << 20, n)
            addr = base + page * 4096 + 32 * rng.integers(0, 128, n)
            op = np.where(rng.random(n) < 0.3, "W", "R")
            done = rid + 12_750 + rng.integers(0, 1000, n)
            out = []
            for i, p, a, o, d in zip(rid.tolist(), page.tolist(), addr.tolist(), op.tolist(),
                                     done.tolist()):
                pre = f"{i},{i % 8},{o},{a:#x},{p},{p % 2},{(p // 2) % 32},"
                out.append(f"{i},{pre}Ingress,32,1,0,0,0,0\n"
                           f"{d},{pre}Completed,32,0,{d - i},0,0,0\n")
            fh.write("".join(out))


def measure(kind: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5_000_000)
    ap.add_argument("--row-requests", type=int, default=250_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        big, small = Path(d, "big.csv"), Path(d, "small.csv")
        print(f"writing {2 * a.requests:,} rows ...", flush=True)
        write_trace(big, a.requests)
        write_trace(small, min(a.row_requests, a.requests))
        raw, load, rows = measure("raw", big), measure("load", big), measure("rows", small)
        scale = (2 * a.requests) / rows["n"]
        rows_s = rows["seconds"] * scale
        print(f"hbf-trace-v1: {2 * a.requests:,} rows, {big.stat().st_size / 1e6:,.0f} MB")
        print(f"  {'':<16} {'seconds':>9} {'peak RSS':>10} {'time / raw read':>16}")
        print(f"  {'raw read':<16} {raw['seconds']:>9.2f} {raw['rss'] / 1e9:>8.2f} GB "
              f"{1.0:>16.1f}")
        print(f"  {'hbfsim validate':<16} {load['seconds']:>9.2f} {load['rss'] / 1e9:>8.2f} GB "
              f"{load['seconds'] / raw['seconds']:>16.1f}")
        print(f"  {'row reader':<16} {rows_s:>9.2f} {'':>11} {rows_s / raw['seconds']:>16.1f}"
              f"   (measured on {rows['n']:,} rows: {rows['seconds']:.2f} s, "
              f"{rows['rss'] / 1e9:.2f} GB; scaled x{scale:g})")


if __name__ == "__main__":
    main()
