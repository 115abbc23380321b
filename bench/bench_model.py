"""Benchmark the golden model: simulated sector requests per host second.

    python bench/bench_model.py [--requests N] [--profile]

Two streams on the ocp-grade3 profile (16 channels x 32 subarrays, tR 15 us):

* ``read``  : 32 B sector reads, 8 per page over distinct pages, one arrival per tick; the
  media saturates (512 subarrays need a new page every 25 ticks) and admission backs up.
* ``mixed`` : 50/50 sector reads and writes; reads as above, writes cover whole pages with
  128 x 32 B stores.

Each figure is also given as a ratio to a baseline measured in the same run: a bare Python
loop that does one page-keyed dict update per request (the least any per-request model
must do), so machine noise cancels out of the ratio. ``--profile`` prints where the time
goes (cProfile, top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import sys
import time

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.controller import Request
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem


def read_stream(cfg, n):
    B = cfg.base_address
    return [Request(i, "R", B + (i // 8) * PAGE_BYTES + 32 * (i % 8), 32, i % 8, i)
            for i in range(n)]


def shuffled_stream(cfg, n, seed=1):
    """read_stream with its pages in a random order (seeded): the same eight sector reads per
    page, one arrival per tick, but which channel and subarray a page falls on is no longer
    regular (docs/engine.md, ninth round: the compiled engine's branches follow the regular
    stream, not this one)."""
    B = cfg.base_address
    pages = list(range((n + 7) // 8))
    random.Random(seed).shuffle(pages)
    return [Request(i, "R", B + pages[i // 8] * PAGE_BYTES + 32 * (i % 8), 32, i % 8, i)
            for i in range(n)]


def mixed_stream(cfg, n):
    B = cfg.base_address
    out = []
    half = 1 << 20  # write pages live above the read pages
    for i in range(n):
        k = i // 2
        if i % 2 == 0:
            out.append(Request(i, "R", B + (k // 8) * PAGE_BYTES + 32 * (k % 8), 32, 0, i))
        else:
            page = half + k // 128
            out.append(Request(i, "W", B + page * PAGE_BYTES + 32 * (k % 128), 32, 1, i,
                               b"\x5a" * 32))
    return out


def baseline(reqs):
    t0 = time.perf_counter()
    d = {}
    for r in reqs:
        p = r.addr >> 12
        d[p] = d.get(p, 0) + r.nbytes
    return time.perf_counter() - t0


def run(cfg, reqs, profile=False):
    system = HbfSystem(cfg, keep=False)
    for r in reqs:
        system.submit(r)
    system.close_input()
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    system.run()
    if prof:
        prof.disable()
    host = time.perf_counter() - t0
    return system, host, prof


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--stream", choices=("read", "mixed", "both"), default="both")
    a = ap.parse_args(argv)
    # the one controller at the default shape (a port per channel); the retired contract 1
    # and fused loops' figures are in docs/benchmarks.md
    cfg = load_config(profile="ocp-grade3", admission=4096, mshr_entries=1024,
                      queue_depth=64)
    print(f"golden-model benchmark: ocp-grade3, {a.requests:,} sector requests per stream, "
          f"{cfg.host_ports} ports, the reference loop")
    print(f"{'stream':<8} {'host s':>8} {'req/s':>12} {'baseline req/s':>15} {'ratio':>7} "
          f"{'sim us':>10} {'steps':>10} {'array GB/s':>11} {'util':>7}")
    for name, build in (("read", read_stream), ("mixed", mixed_stream)):
        if a.stream not in (name, "both"):
            continue
        reqs = build(cfg, a.requests)
        base = baseline(reqs)
        system, host, prof = run(cfg, reqs, a.profile)
        s = collect_stats(system)
        assert s["completions"] == a.requests
        rps, brps = a.requests / host, a.requests / base
        print(f"{name:<8} {host:>8.2f} {rps:>12,.0f} {brps:>15,.0f} {rps / brps:>7.4f} "
              f"{s['window_us']:>10,.1f} {system.steps:>10,} {s['array_bandwidth_gbs']:>11.3f} "
              f"{s['media_utilization']:>7.4f}")
        if prof:
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
            print("\n".join(buf.getvalue().splitlines()[:32]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
