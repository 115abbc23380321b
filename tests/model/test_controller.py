"""Functional and timing checks of the golden model (issue 2 item 10, sources.md §studies)."""

from collections import Counter

import pytest

from hbfsim.config import PAGE_BYTES
from hbfsim.model.controller import Request
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs, run_model
from tests.conftest import stack_config as v1   # one port per stack


@pytest.mark.parametrize("channels", [1, 2, 4, 8, 16])
def test_conservation(channels):
    """Every request gets exactly one completion at 1..16 channels (routing test)."""
    cfg = v1(channels=channels)
    reqs = make_reqs([("R" if i % 3 else "W", i * 7, 0, PAGE_BYTES if i % 3 == 0 else 64, i)
                      for i in range(64)], cfg)
    system = run_model(cfg, reqs)
    ids = Counter(r.id for r in system.completed)
    assert sorted(ids) == list(range(64))
    assert set(ids.values()) == {1}
    s = collect_stats(system)
    assert s["requests"] == s["completions"] == 64
    # a request never uses another channel's resources (A3)
    for r in system.completed:
        assert r.ch == ((r.addr - cfg.base_address) // PAGE_BYTES) % channels


def test_shared_staging_one_read_31_hits():
    cfg = v1()
    reqs = make_reqs([("R", 5, 128 * i, 128, i) for i in range(32)], cfg)
    s = collect_stats(run_model(cfg, reqs))
    assert s["page_reads"] == 1
    assert s["mshr_hits"] == 31
    assert s["completions"] == 32


def test_merging_off_reads_every_request():
    cfg = v1(mshr_merge=False, page_buffers=0)
    reqs = make_reqs([("R", 5, 128 * i, 128, i) for i in range(32)], cfg)
    s = collect_stats(run_model(cfg, reqs))
    assert s["page_reads"] == 32 and s["mshr_hits"] == 0 and s["completions"] == 32
    assert v1(hbf_mshr_enabled=0).mshr_merge is False


def test_isolated_read_latency_matches_contract():
    """Contract §10: accept-to-response is tR + 13 ticks for an unbuffered read."""
    cfg = v1()
    (r,) = run_model(cfg, make_reqs([("R", 0, 0, 32, 100)], cfg)).completed
    assert r.t_accept == 100
    assert r.t_done - r.t_accept == cfg.t_read_ticks + 13


def test_merged_responses_in_arrival_order_one_per_cycle():
    cfg = v1()
    system = run_model(cfg, make_reqs([("R", 3, 32 * i, 32, 0) for i in range(8)], cfg))
    done = [(r.id, r.t_done) for r in system.completed]
    assert [d[0] for d in done] == list(range(8))
    assert [d[1] - done[0][1] for d in done] == list(range(8))


def _burst_window(tr_us, channels, gap_ticks=0):
    cfg = v1(channels=channels, subarrays_per_channel=1, active_per_channel=1,
                      t_read_us=tr_us, page_buffers=2, capacity_bytes=4 * 256 * PAGE_BYTES * 16)
    spec = []
    for page in range(64):
        for k in range(32):  # 32 merged 128 B requests per page (§5.3)
            spec.append(("R", page, 128 * k, 128, page * gap_ticks))
    s = collect_stats(run_model(cfg, make_reqs(spec, cfg)))
    assert s["page_reads"] == 64
    return s["window_ticks"], cfg


@pytest.mark.parametrize("channels", [1, 4])
def test_burst_page_service_grows_by_64_dtR_over_C(channels):
    w1, cfg1 = _burst_window(1.0, channels)
    w15, cfg15 = _burst_window(15.0, channels)
    dtr = cfg15.t_read_ticks - cfg1.t_read_ticks
    assert w15 - w1 == 64 * dtr // channels


def test_isolated_page_service_span():
    gap = 50 * 850  # 50 us apart
    w, cfg = _burst_window(15.0, 1, gap)
    assert 63 * gap + cfg.t_read_ticks < w < 63 * gap + cfg.t_read_ticks + 64


def _closed_loop_reads(cfg, producers, pages_each):
    """N producers, one outstanding read each, every read to a fresh page."""
    system = HbfSystem(cfg, keep=False)
    nxt = [0]
    total = producers * pages_each

    def issue(tick):
        i = nxt[0]
        if i < total:
            nxt[0] += 1
            system.submit(Request(i, "R", cfg.base_address + i * PAGE_BYTES, 32, 0, tick))
            if nxt[0] == total:
                system.close_input()

    system.user_cb = lambda req, t: issue(t + 1)
    for _ in range(producers):
        issue(0)
    system.run()
    return collect_stats(system)


def test_saturation_bandwidth_matches_ceiling():
    cfg = v1(channels=4, subarrays_per_channel=8, active_per_channel=8,
                      admission=512, mshr_entries=256, page_buffers=0,
                      capacity_bytes=4 * 8 * 256 * PAGE_BYTES * 4)
    subarrays = 32
    ceiling = subarrays * PAGE_BYTES / (cfg.t_read_us * 1e-6) / 1e9
    s = _closed_loop_reads(cfg, producers=64, pages_each=40)
    assert s["array_bandwidth_gbs"] == pytest.approx(ceiling, rel=0.005)
    assert s["media_utilization"] > 0.99
    half = _closed_loop_reads(cfg, producers=16, pages_each=40)
    assert half["array_bandwidth_gbs"] == pytest.approx(ceiling / 2, rel=0.01)


def test_active_cap_limits_parallelism():
    cfg = v1(channels=1, subarrays_per_channel=8, active_per_channel=2,
                      page_buffers=0, capacity_bytes=8 * 256 * PAGE_BYTES * 4)
    system = run_model(cfg, make_reqs([("R", p, 0, 32, 0) for p in range(8)], cfg))
    done = sorted(r.t_done for r in system.completed)
    # two at a time: four waves of tR (+1 tick turnaround each)
    assert done[-1] - done[0] >= 3 * cfg.t_read_ticks


def test_admission_cap_backpressure():
    cfg = v1(admission=4)
    system = run_model(cfg, make_reqs([("R", p, 0, 32, 0) for p in range(8)], cfg))
    acc = sorted(r.t_accept for r in system.completed)
    first_done = min(r.t_done for r in system.completed)
    assert acc[:4] == [0, 1, 2, 3]
    assert acc[4] == first_done + 1  # the slot is usable from the cycle after the response


def test_read_returns_written_bytes_and_unwritten_reads_zero():
    cfg = v1()
    payload = bytes(range(256)) * 16
    reqs = make_reqs([("W", 9, 0, PAGE_BYTES, 0, payload),
                      ("R", 9, 100, 200, 200000), ("R", 10, 0, 8, 200000)], cfg)
    system = run_model(cfg, reqs)
    byid = {r.id: r for r in system.completed}
    assert byid[1].data == payload[100:300]
    assert byid[2].data is None  # never written: documented zero pattern


def test_read_after_write_flushes_open_entry_and_sees_data():
    cfg = v1(write_deadline_ticks=100000)
    spec = [("W", 2, 128 * k, 128, k, bytes([k + 1]) * 128) for k in range(32)]
    spec.append(("R", 2, 0, 256, 40))
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    byid = {r.id: r for r in system.completed}
    assert byid[32].data == bytes([1]) * 128 + bytes([2]) * 128
    assert byid[32].t_done > max(byid[k].t_done for k in range(32)) - 40
    assert s["page_programs"] == 1


def test_raw_on_incomplete_page_strict_flushes_with_error():
    cfg = v1(write_deadline_ticks=100000)
    spec = [("W", 2, 0, 128, 0), ("R", 2, 0, 64, 10)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert s["read_after_write_events"] == 1
    assert s["flushes"]["raw"] == 1
    assert s["strict_errors"] == 1 and s["page_programs"] == 0
    byid = {r.id: r for r in system.completed}
    assert byid[0].error and not byid[1].error
    assert byid[1].data is None  # the rejected write never reached NAND


def test_write_ack_only_after_program():
    cfg = v1()
    system = run_model(cfg, make_reqs([("W", 1, 0, PAGE_BYTES, 0)], cfg))
    (w,) = system.completed
    tq, ti, tc, _ = w.entry_info
    assert tc - ti == cfg.t_prog_ticks
    assert w.t_done == tc + 6      # DP7: a write's response 6 cycles after its completion


def test_coverage_union_repeated_fragments_and_page_edges():
    cfg = v1(write_deadline_ticks=5000)
    spec = [("W", 4, 0, 100, 0), ("W", 4, 50, 100, 1), ("W", 4, 0, 150, 2),  # 150 covered
            ("W", 4, 4095, 1, 3),                                            # last byte
            ("W", 4, 150, 3945, 4)]                                          # the rest
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert system.stats["coverage_new_bytes"] == PAGE_BYTES
    # one flush of the complete page, no error: the input closes with the last fragment, so
    # drain (the cycle after it left M) comes a cycle before DP5's registered full decision
    assert sum(s["flushes"].values()) == 1 and s["flushes"]["full"] + s["flushes"]["drain"] == 1
    assert s["page_programs"] == 1 and s["strict_errors"] == 0
    # repeated fragments alone never complete a page
    spec = [("W", 6, 0, 2048, 0), ("W", 6, 0, 2048, 1), ("W", 6, 1, 2047, 2)]
    s2 = collect_stats(run_model(cfg, make_reqs(spec, cfg)))
    assert s2["page_programs"] == 0 and s2["strict_errors"] == 1
    assert s2["flushes"]["drain"] == 1  # the idle tail drain comes before the deadline


def test_request_crossing_a_page_is_rejected():
    cfg = v1()
    system = HbfSystem(cfg)
    with pytest.raises(ValueError, match="crosses a 4 KiB page"):
        system.submit(Request(0, "R", cfg.base_address + 4090, 32))
    with pytest.raises(ValueError, match="outside the HBF range"):
        system.submit(Request(0, "R", 0, 32))


@pytest.mark.parametrize("policy", ["strict", "partial"])
def test_strict_vs_partial_timeout(policy):
    cfg = v1(write_timeout_policy=policy, write_deadline_ticks=500)
    spec = [("W", 7, 0, 1024, 0, b"\xab" * 1024), ("R", 7, 0, 2048, 300000)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    w, r = sorted(system.completed, key=lambda x: x.id)
    assert s["flushes"]["deadline"] == 1
    if policy == "strict":
        assert w.error and s["strict_errors"] == 1
        assert s["page_programs"] == 0 and s["partial_programs"] == 0
        assert r.data is None
    else:
        assert not w.error and s["partial_programs"] == 1
        assert s["padding_bytes"] == PAGE_BYTES - 1024 and s["page_programs"] == 1
        assert r.data == b"\xab" * 1024 + bytes(1024)


def test_pressure_flush_when_write_buffer_full():
    cfg = v1(write_buffer_entries=2, write_deadline_ticks=10**6,
                      write_timeout_policy="partial")
    spec = [("W", p, 0, 64, p) for p in range(3)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert s["flushes"]["pressure"] == 1
    assert s["completions"] == 3 and s["page_programs"] == 3


def test_writes_to_flushing_page_stay_buffered():
    """W4: a later write to a page being programmed opens a new entry; flushes serialize."""
    cfg = v1()
    spec = [("W", 3, 0, PAGE_BYTES, 0, b"\x01" * PAGE_BYTES),
            ("W", 3, 0, PAGE_BYTES, 10, b"\x02" * PAGE_BYTES),
            ("R", 3, 0, 16, 1000)]
    system = run_model(cfg, make_reqs(spec, cfg))
    byid = {r.id: r for r in system.completed}
    i0, i1 = byid[0].entry_info, byid[1].entry_info
    assert i1[1] > i0[2]  # second PROGRAM issues after the first completed
    assert byid[2].data == b"\x02" * 16
    assert collect_stats(system)["page_programs"] == 2


def test_aggregation_waits_for_window_or_threshold():
    cfg = v1(read_mode="aggregation", read_agg_window_ticks=500,
                      read_agg_threshold_bytes=4096)
    sys_w = run_model(cfg, make_reqs([("R", 1, 0, 32, 0)], cfg))
    (r,) = sys_w.completed
    assert r.entry_info[0] == r.t_map + 500 + 2  # DP2a: ready at the window, enqueued +2
    spec = [("R", 2, 128 * k, 128, 0) for k in range(32)]
    sys_t = run_model(cfg, make_reqs(spec, cfg))
    first = min(sys_t.completed, key=lambda x: x.id)
    last_merge = max(x.t_map for x in sys_t.completed)
    assert first.entry_info[0] == last_merge + 4  # DP2a: ready 2 after the threshold, +2
    assert collect_stats(sys_t)["page_reads"] == 1


def test_page_buffer_hit_on_reread():
    cfg = v1()
    spec = [("R", 0, 0, 32, 0), ("R", 0, 0, 32, 20000)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert s["page_reads"] == 1 and s["page_buffer_hits"] == 1
    second = max(system.completed, key=lambda x: x.id)
    assert second.buffer_hit
    assert second.t_done - second.t_accept == cfg.buffer_hit_ticks + 13   # §10, tR -> hit


def test_page_cache_hit():
    cfg = v1(page_cache_pages=4, page_buffers=0)
    spec = [("R", 0, 0, 32, 0), ("R", 0, 0, 32, 20000)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert s["page_cache_hits"] == 1 and s["page_reads"] == 1
    second = max(system.completed, key=lambda x: x.id)
    # served in tm (§4, MediaOp), answered 7 cycles after its completion (DP7)
    assert second.cache_hit and second.t_done - second.t_map == cfg.cache_hit_ticks + 7


def _sched_case(scheduler, channels=1):
    """One subarray per channel: a PROGRAM (queued first) and a READ wait for the subarray
    held by an earlier read; the policy decides which goes next."""
    cfg = v1(channels=channels, subarrays_per_channel=1, active_per_channel=1,
                      scheduler=scheduler, write_drain_high_water=1,
                      capacity_bytes=channels * 256 * PAGE_BYTES * 8)
    spec = [("R", 0, 0, 32, 0),                 # occupies the subarray
            ("W", 1 * channels, 0, PAGE_BYTES, 1),
            ("R", 2 * channels, 0, 32, 60)]     # arrives after the write was queued
    system = run_model(cfg, make_reqs(spec, cfg))
    return {r.id: r for r in system.completed}


def test_scheduler_fcfs_issues_older_program_first():
    by = _sched_case("fcfs")
    assert by[1].entry_info[1] < by[2].entry_info[1]


def test_scheduler_read_priority_issues_read_first():
    by = _sched_case("read-priority")
    assert by[2].entry_info[1] < by[1].entry_info[1]


def test_scheduler_write_drain_issues_program_first_in_window():
    by = _sched_case("write-drain")
    assert by[1].entry_info[1] < by[2].entry_info[1]


@pytest.mark.parametrize("policy,reads", [("partition-1r3w", 1), ("partition-2r2w", 2),
                                          ("partition-3r1w", 3)])
def test_scheduler_partitions_split_channels(policy, reads):
    cfg = v1(channels=4, scheduler=policy)
    spec = [("R", p, 0, 32, p) for p in range(16)] + \
           [("W", 100 + p, 0, PAGE_BYTES, 20 + p) for p in range(8)]
    system = run_model(cfg, make_reqs(spec, cfg))
    rch = {r.ch for r in system.completed if r.op == "R"}
    wch = {r.ch for r in system.completed if r.op == "W"}
    assert rch == set(range(reads))
    assert wch == set(range(reads, 4))


def test_traces_are_deterministic(tmp_path):
    from hbfsim.model.requests import default_workload
    from hbfsim.model.trace import TraceWriter

    cfg = v1()
    outs = []
    for k in range(2):
        tw = TraceWriter(tmp_path / f"t{k}.csv", 2)
        HbfSystem(cfg, trace=tw).run_requests(default_workload(cfg))
        tw.close()
        outs.append((tmp_path / f"t{k}.csv").read_bytes())
    assert outs[0] == outs[1] and len(outs[0]) > 1000


def test_multi_stack_routing_and_fair_return():
    cfg = v1(stacks=2, channels=2)
    spec = [("R", p, 0, 32, 0) for p in range(8)]
    system = run_model(cfg, make_reqs(spec, cfg))
    assert {r.stack for r in system.completed} == {0, 1}
    assert sorted(r.id for r in system.completed) == list(range(8))
    assert len({r.t_done for r in system.completed}) == 8  # one response per cycle


def test_untouched_capacity_allocates_nothing():
    cfg = v1(stacks=4, capacity_bytes=512 << 30)
    top = (512 << 30) // PAGE_BYTES - 1
    spec = [("R", 0, 0, 32, 0), ("W", top, 0, PAGE_BYTES, 1), ("R", top // 2, 4064, 32, 2)]
    system = run_model(cfg, make_reqs(spec, cfg))
    assert len(system.completed) == 3
    touched = {(r.stack, r.ch, r.sub) for r in system.completed}
    assert sum(len(s.media._subs) for s in system.stacks) == len(touched)


def test_idle_time_costs_nothing():
    """Requests a simulated second apart cost no more loop steps than back to back (C3)."""
    cfg = v1()
    near = run_model(cfg, make_reqs([("R", 0, 0, 32, 0), ("R", 1, 0, 32, 10)], cfg))
    far = run_model(cfg, make_reqs([("R", 0, 0, 32, 0), ("R", 1, 0, 32, 850_000_000)], cfg))
    assert max(r.t_done for r in far.completed) > 850_000_000
    assert far.steps <= near.steps + 2
    assert far.steps < 40


def test_aggregation_wait_and_first_request_latency():
    cfg = v1(read_mode="aggregation", read_agg_window_ticks=300)
    s = collect_stats(run_model(cfg, make_reqs([("R", 1, 0, 32, 0), ("R", 1, 32, 32, 1)],
                                               cfg)))
    # DP2a: ready at allocation + 300, so 300 ticks beyond the demand read's tR + 13
    assert s["aggregation_wait_ticks"] == 300
    assert s["first_request_latency_ticks"]["count"] == 1
    assert s["first_request_latency_ticks"]["p50"] == 300 + cfg.t_read_ticks + 13


def test_response_backpressure_holds_responses():
    cfg = v1()
    reqs = make_reqs([("R", 3, 32 * i, 32, 0) for i in range(8)], cfg)
    system = HbfSystem(cfg)
    system.resp_ready = lambda t: t % 3 == 0
    system.run_requests(reqs)
    done = sorted(r.t_done for r in system.completed)
    assert len(done) == 8 and all(t % 3 == 0 for t in done)
    assert done == [done[0] + 3 * k for k in range(8)]


def test_stack_wide_active_cap_lower_channels_first():
    cfg = v1(channels=4, subarrays_per_channel=4, active_total=2, page_buffers=0)
    system = run_model(cfg, make_reqs([("R", p, 0, 32, 0) for p in range(8)], cfg))
    issues = sorted((r.entry_info[1], r.ch) for r in system.completed)
    # at most two in flight at any time
    spans = [(r.entry_info[1], r.entry_info[2]) for r in system.completed]
    for t0, _ in spans:
        assert sum(1 for a, b in spans if a <= t0 <= b) <= 2
    assert issues[0][1] == 0 and issues[1][1] == 1
