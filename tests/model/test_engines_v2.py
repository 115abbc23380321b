"""Contract 2's fused loop must match its reference loop event for event, in both host-port
shapes (docs/timing-contract.md §18 step 5; model/loop_fused_v2.py and
model/loop_fused_ports.py).

Compared for every request: every field the contract makes visible (accept, dispatch and
response cycle, flags, data, queue depth, ``entry_info``), the response order, the final
statistics, the number of evaluated cycles, the stop tick and the controllers' end state
(admission count, link credits, free pools, allocation pointers, stall and hit counters).
The long variants run with ``HBFSIM_LONG_ENGINES=1``.
"""

from __future__ import annotations

import copy
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hbfsim.model.system as system_mod
from hbfsim.config import PAGE_BYTES, SCHEDULERS, load_config
from hbfsim.model.controller import Request
import hbfsim.model.gpu_port as gpu_port_mod
from hbfsim.model.gpu import ClosedLoop, GpuConfig, run_stepped
from hbfsim.model.loop_fused_v2 import run_fused_v2
from hbfsim.model.requests import default_workload
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem

from tests.conftest import make_reqs

from .test_engines import FIELDS, burst_requests
from .test_gpu import FAST, mixed_program

LONG = os.environ.get("HBFSIM_LONG_ENGINES") == "1"
SHAPES = ("stack", "channel")


def v2(host_ports="stack", stacks=1, channels=4, subarrays=2, **kw):
    base = dict(contract=2, host_ports=host_ports, stacks=stacks, channels=channels,
                subarrays_per_channel=subarrays, active_per_channel=2, admission=16,
                mshr_entries=4, write_buffer_entries=2, queue_depth=2, t_read_us=0.2,
                t_prog_us=1.0, t_erase_us=2.0, pages_per_block=4, write_deadline_ticks=200,
                write_timeout_policy="partial",
                capacity_bytes=stacks * channels * subarrays * 4 * PAGE_BYTES * 16)
    base.update(kw)
    return load_config(**base)


def end_state(system):
    """What the controllers hold after the run (no event shows it, but both loops must
    leave the same)."""
    out = []
    for s in system.stacks:
        row = [s.inflight, s.link.credit, s.link.credit_t, sorted(s.mshr_free),
               sorted(s.wb_free), s.ch_link_stall, s.agg_wait, s.mshr_hits, s.ch_ops,
               s.credit_wait, s.data]
        if system.ports:
            row += [s.ap_r, s.ap_w]
        out.append(row)
    return out


def run_engine(cfg, reqs, engine, chunk=None, keep=True, resp_ready=None):
    """Run ``reqs`` on a fresh system with ``engine``; with ``chunk``, as ``run(until)``
    slices of that many ticks. Return everything the two loops must agree on."""
    rs = copy.deepcopy(reqs)
    system = HbfSystem(cfg, keep=keep)
    system.engine = engine
    system.resp_ready = resp_ready
    for r in rs:
        system.submit(r)
    system.close_input()
    if chunk is None:
        system.run()
    else:
        while system.n_done < system.submitted:
            system.run(system.t + chunk)
        system.run()
    events = [tuple(getattr(r, f) for f in FIELDS) for r in rs]
    order = [r.id for r in system.completed]
    return events, order, collect_stats(system), system.steps, system.t, end_state(system)


def assert_same(cfg, reqs, **kw):
    a = run_engine(cfg, reqs, "reference", **kw)
    b = run_engine(cfg, reqs, "fused", **kw)
    for part, x, y in zip(("events", "response order", "stats", "steps", "stop tick",
                           "end state"), a, b):
        assert x == y, part
    return a


# ------------------------------------------------------------------ the engine choice
def test_fused_is_the_default_and_reference_is_selectable(monkeypatch):
    """``engine = "fused"`` (the default) runs run_fused_v2 for contract 2 in both shapes;
    ``engine = "reference"`` runs run_pipelined; contract 1 keeps its own two loops."""
    calls = []
    for name in ("run_fused_v2", "run_pipelined", "run_fused", "run_reference"):
        orig = getattr(system_mod, name)
        monkeypatch.setattr(system_mod, name,
                            lambda s, u, orig=orig, name=name: calls.append(name) or orig(s, u))
    for contract, hp, engine, want in ((2, "stack", "fused", "run_fused_v2"),
                                       (2, "channel", "fused", "run_fused_v2"),
                                       (2, "stack", "reference", "run_pipelined"),
                                       (2, "channel", "reference", "run_pipelined"),
                                       (1, "stack", "fused", "run_fused"),
                                       (1, "stack", "reference", "run_reference")):
        cfg = load_config(contract=contract, host_ports=hp)
        system = HbfSystem(cfg, keep=False)
        assert system.engine == "fused"
        system.engine = engine
        calls.clear()
        system.run_requests(default_workload(cfg))
        assert set(calls) == {want}, (contract, hp, engine)


@pytest.mark.parametrize("hp", SHAPES)
@pytest.mark.parametrize("multiplane", ["page", "megaplane"])
def test_multiplane_falls_back_to_the_reference_loop(monkeypatch, hp, multiplane):
    """The fused loop does not run multi-plane commands: ``run()`` takes the reference loop
    for them (explicitly, and the fused loop refuses them if called directly)."""
    calls = []
    monkeypatch.setattr(system_mod, "run_fused_v2",
                        lambda s, u: calls.append("fused") or run_fused_v2(s, u))
    cfg = load_config(contract=2, host_ports=hp, multiplane=multiplane)
    system = HbfSystem(cfg, keep=False)
    system.run_requests(default_workload(cfg))
    assert calls == [] and system.n_done == system.submitted
    with pytest.raises(ValueError, match=r"^the fused contract-2 loop runs multiplane = "
                                         rf"'off', not '{multiplane}'"):
        run_fused_v2(HbfSystem(cfg), None)


# ------------------------------------------------------------------ fixed traffic
def mixed_bursts(cfg, seed=0, n=30):
    rng = random.Random(seed)
    ops = [(rng.choice("RRRRW"), rng.randrange(24), rng.randrange(1, 24),
            rng.choice([0, 0, 1, 3]), rng.choice([32, 32, 128, 1024, PAGE_BYTES]))
           for _ in range(n)]
    return burst_requests(cfg, ops)


@pytest.mark.parametrize("hp", SHAPES)
@pytest.mark.parametrize("sched", SCHEDULERS)
@pytest.mark.parametrize("read_mode, window", [("demand", 2), ("aggregation", 2),
                                               ("aggregation", 30)])
@pytest.mark.parametrize("policy", ["strict", "partial"])
def test_default_knobs_identical(hp, sched, read_mode, window, policy):
    """Every scheduler, read mode and write policy, in both shapes, on one burst stream."""
    cfg = v2(hp, scheduler=sched, read_mode=read_mode, read_agg_window_ticks=window,
             read_agg_threshold_bytes=256, write_timeout_policy=policy)
    assert_same(cfg, mixed_bursts(cfg, seed=len(sched) + window))


@pytest.mark.parametrize("hp", SHAPES)
def test_aggregation_threshold_in_the_cycle_after_allocation(hp):
    """A merge that reaches the threshold when the entry is due in the next cycle anyway
    (window 2) must not record it twice: one READ, one enqueue (v1 §4.2, §6)."""
    cfg = v2(hp, read_mode="aggregation", read_agg_window_ticks=2,
             read_agg_threshold_bytes=256)
    reqs = burst_requests(cfg, [("R", 0, 4, 0, 128), ("R", 1, 9, 0, 32)])
    stats = assert_same(cfg, reqs)[2]
    assert stats["page_reads"] + stats["page_buffer_hits"] == 2


@pytest.mark.parametrize("hp", SHAPES)
def test_default_workload_identical(hp):
    cfg = load_config(contract=2, host_ports=hp)
    assert_same(cfg, default_workload(cfg))


@pytest.mark.parametrize("hp", SHAPES)
def test_trace_identical(hp, tmp_path):
    """The hbf-trace-v1 rows (written at each response, every state) are the same file."""
    from hbfsim.model.trace import TraceWriter

    cfg = v2(hp, stacks=2, admission=6)
    out = []
    for engine in ("reference", "fused"):
        path = tmp_path / f"{engine}.csv"
        tw = TraceWriter(path, 2)
        system = HbfSystem(cfg, trace=tw, keep=False)
        system.engine = engine
        system.run_requests(mixed_bursts(cfg, seed=5, n=30))
        tw.close()
        out.append(path.read_bytes())
    assert out[0] == out[1] and out[0].count(b"\n") > 100


@pytest.mark.parametrize("hp", SHAPES)
@pytest.mark.parametrize("stacks", [2, 3])
def test_several_stacks_identical(hp, stacks):
    """The route stage and the egress round robin (stack shape), ``S * C`` ports (channel
    shape), with run(until) slices and a consumer that holds resp.ready."""
    cfg = v2(hp, stacks=stacks, admission=6)
    reqs = mixed_bursts(cfg, seed=stacks, n=40)
    assert_same(cfg, reqs)
    assert_same(cfg, reqs, chunk=7, resp_ready=lambda u: u % 5 != 0)


@pytest.mark.parametrize("hp", SHAPES)
@pytest.mark.parametrize("bw", [0.5, 2.0])
def test_credit_bound_slow_link_identical(hp, bw):
    """A link slower than the responses: K waits for the credit (credit_wait, the stall
    counters), full-page reads and writes, many waiters per entry."""
    cfg = v2(hp, channel_bw_gbps=bw, admission=64, mshr_entries=8)
    reqs = burst_requests(cfg, [("R", 0, 20, 0, 32), ("R", 1, 3, 1, PAGE_BYTES),
                                ("W", 2, 4, 0, 1024), ("R", 3, 30, 0, 128),
                                ("R", 5, 6, 2, PAGE_BYTES)])
    events = assert_same(cfg, reqs)[0]
    assert all(e[FIELDS.index("t_done")] > 0 for e in events)
    assert_same(cfg, reqs, chunk=1)


@pytest.mark.parametrize("held", [None, 2, 3])
def test_channel_shape_with_one_channel_identical(held):
    """``C = 1``: the channel shape has one port per stack; both loops of both shapes give
    the same events (the shapes' equality is tests/model/test_channel_shape.py's)."""
    ready = None if held is None else (lambda u: u % held != 0)
    runs = []
    for hp in SHAPES:
        cfg = v2(hp, channels=1, subarrays=4, admission=5)
        runs.append(assert_same(cfg, mixed_bursts(cfg, seed=7), resp_ready=ready))
    assert runs[0][:4] == runs[1][:4]


def test_saturated_read_stream_identical():
    """The benchmark's read stream in miniature, both shapes: the media saturate, admission
    backs up, one accept, merge and response per port and cycle."""
    for hp in SHAPES:
        cfg = v2(hp, subarrays=4, active_per_channel=4, admission=64, mshr_entries=16,
                 queue_depth=4, t_read_us=0.5, channel_bw_gbps=200.0)
        B = cfg.base_address
        reqs = [Request(i, "R", B + (i // 8) * PAGE_BYTES + 32 * (i % 8), 32, 0, i // 2)
                for i in range(1500)]
        assert_same(cfg, reqs)
        assert_same(cfg, reqs, chunk=37)


def test_rewound_onto_an_earlier_tick():
    """A driver that stops the run and moves ``t`` back over skipped (no-op) ticks, as the
    GPU driver does (docs/gpu.md §2), sees the same run."""
    for hp in SHAPES:
        cfg = v2(hp)
        out = []
        for engine in ("reference", "fused"):
            rs = mixed_bursts(cfg, seed=3, n=10)
            system = HbfSystem(cfg, keep=True)
            system.engine = engine
            for r in rs:
                system.submit(r)
            system.close_input()
            while system.n_done < system.submitted:
                t0 = system.t
                system.run(t0 + 3)
                if system.t_resume is not None and system.t_resume > t0 + 4:
                    system.t = t0 + 4       # the ticks up to t_resume are no-ops
            out.append(([tuple(getattr(r, f) for f in FIELDS) for r in rs], system.steps))
        assert out[0] == out[1]


@pytest.mark.parametrize("sched, spec", [
    ("fcfs", [("W", 0, 0, 1024, 0), ("W", 1, 0, 1024, 0), ("R", 0, 0, 32, 1),
              ("R", 1, 0, 32, 1)]),
    ("partition-2r2w", [("R", 0, 0, 32, 0), ("W", 0, 0, PAGE_BYTES, 0)]),
    ("partition-2r2w", [("W", 0, 0, 2048, 0), ("R", 0, 0, 32, 1)]),
    ("fcfs", [("W", p, 0, 512, 0) for p in range(4)] + [("W", 0, 512, 512, 1)]
     + [("R", p, 0, 32, 2) for p in range(4)]),
])
def test_ports_meet_on_the_shared_tables(sched, spec):
    """The channel shape's cross-port cases (v2 §4.2.3, §4.2.4): two ports' reads flushing
    their pages' OPEN entries (``raw``) in one cycle, a read and a write of one page in one
    cycle, a read stalled behind another port's write, and pool pressure."""
    cfg = v2("channel", channels=4, scheduler=sched, t_prog_us=0.5, mshr_entries=2,
             write_buffer_entries=3)
    assert_same(cfg, make_reqs(spec, cfg))


ports_traffic = st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 11),
                                   st.sampled_from([0, 32, 512, 2048]),
                                   st.sampled_from([32, 512, 2048, PAGE_BYTES]),
                                   st.integers(0, 12)),
                         min_size=1, max_size=40)


@settings(max_examples=200 if LONG else 30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=ports_traffic, channels=st.sampled_from([2, 4]), stacks=st.sampled_from([1, 2]),
       adm=st.sampled_from([2, 8, 64]), tables=st.sampled_from([(1, 1), (2, 3), (8, 4)]),
       sched=st.sampled_from(["fcfs", "read-priority", "partition-2r2w"]))
def test_random_simultaneous_ports_identical(ops, channels, stacks, adm, tables, sched):
    """Many requests presented in the same few ticks on every port of the channel shape:
    the admission rank, the pools' pointers, reads before writes and raw flushes on
    several ports in one cycle."""
    if sched == "partition-2r2w" and channels != 4:
        sched = "fcfs"
    cfg = v2("channel", stacks=stacks, channels=channels, admission=adm,
             mshr_entries=tables[0], write_buffer_entries=tables[1], scheduler=sched,
             t_prog_us=0.5)
    spec = sorted(((op, page, min(off, PAGE_BYTES - n), n, tick)
                   for op, page, off, n, tick in ops), key=lambda x: x[4])
    assert_same(cfg, make_reqs(spec, cfg))


# ------------------------------------------------------------------ GPU closed loop
@pytest.mark.parametrize("hp", SHAPES)
@pytest.mark.parametrize("stacks", [1, 2])
@pytest.mark.parametrize("seed", [0, 1])
def test_gpu_closed_loop_identical(hp, stacks, seed):
    """The GPU driver runs the system in run(until) chunks, moves system.t back, resumes at
    t_resume and submits from the response callback (G5 / G5'): same records, same run."""
    out = []
    for engine in ("reference", "fused"):
        cfg = load_config(contract=2, host_ports=hp, stacks=stacks, channels=2,
                          subarrays_per_channel=4, active_per_channel=4, admission=6,
                          mshr_entries=4, write_buffer_entries=2,
                          capacity_bytes=stacks * 2 * 4 * 256 * PAGE_BYTES * 16, **FAST)
        loop = ClosedLoop(cfg, mixed_program(cfg, seed=seed, per=8), record=True,
                          gpu=GpuConfig(return_cycles=seed * 6, partitions=3))
        loop.system.engine = engine
        res = loop.run()
        out.append((res.records, res.kernels, res.span_ticks, collect_stats(loop.system),
                    loop.system.steps))
    assert out[0] == out[1]


@pytest.mark.parametrize("stacks", [1, 2])
def test_gpu_stepped_port_identical(monkeypatch, stacks):
    """The stepped GPU port (one run(until=t) per tick, the co-simulation's driver) against
    both loops, with a consumer that drops resp.ready."""
    out = []
    for engine in ("reference", "fused"):
        cfg = load_config(contract=2, stacks=stacks, channels=2, subarrays_per_channel=4,
                          active_per_channel=4, admission=6,
                          capacity_bytes=stacks * 2 * 4 * 256 * PAGE_BYTES * 16, **FAST)
        engines = []

        class System(HbfSystem):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.engine = engine
                engines.append(self)

        monkeypatch.setattr(gpu_port_mod, "HbfSystem", System)   # the engine of its system
        res = run_stepped(cfg, mixed_program(cfg, seed=2, per=5), record=True,
                          resp_ready=lambda u: u % 4 != 0)
        out.append((res.records, res.kernels, collect_stats(engines[0]), engines[0].steps))
    assert out[0] == out[1]


# ------------------------------------------------------------------ random traffic
bursts = st.lists(st.tuples(st.sampled_from("RRRRW"), st.integers(0, 24), st.integers(1, 30),
                            st.integers(0, 3), st.sampled_from([32, 32, 128, 1024, 4096])),
                  min_size=1, max_size=30)
knobs = st.fixed_dictionaries({
    "host_ports": st.sampled_from(SHAPES),
    "stacks": st.sampled_from([1, 1, 2]),
    "channels": st.sampled_from([1, 2, 4]),
    "subarrays": st.sampled_from([1, 2]),
    "admission": st.sampled_from([1, 3, 16, 512]),
    "mshr_entries": st.sampled_from([1, 2, 16]),
    "write_buffer_entries": st.sampled_from([1, 2, 4]),
    "queue_depth": st.sampled_from([1, 2, 8]),
    "active_total": st.sampled_from([0, 2]),
    "scheduler": st.sampled_from(["fcfs", "read-priority", "write-drain"]),
    "read_mode": st.sampled_from(["demand", "aggregation"]),
    "read_agg_window_ticks": st.sampled_from([2, 30]),
    "mshr_merge": st.booleans(),
    "page_cache_pages": st.sampled_from([0, 2]),
    "page_buffers": st.sampled_from([0, 1, 2]),
    "write_timeout_policy": st.sampled_from(["strict", "partial"]),
    "channel_bw_gbps": st.sampled_from([0.5, 4.0, 200.0]),
})


@settings(max_examples=300 if LONG else 40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(kw=knobs, ops=bursts, chunk=st.sampled_from([None, None, 1, 7, 60]),
       held=st.sampled_from([None, None, 3]))
def test_random_identical(kw, ops, chunk, held):
    cfg = v2(read_agg_threshold_bytes=256, **kw)
    ready = None if held is None else (lambda u: u % held != 0)
    assert_same(cfg, burst_requests(cfg, ops), chunk=chunk, resp_ready=ready)


@pytest.mark.skipif(not LONG, reason="long variant: HBFSIM_LONG_ENGINES=1")
def test_random_configurations_identical_long():
    """A fixed random sample of 200 configurations with larger streams (every scheduler,
    tiny tables, up to three stacks, chunked runs)."""
    rng = random.Random(20261201)
    for _ in range(200):
        hp = rng.choice(SHAPES)
        channels = rng.choice([1, 2, 4])
        sched = rng.choice(SCHEDULERS if channels == 4 else SCHEDULERS[:3])
        cfg = v2(hp, stacks=rng.choice([1, 1, 2, 3]), channels=channels,
                 subarrays=rng.choice([1, 2, 4]), active_per_channel=rng.choice([1, 2]),
                 active_total=rng.choice([0, 0, 3]), admission=rng.choice([1, 4, 32, 4096]),
                 mshr_entries=rng.choice([1, 3, 64]),
                 write_buffer_entries=rng.choice([1, 2, 8]),
                 queue_depth=rng.choice([1, 2, 16]), scheduler=sched,
                 read_mode=rng.choice(["demand", "aggregation"]),
                 read_agg_window_ticks=rng.choice([2, 30]),
                 read_agg_threshold_bytes=rng.choice([64, 256, 4096]),
                 mshr_merge=rng.random() < 0.8, page_cache_pages=rng.choice([0, 0, 3]),
                 write_timeout_policy=rng.choice(["strict", "partial"]),
                 write_deadline_ticks=rng.choice([50, 400]),
                 page_buffers=rng.choice([0, 1, 2]),
                 channel_bw_gbps=rng.choice([0.5, 4.0, 200.0]),
                 t_read_us=rng.choice([0.05, 0.2]))
        ops = [(rng.choice("RRRRW"), rng.randrange(30), rng.randrange(1, 40),
                rng.choice([0, 0, 1, 3]), rng.choice([32, 32, 64, 128, 4096]))
               for _ in range(rng.randrange(1, 60))]
        held = rng.choice([None, None, 3])
        assert_same(cfg, burst_requests(cfg, ops), chunk=rng.choice([None, None, 5, 50]),
                    resp_ready=None if held is None else (lambda u, h=held: u % h != 0))
