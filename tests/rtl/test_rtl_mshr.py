"""The RTL MSHR table against a plain-Python reference of the same table (contract §4.2-§4.3, §8).

The reference below is written from the contract, independently of the RTL: absolute cycle
numbers instead of saturating counters, Python lists instead of linked lists. Both run in
lockstep on the same inputs; every output is compared in every cycle. The environment around
the table (request source with admission slots, channel queues, media, response arbiter) is
randomised from a seed and reacts only to the outputs, so a divergence shows at its first
cycle.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtl_helpers import (BackEnd, apply_backend, check_groups, idle_backend, read_backend,
                         simulate, small_config)

from hbfsim.model.mapping import Mapper as GoldenMapper
from hbfsim.rtl.mshr import Mshr

# ---------------------------------------------------------------- reference ----

FREE, WAIT, QUEUED, ISSUED, RETURN = "FREE", "WAIT", "QUEUED", "ISSUED", "RETURN"


@dataclass
class RefEntry:
    state: str = FREE
    page: int = 0
    channel: int = 0
    local: int = 0
    subarray: int = 0
    bytes: int = 0
    alloc: int = 0
    waiters: list = field(default_factory=list)
    buffer_hit: int = 0
    error: int = 0


class RefMshr:
    """Cycle-level reference of the MSHR table with the RTL's ports (as dictionaries)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.e = [RefEntry() for _ in range(cfg.mshr_entries)]
        self.locked = False
        self.lock_index = 0
        self.now = 0

    def _ready(self, e: RefEntry) -> bool:
        cfg = self.cfg
        return e.state == WAIT and (cfg.read_mode == "demand"
                                    or e.bytes >= cfg.read_agg_threshold_bytes
                                    or self.now >= e.alloc + cfg.read_agg_window_ticks)

    def comb(self, inp: dict) -> dict:
        e = self.e
        match = [i for i, x in enumerate(e) if self.cfg.mshr_merge
                 and x.state in (WAIT, QUEUED, ISSUED) and x.page == inp["page"]]
        free = [i for i, x in enumerate(e) if x.state == FREE]
        out = {"disp_ready": int(bool(match or free)), "disp_hit": int(bool(match)),
               "disp_index": match[0] if match else (free[0] if free else 0)}
        enq = []
        for c in range(self.cfg.channels):
            cand = [i for i, x in enumerate(e) if self._ready(x) and x.channel == c]
            enq.append((cand[0], e[cand[0]].subarray, e[cand[0]].local) if cand else None)
        out["enq"] = enq
        ret = [i for i, x in enumerate(e) if x.state == RETURN]
        cur = self.lock_index if self.locked else (ret[0] if ret else None)
        if cur is None:
            out["ret"] = None
        else:
            x = e[cur]
            out["ret"] = (cur, x.waiters[0], x.channel, int(len(x.waiters) == 1), x.buffer_hit,
                          x.error)
        out["ret_locked"] = int(self.locked)
        if not inp["disp_valid"]:
            out["disp_ready"] = out["disp_hit"] = out["disp_index"] = None
        return out

    def tick(self, inp: dict) -> None:
        out = self.comb(inp)
        e = self.e
        if inp["disp_valid"] and out["disp_ready"]:
            i = out["disp_index"]
            if out["disp_hit"]:
                e[i].bytes += inp["bytes"]
                e[i].waiters.append(inp["slot"])
            else:
                e[i] = RefEntry(WAIT, inp["page"], inp["channel"], inp["local"], inp["subarray"],
                                inp["bytes"], self.now, [inp["slot"]])
        for c, offer in enumerate(out["enq"]):
            if offer is not None and inp["enq_ready"][c]:
                e[offer[0]].state = QUEUED
        for valid, index in inp["issue"]:
            if valid:
                assert e[index].state == QUEUED
                e[index].state = ISSUED
        for valid, index, buffer_hit, error in inp["done"]:
            if valid:
                assert e[index].state == ISSUED
                e[index].state, e[index].buffer_hit, e[index].error = RETURN, buffer_hit, error
        ret = out["ret"]
        if ret is not None:
            pop = bool(inp["ret_ready"])
            if pop:
                x = e[ret[0]]
                x.waiters.pop(0)
                if not x.waiters:
                    x.state = FREE
            if inp["ret_sel"]:
                self.locked, self.lock_index = not (pop and ret[3]), ret[0]
        self.now += 1


# ------------------------------------------------------------- RTL adapter ----

def apply_inputs(ctx, dut, inp: dict) -> None:
    ctx.set(dut.disp.valid, inp["disp_valid"])
    ctx.set(dut.disp.payload, {"page": inp["page"], "bytes": inp["bytes"], "slot": inp["slot"],
                               "target": {"channel": inp["channel"], "local": inp["local"],
                                          "subarray": inp["subarray"]}})
    apply_backend(ctx, dut, inp)


def read_outputs(ctx, dut, inp: dict) -> dict:
    out = read_backend(ctx, dut, "MSHR")
    if inp["disp_valid"]:
        out.update(disp_ready=ctx.get(dut.disp.ready), disp_hit=ctx.get(dut.disp_hit),
                   disp_index=ctx.get(dut.disp_index))
    else:
        out.update(disp_ready=None, disp_hit=None, disp_index=None)
    return out


def idle_inputs(cfg) -> dict:
    return dict(disp_valid=0, page=0, channel=0, local=0, subarray=0, bytes=0, slot=0,
                **idle_backend(cfg))


# ------------------------------------------------------------- environment ----

class Env:
    """Request source with admission slots in front of the table, :class:`BackEnd` behind it.

    Parameters
    ----------
    requests : list of (gap, page, bytes)
        In arrival order; ``gap`` idle cycles before the request is presented.
    seed : int
        Drives every back-end decision (queue acceptance, issue choice, latency, arbiter).
    """

    def __init__(self, cfg, requests, seed, *, min_latency=1, max_latency=12, **backend_kw):
        self.cfg = cfg
        self.map = GoldenMapper(cfg)
        self.back = BackEnd(cfg, random.Random(seed), latency=(min_latency, max_latency),
                            **backend_kw)
        self.pending = deque(enumerate(requests))
        self.next_present = requests[0][0] if requests else 0
        self.free_slots = set(range(cfg.admission))
        self.now = 0
        self.slot_req: dict[int, int] = {}
        self.dispatched: list[tuple[int, int, int]] = []  # (request, entry, hit)
        self.responses: list[int] = []
        self.n = len(requests)

    def finished(self) -> bool:
        return len(self.responses) == self.n

    def inputs(self, ret_locked: int) -> dict:
        inp = idle_inputs(self.cfg)
        if self.pending and self.now >= self.next_present and self.free_slots:
            _, (_, page, nbytes) = self.pending[0]
            ch, local, sub = self.map.channel_of(page)
            inp.update(disp_valid=1, page=page, channel=ch, local=local, subarray=sub,
                       bytes=nbytes, slot=min(self.free_slots))
        inp.update(self.back.inputs(self.now, ret_locked))
        return inp

    def observe(self, inp: dict, out: dict) -> None:
        if inp["disp_valid"] and out["disp_ready"]:
            req, _ = self.pending.popleft()
            self.free_slots.remove(inp["slot"])
            self.slot_req[inp["slot"]] = req
            self.dispatched.append((req, out["disp_index"], out["disp_hit"]))
            if self.pending:
                self.next_present = self.now + 1 + self.pending[0][1][0]
        slot = self.back.observe(inp, out)
        if slot is not None:
            self.responses.append(self.slot_req.pop(slot))
            self.free_slots.add(slot)  # usable again from the next cycle (§4.1)
        self.now += 1


def run_lockstep(cfg, requests, seed, max_cycles=5000, **env_kw) -> Env:
    """Run RTL and reference side by side; assert equal outputs in every cycle."""
    dut = Mshr(cfg)
    ref = RefMshr(cfg)
    env = Env(cfg, requests, seed, **env_kw)

    async def tb(ctx):
        while not env.finished():
            assert env.now < max_cycles, "the table did not drain"
            inp = env.inputs(ref.locked)
            apply_inputs(ctx, dut, inp)
            got, want = read_outputs(ctx, dut, inp), ref.comb(inp)
            assert got == want, f"cycle {env.now}: RTL {got} != reference {want}"
            env.observe(inp, want)
            ref.tick(inp)
            await ctx.tick()
        # Nothing left behind: every entry FREE, nothing offered, nothing locked.
        idle = idle_inputs(cfg)
        apply_inputs(ctx, dut, idle)
        assert read_outputs(ctx, dut, idle) == ref.comb(idle)
        assert all(x.state == FREE for x in ref.e)
        assert read_outputs(ctx, dut, idle)["enq"] == [None] * cfg.channels
        assert not ctx.get(dut.ret.valid) and not ctx.get(dut.ret_locked)

    simulate(dut, tb)
    check_groups(env.n, env.dispatched, env.responses)
    return env


# ------------------------------------------------------------------ tests ----

def random_requests(rng: random.Random, n: int, pages: int, max_gap: int):
    return [(rng.choice([0, 0, 0, rng.randint(0, max_gap)]), rng.randrange(pages),
             rng.choice([32, 64, 128, 4096, rng.randint(1, 4096)])) for _ in range(n)]


CASES = {
    "demand": dict(),
    "aggregation-window": dict(read_mode="aggregation", read_agg_window_ticks=6,
                               read_agg_threshold_bytes=4096),
    "aggregation-threshold": dict(read_mode="aggregation", read_agg_window_ticks=40,
                                  read_agg_threshold_bytes=256),
    "aggregation-window-0": dict(read_mode="aggregation", read_agg_window_ticks=0),
    "one-channel-two-entries": dict(channels=1, mshr_entries=2, admission=8),
    "four-channels-odd-sizes": dict(channels=4, mshr_entries=5, admission=11),
    "merging-off": dict(mshr_merge=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mshr_matches_reference(name):
    cfg = small_config(**CASES[name])
    rng = random.Random(name)
    run_lockstep(cfg, random_requests(rng, 120, pages=12, max_gap=6), seed=len(name))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**32 - 1),
       requests=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9), st.integers(1, 4096)),
                         min_size=1, max_size=40),
       p=st.tuples(*[st.floats(0.1, 1.0)] * 4))
def test_mshr_matches_reference_random(case, seed, requests, p):
    cfg = small_config(**CASES[case])
    run_lockstep(cfg, requests, seed, p_enq=p[0], p_issue=p[1], p_sel=p[2], p_ready=p[3])


def test_shared_staging_one_read_31_hits():
    """sources.md §studies "shared staging": 32 requests to one page, 1 read + 31 MSHR hits."""
    cfg = small_config(admission=32)
    env = run_lockstep(cfg, [(0, 7, 128)] * 32, seed=1, min_latency=40, max_latency=40)
    assert sum(hit for _, _, hit in env.dispatched) == 31
    assert env.responses == list(range(32))


# ---- directed cycle timings ----

class Driver:
    """Hand-written stimulus: idle inputs unless a cycle says otherwise."""

    def __init__(self, ctx, dut, cfg):
        self.ctx, self.dut, self.cfg, self.map = ctx, dut, cfg, GoldenMapper(cfg)

    def inputs(self, read=None, **kw) -> dict:
        inp = idle_inputs(self.cfg)
        if read is not None:
            page, nbytes, slot = read
            ch, local, sub = self.map.channel_of(page)
            inp.update(disp_valid=1, page=page, channel=ch, local=local, subarray=sub,
                       bytes=nbytes, slot=slot)
        inp.update(kw)
        return inp

    def step(self, read=None, **kw) -> dict:
        """Drive one cycle; return the outputs seen in it."""
        inp = self.inputs(read, **kw)
        apply_inputs(self.ctx, self.dut, inp)
        return read_outputs(self.ctx, self.dut, inp)


def run_directed(cfg, body):
    dut = Mshr(cfg)

    async def tb(ctx):
        await body(Driver(ctx, dut, cfg), ctx)

    simulate(dut, tb)


def test_isolated_read_timing():
    """Allocate in tm, offered to the queue from tm+1, RETURN at tc+1, FREE after the response."""
    cfg = small_config()

    async def body(d, ctx):
        out = d.step(read=(4, 64, 3))  # page 4 -> channel 0, local 2, subarray 2
        assert (out["disp_ready"], out["disp_hit"], out["disp_index"]) == (1, 0, 0)
        assert out["enq"] == [None, None]
        await ctx.tick()
        assert d.step(enq_ready=[1, 0])["enq"] == [(0, 2, 2), None]  # tq = tm + 1
        await ctx.tick()
        assert d.step()["enq"] == [None, None]
        await ctx.tick()
        d.step(issue=[(1, 0), (0, 0)])
        await ctx.tick()
        assert d.step(done=[(1, 0, 1, 0), (0, 0, 0, 0)])["ret"] is None
        await ctx.tick()
        # The new read of page 4 in the RETURN cycle does not merge: entry 1 (R3, §4.3).
        out = d.step(read=(4, 32, 5), ret_sel=1, ret_ready=1)
        assert out["ret"] == (0, 3, 0, 1, 1, 0)
        assert (out["disp_hit"], out["disp_index"]) == (0, 1)
        await ctx.tick()
        out = d.step(read=(9, 32, 6))  # entry 0 is FREE again: lowest free index
        assert (out["ret"], out["disp_index"], out["ret_locked"]) == (None, 0, 0)

    run_directed(cfg, body)


@pytest.mark.parametrize("window,threshold,second,expect", [
    (6, 4096, None, 6),         # window: tq >= alloc + window
    (6, 4096, (1, 4032), 2),    # threshold reached by a merge in tm+1, visible in tm+2
    (0, 4096, None, 1),         # window 0: the first cycle after allocation (tq > alloc)
    (1, 4096, None, 1),
    (50, 64, None, 1),          # the allocating request alone meets the threshold
])
def test_aggregation_readiness_cycle(window, threshold, second, expect):
    cfg = small_config(read_mode="aggregation", read_agg_window_ticks=window,
                       read_agg_threshold_bytes=threshold)

    async def body(d, ctx):
        d.step(read=(4, 64, 0))
        await ctx.tick()
        for t in range(1, 10):
            read = (4, second[1], 1) if second and t == second[0] else None
            offered = d.step(read=read)["enq"][0] is not None
            assert offered == (t >= expect), f"cycle {t}"
            await ctx.tick()

    run_directed(cfg, body)


def test_full_table_stalls_misses_but_not_hits():
    cfg = small_config(mshr_entries=4)

    async def body(d, ctx):
        for i in range(4):
            out = d.step(read=(10 + i, 64, i))
            assert (out["disp_ready"], out["disp_index"]) == (1, i)
            await ctx.tick()
        assert d.step(read=(20, 64, 5))["disp_ready"] == 0
        out = d.step(read=(12, 64, 5))
        assert (out["disp_ready"], out["disp_hit"], out["disp_index"]) == (1, 1, 2)

    run_directed(cfg, body)


def test_chosen_entry_drains_before_a_lower_one():
    """§8: the arbiter keeps draining the entry it chose, even when a lower index returns."""
    cfg = small_config(channels=1)

    async def body(d, ctx):
        # Entries 0 (page 1) and 1 (page 2, two waiters), both queued and issued.
        for read in [(1, 64, 0), (2, 64, 1), (2, 64, 2)]:
            d.step(read=read)
            await ctx.tick()
        d.step(enq_ready=[1])  # entry 0 (lowest index) first
        await ctx.tick()
        d.step(enq_ready=[1], issue=[(1, 0)])
        await ctx.tick()
        d.step(issue=[(1, 1)])
        await ctx.tick()
        d.step(done=[(1, 1, 0, 0)])
        await ctx.tick()
        out = d.step(ret_sel=1, ret_ready=1, done=[(1, 0, 0, 0)])
        assert out["ret"] == (1, 1, 0, 0, 0, 0)  # first waiter of entry 1
        await ctx.tick()
        out = d.step(ret_sel=1, ret_ready=0)  # no handshake: entry 1 stays chosen
        assert (out["ret"], out["ret_locked"]) == ((1, 2, 0, 1, 0, 0), 1)
        await ctx.tick()
        assert d.step(ret_sel=1, ret_ready=1)["ret"] == (1, 2, 0, 1, 0, 0)
        await ctx.tick()
        assert d.step(ret_sel=1, ret_ready=1)["ret"] == (0, 0, 0, 1, 0, 0)

    run_directed(cfg, body)


@pytest.mark.parametrize("event", ["done-on-wait", "issue-on-free", "drop-sel-while-locked"])
def test_protocol_violations_trip_assertions(event):
    cfg = small_config(channels=1)

    async def body(d, ctx):
        d.step(read=(3, 64, 0))
        await ctx.tick()
        d.step(read=(3, 64, 1))
        await ctx.tick()
        if event == "done-on-wait":
            d.step(done=[(1, 0, 0, 0)])
        elif event == "issue-on-free":
            d.step(issue=[(1, 5)])
        else:
            d.step(enq_ready=[1])
            await ctx.tick()
            d.step(issue=[(1, 0)])
            await ctx.tick()
            d.step(done=[(1, 0, 0, 0)])
            await ctx.tick()
            d.step(ret_sel=1, ret_ready=1)
            await ctx.tick()
            d.step(ret_sel=0)
        await ctx.tick()

    with pytest.raises(AssertionError, match="not QUEUED|not ISSUED|ret_sel dropped"):
        run_directed(cfg, body)


def test_v2_match_vector_take_and_free_after_the_last_launch():
    """Contract 2 (timing-contract.md §4.2, §4.3, §8): a read merges by M's match vector
    (``disp_match``), not by a page compare; a ``ret`` handshake is R taking the waiter;
    once every waiter is taken the entry is no longer offered but stays in use until
    ``launched`` names it, FREE from the next cycle."""
    cfg = small_config(contract=2)

    async def body(d, ctx):
        dut = d.dut
        ctx.set(dut.disp_match, 0)
        out = d.step(read=(4, 64, 3))
        assert (out["disp_hit"], out["disp_index"]) == (0, 0)
        await ctx.tick()
        # the same page without the vector's bit: no merge (the table compares no page)
        assert d.step(read=(4, 32, 5))["disp_hit"] == 0
        ctx.set(dut.disp_match, 0b1)
        out = d.step(read=(4, 32, 5))
        assert (out["disp_hit"], out["disp_index"]) == (1, 0)
        await ctx.tick()
        ctx.set(dut.disp_match, 0)
        d.step(enq_ready=[1, 0])
        await ctx.tick()
        d.step(issue=[(1, 0), (0, 0)])
        await ctx.tick()
        d.step(done=[(1, 0, 0, 0), (0, 0, 0, 0)])
        await ctx.tick()
        assert d.step(ret_sel=1, ret_ready=1)["ret"] == (0, 3, 0, 0, 0, 0)   # R takes 3
        await ctx.tick()
        assert d.step(ret_sel=1, ret_ready=1)["ret"] == (0, 5, 0, 1, 0, 0)   # and 5 (last)
        await ctx.tick()
        out = d.step(read=(9, 32, 6))       # drained: not offered, still not FREE
        assert (out["ret"], out["ret_locked"], out["disp_index"]) == (None, 0, 1)
        await ctx.tick()
        ctx.set(dut.launched, {"valid": 1, "index": 0})
        assert d.step()["ret"] is None
        await ctx.tick()
        ctx.set(dut.launched, {"valid": 0, "index": 0})
        assert d.step(read=(11, 32, 7))["disp_index"] == 0     # FREE from the next cycle

    run_directed(cfg, body)
