"""The serving workload: sessions of turns, with the prefix identity of every input.

One shape for every source of turns: the seeded agentic generator (``serve/agentic.py``) and
the trace readers (``serve/traces.py``: Mooncake, Azure LLM inference, BurstGPT) all return a
:class:`Workload`. The engine (``serve/engine.py``) reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Turn", "Workload"]


@dataclass(frozen=True)
class Turn:
    """One request of a session.

    Members
    -------
    session : int
        Session id (0-based). Turns of one session are served in ``index`` order.
    index : int
        Turn number within its session (0-based).
    input_tokens : int
        Prompt tokens of this turn, *including* the session's earlier context (an agentic
        turn re-sends the whole conversation: earlier inputs, earlier outputs, new text).
    output_tokens : int
        Tokens to generate (>= 1).
    block_hashes : tuple of int
        One hash per ``Workload.block_tokens`` tokens of the input, in order; the last
        block may be partial. Two inputs share a prefix of ``k`` blocks exactly when their
        first ``k`` hashes are equal; only full blocks are reused from a cache.
    arrival_s : float or None
        Absolute arrival time in seconds; ``None``: the turn arrives ``think_s`` after the
        previous turn of its session completes (closed loop, agentic). Turn 0 of a session
        always has an ``arrival_s``.
    think_s : float
        Think time after the previous turn's completion (used when ``arrival_s`` is None).
    """

    session: int
    index: int
    input_tokens: int
    output_tokens: int
    block_hashes: tuple
    arrival_s: float | None
    think_s: float = 0.0


@dataclass(frozen=True)
class Workload:
    """A list of turns and the granularity of their prefix hashes.

    Members
    -------
    name : str
        Where it came from (file name, or generator and seed).
    block_tokens : int
        Tokens per hashed block (Mooncake traces: 512).
    turns : tuple of Turn
        Ordered by session, then index.
    """

    name: str
    block_tokens: int
    turns: tuple
