"""A small seeded agentic workload: the embedded default of ``hbfsim serve``.

Stand-in until the full generator (serve/agentic.py) lands: sessions of turns whose input
re-sends the whole conversation (earlier inputs and outputs plus new text), lognormal
lengths, exponential think times, closed loop after the first turn. Block ``k`` of a
session's token stream always has the same hash, so a returning turn's prefix is
recognisable; a partial last block gets a hash of its own (it is not the full block).
"""

from __future__ import annotations

import math
import random

from hbfsim.serve.workload import Turn, Workload

__all__ = ["small_agentic"]


def _lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, round(rng.lognormvariate(math.log(median), sigma)))))


def small_agentic(sessions: int = 32, turns: int = 4, seed: int = 0, block_tokens: int = 64,
                  first_prompt: int = 4096, new_text: int = 512, output: int = 256,
                  think_s: float = 2.0, arrival_window_s: float = 10.0) -> Workload:
    """``sessions`` x ``turns`` turns (medians of lengths given; sigma 0.5)."""
    for k, v in (("sessions", sessions), ("turns", turns), ("block_tokens", block_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{k} must be a positive integer, not {v!r}")
    rng = random.Random(seed)
    out = []
    for s in range(sessions):
        arrival = rng.uniform(0.0, arrival_window_s)
        ctx = 0
        for i in range(turns):
            add = _lognormal(rng, first_prompt if i == 0 else new_text, 0.5, 16, 32768)
            n_in = ctx + add
            n_out = _lognormal(rng, output, 0.5, 1, 4096)
            full, part = divmod(n_in, block_tokens)
            hashes = [hash((seed, s, k)) for k in range(full)]
            if part:
                hashes.append(hash((seed, s, full, "partial", part)))
            out.append(Turn(s, i, n_in, n_out, tuple(hashes), arrival if i == 0 else None,
                            0.0 if i == 0 else rng.expovariate(1.0 / think_s)))
            ctx = n_in + n_out
    return Workload(f"small-agentic(sessions={sessions}, turns={turns}, seed={seed})",
                    block_tokens, tuple(out))
