"""The RTL response stages of one port: R / K / E with the deficit link credit
(docs/timing-contract.md §8, DP7)."""

from __future__ import annotations

from rtl_helpers import simulate, small_config

from hbfsim.rtl.response import ResponseArbiter


def offer(slot, channel, last=1, error=0):
    return {"index": 0, "slot": slot, "channel": channel, "last": last, "buffer_hit": 0,
            "error": error}


def run_port(cfg, waiters, sizes, ready=lambda t: True, cycles=60, wb=()):
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
            # K's slot (any value while K is empty: payloads only while valid, §0)
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


def test_three_waiters_respond_from_u_plus_2_one_per_cycle():
    """§11.1's response side: R takes one waiter per cycle from u and holds each for a
    cycle (DP7), K launches from u + 2, the responses leave from u + 3 in order; the entry
    is freed by its last launch."""
    cfg = small_config()
    log = run_port(cfg, [1, 2, 3], {1: 32, 2: 32, 3: 32})
    assert log["take"] == [(0, 1), (1, 2), (2, 3)]
    assert log["resp"] == [(3, 101), (4, 102), (5, 103)]
    assert log["freed"] == [4]


def test_slow_link_paces_two_128_byte_responses_128_ticks_apart():
    """§11.5: 1 B/tick; the second waiter waits in K until the credit is positive again."""
    cfg = small_config(channel_bw_gbps=0.85, memory_clock_mhz=850)
    log = run_port(cfg, [1, 2], {1: 128, 2: 128}, cycles=200)
    (t1, _), (t2, _) = log["resp"]
    assert (t1, t2 - t1) == (3, 128)


def test_egress_full_holds_k_and_r_without_charging_credit():
    """§8, §11.4: with resp.ready low E fills with two responses; K holds the third and R
    the fourth; once ready rises they leave one per cycle (no credit was spent while
    held: the responses of 32 B never wait for credit)."""
    cfg = small_config()
    log = run_port(cfg, [1, 2, 3, 4, 5], {k: 32 for k in range(1, 6)}, ready=lambda t: t >= 10)
    assert [t for t, _ in log["take"]] == [0, 1, 2, 3, 11]
    assert log["resp"] == [(10, 101), (11, 102), (12, 103), (13, 104), (14, 105)]


def test_mshr_offer_before_the_write_buffer():
    """R's choice (§8): the MSHR's waiters first, then the write buffer's."""
    cfg = small_config()
    log = run_port(cfg, [1], {1: 32, 2: 64}, wb=[2])
    assert log["take"] == [(0, 1), (1, 2)]
    assert log["resp"] == [(3, 101), (4, 102)]
