"""A long differential run of the compiled controller against the golden model.

    python bench/diff_engine_controller.py [--cases N] [--port-races N] [--closed-loops N]
                                           [--seed S]

Draws random cases from tests/engine/controller_cases.py (``controller_cases``: every shape
and mode; ``port_race_cases``: the channel shape's port races; ``closed_loop_cases``: GPU
programs closed loop), runs each through the golden model and the compiled engine and
compares every request's event ticks and flags, the response order and every counter
(``check_controller``, ``check_closed_loop``: the closed loop with and without skipping
idle ticks, and the GPU's result figures). Prints the configurations and
requests compared and stops at the first difference, printing the case.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.engine.controller_cases import (check_closed_loop,  # noqa: E402
                                           check_controller, closed_loop_cases,
                                           controller_cases, port_race_cases)


def _closed_loop(case):
    """check_closed_loop; the case's requests as a stream-like tuple for the counts."""
    from hbfsim.engine import run_compiled_closed_loop
    from hbfsim.model.gpu import GpuProgram

    check_closed_loop(case)
    cfg, gpu, make = case
    n = len(run_compiled_closed_loop(cfg, GpuProgram(make), gpu)["t_done"])
    return cfg, (range(n),)


def run(strategy, n: int, seed: int, check=None) -> tuple[int, int, int]:
    """Compare ``n`` cases of ``strategy``; return (cases, requests, channel-shape cases)."""
    seen = [0, 0, 0]

    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy())
    def prop(case):
        if check is None:
            cfg, stream = case
            check_controller(case)
        else:
            cfg, stream = check(case)
        seen[0] += 1
        seen[1] += len(stream[0])
        seen[2] += cfg.host_ports == "channel"

    import hypothesis
    hypothesis.seed(seed)(prop)()
    return tuple(seen)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--port-races", type=int, default=500)
    ap.add_argument("--closed-loops", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    for name, strategy, n, check in (
            ("every shape and mode", controller_cases, a.cases, None),
            ("channel-shape port races", port_race_cases, a.port_races, None),
            ("closed loops (GPU programs)", closed_loop_cases, a.closed_loops, _closed_loop)):
        cases, reqs, chan = run(strategy, n, a.seed, check)
        print(f"{name}: {cases:,} configurations and streams, {reqs:,} requests "
              f"({chan:,} cases in the channel shape): equal")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
