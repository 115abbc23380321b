"""The RTL under the one timing contract's registered pipeline (``pipeline = "deep"``,
docs/timing-contract.md DP1-DP7), stack shape.

The worked timings and the directed cases of the contract are the conformance suite's
(tests/conformance/, run on the golden model, this simulation and the co-simulation). These
tests check DP7's one-per-cycle rate across entries and, on small random workloads with every
block's checks on (``Assert`` in the simulation: the match vectors against fresh lookups, the
free lists and offer FIFOs against the entries' states, the waiter lists, W1-W4), that every
request is answered exactly once and the RTL equals the golden model request for request.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest
from rtl_helpers import (FAST, assert_same_run, run_model, run_rtl, run_rtl_ports, small_config,
                         workload)

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.controller import Controller, check_supported


def deep_config(**overrides):
    """:func:`small_config` under contract 2, stack shape, ``pipeline = "deep"``."""
    return small_config(**(FAST | dict(contract=2, pipeline="deep") | overrides))


def channel_config(**overrides):
    """:func:`deep_config` in the channel shape (``host_ports = "channel"``, one request and
    one response port per channel)."""
    return mode_config("channel", **overrides)


def mode_config(shape, **overrides):
    """:func:`deep_config` in ``shape`` (``"stack"`` or ``"channel"``) with ``overrides``."""
    return small_config(**(FAST | dict(contract=2, host_ports=shape, pipeline="deep")
                           | overrides))


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
    (§7a) under deep, in both shapes, against the golden model with every block's checks
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
    cfg = deep_config(t_read_us=0.05)
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
}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_request_answered_once(name, seed):
    """Random workloads with every block's checks on: each request answered exactly once
    (``run_rtl`` fails on a second response and on a request never answered)."""
    cfg_kw, load_kw = CASES[name]
    cfg = deep_config(**cfg_kw)
    reqs = workload(seed * 100 + len(name), 80, **load_kw)
    rtl, _ = run_rtl(cfg, reqs, checks=True, sector_bytes=32)
    assert sorted(rtl) == list(range(len(reqs)))
    assert all(rtl[i][0] >= reqs[i][4] and rtl[i][1] > rtl[i][0] for i in rtl)


@pytest.mark.parametrize("name", sorted(CASES))
def test_controller_matches_golden_model(name):
    """The deep RTL against the golden model's ``DeepStackController`` on the same random
    workloads, written independently from docs/timing-contract.md: every request's
    accept and response cycle and flags, every media command and the flush counters equal
    (the co-simulation does the same on its scenarios, tests/cosim ``<name>-deep``)."""
    cfg_kw, load_kw = CASES[name]
    cfg = deep_config(**cfg_kw)
    reqs = workload(len(name), 60, **load_kw)
    want, got = {}, {}
    model, model_cmds = run_model(cfg, reqs, probe=want)
    rtl, rtl_cmds = run_rtl(cfg, reqs, probe=got)
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert got["flushes"] == want["flushes"], "flush counters (full, raw, pressure, deadline, " \
        "drain)"


def test_two_stacks():
    """A System of deep stacks (each stack a deep Controller behind the route stage)."""
    cfg = deep_config(stacks=2)
    reqs = workload(7, 60, pages=16, reads=0.6)
    rtl, _ = run_rtl(cfg, reqs, checks=True, sector_bytes=32)
    assert sorted(rtl) == list(range(len(reqs)))


def test_deep_refuses_contract_1():
    """The RTL refuses, naming the key, the registered pipeline under contract 1 (for a
    configuration that was not validated), and accepts it in both shapes."""
    forged = dataclasses.replace(small_config(contract=1))
    object.__setattr__(forged, "pipeline", "deep")
    with pytest.raises(ValueError, match="pipeline = 'deep' with contract = 1"):
        check_supported(forged)
    with pytest.raises(ValueError, match="contract"):
        Controller(forged)
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind
    check_supported(deep_config())   # the stack shape is accepted
    check_supported(channel_config())   # and the channel shape


def test_deep_changes_only_the_deep_verilog():
    """``pipeline = "standard"`` is the default: naming it emits the same Verilog, and deep
    emits another design (its W, free list and C1 registers)."""
    from hbfsim.rtl.emit import emit_verilog

    base = small_config(contract=2)
    assert emit_verilog(small_config(contract=2, pipeline="standard"), sector_bytes=32) \
        == emit_verilog(base, sector_bytes=32)
    deep = emit_verilog(small_config(contract=2, pipeline="deep"), sector_bytes=32)
    for name in ("w_onehot", "free_list_count", "c1_valid", "cursor_valid", "flush_dec0",
                 "offer_fifo0_count", "inflight_count", "ring_rd"):
        assert name in deep, name


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
    strict error answers first (the golden model agrees, co-simulation ``mix-ports-deep``
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
                 if k in ("mixed", "writes-partial", "tiny-tables", "4x32")} | {
    "partition-2r2w": (dict(channels=4, scheduler="partition-2r2w"),
                       dict(pages=6, reads=0.5, gap=1))}


@pytest.mark.parametrize("name", sorted(CHANNEL_CASES))
def test_channel_shape_matches_golden_model(name):
    """The channel shape against the golden model's ``DeepStackController`` with P ports
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
