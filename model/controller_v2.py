"""The HBF stack controller under timing contract 2, stack shape: ingress queue and dispatch
register, command register with completion forwarding, and the response stages choose /
launch / egress with the deficit link credit (docs/timing-contract.md §4a, §7, §8;
implementation plan §18 steps 1 and 2).

Every decision rule is contract 1's and is inherited from
:class:`hbfsim.model.controller.StackController` (when a read merges, which entry is chosen,
which command is issued, when a page is flushed and why); this class changes when the
decisions are taken and seen (v2 §0, §13). :func:`hbfsim.model.loop.run_cycles`
steps it in the phase order of v2 §16: (a) egress handshakes, (b) launch then choose,
(c) :meth:`release_media`, (d) issue decisions, (e) enqueue, (f) dispatch from M, (g) ingress
accepts then queue heads into M, (h) write-buffer triggers, (i) :meth:`complete_entries`,
(j) end of cycle.

With ``multiplane`` not ``off`` the issue decision and the media side of the completions
are :class:`hbfsim.model.megaplane.Megaplanes`'s (docs/timing-contract.md §7a).
"""

from __future__ import annotations

import heapq
from collections import deque

from hbfsim.config import HbfConfig
from hbfsim.model.controller import Request, StackController
from hbfsim.model.link import DeficitCredit
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR
from hbfsim.model.megaplane import Megaplanes

__all__ = ["EGRESS_DEPTH", "INGRESS_DEPTH", "PipelinedStackController"]

#: Entries of a port's ingress queue Q (v2 §4.1) and of its egress queue E (v2 §8).
INGRESS_DEPTH = 2
EGRESS_DEPTH = 2


class PipelinedStackController(StackController):
    """The controller of one HBF stack under contract 2, one request and one response port.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (``contract = 2``, ``host_ports = "stack"``).
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system.

    Members
    -------
    qin : deque of (Request, int)
        The ingress queue Q with each request's accept cycle at this stack.
    m : Request or None
        The dispatch register M (filled from Q at the end of a cycle, dispatched from the
        next: ``tm >= ta + 2``).
    r_hold, k_hold : (entry, int) or None
        The waiter held in R (taken while K could not take it) and the waiter in K, as its
        entry and its index in the entry's waiter list.
    egress : deque of Request
        E: launched responses in launch order, on ``resp`` from the cycle after launch.
    drain_in : bool
        The ``drain`` input's level in the current cycle (v2 §1), set by the run loop
        before the issue phase; it ends a multi-plane gather window (MP4).
    mp : Megaplanes or None
        The multi-plane command state (MP1-MP7), None under ``multiplane = "off"``.
    """

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        super().__init__(cfg, stack, mapper, stats)
        self.cmd_delay = 1          # v2 §7: decided in td, on cmd[c] in td + 1
        self.qin: deque[tuple[Request, int]] = deque()
        self.r_hold = None
        self.k_hold = None
        self.lock = None            # the entry R is draining (v2 §8, kept from v1)
        self.egress: deque[Request] = deque()
        self._hs_t = -1             # cycle of the last handshake (E's start-of-cycle count)
        self._delivered: list = []  # completions released in this cycle (v2 §7)
        self.link = DeficitCredit(cfg)
        self.drain_in = False
        self.mp = Megaplanes(self) if cfg.multiplane != "off" else None

    # ============================================================ v2 §4.1 ingress, Q, M
    def ready(self) -> bool:
        """``req.ready`` of this cycle from start-of-cycle state (v2 §4.1, ``P = 1``).

        Call it before :meth:`advance` of the same cycle: Q's occupancy is the one at the
        start of the cycle."""
        return len(self.qin) < INGRESS_DEPTH and self.inflight < self.admission

    def accept(self, req: Request, t: int) -> None:
        """Accept ``req`` at this stack in cycle ``t``; it is in Q from ``t + 1``.

        ``req.t_accept`` is set by the system: it is the handshake at the system's port (v2
        §2), which is this stack's port when the system has one stack."""
        req.depth = self.inflight
        self.inflight += 1
        self.qin.append((req, t))

    def advance(self, t: int) -> bool:
        """Move Q's head into M at the end of cycle ``t`` if M is free (v2 §4.1).

        M is free when it was empty at the start of ``t`` or dispatched in ``t``, which is
        ``self.m is None`` once :meth:`dispatch` of ``t`` has run. A request accepted in
        ``t`` is not in Q before ``t + 1``."""
        qin = self.qin
        if self.m is None and qin and qin[0][1] < t:
            self.m = qin.popleft()[0]
            return True
        return False

    def holds_requests(self) -> bool:
        """``m_valid``: Q or M holds a request (v2 §1, for ``drain``)."""
        return self.m is not None or bool(self.qin)

    # ================================================== v2 §7 issue and its forwarding
    def issue(self, t: int) -> bool:
        """The issue decisions of cycle ``t`` (v2 §7; with ``multiplane``, MP1-MP5)."""
        if self.mp is not None:
            return self.mp.issue(t, self.drain_in)
        return super().issue(t)

    def next_timer(self, t: int) -> int | None:
        """Contract 1's timers and the end of a multi-plane gather window (MP4)."""
        n = super().next_timer(t)
        w = self.mp.next_wake() if self.mp is not None else None
        if w is None:
            return n
        w = max(w, t + 1)
        return w if n is None or w < n else n

    def release_media(self, t: int) -> bool:
        """Deliver the completions of cycle ``t`` and free their subarrays and active slots
        for the issue decision of the same cycle (v2 §7, the media side's forwarding)."""
        if self.mp is not None:
            return self.mp.release(t)
        due = self.media._due
        if not due or due[0][0] > t:
            return False
        self._delivered = self.media.deliver(t)
        for ch, sub, _tag, _flags in self._delivered:
            self.busy[ch].discard(sub)
            self.active[ch] -= 1
            self.active_sum -= 1
            self.issue_check.add(ch)
        return True

    def complete_entries(self, t: int) -> bool:
        """The entry side of this cycle's completions: RETURN from ``t + 1`` (v2 §4b)."""
        changed = self.mp.complete(t) if self.mp is not None else False
        for _ch, _sub, tag, flags in self._delivered:
            self._cpl_entry(t, tag, flags)
            changed = True
        self._delivered = []
        cd = self.cache_due
        while cd and cd[0][0] <= t:
            _, idx = heapq.heappop(cd)
            self._read_done(self.mshr[idx], t, 0)
            changed = True
        return changed

    # ============================================================ v2 §8 responses
    def respond_stages(self, t: int) -> bool:
        """K launches, then R chooses, in cycle ``t`` (v2 §8).

        K launches its waiter if the channel's credit allows and E held fewer than
        ``EGRESS_DEPTH`` responses at the start of ``t``. R takes the next waiter when it
        was empty at the start of ``t`` or its waiter moves to K in ``t``; a waiter R takes
        moves to K at the end of the cycle if K is free then (empty, or launched in ``t``),
        else R holds it."""
        changed = self._launch_stage(t)
        k_free = self.k_hold is None       # empty at the start of t, or launched in t
        if self.r_hold is not None:
            if k_free:
                self.k_hold = self.r_hold
                self.r_hold = self._choose()
                changed = True
        else:
            w = self._choose()
            if w is not None:
                if k_free:
                    self.k_hold = w
                else:
                    self.r_hold = w
                changed = True
        return changed

    def _launch_stage(self, t: int) -> bool:
        """K in cycle ``t`` (v2 §8): launch K's waiter if E held fewer than ``EGRESS_DEPTH``
        responses at the start of ``t`` and its channel's credit allows, charging the
        credit; return whether K launched (K is then free for R). Shared by the deeper
        pipeline (docs/timing-contract.md DP7: K and E as §8)."""
        self.credit_wait = None
        if self.k_hold is None:
            return False
        e, i = self.k_hold
        req = e.waiters[i]
        ch = e.ch
        occ = len(self.egress) + (1 if self._hs_t == t else 0)
        if occ >= EGRESS_DEPTH:
            return False                    # E full: no credit is charged (v2 §11.4)
        if self.link.allows(ch, t, req.nbytes):
            self.link.charge(ch, t, req.nbytes)
            self._launch(e, i, req, t)
            self.k_hold = None
            return True
        if self.blocked_since < 0:
            self.blocked_since = t
        self.credit_wait = self.link.wait(ch, req.nbytes)
        return False

    def _choose(self):
        """R's choice from start-of-cycle state: the next waiter of the entry it is draining,
        else of the lowest-index MSHR entry in RETURN, then write-buffer entry (v1 §8)."""
        cur = self.lock
        if cur is None:
            if self.ret_r:
                cur = self.mshr[heapq.heappop(self.ret_r)]
            elif self.ret_w:
                cur = self.wb[heapq.heappop(self.ret_w)]
            else:
                return None
        i = cur.head
        cur.head = i + 1
        self.lock = cur if i + 1 < len(cur.waiters) else None
        return cur, i

    def _launch(self, cur, i: int, req: Request, t: int) -> None:
        """Form ``req``'s response from its entry and put it into E (visible ``t + 1``); the
        entry is FREE from ``t + 1`` after its last waiter's launch (v2 §4.3, §4.4)."""
        if self.blocked_since >= 0:
            self.ch_link_stall[cur.ch] += t - self.blocked_since
            self.blocked_since = -1
        self._form_response(cur, i, req, self.egress)

    def _form_response(self, cur, i: int, req: Request, egress) -> None:
        """Fill ``req``'s response flags and data from its entry ``cur`` and append it to
        ``egress``; after the entry's last waiter (index ``i``) the entry joins this cycle's
        frees (v2 §4.3, §4.4; timing-contract.md DP4)."""
        req.error = bool(cur.flags & FLAG_ERROR)
        if cur.kind == 0:
            req.buffer_hit = bool(cur.flags & FLAG_BUFFER_HIT)
            req.cache_hit = cur.cache
            snap = cur.snap
            if snap is not None:
                req.data = snap[req.off:req.off + req.nbytes]
        req.entry_info = (cur.tq, cur.ti, cur.tc, cur.depth)
        egress.append(req)
        if i + 1 == len(cur.waiters):
            if cur.kind == 0:
                self._free_r.append(cur.idx)
            else:
                self._free_w.append(cur)

    def handshake(self, t: int) -> Request:
        """The ``resp`` handshake of E's head in cycle ``t``; it releases the admission slot,
        usable from ``t + 1`` (v2 §8, §4.1)."""
        req = self.egress.popleft()
        self._hs_t = t
        req.t_done = t
        self._released += 1
        self.on_response(req, t)
        return req

    # ================================================================ not in contract 2
    def response_candidate(self, t: int):
        raise TypeError("contract 2 responds through respond_stages() and handshake()")

    def complete(self, t: int) -> bool:
        raise TypeError("contract 2 completes through release_media() and complete_entries()")
