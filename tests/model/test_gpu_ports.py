"""The GPU side of contract 2's channel shape: the G5' port arbiter (docs/gpu.md G5',
docs/timing-contract.md §14): one grant per system port per tick, each port taking the
first partition at or after its own pointer whose FIFO head maps to it."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.gpu import (ClosedLoop, GpuConfig, GpuError, GpuPort, run_closed_loop,
                              run_stepped)
from hbfsim.model.system import HbfSystem
from hbfsim.model.workloads import LAYOUT_GEOMETRY, layout_decode
from tests.model.test_gpu import FAST, mixed_program, stepped_equals_closed_loop


def cfg2(host_ports, **kw):
    base = dict(host_ports=host_ports, channels=2, subarrays_per_channel=4,
                active_per_channel=4, capacity_bytes=2 * 4 * 256 * PAGE_BYTES * 16, **FAST)
    base.update(kw)
    return load_config(**base)


def port_of(cfg, system, rec):
    stack, q = system.mapper.stack_of((rec.addr - cfg.base_address) // PAGE_BYTES)
    return stack * cfg.channels + system.mapper.channel_of(q, rec.op == "W")[0]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), ret=st.sampled_from([0, 6]), adm=st.sampled_from([4, 64]),
       compute=st.sampled_from([(0,), (0, 3, 40)]))
def test_one_channel_equals_stack_shape(seed, ret, adm, compute):
    """With one channel per stack and one stack the channel shape has one port: G5' is G5,
    and the closed loop (horizon chunks only in the channel shape, direct chunks in the
    stack shape) gives the same records."""
    gpu = GpuConfig(return_cycles=ret, partitions=3)
    out = []
    for hp in ("stack", "channel"):
        cfg = cfg2(hp, channels=1, admission=adm)
        res = run_closed_loop(cfg, mixed_program(cfg, seed=seed, compute=compute, per=4),
                              gpu=gpu, record=True)
        out.append((res.records, res.kernels))
    assert out[0] == out[1]


@pytest.mark.parametrize("stacks", [1, 2])
def test_one_grant_per_port_and_per_partition_per_tick(stacks):
    """G5': ingress is several requests per tick, never two of one port or one partition."""
    cfg = cfg2("channel", channels=4, stacks=stacks, admission=64)
    res = run_closed_loop(cfg, mixed_program(cfg, producers=12, per=8, bounds=(4,)),
                          gpu=GpuConfig(partitions=8), record=True)
    recs = res.records
    per_port = Counter((r.arrival, port_of(cfg, res.system, r)) for r in recs)
    per_part = Counter((r.arrival, r.source) for r in recs)
    per_tick = Counter(r.arrival for r in recs)
    assert max(per_port.values()) == 1 and max(per_part.values()) == 1
    assert max(per_tick.values()) > 1
    assert all(r.t_accept >= r.arrival for r in recs)


# The stepped GpuPort (the co-simulation's GPU) takes its G5' grants from the code ClosedLoop
# runs (_GpuCore._grant_ports); run_stepped drives it against an HbfSystem one tick at a time
# (no horizon, no lookahead), so equal records check ClosedLoop's chunking and the port's
# stepping against each other in both shapes.
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), hp=st.sampled_from(["stack", "channel"]),
       stacks=st.sampled_from([1, 2]), channels=st.sampled_from([2, 4]),
       sched=st.sampled_from(["fcfs", "partition-2r2w"]), ret=st.sampled_from([0, 1, 6]),
       launch=st.sampled_from([0, 20]), adm=st.sampled_from([4, 64]),
       parts=st.sampled_from([1, 3, 8]), bounds=st.sampled_from([(1,), (1, 2, 3), (4, 1)]),
       compute=st.sampled_from([(0,), (0, 3, 40), (11,)]),
       backpressure=st.sampled_from([0, 3]))
def test_stepped_port_equals_closed_loop(seed, hp, stacks, channels, sched, ret, launch, adm,
                                         parts, bounds, compute, backpressure):
    """GpuPort stepped one tick at a time gives ClosedLoop's records and kernels, in the
    channel shape (G5': up to one grant per port per tick) and in the stack shape (G5),
    with and without ``resp.ready`` backpressure."""
    if sched.startswith("partition-") and channels < 4:
        sched = "fcfs"                    # a partition scheduler splits 4 channels or more
    cfg = cfg2(hp, stacks=stacks, channels=channels, scheduler=sched, admission=adm,
               capacity_bytes=stacks * channels * 4 * 256 * PAGE_BYTES * 16)
    gpu = GpuConfig(return_cycles=ret, launch_cycles=launch, partitions=parts)
    fast, ref = stepped_equals_closed_loop(cfg, gpu, seed, bounds, compute, backpressure)
    assert fast.partition_wait_sum == ref.partition_wait_sum


@pytest.mark.parametrize("stacks", [1, 2])
def test_stepped_port_grants_per_port(stacks):
    """The stepped port's grants are G5' (several in one tick, one per port, ascending
    ports, each on the port its head maps to) and equal ClosedLoop's run record for record:
    a stepped port that granted one request per tick (G5) would fail both."""
    cfg = cfg2("channel", channels=4, stacks=stacks, admission=64,
               capacity_bytes=stacks * 4 * 4 * 256 * PAGE_BYTES * 16)
    gpu = GpuConfig(partitions=8)

    def program():
        return mixed_program(cfg, producers=12, per=8, bounds=(4,))

    port = GpuPort(cfg, program(), gpu)
    system = port.system = HbfSystem(cfg, on_response=port.respond)
    per_tick = []
    t = 0
    while not port.exhausted:
        g = port.grants(t)
        assert [k for k, _ in g] == sorted({k for k, _ in g})       # one per port, ascending
        for k, r in g:
            assert k == port_of(cfg, system, r) and r.arrival == t
            system.submit(r, k)
        per_tick.append(len(g))
        system.t = t
        system.run(until=t)
        t += 1
    assert max(per_tick) > 1
    with pytest.raises(GpuError, match=r"^host_ports must be stack for GpuPort.tick"):
        GpuPort(cfg, program(), gpu).tick(0)
    ref = run_closed_loop(cfg, program(), gpu=gpu, record=True)
    stepped = run_stepped(cfg, program(), gpu=gpu, record=True)
    assert stepped.records == ref.records and stepped.kernels == ref.kernels
    assert max(Counter(r.arrival for r in ref.records).values()) > 1


def _closed_loop(cfg, program, gpu=None, resume=True):
    """Run ``program`` closed loop; with ``resume`` off, hide ``HbfSystem.t_resume`` from
    the driver so that it steps through every no-op tick as it did before (the check)."""
    loop = ClosedLoop(cfg, program, gpu=gpu, record=True)
    if not resume:
        run = loop.system.run

        def stepping(until=None):
            t = run(until)
            loop.system.t_resume = None
            return t

        loop.system.run = stepping
    return loop.run(), loop.system.steps


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), ret=st.sampled_from([0, 6]), stacks=st.sampled_from([1, 2]),
       multiplane=st.sampled_from(["off", "page", "megaplane"]),
       compute=st.sampled_from([(0,), (0, 3, 40)]))
def test_channel_shape_resume_is_exact(seed, ret, stacks, multiplane, compute):
    """The driver's resume at the system's next event (``t_resume``, docs/gpu.md §2) gives
    the records of the driver that runs every tick after a skip, and evaluates no more
    cycles."""
    cfg = cfg2("channel", channels=4, stacks=stacks, admission=16, multiplane=multiplane,
               megaplane_planes=2)
    gpu = GpuConfig(return_cycles=ret, partitions=3)
    prog = mixed_program(cfg, seed=seed, compute=compute, per=4)
    fast, n_fast = _closed_loop(cfg, prog, gpu)
    slow, n_slow = _closed_loop(cfg, mixed_program(cfg, seed=seed, compute=compute, per=4),
                                gpu, resume=False)
    assert fast.records == slow.records and fast.kernels == slow.kernels
    assert n_fast <= n_slow


@pytest.mark.parametrize("multiplane", ["off", "page"])
def test_channel_shape_skips_idle_ticks_closed_loop(multiplane):
    """A closed-loop decode step in the channel shape evaluates about as many cycles as in
    the stack shape (waiting for the media costs no cycles in either), not one per tick of
    its span: the one-tick horizon chunks of ``return_cycles = 0`` once evaluated 2.3 M
    cycles for 7,704 page reads (bench/bench_layout.py --host-ports channel)."""
    steps = {}
    for hp in ("stack", "channel"):
        cfg = load_config(base=LAYOUT_GEOMETRY, host_ports=hp,
                          multiplane=multiplane)
        res, steps[hp] = _closed_loop(cfg, layout_decode(cfg, scale=16, batch=1))
    assert res.span_ticks > 10 * steps["channel"]
    assert steps["channel"] <= 2 * steps["stack"]
