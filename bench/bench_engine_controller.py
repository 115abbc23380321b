"""Benchmark the compiled controller against the golden model, in one run.

    python bench/bench_engine_controller.py [--requests N] [--profile NAME] [--repeat R]

The streams of ``make bench`` (bench/bench_model.py: ``read``, 32 B sector reads, 8 per
page over distinct pages, one arrival per tick, so the media saturate and admission backs
up; ``mixed``, 50/50 sector reads and whole-page writes of 128 x 32 B stores) on the one
timing contract, at the default configuration (or ``--profile``, e.g. ``ocp-grade3``,
bench_model.py's). Each stream runs through:

* the golden model (:class:`hbfsim.model.system.HbfSystem`, stepped by the reference loop
  of the one contract; ``run()`` timed, as bench_model.py times it);
* the compiled engine (:func:`hbfsim.engine.run_compiled`, timed whole: the stream's arrays
  in, the submission and mapping in C++, the run, every per-request array out);
* the bare-Python baseline of bench_model.py: one page-keyed dict update per request, the
  least any per-request model must do.

A third stream, ``shuffled``, is ``read`` with its pages in a random order: the same work
per request, without the regular addresses that the CPU's branch predictor follows (the
compiled engine's best case is ``read``; docs/engine.md, ninth round).

Last, the fixed cost of one ``run_compiled`` call (the configuration read, the system built,
the outputs allocated, the check that the build is current): a one-request stream, best
and median of ``--calls`` calls, also as the number of read-stream requests that take as long.

The compiled run's response order, response ticks and end tick are checked equal to the
golden model's before any figure is printed. Figures are the best of ``--repeat`` runs
(the golden model runs once: it is the slow one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine_components import machine  # noqa: E402
from bench_model import baseline, mixed_stream, read_stream, shuffled_stream  # noqa: E402

from hbfsim.config import load_config  # noqa: E402
from hbfsim.engine import compiled_available, engine_status, run_compiled  # noqa: E402
from hbfsim.model.system import HbfSystem  # noqa: E402


def contract_config(**kw):
    """A configuration of the one timing contract (the only controller)."""
    return load_config(**kw)


def golden(cfg, reqs):
    system = HbfSystem(cfg)
    for r in reqs:
        system.submit(r)
    system.close_input()
    t0 = time.perf_counter()
    end = system.run()
    host = time.perf_counter() - t0
    order = np.array([r.id for r in system.completed], np.int64)
    done = np.array([r.t_done for r in system.completed], np.int64)
    return host, order, done, end


def call_cost(cfg, calls):
    """Best and median host seconds of run_compiled on a one-request stream."""
    one = (np.zeros(1, np.int64), np.zeros(1, np.int8), np.full(1, cfg.base_address, np.int64),
           np.full(1, 32, np.int64))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        run_compiled(cfg, *one)
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--profile", default=None, help="configuration profile (default: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--calls", type=int, default=300,
                    help="one-request runs timed for the cost of a call (0: none)")
    a = ap.parse_args(argv)
    if not compiled_available():
        print(engine_status())
        return 2
    kw = {"profile": a.profile} if a.profile else {}
    cfg = contract_config(**kw)
    print(f"compiled controller benchmark: {a.profile or 'default'} configuration "
          f"({cfg.host_ports} shape, {cfg.channels} channels), the one timing contract, "
          f"{a.requests:,} requests per stream")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'stream':<8} {'golden req/s':>13} {'compiled req/s':>15} {'baseline req/s':>15} "
          f"{'compiled/golden':>16} {'compiled/baseline':>18}")
    read_per_request = None
    for name, build in (("read", read_stream), ("mixed", mixed_stream),
                        ("shuffled", shuffled_stream)):
        reqs = build(cfg, a.requests)
        arrival = np.array([r.arrival for r in reqs], np.int64)
        op = np.array([1 if r.op == "W" else 0 for r in reqs], np.int8)
        addr = np.array([r.addr for r in reqs], np.int64)
        nbytes = np.array([r.nbytes for r in reqs], np.int64)
        g_host, g_order, g_done, g_end = golden(cfg, reqs)
        c_host = None
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            out = run_compiled(cfg, arrival, op, addr, nbytes)
            h = time.perf_counter() - t0
            c_host = h if c_host is None else min(c_host, h)
        order = out["order"]
        assert np.array_equal(order, g_order), f"{name}: the response orders differ"
        assert np.array_equal(out["t_done"][order], g_done), f"{name}: response ticks differ"
        assert out["counters"]["end_tick"] == g_end, f"{name}: the end ticks differ"
        b_host = min(baseline(reqs) for _ in range(a.repeat))
        n = a.requests
        if name == "read":
            read_per_request = c_host / n
        print(f"{name:<8} {n / g_host:>13,.0f} {n / c_host:>15,.0f} {n / b_host:>15,.0f} "
              f"{g_host / c_host:>15.1f}x {b_host / c_host:>17.3f}x")
    if a.calls > 0:
        best, median = call_cost(cfg, a.calls)
        print(f"one-request run: {best * 1e6:.1f} us per call, best of {a.calls} "
              f"({median * 1e6:.1f} us median; the time of {best / read_per_request:,.0f} "
              f"read-stream requests)")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
