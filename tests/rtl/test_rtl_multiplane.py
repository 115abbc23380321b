"""Multi-plane (hyperpage) commands in the scheduler (docs/timing-contract.md §7a).

A reference of MP1-MP5 at the scheduler's ports (the decision of
:class:`hbfsim.model.megaplane.Megaplanes`, over the same queue) runs in lock step with
:class:`~hbfsim.rtl.scheduler.Scheduler` on random offers and a random media; directed tests
pin the worked timings: a full megapage issues as one command the cycle it is whole, a
partial one waits exactly ``hyperpage_window_ticks``, ``drain`` ends the wait, a ``page``
stream holds the megaplane for each command.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtl_helpers import simulate, small_config
from test_rtl_scheduler import RefScheduler

from hbfsim.rtl.scheduler import Scheduler

MSHR, WBUF = 0, 1


def mp_config(**over):
    v = dict(multiplane="megaplane", megaplane_planes=2, subarrays_per_channel=4,
             active_per_channel=4, queue_depth=4)
    v.update(over)
    return small_config(**v)


class RefMultiplane(RefScheduler):
    """MP1-MP5 as model/megaplane.py decides them; ops are ``(te, kind, index, sub, page)``.

    ``busy[c]`` holds megaplanes, ``group[c][g]`` the (kind, index) per plane of the command
    megaplane ``g`` holds."""

    PROGRAM = WBUF   # RefScheduler's drain window (§7) with this file's integer entry kinds

    def __init__(self, cfg):
        super().__init__(cfg)
        self.M = cfg.megaplane_planes
        self.group = [dict() for _ in range(cfg.channels)]

    def comb(self, inp):
        cfg, t, M, S = self.cfg, self.now, self.M, self.cfg.subarrays_per_channel
        gather = cfg.multiplane == "megaplane"
        window = cfg.hyperpage_window
        drain_open, _, _ = self._window(inp["occupied"])
        out = {"drain_open": int(drain_open), "mshr_ready": [], "wb_ready": [], "dec": [],
               "lanes": [], "done": []}
        busy = [set(b) for b in self.busy]
        active = list(self.active)
        for c, cpl in enumerate(inp["cpl"]):
            lanes = [None] * M
            if cpl is not None:
                g, planes, hit, err = cpl
                busy[c].discard(g)
                active[c] -= bin(planes).count("1")
                for p in range(M):
                    if planes >> p & 1:
                        lanes[p] = self.group[c][g][p] + (hit >> p & 1, err >> p & 1)
            out["done"].append(lanes)
        room = (cfg.active_total or 1 << 30) - sum(active)
        want_prog = cfg.scheduler == "write-drain" and drain_open
        for c, q in enumerate(self.queues):
            ok = len(q) < cfg.queue_depth
            out["mshr_ready"].append(int(ok))
            out["wb_ready"].append(int(ok and inp["mshr"][c] is None))
            free = cfg.active_per_channel - active[c]
            pick = alt = None
            if free > 0 and room > 0:
                full = {}
                for te, kind, index, sub, page in q:
                    full.setdefault((kind, sub // M, page // S), set()).add(sub)
                for op in q:
                    te, kind, index, sub, page = op
                    if sub // M in busy[c]:
                        continue
                    if gather and not inp["drain"] and t - te < window \
                            and len(full[kind, sub // M, page // S]) < M:
                        continue
                    if cfg.scheduler == "fcfs" or (kind == WBUF) == want_prog:
                        pick = op
                        break
                    if alt is None:
                        alt = op
                pick = pick or alt
            if pick is None:
                out["dec"].append(None)
                out["lanes"].append([None] * M)
                continue
            group = [pick]
            if gather:
                subs = {pick[3]}
                for op in q:
                    if len(group) >= min(free, room):
                        break
                    if op[1] == pick[1] and op[3] not in subs and op[3] // M == pick[3] // M \
                            and op[4] // S == pick[4] // S:
                        group.append(op)
                        subs.add(op[3])
            room -= len(group)
            lanes = [None] * M
            for op in group:
                lanes[op[3] % M] = (op[1], op[2])
            planes = sum(1 << (op[3] % M) for op in group)
            out["dec"].append((pick[1], pick[3] // M, planes, pick[4] // S, group))
            out["lanes"].append(lanes)
        return out

    def tick(self, inp):
        out = self.comb(inp)
        self.open, self.start, self.cooldown = self._window(inp["occupied"])
        for c, q in enumerate(self.queues):
            cpl = inp["cpl"][c]
            if cpl is not None:
                self.busy[c].discard(cpl[0])
                self.active[c] -= bin(cpl[1]).count("1")
            d = out["dec"][c]
            if d is not None:
                kind, g, planes, row, group = d
                for op in group:
                    q.remove(op)
                self.busy[c].add(g)
                self.active[c] += len(group)
                self.group[c][g] = out["lanes"][c]
            for offer, ready in ((inp["mshr"][c], out["mshr_ready"][c]),
                                 (inp["wb"][c], out["wb_ready"][c])):
                if offer is not None and ready:
                    q.append((self.now,) + offer)
        self.now += 1
        return out


class MpEnv:
    """Random offers (unique tags among the operations in flight; with ``mshr_merge`` on,
    no two queued operations of one kind share a page, MP3) and the media of MP6/MP7: one
    completion per channel per cycle, earliest due first, ties by lowest megaplane."""

    def __init__(self, cfg, seed, cycles, *, p_offer=0.4, latency=(1, 10), pages=16):
        self.cfg, self.rng, self.cycles = cfg, random.Random(seed), cycles
        self.p_offer, self.latency, self.pages = p_offer, latency, pages
        self.inflight = [[] for _ in range(cfg.channels)]   # (due, megaplane, planes, flags)
        self.tags = {MSHR: set(), WBUF: set()}
        self.pages_in = [set() for _ in range(cfg.channels)]   # (kind, page) queued/issued
        self.occupied = 0
        self.now = 0
        self.commands = self.grouped = 0
        self.drain_at = cycles

    def finished(self):
        return self.now >= self.cycles and not any(self.inflight)

    def _offer(self, c, kind, taken):
        cfg, rng = self.cfg, self.rng
        if self.now >= self.cycles or rng.random() >= self.p_offer:
            return None
        n = cfg.mshr_entries if kind == MSHR else cfg.write_buffer_entries
        free = [i for i in range(n) if i not in self.tags[kind] and (kind, i) not in taken]
        if not free:
            return None
        page = rng.randrange(self.pages)
        if cfg.mshr_merge and (kind, page) in self.pages_in[c]:
            return None
        return (kind, rng.choice(free), page % cfg.subarrays_per_channel, page)

    def inputs(self):
        cfg, rng = self.cfg, self.rng
        self.occupied = min(cfg.write_buffer_entries,
                            max(0, self.occupied + rng.choice([-1, 0, 0, 1])))
        inp = {"occupied": self.occupied, "mshr": [], "wb": [], "cpl": [],
               "drain": int(self.now >= self.drain_at)}
        taken = set()     # tags offered in this cycle, on any channel
        for c in range(cfg.channels):
            for kind, key in ((MSHR, "mshr"), (WBUF, "wb")):
                o = self._offer(c, kind, taken)
                inp[key].append(o)
                if o is not None:
                    taken.add((kind, o[1]))
            due = sorted(x for x in self.inflight[c] if x[0] <= self.now)
            if due:
                self.inflight[c].remove(due[0])
                inp["cpl"].append(due[0][1:])
            else:
                inp["cpl"].append(None)
        return inp

    def observe(self, inp, out):
        """Track tags: offers taken, decisions (on cmd one cycle later) and completions."""
        M = self.cfg.megaplane_planes
        for c in range(self.cfg.channels):
            for offer, ready in ((inp["mshr"][c], out["mshr_ready"][c]),
                                 (inp["wb"][c], out["wb_ready"][c])):
                if offer is not None and ready:
                    self.tags[offer[0]].add(offer[1])
                    self.pages_in[c].add((offer[0], offer[3]))
            for lane in out["done"][c]:
                if lane is not None:
                    self.tags[lane[0]].discard(lane[1])
            d = out["dec"][c]
            if d is not None:
                kind, g, planes, row, group = d
                for op in group:
                    self.pages_in[c].discard((op[1], op[4]))
                hit = self.rng.randrange(1 << M) & planes
                err = self.rng.randrange(1 << M) & planes
                self.inflight[c].append((self.now + 1 + self.rng.randint(*self.latency),
                                         g, planes, hit, err))
                self.commands += 1
                self.grouped += len(group)
        self.now += 1


def apply_inputs(ctx, dut, cfg, inp):
    ctx.set(dut.wb_occupied, inp["occupied"])
    if cfg.multiplane == "megaplane":
        ctx.set(dut.drain, inp["drain"])
    for c in range(cfg.channels):
        for port, offer in ((dut.mshr_enq[c], inp["mshr"][c]), (dut.wb_enq[c], inp["wb"][c])):
            ctx.set(port.valid, offer is not None)
            if offer is not None:
                kind, index, sub, page = offer
                ctx.set(port.payload, {"tag": {"kind": kind, "index": index},
                                       "subarray": sub, "page": page})
        cpl = inp["cpl"][c]
        g, planes, hit, err = cpl if cpl else (0, 0, 0, 0)
        ctx.set(dut.cpl[c], {"valid": cpl is not None, "megaplane": g, "planes": planes,
                             "buffer_hit": hit, "error": err})


def read_outputs(ctx, dut, cfg, port="dec"):
    M = cfg.megaplane_planes
    out = {"drain_open": ctx.get(dut.drain_open), "mshr_ready": [], "wb_ready": [], "dec": [],
           "lanes": [], "done": []}
    for c in range(cfg.channels):
        out["mshr_ready"].append(ctx.get(dut.mshr_enq[c].ready))
        out["wb_ready"].append(ctx.get(dut.wb_enq[c].ready))
        d = ctx.get(getattr(dut, port)[c])
        out["dec"].append((d.op.value, d.megaplane, d.planes, d.row) if d.valid else None)
        lanes, done = [], []
        for p in range(M):
            lane = ctx.get(dut.dec_ops[c * M + p])
            lanes.append((lane.tag.kind.value, lane.tag.index) if lane.valid else None)
            x = ctx.get(dut.cpl_ops[c * M + p])
            done.append((x.tag.kind.value, x.tag.index, x.buffer_hit, x.error)
                        if x.valid else None)
        out["lanes"].append(lanes)
        out["done"].append(done)
    return out


def strip(out):
    """The reference's outputs in the form read_outputs gives them."""
    return dict(out, dec=[d[:4] if d else None for d in out["dec"]])


def run_lockstep(cfg, seed, cycles=300, drain_at=None, **env_kw):
    dut = Scheduler(cfg)
    ref = RefMultiplane(cfg)
    env = MpEnv(cfg, seed, cycles, **env_kw)
    if drain_at is not None:
        env.drain_at = drain_at
    previous = [None] * cfg.channels

    async def tb(ctx):
        nonlocal previous
        while not env.finished() or any(ref.queues):
            assert env.now < cycles + 5000, "the queues did not empty"
            inp = env.inputs()
            apply_inputs(ctx, dut, cfg, inp)
            got, want = read_outputs(ctx, dut, cfg), strip(ref.comb(inp))
            assert got == want, f"cycle {env.now}: RTL {got} != reference {want}"
            # §7: cmd is the command register, last cycle's decision
            assert read_outputs(ctx, dut, cfg, "cmd")["dec"] == previous, f"cycle {env.now}"
            previous = want["dec"]
            env.observe(inp, ref.tick(inp))
            await ctx.tick()

    simulate(dut, tb)
    return env


CASES = {
    "megaplane-fcfs": dict(scheduler="fcfs"),
    "megaplane-read-priority": dict(scheduler="read-priority"),
    "megaplane-write-drain": dict(scheduler="write-drain", write_drain_high_water=2,
                                  write_drain_window_ticks=7),
    "megaplane-M4": dict(megaplane_planes=4, queue_depth=6, active_per_channel=6,
                         subarrays_per_channel=8),
    "megaplane-window-0": dict(hyperpage_window_ticks=0),
    "megaplane-window-5": dict(hyperpage_window_ticks=5, scheduler="read-priority"),
    # MP5: groups cut to the free slots, per channel and stack-wide
    "megaplane-cut": dict(active_per_channel=3, scheduler="read-priority"),
    "megaplane-active-total": dict(channels=4, active_per_channel=4, active_total=3),
    # MP3: two reads of one page on one plane (merging off); the oldest only
    "megaplane-merge-off": dict(mshr_merge=False, megaplane_planes=4, queue_depth=6),
    "megaplane-odd": dict(subarrays_per_channel=6, megaplane_planes=3, planes_per_die=6,
                          queue_depth=5, active_per_channel=6, channels=1),
    "page-fcfs": dict(multiplane="page"),
    "page-read-priority": dict(multiplane="page", scheduler="read-priority",
                               active_per_channel=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_multiplane_scheduler_matches_reference(name):
    cfg = mp_config(**CASES[name])
    env = run_lockstep(cfg, seed=len(name), cycles=300, drain_at=250)
    assert env.commands > 30
    if cfg.multiplane == "megaplane":
        assert env.grouped > env.commands      # some commands are groups
    else:
        assert env.grouped == env.commands


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**32 - 1),
       p_offer=st.floats(0.05, 1.0), max_latency=st.integers(1, 30),
       pages=st.sampled_from([4, 8, 16, 64]))
def test_multiplane_scheduler_matches_reference_random(case, seed, p_offer, max_latency, pages):
    cfg = mp_config(**CASES[case])
    run_lockstep(cfg, seed, cycles=120, p_offer=p_offer, latency=(1, max_latency),
                 pages=pages)


# ---- directed: the worked timings at the scheduler -----------------------------------------

def directed(cfg, script, cycles):
    """Offer ``script[t]`` = list of (channel, kind, index, subarray, page) MSHR offers in
    cycle ``t``; return ``{t: (channel, op, megaplane, planes, row)}`` of the decisions."""
    dut = Scheduler(cfg)
    seen = {}

    async def tb(ctx):
        for t in range(cycles):
            for c in range(cfg.channels):
                ctx.set(dut.mshr_enq[c].valid, 0)
                ctx.set(dut.cpl[c].valid, 0)
            for c, kind, index, sub, page in script.get(t, []):
                ctx.set(dut.mshr_enq[c].valid, 1)
                ctx.set(dut.mshr_enq[c].payload, {"tag": {"kind": kind, "index": index},
                                                  "subarray": sub, "page": page})
            for c in range(cfg.channels):
                d = ctx.get(dut.dec[c])
                if d.valid:
                    seen[t] = (c, d.op.value, d.megaplane, d.planes, d.row)
            await ctx.tick()

    simulate(dut, tb)
    return seen


def test_full_megapage_issues_when_whole():
    """MP3/MP4: M = 2 pages of one row, enqueued in E and E + 1, leave as one command
    decided in E + M (both in the queue from then), planes 0b11."""
    cfg = mp_config()
    E = 3
    seen = directed(cfg, {E: [(0, MSHR, 0, 0, 8)], E + 1: [(0, MSHR, 1, 1, 9)]}, 20)
    assert seen == {E + 2: (0, 0, 0, 0b11, 2)}


def test_partial_megapage_waits_exactly_the_window():
    """MP4: a lone page is a candidate only once td - te >= hyperpage_window_ticks."""
    for window in (0, 1, 2, 5):
        cfg = mp_config(hyperpage_window_ticks=window)
        E = 4
        seen = directed(cfg, {E: [(0, MSHR, 0, 3, 7)]}, 20)
        assert seen == {E + max(1, window): (0, 0, 1, 0b10, 1)}, window


def test_partial_megapage_default_window_is_M():
    cfg = mp_config(megaplane_planes=4, queue_depth=6, subarrays_per_channel=8)
    E = 2
    script = {E: [(0, MSHR, 0, 4, 4)], E + 1: [(0, MSHR, 1, 6, 6)]}
    seen = directed(cfg, script, 20)
    assert seen == {E + 4: (0, 0, 1, 0b0101, 0)}


def test_drain_ends_the_window():
    cfg = mp_config(hyperpage_window_ticks=50)
    dut = Scheduler(cfg)
    seen = {}

    async def tb(ctx):
        for t in range(12):
            ctx.set(dut.drain, int(t >= 8))
            ctx.set(dut.mshr_enq[0].valid, t == 2)
            ctx.set(dut.mshr_enq[0].payload, {"tag": {"kind": 0, "index": 0},
                                              "subarray": 0, "page": 0})
            d = ctx.get(dut.dec[0])
            if d.valid:
                seen[t] = d.planes
            await ctx.tick()

    simulate(dut, tb)
    assert seen == {8: 0b01}


def test_page_mode_issues_one_plane_per_command():
    """MP1 under ``page``: the second page of a megaplane waits for the first's completion,
    which is forwarded into the decision of its own cycle (§7)."""
    cfg = mp_config(multiplane="page")
    dut = Scheduler(cfg)
    seen = {}

    async def tb(ctx):
        for t in range(14):
            ctx.set(dut.mshr_enq[0].valid, t in (1, 2))
            k = max(0, t - 1)
            ctx.set(dut.mshr_enq[0].payload, {"tag": {"kind": 0, "index": t},
                                              "subarray": k, "page": 4 + k})
            ctx.set(dut.cpl[0], {"valid": t == 9, "megaplane": 0, "planes": 0b01,
                                 "buffer_hit": 0, "error": 0})
            d = ctx.get(dut.dec[0])
            if d.valid:
                seen[t] = (d.megaplane, d.planes, d.row)
            lane = ctx.get(dut.cpl_ops[0])
            if t == 9:
                assert lane.valid and lane.tag.index == 1
            await ctx.tick()

    simulate(dut, tb)
    assert seen == {2: (0, 0b01, 1), 9: (0, 0b10, 1)}
