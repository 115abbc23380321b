"""The HBF stack controller under Amendment A to timing contract 2, the deeper pipeline
(``pipeline = "deep"``, docs/timing-contract.md rules DP1-DP7; stack shape, demand
reads, merging, multi-plane off).

The decision rules and contract 2's stages are inherited from
:class:`hbfsim.model.controller_v2.PipelinedStackController`; this class registers the
decisions the amendment registers: the dispatch written from W a cycle late (DP1), the
MSHR offers in allocation order (DP2), the write buffer's registered eligibility and offer
registers (DP3), free lists (DP4), registered flush decisions (DP5), the MSHR's issue and
completion events a cycle late (DP6) and the three-stage response choice (DP7).
:func:`hbfsim.model.system_v2.run_pipelined` steps it, in the phase order of
timing-contract.md §16.
"""

from __future__ import annotations

import heapq
from collections import deque

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import (FREE, FULL_MASK, ISSUED, OPEN, QUEUED, RETURN, WAIT,
                                     _Entry)
from hbfsim.model.controller_v2 import PipelinedStackController
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


class DeepStackController(PipelinedStackController):
    """The controller of one HBF stack under Amendment A (DP1-DP7), stack shape.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (``contract = 2``, ``host_ports = "stack"``, ``pipeline =
        "deep"``, ``read_mode = "demand"``, ``mshr_merge = true``, ``multiplane = "off"``;
        :mod:`hbfsim.config` refuses the rest).
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system.

    Members
    -------
    mshr_free, wb_free : deque of int
        DP4's free lists, ``0 .. N-1`` at reset; allocation takes the head, an entry freed
        in ``t`` joins the tail at the end of ``t``.
    offer_q : list of deque
        DP2: per channel the MSHR entries in WAIT in allocation order; the head is the
        channel's MSHR candidate from its ``alloc + 2``.
    offer_wb : list
        DP3's offer registers ``O_c`` (an entry or None).
    c1, c2 : list
        DP7's choice registers per table (``[MSHR, write buffer]``), an entry or None.
    cursor : list
        DP7's drain cursor per table: ``(entry, next waiter index)`` or None.
    r_hold, k_hold : (entry, int) or None
        The waiter in R and in K (DP7, §8).

    Notes
    -----
    How the model represents W (DP1): M decides from the model's tables, which every
    dispatch updates at once (M's view: its own decision of ``tm - 1`` counts as applied,
    so M decides as under ``standard``). Every other rule reads a decision of ``tm`` only
    from ``tm + 2``, through the entry's ``alloc``, ``full_at`` (coverage completed by a
    merge of ``tm``: ``tm + 2``) and ``w_merge`` (the last merge: in W during
    ``w_merge + 1``). The waiter lists are appended at once: nothing reads an entry's tail
    before W's write lands (DP6).

    Readings of the amendment where its text leaves a choice (each the one a registered
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
       and, like every MSHR completion, RETURN from ``tc + 2`` (DP6); it joins no offer
       queue.
    8. DP7's ``C1`` takes entries in RETURN that no ``C1`` took yet; such an entry has all
       its waiters untaken and is in none of ``C1``, ``C2``, cursor, so the rule's
       exclusions hold by construction.
    9. ``agg_wait`` (R2's ticks beyond demand) counts from DP2's earliest enqueue,
       ``alloc + 2``, so demand reads add 0 as under ``standard``.
    10. §7's write-drain window counts occupied write-buffer entries with DP1's
        visibility: an entry allocated in ``tm`` counts from ``tm + 2`` (it leaves the
        count, FREE, from the cycle after its last launch, as under ``standard``).
    """

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        super().__init__(cfg, stack, mapper, stats)
        C = self.C
        self.wb = [_DeepEntry(1, i) for i in range(cfg.write_buffer_entries)]
        # DP4: free lists in place of §4.2.3's lowest free entry
        self.mshr_free = deque(range(cfg.mshr_entries))
        self.wb_free = deque(range(cfg.write_buffer_entries))
        # DP2, DP3: the enqueue arbiter's per-channel offers
        self.offer_q: list[deque] = [deque() for _ in range(C)]
        self.offer_wb: list = [None] * C
        # DP5: decisions of the previous cycle, applied at the end of this one
        self._decided: list = []
        # DP6: MSHR completions of earlier cycles, (apply tick, entry, tc, flags)
        self._late: deque = deque()
        # DP7: per table C1, C2 and the drain cursor
        self.c1 = [None, None]
        self.c2 = [None, None]
        self.cursor = [None, None]
        # cycle of the last write-buffer allocation (W: counted by write-drain from t + 2)
        self._wb_alloc_t = -1
        # ticks at which a delayed effect lands (C3: nothing may be skipped past them)
        self._wake: list[int] = []

    def _wake_at(self, tick: int) -> None:
        heapq.heappush(self._wake, tick)

    # ============================================================ DP1 dispatch from M
    def dispatch(self, t: int, drain: bool) -> bool:
        """M's decision of cycle ``t`` by §4.2 from M's view (DP1); W's write is seen by
        every other rule from ``t + 2``."""
        self.dispatched = False
        m = self.m
        if m is None or m.t_accept >= t:
            return False
        q = m.q
        m.t_map = t
        if m.op == "R":
            if self.wb_page.get(q):  # read-after-write ordering: stall (§4.2 read step 1)
                o = self.wb_open.get(q)
                # DP5 raw: only for an entry OPEN for the decisions, none pending (reading 1)
                if o is not None and o.cause is None and o.alloc <= t - W_DELAY:
                    self.raw_now = o
                    self.st["raw_events"] += 1
                    return True
                return False
            e = self.mshr_open.get(q)
            if e is not None:
                m.mshr_hit = True
                e.waiters.append(m)
                e.bytes += m.nbytes
                self.mshr_hits += 1
            else:
                if not self.mshr_free:
                    return False
                e = self.mshr[self.mshr_free.popleft()]     # DP4: the head of the list
                self._new_read_entry(e, m, q, t)
                self.mshr_open[q] = e
                self.mshr_pend[q] = self.mshr_pend.get(q, 0) + 1
                if self.pc_size and q in self.page_cache:
                    self.page_cache.move_to_end(q)
                    e.state = ISSUED
                    e.cache = True
                    e.tq = e.ti = t
                    self.st["page_cache_hits"] += 1
                    heapq.heappush(self.cache_due, (t + self.cache_ticks, e.idx))
                else:
                    # DP2: joins its channel's offer queue at the end of t + 1 (W's write)
                    e.state = WAIT
                    e.ready_at = t + W_DELAY
                    self.offer_q[e.ch].append(e)
                    self._wake_at(t + W_DELAY)
        else:
            e = self.wb_open.get(q)
            if e is None:
                if not self.wb_free:
                    return self._pressure(t)
                e = self.wb[self.wb_free.popleft()]         # DP4: the head of the list
                self._new_write_entry(e, m, q, t)
                e.w_merge = -1
                e.te = -1
                self.wb_open[q] = e
                self.wb_page.setdefault(q, []).append(e)
                self.wb_used += 1
                self._wb_alloc_t = t
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
        self.m = None
        self.dispatched = True
        return True

    def _pressure(self, t: int) -> bool:
        """A write stalls for want of a free entry in ``t``: DP5's pressure victim is the
        oldest entry OPEN at the start of ``t`` (reading 3)."""
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
        """§7's write-drain window with DP1's visibility: an entry allocated in ``t - 1``
        is still in W and not yet counted among the occupied entries (reading 10)."""
        if self._wb_alloc_t == t - 1 and not self.drain_open:
            self.wb_used -= 1
            try:
                return super()._drain_fsm(t)
            finally:
                self.wb_used += 1
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
        if (not self.full_pending and self.raw_now is None and self.pressure_now is None
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
        for e, cause in ((self.raw_now, "raw"), (self.pressure_now, "pressure")):
            if e is not None and e.state == OPEN and e.cause is None:
                dec.setdefault(e, cause)
        self.raw_now = self.pressure_now = None
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

    # ============================================================ DP2, DP3 enqueue
    def enqueue(self, t: int) -> bool:
        """Strict errors, write-buffer eligibility and offer registers (DP3), and per
        channel the arbiter: the MSHR offer queue's head (DP2) first, else ``O_c``."""
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
        offer_q, offer_wb = self.offer_q, self.offer_wb
        for ch in range(self.C):
            head = offer_q[ch][0] if offer_q[ch] else None
            if head is not None and head.alloc + W_DELAY > t:
                head = None                            # still in W (DP2)
            held = offer_wb[ch]
            if head is None and held is None and ch not in cands:
                continue
            took_held = False
            occ = len(self.queue[ch]) + (self.issued_k[ch] if self.issued_at[ch] == t else 0)
            if occ < self.qdepth:
                if head is not None:
                    offer_q[ch].popleft()
                    self._enqueue_one(head, t)
                    changed = True
                elif held is not None:
                    self.wb_flush.remove(held)
                    self._enqueue_one(held, t)
                    took_held = changed = True
            if held is None or took_held:
                # O_c takes the lowest-index candidate other than its own (DP3)
                best = None
                for e in cands.get(ch, ()):
                    if e is not held and (best is None or e.idx < best.idx):
                        best = e
                if best is not held:
                    offer_wb[ch] = best
                    changed = True
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
        merges)."""
        changed = False
        late = self._late
        while late and late[0][0] <= t:
            _, e, tc, flags = late.popleft()
            self._read_done(e, tc, flags)
            changed = True
        for _ch, _sub, tag, flags in self._delivered:
            if tag & 1:
                self._cpl_entry(t, tag, flags)
            else:
                late.append((t + 1, self.mshr[tag >> 1], t, flags))
                self._wake_at(t + 1)
            changed = True
        self._delivered = []
        cd = self.cache_due
        while cd and cd[0][0] <= t:
            tc, idx = heapq.heappop(cd)
            late.append((t + 1, self.mshr[idx], tc, 0))   # reading 7
            self._wake_at(t + 1)
            changed = True
        return changed

    # ============================================================ DP7 responses
    def respond_stages(self, t: int) -> bool:
        """K launches (§8), R moves to K and takes a table's offer, then each table's
        ``C2`` and ``C1`` (DP7), all from the start-of-``t`` registers."""
        changed = self._launch_stage(t)
        k_free = self.k_hold is None
        r_takes = self.r_hold is None
        if not r_takes and k_free:
            self.k_hold = self.r_hold      # at least one cycle in R (DP7)
            self.r_hold = None
            r_takes = changed = True
        c1, c2, cursor = self.c1, self.c2, self.cursor
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
                self.r_hold = (e, i)
                cursor[tb] = (e, i + 1) if i + 1 < len(e.waiters) else None
                changed = True
        for tb, heap, table in ((MSHR_T, self.ret_r, self.mshr), (WB_T, self.ret_w, self.wb)):
            moves = c2[tb] is None or first_taken[tb]
            if moves and (c2[tb] is not None or c1[tb] is not None):
                c2[tb] = c1[tb]            # reads the entry's head, tail and flags
                c1_moves = c1[tb] is not None
                changed = True
            else:
                c1_moves = False
            if (c1[tb] is None or c1_moves) and (heap or c1[tb] is not None):
                c1[tb] = table[heapq.heappop(heap)] if heap else None
                changed = True
        return changed

    # ============================================================ DP4 end of cycle
    def end_cycle(self) -> None:
        """Admission releases and frees of this cycle; a freed entry joins its pool's free
        list at the tail (DP4), allocatable from the next cycle."""
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

    # ================================================================ not in Amendment A
    def _choose(self):
        raise TypeError("pipeline = 'deep' chooses responses through DP7's registers")
