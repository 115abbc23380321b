"""The RTL stack controller (the one timing contract, docs/timing-contract.md, in both
host-port shapes and every mode) against the golden model, cycle for cycle.

Both sides get the same requests and the same NAND media (:class:`hbfsim.model.media.Media`,
the media promise of §1); the testbenches (``rtl_helpers.run_rtl``, ``run_rtl_ports``)
present requests as §4.1 says (per port in arrival order, from ``max(arrival, previous
accept + 1)``), raise ``drain`` from the cycle after the last request left M, and deliver
the media's completions after the cycle's commands are issued, as the golden run does.
Every request's accept and response cycles and flags, every media command and the flush
counters must be equal.

The worked timings and the directed cases of the contract are the conformance suite's
(tests/conformance/, run on the golden model, this simulation and the co-simulation). These
tests add DP7's one-per-cycle rate across entries, the channel shape's directed cases, and,
on small random workloads with every block's checks on (``Assert`` in the simulation: the
match vectors against fresh lookups, the free lists and offer FIFOs against the entries'
states, the waiter lists, W1-W4), that every request is answered exactly once.
"""

from __future__ import annotations

import gc

import pytest
from rtl_helpers import (FAST, assert_same_run, run_model, run_rtl, run_rtl_ports, simulate,
                         small_config, workload)

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.controller import Controller, check_supported


def stack_config(**overrides):
    """:func:`small_config` with short media times, stack shape."""
    return small_config(**(FAST | overrides))


def channel_config(**overrides):
    """:func:`stack_config` in the channel shape (``host_ports = "channel"``, one request and
    one response port per channel), with the pools shared by the ports (``pools =
    "stack"``, §4.2.3: the directed cases below are about that sharing) unless ``overrides``
    sets ``pools`` (the ``pools-*`` cases: a pool per channel, the shape's default, §4.5)."""
    return mode_config("channel", **({"pools": "stack"} | overrides))


def mode_config(shape, **overrides):
    """:func:`stack_config` in ``shape`` (``"stack"`` or ``"channel"``) with ``overrides``."""
    return small_config(**(FAST | dict(host_ports=shape) | overrides))


RUN = {"stack": run_rtl, "channel": run_rtl_ports}


@pytest.mark.parametrize("shape", sorted(RUN))
def test_aggregation_isolated_read(shape):
    """§10, DP2a: an isolated read under aggregation with the window w = 6 answers at
    ta + 13 + max(w, 2) + tR (ready ta + 2 + w, a candidate the next cycle, OR_c takes it,
    enqueue ta + 4 + w, command ta + 6 + w); one whose bytes reach the threshold is ready
    2 cycles after its dispatch: ta + 15 + tR."""
    cfg = mode_config(shape, read_mode="aggregation")
    w, tr = cfg.read_agg_window_ticks, cfg.t_read_ticks
    rtl, cmds = RUN[shape](cfg, [("R", 5, 0, 64, 3)], sector_bytes=32)
    assert rtl[0] == (3, 3 + 13 + max(w, 2) + tr, 0, 0, 0)
    assert [c[0] for c in cmds] == [3 + 6 + w]
    rtl, cmds = RUN[shape](cfg, [("R", 5, 0, cfg.read_agg_threshold_bytes, 3)],
                           sector_bytes=32)
    assert rtl[0] == (3, 3 + 15 + tr, 0, 0, 0)


@pytest.mark.parametrize("shape", sorted(RUN))
def test_merging_off_allocates_per_read(shape):
    """``mshr_merge = false`` (§4.2 read step 3): three reads of one page allocate three
    entries, three READs, no MSHR hit; the first answers at ta + 13 + tR."""
    cfg = mode_config(shape, mshr_merge=False)
    reqs = [("R", 4, 0, 32, 3), ("R", 4, 32, 32, 3), ("R", 4, 64, 32, 3)]
    rtl, cmds = RUN[shape](cfg, reqs, sector_bytes=32)
    assert len(cmds) == 3 and len({c[5] for c in cmds}) == 3
    assert rtl[0][1] == 3 + 13 + cfg.t_read_ticks
    assert [rtl[i][2] for i in range(3)] == [0, 0, 0]


@pytest.mark.parametrize("shape", sorted(RUN))
def test_multiplane_worked_timings(shape):
    """§7a's table under the registered pipeline, two page READs of one megapage (pages 0
    and 2: channel 0, row 0, planes 0 and 1 of megaplane 0; M = 2), E = the first's
    enqueue (ta + 4), a later read keeping ``drain`` low: ``off`` commands at E + 2 and
    E + 3, ``page`` at E + 2 and E + 2 + tR + 1 (one plane each), ``megaplane`` one command
    with both planes at E + M + 1, both entries RETURN at tc + 2 and answer tc + 7, tc + 8
    (MP7, DP6)."""
    tr, ta = mode_config(shape).t_read_ticks, 3
    E = ta + 4
    reqs = [("R", 0, 0, 64, ta), ("R", 2, 0, 64, ta), ("R", 9, 0, 32, 200)]
    want = {"off": [(E + 2, 1), (E + 3, 2)], "page": [(E + 2, 1), (E + 3 + tr, 2)],
            "megaplane": [(E + 3, 3)]}
    for mode, cmds_want in want.items():
        cfg = mode_config(shape, multiplane=mode, megaplane_planes=2)
        rtl, cmds = run_rtl_ports(cfg, reqs, sector_bytes=32)
        first = [c for c in cmds if c[0] < 200]
        if mode == "off":   # (t, channel, subarray, op, page, tag): planes as a mask
            assert [(c[0], 1 << c[2]) for c in first] == cmds_want
        else:               # (t, channel, op, megaplane, planes, row)
            assert [(c[0], c[4]) for c in first] == cmds_want
            assert {(c[3], c[5]) for c in first} == {(0, 0)}
        if mode == "megaplane":
            tc = E + 3 + tr
            assert [rtl[0][1], rtl[1][1]] == [tc + 7, tc + 8]


MODES = {"aggregation": dict(read_mode="aggregation"),
         "merge-off": dict(mshr_merge=False),
         "aggregation-merge-off-tiny": dict(read_mode="aggregation", mshr_merge=False,
                                            mshr_entries=2, write_buffer_entries=2,
                                            admission=4, queue_depth=2,
                                            active_per_channel=1),
         "megaplane": dict(multiplane="megaplane", megaplane_planes=2),
         "page-tiny": dict(multiplane="page", megaplane_planes=2, mshr_entries=2,
                           write_buffer_entries=2, admission=4, queue_depth=2,
                           active_per_channel=1)}


@pytest.mark.parametrize("shape", sorted(RUN))
@pytest.mark.parametrize("mode", sorted(MODES))
def test_modes_match_golden_model(shape, mode):
    """Aggregation reads (DP2a: ``ready_q``, ``OR_c``), merging off and multi-plane commands
    (§7a), in both shapes, against the golden model with every block's checks
    on: every request's cycles and flags, every command (MP2's fields with multi-plane
    commands) and the flush counters equal."""
    cfg = mode_config(shape, **MODES[mode])
    reqs = workload(3, 50, pages=8, reads=0.7)
    want, got = {}, {}
    model, model_cmds = run_model(cfg, reqs, probe=want)
    rtl, rtl_cmds = run_rtl_ports(cfg, reqs, probe=got, checks=True, sector_bytes=32)
    assert rtl_cmds
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert got["flushes"] == want["flushes"]


def test_consecutive_entries_respond_one_per_cycle():
    """DP7: C2 holds the next entry while the cursor drains the current one, so two entries
    completed together answer back to back (two pages on two channels, two reads each)."""
    cfg = stack_config(t_read_us=0.05)
    reqs = [("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0), ("R", 0, 32, 32, 0), ("R", 1, 32, 32, 0)]
    rtl, cmds = run_rtl(cfg, reqs)
    done = sorted(v[1] for v in rtl.values())
    assert len(cmds) == 2 and {c[1] for c in cmds} == {0, 1}
    assert done == list(range(done[0], done[0] + 4))


CASES = {
    "mixed": (dict(), dict(pages=8, reads=0.6)),
    "reads": (dict(), dict(pages=12)),
    "writes-strict": (dict(), dict(pages=6, reads=0.0)),
    "writes-partial": (dict(write_timeout_policy="partial"), dict(pages=6, reads=0.0)),
    "mixed-read-priority": (dict(scheduler="read-priority"), dict(pages=8, reads=0.6)),
    "mixed-write-drain": (dict(scheduler="write-drain", active_per_channel=2),
                          dict(pages=10, reads=0.5)),
    "link-limited": (dict(channel_bw_gbps=60.0), dict(pages=10, reads=0.8)),
    "tiny-tables": (dict(mshr_entries=2, write_buffer_entries=2, admission=4, queue_depth=2,
                         active_per_channel=1), dict(pages=6, reads=0.6)),
    "4x32": (dict(channels=4, mshr_entries=32), dict(pages=40, reads=0.7, gap=1)),
    # both tables above entry_table.REGISTERED_LOOKUP_ABOVE (registered hits, and in the
    # channel shape registered free-list heads), neither a power of two
    "wide-tables": (dict(channels=4, mshr_entries=12, write_buffer_entries=10, admission=32),
                    dict(pages=24, reads=0.5, gap=1)),
}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_request_answered_once(name, seed):
    """Random workloads with every block's checks on: each request answered exactly once
    (``run_rtl`` fails on a second response and on a request never answered)."""
    cfg_kw, load_kw = CASES[name]
    cfg = stack_config(**cfg_kw)
    reqs = workload(seed * 100 + len(name), 80, **load_kw)
    rtl, _ = run_rtl(cfg, reqs, checks=True, sector_bytes=32)
    assert sorted(rtl) == list(range(len(reqs)))
    assert all(rtl[i][0] >= reqs[i][4] and rtl[i][1] > rtl[i][0] for i in rtl)


#: The stack shape's comparisons: the cases above and the modes and schedulers they lack.
GOLDEN_CASES = CASES | {
    "reads-aggregation": (dict(read_mode="aggregation"), dict(pages=8)),
    "reads-merging-off": (dict(mshr_merge=False), dict(pages=8)),
    "mixed-partition-2r2w": (dict(scheduler="partition-2r2w", channels=4),
                             dict(pages=10, reads=0.6)),
    "active-total": (dict(channels=4, active_per_channel=4, active_total=3,
                          scheduler="read-priority"), dict(pages=16, reads=0.7)),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_controller_matches_golden_model(name):
    """The RTL against the golden model on the same random workloads, each written
    independently from docs/timing-contract.md: every request's accept and response cycle
    and flags, every media command and the flush counters equal (the co-simulation does the
    same on its scenarios, tests/cosim)."""
    cfg_kw, load_kw = GOLDEN_CASES[name]
    cfg = stack_config(**cfg_kw)
    reqs = workload(len(name), 60, **load_kw)
    want, got = {}, {}
    model, model_cmds = run_model(cfg, reqs, probe=want)
    rtl, rtl_cmds = run_rtl(cfg, reqs, probe=got)
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert got["flushes"] == want["flushes"], "flush counters (full, raw, pressure, deadline, " \
        "drain)"


def test_two_stacks():
    """A System of two stacks (each a Controller behind the route stage)."""
    cfg = stack_config(stacks=2)
    reqs = workload(7, 60, pages=16, reads=0.6)
    rtl, _ = run_rtl(cfg, reqs, checks=True, sector_bytes=32)
    assert sorted(rtl) == list(range(len(reqs)))


@pytest.mark.parametrize("key,value", [("page_cache_pages", 16), ("media_mode", "ssd"),
                                       ("stacks", 2)])
def test_unsupported_configuration_is_rejected(key, value):
    """Model-only keys are rejected; so is a several-stack configuration, which is a
    ``System`` of stack controllers (rtl/system.py), not one ``Controller``; both shapes
    are accepted."""
    with pytest.raises(ValueError, match=key):
        Controller(small_config(**{key: value}))
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind
    check_supported(stack_config())
    check_supported(channel_config())


def test_verilog_has_the_registered_pipeline():
    """The emitted design holds the registered pipeline's structures (W, the free list, the
    response choice's C1 and cursor, the registered flush decisions, the offer FIFOs, the
    registered admission count, the ingress ring)."""
    from hbfsim.rtl.emit import emit_verilog

    v = emit_verilog(stack_config(), sector_bytes=32)
    for name in ("w_onehot", "free_list_count", "c1_valid", "cursor_valid", "flush_dec0",
                 "offer_fifo0_count", "inflight_count", "ring_rd"):
        assert name in v, name


def test_serial_page_reads_pace_at_tR_plus_1():
    """§10: distinct pages on one subarray: the next command in tc+1 (§7's completion
    forwarding)."""
    cfg = stack_config(channels=1, subarrays_per_channel=1, active_per_channel=1)
    rtl, cmds = run_rtl(cfg, [("R", p, 0, 32, 0) for p in range(5)])
    times = [c[0] for c in cmds]
    assert [b - a for a, b in zip(times, times[1:])] == [cfg.t_read_ticks + 1] * 4


def test_accepts_one_request_per_cycle_for_1000_cycles():
    """Issue 3 item 6: with resources free, one accept per cycle, back to back; the model,
    given the same stream, agrees on accept cycles and on every hit / miss."""
    n = 1024
    cfg = small_config(admission=1024, mshr_entries=8, t_read_us=5.0)  # no completion in time
    dut = Controller(cfg)
    accepts = []

    async def tb(ctx):
        ctx.set(dut.resp.ready, 1)
        k = 0
        for t in range(n + 3):
            ctx.set(dut.req.valid, k < n)
            if k < n:
                ctx.set(dut.req.payload, {"id": k, "op": 0, "source": 0, "bytes": 32,
                                          "addr": (k % 8) * PAGE_BYTES + 32 * (k // 8 % 128)})
                if ctx.get(dut.req.ready):
                    accepts.append(t)
                    k += 1
            await ctx.tick()

    simulate(dut, tb)
    assert accepts == list(range(n))
    reqs = [("R", k % 8, 32 * (k // 8 % 128), 32, 0) for k in range(n)]
    model, _ = run_model(cfg, reqs)
    assert [model[k][0] for k in range(n)] == accepts
    assert sum(model[k][2] for k in range(n)) == n - 8


# ---- the channel shape (host_ports = "channel": P = C ports, docs/timing-contract.md §1, §14)


def test_channel_shape_isolated_read_and_write():
    """§10 on a port of the channel shape: an isolated read answers at ta + 13 + tR (command
    ta + 6), a full-page write at ta + 16 + tPROG (command ta + 10), each on the port of the
    channel its page maps to (page 5: channel 1 of 2)."""
    cfg = channel_config()
    rtl, cmds = run_rtl_ports(cfg, [("R", 5, 0, 64, 3)], sector_bytes=32)
    assert rtl[0] == (3, 3 + 13 + cfg.t_read_ticks, 0, 0, 0)
    assert [(c[0], c[1]) for c in cmds] == [(3 + 6, 1)]
    rtl, cmds = run_rtl_ports(cfg, [("W", 5, 0, PAGE_BYTES, 3)], sector_bytes=32)
    assert rtl[0] == (3, 3 + 16 + cfg.t_prog_ticks, 0, 0, 0)
    assert [(c[0], c[1]) for c in cmds] == [(3 + 10, 1)]


def test_channel_shape_merged_reads():
    """§10: r1, r2, r3 to one page accepted ta, ta+1, ta+2 on its port: one READ, responses
    ta+13+tR, ta+14+tR, ta+15+tR, the second and third MSHR hits; meanwhile the same
    three reads of a page of the other channel, on the other port, answer in the same
    cycles (a response port per channel, each with its own credit, DP7)."""
    cfg = channel_config()
    reqs = [("R", 4, 0, 32, 3), ("R", 4, 32, 32, 3), ("R", 4, 64, 32, 3),
            ("R", 7, 0, 32, 3), ("R", 7, 32, 32, 3), ("R", 7, 64, 32, 3)]
    rtl, cmds = run_rtl_ports(cfg, reqs, sector_bytes=32)
    tr = cfg.t_read_ticks
    for k in (0, 3):
        assert [rtl[k + i][0] for i in range(3)] == [3, 4, 5]
        assert [rtl[k + i][1] for i in range(3)] == [3 + 13 + tr + i for i in range(3)]
        assert [rtl[k + i][2] for i in range(3)] == [0, 1, 1]
    assert sorted((c[0], c[1]) for c in cmds) == [(9, 0), (9, 1)]


def test_channel_shape_free_list_heads():
    """DP4 with several heads: the k-th allocating port from the pool's pointer ``ap`` takes
    the k-th entry from the head, ``ap`` moves to the last allocating port + 1, and entries
    freed in one cycle join the tail in ascending response-port order. Four channels, five
    MSHR entries (a command's tag names its entry):

    * a lone read on port 1 takes entry 0 (the never-allocated entries come first); ap = 2;
    * four reads, one per port, in one cycle: ports 2, 3, 0, 1 take entries 1, 2, 3, 4;
      ap = 2 again; they answer in one cycle, so the list becomes 0 (freed earlier), then
      ports 0, 1, 2, 3's entries: 3, 4, 1, 2;
    * four more reads in one cycle: ports 2, 3, 0, 1 take 0, 3, 4, 1.
    """
    cfg = channel_config(channels=4, mshr_entries=5)
    late = 3 + 13 + cfg.t_read_ticks + 10
    reqs = ([("R", 1, 0, 32, 0)] + [("R", 4 + c, 0, 32, 20) for c in range(4)]
            + [("R", 8 + c, 0, 32, 20 + late) for c in range(4)])
    rtl, cmds = run_rtl_ports(cfg, reqs, checks=True, sector_bytes=32)
    entries = [(c[0], c[1], c[5] >> 1) for c in sorted(cmds)]
    first = [e for e in entries if e[0] < 20]
    wave1 = sorted((e[1], e[2]) for e in entries if 20 <= e[0] < 20 + late)
    wave2 = sorted((e[1], e[2]) for e in entries if e[0] >= 20 + late)
    assert [(ch, e) for _, ch, e in first] == [(1, 0)]
    assert wave1 == [(0, 3), (1, 4), (2, 1), (3, 2)]
    assert wave2 == [(0, 4), (1, 1), (2, 0), (3, 3)]
    # the four of a wave answer in one cycle, one on each response port
    assert len({rtl[i][1] for i in range(1, 5)}) == 1
    assert len({rtl[i][1] for i in range(5, 9)}) == 1


def test_channel_shape_pressure_victim_taken_raw():
    """DP5 in the channel shape: a read of port 0 stalls on page 0's OPEN entry (the oldest:
    allocated in the same cycle as page 1's, at a lower index) and decides it ``raw`` in the
    cycle in which a write of port 1 stalls with no free entry; the victim is chosen from
    M's view, so the one decision has cause ``raw`` and the entry is the pending pressure
    victim until FREE: no second entry is flushed for pressure (flush counters full, raw,
    pressure, deadline, drain)."""
    cfg = channel_config(write_buffer_entries=2)
    reqs = [("W", 0, 0, 32, 0), ("W", 1, 0, 32, 0), ("R", 0, 0, 32, 3), ("W", 3, 0, 32, 3)]
    got = {}
    rtl, _ = run_rtl_ports(cfg, reqs, checks=True, sector_bytes=32, probe=got)
    assert sorted(rtl) == [0, 1, 2, 3]
    assert got["flushes"][1:3] == [1, 0]
    assert rtl[0][4] == 1 and rtl[2][4] == 0   # page 0's strict error, then the read


def test_channel_shape_pressure_victim_in_allocation_order():
    """DP5's victim is the OPEN entry with the smallest ``alloc``; of two entries allocated
    in one cycle the older is the one allocated first, by the port of lower rank from the
    pool's pointer (the k-th head before the k+1-th, §4.2.3), not the lower index. Two
    write-buffer entries: a partial write on port 1 takes entry 0 (``ap`` -> 0), a full-page
    write on port 1's neighbour, port 0, takes entry 1 (``ap`` -> 1) and frees it first, so
    the list is (1, 0); writes C (port 0) and D (port 1) in one cycle: port 1 ranks first
    and takes entry 1, port 0 entry 0; write E stalls and the victim is D's entry 1: D's
    strict error answers first (the golden model agrees, co-simulation ``mix-ports``
    found the difference)."""
    cfg = channel_config(write_buffer_entries=2)
    reqs = [("W", 1, 0, 32, 0), ("W", 0, 0, PAGE_BYTES, 1), ("W", 2, 0, 32, 100),
            ("W", 3, 0, 32, 100), ("W", 4, 0, 32, 104)]
    got = {}
    rtl, _ = run_rtl_ports(cfg, reqs, probe=got, checks=True, sector_bytes=32)
    assert rtl[3][1] < rtl[2][1] and rtl[3][4] == rtl[2][4] == 1
    assert got["flushes"][2] == 1   # one pressure victim


def test_channel_shape_partition_same_page_same_cycle():
    """§4.2.4 under a partition scheduler (reads on ports 0-1, writes on ports 2-3): a read
    and a full-page write of one page dispatch in one cycle on two ports; reads go first,
    so the read allocates its MSHR entry and the write counts it among the entries it waits
    for (DP6: until tc + 2). The write's entry is FLUSH from ta + 6 but eligible only at
    tc + 2: enqueue tc + 4, PROGRAM on cmd tc + 6 (without the read: ta + 10)."""
    cfg = channel_config(channels=4, scheduler="partition-2r2w")
    rtl, cmds = run_rtl_ports(cfg, [("R", 2, 0, 32, 3), ("W", 2, 0, PAGE_BYTES, 3)],
                              checks=True, sector_bytes=32)
    (read,) = [c for c in cmds if c[3] == 0]
    (prog,) = [c for c in cmds if c[3] == 1]
    tc = read[0] + cfg.t_read_ticks
    assert read[0] == 3 + 6 and rtl[0][1] == 3 + 13 + cfg.t_read_ticks
    assert prog[0] == tc + 6 and read[1] < 2 <= prog[1]


CHANNEL_CASES = {k: v for k, v in CASES.items()
                 if k in ("mixed", "writes-partial", "tiny-tables", "4x32", "wide-tables")} | {
    "partition-2r2w": (dict(channels=4, scheduler="partition-2r2w"),
                       dict(pages=6, reads=0.5, gap=1)),
    # §4.5: a pool per channel (one entry each in pools-tiny: a victim per pool)
    "pools-mixed": (dict(pools="channel"), dict(pages=8, reads=0.6)),
    "pools-tiny": (dict(pools="channel", mshr_entries=2, write_buffer_entries=2, admission=4,
                        queue_depth=2, active_per_channel=1), dict(pages=6, reads=0.5)),
    "pools-4x32": (dict(pools="channel", channels=4, mshr_entries=32),
                   dict(pages=40, reads=0.7, gap=1)),
    "pools-partition-2r2w": (dict(pools="channel", channels=4, scheduler="partition-2r2w",
                                  mshr_entries=8), dict(pages=6, reads=0.5, gap=1)),
    # more request slots than admission.SLOT_LIST_ABOVE: the slots from a free list, the
    # mshr_hit flags in the ports' RAMs; with few pages, so that reads merge (the flag)
    "slot-list": (dict(pools="channel", channels=4, admission=40),
                  dict(pages=6, reads=0.8, gap=1)),
    "slot-list-shared": (dict(channels=2, admission=36), dict(pages=4, reads=0.8)),
    # pools of more than entry_table.REGISTERED_LOOKUP_ABOVE entries: each response port's
    # DP7 stages over its own pool only (entry_table.sliced_pools)
    "pools-sliced": (dict(pools="channel", mshr_entries=20, write_buffer_entries=18),
                     dict(pages=8, reads=0.8, gap=1)),
    # the same under a partition scheduler: a write's blocker set takes the entry a read of
    # its page on another port merged into (§4.2.4, the MSHR's hit index)
    "pools-sliced-partition": (dict(pools="channel", channels=4, scheduler="partition-2r2w",
                                    mshr_entries=40, write_buffer_entries=36),
                               dict(pages=6, reads=0.6, gap=1))}


@pytest.mark.parametrize("name", sorted(CHANNEL_CASES))
def test_channel_shape_matches_golden_model(name):
    """The channel shape against the golden model with P ports
    (written independently from docs/timing-contract.md), on the workload sets with every
    block's checks on (per port: the match vectors against fresh lookups; the free lists'
    heads, one FREE entry per allocating port; the offer FIFOs; one pressure victim per
    cycle; the waiter lists over all ports): every request's accept and response cycle and
    flags, every media command and the flush counters equal."""
    cfg_kw, load_kw = CHANNEL_CASES[name]
    cfg = channel_config(**cfg_kw)
    reqs = workload(100 + len(name), 60, **load_kw)
    want, got = {}, {}
    model, model_cmds = run_model(cfg, reqs, probe=want)
    rtl, rtl_cmds = run_rtl_ports(cfg, reqs, probe=got, checks=True, sector_bytes=32)
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert got["flushes"] == want["flushes"]
