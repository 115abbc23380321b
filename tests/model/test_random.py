"""Randomized checks of the golden model: conservation and per-page sequential consistency
under every scheduler and placement, with small structures so that every stall path runs.

Under contract 1: its one port per stack orders ingress and responses globally, which these
properties assert; the channel shape's per-port forms are in test_channel_shape.py."""

from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, SCHEDULERS
from hbfsim.model.controller import Request
from hbfsim.model.system import HbfSystem
from tests.conftest import stack_config as v1_config

ops = st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 7), st.integers(0, 127),
                         st.integers(0, 400)), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops=ops, sched=st.sampled_from(SCHEDULERS),
       placement=st.sampled_from(["interleave", "grouped", "contiguous"]),
       merge=st.booleans(), agg=st.booleans(), tot=st.sampled_from([0, 2]))
def test_sequential_consistency_per_page(ops, sched, placement, merge, agg, tot):
    cfg = v1_config(channels=4, subarrays_per_channel=2, active_per_channel=1,
                      active_total=tot,
                      admission=6, mshr_entries=3, write_buffer_entries=2, queue_depth=2,
                      scheduler=sched, placement=placement, mshr_merge=merge,
                      read_mode="aggregation" if agg else "demand", read_agg_window_ticks=50,
                      write_drain_high_water=1, t_read_us=0.1, t_prog_us=0.5, t_erase_us=1.0,
                      pages_per_block=4, capacity_bytes=4 * 2 * 4 * PAGE_BYTES * 4)
    reqs, t = [], 0
    for i, (op, page, sector, gap) in enumerate(ops):
        t += gap
        addr = cfg.base_address + page * PAGE_BYTES
        if op == "W":  # whole-page stores: sequential semantics are well defined
            reqs.append(Request(i, "W", addr, PAGE_BYTES, 0, t, bytes([i % 250 + 1]) *
                                PAGE_BYTES))
        else:
            reqs.append(Request(i, "R", addr + 32 * sector, 32, 0, t))
    system = HbfSystem(cfg)
    system.run_requests(reqs)
    done = system.completed
    assert sorted(r.id for r in done) == list(range(len(reqs)))
    assert not any(r.error for r in done)
    by_accept = sorted(done, key=lambda r: r.t_accept)
    assert [r.id for r in by_accept] == list(range(len(reqs)))  # in-order ingress
    last = {}
    for r in by_accept:
        page = (r.addr - cfg.base_address) // PAGE_BYTES
        if r.op == "W":
            last[page] = r.data[0]
        else:
            want = bytes([last[page]]) * 32 if page in last else None
            assert r.data == want, (r, last.get(page))
        assert r.t_done > r.t_accept >= r.arrival


wops = st.lists(st.tuples(st.sampled_from("RWW"), st.integers(0, 5), st.integers(0, 4095),
                          st.integers(1, 1024), st.integers(0, 300)), min_size=1, max_size=50)


@settings(max_examples=60, deadline=None)
@given(ops=wops, policy=st.sampled_from(["strict", "partial"]),
       deadline=st.integers(1, 3000), wb=st.integers(1, 3), stacks=st.sampled_from([1, 2]))
def test_partial_writes_conserve_and_never_deadlock(ops, policy, deadline, wb, stacks):
    cfg = v1_config(stacks=stacks, channels=2, subarrays_per_channel=2, admission=8,
                      mshr_entries=2, write_buffer_entries=wb, queue_depth=2,
                      write_timeout_policy=policy, write_deadline_ticks=deadline,
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
    ticks = [r.t_done for r in done]
    assert len(set(ticks)) == len(ticks)  # one response per cycle for the whole system
