"""The contract-1 fused run loop: one stack, the per-request and per-page hot paths written out
(docs/history.md §2; docs/benchmarks.md).

:meth:`hbfsim.model.system.HbfSystem.run` calls :func:`run_fused` for a single stack with
``engine = "fused"`` and ``resp.ready`` tied high. It runs the phases of
:func:`hbfsim.model.loop_reference.run_reference` with the same effects, event for event
(tests/model/test_engines.py), and hands every case it does not write out to the controller's
methods.
"""

from __future__ import annotations

import heapq

from hbfsim.model.controller import FREE, FULL_MASK, ISSUED, QUEUED, RETURN, WAIT
from hbfsim.model.loop_reference import run_reference
from hbfsim.model.media import PROGRAM, READ

__all__ = ["run_fused"]


def run_fused(system, until: int | None) -> int:
    """The single-stack run loop with the per-request and per-page hot paths inlined.

    Same phases, same order and same effects as :func:`.loop_reference.run_reference`
    (event for event, cycle for cycle: tests/model/test_engines.py). Written out here: the drain of
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
    S = system.stacks[0]
    if S.m is not None and S.m.t_accept >= system.t:
        # M was filled in this very cycle (a caller moved t back): the loop below
        # dispatches M in every cycle it runs, so leave this call to the reference loop
        return run_reference(system, until)
    ingress = system.ingress
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
    lat_r = system.lat["R"]
    lat_w = system.lat["W"]
    wb = S.wb
    wb_open = S.wb_open
    wb_deadlines = S.wb_deadlines
    wstats = S.st
    lat_first = system.lat_first
    plain = system.trace is None and not system.keep
    user_cb = system.user_cb
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
    t = system.t
    steps = 0
    t0 = t                  # first cycle of the current run of evaluated cycles
    nd = 0                  # responses not yet added to system.n_done
    last_done = -1
    m = S.m
    inflight = S.inflight
    drain_at = system.drain_at
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
    lastarr = system.last_arrival if user_cb is None else NEVER
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
                                    system.errors += k - chead
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
                            system.errors += 1
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
                        system.n_done += nd
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
                elif drain_at is None and not ingress and system.inputs_done:
                    # drain from the cycle after the last request left M (W2, §1)
                    drain_at = system.drain_at = t + 1
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
            system.n_done += nd
            nd = 0
            nxt = system._next_tick(t)
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
        system.n_done += nd
        if last_done > system.last_completion:
            system.last_completion = last_done
        system.steps += steps
        system.t = t
    return t

