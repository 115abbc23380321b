"""The HBF stack controller under the one timing contract, the registered pipeline
(docs/timing-contract.md, rules DP1-DP7 and MP1-MP9) in both host-port shapes (``P = 1``
port per stack, ``P = C`` ports per stack) and every mode: demand and aggregation reads,
MSHR merging on or off, multi-plane commands; selected today by ``pipeline = "deep"``
(the contract's §18 step 2 makes it the only controller).

The decision rules and contract 2's stages are inherited from
:class:`hbfsim.model.controller_v2.PipelinedStackController`; this class registers the
decisions the contract registers: the dispatch written from W a cycle late (DP1), the MSHR
offers in allocation order (DP2) or through a registered lowest-index offer under
aggregation (DP2a), the write buffer's registered eligibility and offer registers (DP3),
free lists with one head per allocating port (DP4), registered flush decisions (DP5), the
MSHR's issue and completion events a cycle late (DP6) and the three-stage response choice
per response port (DP7). :func:`hbfsim.model.system_v2.run_pipelined` steps it, in the
phase order of timing-contract.md §16.
"""

from __future__ import annotations

import heapq
from collections import deque

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import (FREE, FULL_MASK, ISSUED, OPEN, QUEUED, RETURN, WAIT,
                                     Request, _Entry)
from hbfsim.model.controller_ports import ChannelStackController
from hbfsim.model.controller_v2 import EGRESS_DEPTH, PipelinedStackController
from hbfsim.model.media import FLAG_ERROR

__all__ = ["DeepStackController"]

#: Cycles from M's decision in ``tm`` to the cycle every rule but M sees it (DP1: W writes
#: the entry at the end of ``tm + 1``).
W_DELAY = 2
#: The two tables of DP7, in R's priority order (§8: MSHR entries before write-buffer ones).
MSHR_T, WB_T = 0, 1


class _DeepEntry(_Entry):
    """A write-buffer entry with DP3's and DP5's registered facts: ``w_merge``, the cycle
    of its last merge (in W during ``w_merge + 1``), and ``te``, the first cycle it was
    eligible (-1: not yet)."""

    __slots__ = ("w_merge", "te")


class _Port:
    """One request port and its response port (timing-contract.md §14).

    Members
    -------
    qin : deque of (Request, int)
        Q: accepted requests with their accept cycle.
    m : Request or None
        The dispatch register M.
    ret : (list, list)
        Heaps of the indices of the MSHR and write-buffer entries in RETURN that this port
        serves and that its ``C1`` has not taken yet.
    c1, c2, cursor : list
        DP7's registers per table (``[MSHR, write buffer]``): an entry, or for the cursor
        ``(entry, next waiter index)``, or None.
    r_hold, k_hold : (entry, int) or None
        The waiter in R and in K.
    egress : deque of Request
        E: launched responses in launch order.
    hs_t, blocked : int
        The cycle of the last handshake (E's start-of-cycle count) and the start of a credit
        stall (-1: none).
    """

    __slots__ = ("qin", "m", "ret", "c1", "c2", "cursor", "r_hold", "k_hold", "egress",
                 "hs_t", "blocked")

    def __init__(self):
        self.qin: deque[tuple[Request, int]] = deque()
        self.m: Request | None = None
        self.ret: tuple[list[int], list[int]] = ([], [])
        self.c1 = [None, None]
        self.c2 = [None, None]
        self.cursor = [None, None]
        self.r_hold = None
        self.k_hold = None
        self.egress: deque[Request] = deque()
        self.hs_t = -1
        self.blocked = -1

    def idle(self) -> bool:
        """Whether the choice registers hold nothing and no entry waits for ``C1`` (R and K
        are tested by the caller)."""
        c1, c2, cur, ret = self.c1, self.c2, self.cursor, self.ret
        return (c1[0] is None and c1[1] is None and c2[0] is None and c2[1] is None
                and cur[0] is None and cur[1] is None and not ret[0] and not ret[1])


class DeepStackController(PipelinedStackController):
    """The controller of one HBF stack under the registered pipeline (DP1-DP7), ``P``
    ports.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (``contract = 2``, ``pipeline = "deep"``; every host-port
        shape, read mode, merge setting and multi-plane mode).
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system.

    Members
    -------
    P : int
        Request and response ports: 1 in the stack shape, ``channels`` in the channel shape.
    inp : list of _Port
        Per port: Q, M and the response stages (port ``c`` serves the entries of channel
        ``c`` in the channel shape; port 0 serves every entry in the stack shape).
    ap_r, ap_w : int
        The allocation pointers of the MSHR pool and of the write buffer (§4.2.3).
    mshr_free, wb_free : deque of int
        DP4's free lists, ``0 .. N-1`` at reset; the k-th allocating port from the pool's
        pointer takes the k-th head; an entry freed in ``t`` joins the tail at the end of
        ``t``, entries freed in one cycle in ascending response port.
    offer_q : list of deque
        DP2 (demand reads): per channel the MSHR entries in WAIT in allocation order; the
        head is the channel's MSHR candidate from its ``alloc + 2``.
    offer_r : list
        DP2a's offer registers ``OR_c`` (aggregation reads): an entry or None.
    offer_wb : list
        DP3's offer registers ``O_c`` (an entry or None).

    Notes
    -----
    How the model represents W (DP1): M decides from the model's tables, which every
    dispatch updates at once (M's view: every decision of ``tm - 1`` counts as applied, so
    M decides as under ``standard``). Every other rule reads a decision of ``tm`` only from
    ``tm + 2``, through the entry's ``alloc``, ``full_at`` (coverage completed by a merge of
    ``tm``: ``tm + 2``), ``ready_at`` (DP2, DP2a) and ``w_merge`` (the last merge: in W
    during ``w_merge + 1``). The waiter lists are appended at once: nothing reads an
    entry's tail before W's write lands (DP6). In the channel shape the ports dispatch one
    after another in §4.2.3's and §4.2.4's order; a port's decision reaches another port's
    of the same cycle only through the free lists (the k-th head), the pressure victim (one
    per cycle) and, under a partition scheduler, a read's entry counted by the write of its
    page (reads first), as the contract says: two ports of one kind never hold one page.

    Readings of the contract where its text leaves a choice (each the one a registered
    RTL implements with the fewest extra terms):

    1. DP5 ``raw``: a read stalls on an OPEN entry of its page in M's view (§4.2 read
       step 1); the decision ``raw`` is taken only in a cycle in which that entry is OPEN
       for the flush decisions (``alloc <= t - 2``) with no decision pending. A read that
       stalls on an entry still in W waits a cycle without a decision. ``raw_events``
       counts each entry once, in the cycle of that decision, whatever cause wins.
    2. DP5 ``deadline`` with ``write_deadline_ticks = 1``: decided at ``alloc + 2``,
       the first cycle the entry is OPEN for the decision.
    3. DP5 pressure: the oldest OPEN entry at the start of ``tm`` is the first of M's
       OPEN entries if its ``alloc <= tm - 2``; if M's oldest OPEN entry is still in W no
       victim is chosen in ``tm`` (the write retries in ``tm + 1``). A pending victim
       (decision already pending) is marked as the victim (``pressure_live``) until FREE.
    4. DP5 / §4.4 strict errors: an entry with a merge in W in ``t`` is not errored in
       ``t`` (only possible in its first FLUSH cycle); it is errored in the first later
       cycle, as §4.4 (RETURN from the cycle after).
    5. DP5 flush counters count an entry when it enters FLUSH (``t + 2``), with the cause
       decided in ``t``.
    6. DP6's QUEUED -> ISSUED from ``td + 2`` has no observable effect in the model (no
       rule tells QUEUED from ISSUED: both are mergeable and block a write of the page),
       so the entry's state is set at the decision as under ``standard``.
    7. Model-only page cache (R4): a hit is a completion at ``tc = tm + cache_hit_ticks``
       and, like every MSHR completion, RETURN from ``tc + 2`` (DP6); it joins no offer.
    8. DP7's ``C1`` takes entries in RETURN that no ``C1`` took yet; such an entry has all
       its waiters untaken and is in none of ``C1``, ``C2``, cursor, so the rule's
       exclusions hold by construction.
    9. ``agg_wait`` (R2's ticks beyond demand) counts from demand's earliest enqueue,
       ``alloc + 2``, so demand reads add 0.
    10. §7's write-drain window counts occupied write-buffer entries with DP1's
        visibility: entries allocated in ``tm`` count from ``tm + 2`` (they leave the
        count, FREE, from the cycle after their last launch).
    11. DP2a: an entry's first ready cycle is ``ready_at = min(alloc + max(window, 2),
        tm + 2)`` over the dispatches ``tm`` (its allocation included) that bring its byte
        count to the threshold; it is a candidate from ``ready_at + 1``.
    12. Multi-plane commands (§7a, MP7): a group's write-buffer entries RETURN from
        ``tc + 1``, its MSHR entries from ``tc + 2`` (DP6), as if each entry's own
        completion had been delivered in ``tc``.
    """

    # The per-port request side of §4.1 (the admission term, the ready test, Q -> M and
    # m_valid) is the standard pipeline's channel shape's, on the same per-port ``inp``
    # (its methods move here when that class is deleted, timing-contract.md §18).
    ready_ports = ChannelStackController.ready_ports
    rank_tick = ChannelStackController.rank_tick
    room = ChannelStackController.room
    advance = ChannelStackController.advance
    holds_requests = ChannelStackController.holds_requests
    # and E's handshake per port (``outp`` is ``inp``: each _Port holds both sides)
    egress_heads = ChannelStackController.egress_heads
    handshake = ChannelStackController.handshake

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        super().__init__(cfg, stack, mapper, stats)
        C = self.C
        self.P = C if cfg.host_ports == "channel" else 1
        self.inp = [_Port() for _ in range(self.P)]
        self.outp = self.inp          # the response side of the same ports (E)
        # the stack shape's system calls ready(), accept() and reads egress: port 0's
        self.inp[0].qin = self.qin
        self.inp[0].egress = self.egress
        self.ap_r = self.ap_w = 0
        # the response ports whose stages hold or may take something (the rest are skipped)
        self._resp_live: set[int] = set()
        self.demand = cfg.read_mode == "demand"
        self.wb = [_DeepEntry(1, i) for i in range(cfg.write_buffer_entries)]
        # DP4: free lists in place of §4.2.3's lowest free entry
        self.mshr_free = deque(range(cfg.mshr_entries))
        self.wb_free = deque(range(cfg.write_buffer_entries))
        # DP2, DP2a, DP3: the enqueue arbiter's per-channel offers
        self.offer_q: list[deque] = [deque() for _ in range(C)]
        self.offer_r: list = [None] * C
        self.offer_wb: list = [None] * C
        # the channels whose offers hold or may take something (the arbiter skips the rest)
        self._busy_ch: set[int] = set()
        # DP2a: (ready_at, idx, alloc) of WAIT entries not yet candidates; per channel the
        # candidates' indices
        self._agg_timer: list[tuple[int, int, int]] = []
        self._agg_cand: list[list[int]] = [[] for _ in range(C)]
        # DP5: reads' raw decisions of this cycle; decisions of the previous cycle
        self._raw: list = []
        self._decided: list = []
        # DP6: MSHR completions of earlier cycles, (apply tick, entry, tc, flags)
        self._late: deque = deque()
        # write-buffer allocations of the last cycle that allocated (DP1, reading 10)
        self._wb_alloc_t = -1
        self._wb_alloc_k = 0
        # ticks at which a delayed effect lands (C3: nothing may be skipped past them)
        self._wake: list[int] = []

    def _wake_at(self, tick: int) -> None:
        heapq.heappush(self._wake, tick)

    # ============================================================ §4.1 ingress, Q, M
    def accept(self, req: Request, t: int, port: int = 0) -> None:
        """Accept ``req`` on port ``port`` in cycle ``t``; it is in that port's Q from
        ``t + 1`` (§4.1). The admission slot is the stack's (one count for all ports)."""
        req.depth = self.inflight
        self.inflight += 1
        self.inp[port].qin.append((req, t))

    # ============================================================ DP1 dispatch from M
    def dispatch(self, t: int, drain: bool) -> bool:
        """Every port's M decides in cycle ``t`` by §4.2 from M's view (DP1): the reads
        first, then the writes (§4.2.4), each kind's ports in order from its pool's
        pointer (§4.2.3: the k-th allocating port takes the k-th head of the free list)."""
        inp = self.inp
        if self.P == 1:
            port = inp[0]
            return port.m is not None and self._dispatch_one(port, t)
        changed = False
        held = [(p, port.m.op) for p, port in enumerate(inp) if port.m is not None]
        if not held:
            return False
        for kind in ("R", "W"):
            mine = [p for p, op in held if op == kind]
            if not mine:
                continue
            read = kind == "R"
            ap = self.ap_r if read else self.ap_w
            free = self.mshr_free if read else self.wb_free
            last = -1
            for p in [p for p in mine if p >= ap] + [p for p in mine if p < ap]:
                n_free = len(free)
                changed |= self._dispatch_one(inp[p], t)
                if len(free) < n_free:
                    last = p
            if last >= 0:
                if read:
                    self.ap_r = (last + 1) % self.P
                else:
                    self.ap_w = (last + 1) % self.P
        return changed

    def _dispatch_one(self, port: _Port, t: int) -> bool:
        """M of ``port`` in cycle ``t`` (§4.2, DP1); return whether any state changed.
        W's write is seen by every other rule from ``t + 2``."""
        m = port.m
        if m.t_accept >= t:
            return False
        q = m.q
        m.t_map = t
        if m.op == "R":
            if self.wb_page.get(q):  # read-after-write ordering: stall (§4.2 read step 1)
                o = self.wb_open.get(q)
                # DP5 raw: only for an entry OPEN for the decisions, none pending (reading 1)
                if o is not None and o.cause is None and o.alloc <= t - W_DELAY \
                        and o not in self._raw:
                    self._raw.append(o)
                    self.st["raw_events"] += 1
                    return True
                return False
            e = self.mshr_open.get(q) if self.merge else None
            if e is not None:
                m.mshr_hit = True
                e.waiters.append(m)
                e.bytes += m.nbytes
                self.mshr_hits += 1
                if not self.demand and e.state == WAIT and e.bytes >= self.agg_thr \
                        and t + W_DELAY < e.ready_at:
                    self._agg_ready(e, t + W_DELAY)        # DP2a, reading 11
            else:
                if not self.mshr_free:
                    return False
                e = self.mshr[self.mshr_free.popleft()]     # DP4: the next head
                self._new_read_entry(e, m, q, t)
                if self.merge:
                    self.mshr_open[q] = e
                self.mshr_pend[q] = self.mshr_pend.get(q, 0) + 1
                if self.pc_size and q in self.page_cache:
                    self.page_cache.move_to_end(q)
                    e.state = ISSUED
                    e.cache = True
                    e.tq = e.ti = t
                    self.st["page_cache_hits"] += 1
                    heapq.heappush(self.cache_due, (t + self.cache_ticks, e.idx))
                elif self.demand:
                    # DP2: joins its channel's offer queue at the end of t + 1 (W's write)
                    e.state = WAIT
                    e.ready_at = t + W_DELAY
                    self.offer_q[e.ch].append(e)
                    self._busy_ch.add(e.ch)
                    self._wake_at(t + W_DELAY)
                else:
                    # DP2a: ready by its bytes from t + 2, else by the window (reading 11)
                    e.state = WAIT
                    self._agg_ready(e, t + W_DELAY if e.bytes >= self.agg_thr
                                    else t + max(self.agg_window, W_DELAY))
        else:
            e = self.wb_open.get(q)
            if e is None:
                if not self.wb_free:
                    return self._pressure(t)
                e = self.wb[self.wb_free.popleft()]         # DP4: the next head
                self._new_write_entry(e, m, q, t)
                e.w_merge = -1
                e.te = -1
                self.wb_open[q] = e
                self.wb_page.setdefault(q, []).append(e)
                self.wb_used += 1
                if self._wb_alloc_t == t:
                    self._wb_alloc_k += 1
                else:
                    self._wb_alloc_t, self._wb_alloc_k = t, 1
                # DP5: OPEN for the decisions (deadline, drain, raw, victim) from t + 2
                heapq.heappush(self.wb_deadlines, (max(e.deadline, t + W_DELAY), t, e.idx))
                self._wake_at(t + W_DELAY)
            else:
                e.w_merge = t                 # in W during t + 1 (DP3, DP5)
                self._wake_at(t + W_DELAY)
            off = m.off
            n = m.nbytes
            e.waiters.append(m)
            if m.data is not None:
                e.data[off:off + n] = m.data
            before = e.cov
            e.cov = before | (((1 << n) - 1) << off)
            self.st["coverage_new_bytes"] += e.cov.bit_count() - before.bit_count()
            if e.cov == FULL_MASK and before != FULL_MASK:
                e.full_at = t + W_DELAY       # DP5 full: merges decided up to t - 2
                self.full_pending.append(e)
        port.m = None
        return True

    def _agg_ready(self, e, ready_at: int) -> None:
        """DP2a: entry ``e`` is ready from ``ready_at`` (reading 11), a candidate for its
        channel's ``OR_c`` from ``ready_at + 1``."""
        e.ready_at = ready_at
        heapq.heappush(self._agg_timer, (ready_at, e.idx, e.alloc))
        self._wake_at(ready_at + 1)

    def _pressure(self, t: int) -> bool:
        """A write stalls for want of a free entry in ``t``: DP5's pressure victim is the
        oldest entry OPEN at the start of ``t`` (reading 3); one per cycle, and none while
        a victim is pending."""
        if self.pressure_live or not self.wb_open:
            return False
        o = next(iter(self.wb_open.values()))          # smallest alloc (M's view)
        if o.alloc > t - W_DELAY:
            return False                                 # still in W: not OPEN for DP5
        o.pressure = True
        self.pressure_live = True
        if o.cause is None:
            self.pressure_now = o                        # decided in wb_triggers of t
        return True

    def _drain_fsm(self, t: int) -> bool:
        """§7's write-drain window with DP1's visibility: entries allocated in ``t - 1`` are
        still in W and not yet counted among the occupied entries (reading 10)."""
        if self._wb_alloc_t == t - 1 and not self.drain_open:
            k = self._wb_alloc_k
            self.wb_used -= k
            try:
                return super()._drain_fsm(t)
            finally:
                self.wb_used += k
        return super()._drain_fsm(t)

    # ============================================================ DP5 flush decisions
    def wb_triggers(self, t: int, drain: bool) -> bool:
        """Apply the flush decisions of ``t - 1`` (FLUSH from ``t + 1``), then take those of
        ``t`` from the start-of-``t`` state (DP5), cause by §4.4's priority."""
        changed = False
        if self._decided:
            for e in self._decided:
                self._flush(e, e.cause)   # FLUSH and counted from t + 1 (decided t - 1)
            self._decided = []
            changed = True
        dl = self.wb_deadlines
        if (not self.full_pending and not self._raw and self.pressure_now is None
                and not (dl and dl[0][0] <= t) and not (drain and self.wb_open)):
            return changed
        dec: dict = {}
        # §4.4's priority: full, raw, pressure, deadline, drain (insertion order wins)
        if self.full_pending:
            keep = []
            for e in self.full_pending:
                if e.state != OPEN or e.cause is not None:
                    continue
                if e.full_at <= t:
                    dec.setdefault(e, "full")
                else:
                    keep.append(e)
            self.full_pending = keep
        for e in self._raw:
            if e.state == OPEN and e.cause is None:
                dec.setdefault(e, "raw")
        e = self.pressure_now
        if e is not None and e.state == OPEN and e.cause is None:
            dec.setdefault(e, "pressure")
        self._raw = []
        self.pressure_now = None
        while dl and dl[0][0] <= t:
            _, alloc, idx = heapq.heappop(dl)
            e = self.wb[idx]
            if e.state == OPEN and e.alloc == alloc and e.cause is None \
                    and t >= e.deadline:
                dec.setdefault(e, "deadline")
        if drain:
            for e in self.wb_open.values():
                if e.cause is None and e.alloc <= t - W_DELAY:
                    dec.setdefault(e, "drain")
        for e, cause in dec.items():
            e.cause = cause               # pending: OPEN through t + 1, FLUSH from t + 2
            self._decided.append(e)
            changed = True
        return changed

    # ============================================================ DP2, DP2a, DP3 enqueue
    def enqueue(self, t: int) -> bool:
        """Strict errors, write-buffer eligibility and offer registers (DP3), aggregation
        candidates (DP2a), and per channel the arbiter: the MSHR candidate (DP2's queue
        head or ``OR_c``) first, else ``O_c`` (§6)."""
        changed = False
        cands: dict[int, list] = {}
        if self.wb_flush:
            keep = []
            for e in self.wb_flush:
                if e.te < 0:
                    if e.w_merge == t - 1:
                        # DP5: a merge in W: neither eligible nor errored in t
                        keep.append(e)
                        self._wake_at(t + 1)
                        continue
                    if e.cov != FULL_MASK and self.strict:
                        e.state = RETURN               # §4.4 W3, RETURN from t + 1
                        e.flags = FLAG_ERROR
                        e.tc = t
                        self.st["strict_errors"] += 1
                        heapq.heappush(self.ret_w, e.idx)
                        changed = True
                        continue
                    if self.wb_page[e.q][0] is e and e.q not in self.mshr_pend:
                        e.te = t                       # eligible: a candidate from t + 1
                        changed = True
                elif e.te < t:
                    cands.setdefault(e.ch, []).append(e)
                keep.append(e)
            self.wb_flush = keep
        agg = not self.demand
        busy = self._busy_ch
        if agg:
            at = self._agg_timer
            while at and at[0][0] < t:                 # ready in t - 1 or before: candidate
                ready_at, idx, alloc = heapq.heappop(at)
                e = self.mshr[idx]
                if e.state == WAIT and e.alloc == alloc and e.ready_at == ready_at:
                    heapq.heappush(self._agg_cand[e.ch], idx)
                    busy.add(e.ch)
        if cands:
            busy.update(cands)
        if not busy:
            return changed
        offer_q, offer_r, offer_wb = self.offer_q, self.offer_r, self.offer_wb
        agg_cand = self._agg_cand
        for ch in sorted(busy) if len(busy) > 1 else list(busy):
            if agg:
                head = offer_r[ch]
            else:
                head = offer_q[ch][0] if offer_q[ch] else None
                if head is not None and head.ready_at > t:
                    head = None                        # still in W (DP2)
            held = offer_wb[ch]
            took_r = took_held = False
            occ = len(self.queue[ch]) + (self.issued_k[ch] if self.issued_at[ch] == t else 0)
            if occ < self.qdepth:
                if head is not None:
                    if agg:
                        offer_r[ch] = None
                    else:
                        offer_q[ch].popleft()
                    self._enqueue_one(head, t)
                    took_r = changed = True
                elif held is not None:
                    self.wb_flush.remove(held)
                    self._enqueue_one(held, t)
                    took_held = changed = True
            if agg and (head is None or took_r) and agg_cand[ch]:
                # OR_c takes the lowest-index candidate (DP2a); its own entry left the heap
                offer_r[ch] = self.mshr[heapq.heappop(agg_cand[ch])]
                changed = True
            if held is None or took_held:
                # O_c takes the lowest-index candidate other than its own (DP3)
                best = None
                for e in cands.get(ch, ()):
                    if e is not held and (best is None or e.idx < best.idx):
                        best = e
                if best is not held:
                    offer_wb[ch] = best
                    changed = True
            if not (offer_q[ch] or offer_r[ch] is not None or offer_wb[ch] is not None
                    or agg_cand[ch]):
                busy.discard(ch)
        return changed

    def _enqueue_one(self, e, t: int) -> None:
        """Put ``e`` into its channel's queue in ``t`` (§6)."""
        ch = e.ch
        if e.kind == 0:
            self.agg_wait += t - e.alloc - W_DELAY      # reading 9
        else:
            self.queued_programs += 1
            if e.cov != FULL_MASK:
                self.st["partial_programs"] += 1
                self.st["padding_bytes"] += PAGE_BYTES - e.cov.bit_count()
        e.state = QUEUED
        e.tq = t
        self.queue[ch].append(e)
        e.depth = len(self.queue[ch])
        self.issue_check.add(ch)

    # ============================================================ DP6 completions
    def complete_entries(self, t: int) -> bool:
        """The entry side of completions: a write-buffer entry completed in ``t`` is in
        RETURN from ``t + 1`` (§4.4); an MSHR entry completed in ``tc`` from ``tc + 2``
        (DP6), applied here in ``tc + 1``, after that cycle's dispatch (which still
        merges). A multi-plane command completes each entry of its group so (MP7,
        reading 12)."""
        changed = False
        late = self._late
        while late and late[0][0] <= t:
            _, e, tc, flags = late.popleft()
            self._read_done(e, tc, flags)
            changed = True
        for _ch, _sub, tag, flags in self._delivered:
            self._complete_tag(t, tag, flags)
            changed = True
        self._delivered = []
        if self.mp is not None and self.mp.delivered:
            for _ch, _g, tags, flags in self.mp.delivered:
                for tag, f in zip(tags, flags):
                    self._complete_tag(t, tag, f)
            self.mp.delivered = []
            changed = True
        cd = self.cache_due
        while cd and cd[0][0] <= t:
            tc, idx = heapq.heappop(cd)
            late.append((t + 1, self.mshr[idx], tc, 0))   # reading 7
            self._wake_at(t + 1)
            changed = True
        return changed

    def _complete_tag(self, t: int, tag: int, flags: int) -> None:
        """The completion of the operation ``tag`` delivered in ``t``: a write-buffer entry
        now, an MSHR entry in ``t + 1`` (DP6)."""
        if tag & 1:
            self._cpl_entry(t, tag, flags)
        else:
            self._late.append((t + 1, self.mshr[tag >> 1], t, flags))
            self._wake_at(t + 1)

    # ============================================================ DP7 responses
    def respond_stages(self, t: int) -> bool:
        """Every response port in cycle ``t``: K launches (§8), R moves to K and takes a
        table's offer, then each table's ``C2`` and ``C1`` (DP7), all from the
        start-of-``t`` registers. Entries that entered RETURN before ``t`` first go to the
        port that serves them."""
        inp = self.inp
        live = self._resp_live
        if self.ret_r or self.ret_w:
            mshr, wb = self.mshr, self.wb
            one = self.P == 1
            while self.ret_r:
                idx = heapq.heappop(self.ret_r)
                p = 0 if one else mshr[idx].ch
                heapq.heappush(inp[p].ret[MSHR_T], idx)
                live.add(p)
            while self.ret_w:
                idx = heapq.heappop(self.ret_w)
                p = 0 if one else wb[idx].ch
                heapq.heappush(inp[p].ret[WB_T], idx)
                live.add(p)
        changed = False
        wait = None
        if not live:
            self.credit_wait = None
            return False
        for p in sorted(live) if len(live) > 1 else list(live):
            port = inp[p]
            changed |= self._port_stages(port, t)
            if port.k_hold is None and port.r_hold is None and port.idle():
                live.discard(p)
            elif port.blocked >= 0 and port.k_hold is not None:
                e, i = port.k_hold
                w = self.link.wait(e.ch, e.waiters[i].nbytes)
                if wait is None or w < wait:
                    wait = w
        self.credit_wait = wait
        return changed

    def _port_stages(self, port: _Port, t: int) -> bool:
        """K, R, then ``C2`` and ``C1`` of both tables on ``port`` in cycle ``t`` (DP7)."""
        changed = self._launch_port(port, t)
        k_free = port.k_hold is None
        r_takes = port.r_hold is None
        if not r_takes and k_free:
            port.k_hold = port.r_hold      # at least one cycle in R (DP7)
            port.r_hold = None
            r_takes = changed = True
        c1, c2, cursor = port.c1, port.c2, port.cursor
        first_taken = [False, False]
        if r_takes:
            # the table whose cursor holds an entry, else MSHR, else write buffer (§8)
            if cursor[MSHR_T] is not None:
                tb = MSHR_T
            elif cursor[WB_T] is not None:
                tb = WB_T
            elif c2[MSHR_T] is not None:
                tb = MSHR_T
            elif c2[WB_T] is not None:
                tb = WB_T
            else:
                tb = None
            if tb is not None:
                cur = cursor[tb]
                if cur is not None:
                    e, i = cur
                else:
                    e, i = c2[tb], 0
                    first_taken[tb] = True
                port.r_hold = (e, i)
                cursor[tb] = (e, i + 1) if i + 1 < len(e.waiters) else None
                changed = True
        ret = port.ret
        for tb in (MSHR_T, WB_T):
            a = c1[tb]
            if a is None and c2[tb] is None and not ret[tb]:
                continue                   # nothing in this table's choice registers
            moves = c2[tb] is None or first_taken[tb]
            if moves and (a is not None or c2[tb] is not None):
                c2[tb] = a                 # reads the entry's head, tail and flags
                changed = True
            if a is None or moves:         # C1 empty, or its entry moved to C2
                heap = ret[tb]
                if heap:
                    c1[tb] = (self.mshr if tb == MSHR_T else self.wb)[heapq.heappop(heap)]
                    changed = True
                elif a is not None:
                    c1[tb] = None
                    changed = True
        return changed

    def _launch_port(self, port: _Port, t: int) -> bool:
        """K of ``port`` in cycle ``t`` (§8): launch its waiter if E held fewer than
        ``EGRESS_DEPTH`` responses at the start of ``t`` and the channel's credit is
        positive, charging the credit; return whether it launched."""
        if port.k_hold is None:
            return False
        e, i = port.k_hold
        req = e.waiters[i]
        ch = e.ch
        if len(port.egress) + (1 if port.hs_t == t else 0) >= EGRESS_DEPTH:
            return False                    # E full: no credit is charged (§8)
        if not self.link.launch(ch, t, req.nbytes):     # allows, then charges
            if port.blocked < 0:
                port.blocked = t
            return False
        if port.blocked >= 0:
            self.ch_link_stall[ch] += t - port.blocked
            port.blocked = -1
        self._form_response(e, i, req, port.egress)
        port.k_hold = None
        return True

    # ============================================================ DP4 end of cycle
    def end_cycle(self) -> None:
        """Admission releases and frees of this cycle; a freed entry joins its pool's free
        list at the tail (DP4), allocatable from the next cycle; entries freed in one cycle
        join in ascending response port, the order in which the ports launched."""
        if not (self._released or self._free_r or self._free_w):
            return
        if self._released:
            self.inflight -= self._released
            self._released = 0
        for idx in self._free_r:
            self.mshr[idx].state = FREE
            self.mshr[idx].waiters = None
            self.mshr_free.append(idx)
        self._free_r.clear()
        for e in self._free_w:
            e.state = FREE
            lst = self.wb_page[e.q]
            lst.remove(e)
            if not lst:
                del self.wb_page[e.q]
            if e.pressure:
                self.pressure_live = False
            e.waiters = None
            e.data = None
            self.wb_used -= 1
            self.wb_free.append(e.idx)
        self._free_w.clear()

    # ============================================================ event skipping (C3)
    def next_timer(self, t: int) -> int | None:
        """Contract 2's timers and every delayed effect of DP1-DP6 still to land."""
        n = super().next_timer(t)
        w = self._wake
        while w and w[0] <= t:
            heapq.heappop(w)
        if w and (n is None or w[0] < n):
            n = w[0]
        return n

    # ================================================================ not in this contract
    def _choose(self):
        raise TypeError("the registered pipeline chooses responses through DP7's registers")
