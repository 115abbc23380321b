"""Completions into the tables: a write-buffer entry completed in ``tc`` is in RETURN
from ``tc + 1``, an MSHR entry from ``tc + 2`` (it stays mergeable through ``tc + 1``); the
page cache's hits complete the same way; a multi-plane command completes every entry of its
group (docs/timing-contract.md §4.3 DP6, §4.4, §4b, §7a MP7; R4, W6).
"""

from __future__ import annotations

import heapq

from hbfsim.model.controller.request import RETURN, Entry
from hbfsim.model.media import FLAG_ERROR

__all__ = ["Completion"]


class Completion:
    """The entry side of the media completions (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

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
            self._write_done(self.wb[tag >> 1], t, flags)
        else:
            self._late.append((t + 1, self.mshr[tag >> 1], t, flags))
            self._wake_at(t + 1)

    def _write_done(self, e: Entry, t: int, flags: int) -> None:
        """Write-buffer entry ``e`` completed in ``t`` with ``flags``: RETURN from ``t + 1``
        (§4.4, W6); a programmed page enters the functional data and leaves the page cache
        (R4)."""
        e.state = RETURN
        e.tc = t
        e.flags = flags
        if not flags & FLAG_ERROR:
            self.data[e.q] = bytes(e.data)
            self.st["page_programs_ok"] += 1
        else:
            self.st["media_errors"] += 1
        if self.pc_size:
            self.page_cache.pop(e.q, None)
        heapq.heappush(self.ret_w, e.idx)

    def _read_done(self, e: Entry, t: int, flags: int) -> None:
        """MSHR entry ``e`` completed in ``tc = t`` with ``flags``, applied in ``tc + 1``
        (DP6): RETURN, no longer mergeable nor blocking a write of its page; the page
        enters the page cache (R4)."""
        e.state = RETURN
        e.tc = t
        e.flags = flags
        e.snap = self.data.get(e.q)
        if self.mshr_open.get(e.q) is e:
            del self.mshr_open[e.q]
        n = self.mshr_pend[e.q] - 1
        if n:
            self.mshr_pend[e.q] = n
        else:
            del self.mshr_pend[e.q]
        if self.pc_size and not e.cache:
            pc = self.page_cache
            pc[e.q] = None
            pc.move_to_end(e.q)
            if len(pc) > self.pc_size:
                pc.popitem(last=False)
        heapq.heappush(self.ret_r, e.idx)
