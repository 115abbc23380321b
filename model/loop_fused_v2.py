"""The contract-2 fused run loop: the per-request hot paths written out, the phases both
host-port shapes share, and the stack shape (docs/timing-contract.md §16, §18 step 5;
docs/benchmarks.md). The channel shape's loop is :mod:`hbfsim.model.loop_fused_ports`.

:meth:`hbfsim.model.system.HbfSystem.run` calls :func:`run_fused_v2` for ``contract = 2``
with ``engine = "fused"`` and ``multiplane = "off"``. It runs the phases (a)-(j) of
:func:`hbfsim.model.system_v2.run_pipelined` with the same effects, event for event and
cycle for cycle (tests/model/test_engines_v2.py), on any number of stacks, with or without
``resp.ready``, a response callback or a stop tick.

Written out, per request: the egress handshake and the response bookkeeping of
:meth:`HbfSystem._responded`, the launch stage K with the deficit credit (v2 §8), the choice
R, the MSHR merge of a read and the merge of a write into its page's OPEN entry (§4.2), the
accept into Q (§4.1, the route stage with several stacks, the admission rank in the channel
shape), the move of Q's head into M, and the admission release at the end of the cycle.
Per page: the MSHR allocation of a read (no page cache), the release of the completions
(§7's forwarding), the issue decision without a stack-wide active cap or a write-drain
window, the enqueue with no write-buffer entry in FLUSH, and a READ completion without the
page cache. Every other case (a write-buffer allocation, a stall, read-after-write, the
page cache, the write-buffer triggers, the entry frees, the write-drain window, the
stack-wide cap, FLUSH entries, write completions) calls the controller's method, and only in
the cycles in which its own guard says it can act: a phase that would change nothing is not
looked at, so the busy flag of every cycle, and with it the skipped cycles (C3), is the
reference loop's. Per stack, the media phases (c)-(e) and the triggers (h), (i) are looked
at only from the tick ``hz`` on (:func:`_media_wake`; lowered by the dispatch paths and by
the rise of ``drain``). In the channel shape only the ports that hold something are looked
at, in the reference's ascending order. The loop keeps nothing between
run calls that the controllers do not hold (``hz`` and the port sets are rebuilt at each
call), so ``run(until)`` may stop and restart (and a driver move ``system.t`` back over
skipped ticks, docs/gpu.md §2) anywhere.

Two differences of internal state that no event can see: a controller's ``dispatched``
flag (contract 1's ``req.ready`` term, unused by contract 2) and ``drain_in`` (read only
by the multi-plane issue, which this loop does not run) are not kept up to date.
"""

from __future__ import annotations

from heapq import heappop, heappush

from hbfsim.model.controller import FULL_MASK, ISSUED, QUEUED, RETURN, WAIT
from hbfsim.model.controller_v2 import EGRESS_DEPTH, INGRESS_DEPTH
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR, PROGRAM, READ
from hbfsim.model.system_v2 import ROUTE_DEPTH

__all__ = ["run_fused_v2"]

NEVER = 1 << 62         # a tick later than any simulation reaches


def run_fused_v2(system, until: int | None) -> int:
    """Advance a contract-2 ``system`` (``multiplane = "off"``) through tick ``until`` (or to
    completion) with the hot paths written out; return the tick it stopped at. Same
    phases, order and effects as :func:`hbfsim.model.system_v2.run_pipelined`."""
    if system.cfg.multiplane != "off":
        raise ValueError(f"the fused contract-2 loop runs multiplane = 'off', not "
                         f"{system.cfg.multiplane!r} (HbfSystem.run takes the reference loop)")
    if system.ports:
        from hbfsim.model.loop_fused_ports import run_channel   # (it imports this module)

        return run_channel(system, until)
    if len(system.stacks) == 1:
        return _run_single(system, until)
    return _run_stack(system, until)


def _respond(system):
    """The response bookkeeping of :meth:`HbfSystem._responded` that the loops do not write
    out (the trace row, the kept request, the user's callback), as a closure, and whether
    there is none of it (``plain``)."""
    trace = system.trace
    cfg = system.cfg
    completed = system.completed if system.keep else None
    user_cb = system.user_cb

    def responded(req, t):
        if trace is not None:
            trace.request(req, cfg)
        if completed is not None:
            completed.append(req)
        if user_cb is not None:
            user_cb(req, t)

    return responded, trace is None and completed is None and user_cb is None


def _dispatch_fast(s, m, t: int) -> int:
    """Dispatch ``m`` from ``s``'s M in cycle ``t`` if it merges or allocates a free MSHR
    entry (§4.2: a read into its page's mergeable MSHR entry or a new one, no page cache;
    a write into its page's OPEN entry). Return 0 if it did not; else the first tick the
    media side must look again for it (the new entry's ``ready_at``, ``t + 1`` when the
    merge made the entry ready or its page full, else ``NEVER``). Every other case (a
    write-buffer allocation, a stall, read-after-write, the page cache) is the
    controller's :meth:`~hbfsim.model.controller.StackController.dispatch`."""
    q = m.q
    if m.op == "R":
        if q in s.wb_page:
            return 0
        e = s.mshr_open.get(q) if s.merge else None
        if e is None:
            free = s.mshr_free
            if not free or s.pc_size:
                return 0
            # a miss allocates the lowest free entry in WAIT (v1 §4.2 read step 3)
            m.t_map = t
            e = s.mshr[heappop(free)]
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
            if s.merge:
                s.mshr_open[q] = e
            pend = s.mshr_pend
            pend[q] = pend.get(q, 0) + 1
            e.state = WAIT
            if s.demand or e.bytes >= s.agg_thr or s.agg_window <= 1:
                r = e.ready_at = t + 1
            else:
                r = e.ready_at = t + s.agg_window
            heappush(s.enq_wait, (r, e.idx, t))
            return r
        m.t_map = t
        m.mshr_hit = True
        e.waiters.append(m)
        e.bytes += m.nbytes
        s.mshr_hits += 1
        if e.state == WAIT and not s.demand and e.bytes >= s.agg_thr and e.ready_at > t + 1:
            e.ready_at = t + 1
            heappush(s.enq_wait, (t + 1, e.idx, e.alloc))
            return t + 1
        return NEVER
    e = s.wb_open.get(q)
    if e is None:
        return 0
    m.t_map = t
    off = m.off
    n = m.nbytes
    e.waiters.append(m)
    if m.data is not None:
        e.data[off:off + n] = m.data
    before = e.cov
    cov = e.cov = before | (((1 << n) - 1) << off)
    s.st["coverage_new_bytes"] += cov.bit_count() - before.bit_count()
    if cov == FULL_MASK and before != FULL_MASK:
        e.full_at = t + 1
        s.full_pending.append(e)
        return t + 1
    return NEVER


def _media_phases(s, t: int) -> bool:
    """Phases (c)-(e) of one stack in cycle ``t``: release the completions due, the issue
    decisions, the enqueue, each looked at only when its guard says it can act.

    Written out: the release (:meth:`PipelinedStackController.release_media`), the issue
    without a stack-wide active cap or a write-drain window (v2 §7) and the enqueue with no
    write-buffer entry in FLUSH (v1 §6); the other cases call the controller's method."""
    busy = False
    media = s.media
    due = media._due
    if due and due[0][0] <= t:
        # (c) the completions of t free their subarrays and slots for (d) (v2 §7)
        delivered = s._delivered = media.deliver(t)
        bs, active, ic = s.busy, s.active, s.issue_check
        for ch, sub, _tag, _flags in delivered:
            bs[ch].discard(sub)
            active[ch] -= 1
            ic.add(ch)
        s.active_sum -= len(delivered)
        busy = True
    ic = s.issue_check
    if s.policy == "write-drain" or s.total_cap < 1 << 30:
        if s.issue(t):
            busy = True
    elif ic:
        # (d) one issue decision per channel (v1 §7 rules; the command on cmd[c] in t + 1)
        rp = s.policy != "fcfs"
        cap = s.active_cap
        active = s.active
        done = []
        ti = t + s.cmd_delay
        for ch in ic:
            if active[ch] >= cap:
                done.append(ch)
                continue
            bs = s.busy[ch]
            qc = s.queue[ch]
            pick = alt = None
            for e in qc:
                if e.sub in bs:
                    continue
                if not rp or e.kind == 0:   # no drain window: reads first
                    pick = e
                    break
                if alt is None:
                    alt = e
            if pick is None:
                pick = alt
                if pick is None:
                    done.append(ch)
                    continue
            qc.remove(pick)
            bs.add(pick.sub)
            active[ch] += 1
            pick.state = ISSUED
            pick.ti = ti
            s.active_sum += 1
            s.ch_ops[ch] += 1
            if pick.kind == 1:
                s.queued_programs -= 1
                media.issue(ti, ch, pick.sub, PROGRAM, pick.local, pick.idx * 2 + 1)
            else:
                media.issue(ti, ch, pick.sub, READ, pick.local, pick.idx * 2)
            s.issued_at[ch] = t
            busy = True
        for ch in done:
            ic.discard(ch)
    ew = s.enq_wait
    if s.wb_flush:
        if s.enqueue(t):
            busy = True
    elif s.enq_chans or ew and ew[0][0] <= t:
        # (e) ready MSHR entries into their channels' queues (v1 §6)
        mshr = s.mshr
        chans = s.enq_chans
        enq_ready = s.enq_ready
        while ew and ew[0][0] <= t:
            ready_at, idx, alloc = heappop(ew)
            e = mshr[idx]
            if e.state == WAIT and e.ready_at == ready_at and e.alloc == alloc:
                heappush(enq_ready[e.ch], idx)
                chans.add(e.ch)
        if chans:
            queue, issued_at, issued_k = s.queue, s.issued_at, s.issued_k
            qdepth = s.qdepth
            for ch in sorted(chans) if len(chans) > 1 else list(chans):
                qc = queue[ch]
                if len(qc) + (issued_k[ch] if issued_at[ch] == t else 0) >= qdepth:
                    continue
                heap = enq_ready[ch]
                e = mshr[heappop(heap)]
                if not heap:
                    chans.discard(ch)
                s.agg_wait += t - e.alloc - 1
                e.state = QUEUED
                e.tq = t
                qc.append(e)
                e.depth = len(qc)
                ic.add(ch)
                busy = True
    return busy


def _end_phases(s, t: int, drain: bool, ports: bool) -> bool:
    """Phases (h) and (i) of one stack in cycle ``t``: write-buffer triggers (in the channel
    shape, ``ports``, also the raw flushes of several ports) and completions into RETURN,
    each looked at only when its guard says it can act. Written out: a READ completion
    without the page cache (``_read_done``: RETURN from ``t + 1``, v2 §4b)."""
    busy = False
    dl = s.wb_deadlines
    if (s.full_pending or s.raw_now is not None or s.pressure_now is not None
            or dl and dl[0][0] <= t or drain and s.wb_open
            or ports and s._raw_more) and s.wb_triggers(t, drain):
        busy = True
    delivered = s._delivered
    if delivered:
        s._delivered = []
        busy = True
        pc = s.pc_size
        for _ch, _sub, tag, flags in delivered:
            if tag & 1 or pc:
                s._cpl_entry(t, tag, flags)
                continue
            e = s.mshr[tag >> 1]
            e.state = RETURN
            e.tc = t
            e.flags = flags
            q = e.q
            e.snap = s.data.get(q)
            mo = s.mshr_open
            if mo.get(q) is e:
                del mo[q]
            pend = s.mshr_pend
            n = pend[q] - 1
            if n:
                pend[q] = n
            else:
                del pend[q]
            heappush(s.ret_r, e.idx)
    cd = s.cache_due
    if cd and cd[0][0] <= t:
        busy = True
        while cd and cd[0][0] <= t:
            s._read_done(s.mshr[heappop(cd)[1]], t, 0)
    return busy


def _drain_wake(stacks, hz, drain_at: int) -> None:
    """``drain`` rises in ``drain_at``: the write-buffer triggers of a stack with an OPEN
    entry act from then on (v2 §1, v1 §4.4)."""
    for si, s in enumerate(stacks):
        if s.wb_open and hz[si] > drain_at:
            hz[si] = drain_at


def _media_wake(s, t: int, drain_at) -> int:
    """After the media phases and triggers of cycle ``t`` ran: the first tick in which one of
    (c)-(e), (h) or (i) can act again, unless a later phase of a cycle hands them work
    (the dispatch paths lower it). Until then the loop does not look at them."""
    if s.issue_check or s.enq_chans or s.wb_flush or s.full_pending \
            or s.policy == "write-drain":
        return t + 1
    h = NEVER
    d = s.media._due
    if d:
        h = d[0][0]
    d = s.enq_wait
    if d and d[0][0] < h:
        h = d[0][0]
    d = s.wb_deadlines
    if d and d[0][0] < h:
        h = d[0][0]
    d = s.cache_due
    if d and d[0][0] < h:
        h = d[0][0]
    if drain_at is not None and s.wb_open:
        d = drain_at if drain_at > t else t + 1
        if d < h:
            h = d
    return h if h > t else t + 1


# ============================================================================ stack shape
def _run_stack(system, until: int | None) -> int:
    """The stack shape (``host_ports = "stack"``): one port per stack, the route stage and
    the egress round robin with several stacks (v2 §2)."""
    stacks = system.stacks
    n = len(stacks)
    single = stacks[0] if n == 1 else None
    ingress = system.ingress
    route = system.route
    resp_ready = system.resp_ready
    responded, plain = _respond(system)
    lat_r = system.lat["R"]
    lat_w = system.lat["W"]
    lat_first = system.lat_first
    t = system.t
    system.t_resume = None
    steps = 0
    # per stack: the first tick in which its media phases (c)-(e) and triggers (h), (i)
    # can act (_media_wake); every phase is looked at in the first cycle
    hz = [t] * n
    pairs = list(enumerate(stacks))
    try:
        while True:
            if until is not None and t > until:
                break
            steps += 1
            busy = False
            # (a) E handshakes: one per system response port (v2 §2, §8)
            if single is not None:
                hs = single if single.egress else None
            else:
                hs = None
                rr = system.rr
                for k in range(n):
                    i = rr + k
                    if i >= n:
                        i -= n
                    if stacks[i].egress:
                        hs = stacks[i]
                        break
            if hs is not None:
                busy = True
                if resp_ready is None or resp_ready(t):
                    if single is None:
                        system.rr = i + 1 if i + 1 < n else 0
                    req = hs.egress.popleft()
                    hs._hs_t = t
                    req.t_done = t
                    hs._released += 1
                    system.n_done += 1
                    d = t - req.arrival
                    if req.op == "R":
                        lat_r.append(d)
                        if not req.mshr_hit:
                            lat_first.append(d)
                    else:
                        lat_w.append(d)
                    if t > system.last_completion:
                        system.last_completion = t
                    if req.error:
                        system.errors += 1
                    if not plain:
                        responded(req, t)
            drain_at = system.drain_at
            drain = drain_at is not None and t >= drain_at
            for si, s in pairs:
                # (b) K launches, then R chooses (v2 §8)
                k = s.k_hold
                if k is not None or s.lock is not None or s.ret_r or s.ret_w:
                    wait = None
                    if k is not None:
                        e, i = k
                        req = e.waiters[i]
                        eg = s.egress
                        if len(eg) + (1 if s._hs_t == t else 0) < EGRESS_DEPTH:
                            link = s.link
                            ch = e.ch
                            g = link.gain
                            ct = link.credit
                            x = ct[ch] + g * (t - link.credit_t[ch])
                            if x > g:
                                x = g
                            if x > 0:
                                x += g - req.nbytes * link.b
                                ct[ch] = x if x < g else g
                                link.credit_t[ch] = t + 1
                                # the launch (the controller's _launch, v2 §4.3,
                                # §4.4, §8): response formed, entry FREE after the last
                                b = s.blocked_since
                                if b >= 0:
                                    s.ch_link_stall[ch] += t - b
                                    s.blocked_since = -1
                                flags = e.flags
                                req.error = bool(flags & FLAG_ERROR)
                                if e.kind == 0:
                                    req.buffer_hit = bool(flags & FLAG_BUFFER_HIT)
                                    req.cache_hit = e.cache
                                    snap = e.snap
                                    if snap is not None:
                                        req.data = snap[req.off:req.off + req.nbytes]
                                    if i + 1 == len(e.waiters):
                                        s._free_r.append(e.idx)
                                elif i + 1 == len(e.waiters):
                                    s._free_w.append(e)
                                req.entry_info = (e.tq, e.ti, e.tc, e.depth)
                                eg.append(req)
                                k = s.k_hold = None
                                busy = True
                            else:
                                if s.blocked_since < 0:
                                    s.blocked_since = t
                                wait = link.credit_t[ch] + -(-(1 - ct[ch]) // g)
                    s.credit_wait = wait
                    r = s.r_hold
                    if r is None or k is None:
                        # R takes the next waiter: of the entry it drains, else the
                        # lowest-index RETURN entry, MSHR before write buffer (v1 §8)
                        cur = s.lock
                        if cur is None:
                            if s.ret_r:
                                cur = s.mshr[heappop(s.ret_r)]
                            elif s.ret_w:
                                cur = s.wb[heappop(s.ret_w)]
                        if cur is not None:
                            i = cur.head
                            cur.head = i + 1
                            s.lock = cur if i + 1 < len(cur.waiters) else None
                            w = (cur, i)
                        else:
                            w = None
                        if r is not None:
                            s.k_hold = r
                            s.r_hold = w
                            busy = True
                        elif w is not None:
                            if k is None:
                                s.k_hold = w
                            else:
                                s.r_hold = w
                            busy = True
                # (c)-(e) media side
                if t >= hz[si] and _media_phases(s, t):
                    busy = True
                # (f) dispatch from M (v1 §4.2 rules, start-of-cycle state)
                m = s.m
                if m is not None and m.t_accept < t:
                    q = m.q
                    if m.op == "R" and s.merge and q not in s.wb_page \
                            and (e := s.mshr_open.get(q)) is not None:
                        # a read that merges (v1 §4.2 read step 2), _dispatch_fast's
                        m.t_map = t
                        m.mshr_hit = True
                        e.waiters.append(m)
                        e.bytes += m.nbytes
                        s.mshr_hits += 1
                        w = NEVER
                        if e.state == WAIT and not s.demand and e.bytes >= s.agg_thr \
                                and e.ready_at > t + 1:
                            e.ready_at = t + 1
                            heappush(s.enq_wait, (t + 1, e.idx, e.alloc))
                            w = t + 1
                    else:
                        w = _dispatch_fast(s, m, t)
                    if w:
                        s.m = None
                        busy = True
                        if w < hz[si]:
                            hz[si] = w
                    else:
                        # the controller's path may hand (h) work in this cycle (raw,
                        # pressure) or start timers: look at every phase from now
                        hz[si] = t
                        if s.dispatch(t, drain):
                            busy = True
            # (g) accepts from start-of-cycle occupancy (v2 §4.1, §2)
            if single is not None:
                # (the reference's test, its cheapest term first: admission backs up)
                if single.inflight < single.admission and len(single.qin) < INGRESS_DEPTH \
                        and ingress and ingress[0].arrival <= t:
                    req = ingress.popleft()
                    req.t_accept = t
                    req.depth = single.inflight
                    single.inflight += 1
                    single.qin.append((req, t))
                    busy = True
            else:
                ready = len(route) < ROUTE_DEPTH
                if route:
                    s = stacks[route[0].stack]
                    if len(s.qin) < INGRESS_DEPTH and s.inflight < s.admission:
                        req = route.popleft()
                        req.depth = s.inflight
                        s.inflight += 1
                        s.qin.append((req, t))
                        busy = True
                if ready and ingress and ingress[0].arrival <= t:
                    req = ingress.popleft()
                    req.t_accept = t
                    route.append(req)
                    busy = True
            # queue heads into M, end of cycle (v2 §4.1)
            holds = False
            for s in stacks:
                qin = s.qin
                if qin:
                    if s.m is None and qin[0][1] < t:
                        s.m = qin.popleft()[0]
                        busy = True
                    holds = True
                elif s.m is not None:
                    holds = True
            # drain from the cycle after the last request left M (v2 §1)
            if drain_at is None and not holds and system.inputs_done and not ingress \
                    and not route:
                system.drain_at = t + 1
                _drain_wake(stacks, hz, t + 1)
            # (h)-(j)
            drain_at = system.drain_at
            for si, s in pairs:
                ev = t >= hz[si]
                if ev and _end_phases(s, t, drain, False):
                    busy = True
                # (j) end of cycle: admission releases, entry frees
                r = s._released
                if r:
                    s.inflight -= r
                    s._released = 0
                if s._free_r or s._free_w:
                    s.end_cycle()
                if ev:
                    hz[si] = _media_wake(s, t, drain_at)
            if busy:
                t += 1
                continue
            nxt = system._next_tick(t)
            if nxt is None:
                break
            if until is not None and nxt > until:
                t = until + 1
                system.t_resume = nxt
                break
            t = nxt
    finally:
        system.steps += steps
    system.t = t
    return t


def _run_single(system, until: int | None) -> int:
    """The stack shape with one stack: :func:`_run_stack`'s cycle with the stack's stable
    containers in locals, and R, K, the entry R drains, the last handshake cycle, the
    credit-stall start, M and the admission count held in locals (M and the count are
    written back before the controller's dispatch and the next-event search, which read
    them, the rest when the loop stops: nothing else the loop calls reads them)."""
    s = system.stacks[0]
    ingress = system.ingress
    resp_ready = system.resp_ready
    responded, plain = _respond(system)
    lat_r = system.lat["R"]
    lat_w = system.lat["W"]
    lat_first = system.lat_first
    egress = s.egress
    qin = s.qin
    ret_r, ret_w = s.ret_r, s.ret_w
    mshr, wb = s.mshr, s.wb
    free_r, free_w = s._free_r, s._free_w
    link = s.link
    ct, ctt, g, lb = link.credit, link.credit_t, link.gain, link.b
    stall = s.ch_link_stall
    mshr_open, wb_page, enq_wait = s.mshr_open, s.wb_page, s.enq_wait
    merge, demand, agg_thr = s.merge, s.demand, s.agg_thr
    admission = s.admission
    dispatch = s.dispatch
    k_hold, r_hold, lock = s.k_hold, s.r_hold, s.lock
    hs_t, blocked = s._hs_t, s.blocked_since
    m, inflight = s.m, s.inflight
    t = system.t
    system.t_resume = None
    steps = 0
    hz = t              # as in _run_stack
    try:
        while True:
            if until is not None and t > until:
                break
            steps += 1
            busy = False
            released = False
            # (a) the E handshake (v2 §8)
            if egress:
                busy = True
                if resp_ready is None or resp_ready(t):
                    req = egress.popleft()
                    hs_t = t
                    req.t_done = t
                    released = True
                    system.n_done += 1
                    d = t - req.arrival
                    if req.op == "R":
                        lat_r.append(d)
                        if not req.mshr_hit:
                            lat_first.append(d)
                    else:
                        lat_w.append(d)
                    if t > system.last_completion:
                        system.last_completion = t
                    if req.error:
                        system.errors += 1
                    if not plain:
                        responded(req, t)
            drain_at = system.drain_at
            drain = drain_at is not None and t >= drain_at
            # (b) K launches, then R chooses (v2 §8)
            if k_hold is not None or lock is not None or ret_r or ret_w:
                wait = None
                if k_hold is not None:
                    e, i = k_hold
                    req = e.waiters[i]
                    if len(egress) + (1 if hs_t == t else 0) < EGRESS_DEPTH:
                        ch = e.ch
                        x = ct[ch] + g * (t - ctt[ch])
                        if x > g:
                            x = g
                        if x > 0:
                            x += g - req.nbytes * lb
                            ct[ch] = x if x < g else g
                            ctt[ch] = t + 1
                            # the launch, as in _run_stack
                            if blocked >= 0:
                                stall[ch] += t - blocked
                                blocked = -1
                            flags = e.flags
                            req.error = bool(flags & FLAG_ERROR)
                            if e.kind == 0:
                                req.buffer_hit = bool(flags & FLAG_BUFFER_HIT)
                                req.cache_hit = e.cache
                                snap = e.snap
                                if snap is not None:
                                    req.data = snap[req.off:req.off + req.nbytes]
                                if i + 1 == len(e.waiters):
                                    free_r.append(e.idx)
                            elif i + 1 == len(e.waiters):
                                free_w.append(e)
                            req.entry_info = (e.tq, e.ti, e.tc, e.depth)
                            egress.append(req)
                            k_hold = None
                            busy = True
                        else:
                            if blocked < 0:
                                blocked = t
                            wait = ctt[ch] + -(-(1 - ct[ch]) // g)
                s.credit_wait = wait
                if r_hold is None or k_hold is None:
                    cur = lock
                    if cur is None:
                        if ret_r:
                            cur = mshr[heappop(ret_r)]
                        elif ret_w:
                            cur = wb[heappop(ret_w)]
                    if cur is not None:
                        i = cur.head
                        cur.head = i + 1
                        lock = cur if i + 1 < len(cur.waiters) else None
                        w = (cur, i)
                    else:
                        w = None
                    if r_hold is not None:
                        k_hold = r_hold
                        r_hold = w
                        busy = True
                    elif w is not None:
                        if k_hold is None:
                            k_hold = w
                        else:
                            r_hold = w
                        busy = True
            # (c)-(e) media side
            if t >= hz and _media_phases(s, t):
                busy = True
            # (f) dispatch from M
            if m is not None and m.t_accept < t:
                q = m.q
                if m.op == "R" and merge and q not in wb_page \
                        and (e := mshr_open.get(q)) is not None:
                    m.t_map = t
                    m.mshr_hit = True
                    e.waiters.append(m)
                    e.bytes += m.nbytes
                    s.mshr_hits += 1
                    m = None
                    busy = True
                    if e.state == WAIT and not demand and e.bytes >= agg_thr \
                            and e.ready_at > t + 1:
                        e.ready_at = t + 1
                        heappush(enq_wait, (t + 1, e.idx, e.alloc))
                        if hz > t + 1:
                            hz = t + 1
                else:
                    w = _dispatch_fast(s, m, t)
                    if w:
                        m = None
                        busy = True
                        if w < hz:
                            hz = w
                    else:
                        hz = t
                        s.m = m
                        if dispatch(t, drain):
                            busy = True
                        m = s.m
            # (g) the accept (v2 §4.1), then Q's head into M
            if inflight < admission and len(qin) < INGRESS_DEPTH and ingress \
                    and ingress[0].arrival <= t:
                req = ingress.popleft()
                req.t_accept = t
                req.depth = inflight
                inflight += 1
                qin.append((req, t))
                busy = True
            if qin:
                if m is None and qin[0][1] < t:
                    m = qin.popleft()[0]
                    busy = True
            elif drain_at is None and m is None and system.inputs_done and not ingress:
                # drain from the cycle after the last request left M (v2 §1)
                system.drain_at = t + 1
                if s.wb_open and hz > t + 1:
                    hz = t + 1
            # (h)-(j)
            ev = t >= hz
            if ev and _end_phases(s, t, drain, False):
                busy = True
            if released:
                inflight -= 1
            if free_r or free_w:
                s.end_cycle()
            if ev:
                hz = _media_wake(s, t, system.drain_at)
            if busy:
                t += 1
                continue
            s.m, s.inflight = m, inflight
            nxt = system._next_tick(t)
            if nxt is None:
                break
            if until is not None and nxt > until:
                t = until + 1
                system.t_resume = nxt
                break
            t = nxt
    finally:
        system.steps += steps
        s.k_hold, s.r_hold, s.lock = k_hold, r_hold, lock
        s._hs_t, s.blocked_since = hs_t, blocked
        s.m, s.inflight = m, inflight
    system.t = t
    return t
