"""The response side of every port: per table the choice registers ``C1`` and ``C2`` and
the drain cursor, then ``R`` (choose), ``K`` (launch, with the channel's link credit) and
the egress queue ``E`` with its ``resp[p]`` handshake (docs/timing-contract.md §8 DP7, the
link credit of §8 and §15, §12; L2).
"""

from __future__ import annotations

import heapq

from hbfsim.model.controller.ports import EGRESS_DEPTH, MSHR_T, WB_T, Port
from hbfsim.model.controller.request import Request
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR

__all__ = ["Response"]


class Response:
    """DP7's stages and E on every response port (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

    def egress_heads(self):
        """The ports whose E holds a response (``resp[p].valid``)."""
        return [p for p, port in enumerate(self.ports) if port.egress]

    def handshake(self, t: int, port: int = 0) -> Request:
        """The ``resp[port]`` handshake of its E head in cycle ``t`` (§8); it releases
        the admission slot, usable from ``t + 1`` (§4.1)."""
        out = self.ports[port]
        req = out.egress.popleft()
        out.hs_t = t
        req.t_done = t
        self._released += 1
        self.on_response(req, t)
        return req

    def respond_stages(self, t: int) -> bool:
        """Every response port in cycle ``t``: K launches (§8), R moves to K and takes a
        table's offer, then each table's ``C2`` and ``C1`` (DP7), all from the
        start-of-``t`` registers. Entries that entered RETURN before ``t`` first go to the
        port that serves them."""
        ports = self.ports
        live = self._resp_live
        if self.ret_r or self.ret_w:
            mshr, wb = self.mshr, self.wb
            one = self.P == 1
            while self.ret_r:
                idx = heapq.heappop(self.ret_r)
                p = 0 if one else mshr[idx].ch
                heapq.heappush(ports[p].ret[MSHR_T], idx)
                live.add(p)
            while self.ret_w:
                idx = heapq.heappop(self.ret_w)
                p = 0 if one else wb[idx].ch
                heapq.heappush(ports[p].ret[WB_T], idx)
                live.add(p)
        changed = False
        wait = None
        if not live:
            self.credit_wait = None
            return False
        for p in sorted(live) if len(live) > 1 else list(live):
            port = ports[p]
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

    def _port_stages(self, port: Port, t: int) -> bool:
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

    def _launch_port(self, port: Port, t: int) -> bool:
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

    def _form_response(self, cur, i: int, req: Request, egress) -> None:
        """Fill ``req``'s response flags and data from its entry ``cur`` and append it to
        ``egress``; after the entry's last waiter (index ``i``) the entry joins this cycle's
        frees (§4.3, §4.4, DP4)."""
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
