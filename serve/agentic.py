"""The seeded generator of multi-turn agentic sessions, and its presets (docs/serving-workloads.md).

The model (serving paper §1 and Table 3: "agentic workloads ... repeated interactions over
growing contexts"): sessions arrive as a Poisson process; a session runs a geometric (or
lognormal, ``turns_sigma``) number of turns; every turn re-sends the whole conversation, so
turn ``k``'s input is turn ``k-1``'s input, plus turn ``k-1``'s output, plus a new prompt (a
user message or a tool result).
Prompt and output lengths are lognormal; between turns the session thinks (a tool runs, a
user reads) for a lognormal time, measured from the completion of the previous turn (closed
loop). An optional system prompt, one of a few shared by all sessions, gives cross-session
prefix hits.

Prefix identity. A block is named by the tokens before and in it, so its hash is an id given
once per distinct block: the full blocks of a system prompt share ids across sessions, every
other full block has an id of its own session, and a partial last block, which no later turn
repeats (the next turn extends it), gets an id used once. Turn ``k``'s leading full-block
hashes are therefore those of the ``(input + output)`` of turn ``k-1``.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import numpy as np

from hbfsim.serve.workload import Turn, Workload, WorkloadError

__all__ = ["PRESETS", "Preset", "generate", "preset"]


def _lognormal_arg(name, v, zero_ok=False):
    try:
        median, sigma = (float(x) for x in v)
    except (TypeError, ValueError):
        raise WorkloadError(f"agentic generator: field {name!r} must be (median, sigma), "
                            f"not {v!r}") from None
    low_ok = median >= 0 if zero_ok else median > 0
    if not (math.isfinite(median) and low_ok and math.isfinite(sigma) and sigma >= 0):
        raise WorkloadError(f"agentic generator: field {name!r} needs median "
                            f"{'>=' if zero_ok else '>'} 0 and sigma >= 0, not {v!r}")
    return median, sigma


def _float_arg(name, v, low, what):
    ok = not isinstance(v, bool) and isinstance(v, (int, float, np.floating, np.integer))
    if not ok or not math.isfinite(v) or v < low or (low == 0 and v == 0):
        raise WorkloadError(f"agentic generator: field {name!r} must be {what}, not {v!r}")
    return float(v)


def _int_arg(name, v, low):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise WorkloadError(f"agentic generator: field {name!r} must be an integer >= {low}, "
                            f"not {v!r}")
    return int(v)


def _draw_tokens(rng, median, sigma, size, cap):
    # Rounded lognormal, at least one token; capped so that a far tail cannot overflow int64
    # (max_context bounds every turn anyway).
    x = rng.lognormal(math.log(median), sigma, size) if sigma > 0 else np.full(size, median)
    return np.clip(np.rint(x), 1, cap).astype(np.int64)


def generate(sessions: int, *, seed: int, turns_per_session: float = 25.0,
             turns_sigma: float | None = None, max_turns_per_session: int = 1000,
             first_prompt=(4000.0, 0.8), followup_prompt=(250.0, 1.2), output=(200.0, 1.0),
             think_s=(2.0, 1.0),
             arrival_rate: float | None = 0.5, block_tokens: int = 512,
             system_prompt_tokens: int = 0, system_prompts: int = 1,
             max_context: int = 131072, max_turns: int | None = None,
             name: str | None = None) -> Workload:
    """Generate a workload of agentic sessions, the same for the same arguments.

    Parameters
    ----------
    sessions : int
        Sessions to draw (>= 1); ``max_turns`` may drop the last ones.
    seed : int
        Seed of the ``numpy.random.Generator`` (PCG64) that draws everything.
    turns_per_session : float
        Mean turns per session (>= 1): geometric on 1, 2, ... (each turn ends the session
        with probability ``1 / turns_per_session``, the memoryless choice for an agent that
        stops when its task is done), or lognormal with this mean (``turns_sigma``).
    turns_sigma : float or None
        ``None``: geometric turn counts (coefficient of variation about 1). A number: sigma
        of a lognormal turn count with mean ``turns_per_session``, rounded, at least 1;
        0 gives every session the same count. How dispersed session lengths are decides how
        long a closed-loop run drains: the longest sessions finish last, alone, with their
        whole context resident (docs/serving-workloads.md).
    max_turns_per_session : int
        Cap on the turn-count draw.
    first_prompt : (float, float)
        Median (tokens) and sigma (of the natural log) of the lognormal first prompt, on top
        of the system prompt.
    followup_prompt : (float, float)
        Median and sigma of the new tokens each later turn appends (user message or tool
        result).
    output : (float, float)
        Median and sigma of the lognormal output length of every turn.
    think_s : (float, float)
        Median (seconds) and sigma of the lognormal think time between a turn's completion and
        the next turn's arrival; sigma 0 gives a constant, median 0 no think time.
    arrival_rate : float or None
        Session arrivals per second, a Poisson process whose first session arrives at 0;
        ``None``: every session arrives at 0 (an offline batch).
    block_tokens : int
        Tokens per hashed block.
    system_prompt_tokens : int
        Tokens of the shared system prompt at the head of every session; 0 for none.
    system_prompts : int
        Distinct system prompts (agent kinds); each session draws one uniformly.
    max_context : int
        Context window: a turn whose input plus output would exceed it ends its session
        before that turn (agents stop or start afresh at the window; no compaction, which
        would break the prefix). The first turn is shortened to fit (prompt first).
    max_turns : int or None
        Keep only the first this many turns in session order (the last kept session is cut
        short; later ones are dropped): exact turn counts for the presets.
    name : str or None
        ``Workload.name``; default ``"agentic(seed=...)"``.

    Returns
    -------
    Workload
        Turns ordered by session (= arrival order), then index.

    Raises
    ------
    WorkloadError
        A parameter out of range (named).
    """
    sessions = _int_arg("sessions", sessions, 1)
    seed = _int_arg("seed", seed, 0)
    block_tokens = _int_arg("block_tokens", block_tokens, 1)
    sys_tokens = _int_arg("system_prompt_tokens", system_prompt_tokens, 0)
    n_sys = _int_arg("system_prompts", system_prompts, 1)
    max_context = _int_arg("max_context", max_context, sys_tokens + 2)
    cap_turns = _int_arg("max_turns_per_session", max_turns_per_session, 1)
    if max_turns is not None:
        max_turns = _int_arg("max_turns", max_turns, 1)
    p_first = _lognormal_arg("first_prompt", first_prompt)
    p_next = _lognormal_arg("followup_prompt", followup_prompt)
    p_out = _lognormal_arg("output", output)
    p_think = _lognormal_arg("think_s", think_s, zero_ok=True)
    mean_turns = _float_arg("turns_per_session", turns_per_session, 1, "a mean >= 1")
    if turns_sigma is not None:
        turns_sigma = _float_arg("turns_sigma", turns_sigma, -1, "a sigma in [0, 4] or None")
        if not 0 <= turns_sigma <= 4:
            raise WorkloadError(f"agentic generator: field 'turns_sigma' must be a sigma in "
                                f"[0, 4] or None, not {turns_sigma!r}")
    if arrival_rate is not None:
        arrival_rate = _float_arg("arrival_rate", arrival_rate, 0, "> 0 sessions/s or None")

    rng = np.random.default_rng(seed)
    # One fixed draw order: the workload is a function of all the arguments together.
    if turns_sigma is None:
        n = rng.geometric(1.0 / mean_turns, sessions)
    else:  # median = mean * exp(-sigma^2 / 2) keeps the mean
        n = np.maximum(1, np.rint(mean_turns * np.exp(
            turns_sigma * rng.standard_normal(sessions) - turns_sigma ** 2 / 2)))
    n = np.minimum(n, cap_turns).astype(np.int64)
    if arrival_rate is None:
        t0 = np.zeros(sessions)
    else:
        gaps = rng.exponential(1.0 / arrival_rate, sessions)
        gaps[0] = 0.0
        t0 = np.cumsum(gaps)
    kind = rng.integers(n_sys, size=sessions) if sys_tokens else np.zeros(sessions, np.int64)
    total = int(n.sum())
    first = np.zeros(total, bool)
    starts = np.concatenate(([0], np.cumsum(n)[:-1]))
    first[starts] = True
    prompt = np.empty(total, np.int64)
    prompt[first] = _draw_tokens(rng, *p_first, sessions, max_context)
    prompt[~first] = _draw_tokens(rng, *p_next, total - sessions, max_context)
    out = _draw_tokens(rng, *p_out, total, max_context)
    think = (rng.lognormal(math.log(p_think[0]), p_think[1], total)
             if p_think[0] > 0 and p_think[1] > 0 else np.full(total, p_think[0]))
    think[first] = 0.0

    # The first turn must fit the window: shorten its output to leave room for one prompt
    # token, then its prompt.
    room = max_context - sys_tokens
    out[first] = np.minimum(out[first], room - 1)
    prompt[first] = np.minimum(prompt[first], room - out[first])
    # Growing context: new tokens of turn k are its prompt plus turn k-1's output.
    new = prompt.copy()
    new[~first] += out[np.flatnonzero(~first) - 1]
    c = np.cumsum(new)
    inp = sys_tokens + c - np.repeat(c[starts] - new[starts], n)
    over = (inp + out > max_context).astype(np.int64)
    co = np.cumsum(over)
    keep = (co - np.repeat(co[starts] - over[starts], n)) == 0
    sess = np.repeat(np.arange(sessions), n)
    if max_turns is not None:
        keep &= np.cumsum(keep) <= max_turns
    sess, inp, out, think = sess[keep], inp[keep], out[keep], think[keep]
    n = np.bincount(sess, minlength=sessions)
    live = np.flatnonzero(n)
    n = n[live]

    # Block ids: system prompt blocks first, then each session's own full blocks, then the
    # partial last blocks (one per turn that has one).
    sys_full = sys_tokens // block_tokens
    ends = np.cumsum(n) - 1
    full_last = inp[ends] // block_tokens
    own = np.maximum(full_last - sys_full, 0)
    base = n_sys * sys_full + np.concatenate(([0], np.cumsum(own)[:-1]))
    partial = inp % block_tokens != 0
    pid = n_sys * sys_full + int(own.sum()) + np.cumsum(partial) - 1

    sys_ids = [tuple(range(k * sys_full, (k + 1) * sys_full)) for k in range(n_sys)]
    turns = []
    append = turns.append
    inp_l, out_l, think_l = inp.tolist(), out.tolist(), think.tolist()
    pid_l, part_l = pid.tolist(), partial.tolist()
    nf_l = (inp // block_tokens).tolist()
    pos = 0
    for s, (si, cnt) in enumerate(zip(live.tolist(), n.tolist())):
        ids = sys_ids[int(kind[si])] + tuple(range(int(base[s]), int(base[s] + own[s])))
        arrival = float(t0[si])
        for k in range(cnt):
            h = ids[:nf_l[pos]]
            if part_l[pos]:
                h += (pid_l[pos],)
            append(Turn(s, k, inp_l[pos], out_l[pos], h, arrival if k == 0 else None,
                        think_l[pos]))
            pos += 1
    return Workload(name or f"agentic(seed={seed})", block_tokens, tuple(turns))


@dataclass(frozen=True)
class Preset:
    """A named generator setting standing for one of the source's workloads (serving paper Table 3).

    Members
    -------
    name : str
        The name ``load_workload`` takes (``NAME:scale=...,seed=...``).
    turns : int
        Turns at ``scale=1`` (exact: ``max_turns``).
    used_by : str
        The source's runs that use it.
    params : dict
        Keyword arguments of :func:`generate` (everything but ``sessions``, ``seed``,
        ``max_turns``).
    """

    name: str
    turns: int
    used_by: str
    params: dict = field(default_factory=dict)


# The source publishes turn counts only (Table 3). The per-turn statistics are inferred from
# its Table 4 (Qwen3-32B, KV 262,144 B/token in BF16): HBM KV writes / KV bytes per token /
# (1 - device hit) gives ~6.06e8 admitted input tokens over 25k turns, a mean input of ~24.2k
# tokens per turn, and the constant 3.47 % of input that no configuration hits (1 - device
# hit - host hit in every row) is the compulsory miss. How session lengths are spread is
# inferred from its FCFS rows (7.3 % and 0.16 % device hits): geometric turn counts leave the
# longest sessions to finish alone at the end of the run, every context resident, which no
# scheduler can miss (48 % device hits under FCFS on 4+4); equal counts have no such drain.
# The settings below (53 turns each, the count that keeps the mean input) give a mean input of
# 24.1k and a block-level compulsory miss of 3.4 % (docs/serving-workloads.md).
_ORIGINAL = dict(turns_per_session=53.0, turns_sigma=0.0, first_prompt=(3500.0, 0.8),
                 followup_prompt=(200.0, 1.2), output=(200.0, 1.0), think_s=(2.0, 1.0),
                 max_context=131072, system_prompt_tokens=0)

PRESETS = {p.name: p for p in (
    Preset("agentic-qwen32b", 25_000, "Qwen3-32B, 1 GPU, TP1 (Tables 3 and 4)",
           dict(_ORIGINAL, arrival_rate=0.25)),
    Preset("agentic-100k", 100_000,
           "the 100k-turn trace, original contexts: Llama-3.1-405B TP8 and GLM-5.2 "
           "(Tables 3, 5, 6)", dict(_ORIGINAL, arrival_rate=2.0)),
    # "Extended contexts": twice the turns per session and a 198k window (GLM-class), which
    # gives a mean input of ~43k tokens, 1.8x the original.
    Preset("agentic-500k", 500_000,
           "the 500k-turn trace, extended contexts: GLM-5.2 (Tables 3, 6)",
           dict(_ORIGINAL, turns_per_session=106.0, max_context=202752, arrival_rate=2.0)),
)}


#: Memory a generated turn takes, generation and the run's state together: 7.8 KB measured
#: for agentic-qwen32b (1,000 turns, tracemalloc), doubled for the extended contexts.
TURN_BYTES = 16 << 10


def physical_memory() -> int:
    """This machine's physical memory in bytes (16 GiB where the system does not say)."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def max_turns() -> int:
    """The most turns a preset may generate here: half of the physical memory at
    :data:`TURN_BYTES` a turn (a scale beyond it would end in a MemoryError)."""
    return max(1, physical_memory() // 2 // TURN_BYTES)


def preset(name: str, *, scale: float = 1.0, seed: int = 0, **overrides) -> Workload:
    """Generate a preset workload, ``scale`` times its turns (exactly, rounded, at least 1).

    Parameters
    ----------
    name : str
        A key of :data:`PRESETS`.
    scale : float
        Fraction of the preset's turns (> 0); per-session statistics and the arrival rate
        stay as they are, so a small scale is a lighter load of the same sessions.
    seed : int
        Generator seed.
    **overrides
        Any :func:`generate` keyword (``sessions``, ``seed`` and ``max_turns`` excepted).

    Raises
    ------
    WorkloadError
        Unknown preset or parameter, or a parameter out of range.
    """
    if name not in PRESETS:
        raise WorkloadError(f"unknown workload preset {name!r}; expected one of "
                            f"{', '.join(PRESETS)}")
    p = PRESETS[name]
    allowed = set(inspect.signature(generate).parameters) - {"sessions", "seed", "max_turns"}
    bad = sorted(set(overrides) - allowed)
    if bad:
        raise WorkloadError(f"workload preset {name!r}: unknown parameter {bad[0]!r}; "
                            f"expected scale, seed or one of {', '.join(sorted(allowed))}")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise WorkloadError(f"workload preset {name!r}: field 'scale' must be > 0, "
                            f"not {scale!r}")
    kw = dict(p.params, **overrides)
    turns = max(1, round(p.turns * scale))
    limit = max_turns()
    if turns > limit:
        raise WorkloadError(f"workload preset {name!r}: scale={scale:g} gives {turns:,} turns, "
                            f"more than {limit:,} (this machine's memory at "
                            f"{TURN_BYTES // 1024} KB a turn, half of it)")
    # Draw enough sessions for the turn count (the window trims the geometric mean a little);
    # doubling on a shortfall keeps the result a function of the arguments alone.
    sessions = math.ceil(1.25 * turns / float(kw["turns_per_session"])) + 8
    label = f"{name}(scale={scale:g},seed={seed})"
    while True:
        w = generate(sessions, seed=seed, max_turns=turns, name=label, **kw)
        if len(w.turns) == turns:
            return w
        sessions *= 2
