"""Admission policies: which waiting requests join the running batch, in which order.

The engine (serve/engine.py) calls :meth:`Scheduler.candidates` whenever admission may have
become possible (an arrival, a completion, a preemption) and tries the candidates in order,
stopping at the first that does not fit (no skipping ahead, as vLLM's FCFS waiting queue).

- ``fcfs``: arrival order.
- ``cache-aware``: requests whose prefix is resident on the device first (in arrival order),
  then the others (the serving paper: "prefer waiting requests whose prefix is resident").
- ``buffered``: cache-aware order, and a *new session* (turn 0) is admitted only if the device
  KV the open sessions need -- pages held by running requests plus the context pages of
  every session between two turns -- and the newcomer's pages stay within ``1 - headroom``
  of device KV capacity (the serving paper's Figures 4 and 5; 10 % in its Table 4). A
  newcomer therefore does not take the room of a prefix that will be reused, and the
  headroom leaves room for the open sessions' contexts to grow; returning turns may use all
  of the capacity (evicting LRU). A session is between turns from the completion of one turn to the
  admission of the next; after its last turn it is closed (the trace knows; a serving
  system learns it when the agent closes the session).

Whether a prefix is resident is *probed*, not walked: the engine passes a function that
looks at one block (docs/serving.md, "Schedulers"), so a scheduling pass costs O(window).
"""

from __future__ import annotations

from itertools import islice

__all__ = ["SCHEDULERS", "Scheduler", "make_scheduler"]

SCHEDULERS = ("fcfs", "cache-aware", "buffered")


class Scheduler:
    """An admission policy.

    Parameters
    ----------
    name : str
        One of :data:`SCHEDULERS`.
    headroom : float
        Fraction of device KV capacity new sessions may not use (``buffered`` only).
    window : int
        How many waiting requests at the head of the queue a cache-aware pass looks at.
    """

    def __init__(self, name: str = "fcfs", headroom: float = 0.10, window: int = 256):
        if name not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}, not {name!r}")
        if not (0 <= headroom < 1):
            raise ValueError(f"headroom must be in [0, 1), not {headroom!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive integer, not {window!r}")
        self.name, self.headroom, self.window = name, headroom, window

    @property
    def label(self) -> str:
        if self.name == "buffered":
            return f"cache-aware, {self.headroom:.0%} headroom"
        return self.name

    def candidates(self, waiting, resident, kept=()):
        """Waiting requests in the order to try; ``resident(req)`` says whether a request's
        prefix is on the device; ``kept`` yields waiting requests (arrival order) whose
        session's whole context is known to be on the device, wherever they wait in the
        queue (the cache-aware orders try them first)."""
        if self.name == "fcfs":
            return iter(waiting)
        first = list(islice(kept, self.window))
        seen = {r.i for r in first}
        head = [r for r in islice(waiting, self.window + len(first)) if r.i not in seen]
        head = head[:self.window]
        flags = [resident(r) for r in head]
        hot = [r for r, f in zip(head, flags) if f]
        return iter(first + hot + [r for r, f in zip(head, flags) if not f])

    def admits(self, req, need: int, busy: int, protected: int, cap: int,
               lost: bool = False) -> bool:
        """May ``req`` (needing ``need`` more busy device pages) be admitted now?

        ``busy``: device pages held by running requests; ``protected``: context pages of the
        other sessions between two turns; ``cap``: device KV pages available; ``lost``: a
        returning turn whose context is no longer all on the device (``buffered`` treats it
        as a new session)."""
        if self.name == "buffered" and (req.index == 0 or lost):
            return busy + protected + need <= int(cap * (1.0 - self.headroom))
        return busy + need <= cap


def make_scheduler(name: str, headroom: float = 0.10, window: int = 256) -> Scheduler:
    """A :class:`Scheduler` (validated)."""
    return Scheduler(name, headroom, window)
