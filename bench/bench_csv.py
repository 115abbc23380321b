"""Loading a big request CSV: seconds and peak memory, beside baselines of the same run.

    python bench/bench_csv.py [--lines N] [--row-lines M] [--run run] [--run run-trace1]

Writes an N-line request CSV (default 10,000,000; mixed hex/decimal addresses, reads and
writes) to a temporary folder, then measures in fresh processes, so each peak RSS is its own:

* ``raw read``: reading the file's bytes and counting its lines (numpy): the floor;
* ``hbfsim load``: ``load_requests_csv`` (parse, check, order by tick), the command's path;
* ``row reader``: the exact csv-module reader on the first M lines (default 1,000,000),
  scaled to N lines (it is what the command used before the columnar reader);
* with ``--run run --run run-trace1``: ``hbfsim run --requests`` on the file end to end on
  the default engine, statistics only and with a level-1 trace (issue 24).

Prints seconds, peak RSS and each figure as a ratio to the raw read. The aim (issue 11):
10 million lines in at most 20 s and 1.5 GB.
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
from pathlib import Path
kind, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if kind == "raw":
    import numpy as np
    data = np.fromfile(path, np.uint8)
    n = int(np.count_nonzero(data == 10))
elif kind.startswith("run"):
    # the command end to end on the default engine: read, simulate, report (and trace)
    from hbfsim.cli import main
    args = ["run", "--requests", path, "--no-progress", "--stats-json", path + ".json"]
    if kind == "run-trace1":
        args += ["--trace", path + ".trace.csv", "--trace-level", "1"]
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(args)
    assert not rc, rc
    n = json.load(open(path + ".json"))["requests"]
else:
    from hbfsim.config import load_config
    cfg = load_config()
    if kind == "load":
        from hbfsim.model.requests import load_requests_csv
        n = len(load_requests_csv(path, cfg))
    else:
        from hbfsim.model.mapping import Mapper
        from hbfsim.model.requests import _read_rows
        n = len(_read_rows(Path(path), Path(path).read_text(), Mapper(cfg)))
s = time.perf_counter() - t0
# VmHWM: this process image's peak (ru_maxrss would include the parent's before exec)
rss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status")
           if l.startswith("VmHWM"))
print(json.dumps({"seconds": s, "rss": rss, "n": n}))
"""


def write_csv(path: Path, lines: int, seed: int = 1) -> None:
    """An N-line request CSV, written in blocks (sorted ticks, 30% writes, 32..4096 B)."""
    rng = np.random.default_rng(seed)
    base = 256 << 30
    with open(path, "w") as fh:
        fh.write("tick,op,address,bytes,source\n")
        block = 1_000_000
        for start in range(0, lines, block):
            n = min(block, lines - start)
            tick = start + np.arange(n)
            size = rng.choice(np.array([32, 64, 128, 4096]), n)
            page = rng.integers(0, 1 << 26, n)
            off = (rng.integers(0, 4096, n) // size) * size
            addr = base + page * 4096 + off
            op = np.where(rng.random(n) < 0.3, "W", "R")
            src = rng.integers(0, 8, n)
            hexa = rng.random(n) < 0.5
            rows = [f"{t},{o},{a:#x},{b},{s}" if h else f"{t},{o},{a},{b},{s}"
                    for t, o, a, b, s, h in zip(tick.tolist(), op.tolist(), addr.tolist(),
                                                size.tolist(), src.tolist(), hexa.tolist())]
            fh.write("\n".join(rows) + "\n")


def measure(kind: str, path: Path) -> dict:
    run = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)],
                         capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"bench_csv: {kind} failed (exit {run.returncode}):\n"
                         f"{run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--row-lines", type=int, default=1_000_000)
    ap.add_argument("--run", action="append", choices=("run", "run-trace1"), default=[],
                    help="also time `hbfsim run --requests` on the file end to end (run: "
                         "statistics only; run-trace1: with a level-1 trace); repeatable")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        big, small = Path(d, "big.csv"), Path(d, "small.csv")
        print(f"writing {a.lines:,} lines ...", flush=True)
        write_csv(big, a.lines)
        write_csv(small, min(a.row_lines, a.lines))
        mb = big.stat().st_size / 1e6
        raw = measure("raw", big)
        load = measure("load", big)
        rows = measure("rows", small)
        runs = {k: measure(k, big) for k in a.run} if a.run else {}
        scale = a.lines / rows["n"]
        rows_s = rows["seconds"] * scale
        print(f"request CSV: {a.lines:,} lines, {mb:,.0f} MB")
        print(f"  {'':<12} {'seconds':>9} {'peak RSS':>10} {'time / raw read':>16}")
        print(f"  {'raw read':<12} {raw['seconds']:>9.2f} {raw['rss'] / 1e9:>8.2f} GB "
              f"{1.0:>16.1f}")
        print(f"  {'hbfsim load':<12} {load['seconds']:>9.2f} {load['rss'] / 1e9:>8.2f} GB "
              f"{load['seconds'] / raw['seconds']:>16.1f}")
        print(f"  {'row reader':<12} {rows_s:>9.2f} {'':>11} {rows_s / raw['seconds']:>16.1f}"
              f"   (measured on {rows['n']:,} lines: {rows['seconds']:.2f} s, "
              f"{rows['rss'] / 1e9:.2f} GB; scaled x{scale:g})")
        for k, r in runs.items():
            label = {"run": "run", "run-trace1": "run, trace 1"}[k]
            print(f"  {label:<12} {r['seconds']:>9.2f} {r['rss'] / 1e9:>8.2f} GB "
                  f"{r['seconds'] / raw['seconds']:>16.1f}   (hbfsim run --requests, "
                  f"{r['n']:,} requests, the default engine)")
        aim = load["seconds"] <= 20 and load["rss"] <= 1.5e9
        print(f"  aim (<= 20 s, <= 1.5 GB for 10 M lines): {'met' if aim else 'NOT met'}"
              f"{'' if a.lines == 10_000_000 else ' (not a 10 M-line run)'}")


if __name__ == "__main__":
    main()
