"""The logical HBF system: stack routing, one request port, fair return arbitration, and the
event-skipping run loop (docs/timing-contract.md §2; source §4.5).

Request sources plug in through :meth:`HbfSystem.submit` and :meth:`HbfSystem.close_input`;
completions leave through the ``on_response(req, tick)`` callback, so an open-loop CSV driver
and the closed-loop GPU model use the same controller unchanged (source §3.1).
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter, deque

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import (FREE, FULL_MASK, ISSUED, QUEUED, RETURN, WAIT, Request,
                                     StackController)
from hbfsim.model.controller_v2 import PipelinedStackController
from hbfsim.model.media import PROGRAM, READ
from hbfsim.model.mapping import Mapper
from hbfsim.model.system_v2 import run_pipelined

__all__ = ["DeadlockError", "HbfSystem"]


class DeadlockError(RuntimeError):
    """The controller holds work that no future event can release (a model bug)."""


class HbfSystem:
    """One logical HBF system of ``cfg.stacks`` stack controllers.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration.
    on_response : callable, optional
        ``f(req, tick)`` called for every response, in response order.
    trace : TraceWriter, optional
        hbf-trace-v1 writer; rows are written when a request completes.
    keep : bool
        Keep completed requests in :attr:`completed` (default True).
    """

    def __init__(self, cfg: HbfConfig, on_response=None, trace=None, keep: bool = True):
        self.cfg = cfg
        self.mapper = Mapper(cfg)
        self.stats = Counter()
        ctrl = PipelinedStackController if cfg.contract == 2 else StackController
        self.stacks = [ctrl(cfg, s, self.mapper, self.stats) for s in range(cfg.stacks)]
        for s in self.stacks:
            s.on_response = self._responded
        self.ingress: deque[Request] = deque()
        self.route: deque[Request] = deque()    # contract 2, S >= 2: the route stage (v2 §2)
        self._span = cfg.capacity_bytes
        self._map_key = None
        self._map_val = None
        self.t = 0
        self.rr = 0
        self.inputs_done = False
        self.drain_at: int | None = None
        self.last_arrival = 0
        self.user_cb = on_response
        self.trace = trace
        self.keep = keep
        self.completed: list[Request] = []
        self.submitted = 0
        self.n_done = 0
        # latencies in ticks, 8 bytes each (a 100 M-request run must fit in memory)
        self.lat = {"R": array("q"), "W": array("q")}
        self.lat_first = array("q")      # reads that allocated their MSHR entry
        self.first_arrival: int | None = None
        self.last_completion = 0
        self.requested = {"R": 0, "W": 0}
        self.n_req = {"R": 0, "W": 0}
        self.errors = 0
        self.steps = 0          # cycles actually evaluated (the rest were skipped, C3)
        self.engine = "fused"
        self.resp_ready = None  # f(tick) -> bool: the consumer's resp.ready (default: high)

    # ------------------------------------------------------------------ request side
    def submit(self, req: Request) -> None:
        """Queue a request for ingress (arrival order; arrivals may not go backwards).

        Raises
        ------
        AddressError
            The address or size is outside the HBF range or crosses a page.
        ValueError
            The arrival tick is earlier than the previous request's.
        """
        op = req.op
        if op != "R" and op != "W":
            raise ValueError(f"op must be R or W, not {op!r}")
        base = self.cfg.base_address
        rel = req.addr - base
        page, off = divmod(rel, PAGE_BYTES)
        if not (0 <= rel < self._span and 1 <= req.nbytes <= PAGE_BYTES - off):
            self.mapper.check(req.addr, req.nbytes)  # raises with the precise reason
        if req.arrival < self.last_arrival:
            raise ValueError(f"request {req.id}: arrival tick {req.arrival} is earlier than "
                             f"the previous request's {self.last_arrival}")
        if self.inputs_done:
            raise ValueError("submit() after close_input()")
        if op == "W" and req.data is not None and len(req.data) != req.nbytes:
            raise ValueError(f"request {req.id}: {len(req.data)} data bytes for a "
                             f"{req.nbytes}-byte write")
        self.last_arrival = req.arrival
        req.off = off
        # Consecutive requests usually share a page (sectors of one line, lines of one
        # page): remember the last page's mapping.
        key = (page, op)
        if key == self._map_key:
            req.stack, req.q, req.ch, req.local, req.sub = self._map_val
        else:
            stack, q = self.mapper.stack_of(page)
            ch, local, sub = self.mapper.channel_of(q, op == "W")
            req.stack, req.q, req.ch, req.local, req.sub = val = (stack, q, ch, local, sub)
            self._map_key, self._map_val = key, val
        if self.first_arrival is None:
            self.first_arrival = req.arrival
        self.requested[op] += req.nbytes
        self.n_req[op] += 1
        self.stacks[req.stack].ch_requests[req.ch] += 1
        self.submitted += 1
        self.ingress.append(req)

    def close_input(self) -> None:
        """No more requests will come: assert ``drain`` after the last accept (§1, W2)."""
        self.inputs_done = True

    # ------------------------------------------------------------------ response side
    def _responded(self, req: Request, t: int) -> None:
        self.n_done += 1
        lat = t - req.arrival
        self.lat[req.op].append(lat)
        if req.op == "R" and not req.mshr_hit:
            self.lat_first.append(lat)
        if t > self.last_completion:
            self.last_completion = t
        if req.error:
            self.errors += 1
        if self.trace is not None:
            self.trace.request(req, self.cfg)
        if self.keep:
            self.completed.append(req)
        if self.user_cb is not None:
            self.user_cb(req, t)

    # ------------------------------------------------------------------ the run loop
    def run(self, until: int | None = None) -> int:
        """Advance until every submitted request has completed (or ``until``).

        Returns the tick the simulation stopped at. A single-stack system runs the fused
        loop :meth:`_run_fused`; ``engine = "reference"`` forces the phase-by-phase loop
        :meth:`_run_reference`, which the fused loop must match event for event. Contract 2
        runs its own reference loop, :func:`hbfsim.model.system_v2.run_pipelined`.
        """
        if self.cfg.contract == 2:
            return run_pipelined(self, until)
        if len(self.stacks) == 1 and self.engine == "fused" and self.resp_ready is None:
            return self._run_fused(until)
        return self._run_reference(until)

    def _run_reference(self, until: int | None) -> int:
        stacks = self.stacks
        single = stacks[0] if len(stacks) == 1 else None
        ingress = self.ingress
        t = self.t
        while True:
            if until is not None and t > until:
                break
            self.steps += 1
            busy = False
            # (a) responses: one per stack candidate, one per system (§2, §8)
            if single is not None and self.resp_ready is None:
                if (single.cur is not None or single.ret_r or single.ret_w) \
                        and single.respond_one(t):
                    busy = True
            else:
                busy |= self._return_arbiter(t)
            # (b)(c) issue, enqueue
            for s in stacks:
                if s.issue(t):
                    busy = True
                if s.enqueue(t):
                    busy = True
            drain = self.drain_at is not None and t >= self.drain_at
            # (d) dispatch from M
            for s in stacks:
                if s.dispatch(t, drain):
                    busy = True
            # (e) ingress (§4.1)
            if ingress and ingress[0].arrival <= t:
                req = ingress[0]
                st = stacks[req.stack]
                if st.ready():
                    ingress.popleft()
                    st.accept(req, t)
                    busy = True
            # drain is asserted from the cycle after the last request left M (W2, §1)
            if self.inputs_done and self.drain_at is None and not ingress \
                    and all(s.m is None for s in stacks):
                self.drain_at = t + 1
            # (f)(g) write-buffer triggers, media completions, end of cycle
            for s in stacks:
                if s.wb_triggers(t, drain):
                    busy = True
                if s.complete(t):
                    busy = True
                s.end_cycle()
            if busy:
                t += 1
                continue
            nxt = self._next_tick(t)
            if nxt is None:
                break
            if until is not None and nxt > until:
                t = until + 1
                break
            t = nxt
        self.t = t
        return t

    def _next_tick(self, t: int) -> int | None:
        """After a cycle that changed nothing: the next tick at which something can (C3).

        Returns None when nothing is left to do; raises :class:`DeadlockError` when work is
        left that no event can release."""
        nxt = None
        for s in self.stacks:
            n = s.next_timer(t)
            if n is not None and (nxt is None or n < nxt):
                nxt = n
        ingress = self.ingress
        if ingress and ingress[0].arrival > t and (nxt is None or ingress[0].arrival < nxt):
            nxt = ingress[0].arrival
        if self.drain_at is not None and self.drain_at > t and (nxt is None
                                                                or self.drain_at < nxt):
            nxt = self.drain_at
        if nxt is None and (ingress or self.n_done < self.submitted):
            raise DeadlockError(self._describe(t))
        return nxt

    def _run_fused(self, until: int | None) -> int:
        """The single-stack run loop with the per-request and per-page hot paths inlined.

        Same phases, same order and same effects as :meth:`_run_reference` (event for
        event, cycle for cycle: tests/model/test_engines.py). Written out here: the drain of
        the chosen response entry, the MSHR merge and allocation of a read, the merge of a
        write into an OPEN entry, the ingress accept, the enqueue of ready MSHR entries, the
        issue without a stack-wide cap or write-drain window, and a single READ completion.
        They work on local copies of the controller state (the map register, the admission
        count, the chosen entry's head and link credit, two counters), which are written
        back before any controller method that reads them and when the loop stops. Issue,
        enqueue, write-buffer triggers and completions are only looked at from the tick
        ``hz`` on (the next cycle in which one of them can act). Every other case calls
        the controller's method (docs/benchmarks.md).
        """
        S = self.stacks[0]
        if S.m is not None and S.m.t_accept >= self.t:
            # M was filled in this very cycle (a caller moved t back): the loop below
            # dispatches M in every cycle it runs, so leave this call to the reference loop
            return self._run_reference(until)
        ingress = self.ingress
        mshr_open = S.mshr_open
        wb_page = S.wb_page
        enq_wait = S.enq_wait
        enq_chans = S.enq_chans
        issue_check = S.issue_check
        ret_r, ret_w = S.ret_r, S.ret_w
        mshr = S.mshr
        mshr_free = S.mshr_free
        due = S.media._due
        cache_due = S.cache_due
        credit, credit_t = S.credit, S.credit_t
        gain, cap, khz = S.gain, S.cap, S.khz
        admission = S.admission
        drain_policy = S.policy == "write-drain"
        merge, demand, agg_thr = S.merge, S.demand, S.agg_thr
        lat_r = self.lat["R"]
        lat_w = self.lat["W"]
        wb = S.wb
        wb_open = S.wb_open
        wb_deadlines = S.wb_deadlines
        wstats = S.st
        lat_first = self.lat_first
        plain = self.trace is None and not self.keep
        user_cb = self.user_cb
        respond_one = S.respond_one
        issue, enqueue, dispatch = S.issue, S.enqueue, S.dispatch
        wb_triggers, complete, end_cycle = S.wb_triggers, S.complete, S.end_cycle
        heappop, heappush = heapq.heappop, heapq.heappush
        mshr_pend = S.mshr_pend
        enq_ready = S.enq_ready
        queue = S.queue
        busy_subs = S.busy
        active = S.active
        active_cap = S.active_cap
        issued_at = S.issued_at
        ch_ops = S.ch_ops
        qdepth = S.qdepth
        media_issue = S.media.issue
        pdata = S.data
        agg_window = S.agg_window
        # the written-out issue and completion serve the configurations without a
        # stack-wide active cap, a write-drain window or a page cache (§7, R4)
        simple_issue = not drain_policy and S.total_cap >= 1 << 30
        rp = S.policy != "fcfs"
        no_cache = not S.pc_size
        NEVER = 1 << 62
        stop = until if until is not None else NEVER
        t = self.t
        steps = 0
        t0 = t                  # first cycle of the current run of evaluated cycles
        nd = 0                  # responses not yet added to self.n_done
        last_done = -1
        m = S.m
        inflight = S.inflight
        drain_at = self.drain_at
        cur = S.cur
        # the drain of the chosen entry: its waiters, next head, channel, the channel's
        # credit in the cycle of the next response, the last response tick, and what every
        # response of the entry shares (flags, page snapshot, latency list, entry_info)
        cw = None
        chead = cn = cch = c = tl = cflags = ckind = 0
        csnap = cinfo = None
        ccache = False
        clat = lat_r
        freed = None
        # Without a response callback or a stop tick nobody looks at a request before the
        # loop ends, so an entry's responses can be written when it is chosen (bulk).
        bulk = plain and user_cb is None and until is None
        cleft = 0
        released = False        # a response of this cycle went the per-cycle way
        # with no response callback nothing submits while the loop runs
        lastarr = self.last_arrival if user_cb is None else NEVER
        hz = t                  # look at every phase in the first cycle
        gend = False            # a controller path may have queued entry frees
        hits = 0                # MSHR hits not yet added to S.mshr_hits
        try:
            while True:
                # ev: issue, enqueue, write-buffer triggers or completions may act (hz <= t);
                # hz never passes stop + 1
                ev = t >= hz
                if ev and t > stop:
                    steps += t - t0
                    t0 = t
                    break
                busy = False
                # (a) response (§8); the admission slot is released after ingress (§4.1)
                if not cleft and cw is None and plain and S.blocked_since < 0 \
                        and (cur is not None or ret_r or ret_w):
                    if cur is None:
                        # the arbiter's choice: lowest MSHR entry, then lowest write entry
                        cur = S.cur = mshr[heappop(ret_r)] if ret_r else wb[heappop(ret_w)]
                    if cur is not None:
                        chead = cur.head
                        cch = cur.ch
                        c = credit[cch] + gain * (t - credit_t[cch])
                        if c > cap:
                            c = cap
                        cflags = cur.flags
                        ckind = cur.kind
                        if ckind == 0:
                            csnap = cur.snap
                            ccache = cur.cache
                            clat = lat_r
                        else:
                            csnap = None
                            ccache = False
                            clat = lat_w
                        cinfo = (cur.tq, cur.ti, cur.tc, cur.depth)
                        S.credit_wait = None
                        if bulk:
                            # The entry responds one waiter per cycle from t on for as long
                            # as the link credit lasts, and nothing else touches it or its
                            # channel's credit meanwhile: write those responses now. The
                            # cycles only release the admission slots (cleft counts them).
                            ws = cur.waiters
                            cn = len(ws)
                            tk = t
                            if ckind == 0:
                                for req in ws[chead:] if chead else ws:
                                    cost = req.nbytes * khz
                                    if c < cost:
                                        break
                                    c += gain - cost
                                    if c > cap:
                                        c = cap
                                    req.t_done = tk
                                    req.entry_info = cinfo
                                    lat_r.append(tk - req.arrival)
                                    if not req.mshr_hit:
                                        lat_first.append(tk - req.arrival)
                                    tk += 1
                            else:
                                for req in ws[chead:] if chead else ws:
                                    cost = req.nbytes * khz
                                    if c < cost:
                                        break
                                    c += gain - cost
                                    if c > cap:
                                        c = cap
                                    req.t_done = tk
                                    req.entry_info = cinfo
                                    lat_w.append(tk - req.arrival)
                                    tk += 1
                            k = chead + tk - t
                            if k > chead:
                                if cflags or ccache or csnap is not None:
                                    for req in ws[chead:k]:
                                        if cflags:
                                            req.buffer_hit = bool(cflags & 1)
                                            req.error = bool(cflags & 2)
                                        if ccache:
                                            req.cache_hit = True
                                        if csnap is not None:
                                            req.data = csnap[req.off:req.off + req.nbytes]
                                    if cflags & 2:
                                        self.errors += k - chead
                                credit[cch] = c
                                credit_t[cch] = tk
                                nd += k - chead
                                cur.head = k
                                cleft = k - chead
                        else:
                            cw = cur.waiters
                            cn = len(cw)
                            tl = -1
                if cleft:
                    pass    # a response written at the entry's choice: released after (e)
                elif cw is not None:
                    req = cw[chead]
                    cost = req.nbytes * khz
                    if c >= cost:
                        c += gain - cost
                        if c > cap:
                            c = cap
                        tl = t
                        req.t_done = t
                        req.entry_info = cinfo
                        if cflags:
                            req.buffer_hit = bool(cflags & 1)
                            req.error = bool(cflags & 2)
                            if cflags & 2:
                                self.errors += 1
                        if ccache:
                            req.cache_hit = True
                        if csnap is not None:
                            req.data = csnap[req.off:req.off + req.nbytes]
                        released = busy = True
                        chead += 1
                        nd += 1
                        clat.append(t - req.arrival)
                        if not req.mshr_hit and ckind == 0:
                            lat_first.append(t - req.arrival)
                        if chead == cn:
                            cur.head = chead
                            credit[cch] = c
                            credit_t[cch] = t + 1
                            last_done = t
                            if ckind == 0:
                                freed = cur
                            else:
                                S._free_w.append(cur)
                            gend = True
                            cur = S.cur = cw = None
                        if user_cb is not None:
                            self.n_done += nd
                            nd = 0
                            user_cb(req, t)
                    else:
                        # out of credit: the controller's path records the stall
                        cur.head = chead
                        if tl >= 0:
                            credit[cch] = c
                            credit_t[cch] = tl + 1
                            last_done = tl
                        cw = None
                        if respond_one(t):
                            busy = released = True
                            S._released = 0
                        gend = True
                        cur = S.cur
                elif cur is not None or ret_r or ret_w:
                    # the controller's path: not plain, a credit stall, or a closed loop
                    if respond_one(t):
                        busy = released = True
                        S._released = 0
                    gend = True
                    cur = S.cur
                if ev:
                    # (b) issue (§7). Written out: a channel leaves issue_check as soon as it
                    # has no candidate left (empty queue or no free active slot), and a
                    # completion only puts it back when its queue holds an operation, so
                    # issue() is not called for cycles in which it would pick nothing.
                    if issue_check:
                        if simple_issue:
                            for ch in tuple(issue_check):
                                if active[ch] >= active_cap:
                                    issue_check.discard(ch)
                                    continue
                                bs = busy_subs[ch]
                                qc = queue[ch]
                                pick = -1
                                alt = -1
                                for i, e in enumerate(qc):
                                    if e.sub in bs:
                                        continue
                                    if not rp or e.kind == 0:
                                        pick = i
                                        break
                                    if alt < 0:
                                        alt = i
                                if pick < 0:
                                    pick = alt
                                    if pick < 0:
                                        issue_check.discard(ch)
                                        continue
                                e = qc.pop(pick)
                                bs.add(e.sub)
                                active[ch] += 1
                                e.state = ISSUED
                                e.ti = t
                                S.active_sum += 1
                                ch_ops[ch] += 1
                                if e.kind == 1:
                                    S.queued_programs -= 1
                                    media_issue(t, ch, e.sub, PROGRAM, e.local, e.idx * 2 + 1)
                                else:
                                    media_issue(t, ch, e.sub, READ, e.local, e.idx * 2)
                                issued_at[ch] = t
                                busy = True
                                if not qc or active[ch] >= active_cap:
                                    issue_check.discard(ch)
                        elif issue(t):
                            busy = True
                    elif drain_policy and issue(t):
                        busy = True
                    # (c) enqueue (§6); FLUSH entries go through the controller
                    if S.wb_flush:
                        if enqueue(t):
                            busy = True
                    elif enq_chans or enq_wait and enq_wait[0][0] <= t:
                        while enq_wait and enq_wait[0][0] <= t:
                            ready_at, idx, alloc = heappop(enq_wait)
                            e = mshr[idx]
                            if e.state == WAIT and e.ready_at == ready_at \
                                    and e.alloc == alloc:
                                heappush(enq_ready[e.ch], idx)
                                enq_chans.add(e.ch)
                        if enq_chans:
                            for ch in sorted(enq_chans):
                                qc = queue[ch]
                                if len(qc) + (1 if issued_at[ch] == t else 0) >= qdepth:
                                    continue
                                heap = enq_ready[ch]
                                e = mshr[heappop(heap)]
                                if not heap:
                                    enq_chans.discard(ch)
                                S.agg_wait += t - e.alloc - 1
                                e.state = QUEUED
                                e.tq = t
                                qc.append(e)
                                e.depth = len(qc)
                                issue_check.add(ch)
                                busy = True
                # (d) dispatch from M (§4.2): a read that merges or allocates an MSHR entry and
                # a write that merges into an OPEN entry are written out
                if m is not None:
                    q = m.q
                    if m.op == "R":
                        if wb_page and q in wb_page:
                            pass                # read-after-write: stall (and flush)
                        elif merge and (e := mshr_open.get(q)) is not None:
                            m.t_map = t
                            m.mshr_hit = True
                            e.waiters.append(m)
                            e.bytes += m.nbytes
                            hits += 1
                            if not demand and e.state == WAIT and e.bytes >= agg_thr \
                                    and e.ready_at > t + 1:
                                e.ready_at = t + 1
                                heappush(enq_wait, (t + 1, e.idx, e.alloc))
                                if hz > t + 1:
                                    hz = t + 1
                            m = None
                            busy = True
                        elif no_cache and mshr_free:
                            # a read that allocates an MSHR entry (§4.2 step 3)
                            m.t_map = t
                            e = mshr[heappop(mshr_free)]
                            ch = e.ch = m.ch
                            e.q, e.sub, e.local = q, m.sub, m.local
                            e.waiters = [m]
                            e.head = 0
                            e.bytes = m.nbytes
                            e.alloc = t
                            e.flags = 0
                            e.cache = False
                            e.snap = None
                            e.tq = e.ti = e.tc = -1
                            e.depth = 0
                            if merge:
                                mshr_open[q] = e
                            mshr_pend[q] = mshr_pend.get(q, 0) + 1
                            e.state = WAIT
                            if demand or e.bytes >= agg_thr or agg_window <= 1:
                                # ready in the next cycle: straight to the channel's ready
                                # heap, where enqueue would move it from enq_wait in t + 1
                                e.ready_at = t + 1
                                heappush(enq_ready[ch], e.idx)
                                enq_chans.add(ch)
                                if hz > t + 1:
                                    hz = t + 1
                            else:
                                e.ready_at = t + agg_window
                                heappush(enq_wait, (e.ready_at, e.idx, e.alloc))
                                if hz > e.ready_at:
                                    hz = e.ready_at
                            m = None
                            busy = True
                    elif (e := wb_open.get(q)) is not None:
                        # a write into its page's OPEN entry (§4.2 write step 1)
                        m.t_map = t
                        off = m.off
                        n = m.nbytes
                        e.waiters.append(m)
                        if m.data is not None:
                            e.data[off:off + n] = m.data
                        before = e.cov
                        cov = e.cov = before | (((1 << n) - 1) << off)
                        wstats["coverage_new_bytes"] += cov.bit_count() - before.bit_count()
                        if cov == FULL_MASK and before != FULL_MASK:
                            e.full_at = t + 1
                            S.full_pending.append(e)
                            if hz > t + 1:
                                hz = t + 1
                        m = None
                        busy = True
                    if m is not None:
                        # the controller may hand the write-buffer triggers work in this
                        # cycle (raw, pressure) or queue timers: look at every phase now
                        S.m = m
                        if dispatch(t, drain_at is not None and t >= drain_at):
                            busy = True
                        m = S.m
                        hz = t
                        ev = True
                # (e) ingress (§4.1); arrivals never go backwards, so from the last one's
                # tick on every queued request has arrived
                if m is None:
                    if inflight < admission and ingress \
                            and (t >= lastarr or ingress[0].arrival <= t):
                        m = ingress.popleft()
                        m.t_accept = t
                        m.depth = inflight
                        inflight += 1
                        busy = True
                    elif drain_at is None and not ingress and self.inputs_done:
                        # drain from the cycle after the last request left M (W2, §1)
                        drain_at = self.drain_at = t + 1
                        if wb_open and hz > drain_at:
                            hz = drain_at
                if cleft:
                    # the admission slot of a response written at the entry's choice
                    inflight -= 1
                    busy = True
                    cleft -= 1
                    if not cleft:
                        last_done = t
                        if cur.head == cn:
                            if ckind == 0:
                                freed = cur
                            else:
                                S._free_w.append(cur)
                            gend = True
                            cur = S.cur = None
                        # else out of credit: the next cycle stalls through the controller
                elif released:
                    inflight -= 1
                    released = False
                if ev:
                    # (f)(g) write-buffer triggers, media completions, end of cycle
                    # (an entry in full_pending, raw_now or pressure_now is not FREE: wb_used > 0)
                    if (S.wb_used or wb_deadlines) and (
                            S.full_pending or S.raw_now is not None or S.pressure_now is not None
                            or wb_deadlines and wb_deadlines[0][0] <= t
                            or drain_at is not None and t >= drain_at and wb_open) \
                            and wb_triggers(t, drain_at is not None and t >= drain_at):
                        busy = True
                    if due and due[0][0] <= t:
                        item = heappop(due)
                        if (not due or due[0][0] > t) and not item[3] & 1 and no_cache:
                            # one READ completion due (§1 media promise, §4.3)
                            _, ch, sub, tag, flags = item
                            busy_subs[ch].discard(sub)
                            active[ch] -= 1
                            S.active_sum -= 1
                            if queue[ch]:
                                issue_check.add(ch)
                            e = mshr[tag >> 1]
                            e.state = RETURN
                            e.tc = t
                            e.flags = flags
                            q = e.q
                            e.snap = pdata.get(q)
                            if mshr_open.get(q) is e:
                                del mshr_open[q]
                            n = mshr_pend[q] - 1
                            if n:
                                mshr_pend[q] = n
                            else:
                                del mshr_pend[q]
                            heappush(ret_r, e.idx)
                            busy = True
                        else:
                            heappush(due, item)
                            if complete(t):
                                busy = True
                    elif cache_due and cache_due[0][0] <= t and complete(t):
                        busy = True
                    # the next cycle in which issue, enqueue, the write-buffer triggers or a
                    # completion can act; until then they are skipped (each path of (a), (d)
                    # and (e) that hands them work lowers hz)
                    # (FLUSH, full, raw and pressure entries are not FREE: wb_used > 0)
                    if issue_check or enq_chans or drain_policy or S.wb_used and (
                            S.wb_flush or S.full_pending or S.raw_now is not None
                            or S.pressure_now is not None):
                        hz = t + 1
                    else:
                        hz = NEVER
                        if enq_wait:
                            hz = enq_wait[0][0]
                        if due and due[0][0] < hz:
                            hz = due[0][0]
                        if cache_due and cache_due[0][0] < hz:
                            hz = cache_due[0][0]
                        if wb_deadlines and wb_deadlines[0][0] < hz:
                            hz = wb_deadlines[0][0]
                        if drain_at is not None and wb_open and drain_at < hz:
                            hz = drain_at
                        if hz > stop:
                            hz = stop + 1
                if gend:
                    # entry frees of this cycle (end of cycle, §4.3)
                    gend = False
                    if freed is not None:
                        freed.state = FREE
                        freed.waiters = None
                        heappush(mshr_free, freed.idx)
                        freed = None
                    if S._free_r or S._free_w:
                        end_cycle()
                if busy:
                    t += 1
                    continue
                steps += t - t0 + 1     # the cycles t0 .. t were evaluated (C3)
                S.m = m
                S.inflight = inflight
                self.n_done += nd
                nd = 0
                nxt = self._next_tick(t)
                if nxt is None:
                    break
                if nxt > stop:
                    t = until + 1
                    break
                t = t0 = nxt
        finally:
            if cw is not None:
                cur.head = chead
                if tl >= 0:
                    credit[cch] = c
                    credit_t[cch] = tl + 1
                    last_done = tl
            S.m = m
            S.inflight = inflight
            S.mshr_hits += hits
            self.n_done += nd
            if last_done > self.last_completion:
                self.last_completion = last_done
            self.steps += steps
            self.t = t
        return t

    def _return_arbiter(self, t: int) -> bool:
        n = len(self.stacks)
        cands = [s.response_candidate(t) for s in self.stacks]
        if self.resp_ready is not None and any(c is not None for c in cands) \
                and not self.resp_ready(t):
            return True  # held by the consumer: state unchanged, but look again next cycle
        for k in range(n):
            i = (self.rr + k) % n
            if cands[i] is not None:
                self.stacks[i].respond(cands[i], t)
                self.rr = (i + 1) % n
                return True
        return False

    def _describe(self, t: int) -> str:
        parts = [f"deadlock at tick {t}: {self.submitted - self.n_done} requests open"]
        for s in self.stacks:
            parts.append(f"stack {s.stack}: M={s.m!r} inflight={s.inflight} "
                         f"wb_used={s.wb_used} mshr_free={len(s.mshr_free)}")
        return "; ".join(parts)

    # ------------------------------------------------------------------ convenience
    def run_requests(self, requests) -> int:
        """Open-loop: submit every request, close the input, run to completion."""
        for r in requests:
            self.submit(r)
        self.close_input()
        return self.run()

