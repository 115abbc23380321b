"""A long differential run of the compiled controller against the golden model.

    python bench/diff_engine_controller.py [--cases N] [--port-races N] [--seed S]

Draws random cases from tests/engine/controller_cases.py (``controller_cases``: every shape
and mode; ``port_race_cases``: the channel shape's port races), runs each through the golden
model and the compiled engine and compares every request's event ticks and flags, the
response order and every counter (``check_controller``). Prints the configurations and
requests compared and stops at the first difference, printing the case.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.engine.controller_cases import (check_controller, controller_cases,  # noqa: E402
                                           port_race_cases)


def run(strategy, n: int, seed: int) -> tuple[int, int, int]:
    """Compare ``n`` cases of ``strategy``; return (cases, requests, channel-shape cases)."""
    seen = [0, 0, 0]

    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy())
    def prop(case):
        cfg, stream = case
        check_controller(case)
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
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    for name, strategy, n in (("every shape and mode", controller_cases, a.cases),
                              ("channel-shape port races", port_race_cases, a.port_races)):
        cases, reqs, chan = run(strategy, n, a.seed)
        print(f"{name}: {cases:,} configurations and streams, {reqs:,} requests "
              f"({chan:,} cases in the channel shape): equal")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
