"""The HBF stack controller: map register, read MSHRs, write coverage buffer, channel
queues and scheduler, response arbiter with link credits.

Cycle-exact to docs/history.md (every rule below cites its section). The class is
stepped one cycle at a time by :class:`hbfsim.model.system.HbfSystem`, which skips cycles in
which nothing can change (C3): every phase reports whether it changed state, and every
time-driven condition reports its next tick.

Within a cycle the phases run in an order that lets each one read start-of-cycle state
(contract §0): response, issue, enqueue (with the FLUSH checks), dispatch from M, ingress
(in the system), write-buffer triggers, media completions; deferred effects (entry frees,
admission releases) are applied at the end of the cycle.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR, PROGRAM, READ, Media

__all__ = ["Request", "StackController"]

# Entry states (contract §4.3, §4.4).
FREE, WAIT, QUEUED, ISSUED, RETURN, OPEN, FLUSH = range(7)
FULL_MASK = (1 << PAGE_BYTES) - 1
CAUSES = ("full", "raw", "pressure", "deadline", "drain")


class Request:
    """One GPU sector/line request and what happened to it (C2).

    Members
    -------
    id, op, addr, nbytes, source, arrival : int, str, int, int, int, int
        As given by the request source; ``op`` is ``"R"`` or ``"W"``.
    data : bytes or None
        Write data (``nbytes`` long); for reads, filled at completion.
    t_accept, t_done : int
        Ingress (accept) and Completed (response) cycles; -1 until then.
    mshr_hit, buffer_hit, cache_hit, error : bool
        Response flags (contract §1).
    """

    __slots__ = ("id", "op", "addr", "nbytes", "source", "arrival", "data", "stack", "q",
                 "ch", "sub", "local", "off", "t_accept", "t_map", "t_done", "mshr_hit",
                 "buffer_hit", "cache_hit", "error", "entry_info", "depth", "tag")

    def __init__(self, id, op, addr, nbytes, source=0, arrival=0, data=None):
        self.id = id
        self.op = op
        self.addr = addr
        self.nbytes = nbytes
        self.source = source
        self.arrival = arrival
        self.data = data
        self.t_accept = self.t_done = -1
        self.mshr_hit = self.buffer_hit = self.cache_hit = self.error = False
        self.entry_info = None
        self.depth = 0
        self.tag = None

    def __repr__(self):
        return (f"Request(id={self.id}, op={self.op!r}, addr={self.addr:#x}, "
                f"nbytes={self.nbytes}, arrival={self.arrival}, done={self.t_done})")


class _Entry:
    """One MSHR or write-buffer entry (kind 0 = read MSHR, 1 = write buffer)."""

    __slots__ = ("kind", "idx", "state", "q", "ch", "sub", "local", "waiters", "head",
                 "bytes", "alloc", "ready_at", "deadline", "cov", "data", "cause", "tq", "ti",
                 "tc", "flags", "snap", "full_at", "depth", "pressure", "cache")

    def __init__(self, kind, idx):
        self.kind = kind
        self.idx = idx
        self.state = FREE


class StackController:
    """The controller of one HBF stack (docs/history.md §1-§8).

    Parameters
    ----------
    cfg : HbfConfig
        System configuration.
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system (see :mod:`hbfsim.model.stats`).
    """

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        self.cfg = cfg
        self.stack = stack
        self.mapper = mapper
        self.st = stats
        self.media = Media(cfg)
        C = cfg.channels
        self.C = C
        self.admission = cfg.admission
        self.inflight = 0
        self._released = 0
        self.m: Request | None = None          # the map register M (§4.1)
        self.dispatched = False
        # read MSHRs (§4.3)
        self.mshr = [_Entry(0, i) for i in range(cfg.mshr_entries)]
        self.mshr_free = list(range(cfg.mshr_entries))
        self.mshr_open: dict[int, _Entry] = {}      # page -> mergeable entry
        self.mshr_pend: dict[int, int] = {}         # page -> entries before completion
        self.merge = cfg.mshr_merge
        # (ready_at, idx, alloc) of WAIT entries; alloc tells a record of the entry's current
        # allocation from one an earlier allocation left behind (same idx, maybe same tick)
        self.enq_wait: list[tuple[int, int, int]] = []
        self.enq_ready: list[list[int]] = [[] for _ in range(C)]  # per channel idx heaps
        self.enq_chans: set[int] = set()             # channels with a ready MSHR entry
        self.demand = cfg.read_mode == "demand"
        self.agg_window = cfg.read_agg_window_ticks
        self.agg_thr = cfg.read_agg_threshold_bytes
        # write buffer (§4.4)
        self.wb = [_Entry(1, i) for i in range(cfg.write_buffer_entries)]
        self.wb_free = list(range(cfg.write_buffer_entries))
        self.wb_open: OrderedDict[int, _Entry] = OrderedDict()  # page -> OPEN entry, by age
        self.wb_page: dict[int, list[_Entry]] = {}  # page -> non-FREE entries by age
        self.wb_used = 0
        self.wb_deadlines: list[tuple[int, int, int]] = []  # (deadline, alloc, idx)
        self.wb_flush: list[_Entry] = []             # entries in FLUSH
        self.full_pending: list[_Entry] = []
        self.raw_now: _Entry | None = None
        self.pressure_now: _Entry | None = None
        self.pressure_live = False
        self.strict = cfg.write_timeout_policy == "strict"
        # channels, queues, subarrays (§6, §7)
        self.queue: list[list[_Entry]] = [[] for _ in range(C)]
        self.busy: list[set[int]] = [set() for _ in range(C)]
        self.active = [0] * C
        self.active_cap = cfg.active_per_channel
        self.total_cap = cfg.active_total or 1 << 30
        self.active_sum = 0
        self.qdepth = cfg.queue_depth
        self.issue_check: set[int] = set()
        # cycles from the issue decision to the command on cmd[c]: 0 under contract 1 (§7),
        # 1 under contract 2's command register (timing-contract.md §7)
        self.cmd_delay = 0
        self.issued_at = [-1] * C                    # cycle of each channel's last issue
        # operations that issue took from the queue (1; a multi-plane command's group size,
        # docs/timing-contract.md §7a MP3): the enqueue arbiter's start-of-cycle count
        self.issued_k = [1] * C
        self.queued_programs = 0
        self.policy = cfg.scheduler
        self.drain_open = False
        self.drain_start = 0
        self.drain_cooldown = 0
        self.drain_hw = cfg.write_drain_high_water
        self.drain_window = cfg.write_drain_window_ticks
        # responses and link credits (§8)
        self.ret_r: list[int] = []
        self.ret_w: list[int] = []
        self.cur: _Entry | None = None
        self.blocked_since = -1
        self.credit_wait = None
        # model-only logic-die page cache (R4)
        self.pc_size = cfg.page_cache_pages
        self.page_cache: OrderedDict[int, None] = OrderedDict()
        self.cache_due: list[tuple[int, int]] = []
        self.cache_ticks = cfg.cache_hit_ticks
        # functional data: stack-local page -> programmed bytes (docs/model.md, functional data)
        self.data: dict[int, bytes] = {}
        self._free_r: list[int] = []
        self._free_w: list[_Entry] = []
        self.on_response = None     # set by the system: f(req, t)
        self.mshr_hits = 0
        self.agg_wait = 0          # ticks read entries waited beyond demand (R2)
        self.ch_requests = [0] * C
        self.ch_ops = [0] * C
        self.ch_link_stall = [0] * C

    # ======================================================================= §4.1 ingress
    def ready(self) -> bool:
        """``req.ready`` of this cycle; valid after :meth:`dispatch` ran (§4.1)."""
        return self.inflight < self.admission and (self.m is None or self.dispatched)

    def accept(self, req: Request, t: int) -> None:
        req.t_accept = t
        req.depth = self.inflight
        self.inflight += 1
        self.m = req

    # ================================================================ §8 response phase
    def response_candidate(self, t: int):
        """Return the request this stack would respond with in cycle ``t`` (or None)."""
        cur = self.cur
        if cur is None:
            if self.ret_r:
                cur = self.mshr[heapq.heappop(self.ret_r)]
            elif self.ret_w:
                cur = self.wb[heapq.heappop(self.ret_w)]
            else:
                return None
            self.cur = cur
        req = cur.waiters[cur.head]
        ch = cur.ch
        cost = req.nbytes * self.khz
        c = self.credit[ch] + self.gain * (t - self.credit_t[ch])
        if c > self.cap:
            c = self.cap
        if c < cost:
            if self.blocked_since < 0:
                self.blocked_since = t
            self.credit_wait = self.credit_t[ch] + -(-(cost - self.credit[ch]) // self.gain)
            return None
        self.credit_wait = None
        return req

    def respond_one(self, t: int) -> bool:
        """Candidate and handshake in one call (``resp.ready`` high)."""
        req = self.response_candidate(t)
        if req is None:
            return False
        self.respond(req, t)
        return True

    def respond(self, req: Request, t: int) -> None:
        """The response handshake of ``req`` in cycle ``t``."""
        cur = self.cur
        ch = cur.ch
        c = self.credit[ch] + self.gain * (t - self.credit_t[ch])
        if c > self.cap:
            c = self.cap
        c = c - req.nbytes * self.khz + self.gain
        self.credit[ch] = c if c < self.cap else self.cap
        self.credit_t[ch] = t + 1
        self._handshake(cur, req, ch, t)

    def _handshake(self, cur, req, ch, t):
        if self.blocked_since >= 0:
            self.ch_link_stall[ch] += t - self.blocked_since
            self.blocked_since = -1
        req.t_done = t
        if cur.kind == 0:
            req.buffer_hit = bool(cur.flags & FLAG_BUFFER_HIT)
            req.cache_hit = cur.cache
            req.error = bool(cur.flags & FLAG_ERROR)
            snap = cur.snap
            if snap is not None:
                req.data = snap[req.off:req.off + req.nbytes]
        else:
            req.error = bool(cur.flags & FLAG_ERROR)
        req.entry_info = (cur.tq, cur.ti, cur.tc, cur.depth)
        self._released += 1
        cur.head += 1
        if cur.head == len(cur.waiters):
            if cur.kind == 0:
                self._free_r.append(cur.idx)
            else:
                self._free_w.append(cur)
            self.cur = None
        self.on_response(req, t)

    # ===================================================================== §7 issue
    def issue(self, t: int) -> bool:
        changed = False
        if self.policy == "write-drain":
            changed = self._drain_fsm(t)
        if not self.issue_check:
            return changed
        drain = self.drain_open
        rp = self.policy != "fcfs"
        media = self.media
        done = []
        capped = self.total_cap < 1 << 30
        # with a stack-wide cap, lower channels issue first (contract §7)
        order = sorted(self.issue_check) if capped else self.issue_check
        room = self.total_cap - self.active_sum
        for ch in order:
            if self.active[ch] >= self.active_cap:
                done.append(ch)
                continue
            if room <= 0:
                break
            busy = self.busy[ch]
            pick = None
            alt = None
            for e in self.queue[ch]:
                if e.sub in busy:
                    continue
                if not rp:
                    pick = e
                    break
                want_prog = drain
                if (e.kind == 1) == want_prog:
                    pick = e
                    break
                if alt is None:
                    alt = e
            if pick is None:
                pick = alt
            if pick is None:
                done.append(ch)
                continue
            self.queue[ch].remove(pick)
            busy.add(pick.sub)
            self.active[ch] += 1
            room -= 1
            pick.state = ISSUED
            ti = t + self.cmd_delay
            pick.ti = ti
            self.active_sum += 1
            self.ch_ops[ch] += 1
            if pick.kind == 1:
                self.queued_programs -= 1
                media.issue(ti, ch, pick.sub, PROGRAM, pick.local, pick.idx * 2 + 1)
            else:
                media.issue(ti, ch, pick.sub, READ, pick.local, pick.idx * 2)
            self.issued_at[ch] = t
            changed = True
        for ch in done:
            self.issue_check.discard(ch)
        return changed

    def _drain_fsm(self, t: int) -> bool:
        if not self.drain_open:
            if (self.wb_used >= self.drain_hw and self.queued_programs
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

    # ================================================================ §6 enqueue
    def enqueue(self, t: int) -> bool:
        ew = self.enq_wait
        if not self.enq_chans and not self.wb_flush and not (ew and ew[0][0] <= t):
            return False
        changed = False
        while ew and ew[0][0] <= t:
            ready_at, idx, alloc = heapq.heappop(ew)
            e = self.mshr[idx]
            if e.state == WAIT and e.ready_at == ready_at and e.alloc == alloc:
                heapq.heappush(self.enq_ready[e.ch], idx)
                self.enq_chans.add(e.ch)
        # FLUSH entries: strict errors (§4.4) and flush eligibility.
        wb_cand: dict[int, _Entry] = {}
        if self.wb_flush:
            keep = []
            for e in self.wb_flush:
                complete = e.cov == FULL_MASK
                if not complete and self.strict:
                    e.state = RETURN
                    e.flags = FLAG_ERROR
                    e.tc = t
                    self.st["strict_errors"] += 1
                    heapq.heappush(self.ret_w, e.idx)
                    changed = True
                    continue
                keep.append(e)
                if self.wb_page[e.q][0] is not e or e.q in self.mshr_pend:
                    continue
                best = wb_cand.get(e.ch)
                if best is None or e.idx < best.idx:
                    wb_cand[e.ch] = e
            self.wb_flush = keep
        chans = self.enq_chans | wb_cand.keys() if wb_cand else self.enq_chans
        for ch in sorted(chans) if len(chans) > 1 else list(chans):
            heap = self.enq_ready[ch]
            occ = len(self.queue[ch]) + (self.issued_k[ch] if self.issued_at[ch] == t else 0)
            if occ >= self.qdepth:
                continue
            if heap:
                e = self.mshr[heapq.heappop(heap)]
                if not heap:
                    self.enq_chans.discard(ch)
            else:
                e = wb_cand[ch]
                self.wb_flush.remove(e)
                self.queued_programs += 1
                if e.cov != FULL_MASK:
                    self.st["partial_programs"] += 1
                    self.st["padding_bytes"] += PAGE_BYTES - e.cov.bit_count()
            if e.kind == 0:
                self.agg_wait += t - e.alloc - 1
            e.state = QUEUED
            e.tq = t
            self.queue[ch].append(e)
            e.depth = len(self.queue[ch])
            self.issue_check.add(ch)
            changed = True
        return changed

    # ============================================================== §4.2 dispatch from M
    def dispatch(self, t: int, drain: bool) -> bool:
        self.dispatched = False
        m = self.m
        if m is None or m.t_accept >= t:
            return False
        q = m.q
        m.t_map = t
        if m.op == "R":
            lst = self.wb_page.get(q)
            if lst:  # read-after-write ordering: stall, flush the open entry (§4.2 R1)
                o = self.wb_open.get(q)
                if o is not None and o.cause is None:
                    o.cause = "raw"
                    self.st["raw_events"] += 1
                    self.raw_now = o
                    return True
                return False
            e = self.mshr_open.get(q) if self.merge else None
            if e is not None:
                m.mshr_hit = True
                e.waiters.append(m)
                e.bytes += m.nbytes
                self.mshr_hits += 1
                if e.state == WAIT and not self.demand and e.bytes >= self.agg_thr \
                        and e.ready_at > t + 1:
                    e.ready_at = t + 1
                    heapq.heappush(self.enq_wait, (t + 1, e.idx, e.alloc))
            else:
                if not self.mshr_free:
                    return False
                e = self.mshr[heapq.heappop(self.mshr_free)]
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
                else:
                    e.state = WAIT
                    if self.demand or e.bytes >= self.agg_thr or self.agg_window <= 1:
                        e.ready_at = t + 1
                    else:
                        e.ready_at = t + self.agg_window
                    heapq.heappush(self.enq_wait, (e.ready_at, e.idx, e.alloc))
        else:
            e = self.wb_open.get(q)
            if e is None:
                if not self.wb_free:
                    if not self.pressure_live and self.wb_open:
                        o = next(iter(self.wb_open.values()))
                        if o.alloc < t and o.cause is None:
                            o.cause = "pressure"
                            o.pressure = True
                            self.pressure_live = True
                            self.pressure_now = o
                            return True
                    return False
                e = self.wb[heapq.heappop(self.wb_free)]
                self._new_write_entry(e, m, q, t)
                self.wb_open[q] = e
                self.wb_page.setdefault(q, []).append(e)
                self.wb_used += 1
                heapq.heappush(self.wb_deadlines, (e.deadline, t, e.idx))
            off = m.off
            n = m.nbytes
            e.waiters.append(m)
            if m.data is not None:
                e.data[off:off + n] = m.data
            before = e.cov
            e.cov = before | (((1 << n) - 1) << off)
            self.st["coverage_new_bytes"] += e.cov.bit_count() - before.bit_count()
            if e.cov == FULL_MASK and before != FULL_MASK:
                e.full_at = t + 1
                self.full_pending.append(e)
        self.m = None
        self.dispatched = True
        return True

    @staticmethod
    def _new_read_entry(e: _Entry, m: Request, q: int, t: int) -> None:
        """Fill MSHR entry ``e``, allocated in ``t`` for read ``m`` of page ``q`` (§4.2 read
        step 3); the caller sets its state and its readiness."""
        e.q, e.ch, e.sub, e.local = q, m.ch, m.sub, m.local
        e.waiters = [m]
        e.head = 0
        e.bytes = m.nbytes
        e.alloc = t
        e.flags = 0
        e.cache = False
        e.snap = None
        e.tq = e.ti = e.tc = -1
        e.depth = 0

    def _new_write_entry(self, e: _Entry, m: Request, q: int, t: int) -> None:
        """Fill write-buffer entry ``e``, allocated OPEN in ``t`` for write ``m`` of page
        ``q`` (§4.2 write step 2, W1); the caller merges ``m`` into it."""
        e.q, e.ch, e.sub, e.local = q, m.ch, m.sub, m.local
        e.state = OPEN
        e.waiters = []
        e.head = 0
        e.cov = 0
        e.data = bytearray(PAGE_BYTES)
        e.alloc = t
        e.deadline = t + self.cfg.write_deadline_ticks
        e.cause = None
        e.pressure = False
        e.full_at = -1
        e.flags = 0
        e.tq = e.ti = e.tc = -1
        e.depth = 0

    # ========================================================= §4.4 write-buffer triggers
    def wb_triggers(self, t: int, drain: bool) -> bool:
        dl = self.wb_deadlines
        if (not self.full_pending and self.raw_now is None and self.pressure_now is None
                and not (dl and dl[0][0] <= t) and not (drain and self.wb_open)):
            return False
        changed = False
        if self.full_pending:
            keep = []
            for e in self.full_pending:
                if e.state != OPEN:
                    continue
                if e.full_at <= t:
                    self._flush(e, "full")
                    changed = True
                else:
                    keep.append(e)
            self.full_pending = keep
        for e in (self.raw_now, self.pressure_now):
            if e is not None and e.state == OPEN:
                self._flush(e, e.cause)
                changed = True
        self.raw_now = self.pressure_now = None
        while dl and dl[0][0] <= t:
            _, alloc, idx = heapq.heappop(dl)
            e = self.wb[idx]
            if e.state == OPEN and e.alloc == alloc:
                self._flush(e, "deadline")
                changed = True
        if drain and self.wb_open:
            for e in list(self.wb_open.values()):
                if e.alloc < t:
                    self._flush(e, "drain")
                    changed = True
        return changed

    def _flush(self, e: _Entry, cause: str) -> None:
        e.state = FLUSH
        e.cause = cause
        del self.wb_open[e.q]
        self.wb_flush.append(e)
        self.st["flush_" + cause] += 1

    # ============================================================ completions (§1, §7)
    def complete(self, t: int) -> bool:
        due = self.media._due
        cd = self.cache_due
        if (not due or due[0][0] > t) and (not cd or cd[0][0] > t):
            return False
        changed = False
        for ch, sub, tag, flags in self.media.deliver(t):
            changed = True
            self.busy[ch].discard(sub)
            self.active[ch] -= 1
            self.active_sum -= 1
            self.issue_check.add(ch)
            self._cpl_entry(t, tag, flags)
        while cd and cd[0][0] <= t:
            _, idx = heapq.heappop(cd)
            self._read_done(self.mshr[idx], t, 0)
            changed = True
        return changed

    def _cpl_entry(self, t: int, tag: int, flags: int) -> None:
        """The entry side of a completion delivered in ``t``: RETURN from ``t + 1`` (§4)."""
        if tag & 1:
            e = self.wb[tag >> 1]
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
        else:
            self._read_done(self.mshr[tag >> 1], t, flags)

    def _read_done(self, e: _Entry, t: int, flags: int) -> None:
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

    # ========================================================================= cycle end
    def end_cycle(self) -> None:
        if not (self._released or self._free_r or self._free_w):
            return
        if self._released:
            self.inflight -= self._released
            self._released = 0
        for idx in self._free_r:
            self.mshr[idx].state = FREE
            self.mshr[idx].waiters = None
            heapq.heappush(self.mshr_free, idx)
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
            heapq.heappush(self.wb_free, e.idx)
        self._free_w.clear()


    # ============================================================ event skipping (C3)
    def next_timer(self, t: int) -> int | None:
        """Earliest future tick at which a time-driven condition can change state."""
        cands = []
        d = self.media.next_due()
        if d is not None:
            cands.append(d)
        if self.enq_wait:
            cands.append(self.enq_wait[0][0])
        if self.wb_deadlines:
            cands.append(self.wb_deadlines[0][0])
        if self.cache_due:
            cands.append(self.cache_due[0][0])
        if self.credit_wait is not None:
            cands.append(self.credit_wait)
        if self.policy == "write-drain":
            if self.drain_open and self.queued_programs:
                cands.append(self.drain_start + self.drain_window)
            elif not self.drain_open and self.wb_used >= self.drain_hw \
                    and self.queued_programs:
                cands.append(self.drain_cooldown)
        if not cands:
            return None
        return max(min(cands), t + 1)
