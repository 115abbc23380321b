"""The closed-loop GPU model and open-loop replay (model/gpu.py; docs/sources.md, source §5.2)."""

import json
from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES
from tests.conftest import stack_config as v1_config
from hbfsim.model.gpu import (GpuConfig, GpuError, GpuPort, GpuProgram, Kernel,
                              Producer, gpu_cycles_to_ticks, open_loop_requests,
                              partition_of, program_from_spec, program_spec,
                              run_closed_loop, run_open_loop, run_stepped)
from hbfsim.model.stats import collect_stats
from hbfsim.model.workloads import conservation, media_saturation, mshr_grid, rw_isolation

FAST = dict(t_read_us=0.1, t_prog_us=0.5, t_erase_us=1.0)   # 85 / 425 / 850 ticks


def small_cfg(**kw):
    base = dict(channels=2, subarrays_per_channel=4, active_per_channel=4,
                capacity_bytes=2 * 4 * 256 * PAGE_BYTES * 16, **FAST)
    base.update(kw)
    return v1_config(**base)


def mixed_program(cfg, seed=0, kernels=2, producers=6, per=6, bounds=(1, 2, 3),
                  compute=(0, 3, 40), start=(0, 0, 25)):
    """A deterministic two-kernel program with reads, full-page writes and varied timing."""
    B = cfg.base_address

    def make():
        out = []
        for k in range(kernels):
            prods = []
            for w in range(producers):
                acc = []
                for i in range(per):
                    page = (seed * 7 + k * 31 + w * 5 + i) % 24
                    acc.append(("R", B + page * PAGE_BYTES + 128 * ((w + i) % 32), 128))
                if w == 0:   # one writer per kernel covering a page in 128 B stores
                    wp = 200 + k
                    acc = [("W", B + wp * PAGE_BYTES + 128 * j, 128) for j in range(32)]
                prods.append(Producer(acc, bound=32 if w == 0 else bounds[w % len(bounds)],
                                      compute=compute[w % len(compute)],
                                      start=start[w % len(start)], sm=w % 3))
            out.append(Kernel(f"k{k}", prods))
        return out

    return GpuProgram(make, "mixed")


# --------------------------------------------------------------------------- clocks
def test_gpu_cycles_to_ticks_rounds_up():
    cfg = v1_config()
    assert gpu_cycles_to_ticks(0, cfg) == 0
    assert gpu_cycles_to_ticks(1, cfg) == 1
    assert gpu_cycles_to_ticks(1132, cfg) == 850
    assert gpu_cycles_to_ticks(1133, cfg) == 851
    for c in range(1, 3000, 37):   # never shorter than the GPU delay
        t = gpu_cycles_to_ticks(c, cfg)
        assert t * 1132 >= c * 850 > (t - 1) * 1132


def test_partition_rotates_per_page():
    cfg, gpu = v1_config(), GpuConfig(partitions=8)
    B = cfg.base_address
    assert [partition_of(B + p * PAGE_BYTES, cfg, gpu) for p in range(8)] == list(range(8))
    assert [partition_of(B + 256 * c, cfg, gpu) for c in range(8)] == list(range(8))


# --------------------------------------------------------------------------- closed loop
@pytest.mark.parametrize("channels", [1, 2, 4, 8, 16])
def test_conservation_every_request_one_completion(channels):
    cfg = v1_config(channels=channels)
    res = run_closed_loop(cfg, conservation(cfg), record=True)
    ids = Counter(r.id for r in res.records)
    assert sorted(ids) == list(range(64)) and set(ids.values()) == {1}
    s = collect_stats(res.system)
    assert s["requests"] == s["completions"] == res.requests == 64


def test_closed_loop_is_deterministic():
    cfg = small_cfg()
    runs = [run_closed_loop(cfg, mixed_program(cfg), record=True) for _ in range(2)]
    assert runs[0].records == runs[1].records
    assert runs[0].kernels == runs[1].kernels
    assert runs[0].records and runs[0].writes == 64 and runs[0].system.errors == 0


def test_producer_never_exceeds_its_bound():
    cfg = small_cfg(admission=8)
    res = run_closed_loop(cfg, mixed_program(cfg, per=10), record=True)
    events = defaultdict(list)
    for r in res.records:
        events[r.producer].append((r.created, 1))
        events[r.producer].append((r.t_done, -1))
    prog = mixed_program(cfg, per=10)
    bounds = [p.bound for k in prog for p in k.producers]
    for pid, ev in events.items():
        out = peak = 0
        for _, d in sorted(ev, key=lambda e: (e[0], e[1])):   # completions first in a tick
            out += d
            peak = max(peak, out)
        assert peak <= bounds[pid]
    assert res.bound_violations == 0 and res.peak_outstanding <= 32


@pytest.mark.parametrize("ret,compute", [(0, 0), (0, 7), (5, 0), (40, 13)])
def test_dependent_access_waits_completion_return_and_compute(ret, compute):
    """With bound 1 the next access is created exactly 1 + return + compute ticks later."""
    cfg = small_cfg()
    B = cfg.base_address
    prog = GpuProgram(lambda: [Kernel("dep", [
        Producer([("R", B + (w * 3 + i) * PAGE_BYTES, 32) for i in range(5)], compute=compute,
                 sm=w) for w in range(4)])])
    gpu = GpuConfig(return_cycles=ret)
    res = run_closed_loop(cfg, prog, gpu=gpu, record=True)
    gap = 1 + gpu_cycles_to_ticks(ret, cfg) + gpu_cycles_to_ticks(compute, cfg)
    per = defaultdict(list)
    for r in sorted(res.records, key=lambda r: r.created):
        per[r.producer].append(r)
    for reqs in per.values():
        for a, b in zip(reqs, reqs[1:]):
            assert b.created == a.t_done + gap


def test_at_most_one_admission_per_partition_per_tick():
    cfg = small_cfg(admission=16)
    res = run_closed_loop(cfg, mixed_program(cfg, producers=12), record=True)
    grants = Counter(r.arrival for r in res.records)          # the port: one per tick
    accepts = Counter((r.t_accept, r.source) for r in res.records)
    assert max(grants.values()) == 1
    assert max(accepts.values()) == 1
    assert all(r.arrival >= r.created and r.t_accept >= r.arrival for r in res.records)


def test_port_arbiter_is_round_robin_over_partitions():
    """A burst in three partitions is granted 0,1,2,0,1,2,... then the leftovers."""
    cfg = v1_config()
    gpu = GpuConfig(partitions=4)
    B = cfg.base_address
    # page p, offset 0 -> partition p mod 4 (rotated interleave)
    acc = [("R", B + p * PAGE_BYTES + 4 * 4096 * k, 32) for p, n in ((0, 3), (1, 2), (2, 4))
           for k in range(n)]
    prog = GpuProgram(lambda: [Kernel("burst", [Producer([a]) for a in acc])])
    res = run_closed_loop(cfg, prog, gpu=gpu, record=True)
    order = [r.source for r in sorted(res.records, key=lambda r: r.arrival)]
    assert order == [0, 1, 2, 0, 1, 2, 0, 2, 2]
    assert sorted(r.arrival for r in res.records) == list(range(9))


def test_kernels_are_separated_by_barriers():
    cfg = small_cfg()
    gpu = GpuConfig(return_cycles=3, launch_cycles=100)
    res = run_closed_loop(cfg, mixed_program(cfg, kernels=3), gpu=gpu, record=True)
    gap = 1 + gpu_cycles_to_ticks(3, cfg) + gpu_cycles_to_ticks(100, cfg)
    for i, k in enumerate(res.kernels):
        mine = [r for r in res.records if r.kernel == i]
        assert k["end"] == max(r.t_done for r in mine)
        assert min(r.created for r in mine) >= k["launch"]
        if i:
            assert k["launch"] == res.kernels[i - 1]["end"] + gap
    assert res.end_tick == res.kernels[-1]["end"]
    assert res.span_ticks == res.end_tick - res.start_tick + 1


def test_gpu_latency_includes_partition_wait():
    cfg = small_cfg(admission=4)
    res = run_closed_loop(cfg, mixed_program(cfg), record=True)
    lat = [r.t_done - r.created for r in res.records]
    assert res.gpu_latency_sum == sum(lat) and res.gpu_latency_max == max(lat)
    assert res.partition_wait_max == max(r.arrival - r.created for r in res.records)
    assert res.summary()["requests"] == len(res.records)


# --------------------------------------------------------------------------- open loop
@pytest.mark.parametrize("name", ["mixed", "mshr_grid", "rw_isolation", "mshr_grid_channel"])
def test_open_loop_replay_reproduces_ingress_and_completion(name):
    if name == "mshr_grid_channel":
        # channel shape (G5'): one partition's requests, granted in different ticks to
        # different ports, are accepted in one tick (41 times here), which the replay admits
        cfg = v1_config(**mshr_grid().config, admission=32, mshr_merge=False,
                          host_ports="channel", **FAST)
        prog, gpu = mshr_grid(cfg, warps=16, bound=2), None
    elif name == "mixed":
        cfg = small_cfg(admission=8)
        prog = mixed_program(cfg)
        gpu = GpuConfig(return_cycles=9)
    elif name == "mshr_grid":
        cfg = v1_config(**mshr_grid().config, admission=32, mshr_merge=False, **FAST)
        prog, gpu = mshr_grid(cfg, warps=16, bound=2), None
    else:
        cfg = v1_config(**rw_isolation().config, **FAST)
        prog, gpu = rw_isolation(cfg, read_delay_us=0.2), None
    res = run_closed_loop(cfg, prog, gpu=gpu, record=True)
    if name == "mshr_grid_channel":
        ticks = [(r.t_accept, r.source) for r in res.records]
        assert len(set(ticks)) < len(ticks)
    else:
        reqs = open_loop_requests(res)
        assert [r.arrival for r in reqs] == sorted(r.t_accept for r in res.records)
    replay = run_open_loop(cfg, res)
    got = {r.id: (r.t_accept, r.t_done, r.mshr_hit, r.error) for r in replay.completed}
    want = {r.id: (r.t_accept, r.t_done, r.mshr_hit, r.error) for r in res.records}
    assert got == want


def test_open_loop_rejects_two_admissions_of_a_partition_in_a_tick():
    cfg = small_cfg()
    res = run_closed_loop(cfg, conservation(cfg, requests=4), record=True)
    recs = list(res.records)
    recs[1] = recs[1]._replace(t_accept=recs[0].t_accept, source=recs[0].source)
    with pytest.raises(ValueError, match="already admits"):
        open_loop_requests(recs)
    with pytest.raises(ValueError, match="record=True"):
        open_loop_requests(run_closed_loop(cfg, conservation(cfg, requests=4)))
    # with ports (the channel shape) the check is per port, not per partition
    assert len(open_loop_requests(recs, port_of=lambda r: r.id)) == len(recs)
    with pytest.raises(ValueError, match="port 0 already accepts"):
        open_loop_requests(recs, port_of=lambda r: 0)


@pytest.mark.parametrize("page_buffers", [2, 0])
def test_merging_finishes_closed_loop_sooner_under_admission_pressure(page_buffers):
    """Source §5.2 in small: 16 pages x 32 entries, 32 admission slots, merging on vs off.

    With page buffers an unmerged re-read costs only the buffer hit, so merging gains
    little; without them the closed loop shows the large benefit that replaying the
    merging-off ingress ticks into the merging-on controller misses.
    """
    spans, recs = {}, {}
    for merge in (False, True):
        cfg = v1_config(**mshr_grid().config, admission=32, mshr_merge=merge,
                          page_buffers=page_buffers)
        res = run_closed_loop(cfg, mshr_grid(cfg, warps=16, bound=4), record=True)
        spans[merge], recs[merge] = res.span_ticks, res
        assert res.requests == 512
    assert spans[True] < spans[False]
    if page_buffers == 0:
        cfg_on = v1_config(**mshr_grid().config, admission=32, page_buffers=0)
        replay = collect_stats(run_open_loop(cfg_on, recs[False]))["window_ticks"]
        closed_gain = 1 - spans[True] / spans[False]
        replay_gain = 1 - replay / spans[False]
        assert closed_gain > 0.5 and replay_gain < 0.2


def test_media_saturation_reaches_the_array_ceiling():
    """Enough producers keep every subarray busy: subarrays x 4096 B / tR within 1%."""
    cfg = v1_config(channels=2, subarrays_per_channel=32, active_per_channel=32,
                      admission=4096, mshr_entries=4096)
    prog = media_saturation(cfg, producers=1024)
    res = run_closed_loop(cfg, prog, gpu=prog.gpu)
    s = collect_stats(res.system)
    ceiling = 64 * PAGE_BYTES / (cfg.t_read_ticks / 850e6) / 1e9
    assert prog.expected["ceiling_gbs"] == pytest.approx(ceiling)
    assert s["page_reads"] == 1024
    assert s["array_bandwidth_gbs"] == pytest.approx(ceiling, rel=0.01)
    assert s["array_bandwidth_gbs"] <= ceiling


# --------------------------------------------------------------------------- the driver
# run_stepped (model/gpu_port.py) drives a GpuPort against an HbfSystem one tick at a time, with
# no horizon and no lookahead: the reference ClosedLoop's chunked driver must equal. The
# co-simulation drives the same GpuPort against the RTL.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), ret=st.sampled_from([0, 1, 6]),
       launch=st.sampled_from([0, 20]), adm=st.sampled_from([4, 64]),
       bounds=st.sampled_from([(1,), (1, 2, 3), (4, 1)]),
       compute=st.sampled_from([(0,), (0, 3, 40), (11,)]),
       backpressure=st.sampled_from([0, 3]))
def test_chunked_driver_equals_tick_by_tick_driver(seed, ret, launch, adm, bounds, compute,
                                                   backpressure):
    cfg = small_cfg(admission=adm)
    gpu = GpuConfig(return_cycles=ret, launch_cycles=launch, partitions=3)
    stepped_equals_closed_loop(cfg, gpu, seed, bounds, compute, backpressure)


def stepped_equals_closed_loop(cfg, gpu, seed, bounds, compute, backpressure):
    """Run one random program through ``run_closed_loop`` and ``run_stepped`` and compare
    records and kernels; ``backpressure`` > 0 drops ``resp.ready`` in a fixed pattern (one
    tick in ``backpressure``). Returns both results."""
    ready = None if not backpressure else (lambda t: (t * 2654435761 >> 5) % backpressure != 0)

    def program():
        return mixed_program(cfg, seed=seed, bounds=bounds, compute=compute, per=4)

    fast = run_closed_loop(cfg, program(), gpu=gpu, record=True, resp_ready=ready)
    ref = run_stepped(cfg, program(), gpu=gpu, record=True, resp_ready=ready)
    assert fast.records == ref.records
    assert fast.kernels == ref.kernels
    return fast, ref


# --------------------------------------------------------------------------- errors
def test_program_errors_name_the_field():
    cfg = small_cfg()
    with pytest.raises(GpuError, match="bound"):
        Producer([], bound=0)
    with pytest.raises(GpuError, match="start"):
        Producer([], start=-1)
    with pytest.raises(GpuError, match="partition_bytes"):
        GpuConfig(partition_bytes=100)
    with pytest.raises(GpuError, match="op must be R or W"):
        run_closed_loop(cfg, GpuProgram([Kernel("k", [Producer([("X", cfg.base_address,
                                                                  32)])])]))
    p = Producer([("R", cfg.base_address, 32)])
    with pytest.raises(GpuError, match="only once"):
        run_closed_loop(cfg, GpuProgram([Kernel("a", [p]), Kernel("b", [p])]))


@pytest.mark.parametrize("driver", [run_closed_loop, run_stepped])
def test_empty_kernels_and_programs(driver):
    cfg = small_cfg()
    res = driver(cfg, GpuProgram([]))
    assert res.requests == 0 and res.kernels == []
    B = cfg.base_address
    res = driver(cfg, GpuProgram([Kernel("empty", []),
                                  Kernel("one", [Producer([("R", B, 32)])]),
                                  Kernel("idle", [Producer([])])]), record=True)
    assert [k["requests"] for k in res.kernels] == [0, 1, 0]
    assert res.kernels[1]["launch"] == res.kernels[0]["end"] + 1
    assert res.system.n_done == 1


@pytest.mark.parametrize("compute", [0, 9])
def test_direct_chunks_close_input_after_the_last_grant(compute):
    """The last access is created from a response (a direct chunk): the drain of the
    incomplete page must start exactly as with the tick-by-tick driver (G6, W2)."""
    cfg = small_cfg(write_deadline_ticks=5000)
    B = cfg.base_address

    def program():
        acc = [("R", B + i * PAGE_BYTES, 32) for i in range(6)]
        acc += [("W", B + 300 * PAGE_BYTES + 32 * j, 32) for j in range(3)]   # incomplete
        return GpuProgram(lambda: [Kernel("k", [Producer(acc, compute=compute),
                                                Producer(acc[:2], compute=compute)])])

    fast = run_closed_loop(cfg, program(), record=True)
    ref = run_stepped(cfg, program(), record=True)
    assert fast.records == ref.records
    assert fast.system.stats["flush_drain"] == ref.system.stats["flush_drain"] == 1
    assert sum(r.error for r in fast.records) == 3          # strict: incomplete page


@pytest.mark.parametrize("name", ["mshr_grid", "rw_isolation", "media_saturation"])
def test_direct_chunks_equal_tick_by_tick_on_study_workloads(name):
    if name == "mshr_grid":
        cfg = v1_config(**mshr_grid().config, mshr_entries=32, **FAST)
        make = lambda: mshr_grid(cfg, warps=16, bound=4)          # noqa: E731
    elif name == "rw_isolation":
        cfg = v1_config(**rw_isolation().config, **FAST)
        make = lambda: rw_isolation(cfg, read_delay_us=0.3, write_pages=2)   # noqa: E731
    else:
        cfg = v1_config(**media_saturation().config, channels=2, **FAST)
        make = lambda: media_saturation(cfg, producers=64, pages_per_producer=3)  # noqa: E731
    fast = run_closed_loop(cfg, make(), record=True)
    ref = run_stepped(cfg, make(), gpu=make().gpu, record=True)
    assert fast.records == ref.records and fast.kernels == ref.kernels


# --------------------------------------------------------------------------- program spec
def test_program_spec_round_trip_runs_identically():
    cfg = small_cfg()
    gpu = GpuConfig(partitions=3, return_cycles=4)
    spec = program_spec(mixed_program(cfg, seed=3), gpu)
    assert json.loads(json.dumps(spec)) == spec
    again = program_from_spec(spec)
    a = run_closed_loop(cfg, mixed_program(cfg, seed=3), gpu=gpu, record=True)
    b = run_closed_loop(cfg, again, record=True)
    c = run_closed_loop(cfg, again, record=True)      # re-runnable
    assert a.records == b.records == c.records and a.kernels == b.kernels


def test_program_spec_limit_cuts_in_program_order():
    cfg = small_cfg()
    prog = mixed_program(cfg, kernels=2, producers=3, per=4)
    full = list(prog.accesses())
    spec = program_spec(prog, limit=40)
    got = [tuple(a) for k in spec["kernels"] for p in k["producers"] for a in p["accesses"]]
    assert got == full[:40]
    assert run_closed_loop(cfg, program_from_spec(spec)).requests == 40


def test_program_spec_errors_name_the_field():
    cfg = small_cfg()
    spec = program_spec(mixed_program(cfg, kernels=1, producers=1, per=1))
    with pytest.raises(GpuError, match="gpu"):
        program_from_spec({k: v for k, v in spec.items() if k != "gpu"})
    bad = json.loads(json.dumps(spec))
    bad["kernels"][0]["producers"][0]["accesses"][0][0] = "X"
    with pytest.raises(GpuError, match="kernel 'k0' producer 0"):
        program_from_spec(bad)
    bad["kernels"][0]["producers"][0]["accesses"][0][0] = "R"
    bad["kernels"][0]["producers"][0]["bound"] = 0
    with pytest.raises(GpuError, match="bound"):
        program_from_spec(bad)


def test_gpu_port_refuses_a_skipped_tick_and_a_late_response():
    """A caller that skips a tick the port had to handle, or reports a response after a
    later tick, would get wrong timing: the port says so instead."""
    cfg = small_cfg()
    B = cfg.base_address
    prog = GpuProgram([Kernel("k", [Producer([("R", B, 32), ("R", B + 64, 32)])])])
    port = GpuPort(cfg, prog, start=5)
    assert port.next_tick() == 5
    with pytest.raises(GpuError, match="tick 7 after tick 4 with tick 5 pending"):
        port.tick(7)
    r = port.tick(5)
    assert r is not None and r.arrival == 5 and port.next_tick() is None
    assert not port.exhausted
    port.tick(9)
    with pytest.raises(GpuError, match="response of tick 8 reported after GPU tick 9"):
        port.respond(r, 8)
