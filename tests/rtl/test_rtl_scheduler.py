"""The RTL scheduler (channel queues, enqueue arbiter, write-drain window) against a reference.

The reference keeps each queue as a Python list with enqueue cycles as ages and the drain
window with absolute ``start`` and ``cooldown`` ticks, as contract §6-§7 words them. The
environment offers random operations and plays the media of contract §1 (completion due at
issue + latency; per channel one delivery per cycle, earliest due first, ties by lowest
subarray). The reference's choice is the *decision* (``dec``, docs/timing-contract.md §7),
taken with this cycle's completion already released (the forwarding), and ``cmd`` must show
the previous cycle's decision (the command register).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtl_helpers import simulate, small_config

from hbfsim.rtl.scheduler import Scheduler

MSHR, WBUF = "MSHR", "WBUF"


class RefScheduler:
    #: how an op names a write-buffer entry (a subclass may use other kinds)
    PROGRAM = WBUF

    def __init__(self, cfg):
        self.cfg = cfg
        c = cfg.channels
        self.queues = [[] for _ in range(c)]   # ops: (age, kind, index, subarray, page)
        self.busy = [set() for _ in range(c)]
        self.active = [0] * c
        self.open = False
        self.start = 0
        self.cooldown = 0
        self.now = 0

    def _window(self, occupied):
        """(open, start, cooldown) for this cycle, from start-of-cycle state (§7)."""
        cfg, t = self.cfg, self.now
        if cfg.scheduler != "write-drain":
            return False, self.start, self.cooldown
        programs = any(op[1] == self.PROGRAM for q in self.queues for op in q)
        if not self.open:
            if occupied >= cfg.write_drain_high_water and programs and t >= self.cooldown:
                return True, t, self.cooldown
            return False, self.start, self.cooldown
        if not programs or t >= self.start + cfg.write_drain_window_ticks:
            return False, self.start, t + cfg.write_drain_window_ticks
        return True, self.start, self.cooldown

    def comb(self, inp):
        cfg = self.cfg
        drain, _, _ = self._window(inp["occupied"])
        out = {"drain_open": int(drain), "mshr_ready": [], "wb_ready": [], "cmd": []}
        # §7: this cycle's completions are released for this cycle's decisions
        busy = [b - ({inp["cpl"][c][0]} if inp["cpl"][c] else set())
                for c, b in enumerate(self.busy)]
        active = [a - (1 if inp["cpl"][c] else 0) for c, a in enumerate(self.active)]
        # stack-wide cap (§7): channels take the stack's free slots in ascending order
        used = sum(active)
        for c, q in enumerate(self.queues):
            room = len(q) < cfg.queue_depth
            out["mshr_ready"].append(int(room))
            out["wb_ready"].append(int(room and inp["mshr"][c] is None))
            cand = [op for op in q if op[3] not in busy[c]]
            if active[c] >= cfg.active_per_channel:
                cand = []
            if cfg.active_total and used >= cfg.active_total:
                cand = []
            reads = [op for op in cand if op[1] == MSHR]
            progs = [op for op in cand if op[1] == WBUF]
            if cfg.scheduler == "fcfs":
                pick = cand[:1]
            elif cfg.scheduler == "write-drain" and drain and progs:
                pick = progs[:1]
            else:
                pick = reads[:1] or cand[:1]
            if pick:
                used += 1
                _, kind, index, sub, page = pick[0]
                out["cmd"].append(("PROGRAM" if kind == WBUF else "READ", sub, page, kind, index))
            else:
                out["cmd"].append(None)
        return out

    def tick(self, inp):
        out = self.comb(inp)
        self.open, self.start, self.cooldown = self._window(inp["occupied"])
        for c, q in enumerate(self.queues):
            cpl = inp["cpl"][c]
            if cpl is not None:     # released first: v2 may decide on the freed subarray
                self.busy[c].discard(cpl[0])
                self.active[c] -= 1
            cmd = out["cmd"][c]
            if cmd is not None:
                op = next(op for op in q if op[3] not in self.busy[c]
                          and (op[1], op[2], op[3], op[4]) == (cmd[3], cmd[4], cmd[1], cmd[2]))
                q.remove(op)
                self.busy[c].add(cmd[1])
                self.active[c] += 1
            for offer, ready in ((inp["mshr"][c], out["mshr_ready"][c]),
                                 (inp["wb"][c], out["wb_ready"][c])):
                if offer is not None and ready:
                    q.append((self.now,) + offer)
        self.now += 1


def apply_inputs(ctx, dut, inp):
    ctx.set(dut.wb_occupied, inp["occupied"])
    for c in range(len(dut.cmd)):
        for port, offer in ((dut.mshr_enq[c], inp["mshr"][c]), (dut.wb_enq[c], inp["wb"][c])):
            ctx.set(port.valid, offer is not None)
            if offer is not None:
                kind, index, sub, page = offer
                ctx.set(port.payload, {"tag": {"kind": 0 if kind == MSHR else 1, "index": index},
                                       "subarray": sub, "page": page})
        cpl = inp["cpl"][c]
        ctx.set(dut.cpl[c], {"valid": cpl is not None, "subarray": cpl[0] if cpl else 0,
                             "tag": {"kind": 0, "index": 0}, "buffer_hit": 0, "error": 0})


def read_outputs(ctx, dut, port="cmd"):
    """The scheduler's outputs; ``port="dec"`` reads this cycle's decisions as ``cmd``."""
    out = {"drain_open": ctx.get(dut.drain_open), "mshr_ready": [], "wb_ready": [], "cmd": []}
    for c in range(len(dut.cmd)):
        out["mshr_ready"].append(ctx.get(dut.mshr_enq[c].ready))
        out["wb_ready"].append(ctx.get(dut.wb_enq[c].ready))
        cmd = ctx.get(getattr(dut, port)[c])
        out["cmd"].append((cmd.op.name, cmd.subarray, cmd.page, cmd.tag.kind.name, cmd.tag.index)
                          if cmd.valid else None)
    return out


class Env:
    """Random offers and write-buffer occupancy in front, the contract's media behind."""

    def __init__(self, cfg, seed, cycles, *, p_offer=0.4, latency=(1, 10)):
        self.cfg, self.rng, self.cycles = cfg, random.Random(seed), cycles
        self.p_offer, self.latency = p_offer, latency
        self.inflight = [[] for _ in range(cfg.channels)]  # (due, subarray)
        self.occupied = 0
        self.now = 0
        self.issued = 0

    def finished(self):
        return self.now >= self.cycles and not any(self.inflight)

    def _offer(self, kind):
        cfg, rng = self.cfg, self.rng
        if self.now >= self.cycles or rng.random() >= self.p_offer:
            return None
        index = rng.randrange(cfg.mshr_entries if kind == MSHR else cfg.write_buffer_entries)
        return (kind, index, rng.randrange(cfg.subarrays_per_channel), rng.randrange(64))

    def inputs(self):
        cfg, rng = self.cfg, self.rng
        self.occupied = min(cfg.write_buffer_entries,
                            max(0, self.occupied + rng.choice([-1, 0, 0, 1])))
        inp = {"occupied": self.occupied, "mshr": [], "wb": [], "cpl": []}
        for c in range(cfg.channels):
            inp["mshr"].append(self._offer(MSHR))
            inp["wb"].append(self._offer(WBUF))
            due = sorted(x for x in self.inflight[c] if x[0] <= self.now)
            if due:
                self.inflight[c].remove(due[0])
                inp["cpl"].append((due[0][1],))
            else:
                inp["cpl"].append(None)
        return inp

    def observe(self, out):
        # the decision of t is on cmd in t + 1, the media's latency counts from there
        ti = self.now + 1
        for c, cmd in enumerate(out["cmd"]):
            if cmd is not None:
                self.inflight[c].append((ti + self.rng.randint(*self.latency), cmd[1]))
                self.issued += 1
        self.now += 1


def run_lockstep(cfg, seed, cycles=300, **env_kw):
    dut = Scheduler(cfg)
    ref = RefScheduler(cfg)
    env = Env(cfg, seed, cycles, **env_kw)
    opened = []

    previous = [None] * cfg.channels

    async def tb(ctx):
        nonlocal previous
        while not env.finished() or any(ref.queues):
            assert env.now < cycles + 5000, "the queues did not empty"
            inp = env.inputs()
            apply_inputs(ctx, dut, inp)
            got, want = read_outputs(ctx, dut, "dec"), ref.comb(inp)
            assert got == want, f"cycle {env.now}: RTL {got} != reference {want}"
            # the command register: last cycle's decision (§7)
            assert read_outputs(ctx, dut)["cmd"] == previous, f"cycle {env.now}"
            previous = want["cmd"]
            opened.append(want["drain_open"])
            env.observe(want)
            ref.tick(inp)
            await ctx.tick()

    simulate(dut, tb)
    return env, opened


CASES = {
    "fcfs": dict(scheduler="fcfs"),
    "read-priority": dict(scheduler="read-priority", active_per_channel=2),
    "write-drain": dict(scheduler="write-drain", write_drain_high_water=2,
                        write_drain_window_ticks=7),
    "write-drain-window-1": dict(scheduler="write-drain", write_drain_high_water=1,
                                 write_drain_window_ticks=1),
    "partition-2r2w": dict(scheduler="partition-2r2w", channels=4, queue_depth=3),
    "deep-odd": dict(scheduler="read-priority", subarrays_per_channel=3, queue_depth=5,
                     active_per_channel=3, channels=1),
    # a stack-wide cap below the channels' sum: 4 channels x 2 slots share 3 (§7)
    "active-total": dict(scheduler="read-priority", channels=4, active_per_channel=2,
                         active_total=3),
    "active-total-1": dict(scheduler="write-drain", channels=4, active_total=1,
                           write_drain_high_water=1, write_drain_window_ticks=5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scheduler_matches_reference(name):
    cfg = small_config(**CASES[name])
    env, opened = run_lockstep(cfg, seed=len(name))
    assert env.issued > 50
    if cfg.scheduler == "write-drain":
        assert 0 < sum(opened) < len(opened)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**32 - 1),
       p_offer=st.floats(0.05, 1.0), max_latency=st.integers(1, 30))
def test_scheduler_matches_reference_random(case, seed, p_offer, max_latency):
    cfg = small_config(**CASES[case])
    run_lockstep(cfg, seed, cycles=150, p_offer=p_offer, latency=(1, max_latency))


# ---- directed ----

def run_directed(cfg, body):
    dut = Scheduler(cfg)

    async def tb(ctx):
        await body(ctx, dut)

    simulate(dut, tb)


def idle(cfg, **kw):
    inp = {"occupied": 0, "mshr": [None] * cfg.channels, "wb": [None] * cfg.channels,
           "cpl": [None] * cfg.channels}
    inp.update(kw)
    return inp


def step(ctx, dut, cfg, port="dec", **kw):
    """Apply one cycle's inputs; the outputs with this cycle's issue decisions as ``cmd``
    (``port="cmd"``: the command register, last cycle's decisions)."""
    apply_inputs(ctx, dut, idle(cfg, **kw))
    return read_outputs(ctx, dut, port)


@pytest.mark.parametrize("policy,first", [("fcfs", "PROGRAM"), ("read-priority", "READ"),
                                          ("write-drain", "READ")])
def test_policy_choice_and_enqueue_to_issue_latency(policy, first):
    cfg = small_config(channels=1, scheduler=policy, active_per_channel=1)

    async def body(ctx, dut):
        out = step(ctx, dut, cfg, mshr=[(MSHR, 0, 0, 10)])
        assert out["cmd"] == [None]  # enqueued in t, issuable from t+1
        await ctx.tick()
        out = step(ctx, dut, cfg, wb=[(WBUF, 1, 1, 11)])
        assert out["cmd"] == [("READ", 0, 10, MSHR, 0)]  # takes the only active slot
        await ctx.tick()
        step(ctx, dut, cfg, mshr=[(MSHR, 2, 2, 12)])
        await ctx.tick()
        # The completion in tc releases the slot for the decision of tc (§7): an older
        # PROGRAM and a younger READ, both on free subarrays, and the policy decides.
        assert step(ctx, dut, cfg, cpl=[(0,)])["cmd"][0][0] == first

    run_directed(cfg, body)


def test_busy_subarray_and_active_cap_without_head_of_line_blocking():
    cfg = small_config(channels=1, active_per_channel=2)

    async def body(ctx, dut):
        for op in [(MSHR, 0, 1, 5), (MSHR, 1, 1, 6), (MSHR, 2, 2, 7), (MSHR, 3, 3, 8)]:
            step(ctx, dut, cfg, mshr=[op])
            await ctx.tick()
        # Cycles 1..3 issued op 0 (subarray 1) and op 2 (subarray 2; op 1 waits for subarray 1).
        out = step(ctx, dut, cfg)
        assert out["cmd"] == [None]  # two active: the cap holds op 3 back
        await ctx.tick()
        # completion on subarray 1 in tc: released for the decision of tc (§7), oldest first
        out = step(ctx, dut, cfg, cpl=[(1,)])
        assert out["cmd"] == [("READ", 1, 6, MSHR, 1)]

    run_directed(cfg, body)


def test_queue_full_counts_start_of_cycle_occupancy():
    cfg = small_config(channels=1, queue_depth=2, subarrays_per_channel=4)

    async def body(ctx, dut):
        step(ctx, dut, cfg, mshr=[(MSHR, 0, 0, 1)])
        await ctx.tick()
        step(ctx, dut, cfg, mshr=[(MSHR, 1, 0, 2)])  # op 0 issues in this cycle
        await ctx.tick()
        step(ctx, dut, cfg, mshr=[(MSHR, 2, 0, 3)])
        await ctx.tick()
        out = step(ctx, dut, cfg, mshr=[(MSHR, 3, 1, 4)], wb=[(WBUF, 0, 2, 0)])
        assert out["mshr_ready"] == [0] and out["wb_ready"] == [0]  # full at the start
        await ctx.tick()
        out = step(ctx, dut, cfg, cpl=[(0,)])
        assert out["mshr_ready"] == [0]

    run_directed(cfg, body)


def test_write_drain_window_opens_closes_and_cools_down():
    cfg = small_config(channels=1, scheduler="write-drain", write_drain_high_water=2,
                       write_drain_window_ticks=3, active_per_channel=1,
                       subarrays_per_channel=8, queue_depth=8)

    async def body(ctx, dut):
        # A long READ occupies the only active slot; PROGRAMs and READs pile up behind it.
        step(ctx, dut, cfg, mshr=[(MSHR, 0, 0, 0)])
        await ctx.tick()
        for k in range(3):
            step(ctx, dut, cfg, wb=[(WBUF, k, 1 + k, k)])
            await ctx.tick()
        assert step(ctx, dut, cfg, occupied=1)["drain_open"] == 0  # below the high water
        seen = []
        for t in range(8):
            seen.append(step(ctx, dut, cfg, occupied=2)["drain_open"])
            await ctx.tick()
        # Open for 3 cycles (start .. start+2), closed at start+3, cooldown 3 cycles, reopen.
        assert seen == [1, 1, 1, 0, 0, 0, 1, 1]

    run_directed(cfg, body)


def test_active_total_takes_stack_slots_in_channel_order():
    """Two stack-wide slots, four channels with an operation each: channels 0 and 1 issue,
    2 and 3 wait (their own caps are free); a completion frees one slot for channel 2."""
    cfg = small_config(channels=4, active_per_channel=2, active_total=2)

    async def body(ctx, dut):
        ops = [(MSHR, c, 0, 10 + c) for c in range(4)]
        step(ctx, dut, cfg, mshr=ops)
        await ctx.tick()
        out = step(ctx, dut, cfg)
        assert [c is not None for c in out["cmd"]] == [True, True, False, False]
        await ctx.tick()
        out = step(ctx, dut, cfg)
        assert out["cmd"] == [None] * 4              # the stack's two slots are taken
        await ctx.tick()
        out = step(ctx, dut, cfg, cpl=[None, (0,), None, None])
        # the completion releases its stack slot for the decision of tc (§7)
        assert [c is not None for c in out["cmd"]] == [False, False, True, False]

    run_directed(cfg, body)


def test_completion_forwarding_and_command_register():
    """§7: enqueued in t, decided in t+1, on cmd in t+2; a completion in tc frees its
    subarray and active slot for the decision of tc, so the next command is on cmd in
    tc + 1."""
    cfg = small_config(channels=1, active_per_channel=1, subarrays_per_channel=2)

    async def body(ctx, dut):
        out = step(ctx, dut, cfg, "cmd", mshr=[(MSHR, 0, 0, 10)])
        assert ctx.get(dut.dec[0].valid) == 0 and out["cmd"] == [None]
        await ctx.tick()
        step(ctx, dut, cfg, mshr=[(MSHR, 1, 0, 11)])     # the same subarray
        assert ctx.get(dut.dec[0].valid) == 1 and ctx.get(dut.dec[0].page) == 10
        await ctx.tick()
        out = step(ctx, dut, cfg, "cmd")   # op 1 waits: subarray 0 and the active slot taken
        assert out["cmd"] == [("READ", 0, 10, MSHR, 0)] and ctx.get(dut.dec[0].valid) == 0
        await ctx.tick()
        step(ctx, dut, cfg, cpl=[(0,)])     # tc: released for this cycle's decision
        assert ctx.get(dut.dec[0].valid) == 1 and ctx.get(dut.dec[0].page) == 11
        await ctx.tick()
        assert step(ctx, dut, cfg, "cmd")["cmd"] == [("READ", 0, 11, MSHR, 1)]   # tc + 1

    run_directed(cfg, body)
