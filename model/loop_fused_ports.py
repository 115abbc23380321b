"""The contract-2 fused run loop, channel shape (``host_ports = "channel"``): ``S * C``
system ports wired to the stacks' ports, one request and one response per port per cycle
(docs/timing-contract.md §2, §4.1, §4.2.3, §4.2.4, §8, §12; §18 step 5).

:func:`hbfsim.model.loop_fused_v2.run_fused_v2` calls :func:`run_channel` for the channel
shape. It is the stack shape's fused cycle (:mod:`hbfsim.model.loop_fused_v2`, which holds
the phases both shapes share) on every port of
:class:`~hbfsim.model.controller_ports.ChannelStackController`, and looks only at the ports
that hold something (:class:`_Ports`), in the ascending order of the reference loop
:func:`hbfsim.model.system_v2.run_pipelined`, which it must equal event for event
(tests/model/test_engines_v2.py).
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from hbfsim.model.controller import WAIT, StackController
from hbfsim.model.controller_v2 import EGRESS_DEPTH, INGRESS_DEPTH
from hbfsim.model.loop_fused_v2 import (NEVER, _dispatch_fast, _drain_wake, _end_phases,
                                        _media_phases, _media_wake, _respond)
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR

__all__ = ["run_channel"]


def _dispatch_ports(s, t: int, drain: bool, held, dispatch_one):
    """Phase (f) of a channel-shape stack: :meth:`ChannelStackController.dispatch` with the
    merges of :func:`_dispatch_fast` written out (reads first, each kind's ports from its
    pool's pointer, v2 §4.2.3, §4.2.4) for the ports ``held`` (ascending) whose M holds a
    request; every other M goes through contract 1's rules (``dispatch_one``) as there.

    The reference's pass over a kind with no M leaves ``raw_now`` and ``_raw_more`` as they
    are (None and empty in this phase, or the reads' ``raws[0]`` and ``raws[1:]``), so only
    the kinds that have one are passed over.

    Return whether an M dispatched and the first tick the media side must look again (as
    :func:`_dispatch_fast`; ``t`` once the controller's path ran)."""
    inp = s.inp
    reads = []
    writes = []
    for p in held:
        (reads if inp[p].m.op == "R" else writes).append(p)
    raws = []
    changed = False
    wake = NEVER
    if reads:
        changed, last, wake = _dispatch_kind(s, t, drain, reads, s.ap_r, s.mshr_free, raws,
                                             dispatch_one)
        if last >= 0:
            s.ap_r = (last + 1) % s.P
    if writes:
        # the writes' first port takes the reads' raws[0] again (the reference's order)
        c, last, w = _dispatch_kind(s, t, drain, writes, s.ap_w, s.wb_free, raws,
                                    dispatch_one)
        changed |= c
        if w < wake:
            wake = w
        if last >= 0:
            s.ap_w = (last + 1) % s.P
    return changed, wake


def _dispatch_kind(s, t, drain, mine, ap, free, raws, dispatch_one):
    """One kind's pass of :func:`_dispatch_ports`: its ports from the pool's pointer
    ``ap``; return whether one dispatched, the last port that took an entry (or -1) and
    the wake tick."""
    if ap and len(mine) > 1:
        mine = [p for p in mine if p >= ap] + [p for p in mine if p < ap]
    inp = s.inp
    changed = False
    last = -1
    wake = NEVER
    for p in mine:
        port = inp[p]
        m = port.m
        n_free = len(free)
        w = _dispatch_fast(s, m, t) if m.t_accept < t else 0
        if w:
            port.m = None
            changed = True
            if w < wake:
                wake = w
        else:
            wake = t
            s.m = m
            if dispatch_one(s, t, drain):
                changed = True
            port.m = s.m
            s.m = None
        if s.raw_now is not None:
            raws.append(s.raw_now)
            s.raw_now = None
        if len(free) < n_free:
            last = p
    if raws:
        s.raw_now = raws[0]
        s._raw_more = raws[1:]
    return changed, last, wake


class _Ports:
    """The ports of one channel-shape stack that hold something, by side (rebuilt from the
    controller at the start of every run call; the loop keeps them up to date): E not
    empty (``egress``), R, K or a RETURN entry to serve (``respond``), M full (``m``),
    Q not empty (``q``); and the system ports' queued requests (``pin``): the ports whose
    head has arrived (``ready``), and a heap of (head's arrival, port) for the others
    (``wait``; moved to ``ready`` in the head's arrival tick)."""

    __slots__ = ("s", "inp", "outp", "pin", "egress", "respond", "m", "q", "ready", "wait")

    def __init__(self, s, pin):
        self.s = s
        self.inp = s.inp
        self.outp = s.outp
        self.pin = pin
        self.egress = {p for p, o in enumerate(s.outp) if o.egress}
        self.respond = {p for p, o in enumerate(s.outp)
                        if o.k_hold is not None or o.lock is not None or o.ret_r or o.ret_w}
        self.m = {p for p, i in enumerate(s.inp) if i.m is not None}
        self.q = {p for p, i in enumerate(s.inp) if i.qin}
        self.rescan()

    def rescan(self):
        self.ready = set()
        self.wait = [(q[0].arrival, p) for p, q in enumerate(self.pin) if q]
        heapify(self.wait)


def run_channel(system, until: int | None) -> int:
    """The channel shape (``host_ports = "channel"``): ``S * C`` system ports wired to the
    stacks' ports, one request and one response per port per cycle (v2 §2, §12). Only the
    ports that hold something are looked at, in ascending order as the reference loop
    does."""
    dispatch_one = StackController.dispatch     # contract 1's rules for one M (§4.2)
    stacks = system.stacks
    C = system.cfg.channels
    resp_ready = system.resp_ready
    responded, plain = _respond(system)
    lat_r = system.lat["R"]
    lat_w = system.lat["W"]
    lat_first = system.lat_first
    port_in = system.port_in
    shape = [_Ports(s, port_in[s.stack * C:(s.stack + 1) * C]) for s in stacks]
    nsub = system.submitted
    t = system.t
    system.t_resume = None
    steps = 0
    hz = [t] * len(stacks)      # as in loop_fused_v2._run_stack
    pairs = list(enumerate(stacks))
    try:
        while True:
            if until is not None and t > until:
                break
            steps += 1
            busy = False
            # (a) E handshakes: every port whose E holds a response (v2 §2, §12)
            held = None
            for sp in shape:
                es = sp.egress
                if not es:
                    continue
                busy = True
                if held is None:
                    held = resp_ready is not None and not resp_ready(t)
                if held:
                    break
                s = sp.s
                outp = sp.outp
                for p in sorted(es) if len(es) > 1 else tuple(es):
                    out = outp[p]
                    eg = out.egress
                    req = eg.popleft()
                    if not eg:
                        es.discard(p)
                    out.hs_t = t
                    req.t_done = t
                    s._released += 1
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
            if system.submitted != nsub:
                # the response callback presented new requests (a closed loop)
                nsub = system.submitted
                for sp in shape:
                    sp.rescan()
            drain_at = system.drain_at
            drain = drain_at is not None and t >= drain_at
            for si, sp in enumerate(shape):
                s = sp.s
                outp = sp.outp
                rs = sp.respond
                # (b) K launches, then R chooses, on every response port (v2 §8); entries
                # that entered RETURN before t go to the port of their channel first
                ret = s.ret_r
                if ret:
                    mshr = s.mshr
                    while ret:
                        idx = heappop(ret)
                        ch = mshr[idx].ch
                        heappush(outp[ch].ret_r, idx)
                        rs.add(ch)
                ret = s.ret_w
                if ret:
                    wb = s.wb
                    while ret:
                        idx = heappop(ret)
                        ch = wb[idx].ch
                        heappush(outp[ch].ret_w, idx)
                        rs.add(ch)
                wait = None
                if rs:
                    es = sp.egress
                    for p in sorted(rs) if len(rs) > 1 else tuple(rs):
                        port = outp[p]
                        k = port.k_hold
                        if k is not None:
                            e, i = k
                            req = e.waiters[i]
                            eg = port.egress
                            if len(eg) + (1 if port.hs_t == t else 0) < EGRESS_DEPTH:
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
                                    # the launch, as in loop_fused_v2._run_stack
                                    b = port.blocked
                                    if b >= 0:
                                        s.ch_link_stall[ch] += t - b
                                        port.blocked = -1
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
                                    es.add(p)
                                    k = port.k_hold = None
                                    busy = True
                                else:
                                    if port.blocked < 0:
                                        port.blocked = t
                                    w = link.credit_t[ch] + -(-(1 - ct[ch]) // g)
                                    if wait is None or w < wait:
                                        wait = w
                        r = port.r_hold
                        if r is None or k is None:
                            cur = port.lock
                            if cur is None:
                                if port.ret_r:
                                    cur = s.mshr[heappop(port.ret_r)]
                                elif port.ret_w:
                                    cur = s.wb[heappop(port.ret_w)]
                            if cur is not None:
                                i = cur.head
                                cur.head = i + 1
                                port.lock = cur if i + 1 < len(cur.waiters) else None
                                w = (cur, i)
                            else:
                                w = None
                            if r is not None:
                                port.k_hold = r
                                port.r_hold = w
                                busy = True
                            elif w is not None:
                                if k is None:
                                    port.k_hold = w
                                else:
                                    port.r_hold = w
                                busy = True
                        if port.k_hold is None and port.lock is None and not port.ret_r \
                                and not port.ret_w:
                            rs.discard(p)
                s.credit_wait = wait
                # (c)-(e) media side
                if t >= hz[si] and _media_phases(s, t):
                    busy = True
                # (f) dispatch from every M
                ms = sp.m
                if len(ms) == 1:
                    # one M: no order among ports; its raw flush, if any, is raw_now
                    for p in ms:
                        break
                    port = sp.inp[p]
                    m = port.m
                    free = s.mshr_free if m.op == "R" else s.wb_free
                    n_free = len(free)
                    w = 0
                    if m.t_accept < t:
                        q = m.q
                        if m.op == "R" and s.merge and q not in s.wb_page \
                                and (e := s.mshr_open.get(q)) is not None:
                            # a read that merges, as in loop_fused_v2._run_stack
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
                        port.m = None
                        ms.clear()
                        busy = True
                        if w < hz[si]:
                            hz[si] = w
                        if m.op == "R" and len(free) < n_free:
                            s.ap_r = (p + 1) % s.P
                    else:
                        hz[si] = t
                        s.m = m
                        if dispatch_one(s, t, drain):
                            busy = True
                        port.m = s.m
                        s.m = None
                        if port.m is None:
                            ms.clear()
                        if len(free) < n_free:
                            if m.op == "R":
                                s.ap_r = (p + 1) % s.P
                            else:
                                s.ap_w = (p + 1) % s.P
                elif ms:
                    held_ports = sorted(ms)
                    c, w = _dispatch_ports(s, t, drain, held_ports, dispatch_one)
                    if c:
                        busy = True
                    if w < hz[si]:
                        hz[si] = w
                    inp = sp.inp
                    for p in held_ports:
                        if inp[p].m is None:
                            ms.discard(p)
            # (g) accepts from start-of-cycle occupancy and the admission term (v2 §4.1),
            # then queue heads into M
            holds = False
            for sp in shape:
                ps = sp.ready
                w = sp.wait
                while w and w[0][0] <= t:
                    ps.add(heappop(w)[1])
                if not ps:
                    continue
                s = sp.s
                # the free slots at the start of the phase: every port takes one while
                # free >= C; below C admission slots, a port only while its rank
                # (p - t) mod C is below them
                free = s.admission - s.inflight
                if free <= 0:
                    continue
                if s.admission >= C:
                    if free < C:        # every port or none (v2 §4.1)
                        continue
                    cand = sorted(ps)
                elif len(ps) == 1:
                    for p in ps:
                        break
                    cand = (p,) if (p - t) % C < free else ()
                elif free >= C:
                    cand = sorted(ps)
                elif len(ps) <= free:
                    cand = sorted([p for p in ps if (p - t) % C < free])
                else:
                    # the ranks below free are the ports t mod C .. t mod C + free - 1,
                    # cyclically: ascending, the wrapped part first
                    b = t % C
                    e = b + free
                    if e <= C:
                        cand = sorted(ps.intersection(range(b, e)))
                    else:
                        cand = sorted(ps.intersection(range(e - C))) + \
                            sorted(ps.intersection(range(b, C)))
                if cand:
                    inp = sp.inp
                    pin = sp.pin
                    for p in cand:
                        qin = inp[p].qin
                        if len(qin) < INGRESS_DEPTH:
                            q = pin[p]
                            req = q.popleft()
                            if not q:
                                ps.discard(p)
                            elif q[0].arrival > t:
                                ps.discard(p)
                                heappush(w, (q[0].arrival, p))
                            req.t_accept = t
                            req.depth = s.inflight
                            s.inflight += 1
                            qin.append((req, t))
                            sp.q.add(p)
                            busy = True
            for sp in shape:
                qs = sp.q
                if qs:
                    inp = sp.inp
                    for p in tuple(qs):
                        port = inp[p]
                        if port.m is None:
                            qin = port.qin
                            if qin[0][1] < t:
                                port.m = qin.popleft()[0]
                                sp.m.add(p)
                                busy = True
                                if not qin:
                                    qs.discard(p)
                    holds = True
                elif sp.m:
                    holds = True
            # drain from the cycle after the last request left M (v2 §1)
            if drain_at is None and not holds and system.inputs_done \
                    and not any(sp.ready or sp.wait for sp in shape):
                system.drain_at = t + 1
                _drain_wake(stacks, hz, t + 1)
            # (h)-(j)
            drain_at = system.drain_at
            for si, s in pairs:
                ev = t >= hz[si]
                if ev and _end_phases(s, t, drain, True):
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
