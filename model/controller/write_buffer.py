"""The write buffer's flush decisions: ``full``, ``raw``, ``pressure`` (the victim),
``deadline`` and ``drain``, decided from the start-of-cycle state and entering FLUSH two
cycles later; and §7's write-drain window, which opens on the buffer's occupancy
(docs/timing-contract.md §4.4 DP5, §4.2 write step 2 (the pressure victim), §5, §7; W2, W3).
"""

from __future__ import annotations

import heapq

from hbfsim.model.controller.request import FLUSH, OPEN, W_DELAY, Entry

__all__ = ["WriteBuffer"]


class WriteBuffer:
    """The write buffer's triggers (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

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
        if (not self.full_pending and not self._raw and not self.pressure_now
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
        for e in self.pressure_now:                      # one per pool (§4.5 B3)
            if e.state == OPEN and e.cause is None:
                dec.setdefault(e, "pressure")
        self._raw = []
        self.pressure_now = []
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

    def _flush(self, e: Entry, cause: str) -> None:
        """Entry ``e`` leaves OPEN for FLUSH with ``cause``, and the cause is counted (DP5:
        applied in the cycle after its decision, so FLUSH from the decision's cycle + 2)."""
        e.state = FLUSH
        e.cause = cause
        del self.wb_open[e.q]
        self.wb_flush.append(e)
        self.st["flush_" + cause] += 1

    def _pressure(self, t: int, pool: int) -> bool:
        """A write stalls for want of a free entry of ``pool`` in ``t``: DP5's pressure
        victim is the pool's oldest entry OPEN at the start of ``t`` (reading 3, §4.5 B3);
        one per pool and cycle, and none while a victim of the pool is pending."""
        if self.pressure_live[pool]:
            return False
        k = self.wb_k
        # smallest alloc in M's view (wb_open is in allocation order)
        o = next((e for e in self.wb_open.values() if e.idx // k == pool), None)
        if o is None or o.alloc > t - W_DELAY:
            return False                                 # none, or still in W: not OPEN
        o.pressure = True
        self.pressure_live[pool] = True
        if o.cause is None:
            self.pressure_now.append(o)                  # decided in wb_triggers of t
        return True

    def _drain_fsm(self, t: int) -> bool:
        """§7's write-drain window in the issue decision of cycle ``t``: closed -> open when
        the occupied write-buffer entries reach ``write_drain_high_water``, a PROGRAM is
        queued and the cooldown has passed; open -> closed when no PROGRAM is queued or the
        window has run. The occupied count has DP1's visibility: entries allocated in
        ``t - 1`` are still in W and not yet counted (reading 10)."""
        if not self.drain_open:
            used = self.wb_used
            if self._wb_alloc_t == t - 1:
                used -= self._wb_alloc_k
            if (used >= self.drain_hw and self.queued_programs
                    and t >= self.drain_cooldown):
                self.drain_open = True
                self.drain_start = t
                self.issue_check.update(ch for ch in range(self.C) if self.queue[ch])
                return True
        elif self.queued_programs == 0 or t >= self.drain_start + self.drain_window:
            self.drain_open = False
            self.drain_cooldown = t + self.drain_window
            self.issue_check.update(ch for ch in range(self.C) if self.queue[ch])
            return True
        return False
