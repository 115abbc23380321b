"""What the RTL's assertions cost in the co-simulation (issue 12 item 5).

    .venv/bin/python bench/bench_cosim_checks.py [--scenarios mix-backpressure,burst,bench-burst]
                                                 [--repeat 2]

Each scenario runs on two Verilator builds of the same configuration, in the same process
and on the same machine: checks compiled in (``--assert``, the default of every
co-simulation) and checks off (``hbfsim cosim run --no-checks``). Printed per scenario: the
build time of each (a cache hit reads ~0 s; delete build/cosim for clean figures), the
simulated cycles per second of the testbench loop (best of ``--repeat``), and the ratio
checks-on / checks-off. ``bench-burst`` is bench/bench_cosim.py's 1-channel burst (816 k
cycles, mostly idle NAND time: the C++ model's own speed dominates); the named scenarios
of hbfsim.cosim.scenarios are short and busy (Python's per-event work dominates).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbfsim.cosim import runner, scenarios  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cosim import burst  # noqa: E402


def _scenario(name: str):
    return burst(1, 64) if name == "bench-burst" else scenarios.make(name, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="mix-backpressure,burst,bench-burst")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)
    reason = runner.skip_reason("verilator")
    if reason:
        print(f"bench_cosim_checks: {reason}", file=sys.stderr)
        return 2
    print(f"bench_cosim_checks: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; best of {a.repeat}")
    print("| scenario | cycles | build s off / on | cycles/s off | cycles/s on | on / off |")
    print("|---|---|---|---|---|---|")
    for name in a.scenarios.split(","):
        best, build = {}, {}
        for checks in (False, True):
            for _ in range(a.repeat):
                (r,) = runner.run([_scenario(name)], checks=checks)
                if not r["passed"]:
                    print(f"{name} (checks {checks}): {r['diff']}", file=sys.stderr)
                    return 1
                build.setdefault(checks, r["build_s"])
                best[checks] = max(best.get(checks, 0), r["cycles_per_s"])
        print(f"| {name} | {r['cycles']:,} | {build[False]:.0f} / {build[True]:.0f} | "
              f"{best[False]:,.0f} | {best[True]:,.0f} | {best[True] / best[False]:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
