"""Print how the controller's area grows with MSHR entries, write-buffer entries and channels.

    python bench/rtl_area.py [--sector-bytes 32]

Each row is one Yosys ``synth -noabc; stat`` of the whole controller (needs the ``synth``
extra). The base point is a small co-simulation configuration: 2 channels x 4 subarrays,
8 MSHRs, 4 write-buffer entries, 16 request slots, queue depth 4.
"""

from __future__ import annotations

import argparse
import time

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.rtl.synth import synth_stats

# the base point in the stack shape (the figures of docs/rtl.md before 2026-12-03 are contract
# 1's, reproducible at e5ad083); `--set host_ports=channel` for the default shape
BASE = dict(host_ports="stack", channels=2, subarrays_per_channel=4, mshr_entries=8,
            write_buffer_entries=4, admission=16, queue_depth=4,
            capacity_bytes=16 * 4 * 256 * PAGE_BYTES * 4)
SWEEPS = [("mshr_entries", (8, 16, 32, 64)), ("write_buffer_entries", (2, 4, 8, 16)),
          ("channels", (1, 2, 4, 8))]
BLOCKS = ("mshr", "write_buffer", "scheduler*", "admission", "response")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sector-bytes", type=int, default=32)
    a = ap.parse_args()
    print(f"coverage granularity {a.sector_bytes} B; cells / flip-flops")
    print("| sweep | value | total | " + " | ".join(BLOCKS) + " | synth s |")
    print("|---|---|---|" + "---|" * len(BLOCKS) + "---|")
    for key, values in SWEEPS:
        for v in values:
            cfg = load_config(**(BASE | {key: v}))
            t0 = time.perf_counter()
            rows = synth_stats(cfg, sector_bytes=a.sector_bytes)
            dt = time.perf_counter() - t0

            def cell(prefix):
                if prefix.endswith("*"):
                    sel = [r for n, r in rows.items()
                           if n.startswith("hbf_controller." + prefix[:-1])]
                else:
                    sel = [rows.get("hbf_controller." + prefix,
                                    {"cells": 0, "flip_flops": 0})]
                c = sum(r["cells"] for r in sel)
                f = sum(r["flip_flops"] for r in sel)
                return f"{c:,} / {f:,}"

            tot = rows["total"]
            print(f"| {key} | {v} | {tot['cells']:,} / {tot['flip_flops']:,} | "
                  + " | ".join(cell(b) for b in BLOCKS) + f" | {dt:.0f} |", flush=True)


if __name__ == "__main__":
    main()
