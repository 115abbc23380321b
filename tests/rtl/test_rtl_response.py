"""The RTL response arbiter: table choice and per-channel link credit (contract §8); under
contract 2 its R / K / E pipeline with the deficit credit (timing-contract.md §8)."""

from __future__ import annotations

import pytest
from rtl_helpers import simulate, small_config

from hbfsim.rtl.response import ResponseArbiter


def offer(slot, channel, last=1, error=0):
    return {"index": 0, "slot": slot, "channel": channel, "last": last, "buffer_hit": 0,
            "error": error}


def drive(ctx, dut, sizes, mshr=None, wb=None, mshr_locked=0, wb_locked=0, ready=1):
    """Set one cycle's inputs; ``sizes[slot]`` is the request size held in each slot."""
    for port, o in ((dut.mshr_ret, mshr), (dut.wb_ret, wb)):
        ctx.set(port.valid, o is not None)
        if o is not None:
            ctx.set(port.payload, o)
    ctx.set(dut.mshr_locked, mshr_locked)
    ctx.set(dut.wb_locked, wb_locked)
    ctx.set(dut.resp.ready, ready)
    ctx.set(dut.slot_data, {"id": 100 + ctx.get(dut.slot), "op": 0, "source": 0,
                            "bytes": sizes[ctx.get(dut.slot)]})
    return (ctx.get(dut.mshr_sel), ctx.get(dut.wb_sel), ctx.get(dut.resp.valid),
            ctx.get(dut.resp.payload.id))


@pytest.mark.parametrize("gbps,burst", [(100.0, 4096), (192.0, 8192), (30.5, 4096)])
def test_credit_gates_responses_per_channel(gbps, burst):
    cfg = small_config(channel_bw_gbps=gbps, link_burst_bytes=burst)
    dut = ResponseArbiter(cfg)
    sizes = {0: 4096, 1: 64}
    gain, cap, khz = cfg.link_gain_per_tick, cfg.link_cap, cfg.memory_clock_khz
    credit = [cap, cap]
    want, got = [], []

    async def tb(ctx):
        for t in range(120):
            # Channel 0 always offers a 4 KiB response; the recurrence of §8 predicts when.
            _, _, valid, _ = drive(ctx, dut, sizes, mshr=offer(0, 0))
            ok = credit[0] >= 4096 * khz
            want.append(ok)
            got.append(bool(valid))
            credit[0] = min(cap, credit[0] - (4096 * khz if ok else 0) + gain)
            credit[1] = min(cap, credit[1] + gain)
            await ctx.tick()
            assert ctx.get(dut.credit[0]) == credit[0]
            assert ctx.get(dut.credit[1]) == credit[1]

    simulate(dut, tb)
    assert got == want and sum(got) > 1


def test_locked_table_keeps_the_port_and_mshr_goes_first():
    cfg = small_config()
    dut = ResponseArbiter(cfg)
    sizes = {0: 64, 1: 64, 2: 64}

    async def tb(ctx):
        # Neither locked: the MSHR's offer first.
        assert drive(ctx, dut, sizes, mshr=offer(1, 0), wb=offer(2, 1)) == (1, 0, 1, 101)
        # The write buffer is draining an entry: it keeps the port.
        assert drive(ctx, dut, sizes, mshr=offer(1, 0), wb=offer(2, 1),
                     wb_locked=1) == (0, 1, 1, 102)
        # The MSHR is locked but its offer waits for credit or ready: still chosen.
        assert drive(ctx, dut, sizes, mshr=offer(1, 0), wb=offer(2, 1), mshr_locked=1,
                     ready=0)[:2] == (1, 0)
        # Only the write buffer has a response.
        assert drive(ctx, dut, sizes, wb=offer(0, 1)) == (0, 1, 1, 100)
        assert drive(ctx, dut, sizes)[:3] == (0, 0, 0)

    simulate(dut, tb)


# ---- contract 2: R, K, E and the deficit credit (docs/timing-contract.md §8) ----

def run_v2(cfg, waiters, sizes, ready=lambda t: True, cycles=60, wb=()):
    """One MSHR entry (and optionally one write-buffer entry) offering ``waiters`` (slots)
    from cycle 0, ``sizes[slot]`` bytes each; returns the cycles of R's takes (with the
    slots), of the handshakes (with the ids) and of the ``mshr_launched`` strobes."""
    dut = ResponseArbiter(cfg)
    queues = {"mshr": list(waiters), "wb": list(wb)}
    log = {"take": [], "resp": [], "freed": []}

    async def tb(ctx):
        for t in range(cycles):
            for name, port in (("mshr", dut.mshr_ret), ("wb", dut.wb_ret)):
                q = queues[name]
                ctx.set(port.valid, bool(q))
                if q:
                    ctx.set(port.payload, offer(q[0], 0, last=int(len(q) == 1)))
            ctx.set(dut.mshr_locked, 0)
            ctx.set(dut.wb_locked, 0)
            ctx.set(dut.resp.ready, ready(t))
            # K's slot (any value while K is empty: payloads only while valid, v2 §0)
            ctx.set(dut.slot_data, {"id": 100 + ctx.get(dut.slot), "op": 0, "source": 0,
                                    "bytes": sizes.get(ctx.get(dut.slot), 32)})
            ctx.set(dut.slot_hit, 0)
            for name, port in (("mshr", dut.mshr_ret), ("wb", dut.wb_ret)):
                if ctx.get(port.valid) and ctx.get(port.ready):
                    log["take"].append((t, queues[name].pop(0)))
            if ctx.get(dut.mshr_launched.valid):
                log["freed"].append(t)
            if ctx.get(dut.resp.valid) and ready(t):
                log["resp"].append((t, ctx.get(dut.resp.payload.id)))
                assert ctx.get(dut.release.valid) and ctx.get(dut.release.slot) == \
                    ctx.get(dut.resp.payload.id) - 100
            await ctx.tick()

    simulate(dut, tb)
    return log


def test_v2_three_waiters_respond_from_u_plus_2_one_per_cycle():
    """§11.1's response side: R takes one waiter per cycle from u, K launches from u + 1,
    the responses leave from u + 2 in order; the entry is freed by its last launch."""
    cfg = small_config(contract=2)
    log = run_v2(cfg, [1, 2, 3], {1: 32, 2: 32, 3: 32})
    assert log["take"] == [(0, 1), (1, 2), (2, 3)]
    assert log["resp"] == [(2, 101), (3, 102), (4, 103)]
    assert log["freed"] == [3]


def test_v2_slow_link_paces_two_128_byte_responses_128_ticks_apart():
    """§11.5: 1 B/tick; the second waiter waits in K until the credit is positive again."""
    cfg = small_config(contract=2, channel_bw_gbps=0.85, memory_clock_mhz=850)
    log = run_v2(cfg, [1, 2], {1: 128, 2: 128}, cycles=200)
    (t1, _), (t2, _) = log["resp"]
    assert (t1, t2 - t1) == (2, 128)


def test_v2_egress_full_holds_k_and_r_without_charging_credit():
    """§8, §11.4: with resp.ready low E fills with two responses; K holds the third and R
    the fourth; once ready rises they leave one per cycle (no credit was spent while
    held: the responses of 32 B never wait for credit)."""
    cfg = small_config(contract=2)
    log = run_v2(cfg, [1, 2, 3, 4, 5], {k: 32 for k in range(1, 6)}, ready=lambda t: t >= 10)
    assert [t for t, _ in log["take"]] == [0, 1, 2, 3, 11]
    assert log["resp"] == [(10, 101), (11, 102), (12, 103), (13, 104), (14, 105)]


def test_v2_mshr_offer_before_the_write_buffer():
    """R's choice (§8, kept from v1): the MSHR's waiters first, then the write buffer's."""
    cfg = small_config(contract=2)
    log = run_v2(cfg, [1], {1: 32, 2: 64}, wb=[2])
    assert log["take"] == [(0, 1), (1, 2)]
    assert log["resp"] == [(2, 101), (3, 102)]
