"""Planes busy and span of one MoE decode step under the two FlashAccel layouts.

    python bench/bench_layout.py            # Qwen3-235B-A22B / 8, the scaled geometry (~2 s)
    python bench/bench_layout.py --full     # full size on 6 flashaccel stacks (minutes)
    python bench/bench_layout.py --full --scale 4 --channel-bw 10000 --issue hyperpage
    python bench/bench_layout.py --replicate   # with straggler replication (model/replication.py)
    python bench/bench_layout.py --multiplane megaplane   # hyperpage commands (contract 2)

Runs the ``layout-decode`` workload (model/workloads_layout.py) closed loop under ``declaration``
and ``execution`` order and prints, from the runs, the step's span and fraction of planes
busy, and per large kernel its pages, the most pages on one plane (from the layout), its
span, the planes it used and its fraction of planes busy (docs/flashaccel.md).
"""

from __future__ import annotations

import argparse
import time

from hbfsim.config import load_config
from hbfsim.model.planes import run_with_planes
from hbfsim.model.replication import replicate_program
from hbfsim.model.workloads import LAYOUT_GEOMETRY, layout_decode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true",
                    help="Qwen3-235B-A22B at full size on 6 flashaccel stacks (4,608 planes)")
    ap.add_argument("--batch", type=int, default=16, help="tokens routed (default 16)")
    ap.add_argument("--scale", type=int, help="model scale (default 8; 1 with --full)")
    ap.add_argument("--issue", default="stream", choices=("stream", "hyperpage"),
                    help="order of a kernel's page loads (default stream)")
    ap.add_argument("--channel-bw", type=float, help="channel_bw_gbps override")
    ap.add_argument("--megaplane", type=int, help="megaplane_planes override")
    ap.add_argument("--host-ports", choices=("stack", "channel"),
                    help="host ports (default: the configuration's, channel)")
    ap.add_argument("--multiplane", choices=("off", "page", "megaplane"),
                    help="hyperpage commands (docs/timing-contract.md §7a)")
    ap.add_argument("--replicate", action="store_true",
                    help="copy the megapages above each kernel's average load to HBM")
    a = ap.parse_args()
    over = {}
    if a.channel_bw is not None:
        over["channel_bw_gbps"] = a.channel_bw
    if a.megaplane is not None:
        over["megaplane_planes"] = a.megaplane
    if a.multiplane is not None:
        over["multiplane"] = a.multiplane
    if a.host_ports is not None:
        over["host_ports"] = a.host_ports
    if a.full:
        cfg = load_config(profile="flashaccel", stacks=6, capacity_bytes=6 * (192 << 30),
                          **over)
        scale = a.scale or 1
    else:
        cfg = load_config(base=LAYOUT_GEOMETRY, **over)
        scale = a.scale or 8
    print(f"{cfg.stacks} stack(s) x {cfg.channels} channels x {cfg.subarrays_per_channel} "
          f"planes = {cfg.stacks * cfg.subarrays_per_stack} planes, megaplanes of "
          f"{cfg.megaplane_planes}, {cfg.channel_bw_gbps:g} GB/s per channel, tR "
          f"{cfg.t_read_us} us; qwen3-235b-a22b/{scale}, 1 layer, batch {a.batch}, "
          f"{a.issue} issue; {cfg.host_ports} ports, multiplane {cfg.multiplane}")
    for layout in ("declaration", "execution"):
        t0 = time.perf_counter()
        prog = layout_decode(cfg, scale=scale, layout=layout, batch=a.batch, issue=a.issue)
        if a.replicate:
            prog = replicate_program(cfg, prog)
        res, act = run_with_planes(cfg, prog)
        whole = act.window(res.start_tick, res.end_tick)
        print(f"{layout}: span {res.span_us:,.1f} us, planes busy {whole['busy_fraction']:.3f}, "
              f"{res.requests:,} page reads ({time.perf_counter() - t0:.1f} s host)")
        if act.commands != len(act.ops):
            print(f"  {act.commands:,} media commands, {len(act.ops) / act.commands:.2f} "
                  f"planes per command")
        if a.replicate:
            print(f"  replicated into HBM: {prog.expected['hbm_bytes']:,} B")
        reps = prog.expected.get("replication", [None] * len(res.kernels))
        for k, e, r in zip(res.kernels, prog.expected["kernels"], reps):
            if e["pages"] * 20 < res.requests:
                continue
            w = act.window(k["launch"], k["end"])
            most = e["max_plane_pages"] if r is None else r["max_plane_pages_after"]
            print(f"  {k['name']:<36} {e['pages']:>8,} pages, max {most:>4} "
                  f"on a plane, span {w['span_us']:>8,.1f} us, planes used "
                  f"{w['planes_used']:>5,} / {act.planes:,}, busy {w['busy_fraction']:.3f}")


if __name__ == "__main__":
    main()
