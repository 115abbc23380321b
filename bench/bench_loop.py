"""Benchmark the golden model's run loop on three request streams.

    python bench/bench_loop.py [--workload NAME ...] [--loop NAME ...] [--repeat N]
                               [--profile LOOP]

Every loop replays the same open-loop request stream (fixed arrivals), so the figures
compare the configurations and nothing else:

* ``read``: bench/bench_model.py's read stream (32 B sector reads, 8 per page over distinct
  pages, one arrival per tick; the media saturate), on ocp-grade3 (the default workload of
  docs/benchmarks.md).
* ``media``: the ``media_saturation`` workload (1,024 producers, 8 dependent pages each),
  run closed loop once in the stack shape and replayed from its accept ticks.
* ``decode``: ``llm_decode`` of qwen3-1.7b scaled by 8, one layer, replayed likewise.

Loops (one controller, docs/timing-contract.md; the loop is
:func:`hbfsim.model.loop.run_cycles`): ``stack`` (the baseline), ``channel`` (the default
shape), ``stack-page`` and ``channel-page`` (``multiplane = "page"``). Each figure is the
median of ``--repeat`` runs and is printed beside its ratio to ``stack`` on the same stream,
measured in the same process (the machines are shared and noisy: quote the ratios).
``steps`` is the number of evaluated cycles. The retired loops' figures (contract 1, the
standard pipeline, the hand-fused loops) are in docs/benchmarks.md and docs/history.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time

from hbfsim.config import load_config
from hbfsim.model.gpu import open_loop_requests, run_closed_loop
from hbfsim.model.system import HbfSystem
from hbfsim.model.workloads import get_workload

PROFILE = dict(profile="ocp-grade3", admission=4096, mshr_entries=1024, queue_depth=64)

#: loop name -> config overrides
LOOPS = {
    "stack": {"host_ports": "stack"},
    "channel": {"host_ports": "channel"},
    "stack-page": {"host_ports": "stack", "multiplane": "page"},
    "channel-page": {"host_ports": "channel", "multiplane": "page"},
}
DEFAULT_LOOPS = ("stack", "channel")


def read_stream(n: int):
    """bench/bench_model.py's read stream as (op, addr, nbytes, source, arrival) rows."""
    from bench_model import read_stream as build

    return [(r.op, r.addr, r.nbytes, r.source, r.arrival)
            for r in build(load_config(**PROFILE), n)]


def replayed(name: str, **params):
    """Run workload ``name`` closed loop in the stack shape and return its ingress rows."""
    cfg = load_config(**PROFILE, host_ports="stack")
    res = run_closed_loop(cfg, get_workload(name, cfg, **params), record=True)
    return [(r.op, r.addr, r.nbytes, r.source, r.arrival) for r in open_loop_requests(res)]


def run(loop: str, rows, profile: bool = False):
    """Replay ``rows`` on a fresh system of ``loop``; return (host s, steps, end tick,
    completions, profiler)."""
    from hbfsim.model.controller import Request

    system = HbfSystem(load_config(**PROFILE, **LOOPS[loop]), keep=False)
    for i, (op, addr, nbytes, source, arrival) in enumerate(rows):
        data = b"\x5a" * nbytes if op == "W" else None
        system.submit(Request(i, op, addr, nbytes, source, arrival, data))
    system.close_input()
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    end = system.run()
    if prof:
        prof.disable()
    return time.perf_counter() - t0, system.steps, end, system.n_done, prof


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", nargs="+", choices=("read", "media", "decode"),
                    default=["read", "media", "decode"])
    ap.add_argument("--loop", nargs="+", choices=tuple(LOOPS), default=list(DEFAULT_LOOPS))
    ap.add_argument("--requests", type=int, default=100_000, help="read stream length")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--profile", choices=tuple(LOOPS),
                    help="print a cProfile table of one run of this loop per workload")
    a = ap.parse_args(argv)
    loops = ["stack"] + [x for x in a.loop if x != "stack"]
    print(f"run-loop benchmark: ocp-grade3, median of {a.repeat} runs; ratio = host time / "
          f"stack host time on the same stream (lower is faster)")
    print(f"{'stream':<8} {'loop':<16} {'requests':>9} {'host s':>8} {'req/s':>10} "
          f"{'ratio':>7} {'steps':>9} {'end tick':>10}")
    for wl in a.workload:
        if wl == "read":
            rows = read_stream(a.requests)
        elif wl == "media":
            rows = replayed("media_saturation", producers=1024, pages_per_producer=8)
        else:
            rows = replayed("llm_decode", model="qwen3-1.7b", scale=8, layers=1)
        base = None
        for loop in loops:
            times = []
            for _ in range(a.repeat):
                host, steps, end, done, _ = run(loop, rows)
                assert done == len(rows), (loop, done, len(rows))
                times.append(host)
            host = statistics.median(times)
            if base is None:
                base = host
            print(f"{wl:<8} {loop:<16} {len(rows):>9,} {host:>8.3f} {len(rows) / host:>10,.0f} "
                  f"{host / base:>7.2f} {steps:>9,} {end:>10,}", flush=True)
        if a.profile:
            *_, prof = run(a.profile, rows, profile=True)
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
            print("\n".join(buf.getvalue().splitlines()[:34]))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    sys.exit(main())
