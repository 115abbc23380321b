"""Benchmark: generate each agentic preset, report its time, memory and statistics.

    python bench/bench_workloads.py [--scale S] [--seed N] [PRESET ...]

Each preset is generated in a fresh process (so that resident memory is its own): the time
of ``preset(...)``, the resident-set growth it causes (``/proc/self/statm``, after a garbage
collection), the number of block hashes held, and the statistics docs/serving-workloads.md
quotes: sessions, mean turns per session, input tokens (mean, median, p99), mean output,
and the block-level compulsory miss (input tokens of a turn not in full blocks of the
previous turn's input + output, and all of a first turn, over all input tokens).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time

import numpy as np


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def measure(name: str, scale: float, seed: int) -> dict:
    from hbfsim.serve.agentic import preset

    gc.collect()
    r0 = rss_mib()
    t = time.perf_counter()
    w = preset(name, scale=scale, seed=seed)
    dt = time.perf_counter() - t
    gc.collect()
    grown = rss_mib() - r0
    B = w.block_tokens
    idx = np.array([x.index for x in w.turns])
    inp = np.array([x.input_tokens for x in w.turns])
    out = np.array([x.output_tokens for x in w.turns])
    later = np.flatnonzero(idx > 0)
    miss = inp.copy()
    miss[later] = inp[later] - B * ((inp[later - 1] + out[later - 1]) // B)
    return dict(preset=name, scale=scale, turns=len(w.turns), sessions=w.sessions,
                seconds=round(dt, 3), resident_mib=round(grown),
                hashes=sum(len(x.block_hashes) for x in w.turns),
                turns_per_session=round(len(w.turns) / w.sessions, 1),
                input_mean=round(inp.mean()), input_median=round(float(np.median(inp))),
                input_p99=round(float(np.percentile(inp, 99))), output_mean=round(out.mean()),
                compulsory_miss=round(float(miss.sum() / inp.sum()), 4))


def main(argv=None) -> None:
    from hbfsim.serve.agentic import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(measure(a.presets[0], a.scale, a.seed)))
        return
    for name in a.presets:
        res = subprocess.run([sys.executable, __file__, "--one", "--scale", str(a.scale),
                              "--seed", str(a.seed), name], check=True, capture_output=True,
                             text=True)
        r = json.loads(res.stdout)
        print(f"{name}: {r['turns']:,} turns, {r['sessions']:,} sessions "
              f"({r['turns_per_session']} turns each), {r['seconds']:.2f} s, "
              f"+{r['resident_mib']} MiB resident, {r['hashes']:,} block hashes; input mean "
              f"{r['input_mean']:,} median {r['input_median']:,} p99 {r['input_p99']:,}, "
              f"output mean {r['output_mean']}, compulsory miss {r['compulsory_miss']:.2%}")


if __name__ == "__main__":
    main()
