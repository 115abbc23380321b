"""The golden model under timing contract 2, channel shape (docs/timing-contract.md §18 step
5): one request and one response port per host channel over the stack-wide pools.

The checks: the channel shape with one channel equals the stack shape event for event on
random traffic (two implementations of the same ``P = 1`` rules), the admission term of
§4.1, the allocation pointers of §4.2.3 (diagram 11.6 and "no port waits more than P frees"),
reads before writes on one page (§4.2.4, diagram 11.6's partition case), the port check of
§1 and the ``S * C`` system ports of §2.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs


def v2(**kw):
    return load_config(**kw)


def run(cfg, spec, resp_ready=None):
    """Run ``spec`` (see :func:`make_reqs`); return the system (requests sorted by id) and its
    media commands ``(tick, stack, channel, subarray, op, tag)``."""
    system = HbfSystem(cfg)
    system.resp_ready = resp_ready
    cmds = []
    for s in system.stacks:
        def media_issue(ti, ch, sub, op, local, tag, orig=s.media.issue, k=s.stack):
            cmds.append((ti, k, ch, sub, op, tag))
            return orig(ti, ch, sub, op, local, tag)
        s.media.issue = media_issue
    system.run_requests(make_reqs(spec, cfg))
    system.completed.sort(key=lambda r: r.id)
    return system, sorted(cmds)


def outcome(system):
    return [(r.t_accept, r.t_map, r.t_done, r.entry_info, r.mshr_hit, r.buffer_hit,
             r.cache_hit, r.error, r.data) for r in system.completed]


def frees(system):
    """Wrap every stack's launch stage K: return the list ``(first FREE cycle, kind, index)``
    it fills (an entry is FREE from the cycle after its last waiter's launch, §4.3, DP4)."""
    out = []
    for s in system.stacks:
        def launch(port, t, orig=s._launch_port):
            held = port.k_hold
            launched = orig(port, t)
            if launched:
                cur, i = held
                if i + 1 == len(cur.waiters):
                    out.append((t + 1, cur.kind, cur.idx))
            return launched
        s._launch_port = launch
    return out


# ------------------------------------------------------------------ C = 1: channel = stack
traffic = st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 23),
                             st.sampled_from([0, 32, 96, 1024]),
                             st.sampled_from([32, 128, 1024, PAGE_BYTES]), st.integers(0, 3)),
                   min_size=1, max_size=60)
configs = st.fixed_dictionaries({
    "admission": st.sampled_from([2, 5, 256]),
    "mshr_entries": st.sampled_from([1, 3, 16]),
    "write_buffer_entries": st.sampled_from([1, 2, 8]),
    "queue_depth": st.sampled_from([1, 4]),
    "subarrays_per_channel": st.sampled_from([1, 4]),
    "read_mode": st.sampled_from(["demand", "aggregation"]),
    "mshr_merge": st.booleans(),
    "page_buffers": st.sampled_from([0, 2]),
    "page_cache_pages": st.sampled_from([0, 4]),
    "scheduler": st.sampled_from(["fcfs", "read-priority", "write-drain"]),
    "write_timeout_policy": st.sampled_from(["strict", "partial"]),
    "channel_bw_gbps": st.sampled_from([0.85, 192.0]),
})


@settings(max_examples=80, deadline=None)
@given(kw=configs, ops=traffic, held=st.sampled_from([None, 3]))
def test_one_channel_equals_stack_shape(kw, ops, held):
    """With ``C = 1`` the channel shape has one port per stack, so every rule of §4.1-§8 is
    the stack shape's (§14, last item): the same accept, dispatch, enqueue, command,
    completion and response cycle, flags and data for every request, on random traffic and
    with a consumer that drops ``resp.ready`` in one cycle of ``held``."""
    spec, t = [], 0
    for op, page, off, n, gap in ops:
        t += gap
        off = min(off, PAGE_BYTES - n)
        spec.append((op, page, off, n, t))
    ready = None if held is None else (lambda u: u % held != 0)
    base = dict(channels=1, capacity_bytes=64 * PAGE_BYTES, pages_per_block=4,
                t_read_us=0.1, t_prog_us=0.5, t_erase_us=1.0, write_deadline_ticks=40, **kw)
    (s1, c1), (s2, c2) = (run(v2(host_ports=shape, **base), spec, ready)
                          for shape in ("stack", "channel"))
    assert outcome(s1) == outcome(s2)
    assert c1 == c2
    assert dict(s1.stats) == dict(s2.stats)


# ------------------------------------------------------------------ §4.1 admission term
def test_all_ports_accept_in_one_cycle():
    """§12: with free slots for every port, each port accepts one request per cycle."""
    cfg = v2(host_ports="channel", channels=4)
    spec = [("R", p, 0, 32, 0) for p in range(4)] + [("R", 4 + p, 0, 32, 0) for p in range(4)]
    system, _ = run(cfg, spec)
    assert [r.t_accept for r in system.completed] == [0] * 4 + [1] * 4
    assert [r.t_map for r in system.completed] == [2] * 4 + [3] * 4


@settings(max_examples=30, deadline=None)
@given(pages=st.lists(st.integers(0, 63), min_size=2, max_size=40), admission=st.integers(1, 7))
def test_admission_term(pages, admission):
    """§4.1: with ``admission >= P`` a port accepts in ``t`` only while at least ``P``
    admission slots are free; below ``P`` slots, only while ``(p - t) mod P`` is below the
    free slots ``admission - inflight(t)`` (with one slot, port ``p`` accepts only in cycles
    ``t = p mod P``). ``inflight(t)`` is recomputed from the accepts and handshakes."""
    P = 4
    cfg = v2(host_ports="channel", channels=P, admission=admission, t_read_us=0.05)
    system, _ = run(cfg, [("R", q, 0, 32, 0) for q in pages])
    reqs = system.completed
    for r in reqs:
        inflight = sum(1 for o in reqs if o.t_accept < r.t_accept <= o.t_done)
        free = admission - inflight
        if admission >= P:
            assert free >= P, r
        else:
            assert (r.ch - r.t_accept) % P < free, r
    if admission == 1:
        assert all(r.t_accept % P == r.ch for r in reqs)


# ------------------------------------------------------------------ §4.2.3 shared pools
def test_diagram_11_6_one_free_entry_two_ports():
    """11.6: ports 0 and 1 miss in one cycle with one free MSHR entry and ``ap = 0``: port 0
    allocates it, port 1 stalls and takes the next entry freed (the pointer moved to 1),
    although port 0 then misses again."""
    cfg = v2(host_ports="channel", pools="stack", channels=2, mshr_entries=1, t_read_us=0.05)
    # pages 0, 2 map to channel 0, pages 1, 3 to channel 1 (interleave)
    system, cmds = run(cfg, [("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0), ("R", 2, 0, 32, 1)])
    a, b, c = system.completed
    assert a.t_map == 2 and b.t_map > a.t_done - 4 and c.t_map > b.t_map
    assert [cm[2] for cm in cmds] == [0, 1, 0]     # the commands in allocation order


def test_k_th_free_entry_to_k_th_port_from_the_pointer():
    """§4.2.3: in one cycle the k-th allocating port, in order from the pointer, takes the
    k-th lowest free entry; the pointer then moves past the last port that allocated."""
    cfg = v2(host_ports="channel", pools="stack", channels=4, mshr_entries=8)
    # cycle 2: ports 1, 2 allocate entries 0, 1 (ap 0 -> 3); cycle 3: ports 3, 0 in that
    # order from ap = 3 allocate entries 2, 3 (ap -> 1)
    spec = [("R", 1, 0, 32, 0), ("R", 2, 0, 32, 0), ("R", 4, 0, 32, 1), ("R", 3, 0, 32, 1)]
    system, cmds = run(cfg, spec)
    assert [r.t_map for r in system.completed] == [2, 2, 3, 3]
    assert {ch: tag >> 1 for _ti, _k, ch, _sub, _op, tag in cmds} == {1: 0, 2: 1, 3: 2, 0: 3}
    assert system.stacks[0].ap_r == 1


@settings(max_examples=25, deadline=None)
@given(entries=st.integers(1, 3), n=st.integers(4, 12), demand=st.sampled_from([1, 2]))
def test_pool_exhaustion_no_port_waits_more_than_P_frees(entries, n, demand):
    """11.6 and §4.2.3: with every port missing back to back on a pool of ``entries``, a
    read that waits in M to allocate is passed by at most ``P`` entry frees (the pointer
    moves past each port that allocated, so every other port is ahead of it at most once)."""
    P = 4
    cfg = v2(host_ports="channel", pools="stack", channels=P, mshr_entries=entries, t_read_us=0.05,
             subarrays_per_channel=4)
    spec = [("R", k * P + p, 0, 32, 0) for k in range(n) for p in range(P)]
    if demand == 2:     # port 0 twice as busy: a fixed priority would starve the others
        spec += [("R", (n + k) * P, 0, 32, 0) for k in range(n)]
    system = HbfSystem(cfg)
    freed = frees(system)
    system.run_requests(make_reqs(spec, cfg))
    free_ticks = sorted(f for f, kind, _ in freed if kind == 0)
    assert len(free_ticks) == len(spec)      # every read allocated and freed an entry
    last_map = {}
    for r in sorted(system.completed, key=lambda r: (r.ch, r.t_accept)):
        start = max(r.t_accept + 2, last_map.get(r.ch, -1) + 1)   # the cycle it is in M
        last_map[r.ch] = r.t_map
        passed = sum(1 for f in free_ticks if start < f < r.t_map)
        assert passed <= P, (r, start, passed)


# ------------------------------------------------------------------ §4.2.4 same page
def test_read_and_write_of_one_page_in_one_cycle():
    """§4.2.4, 11.6's partition case: a read of q on port 0 and a full-page write of q on
    port 2 dispatch in one cycle; the read does not see the write (it allocates, no stall),
    and the write's PROGRAM waits until the read's entry has completed (its blocker set)."""
    cfg = v2(host_ports="channel", channels=4, scheduler="partition-2r2w", t_read_us=0.5,
             t_prog_us=0.5)
    system, cmds = run(cfg, [("R", 0, 0, 32, 0), ("W", 0, 0, PAGE_BYTES, 0)])
    r, w = system.completed
    assert (r.ch, w.ch) == (0, 2)
    assert r.t_map == w.t_map == 2 and not r.mshr_hit
    (t_read, *_), (t_prog, *_) = cmds
    read_tc = r.entry_info[2]
    assert w.entry_info[0] > read_tc     # enqueued only after the read's entry left ISSUED
    assert t_prog > t_read


def test_read_stalls_behind_an_earlier_write_on_another_port():
    """§4.2 read step 1 across ports: a write of q dispatched one cycle earlier on its port
    makes a later read of q on the read port stall, flush the entry (``raw``) and respond
    after the PROGRAM with the written data."""
    cfg = v2(host_ports="channel", channels=4, scheduler="partition-2r2w", t_prog_us=0.5,
             write_timeout_policy="partial")
    data = bytes(range(256)) * 16
    system, _ = run(cfg, [("W", 0, 0, 2048, 0, data[:2048]), ("R", 0, 0, 32, 1)])
    w, r = system.completed
    assert system.stats["flush_raw"] == 1
    assert w.t_done > w.t_map + cfg.t_prog_ticks and not w.error
    assert r.t_map > w.t_done - 4 and r.data == data[:32]


def test_two_ports_flush_raw_in_one_cycle():
    """§4.2 read step 1 on two ports in one cycle: each read flushes its page's OPEN entry
    with cause ``raw`` (counted once per entry), both in that cycle."""
    cfg = v2(host_ports="channel", channels=2, write_timeout_policy="partial",
             t_prog_us=0.5)
    spec = [("W", 0, 0, 1024, 0), ("W", 1, 0, 1024, 0), ("R", 0, 0, 32, 1), ("R", 1, 0, 32, 1)]
    system, cmds = run(cfg, spec)
    assert system.stats["raw_events"] == system.stats["flush_raw"] == 2
    assert cmds[0][0] == cmds[1][0] and cmds[0][4] == cmds[1][4]   # both PROGRAMs at once
    _w0, _w1, r0, r1 = system.completed
    assert r0.t_map == r1.t_map


# ------------------------------------------------------------------ §1, §2 ports
def test_request_on_the_wrong_port_is_refused():
    cfg = v2(host_ports="channel", channels=4, stacks=2)
    system = HbfSystem(cfg)
    (req,) = make_reqs([("R", 5, 0, 32, 0)], cfg)    # page 5: stack 1, local page 2: ch 2
    with pytest.raises(ValueError, match=r"^request 0: presented on port 3, but its page maps "
                                         r"to port 6 \(stack 1, channel 2\)$"):
        system.submit(req, port=3)
    assert system.submitted == 0
    system.submit(req, port=6)
    assert system.run() and req.t_done > 0


def test_two_stacks_respond_in_one_cycle():
    """§2 channel shape and 11.4's last sentence: the stacks' ports are separate, so two
    isolated reads of the two stacks respond in one cycle (§10: ``a + 13 + tR``), without
    the route stage's +1 of the stack shape (``a + 14 + tR``, the second accepted a cycle
    later on the one system port)."""
    spec = [("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0)]
    (s1, _), (s2, _) = (run(v2(host_ports=hp, stacks=2), spec) for hp in ("stack", "channel"))
    ch = [r.t_done for r in s2.completed]
    st1 = [r.t_done for r in s1.completed]
    tr = s2.cfg.t_read_ticks
    assert ch == [tr + 13, tr + 13]
    assert st1 == [tr + 14, tr + 15]
