"""The serving workload: sessions of turns, with the prefix identity of every input.

One shape for every source of turns: the seeded agentic generator (``serve/agentic.py``) and
the trace readers (``serve/traces.py``: Mooncake, Azure LLM inference, BurstGPT) all return a
:class:`Workload`. The engine (``serve/engine.py``) reads nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Turn", "Workload", "WorkloadError"]


class WorkloadError(ValueError):
    """A bad workload or trace; the message is one line naming where (file and line, or turn)
    and the field."""


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

    @property
    def sessions(self) -> int:
        """Number of distinct sessions."""
        return len({t.session for t in self.turns})

    @property
    def input_tokens(self) -> int:
        """Sum of every turn's ``input_tokens`` (earlier context counted once per turn)."""
        return sum(t.input_tokens for t in self.turns)

    @property
    def output_tokens(self) -> int:
        """Sum of every turn's ``output_tokens``."""
        return sum(t.output_tokens for t in self.turns)

    def validate(self) -> Workload:
        """Check every documented invariant; return ``self`` so that calls chain.

        The generator and the trace readers build valid workloads; this is for workloads
        built by hand and for the engine to call once on whatever it is given.

        Raises
        ------
        WorkloadError
            One line naming the turn (position, session, index) and the field.
        """
        if isinstance(self.block_tokens, bool) or not isinstance(self.block_tokens, int) \
                or self.block_tokens < 1:
            raise WorkloadError(f"workload {self.name!r}: field 'block_tokens' must be a "
                                f"positive integer, not {self.block_tokens!r}")
        if not self.turns:
            raise WorkloadError(f"workload {self.name!r}: no turns")
        prev = None
        for pos, t in enumerate(self.turns):
            where = f"workload {self.name!r} turn {pos} (session {t.session}, index {t.index})"
            for field in ("session", "index", "input_tokens", "output_tokens"):
                v = getattr(t, field)
                low = 1 if field.endswith("tokens") else 0
                if isinstance(v, bool) or not isinstance(v, int) or v < low:
                    raise WorkloadError(f"{where}: field {field!r} must be an integer >= "
                                        f"{low}, not {v!r}")
            if prev is None or t.session != prev.session:
                if prev is not None and t.session < prev.session:
                    raise WorkloadError(f"{where}: field 'session' goes back from "
                                        f"{prev.session}; turns must be ordered by session")
                if t.index != 0:
                    raise WorkloadError(f"{where}: field 'index' must start at 0 in a new "
                                        "session")
            elif t.index != prev.index + 1:
                raise WorkloadError(f"{where}: field 'index' must follow {prev.index}")
            need = -(-t.input_tokens // self.block_tokens)
            h = t.block_hashes
            if not isinstance(h, tuple) or len(h) != need:
                got = len(h) if isinstance(h, tuple) else type(h).__name__
                raise WorkloadError(f"{where}: field 'block_hashes' must be a tuple of "
                                    f"ceil({t.input_tokens}/{self.block_tokens}) = {need} "
                                    f"hashes, not {got}")
            a = t.arrival_s
            if a is None:
                if t.index == 0:
                    raise WorkloadError(f"{where}: field 'arrival_s' is None on a session's "
                                        "first turn")
            elif isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) \
                    or a < 0:
                raise WorkloadError(f"{where}: field 'arrival_s' must be a finite time >= 0 "
                                    f"or None, not {a!r}")
            th = t.think_s
            if isinstance(th, bool) or not isinstance(th, (int, float)) \
                    or not math.isfinite(th) or th < 0:
                raise WorkloadError(f"{where}: field 'think_s' must be a finite time >= 0, "
                                    f"not {th!r}")
            prev = t
        return self
