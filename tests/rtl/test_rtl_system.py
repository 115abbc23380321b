"""The RTL system layer (rtl/system.py) against the golden model, cycle for cycle (the route
stage and the egress round robin, docs/timing-contract.md §2).

``System(cfg)`` with 2, 3 and 4 stacks runs the same requests as ``HbfSystem(cfg)``, each stack
with the model's NAND media behind it (``rtl_helpers.run_rtl``); every request's accept cycle,
response cycle and flags, and every media command with its global channel
``stack * channels + channel`` must be equal. The consumer's ``resp.ready`` is the same
function of the tick on both sides (``HbfSystem.resp_ready``).

The write buffers use 32-byte coverage sectors (``sector_bytes=32``): exact here, since every
generated write is 32-byte aligned, and it keeps four stacks quick to elaborate.
"""

from __future__ import annotations

import gc

import pytest
from rtl_helpers import FAST, assert_same_run, run_model, run_rtl, small_config, workload

from hbfsim.rtl.controller import Controller, check_supported
from hbfsim.rtl.system import System, stack_config, top

SECTOR = dict(sector_bytes=32)


def spread(reqs, cfg):
    """Move page ``p`` of a workload to logical page ``(p mod S) * P + p div S`` under
    ``stack_select = contiguous`` (``P`` pages per stack), so that consecutive pages land on
    different stacks under either selection."""
    if cfg.stack_select != "contiguous":
        return reqs
    s, per = cfg.stacks, cfg.pages_per_stack
    return [(op, (p % s) * per + p // s, off, n, a) for op, p, off, n, a in reqs]


def ready_pattern(t: int) -> bool:
    """A consumer that drops ``resp.ready`` in 4 of every 11 cycles, in runs of 1 and 3."""
    return t % 11 not in (2, 6, 7, 8)


def burst(stacks: int, per_stack: int):
    """Reads to one page per stack, interleaved, all arriving at tick 0: every stack's entry
    completes within a few cycles of the others' and then holds ``per_stack`` waiters, so the
    stacks compete for the response port for many cycles in a row."""
    return [("R", i % stacks, 64 * (i // stacks), 64, 0) for i in range(stacks * per_stack)]


# name: (config keys, workload keys or a request list, resp_ready)
CASES = {
    "2-interleave-reads": (dict(stacks=2), dict(pages=12), None),
    "2-interleave-mixed": (dict(stacks=2), dict(pages=10, reads=0.6), None),
    "2-contiguous-mixed": (dict(stacks=2, stack_select="contiguous"),
                           dict(pages=10, reads=0.6), None),
    "2-mixed-backpressure": (dict(stacks=2, scheduler="read-priority"),
                             dict(pages=10, reads=0.6), ready_pattern),
    "2-link-limited-backpressure": (dict(stacks=2, channel_bw_gbps=60.0),
                                    dict(pages=8, reads=0.8), ready_pattern),
    "3-interleave-mixed": (dict(stacks=3), dict(pages=12, reads=0.6), ready_pattern),
    "3-contiguous-mixed": (dict(stacks=3, stack_select="contiguous"),
                           dict(pages=12, reads=0.6), None),
    "4-interleave-mixed": (dict(stacks=4), dict(pages=16, reads=0.6), None),
    "4-contiguous-mixed-backpressure": (dict(stacks=4, stack_select="contiguous"),
                                        dict(pages=16, reads=0.6), ready_pattern),
    "2-burst-compete": (dict(stacks=2, t_read_us=0.05), burst(2, 8), None),
    "4-burst-compete-backpressure": (dict(stacks=4, stack_select="contiguous", t_read_us=0.05),
                                     burst(4, 6), ready_pattern),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_system_matches_golden_model(name):
    cfg_kw, load, ready = CASES[name]
    cfg = small_config(**(FAST | cfg_kw))
    reqs = workload(len(name), 60, **load) if isinstance(load, dict) else load
    reqs = spread(reqs, cfg)
    want, probe = {}, {}
    model, model_cmds = run_model(cfg, reqs, resp_ready=ready, probe=want)
    rtl, rtl_cmds = run_rtl(cfg, reqs, resp_ready=ready, probe=probe, **SECTOR)
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert probe["flushes"] == want["flushes"]       # summed over the stacks
    # the workload did what it is for: every stack worked, and stacks met at the port
    assert {g // cfg.channels for _, g, *_ in model_cmds} == set(range(cfg.stacks))
    assert probe["contended"] > 0


def test_isolated_read_through_two_stacks():
    """§10, §2: 13 + tR from a stack's accept (§4a), one cycle more through the route stage:
    14 + tR from the system accept, on either stack."""
    cfg = small_config(**(FAST | dict(stacks=2)))
    for page in (0, 1):
        rtl, cmds = run_rtl(cfg, [("R", page, 0, 32, 3)], **SECTOR)
        assert rtl[0][:2] == (3, 3 + 14 + cfg.t_read_ticks)
        assert cmds[0][1] // cfg.channels == page


def test_round_robin_alternates_between_competing_stacks():
    """§2: with both stacks offering in every cycle, responses alternate 0, 1, 0, 1, ..."""
    cfg = small_config(**(FAST | dict(stacks=2, t_read_us=0.05)))  # tR 43: all 8 merge
    reqs = burst(2, 8)
    probe = {}
    rtl, _ = run_rtl(cfg, reqs, probe=probe, **SECTOR)
    order = [i % 2 for i in sorted(rtl, key=lambda i: rtl[i][1])]
    # the stacks' entries complete one cycle apart: the first responds alone, then they
    # alternate while both have waiters
    assert order[1:15] == [1, 0] * 7
    assert probe["contended"] >= 14


def test_stack_config_keeps_the_stack_view():
    cfg = small_config(stacks=4, stack_select="contiguous", placement="contiguous")
    one = stack_config(cfg)
    assert one.stacks == 1 and one.pages_per_stack == cfg.pages_per_stack
    assert one.channels == cfg.channels and one.mshr_entries == cfg.mshr_entries
    assert stack_config(small_config()) == small_config()


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_top_is_controller_for_one_stack_and_system_for_several():
    assert type(top(small_config())) is Controller
    assert type(top(small_config(stacks=2), **SECTOR)) is System
    check_supported(small_config(stacks=3))  # several stacks are supported
    gc.collect()  # the two blocks are never elaborated: collect them under the filter


@pytest.mark.parametrize("key,value", [("stacks", 1), ("page_cache_pages", 16)])
def test_system_rejects(key, value):
    with pytest.raises(ValueError, match=key):
        System(small_config(**{"stacks": 2, key: value}))
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind
