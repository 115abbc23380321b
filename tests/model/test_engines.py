"""The fused single-stack loop must match the phase-by-phase reference loop event for event."""

import copy

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, SCHEDULERS
from tests.conftest import v1_config
from hbfsim.model.controller import QUEUED, Request
from hbfsim.model.requests import default_workload
from hbfsim.model.stats import collect_stats
from hbfsim.model.gpu import ClosedLoop
from hbfsim.model.system import DeadlockError, HbfSystem

from .test_gpu import mixed_program, small_cfg

FIELDS = ("t_accept", "t_map", "t_done", "mshr_hit", "buffer_hit", "cache_hit", "error", "depth",
          "entry_info",
          "data")


def both(cfg, reqs):
    out = []
    for engine in ("reference", "fused"):
        rs = copy.deepcopy(reqs)
        system = HbfSystem(cfg, keep=False)
        system.engine = engine
        system.run_requests(rs)
        s = collect_stats(system)
        s.pop("per_channel")
        out.append(([tuple(getattr(r, f) for f in FIELDS) for r in rs], s, system.steps))
    return out


def test_default_workload_identical():
    cfg = v1_config()
    (a, sa, na), (b, sb, nb) = both(cfg, default_workload(cfg))
    assert a == b and sa == sb and na == nb


sectors = st.lists(st.tuples(st.sampled_from("RRRW"), st.integers(0, 40), st.integers(0, 127),
                             st.integers(0, 30), st.sampled_from([32, 64, 128, 4096])),
                   min_size=1, max_size=120)


@settings(max_examples=50, deadline=None)
@given(ops=sectors, sched=st.sampled_from(SCHEDULERS), agg=st.booleans(),
       merge=st.booleans(), cache=st.sampled_from([0, 4]), adm=st.sampled_from([4, 64]),
       tot=st.sampled_from([0, 3]))
def test_random_identical(ops, sched, agg, merge, cache, adm, tot):
    cfg = v1_config(channels=4, subarrays_per_channel=4, active_per_channel=2,
                      active_total=tot,
                      admission=adm, mshr_entries=8, write_buffer_entries=3, queue_depth=3,
                      scheduler=sched, read_mode="aggregation" if agg else "demand",
                      read_agg_window_ticks=40, mshr_merge=merge, page_cache_pages=cache,
                      write_timeout_policy="partial", write_deadline_ticks=300,
                      channel_bw_gbps=8.0, t_read_us=0.5, t_prog_us=2.0, t_erase_us=4.0,
                      pages_per_block=4, capacity_bytes=4 * 4 * 4 * PAGE_BYTES * 8)
    reqs, t = [], 0
    for i, (op, page, sector, gap, n) in enumerate(ops):
        t += gap
        off = 0 if n == PAGE_BYTES else (32 * sector) % (PAGE_BYTES - n + 1)
        reqs.append(Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, t,
                            bytes([i % 200 + 1]) * n if op == "W" else None))
    (a, sa, na), (b, sb, nb) = both(cfg, reqs)
    assert a == b
    assert sa == sb
    assert na == nb


def test_closed_loop_callbacks_identical():
    """Requests submitted from the response callback see the same timing in both loops."""
    cfg = v1_config(channels=2, subarrays_per_channel=2, admission=8, page_buffers=2)
    results = []
    for engine in ("reference", "fused"):
        system = HbfSystem(cfg, keep=False)
        system.engine = engine
        issued = []

        def cb(req, t, system=system, issued=issued):
            i = len(issued)
            if i < 200:
                r = Request(i, "R", cfg.base_address + ((i * 7) % 23) * PAGE_BYTES + 32 * (i % 5),
                            32, 0, t + 1)
                issued.append(r)
                system.submit(r)
                if len(issued) == 200:
                    system.close_input()

        system.user_cb = cb
        for k in range(4):
            r = Request(10_000 + k, "R", cfg.base_address + k * PAGE_BYTES, 32, 0, 0)
            system.submit(r)
        system.run()
        results.append([(r.t_accept, r.t_done, r.mshr_hit, r.buffer_hit) for r in issued])
    assert results[0] == results[1] and len(results[0]) == 200


# ------------------------------------------------------------------ the written-out paths
# The fused loop writes out, on local copies of the controller state: the drain of a read
# entry (link credit carried across the entry's consecutive responses), the MSHR merge and
# allocation of a read in M, the ingress accept, the issue and enqueue of a channel, and a
# single READ completion. The cases below load each of those paths and the hand-overs to
# the controller's methods: many merges per entry, admission and MSHRs full, credit stalls,
# full channel queues, writes and read-after-write stalls, chunked runs and closed loops.

class DoubleEnqueue(Exception):
    """The reference run enqueued an MSHR entry twice, or one no longer QUEUED (the model bug
    test_stale_enq_wait_record_reused_entry guards against)."""


def watch_queues(system):
    """Raise DoubleEnqueue when a channel queue holds an entry twice or one that is no longer
    QUEUED (looked at before every issue phase of the reference loop)."""
    for sc in system.stacks:
        def issue(t, sc=sc, orig=sc.issue):
            seen = set()
            for q in sc.queue:
                for e in q:
                    if e.state != QUEUED or id(e) in seen:
                        raise DoubleEnqueue(f"tick {t}: entry {e.kind}/{e.idx} in a queue twice")
                    seen.add(id(e))
            return orig(t)
        sc.issue = issue


def run_engine(cfg, reqs, engine, chunk=None, keep=False, watch=True):
    """Run ``reqs`` on a fresh system; with ``chunk``, as ``run(until)`` slices of that many
    ticks (the stop and restart must not lose the loop's local state). The reference run is
    watched for the double enqueue of a known model bug (``watch``)."""
    rs = copy.deepcopy(reqs)
    system = HbfSystem(cfg, keep=keep)
    system.engine = engine
    if engine == "reference" and watch:
        watch_queues(system)
    for r in rs:
        system.submit(r)
    system.close_input()
    if chunk is None:
        system.run()
    else:
        while system.n_done < system.submitted:
            system.run(system.t + chunk)
        system.run()
    s = collect_stats(system)
    s.pop("per_channel")
    events = [tuple(getattr(r, f) for f in FIELDS) for r in rs]
    if keep:
        events.append([r.id for r in system.completed])   # response order
        events.append([r.entry_info for r in rs])
    state = [(sc.inflight, sc.credit, sc.credit_t, sorted(sc.mshr_free), sc.ch_link_stall,
              sc.agg_wait, sc.mshr_hits, sc.ch_ops) for sc in system.stacks]
    return events, s, system.steps, state, system.t


bursts = st.lists(st.tuples(st.sampled_from("RRRRW"), st.integers(0, 24), st.integers(1, 40),
                            st.integers(0, 3), st.sampled_from([32, 32, 128, 1024, 4096])),
                  min_size=1, max_size=40)


def burst_requests(cfg, ops):
    """Runs of ``count`` requests to one page, one arrival per ``gap`` ticks: many merges
    into one open MSHR entry (or one write-buffer entry) and a long drain per entry."""
    reqs, t = [], 0
    for op, page, count, gap, n in ops:
        for k in range(count):
            off = 0 if n == PAGE_BYTES else (n * k) % PAGE_BYTES
            i = len(reqs)
            reqs.append(Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, t,
                                bytes([i % 200 + 1]) * n if op == "W" else None))
            t += gap
    return reqs


@settings(max_examples=60, deadline=None)
@given(ops=bursts, sched=st.sampled_from(SCHEDULERS), agg=st.booleans(), merge=st.booleans(),
       adm=st.sampled_from([1, 3, 16, 512]), mshr=st.sampled_from([1, 2, 16]),
       qd=st.sampled_from([1, 2, 8]), bw=st.sampled_from([0.5, 4.0, 200.0]),
       tot=st.sampled_from([0, 2]), cache=st.sampled_from([0, 2]),
       policy=st.sampled_from(["strict", "partial"]), chunk=st.sampled_from([None, 1, 7, 60]))
def test_bursts_identical(ops, sched, agg, merge, adm, mshr, qd, bw, tot, cache, policy, chunk):
    cfg = v1_config(channels=4, subarrays_per_channel=2, active_per_channel=2,
                      active_total=tot, admission=adm, mshr_entries=mshr,
                      write_buffer_entries=2, queue_depth=qd, scheduler=sched,
                      read_mode="aggregation" if agg else "demand", read_agg_window_ticks=30,
                      read_agg_threshold_bytes=256, mshr_merge=merge, page_cache_pages=cache,
                      write_timeout_policy=policy, write_deadline_ticks=200, page_buffers=1,
                      channel_bw_gbps=bw, link_burst_bytes=4096, t_read_us=0.2,
                      t_prog_us=1.0, t_erase_us=2.0, pages_per_block=4,
                      capacity_bytes=4 * 2 * 4 * PAGE_BYTES * 16)
    reqs = burst_requests(cfg, ops)
    a = run_engine(cfg, reqs, "reference", chunk)
    b = run_engine(cfg, reqs, "fused", chunk)
    assert a == b


def test_stale_enq_wait_record_reused_entry():
    """Aggregation mode, one MSHR: the entry allocated at 197 leaves the record (227, 0)
    behind when a merge makes it ready at 199; the entry allocated at 225 becomes ready at
    227 by a merge. Records carry the allocation tick, so only the second matches: the
    entry is enqueued once (the watch), both loops agree, one READ per allocation.
    (Before the fix both records matched and the run crashed with a KeyError.)"""
    cfg = v1_config(channels=4, subarrays_per_channel=2, active_per_channel=2,
                      admission=16, mshr_entries=1, queue_depth=1, read_mode="aggregation",
                      read_agg_window_ticks=30, read_agg_threshold_bytes=256, page_buffers=1,
                      channel_bw_gbps=0.5, link_burst_bytes=4096, t_read_us=0.2,
                      pages_per_block=4, capacity_bytes=4 * 2 * 4 * PAGE_BYTES * 16)
    reqs = burst_requests(cfg, [("R", 0, 1, 0, 32)] * 15 + [("R", 0, 17, 0, 128)])
    a = run_engine(cfg, reqs, "reference")
    assert a == run_engine(cfg, reqs, "fused")
    events, stats = a[0], a[1]
    allocations = sum(1 for e in events if not e[FIELDS.index("mshr_hit")])
    assert allocations == 3 and stats["completions"] == len(reqs) == 32
    # one READ command per allocation: served by the array once, then by the page buffer
    assert stats["page_reads"] + stats["page_buffer_hits"] == allocations


@settings(max_examples=25, deadline=None)
@given(ops=bursts, sched=st.sampled_from(SCHEDULERS), bw=st.sampled_from([0.5, 200.0]),
       adm=st.sampled_from([2, 64]))
def test_bursts_identical_kept(ops, sched, bw, adm):
    """keep=True responds through the controller's handshake (entry_info, response order)."""
    cfg = v1_config(channels=4, subarrays_per_channel=2, active_per_channel=1,
                      admission=adm, mshr_entries=4, write_buffer_entries=2, queue_depth=2,
                      scheduler=sched, channel_bw_gbps=bw, link_burst_bytes=4096,
                      t_read_us=0.2, t_prog_us=1.0, t_erase_us=2.0, pages_per_block=4,
                      write_timeout_policy="partial", write_deadline_ticks=100,
                      capacity_bytes=4 * 2 * 4 * PAGE_BYTES * 16)
    reqs = burst_requests(cfg, ops)
    assert run_engine(cfg, reqs, "reference", keep=True) == \
        run_engine(cfg, reqs, "fused", keep=True)


def test_saturated_read_stream_identical():
    """The benchmark's read stream in miniature: media saturated, admission backed up, one
    accept, one merge and one response per cycle; with and without credit stalls."""
    for bw, adm in ((200.0, 64), (1.0, 64), (200.0, 8)):
        cfg = v1_config(channels=4, subarrays_per_channel=4, active_per_channel=4,
                          admission=adm, mshr_entries=16, queue_depth=4, t_read_us=0.5,
                          channel_bw_gbps=bw, capacity_bytes=4 * 4 * 64 * PAGE_BYTES * 4)
        B = cfg.base_address
        reqs = [Request(i, "R", B + (i // 8) * PAGE_BYTES + 32 * (i % 8), 32, 0, i)
                for i in range(3000)]
        a = run_engine(cfg, reqs, "reference")
        assert a == run_engine(cfg, reqs, "fused")
        assert run_engine(cfg, reqs, "reference", chunk=37) == \
            run_engine(cfg, reqs, "fused", chunk=37)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpu_closed_loop_identical(seed):
    """The GPU driver runs the system in run(until) chunks, rewinds system.t and submits from
    the response callback: both loops must give the same run."""
    out = []
    for engine in ("reference", "fused"):
        cfg = small_cfg(admission=6, mshr_entries=4, write_buffer_entries=2)
        loop = ClosedLoop(cfg, mixed_program(cfg, seed=seed, per=10), record=True)
        loop.system.engine = engine
        res = loop.run()
        s = collect_stats(loop.system)
        out.append((res.records, res.span_ticks, s, loop.system.steps))
    assert out[0] == out[1]


def test_rewound_onto_the_cycle_that_filled_m():
    """A driver that moves t back onto the cycle in which M was filled (the fused loop hands
    that call to the reference loop) sees the same run."""
    cfg = v1_config(channels=2, subarrays_per_channel=2)

    def go(engine):
        system = HbfSystem(cfg, keep=False)
        system.engine = engine
        reqs = [Request(i, "R", cfg.base_address + (i % 2) * PAGE_BYTES, 32, 0, 0)
                for i in range(4)]
        for r in reqs:
            system.submit(r)
        system.close_input()
        system.run(0)           # accepts request 0 in cycle 0: M holds it
        assert system.stacks[0].m is reqs[0]
        system.t = 0
        try:
            system.run()
        except DeadlockError as e:     # M cannot leave in the cycle it was filled in
            return str(e), system.steps
        return [tuple(getattr(r, f) for f in FIELDS) for r in reqs], system.steps

    assert go("reference") == go("fused")


def test_random_configurations_identical():
    """A fixed random sample of configurations and burst streams larger than the hypothesis
    cases (up to a few thousand requests; tiny tables, every scheduler, chunked runs)."""
    import random

    rng = random.Random(20261129)
    compared = 0
    while compared < 40:
        kw = dict(channels=4, subarrays_per_channel=rng.choice([1, 2, 4]),
                  active_per_channel=rng.choice([1, 2]), active_total=rng.choice([0, 0, 3]),
                  admission=rng.choice([1, 4, 32, 4096]), mshr_entries=rng.choice([1, 3, 64]),
                  write_buffer_entries=rng.choice([1, 2, 8]), queue_depth=rng.choice([1, 2, 16]),
                  scheduler=rng.choice(SCHEDULERS),
                  read_mode=rng.choice(["demand", "demand", "aggregation"]),
                  read_agg_window_ticks=rng.choice([2, 30]),
                  read_agg_threshold_bytes=rng.choice([64, 256, 4096]),
                  mshr_merge=rng.random() < 0.8, page_cache_pages=rng.choice([0, 0, 3]),
                  write_timeout_policy=rng.choice(["strict", "partial"]),
                  write_deadline_ticks=rng.choice([50, 400]), page_buffers=rng.choice([0, 1, 2]),
                  channel_bw_gbps=rng.choice([0.5, 4.0, 200.0]),
                  link_burst_bytes=rng.choice([4096, 8192]), t_read_us=rng.choice([0.05, 0.2]),
                  t_prog_us=1.0, t_erase_us=2.0, pages_per_block=4)
        kw["capacity_bytes"] = 4 * kw["subarrays_per_channel"] * 4 * PAGE_BYTES * 16
        cfg = v1_config(**kw)
        mix = "RRRRRW" if rng.random() < 0.7 else "RRW"
        ops = [(rng.choice(mix), rng.randrange(30), rng.randrange(1, 40), rng.choice([0, 0, 1, 3]),
                rng.choice([32, 32, 64, 128, 4096])) for _ in range(rng.randrange(1, 60))]
        reqs = burst_requests(cfg, ops)
        chunk = rng.choice([None, None, 5, 50])
        a = run_engine(cfg, reqs, "reference", chunk)
        assert a == run_engine(cfg, reqs, "fused", chunk), (kw, chunk)
        compared += 1
