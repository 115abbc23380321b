"""The RTL write coverage buffer against a plain-Python reference (contract §4.2, §4.4, §5, §8).

The reference is written from the contract: absolute alloc and deadline cycles instead of an
age matrix and down-counters, Python integers as coverage bitmaps. RTL and reference run in
lockstep; the environment (request source, a read waiting in M, MSHR pages, drain, queues,
media, arbiter) is randomised and reacts only to outputs.
"""

from __future__ import annotations

import gc
import random
from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtl_helpers import (BackEnd, apply_backend, check_groups, idle_backend, read_backend,
                         simulate, small_config)

from hbfsim.model.mapping import Mapper as GoldenMapper
from hbfsim.rtl.write_buffer import WriteBuffer

FREE, OPEN, FLUSH, QUEUED, PROGRAM, RETURN = "FREE OPEN FLUSH QUEUED PROGRAM RETURN".split()
CAUSES = ("NONE", "FULL", "RAW", "PRESSURE", "DEADLINE", "DRAIN")


@dataclass
class RefEntry:
    state: str = FREE
    page: int = 0
    channel: int = 0
    local: int = 0
    subarray: int = 0
    cov: int = 0
    alloc: int = 0
    deadline: int = 0
    cause: str = "NONE"
    pressure: bool = False
    waiters: list = field(default_factory=list)
    error: int = 0


class RefWb:
    """Cycle-level reference of the write buffer, ports as dictionaries."""

    def __init__(self, cfg, sector_bytes=1):
        self.cfg = cfg
        self.g = sector_bytes
        self.full = (1 << (4096 // sector_bytes)) - 1
        self.e = [RefEntry() for _ in range(cfg.write_buffer_entries)]
        self.locked = False
        self.lock_index = 0
        self.now = 0

    def _mask(self, offset, nbytes):
        lo, hi = offset // self.g, (offset + nbytes - 1) // self.g
        return ((1 << (hi + 1)) - 1) & ~((1 << lo) - 1)

    def _eligible(self, i, inp):
        x = self.e[i]
        if x.state != FLUSH:
            return False
        if self.cfg.write_timeout_policy == "strict" and x.cov != self.full:
            return False
        if any(y.state != FREE and y.page == x.page and y.alloc < x.alloc for y in self.e):
            return False
        return not any(busy and page == x.page for page, busy in inp["mshr"])

    def comb(self, inp: dict) -> dict:
        e = self.e
        match = [i for i, x in enumerate(e) if x.state == OPEN and x.page == inp["page"]]
        free = [i for i, x in enumerate(e) if x.state == FREE]
        out = {"disp_ready": int(bool(match or free)), "disp_merge": int(bool(match)),
               "disp_index": match[0] if match else (free[0] if free else 0)}
        if not inp["disp_valid"]:
            out["disp_ready"] = out["disp_merge"] = out["disp_index"] = None
        out["probe_block"] = int(any(x.state != FREE and x.page == inp["probe_page"] for x in e))
        enq = []
        for c in range(self.cfg.channels):
            cand = [i for i, x in enumerate(e) if x.channel == c and self._eligible(i, inp)]
            enq.append((cand[0], e[cand[0]].subarray, e[cand[0]].local) if cand else None)
        out["enq"] = enq
        ret = [i for i, x in enumerate(e) if x.state == RETURN]
        cur = self.lock_index if self.locked else (ret[0] if ret else None)
        if cur is None:
            out["ret"] = None
        else:
            x = e[cur]
            out["ret"] = (cur, x.waiters[0], x.channel, int(len(x.waiters) == 1), 0, x.error)
        out["ret_locked"] = int(self.locked)
        out["occupied"] = sum(x.state != FREE for x in e)
        out["programs_queued"] = int(any(x.state == QUEUED for x in e))
        out["cause"] = [x.cause for x in e]
        return out

    def tick(self, inp: dict) -> None:
        cfg, e, now = self.cfg, self.e, self.now
        out = self.comb(inp)
        opens = [i for i, x in enumerate(e) if x.state == OPEN]
        stalled = inp["disp_valid"] and not out["disp_ready"]
        pressure_live = any(x.state != FREE and x.pressure for x in e)
        victim = min(opens, key=lambda i: e[i].alloc) if opens else None
        flushes = {}
        for i in opens:
            x = e[i]
            is_victim = stalled and not pressure_live and i == victim
            if is_victim:
                x.pressure = True
            for cause, cond in (("FULL", x.cov == self.full),
                                ("RAW", inp["probe_valid"] and x.page == inp["probe_page"]),
                                ("PRESSURE", is_victim),
                                ("DEADLINE", now >= x.deadline),
                                ("DRAIN", inp["drain"])):
                if cond:
                    flushes[i] = cause
                    break
        strict_errors = [i for i, x in enumerate(e) if x.state == FLUSH and x.cov != self.full
                         and cfg.write_timeout_policy == "strict"]
        if inp["disp_valid"] and out["disp_ready"]:
            i, mask = out["disp_index"], self._mask(inp["offset"], inp["bytes"])
            if out["disp_merge"]:
                e[i].cov |= mask
                e[i].waiters.append(inp["slot"])
            else:
                e[i] = RefEntry(OPEN, inp["page"], inp["channel"], inp["local"], inp["subarray"],
                                mask, now, now + cfg.write_deadline_ticks, waiters=[inp["slot"]])
        for i, cause in flushes.items():
            e[i].state, e[i].cause = FLUSH, cause
        for i in strict_errors:
            e[i].state, e[i].error = RETURN, 1
        for c, offer in enumerate(out["enq"]):
            if offer is not None and inp["enq_ready"][c]:
                e[offer[0]].state = QUEUED
        for valid, index in inp["issue"]:
            if valid:
                assert e[index].state == QUEUED
                e[index].state = PROGRAM
        for valid, index, _, error in inp["done"]:
            if valid:
                assert e[index].state == PROGRAM
                e[index].state, e[index].error = RETURN, error
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

def idle_inputs(cfg) -> dict:
    return dict(disp_valid=0, page=0, channel=0, local=0, subarray=0, offset=0, bytes=1, slot=0,
                probe_valid=0, probe_page=0, drain=0, mshr=[(0, 0)] * cfg.mshr_entries,
                **idle_backend(cfg))


def apply_inputs(ctx, dut, inp: dict) -> None:
    ctx.set(dut.disp.valid, inp["disp_valid"])
    ctx.set(dut.disp.payload, {"page": inp["page"], "offset": inp["offset"],
                               "bytes": inp["bytes"], "slot": inp["slot"],
                               "target": {"channel": inp["channel"], "local": inp["local"],
                                          "subarray": inp["subarray"]}})
    ctx.set(dut.probe, {"valid": inp["probe_valid"], "page": inp["probe_page"]})
    ctx.set(dut.drain, inp["drain"])
    ctx.set(dut.mshr_tags, [page for page, _ in inp["mshr"]])
    ctx.set(dut.mshr_pending, sum(busy << k for k, (_, busy) in enumerate(inp["mshr"])))
    apply_backend(ctx, dut, inp)


def read_outputs(ctx, dut, inp: dict) -> dict:
    out = read_backend(ctx, dut, "WBUF")
    if inp["disp_valid"]:
        out.update(disp_ready=ctx.get(dut.disp.ready), disp_merge=ctx.get(dut.disp_merge),
                   disp_index=ctx.get(dut.disp_index))
    else:
        out.update(disp_ready=None, disp_merge=None, disp_index=None)
    out["probe_block"] = ctx.get(dut.probe_block)
    out["occupied"] = ctx.get(dut.occupied)
    out["programs_queued"] = ctx.get(dut.programs_queued)
    out["cause"] = [c.name for c in ctx.get(dut.cause)]
    return out


# ------------------------------------------------------------- environment ----

class Env:
    """Writes with admission slots, a read waiting in M, MSHR pages and drain; BackEnd behind.

    Parameters
    ----------
    requests : list of (gap, page, offset, bytes)
        Writes in arrival order.
    seed : int
        Drives the probe, the MSHR pages, drain and every back-end decision.
    """

    def __init__(self, cfg, requests, seed, *, pages=6, p_probe=0.05, p_mshr=0.05,
                 p_drain=0.01, **backend_kw):
        self.cfg = cfg
        self.map = GoldenMapper(cfg)
        self.rng = random.Random(seed)
        self.back = BackEnd(cfg, self.rng, **backend_kw)
        self.pending = deque(enumerate(requests))
        self.next_present = requests[0][0] if requests else 0
        self.free_slots = set(range(cfg.admission))
        self.pages, self.p_probe, self.p_mshr, self.p_drain = pages, p_probe, p_mshr, p_drain
        self.probe = None  # (page, cycles left)
        self.mshr = [(0, 0)] * cfg.mshr_entries
        self.now = 0
        self.slot_req: dict[int, int] = {}
        self.dispatched: list[tuple[int, int, int]] = []
        self.responses: list[int] = []
        self.errors: set[int] = set()
        self.n = len(requests)

    def finished(self) -> bool:
        return len(self.responses) == self.n

    def inputs(self, ret_locked: int) -> dict:
        rng = self.rng
        inp = idle_inputs(self.cfg)
        if self.pending and self.now >= self.next_present and self.free_slots:
            _, (_, page, offset, nbytes) = self.pending[0]
            ch, local, sub = self.map.channel_of(page, write=True)
            inp.update(disp_valid=1, page=page, channel=ch, local=local, subarray=sub,
                       offset=offset, bytes=nbytes, slot=min(self.free_slots))
        if self.probe is None and rng.random() < self.p_probe:
            self.probe = (rng.randrange(self.pages), rng.randint(1, 6))
        if self.probe is not None:
            inp.update(probe_valid=1, probe_page=self.probe[0])
            self.probe = (self.probe[0], self.probe[1] - 1) if self.probe[1] > 1 else None
        self.mshr = [(rng.randrange(self.pages), 1 - busy) if rng.random() < self.p_mshr
                     else (page, busy) for page, busy in self.mshr]
        inp["mshr"] = list(self.mshr)
        # The drain level: now and then, and always once every write is in (idle tail, W2).
        inp["drain"] = int(not self.pending or rng.random() < self.p_drain)
        inp.update(self.back.inputs(self.now, ret_locked))
        return inp

    def observe(self, inp: dict, out: dict) -> None:
        if inp["disp_valid"] and out["disp_ready"]:
            req, _ = self.pending.popleft()
            self.free_slots.remove(inp["slot"])
            self.slot_req[inp["slot"]] = req
            self.dispatched.append((req, out["disp_index"], out["disp_merge"]))
            if self.pending:
                self.next_present = self.now + 1 + self.pending[0][1][0]
        slot = self.back.observe(inp, out)
        if slot is not None:
            req = self.slot_req.pop(slot)
            self.responses.append(req)
            if out["ret"][5]:
                self.errors.add(req)
            self.free_slots.add(slot)
        self.now += 1


def run_lockstep(cfg, requests, seed, sector_bytes=1, max_cycles=6000, **env_kw) -> Env:
    dut = WriteBuffer(cfg, sector_bytes=sector_bytes)
    ref = RefWb(cfg, sector_bytes)
    env = Env(cfg, requests, seed, **env_kw)

    async def tb(ctx):
        while not env.finished():
            assert env.now < max_cycles, "the buffer did not drain"
            inp = env.inputs(ref.locked)
            apply_inputs(ctx, dut, inp)
            got, want = read_outputs(ctx, dut, inp), ref.comb(inp)
            assert got == want, f"cycle {env.now}: RTL {got} != reference {want}"
            env.observe(inp, want)
            ref.tick(inp)
            await ctx.tick()
        idle = idle_inputs(cfg)
        apply_inputs(ctx, dut, idle)
        out = read_outputs(ctx, dut, idle)
        assert out == ref.comb(idle)
        assert (out["occupied"], out["ret"], out["ret_locked"]) == (0, None, 0)

    simulate(dut, tb)
    check_groups(env.n, env.dispatched, env.responses)
    return env


def random_writes(rng: random.Random, n: int, pages: int, max_gap: int):
    out = []
    for _ in range(n):
        kind = rng.randrange(4)
        if kind == 0:
            offset, nbytes = 0, 4096
        elif kind == 1:
            offset, nbytes = 1024 * rng.randrange(4), 1024
        elif kind == 2:
            offset, nbytes = 32 * rng.randrange(128), 32
        else:
            offset = rng.randrange(4096)
            nbytes = rng.randint(1, 4096 - offset)
        out.append((rng.choice([0, 0, rng.randint(0, max_gap)]), rng.randrange(pages), offset,
                    nbytes))
    return out


CASES = {
    "strict": dict(write_deadline_ticks=30),
    "partial": dict(write_timeout_policy="partial", write_deadline_ticks=30),
    "short-deadline": dict(write_deadline_ticks=1),
    "two-entries-pressure": dict(write_buffer_entries=2, write_deadline_ticks=200),
    "four-channels-odd": dict(channels=4, write_buffer_entries=5, admission=11,
                              write_deadline_ticks=17),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_write_buffer_matches_reference(name):
    cfg = small_config(**CASES[name])
    rng = random.Random(name)
    run_lockstep(cfg, random_writes(rng, 120, pages=6, max_gap=5), seed=len(name))


@pytest.mark.parametrize("sector_bytes", [32, 4096])
def test_write_buffer_sector_granularity_matches_reference(sector_bytes):
    cfg = small_config(write_deadline_ticks=25)
    rng = random.Random(sector_bytes)
    run_lockstep(cfg, random_writes(rng, 80, pages=5, max_gap=5), seed=3,
                 sector_bytes=sector_bytes)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**32 - 1),
       writes=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4),
                                 st.sampled_from([0, 1024, 2048, 3072, 4000]),
                                 st.sampled_from([1, 96, 1024, 2048, 4096])),
                       min_size=1, max_size=40))
def test_write_buffer_matches_reference_random(case, seed, writes):
    cfg = small_config(**CASES[case])
    writes = [(g, p, o, min(n, 4096 - o)) for g, p, o, n in writes]
    run_lockstep(cfg, writes, seed, p_probe=0.1, p_mshr=0.1, p_drain=0.02)


# ---- directed cycle timings ----

class Driver:
    def __init__(self, ctx, dut, cfg):
        self.ctx, self.dut, self.cfg, self.map = ctx, dut, cfg, GoldenMapper(cfg)

    def step(self, write=None, **kw) -> dict:
        inp = idle_inputs(self.cfg)
        if write is not None:
            page, offset, nbytes, slot = write
            ch, local, sub = self.map.channel_of(page, write=True)
            inp.update(disp_valid=1, page=page, channel=ch, local=local, subarray=sub,
                       offset=offset, bytes=nbytes, slot=slot)
        inp.update(kw)
        apply_inputs(self.ctx, self.dut, inp)
        return read_outputs(self.ctx, self.dut, inp)


def run_directed(cfg, body, sector_bytes=1):
    dut = WriteBuffer(cfg, sector_bytes=sector_bytes)

    async def tb(ctx):
        await body(Driver(ctx, dut, cfg), ctx)

    simulate(dut, tb)


def test_full_page_flushes_the_cycle_after_coverage_completes():
    cfg = small_config(write_deadline_ticks=1000)

    async def body(d, ctx):
        for k in range(4):  # four quarters; the last completes coverage in cycle 3
            out = d.step(write=(6, 1024 * k, 1024, k))
            assert (out["disp_merge"], out["disp_index"]) == (int(k > 0), 0)
            await ctx.tick()
        assert d.step()["cause"][0] == "NONE"    # cycle 4: complete at its start -> FLUSH
        await ctx.tick()
        out = d.step(enq_ready=[1, 1])          # cycle 5: FLUSH, eligible, enqueued
        assert out["cause"][0] == "FULL" and out["enq"] == [(0, 3, 3), None]
        await ctx.tick()
        assert d.step()["programs_queued"] == 1

    run_directed(cfg, body)


@pytest.mark.parametrize("policy", ["strict", "partial"])
def test_deadline_flush_and_timeout_policy(policy):
    cfg = small_config(write_deadline_ticks=5, write_timeout_policy=policy)

    async def body(d, ctx):
        d.step(write=(2, 0, 64, 9))
        await ctx.tick()
        for t in range(1, 6):
            assert d.step()["cause"][0] == "NONE", f"cycle {t}"
            await ctx.tick()
        out = d.step()  # cycle 6: FLUSH since the deadline cycle 5
        assert out["cause"][0] == "DEADLINE"
        if policy == "strict":
            assert out["enq"] == [None, None]
            await ctx.tick()
            out = d.step(ret_sel=1, ret_ready=1)  # RETURN the cycle after the error decision
            assert out["ret"] == (0, 9, 0, 1, 0, 1)
        else:
            assert out["enq"] == [(0, 1, 1), None]  # padded and programmed (W3)

    run_directed(cfg, body)


def test_read_after_write_probe_flushes_once_and_blocks_until_free():
    cfg = small_config(write_deadline_ticks=1000)

    async def body(d, ctx):
        d.step(write=(3, 0, 64, 0))
        await ctx.tick()
        out = d.step(probe_valid=1, probe_page=3)
        assert out["probe_block"] == 1 and out["cause"][0] == "NONE"
        await ctx.tick()
        out = d.step(probe_valid=1, probe_page=3)
        assert out["probe_block"] == 1 and out["cause"][0] == "RAW"
        assert d.step(probe_valid=1, probe_page=4)["probe_block"] == 0

    run_directed(cfg, body)


def test_pressure_flushes_the_oldest_open_entry_once_at_a_time():
    cfg = small_config(write_buffer_entries=2, write_deadline_ticks=1000)

    async def body(d, ctx):
        d.step(write=(5, 0, 64, 0))
        await ctx.tick()
        d.step(write=(4, 0, 64, 1))
        await ctx.tick()
        out = d.step(write=(7, 0, 64, 2))  # no free entry: stall, entry 0 (oldest) flushes
        assert out["disp_ready"] == 0
        await ctx.tick()
        out = d.step(write=(7, 0, 64, 2))
        assert out["cause"] == ["PRESSURE", "NONE"] and out["disp_ready"] == 0
        await ctx.tick()
        # Entry 0 is not FREE yet (strict error, then its response): no second victim.
        out = d.step(write=(7, 0, 64, 2))
        assert out["cause"] == ["PRESSURE", "NONE"]
        assert out["ret"] == (0, 0, 1, 1, 0, 1)

    run_directed(cfg, body)


def test_full_outranks_deadline_and_drain_skips_new_entries():
    cfg = small_config(write_deadline_ticks=1)

    async def body(d, ctx):
        d.step(write=(8, 0, 4096, 0), drain=1)  # allocated in a drain cycle: not affected
        await ctx.tick()
        d.step(drain=1)
        await ctx.tick()
        assert d.step()["cause"][0] == "FULL"

    run_directed(cfg, body)


def test_flushes_of_one_page_are_serialized_and_wait_for_reads():
    cfg = small_config(write_deadline_ticks=1000)

    async def body(d, ctx):
        d.step(write=(6, 0, 4096, 0))
        await ctx.tick()
        d.step()
        await ctx.tick()
        d.step(enq_ready=[1, 1])           # entry 0 QUEUED
        await ctx.tick()
        out = d.step(write=(6, 0, 4096, 1))  # a later write opens entry 1 (W4)
        assert (out["disp_merge"], out["disp_index"]) == (0, 1)
        await ctx.tick()
        d.step(issue=[(1, 0), (0, 0)])
        await ctx.tick()
        for _ in range(3):  # entry 1 is FLUSH (full) but entry 0 of its page is in use
            out = d.step(done=[(1, 0, 0, 0), (0, 0, 0, 0)] if _ == 0 else [(0, 0, 0, 0)] * 2)
            assert out["enq"] == [None, None]
            await ctx.tick()
        out = d.step(ret_sel=1, ret_ready=1)
        assert out["ret"][:2] == (0, 0)
        await ctx.tick()
        busy = [(6, 1)] + [(0, 0)] * (cfg.mshr_entries - 1)
        assert d.step(mshr=busy)["enq"] == [None, None]   # a mergeable read of page 6 first
        assert d.step()["enq"] == [(1, 3, 3), None]

    run_directed(cfg, body)


@pytest.mark.parametrize("sector_bytes,full", [(1, False), (32, True)])
def test_coverage_granularity(sector_bytes, full):
    cfg = small_config(write_deadline_ticks=1000)

    async def body(d, ctx):
        d.step(write=(1, 0, 16, 0))
        await ctx.tick()
        d.step(write=(1, 32, 4064, 1))
        await ctx.tick()
        d.step()
        await ctx.tick()
        assert (d.step()["cause"][0] == "FULL") == full

    run_directed(cfg, body, sector_bytes)


@pytest.mark.parametrize("sector_bytes", [0, 48, 8192, 2.0])
def test_sector_bytes_is_validated(sector_bytes):
    with pytest.raises(ValueError, match="sector_bytes must be a power of two"):
        WriteBuffer(small_config(), sector_bytes=sector_bytes)
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind


def test_protocol_violation_trips_an_assertion():
    cfg = small_config()

    async def body(d, ctx):
        d.step(write=(1, 0, 64, 0))
        await ctx.tick()
        d.step(done=[(1, 0, 0, 0), (0, 0, 0, 0)])
        await ctx.tick()

    with pytest.raises(AssertionError, match="not PROGRAM"):
        run_directed(cfg, body)


def test_v2_match_vectors_and_free_after_the_last_launch():
    """Contract 2 (timing-contract.md §4.2, §4.4, §8): writes merge by M's OPEN vector
    (``disp_open``) and the read-after-write probe uses M's in-use vector (``probe_used``);
    the table exports ``tags``, ``in_use`` and ``is_open`` for the lookup; after R has taken
    every waiter the entry still blocks a read of its page until ``launched`` frees it."""
    cfg = small_config(write_deadline_ticks=1000, contract=2)

    async def body(d, ctx):
        dut = d.dut
        ctx.set(dut.launched, {"valid": 0, "index": 0})
        for k in range(4):       # four quarters of page 6: allocate, then merge by vector
            ctx.set(dut.disp_open, int(k > 0))
            out = d.step(write=(6, 1024 * k, 1024, k))
            assert (out["disp_merge"], out["disp_index"]) == (int(k > 0), 0)
            await ctx.tick()
        assert (ctx.get(dut.tags[0]), ctx.get(dut.in_use), ctx.get(dut.is_open)) == (6, 1, 1)
        ctx.set(dut.disp_open, 0)
        # the same page without the vector's bit: no merge (the table compares no page)
        assert d.step(write=(6, 0, 64, 9))["disp_merge"] == 0
        taken = []
        for _ in range(40):      # FLUSH (full), enqueue, PROGRAM, RETURN, R takes 0..3
            ctx.set(dut.probe_used, 0b1)
            out = d.step(probe_valid=1, probe_page=6, enq_ready=[1, 1], ret_sel=1,
                         ret_ready=1)
            assert out["probe_block"] == 1
            for c, offer in enumerate(out["enq"]):
                if offer is not None:
                    await ctx.tick()
                    d.step(issue=[(int(k == c), 0) for k in range(cfg.channels)])
                    await ctx.tick()
                    d.step(done=[(int(k == c), 0, 0, 0) for k in range(cfg.channels)])
            if out["ret"] is not None:
                taken.append(out["ret"][1])
            await ctx.tick()
            if len(taken) == 4:
                break
        assert taken == [0, 1, 2, 3]
        out = d.step(probe_valid=1, probe_page=6)      # drained: in use, not offered
        assert (out["probe_block"], out["ret"], ctx.get(dut.in_use)) == (1, None, 1)
        ctx.set(dut.launched, {"valid": 1, "index": 0})
        await ctx.tick()
        ctx.set(dut.launched, {"valid": 0, "index": 0})
        ctx.set(dut.probe_used, 0)
        out = d.step(probe_valid=1, probe_page=6)
        assert (out["probe_block"], ctx.get(dut.in_use)) == (0, 0)

    run_directed(cfg, body)
