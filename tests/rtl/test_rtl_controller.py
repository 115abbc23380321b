"""The RTL stack controller against the golden model, cycle for cycle (contract §1-§10).

Both sides get the same requests and the same NAND media (:class:`hbfsim.model.media.Media`,
the media promise of contract §1); the RTL testbench presents requests as contract §4.1
says (in arrival order, from ``max(arrival, previous accept + 1)``), raises ``drain`` from
the cycle after the last request left M, keeps ``resp.ready`` high, and delivers the media's
completions after the cycle's commands are issued, as the golden run does. Every request's
accept and response cycles and flags, and every media command, must be equal.
"""

from __future__ import annotations

import gc
import random

import pytest
from rtl_helpers import simulate, small_config

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim import scenarios
from hbfsim.model.controller import Request
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR, Media
from hbfsim.model.system import HbfSystem
from hbfsim.rtl.controller import Controller

# Short NAND timings keep the simulated cycle count small: tR 9, tPROG 17, tBERS 43 ticks.
FAST = dict(t_read_us=0.01, t_prog_us=0.02, t_erase_us=0.05, buffer_hit_ticks=2,
            pages_per_block=4, write_deadline_ticks=40, read_agg_window_ticks=6,
            read_agg_threshold_bytes=2048, write_drain_high_water=2,
            write_drain_window_ticks=30)


def run_model(cfg, reqs):
    """Golden run: per request (accept, done, mshr_hit, buffer_hit, error); media commands."""
    system = HbfSystem(cfg)
    media = system.stacks[0].media
    log = []
    issue = media.issue

    def logged(t, ch, sub, op, local, tag):
        log.append((t, ch, sub, op, local, tag))
        return issue(t, ch, sub, op, local, tag)

    media.issue = logged
    system.run_requests([Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, a)
                         for i, (op, page, off, n, a) in enumerate(reqs)])
    out = {r.id: (r.t_accept, r.t_done, int(r.mshr_hit), int(r.buffer_hit), int(r.error))
           for r in system.completed}
    return out, log


def run_rtl(cfg, reqs, max_cycles=20000):
    """The RTL controller with the model's media behind it; same result shape as run_model."""
    dut = Controller(cfg)
    media = Media(cfg)
    log = []
    accepted: dict[int, int] = {}
    done: dict[int, tuple] = {}

    async def tb(ctx):
        ctx.set(dut.resp.ready, 1)
        k, last_accept, drain = 0, -1, 0
        for t in range(max_cycles):
            if len(done) == len(reqs):
                return
            # drain from the cycle after the last request left M (model: system.drain_at)
            drain |= int(k == len(reqs) and not ctx.get(dut.m_valid))
            ctx.set(dut.drain, drain)
            present = k < len(reqs) and t >= max(reqs[k][4], last_accept + 1)
            ctx.set(dut.req.valid, present)
            if present:
                op, page, off, n, _ = reqs[k]
                ctx.set(dut.req.payload, {"id": k, "op": 0 if op == "R" else 1, "source": 0,
                                          "addr": page * PAGE_BYTES + off, "bytes": n})
            for c in range(cfg.channels):
                ctx.set(dut.cpl[c], {"valid": 0, "subarray": 0, "tag": {"kind": 0, "index": 0},
                                     "buffer_hit": 0, "error": 0})
            if present and ctx.get(dut.req.ready):
                accepted[k] = t
                k, last_accept = k + 1, t
            if ctx.get(dut.resp.valid):
                r = ctx.get(dut.resp.payload)
                assert r.id not in done, f"request {r.id} answered twice"
                done[r.id] = (t, r.mshr_hit, r.buffer_hit, r.error)
            for c in range(cfg.channels):
                cmd = ctx.get(dut.cmd[c])
                if cmd.valid:
                    tag = cmd.tag.index * 2 + cmd.tag.kind.value
                    log.append((t, c, cmd.subarray, cmd.op.value, cmd.page, tag))
                    media.issue(t, c, cmd.subarray, cmd.op.value, cmd.page, tag)
            for ch, sub, tag, flags in media.deliver(t):
                ctx.set(dut.cpl[ch], {"valid": 1, "subarray": sub,
                                      "tag": {"kind": tag & 1, "index": tag >> 1},
                                      "buffer_hit": int(bool(flags & FLAG_BUFFER_HIT)),
                                      "error": int(bool(flags & FLAG_ERROR))})
            await ctx.tick()
        raise AssertionError(f"not done after {max_cycles} cycles: {len(done)} of {len(reqs)}")

    simulate(dut, tb)
    return {i: (accepted[i],) + done[i] for i in done}, log


def workload(seed, n, *, pages, reads=1.0, gap=3, sizes=(32, 128, 512, 4096)):
    """``n`` requests (op, page, offset, bytes, arrival) over ``pages`` pages (the
    co-simulation's generator, so both levels are driven alike)."""
    return scenarios.workload(random.Random(seed), n, pages=pages, reads=reads, gap=gap,
                              sizes=sizes)


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


@pytest.mark.parametrize("name", sorted(CASES))
def test_controller_matches_golden_model(name):
    cfg_kw, load_kw = CASES[name]
    cfg = small_config(**(FAST | cfg_kw))
    reqs = workload(len(name), 60, **load_kw)
    model, model_cmds = run_model(cfg, reqs)
    rtl, rtl_cmds = run_rtl(cfg, reqs)
    for i in range(len(reqs)):
        assert rtl.get(i) == model[i], (f"request {i} {reqs[i]}: RTL (accept, done, mshr_hit, "
                                        f"buffer_hit, error) {rtl.get(i)} != model {model[i]}")
    # Commands of one cycle on different channels are simultaneous: compare in (t, channel) order.
    assert sorted(rtl_cmds) == sorted(model_cmds)


def test_isolated_read_takes_tR_plus_4():
    """Contract §10: accept ta, dispatch ta+1, enqueue ta+2, issue ta+3, response ta+4+tR."""
    cfg = small_config(**FAST)
    rtl, cmds = run_rtl(cfg, [("R", 5, 0, 64, 3)])
    assert rtl[0] == (3, 3 + 4 + cfg.t_read_ticks, 0, 0, 0)
    assert cmds == [(6, 1, 2, 0, 2, 0)]


@pytest.mark.parametrize("key,value", [("page_cache_pages", 16), ("media_mode", "ssd"),
                                       ("stacks", 2)])
def test_unsupported_configuration_is_rejected(key, value):
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
