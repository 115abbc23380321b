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
from rtl_helpers import FAST, assert_same_run, run_model, run_rtl, small_config, workload

from hbfsim.rtl.controller import Controller, check_supported


def deep_config(**overrides):
    """:func:`small_config` under contract 2, stack shape, ``pipeline = "deep"``."""
    return small_config(**(FAST | dict(contract=2, pipeline="deep") | overrides))


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


def test_deep_is_refused_in_the_channel_shape():
    """The configuration refuses deep outside the stack shape; the RTL says so too, for a
    configuration that was not validated (the check names the key)."""
    cfg = small_config(contract=2, host_ports="channel")
    forged = dataclasses.replace(cfg)
    object.__setattr__(forged, "pipeline", "deep")
    with pytest.raises(ValueError, match="pipeline = 'deep' with host_ports = 'channel'"):
        check_supported(forged)
    with pytest.raises(ValueError, match="host_ports"):
        Controller(forged)
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind
    check_supported(deep_config())   # the stack shape is accepted


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
