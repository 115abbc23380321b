"""The golden model of the one timing contract, the registered pipeline
(docs/timing-contract.md DP1-DP7), in both host-port shapes and every mode.

The contract's worked timings and most directed cases are the conformance suite's
(tests/conformance/cases.py, run on every level). Here: the cases that look inside the model
(page data, statistics, the free list's order across ports, DP7's ports in parallel, DP2a's
lowest-index offer), the channel shape
with one channel against the stack shape event for event, and randomized workloads over every
shape and mode checked for conservation, per-port order, per-page consistency and event
skipping.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, SCHEDULERS, load_config
from hbfsim.model.controller import Request
from hbfsim.model.controller import StackController
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs


def stack_shape(**kw):
    """The stack shape with demand reads and merging (the defaults)."""
    return load_config(**({"host_ports": "stack"} | kw))


def run(cfg, spec, resp_ready=None):
    """Run ``spec`` (see :func:`tests.conftest.make_reqs`); return the system, its
    completed requests by id and a log of ``(cycle, event, ...)`` from the controller:
    ``alloc`` (request id, table, entry index) for every allocation, ``cmd`` (table, entry
    index) for every command on ``cmd[c]``, ``flush`` (entry index, cause) in the first
    FLUSH cycle."""
    system = HbfSystem(cfg)
    system.resp_ready = resp_ready
    log = []
    for s in system.stacks:
        now = [0]

        def dispatch_one(port, t, orig=s._dispatch_one, s=s):
            m = port.m
            pool = m.ch % s.pools if m is not None else 0
            free_r, free_w = list(s.mshr_free[pool]), list(s.wb_free[pool])
            changed = orig(port, t)
            if port.m is None:
                if m.op == "R" and len(s.mshr_free[pool]) < len(free_r):
                    log.append((t, "alloc", m.id, "m", free_r[0]))
                    if s.merge:
                        assert s.mshr_open[m.q].idx == free_r[0]
                elif m.op == "W" and len(s.wb_free[pool]) < len(free_w):
                    log.append((t, "alloc", m.id, "b", s.wb_open[m.q].idx))
                    assert s.wb_open[m.q].idx == free_w[0]
            return changed

        def media_issue(ti, ch, sub, op, local, tag, orig=s.media.issue):
            log.append((ti, "cmd", "b" if tag & 1 else "m", tag >> 1))
            return orig(ti, ch, sub, op, local, tag)

        def triggers(t, drain, orig=s.wb_triggers):
            now[0] = t
            return orig(t, drain)

        def flush(e, cause, orig=s._flush):
            log.append((now[0] + 1, "flush", e.idx, cause))
            return orig(e, cause)

        s._dispatch_one, s.media.issue, s.wb_triggers, s._flush = \
            dispatch_one, media_issue, triggers, flush
    system.run_requests(make_reqs(spec, cfg))
    return system, {r.id: r for r in system.completed}, log


def allocs(log):
    """Request id -> (table, entry index) of every allocation in ``log``."""
    return {e[2]: (e[3], e[4]) for e in log if e[1] == "alloc"}


# ------------------------------------------------------------------ configuration
def test_every_shape_runs_the_registered_pipeline():
    for shape in ("stack", "channel"):
        cfg = load_config(host_ports=shape)
        assert all(isinstance(s, StackController) for s in HbfSystem(cfg).stacks)


# ------------------------------------------------------------------ worked timings


# ------------------------------------------------------------------ one case per rule


@pytest.mark.parametrize("arrival,merged", [(11, True), (12, False)])
def test_dp5_merge_in_the_cycle_after_a_flush_decision(arrival, merged):
    """w1 (first half of page q) allocates in 2, its deadline decision is taken in 12
    (FLUSH from 14); w2 (second half) dispatched in 13, while the entry is still OPEN,
    merges and is programmed with it: no strict error, and the entry is eligible only from
    15 (the merge is in W in 14). Dispatched in 14 it allocates a new entry and w1's entry
    errors on its half page in 14."""
    half = PAGE_BYTES // 2
    cfg = stack_shape(write_deadline_ticks=10, write_timeout_policy="strict")
    spec = [("W", 0, 0, half, 0), ("W", 0, half, half, arrival)]
    system, done, log = run(cfg, spec)
    w1, w2 = done[0], done[1]
    assert w1.t_map == 2 and w2.t_map == arrival + 2
    assert (14, "flush", 0, "deadline") in log
    if merged:
        assert "b" not in {a[0] for i, a in allocs(log).items() if i == 1}
        assert not w1.error and not w2.error
        assert w1.entry_info == w2.entry_info      # one entry, one PROGRAM
        # the merge is in W in 14: eligible 15, O_c 16, enqueued 17, command 19
        assert w1.entry_info[:2] == (17, 19)
        assert system.stats["page_programs_ok"] == 1 and system.stats["strict_errors"] == 0
        assert system.stacks[0].data[0] == bytes([1]) * half + bytes([2]) * half
    else:
        assert allocs(log)[1] == ("b", 1)
        assert w1.error and system.stats["strict_errors"] == 2
        # errored in its first FLUSH cycle 14: RETURN 15, C1 15, C2 16, R 18, K 19
        assert w1.t_done == 20
        assert system.stats["page_programs_ok"] == 0


def test_dp7_first_waiters_of_consecutive_entries_back_to_back():
    """Entries pile up in RETURN while the consumer holds ``resp.ready`` low: five early
    ones fill E, K, R and C2; a late entry with three waiters arrives while C1 is empty
    (C1 takes it at once). From the release every cycle answers one request: C2 holds the
    next entry while the cursor drains the current one."""
    cfg = stack_shape(channels=4)
    spec = [("R", p, 0, 32, p) for p in range(5)]
    spec += [("R", 5, 32 * k, 32, 15_000 + k) for k in range(3)]     # one entry, 3 waiters
    release = 30_000
    system, done, _ = run(cfg, spec, resp_ready=lambda t: t >= release)
    assert max(r.entry_info[2] for r in done.values()) + 10 < release
    assert [done[i].mshr_hit for i in range(5, 8)] == [False, True, True]
    order = sorted(done.values(), key=lambda r: r.t_done)
    assert [r.t_done for r in order] == list(range(release, release + 8))
    assert [r.id for r in order] == list(range(8))


# ------------------------------------------------------------------ the channel shape
#: The shapes of the random tests: the stack shape, the channel shape with the pools shared
#: by its ports (``pools = "stack"``, §4.2.3) and with a pool per channel (its default, §4.5)
SHAPES = ["stack", "channel", "channel-pools"]


def shaped(shape: str, channels: int, mshr_entries: int, write_buffer_entries: int) -> dict:
    """The keys of one of :data:`SHAPES`; with a pool per channel each pool takes the
    tables' counts split over the channels, at least one entry each."""
    if shape == "stack":
        return dict(host_ports="stack", mshr_entries=mshr_entries,
                    write_buffer_entries=write_buffer_entries)
    if shape == "channel":
        return dict(host_ports="channel", pools="stack", mshr_entries=mshr_entries,
                    write_buffer_entries=write_buffer_entries)
    return dict(host_ports="channel", pools="channel",
                mshr_entries=channels * max(1, round(mshr_entries / channels)),
                write_buffer_entries=channels * max(1, round(write_buffer_entries / channels)))


def chan(**kw):
    """The one contract in the channel shape: one request and one response port per
    channel (timing-contract.md §1, §14)."""
    return stack_shape(**({"host_ports": "channel"} | kw))


def test_dp4_frees_of_one_cycle_join_in_port_order():
    """Two entries freed in one cycle join the free list in ascending response port, not in
    index order: port 1 took entry 1 and port 0 entry 2 (pointer at 1), both free in the same
    cycle, so the next allocations on one port take 3, 0, 2, 1 (§4.2.3)."""
    cfg = chan(channels=2, mshr_entries=4, pools="stack")
    spec = [("R", 0, 0, 32, 0),                               # entry 0, pointer -> 1
            ("R", 2, 0, 32, 20_000), ("R", 1, 0, 32, 20_000),  # port 0: entry 2, port 1: 1
            *[("R", 2 * k, 0, 32, 40_000) for k in range(2, 6)]]
    _, done, log = run(cfg, spec)
    assert done[1].t_done == done[2].t_done                    # launched in one cycle
    got = allocs(log)
    assert (got[1], got[2]) == (("m", 2), ("m", 1))
    assert [got[i][1] for i in range(3, 7)] == [3, 0, 2, 1]


def test_dp7_response_ports_answer_in_parallel():
    """Reads of two channels completing in one cycle answer in one cycle on their two ports;
    the stack shape's one port answers them a cycle apart (§8, DP7 per port)."""
    spec = [("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0)]
    _, c, _ = run(chan(channels=2), spec)
    _, s, _ = run(stack_shape(channels=2), spec)
    assert c[0].entry_info[2] == c[1].entry_info[2]
    assert c[0].t_done == c[1].t_done
    assert abs(s[0].t_done - s[1].t_done) == 1


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 7),
                              st.sampled_from([0, 64, 2048]),
                              st.sampled_from([32, 2048, PAGE_BYTES]), st.integers(0, 20)),
                    min_size=1, max_size=40),
       read_mode=st.sampled_from(["demand", "aggregation"]), merge=st.booleans())
def test_channel_shape_with_one_channel_is_the_stack_shape(ops, read_mode, merge):
    """With one channel the channel shape has one port: every request's cycles and flags
    and every counter equal the stack shape's, through the system's per-port paths."""
    out = []
    for shape in ("stack", "channel"):
        cfg = stack_shape(host_ports=shape, channels=1, subarrays_per_channel=2, mshr_entries=2,
                   write_buffer_entries=2, queue_depth=2, admission=6, read_mode=read_mode,
                   read_agg_window_ticks=7, read_agg_threshold_bytes=96, mshr_merge=merge,
                   write_deadline_ticks=25, t_read_us=0.2, t_prog_us=0.5, t_erase_us=1.0,
                   pages_per_block=4, capacity_bytes=2 * 4 * 4 * PAGE_BYTES)
        spec, t = [], 0
        for op, page, off, n, gap in ops:
            t += gap
            spec.append((op, page, min(off, PAGE_BYTES - n), n, t))
        system, done, _ = run(cfg, spec)
        out.append((_outcome(system), dict(system.stats)))
    assert out[0] == out[1]


# ------------------------------------------------------------------ read modes, merging
@pytest.mark.parametrize("window,ready", [(0, 2), (1, 2), (2, 2), (50, 50)])
def test_dp2a_isolated_aggregation_read(window, ready):
    """Aggregation reads (DP2a): ready at ``alloc + max(window, 2)``, enqueued two cycles
    later through ``OR_c``; the response is ``ta + 13 + max(window, 2) + tR`` (§10)."""
    cfg = stack_shape(read_mode="aggregation", read_agg_window_ticks=window,
               read_agg_threshold_bytes=PAGE_BYTES)
    system, done, _ = run(cfg, [("R", 0, 0, 32, 100)])
    r = done[0]
    assert r.entry_info[0] == r.t_map + ready + 2
    assert r.t_done == r.t_accept + 13 + ready + cfg.t_read_ticks
    assert system.stacks[0].agg_wait == ready


def test_dp2a_offer_register_takes_the_lowest_ready_index():
    """Two entries ready while the queue is full: ``OR_c`` takes the lower index first, not
    the older entry (DP2a, unlike DP2's allocation order)."""
    cfg = stack_shape(channels=1, subarrays_per_channel=1, active_per_channel=1, queue_depth=1,
               mshr_entries=4, t_read_us=1.0, read_mode="aggregation",
               read_agg_window_ticks=0, capacity_bytes=256 * PAGE_BYTES * 4)
    spec = [("R", 0, 0, 32, 0)] + [("R", p, 0, 32, 2000) for p in (1, 2, 3, 4)]
    _, done, log = run(cfg, spec)
    assert allocs(log) == {0: ("m", 0), 1: ("m", 1), 2: ("m", 2), 3: ("m", 3), 4: ("m", 0)}
    cmds = [e[3] for e in log if e[1] == "cmd"]
    assert cmds == [0, 1, 2, 0, 3]


def test_merging_off_every_read_allocates():
    """``mshr_merge = false``: three reads of one page take three entries and three READs
    (the second and third hit the page buffers), none an MSHR hit."""
    cfg = stack_shape(mshr_merge=False)
    system, done, log = run(cfg, [("R", 0, 32 * k, 32, k) for k in range(3)])
    assert not any(done[k].mshr_hit for k in range(3))
    assert [a for _, a in sorted(allocs(log).items())] == [("m", 0), ("m", 1), ("m", 2)]
    assert len([e for e in log if e[1] == "cmd"]) == 3
    assert [done[k].buffer_hit for k in range(3)] == [False, True, True]


# ------------------------------------------------------------------ randomized workloads
ops = st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 7), st.integers(0, 127),
                         st.integers(0, 40)), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops=ops, sched=st.sampled_from(SCHEDULERS),
       placement=st.sampled_from(["interleave", "grouped", "contiguous"]),
       tot=st.sampled_from([0, 2]), pc=st.sampled_from([0, 2]),
       shape=st.sampled_from(SHAPES),
       read_mode=st.sampled_from(["demand", "aggregation"]), merge=st.booleans())
def test_random_sequential_consistency_per_page(ops, sched, placement, tot, pc, shape,
                                                read_mode, merge):
    """In every shape and mode: every request answered exactly once, in-order ingress and
    one response per cycle on every port, and every read returns the last whole-page write
    of its page dispatched before it (in one cycle the reads first, §4.2.4)."""
    cfg = stack_shape(channels=4, subarrays_per_channel=2, active_per_channel=1, active_total=tot,
               admission=6, **shaped(shape, 4, 3, 2), queue_depth=2,
               scheduler=sched, placement=placement, page_cache_pages=pc, cache_hit_ticks=1,
               write_drain_high_water=1, write_deadline_ticks=30, t_read_us=0.1,
               t_prog_us=0.5, t_erase_us=1.0, pages_per_block=4,
               read_mode=read_mode, read_agg_window_ticks=9, read_agg_threshold_bytes=64,
               mshr_merge=merge, capacity_bytes=4 * 2 * 4 * PAGE_BYTES * 4)
    reqs, t = [], 0
    for i, (op, page, sector, gap) in enumerate(ops):
        t += gap
        addr = cfg.base_address + page * PAGE_BYTES
        if op == "W":
            reqs.append(Request(i, "W", addr, PAGE_BYTES, 0, t,
                                bytes([i % 250 + 1]) * PAGE_BYTES))
        else:
            reqs.append(Request(i, "R", addr + 32 * sector, 32, 0, t))
    system = HbfSystem(cfg)
    system.run_requests(reqs)
    done = system.completed
    assert sorted(r.id for r in done) == list(range(len(reqs)))
    assert not any(r.error for r in done)
    port = (lambda r: r.ch) if shape != "stack" else (lambda r: 0)
    ticks = [(port(r), r.t_done) for r in done]
    assert len(set(ticks)) == len(ticks)
    for k in {port(r) for r in done}:
        mine = sorted((r for r in done if port(r) == k), key=lambda r: r.t_accept)
        assert [r.id for r in mine] == sorted(r.id for r in mine)
    last = {}
    for r in sorted(done, key=lambda r: (r.t_map, r.op == "W", r.id)):
        page = (r.addr - cfg.base_address) // PAGE_BYTES
        if r.op == "W":
            last[page] = r.data[0]
        else:
            want = bytes([last[page]]) * 32 if page in last else None
            assert r.data == want, (r, last.get(page))
        assert r.t_done > r.t_accept >= r.arrival


wops = st.lists(st.tuples(st.sampled_from("RWW"), st.integers(0, 5), st.integers(0, 4095),
                          st.integers(1, 1024), st.integers(0, 30)), min_size=1, max_size=50)


@settings(max_examples=40, deadline=None)
@given(ops=wops, policy=st.sampled_from(["strict", "partial"]),
       deadline_ticks=st.integers(1, 300), wb=st.integers(1, 3),
       stacks=st.sampled_from([1, 2]), shape=st.sampled_from(SHAPES))
def test_random_partial_writes_conserve(ops, policy, deadline_ticks, wb, stacks, shape):
    """Partial writes under both policies, tiny write buffers (pressure), short deadlines
    (decisions next to merges): every request answered once, no read errors, none at all
    under ``partial``, flushes counted once per programmed or errored entry."""
    cfg = stack_shape(stacks=stacks, channels=2, subarrays_per_channel=2, admission=8,
               **shaped(shape, 2, 2, wb), queue_depth=2,
               write_timeout_policy=policy, write_deadline_ticks=deadline_ticks,
               t_read_us=0.2, t_prog_us=1.0, t_erase_us=2.0, pages_per_block=4,
               capacity_bytes=stacks * 2 * 2 * 4 * PAGE_BYTES * 4)
    reqs, t = [], 0
    for i, (op, page, off, n, gap) in enumerate(ops):
        t += gap
        n = min(n, PAGE_BYTES - off)
        addr = cfg.base_address + page * PAGE_BYTES + off
        reqs.append(Request(i, op, addr, n, i % 4, t, bytes([7]) * n if op == "W" else None))
    system = HbfSystem(cfg)
    system.run_requests(reqs)
    done = system.completed
    assert sorted(r.id for r in done) == list(range(len(reqs)))
    assert not any(r.error for r in done if r.op == "R")
    if policy == "partial":
        assert not any(r.error for r in done)
    port = (lambda r: (r.stack, r.ch)) if shape != "stack" else (lambda r: 0)
    ticks = [(port(r), r.t_done) for r in done]
    assert len(set(ticks)) == len(ticks)      # one response per cycle per port
    st_ = system.stats
    flushes = sum(st_["flush_" + c] for c in ("full", "raw", "pressure", "deadline", "drain"))
    assert flushes == st_["page_programs_ok"] + st_["strict_errors"] + st_["media_errors"]


def _outcome(system):
    return sorted((r.id, r.t_accept, r.t_map, r.t_done, r.entry_info, r.mshr_hit,
                   r.buffer_hit, r.cache_hit, r.error, r.data) for r in system.completed)


@settings(max_examples=40, deadline=None)
@given(ops=wops, policy=st.sampled_from(["strict", "partial"]),
       deadline_ticks=st.integers(1, 60), wb=st.integers(1, 3), pc=st.sampled_from([0, 2]),
       shape=st.sampled_from(SHAPES),
       read_mode=st.sampled_from(["demand", "aggregation"]), merge=st.booleans(),
       multiplane=st.sampled_from(["off", "page", "megaplane"]))
def test_random_event_skipping_changes_nothing(ops, policy, deadline_ticks, wb, pc, shape,
                                               read_mode, merge, multiplane):
    """C3: the run with cycle skipping equals a run that evaluates every cycle, request
    for request, so every delayed effect of DP1-DP7 has its wake-up (``next_timer``)."""
    cfg = stack_shape(channels=2, subarrays_per_channel=2, admission=8,
               **shaped(shape, 2, 2, wb), queue_depth=2, write_timeout_policy=policy,
               write_deadline_ticks=deadline_ticks, page_cache_pages=pc, cache_hit_ticks=3,
               t_read_us=0.2, t_prog_us=0.5, t_erase_us=1.0, pages_per_block=4,
               read_mode=read_mode, read_agg_window_ticks=11,
               read_agg_threshold_bytes=256, mshr_merge=merge, multiplane=multiplane,
               planes_per_die=2, megaplane_planes=2,
               capacity_bytes=2 * 2 * 4 * PAGE_BYTES * 4)
    out = []
    for every_cycle in (False, True):
        reqs, t = [], 0
        for i, (op, page, off, n, gap) in enumerate(ops):
            t += gap
            n = min(n, PAGE_BYTES - off)
            addr = cfg.base_address + page * PAGE_BYTES + off
            reqs.append(Request(i, op, addr, n, 0, t, bytes([i % 250 + 1]) * n
                                if op == "W" else None))
        system = HbfSystem(cfg)
        if every_cycle:
            skip = system._next_tick
            system._next_tick = lambda t, skip=skip: None if skip(t) is None else t + 1
        system.run_requests(reqs)
        out.append(_outcome(system))
    assert out[0] == out[1]
