"""The enqueue side of the tables and the enqueue arbiter: strict errors, the write
buffer's registered eligibility and offer registers ``O_c``, the MSHR offers (a FIFO in
allocation order for demand reads, a registered lowest-index offer ``OR_c`` under
aggregation) and per channel one enqueue a cycle, the MSHR candidate first
(docs/timing-contract.md §4.3 DP2 and DP2a, §4.4 DP3 and strict errors W3, §6; R2, W4).
"""

from __future__ import annotations

import heapq

from hbfsim.config import PAGE_BYTES
from hbfsim.model.controller.request import FULL_MASK, QUEUED, RETURN, W_DELAY, WAIT
from hbfsim.model.media import FLAG_ERROR

__all__ = ["Enqueue"]


class Enqueue:
    """The offers and the enqueue arbiter of every channel (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

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
