"""Dispatch from M: every port's dispatch register decides from M's view, W writes the
decision a cycle later, and the allocation from the pools' free lists (docs/timing-contract.md
§4.2 read steps 1-3 and write steps 1-2, DP1, §4.2.3 DP4, §4.2.4; R1, W1; the aggregation
readiness of §4.3 DP2a; the model-only page cache, R4).

How the model represents W (DP1): M decides from the model's tables, which every dispatch
updates at once (M's view: every decision of ``tm - 1`` counts as applied). Every other rule
reads a decision of ``tm`` only from ``tm + 2``, through the entry's ``alloc``, ``full_at``
(coverage completed by a merge of ``tm``: ``tm + 2``), ``ready_at`` (DP2, DP2a) and
``w_merge`` (the last merge: in W during ``w_merge + 1``). The waiter lists are appended at
once: nothing reads an entry's tail before W's write lands (DP6). In the channel shape the
ports dispatch one after another in §4.2.3's and §4.2.4's order; a port's decision reaches
another port's of the same cycle only through the free lists (the k-th head), the pressure
victim (one per cycle) and, under a partition scheduler, a read's entry counted by the write
of its page (reads first), as the contract says: two ports of one kind never hold one page.
"""

from __future__ import annotations

import heapq

from hbfsim.config import PAGE_BYTES
from hbfsim.model.controller.ports import Port
from hbfsim.model.controller.request import FULL_MASK, ISSUED, OPEN, W_DELAY, WAIT, Entry, Request

__all__ = ["Dispatch"]


class Dispatch:
    """M and W of every port (a stage of :class:`~hbfsim.model.controller.StackController`)."""

    def dispatch(self, t: int, drain: bool) -> bool:
        """Every port's M decides in cycle ``t`` by §4.2 from M's view (DP1): the reads
        first, then the writes (§4.2.4), each kind's ports in order from its pool's
        pointer (§4.2.3: the k-th allocating port takes the k-th head of the free list).
        With a pool per channel (§4.5) each port allocates from its own pool, no pointer,
        and the ports go in ascending order (B4)."""
        ports = self.ports
        if self.P == 1:
            port = ports[0]
            return port.m is not None and self._dispatch_one(port, t)
        changed = False
        held = [(p, port.m.op) for p, port in enumerate(ports) if port.m is not None]
        if not held:
            return False
        for kind in ("R", "W"):
            mine = [p for p, op in held if op == kind]
            if not mine:
                continue
            if self.pools > 1:
                for p in mine:
                    changed |= self._dispatch_one(ports[p], t)
                continue
            read = kind == "R"
            ap = self.ap_r if read else self.ap_w
            free = (self.mshr_free if read else self.wb_free)[0]
            last = -1
            for p in [p for p in mine if p >= ap] + [p for p in mine if p < ap]:
                n_free = len(free)
                changed |= self._dispatch_one(ports[p], t)
                if len(free) < n_free:
                    last = p
            if last >= 0:
                if read:
                    self.ap_r = (last + 1) % self.P
                else:
                    self.ap_w = (last + 1) % self.P
        return changed

    def _dispatch_one(self, port: Port, t: int) -> bool:
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
                free = self.mshr_free[m.ch % self.pools]    # the read channel's (§4.5 B2)
                if not free:
                    return False
                e = self.mshr[free.popleft()]               # DP4: the next head
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
                pool = m.ch % self.pools                    # the write channel's (§4.5 B2)
                free = self.wb_free[pool]
                if not free:
                    return self._pressure(t, pool)
                e = self.wb[free.popleft()]                 # DP4: the next head
                self._new_write_entry(e, m, q, t)
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

    @staticmethod
    def _new_read_entry(e: Entry, m: Request, q: int, t: int) -> None:
        """Fill MSHR entry ``e``, allocated in ``t`` for read ``m`` of page ``q`` (§4.2 read
        step 3); the caller sets its state and its readiness."""
        e.q, e.ch, e.sub, e.local = q, m.ch, m.sub, m.local
        e.waiters = [m]
        e.bytes = m.nbytes
        e.alloc = t
        e.flags = 0
        e.cache = False
        e.snap = None
        e.tq = e.ti = e.tc = -1
        e.depth = 0

    def _new_write_entry(self, e: Entry, m: Request, q: int, t: int) -> None:
        """Fill write-buffer entry ``e``, allocated OPEN in ``t`` for write ``m`` of page
        ``q`` (§4.2 write step 2, W1); the caller merges ``m`` into it."""
        e.q, e.ch, e.sub, e.local = q, m.ch, m.sub, m.local
        e.state = OPEN
        e.waiters = []
        e.cov = 0
        e.data = bytearray(PAGE_BYTES)
        e.alloc = t
        e.deadline = t + self.cfg.write_deadline_ticks
        e.cause = None
        e.pressure = False
        e.full_at = -1
        e.w_merge = -1
        e.te = -1
        e.flags = 0
        e.tq = e.ti = e.tc = -1
        e.depth = 0
