"""Ingress and admission: ``req[p].ready``, the accept, the ingress queue Q and its head
into the dispatch register M (docs/timing-contract.md §4.1, L1; stages ``A`` and ``Q`` of
§4a; ``m_valid`` of §1).

The admission count is stack-wide (§4.1): a slot is taken by the accept and released by
the response handshake (:mod:`~hbfsim.model.controller.response`), usable again from the
next cycle.
"""

from __future__ import annotations

from hbfsim.model.controller.ports import INGRESS_DEPTH
from hbfsim.model.controller.request import Request

__all__ = ["Ingress"]


class Ingress:
    """The request side of every port up to M (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

    def room(self, p: int, t: int, free: int) -> bool:
        """§4.1's admission term of ``req[p].ready`` in cycle ``t`` with ``free`` slots free
        at its start: every port while ``free >= P`` (when ``admission >= P``); the rotating
        rank ``(p - t) mod P < free`` only when ``admission < P``."""
        P = self.P
        if self.admission >= P:
            return free >= P
        return (p - t) % P < free

    def ready(self) -> bool:
        """``req.ready`` of the stack shape's one port in this cycle, from start-of-cycle
        state (§4.1, ``P = 1``): Q below 2 entries and a free admission slot.

        Call it before :meth:`advance` of the same cycle. The channel shape's per-port
        ready is Q's occupancy and :meth:`room`, taken before any accept of the cycle."""
        return len(self.ports[0].qin) < INGRESS_DEPTH and self.inflight < self.admission

    def rank_tick(self, t: int, p: int) -> int | None:
        """After cycle ``t``: the first cycle in which port ``p``'s admission term holds
        (§4.1), if Q has room and it can hold without an accept or a handshake; else None
        (then an accept or a handshake, a busy cycle, must come first)."""
        free = self.admission - self.inflight
        if free <= 0 or len(self.ports[p].qin) >= INGRESS_DEPTH:
            return None
        P = self.P
        for u in range(t + 1, t + 1 + P):
            if self.room(p, u, free):
                return u
        return None

    def accept(self, req: Request, t: int, port: int = 0) -> None:
        """Accept ``req`` on port ``port`` in cycle ``t``; it is in that port's Q from
        ``t + 1`` (§4.1). The admission slot is the stack's (one count for all ports).

        ``req.t_accept`` is set by the system: it is the handshake at the system's port
        (§2), which is this stack's port unless the stack shape routes to several stacks."""
        req.depth = self.inflight
        self.inflight += 1
        self.ports[port].qin.append((req, t))

    def advance(self, t: int) -> bool:
        """Move each port's Q head into its M at the end of cycle ``t`` if that M is free:
        empty at the start of ``t`` or dispatched in ``t``, which is ``m is None`` once
        :meth:`dispatch` of ``t`` has run. A request accepted in ``t`` is not in Q before
        ``t + 1`` (§4.1)."""
        changed = False
        for port in self.ports:
            qin = port.qin
            if port.m is None and qin and qin[0][1] < t:
                port.m = qin.popleft()[0]
                changed = True
        return changed

    def holds_requests(self) -> bool:
        """``m_valid``: some port's Q or M holds a request (§1, for ``drain``)."""
        return any(port.m is not None or port.qin for port in self.ports)
