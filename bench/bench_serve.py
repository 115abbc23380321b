"""Time the serving engine (issue 9's benchmark): figures, not a timed test.

    .venv/bin/python bench/bench_serve.py                # both runs below
    .venv/bin/python bench/bench_serve.py --only qwen    # 25k-turn Qwen3-32B, Table 4's six rows
    .venv/bin/python bench/bench_serve.py --only moe     # 100k-turn GLM-5 MoE, 16 GPUs
    .venv/bin/python bench/bench_serve.py --scale 0.1    # a tenth of the turns
    .venv/bin/python bench/bench_serve.py --hbf-model device   # HBF timing from the golden model

Aims (issue 9): a 25,000-turn Qwen3-32B run in <= 60 s and a 100,000-turn MoE run in
<= 10 min on the 2-core development machine. Prints host seconds per run beside the
serving figures (Table 4 columns); HBF timing from the serving paper's Table 1 (constant,
the default here, to compare with the source) or characterized on the golden model
(profile hbf-serving).
"""

from __future__ import annotations

import argparse
import time

from hbfsim.serve.cost import CostModel
from hbfsim.serve.engine import simulate
from hbfsim.serve.hardware import make_node
from hbfsim.serve.models import model_costs
from hbfsim.serve.report import summarize
from hbfsim.serve.scheduler import Scheduler
from hbfsim.serve.tier_timing import TABLE1_HBF
from hbfsim.serve.traces import load_workload

COLS = ("completion_s", "energy_mj", "hbm_kv_writes_tb", "hbf_kv_writes_tb", "device_hit",
        "host_hit", "hbf_life_years")


TIMING = TABLE1_HBF


def one(label, wl, model, node_kw, sched, **kw):
    mc = model_costs(model)
    node = make_node(**node_kw, hbf_timing=TIMING)
    s = Scheduler(sched)
    t0 = time.perf_counter()
    run = simulate(wl, node, mc, s, **kw)
    host = time.perf_counter() - t0
    r = summarize(run, node, CostModel(node, mc, tp=kw.get("tp", 1), weights=kw.get(
        "weights", "hbm"), dpa=kw.get("dpa", False)), s, wl, TIMING)
    print(f"{label:<34} {host:8.1f} s | clock {r['completion_s']:10,.0f} s  energy "
          f"{r['energy_mj']:7.3f} MJ  HBM KV {r['hbm_kv_writes_tb']:7.2f} TB  HBF KV "
          f"{r['hbf_kv_writes_tb']:7.2f} TB  device {r['device_hit']:6.2%}  host "
          f"{r['host_hit']:6.2%}  life {r['hbf_life_years']:6.2f} y  TPOT "
          f"{r['tpot_ms']['mean']:7.1f} ms  preempt {r['preemptions']}", flush=True)
    return host


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("qwen", "moe"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--hbf-model", choices=("constant", "device"), default="constant")
    a = ap.parse_args()
    global TIMING
    if a.hbf_model == "device":
        from hbfsim.config import load_config
        from hbfsim.serve.characterize import characterize
        TIMING = characterize(load_config(profile="hbf-serving"))
    print(f"HBF timing: {TIMING.source}")
    if a.only in (None, "qwen"):
        t0 = time.perf_counter()
        wl = load_workload(f"agentic-qwen32b:scale={a.scale:g}")
        print(f"workload {wl.name}: {len(wl.turns):,} turns, generated in "
              f"{time.perf_counter() - t0:.1f} s")
        for hbm, hbf in ((8, 0), (4, 4)):
            for sched in ("fcfs", "cache-aware", "buffered"):
                one(f"qwen3-32b {hbm}+{hbf} {sched}", wl, "qwen3-32b",
                    dict(hbm_stacks=hbm, hbf_stacks=hbf), sched)
    if a.only in (None, "moe"):
        t0 = time.perf_counter()
        wl = load_workload(f"agentic-100k:scale={a.scale:g}")
        print(f"workload {wl.name}: {len(wl.turns):,} turns, generated in "
              f"{time.perf_counter() - t0:.1f} s")
        one("glm-5 H3 8+8 2xTP8/EP8+DPA HBF wts", wl, "glm-5",
            dict(gpus=16, hbm_stacks=8, hbf_stacks=8, packaging="h3"), "buffered", tp=8,
            weights="hbf", dpa=True)


if __name__ == "__main__":
    main()
