"""The HBF stack controller under timing contract 2, channel shape: one request port and one
response port per host channel over the stack-wide admission count, MSHR pool and write
buffer (docs/timing-contract.md §1, §4.1, §4.2.3, §4.2.4, §8, §14; implementation plan
§18 step 5).

:class:`ChannelStackController` keeps every rule of
:class:`~hbfsim.model.controller_v2.PipelinedStackController` per port: port ``p`` has its
ingress queue ``Q_p`` and dispatch register ``M_p`` (request side) and its stages ``R_p``,
``K_p`` and ``E_p`` (response side) and serves the entries of channel ``p``. What the ports
share is ordered by the contract's tie-breaks (§14): the admission count by "every port
or none" (``free >= P``; the rotating rank ``(p - t) mod P`` below ``P`` slots, §4.1), each pool by its allocation pointer (§4.2.3), and a page held
by two Ms in one cycle by reads before writes (§4.2.4). The channel queues, issue, media
side and write-buffer triggers are the stack shape's, unchanged.
"""

from __future__ import annotations

import heapq
from collections import deque

from hbfsim.config import HbfConfig
from hbfsim.model.controller import OPEN, Request
from hbfsim.model.controller_v2 import EGRESS_DEPTH, INGRESS_DEPTH, PipelinedStackController

__all__ = ["ChannelStackController"]


class _ReqPort:
    """The request side of one port: ingress queue Q (request, accept cycle) and M."""

    __slots__ = ("qin", "m")

    def __init__(self):
        self.qin: deque[tuple[Request, int]] = deque()
        self.m: Request | None = None


class _RespPort:
    """The response side of one port (v2 §8): its RETURN entries by kind and index, the
    entry R drains (``lock``), the waiters in R and K, E, and its credit-stall start."""

    __slots__ = ("ret_r", "ret_w", "lock", "r_hold", "k_hold", "egress", "hs_t", "blocked")

    def __init__(self):
        self.ret_r: list[int] = []
        self.ret_w: list[int] = []
        self.lock = None
        self.r_hold = None
        self.k_hold = None
        self.egress: deque[Request] = deque()
        self.hs_t = -1
        self.blocked = -1


class ChannelStackController(PipelinedStackController):
    """The controller of one HBF stack under contract 2 with ``P = channels`` ports.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (``contract = 2``, ``host_ports = "channel"``).
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system.

    Members
    -------
    P : int
        Ports: one per host channel (v2 §1).
    inp, outp : list
        Per port: the request side (Q, M) and the response side (R, K, E).
    ap_r, ap_w : int
        The allocation pointers of the MSHR pool and of the write buffer (v2 §4.2.3).
    """

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        super().__init__(cfg, stack, mapper, stats)
        self.P = cfg.channels
        self.inp = [_ReqPort() for _ in range(self.P)]
        self.outp = [_RespPort() for _ in range(self.P)]
        self.ap_r = self.ap_w = 0
        self._raw_more: list = []   # raw flushes of this cycle beyond the first (§4.2.4)

    # ============================================================ v2 §4.1 ingress, Q, M
    def room(self, p: int, t: int, free: int) -> bool:
        """§4.1's admission term of ``req[p].ready`` in cycle ``t`` with ``free`` slots free
        at its start: every port while ``free >= P`` (when ``admission >= P``); the rotating
        rank ``(p - t) mod P < free`` only when ``admission < P``."""
        P = self.P
        if self.admission >= P:
            return free >= P
        return (p - t) % P < free

    def ready_ports(self, t: int) -> list[bool]:
        """``req[p].ready`` of cycle ``t`` for every port, from start-of-cycle state: Q's
        occupancy below 2 and the admission term :meth:`room` (§4.1). Call it before any
        :meth:`accept` of the cycle."""
        free = self.admission - self.inflight
        return [len(port.qin) < INGRESS_DEPTH and self.room(p, t, free)
                for p, port in enumerate(self.inp)]

    def rank_tick(self, t: int, p: int) -> int | None:
        """After cycle ``t``: the first cycle in which port ``p``'s admission term holds
        (§4.1), if Q has room and it can hold without an accept or a handshake; else None
        (then an accept or a handshake, a busy cycle, must come first)."""
        free = self.admission - self.inflight
        if free <= 0 or len(self.inp[p].qin) >= INGRESS_DEPTH:
            return None
        P = self.P
        for u in range(t + 1, t + 1 + P):
            if self.room(p, u, free):
                return u
        return None

    def ready(self) -> bool:
        raise TypeError("the channel shape has one ready per port: ready_ports(t)")

    def accept(self, req: Request, t: int, port: int = 0) -> None:
        """Accept ``req`` on port ``port`` in cycle ``t``; it is in ``Q_port`` from
        ``t + 1`` (v2 §4.1). The admission slot is the stack's (one count for all ports)."""
        req.depth = self.inflight
        self.inflight += 1
        self.inp[port].qin.append((req, t))

    def advance(self, t: int) -> bool:
        """Move each port's Q head into its M at the end of cycle ``t`` if that M is free
        (v2 §4.1, per port)."""
        changed = False
        for port in self.inp:
            qin = port.qin
            if port.m is None and qin and qin[0][1] < t:
                port.m = qin.popleft()[0]
                changed = True
        return changed

    def holds_requests(self) -> bool:
        """``m_valid``: some port's Q or M holds a request (v2 §1)."""
        return any(port.m is not None or port.qin for port in self.inp)

    # ================================================== v2 §4.2 dispatch, several ports
    def dispatch(self, t: int, drain: bool) -> bool:
        """Dispatch every port's M in cycle ``t``: the reads first, then the writes (§4.2.4),
        each kind's ports in order from its pool's pointer (§4.2.3).

        Each M goes through contract 1's rules (:meth:`StackController.dispatch`) in turn.
        That is the start-of-cycle decision of v2 §4.2 for every port: two Ms of one kind
        never hold one page (a page maps to one read port and one write port, §1), so a
        port's decision depends on another's of the same cycle only through the pool,
        where popping the heap of entries FREE at the start of ``t`` (frees of ``t`` wait
        for :meth:`end_cycle`) gives the k-th allocating port the k-th lowest entry; and a
        write after the reads sees their entries, as §4.2.4 requires."""
        P = self.P
        inp = self.inp
        changed = False
        raws = []       # every port's read may flush an OPEN entry of its page (§4.2, §5)
        held = [(p, port.m) for p, port in enumerate(inp) if port.m is not None]
        for kind in ("R", "W"):
            ap = self.ap_r if kind == "R" else self.ap_w
            free = self.mshr_free if kind == "R" else self.wb_free
            last = -1
            # this kind's Ms, ports in order from the pool's pointer (§4.2.3)
            mine = [p for p, m in held if m.op == kind]
            for p in [p for p in mine if p >= ap] + [p for p in mine if p < ap]:
                port = inp[p]
                n_free = len(free)
                self.m = port.m
                if super().dispatch(t, drain):
                    changed = True
                if self.raw_now is not None:
                    raws.append(self.raw_now)
                    self.raw_now = None
                port.m = self.m
                if len(free) < n_free:
                    last = p
            self.m = None
            self.raw_now = raws[0] if raws else None
            self._raw_more = raws[1:]
            if last >= 0:
                if kind == "R":
                    self.ap_r = (last + 1) % P
                else:
                    self.ap_w = (last + 1) % P
        return changed

    def wb_triggers(self, t: int, drain: bool) -> bool:
        """The stack shape's triggers, and the raw flushes of a cycle in which several ports'
        reads found an OPEN entry of their page (cause by v1 §4.4's priority: an entry whose
        coverage was complete at the start of the cycle reports ``full``)."""
        changed = False
        for e in self._raw_more:
            if e.state == OPEN and not 0 <= e.full_at <= t:
                self._flush(e, "raw")
                changed = True
        self._raw_more = []
        return super().wb_triggers(t, drain) or changed

    # ============================================================ v2 §8 responses
    def respond_stages(self, t: int) -> bool:
        """K launches, then R chooses, on every response port in cycle ``t`` (v2 §8).

        Entries that entered RETURN before ``t`` go to the port of their channel first
        (response port ``c`` serves the entries of channel ``c``)."""
        mshr, wb, outp = self.mshr, self.wb, self.outp
        while self.ret_r:
            idx = heapq.heappop(self.ret_r)
            heapq.heappush(outp[mshr[idx].ch].ret_r, idx)
        while self.ret_w:
            idx = heapq.heappop(self.ret_w)
            heapq.heappush(outp[wb[idx].ch].ret_w, idx)
        changed = False
        wait = None
        for port in outp:
            if port.k_hold is None and port.r_hold is None and port.lock is None \
                    and not port.ret_r and not port.ret_w:
                continue
            c, w = self._port_stages(port, t)
            changed |= c
            if w is not None and (wait is None or w < wait):
                wait = w
        self.credit_wait = wait
        return changed

    def _port_stages(self, port: _RespPort, t: int):
        """One port's K then R (the stack shape's :meth:`respond_stages` on ``port``);
        return whether it changed state and its credit wait."""
        changed = False
        wait = None
        k_free = port.k_hold is None
        if not k_free:
            e, i = port.k_hold
            req = e.waiters[i]
            ch = e.ch
            occ = len(port.egress) + (1 if port.hs_t == t else 0)
            if occ >= EGRESS_DEPTH:
                pass                        # E full: no credit is charged (v2 §11.4)
            elif self.link.allows(ch, t, req.nbytes):
                self.link.charge(ch, t, req.nbytes)
                self._port_launch(port, e, i, req, t)
                port.k_hold = None
                k_free = changed = True
            else:
                if port.blocked < 0:
                    port.blocked = t
                wait = self.link.wait(ch, req.nbytes)
        if port.r_hold is not None:
            if k_free:
                port.k_hold = port.r_hold
                port.r_hold = self._port_choose(port)
                changed = True
        else:
            w = self._port_choose(port)
            if w is not None:
                if k_free:
                    port.k_hold = w
                else:
                    port.r_hold = w
                changed = True
        return changed, wait

    def _port_choose(self, port: _RespPort):
        """R's choice on ``port`` (v1 §8 per response port, v2 §8): the entry it drains,
        else its lowest-index MSHR entry in RETURN, then write-buffer entry."""
        cur = port.lock
        if cur is None:
            if port.ret_r:
                cur = self.mshr[heapq.heappop(port.ret_r)]
            elif port.ret_w:
                cur = self.wb[heapq.heappop(port.ret_w)]
            else:
                return None
        i = cur.head
        cur.head = i + 1
        port.lock = cur if i + 1 < len(cur.waiters) else None
        return cur, i

    def _port_launch(self, port: _RespPort, cur, i: int, req: Request, t: int) -> None:
        """Launch ``req`` into ``port``'s E (the stack shape's :meth:`_launch`, with the
        port's own credit-stall record)."""
        unused = self.egress
        self.blocked_since, self.egress = port.blocked, port.egress
        self._launch(cur, i, req, t)
        port.blocked, self.egress = self.blocked_since, unused

    def egress_heads(self):
        """The ports whose E holds a response (``resp[p].valid``)."""
        return [p for p, port in enumerate(self.outp) if port.egress]

    def handshake(self, t: int, port: int = 0) -> Request:
        """The ``resp[port]`` handshake of its E head in cycle ``t`` (v2 §8, §4.1)."""
        out = self.outp[port]
        req = out.egress.popleft()
        out.hs_t = t
        req.t_done = t
        self._released += 1
        self.on_response(req, t)
        return req
