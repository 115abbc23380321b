"""Write the packaged sample traces, serve/data/sample_*.{jsonl,csv} (docs/serving-workloads.md).

They are ours, drawn from fixed seeds in each format's layout, so that `hbfsim serve` and the
tests read real-format files without a download. Rerun after changing this script; the tests
check that the committed files equal its output.

    python bench/make_sample_traces.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from hbfsim.serve.agentic import generate

ROWS = 40


def mooncake() -> str:
    # Agentic sessions in open-loop form: each turn arrives one think time plus a nominal
    # 2 s of service after the previous one, and the lines are merged in time order, so the
    # hash_ids show the prefix reuse of Mooncake's conversation traces.
    w = generate(12, seed=11, turns_per_session=5, first_prompt=(1500, 0.6),
                 followup_prompt=(150, 0.8), output=(120, 0.8), think_s=(4.0, 0.8),
                 arrival_rate=0.2, max_turns=ROWS)
    rows, t = [], 0.0
    for turn in w.turns:
        t = turn.arrival_s if turn.index == 0 else t + 2.0 + turn.think_s
        rows.append((round(t * 1000), turn))
    rows.sort(key=lambda r: r[0])
    return "".join(f'{{"timestamp": {ms}, "input_length": {x.input_tokens}, '
                   f'"output_length": {x.output_tokens}, '
                   f'"hash_ids": [{", ".join(map(str, x.block_hashes))}]}}\n'
                   for ms, x in rows)


def _requests(seed: int, ctx_median: float, out_median: float):
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.5, ROWS)
    ctx = np.maximum(1, np.rint(rng.lognormal(np.log(ctx_median), 1.0, ROWS))).astype(int)
    gen = np.maximum(1, np.rint(rng.lognormal(np.log(out_median), 0.9, ROWS))).astype(int)
    return np.cumsum(gaps), ctx, gen


def azure() -> str:
    # The 2023 trace's layout: 7 fractional digits (100 ns ticks), no time zone.
    t, ctx, gen = _requests(12, 1000, 200)
    start = datetime(2023, 11, 16, 18, 15, 46)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for dt, c, g in zip(t, ctx, gen):
        stamp = start + timedelta(microseconds=int(dt * 1e6))
        lines.append(f"{stamp:%Y-%m-%d %H:%M:%S.%f}0,{c},{g}")
    return "\n".join(lines) + "\n"


def burstgpt() -> str:
    # Integer seconds as in BurstGPT_1.csv; two failed requests (Response tokens 0), which
    # the reader skips.
    t, ctx, gen = _requests(13, 600, 120)
    gen[[7, 23]] = 0
    rng = np.random.default_rng(14)
    model = rng.choice(["ChatGPT", "GPT-4"], ROWS, p=[0.8, 0.2])
    kind = rng.choice(["Conversation log", "API log"], ROWS)
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for dt, m, c, g, k in zip(t, model, ctx, gen, kind):
        lines.append(f"{int(dt) + 5},{m},{c},{g},{c + g},{k}")
    return "\n".join(lines) + "\n"


SAMPLES = {"sample_mooncake.jsonl": mooncake, "sample_azure.csv": azure,
           "sample_burstgpt.csv": burstgpt}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, make in SAMPLES.items():
        (out / name).write_text(make(), newline="\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else
         Path(__file__).resolve().parent.parent / "serve" / "data")
