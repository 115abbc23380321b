"""The RTL stack controller against the golden model, cycle for cycle (contract §1-§10), under
timing contract 1 and 2 (``contract = 2``, docs/timing-contract.md, stack shape).

Both sides get the same requests and the same NAND media (:class:`hbfsim.model.media.Media`,
the media promise of contract §1); the testbench (``rtl_helpers.run_rtl``) presents requests
as contract §4.1 says (in arrival order, from ``max(arrival, previous accept + 1)``), raises
``drain`` from the cycle after the last request left M, keeps ``resp.ready`` high, and
delivers the media's completions after the cycle's commands are issued, as the golden run
does. Every request's accept and response cycles and flags, and every media command, must be
equal.
"""

from __future__ import annotations

import gc

import pytest
from rtl_helpers import FAST, assert_same_run, run_model, run_rtl, simulate, small_config, workload

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.controller import Controller


CASES = {
    "reads-demand": (dict(), dict(pages=12)),
    "reads-aggregation": (dict(read_mode="aggregation"), dict(pages=8)),
    "reads-merging-off": (dict(mshr_merge=False), dict(pages=8)),
    "writes-strict": (dict(), dict(pages=6, reads=0.0)),
    "writes-partial": (dict(write_timeout_policy="partial"), dict(pages=6, reads=0.0)),
    "mixed-fcfs": (dict(), dict(pages=8, reads=0.6)),
    "mixed-read-priority": (dict(scheduler="read-priority"), dict(pages=8, reads=0.6)),
    "mixed-write-drain": (dict(scheduler="write-drain", active_per_channel=2),
                          dict(pages=10, reads=0.5)),
    "mixed-partition-2r2w": (dict(scheduler="partition-2r2w", channels=4),
                             dict(pages=10, reads=0.6)),
    "link-limited": (dict(channel_bw_gbps=60.0), dict(pages=10, reads=0.8)),
    "tiny-tables": (dict(mshr_entries=2, write_buffer_entries=2, admission=4, queue_depth=2,
                         active_per_channel=1), dict(pages=6, reads=0.6)),
    "active-total": (dict(channels=4, active_per_channel=4, active_total=3,
                          scheduler="read-priority"), dict(pages=16, reads=0.7)),
}


@pytest.mark.parametrize("contract", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_controller_matches_golden_model(name, contract):
    cfg_kw, load_kw = CASES[name]
    cfg = small_config(**(FAST | cfg_kw | dict(contract=contract)))
    reqs = workload(len(name), 60, **load_kw)
    want, got = {}, {}
    model, model_cmds = run_model(cfg, reqs, probe=want)
    rtl, rtl_cmds = run_rtl(cfg, reqs, probe=got)
    assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds)
    assert got["flushes"] == want["flushes"], "flush counters (full, raw, pressure, deadline, " \
        "drain)"


@pytest.mark.parametrize("contract,command,extra", [(1, 3, 4), (2, 5, 8)])
def test_isolated_read(contract, command, extra):
    """§10: v1 accept ta, dispatch ta+1, enqueue ta+2, issue ta+3, response ta+4+tR; v2
    lookup ta+1, dispatch ta+2, enqueue ta+3, decision ta+4, command ta+5, response
    ta+8+tR."""
    cfg = small_config(**FAST, contract=contract)
    rtl, cmds = run_rtl(cfg, [("R", 5, 0, 64, 3)])
    assert rtl[0] == (3, 3 + extra + cfg.t_read_ticks, 0, 0, 0)
    assert cmds == [(3 + command, 1, 2, 0, 2, 0)]


@pytest.mark.parametrize("contract,command,extra", [(1, 4, 5), (2, 6, 9)])
def test_isolated_full_page_write(contract, command, extra):
    """§10: one 4096 B write; v2 dispatch ta+2, FLUSH ta+3, enqueue ta+4, decision ta+5,
    command ta+6, response ta+9+tPROG (v1: command ta+4, response ta+5+tPROG)."""
    cfg = small_config(**FAST, contract=contract)
    rtl, cmds = run_rtl(cfg, [("W", 5, 0, PAGE_BYTES, 3)], sector_bytes=32)
    assert rtl[0] == (3, 3 + extra + cfg.t_prog_ticks, 0, 0, 0)
    assert [c[0] for c in cmds] == [3 + command]


@pytest.mark.parametrize("contract,first", [(1, 1), (2, 3)])
def test_merged_reads_respond_one_per_cycle(contract, first):
    """§10, §11.1: eight reads of one page, one READ; responses from tc+1 (v1) or tc+3 (v2),
    one per cycle in arrival order."""
    cfg = small_config(**(FAST | dict(t_read_us=0.05, contract=contract)))
    reqs = [("R", 3, 32 * i, 32, 0) for i in range(8)]
    rtl, cmds = run_rtl(cfg, reqs)
    (cmd,) = cmds
    tc = cmd[0] + cfg.t_read_ticks
    assert [rtl[i][1] for i in range(8)] == [tc + first + i for i in range(8)]
    assert [rtl[i][2] for i in range(8)] == [0] + [1] * 7


@pytest.mark.parametrize("contract", [1, 2])
def test_serial_page_reads_pace_at_tR_plus_1(contract):
    """§10: distinct pages on one subarray: the next command in tc+1 in both contracts (v2
    §7's completion forwarding)."""
    cfg = small_config(**FAST, contract=contract, channels=1, subarrays_per_channel=1,
                       active_per_channel=1)
    rtl, cmds = run_rtl(cfg, [("R", p, 0, 32, 0) for p in range(5)])
    times = [c[0] for c in cmds]
    assert [b - a for a, b in zip(times, times[1:])] == [cfg.t_read_ticks + 1] * 4


@pytest.mark.parametrize("contract,writes,read_done", [(1, [1708, 1709, 1710, 1711], 2565),
                                                       (2, [1712, 1716, 1721, 1725], 2581)])
def test_raw_worked_example(contract, writes, read_done):
    """§10's last row (tR 850, tPROG 1,700 ticks): 4 x 1024 B writes fill page q at
    ta..ta+3, a read of q at ta+4; under v2 the acknowledgements are paced by §8's deficit
    credit (§11.3)."""
    cfg = small_config(contract=contract, t_read_us=1.0, t_prog_us=2.0)
    spec = [("W", 0, 1024 * k, 1024, k) for k in range(4)] + [("R", 0, 0, 32, 4)]
    rtl, _ = run_rtl(cfg, spec, max_cycles=4000, sector_bytes=32)
    assert [rtl[i][1] for i in range(4)] == writes
    assert rtl[4][1] == read_done


@pytest.mark.parametrize("key,value", [("page_cache_pages", 16), ("media_mode", "ssd"),
                                       ("stacks", 2)])
def test_unsupported_configuration_is_rejected(key, value):
    """Model-only keys are rejected; so is a several-stack configuration, which is a
    ``System`` of stack controllers (rtl/system.py), not one ``Controller``."""
    with pytest.raises(ValueError, match=key):
        Controller(small_config(**{key: value}))
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind


def test_accepts_one_request_per_cycle_for_1000_cycles():
    """Issue 3 item 6: with resources free, one accept per cycle, back to back; every read
    after the first of its page is decided an MSHR hit in its dispatch cycle (§4.2)."""
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
    # the model, given the same stream, agrees on accept cycles and on every hit/miss
    reqs = [("R", k % 8, 32 * (k // 8 % 128), 32, 0) for k in range(n)]
    model, _ = run_model(cfg, reqs)
    assert [model[k][0] for k in range(n)] == accepts
    assert sum(model[k][2] for k in range(n)) == n - 8
