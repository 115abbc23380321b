"""The blocks contract 2 adds (docs/timing-contract.md §2, §4.1, §8): the two-entry stage
queue (rtl/stage_queue.py) and the deficit link credit (rtl/link_credit.py), each against a
plain-Python reference, cycle for cycle."""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from rtl_helpers import simulate, small_config

from hbfsim.model.link import DeficitCredit
from hbfsim.rtl.link_credit import LinkCredit
from hbfsim.rtl.stage_queue import StageQueue


@pytest.mark.parametrize("p_in,p_out", [(0.9, 0.3), (0.5, 0.5), (0.3, 0.9), (1.0, 1.0)])
def test_stage_queue_is_a_two_entry_fifo_with_registered_ready(p_in, p_out):
    """``ready`` = occupancy at the start of the cycle below 2; an item taken in ``t`` is at
    the head from ``t + 1``; order kept; the head leaves on ``out.ready``."""
    dut = StageQueue(data.StructLayout({"v": unsigned(8)}))
    rng = random.Random(int(p_in * 10 + p_out))
    ref: deque = deque()
    got, want = [], []

    async def tb(ctx):
        nxt = 0
        for _ in range(400):
            offer, take = rng.random() < p_in, rng.random() < p_out
            ctx.set(dut.inp.valid, offer)
            ctx.set(dut.inp.payload, {"v": nxt & 0xFF})
            ctx.set(dut.out.ready, take)
            assert ctx.get(dut.inp.ready) == (len(ref) < 2)
            assert ctx.get(dut.out.valid) == bool(ref)
            if ref:
                assert ctx.get(dut.out.payload.v) == ref[0]
            popped = take and bool(ref)
            if popped:
                got.append(ctx.get(dut.out.payload.v))
                want.append(ref.popleft())
            if offer and ctx.get(dut.inp.ready):
                ref.append(nxt & 0xFF)
                nxt += 1
            await ctx.tick()

    simulate(dut, tb)
    assert got == want and len(got) > 50


@pytest.mark.parametrize("gbps,mhz", [(192.0, 850), (0.85, 850), (60.0, 850), (192.0, 1512),
                                      (30.5, 1000)])
def test_link_credit_equals_the_integer_recurrence(gbps, mhz):
    """§8: the mixed-radix register (``x = b * y + r``) is the model's integer ``x``; a
    launch is allowed exactly while ``x > 0``; random sizes and launch attempts."""
    cfg = small_config(channel_bw_gbps=gbps, memory_clock_mhz=mhz)
    dut = LinkCredit(cfg)
    ref = DeficitCredit(cfg)
    b = cfg.link_byte_cost
    rng = random.Random(int(gbps * 100) + mhz)
    launched = []

    async def tb(ctx):
        for t in range(600):
            want = rng.random() < 0.6
            size = rng.choice([1, 32, 128, 225, 226, 1024, 4096, rng.randint(1, 4096)])
            allowed = ref.allows(0, t, size)
            assert ctx.get(dut.positive) == allowed, t
            x = ref.level(0, t)
            assert b * ctx.get(dut.y) + ctx.get(dut.r) == x, t
            go = want and allowed
            ctx.set(dut.launch, go)
            ctx.set(dut.bytes, size)
            if go:
                ref.charge(0, t, size)
                launched.append(t)
            await ctx.tick()

    simulate(dut, tb)
    assert len(launched) > 2


def test_link_credit_paces_two_128_byte_responses_128_ticks_apart():
    """§11.5 (HBF-Sim's unit test): 1 B/tick; after a 128 B launch the next waits 128."""
    cfg = small_config(channel_bw_gbps=0.85, memory_clock_mhz=850)
    dut = LinkCredit(cfg)
    launches = []

    async def tb(ctx):
        ctx.set(dut.bytes, 128)
        for t in range(300):
            go = ctx.get(dut.positive) and len(launches) < 2
            ctx.set(dut.launch, go)
            if go:
                launches.append(t)
            await ctx.tick()

    simulate(dut, tb)
    assert launches[1] - launches[0] == 128
