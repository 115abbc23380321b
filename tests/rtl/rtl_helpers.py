"""Shared simulation helpers for the RTL tests (one place, STYLE "Tests").

Waveforms only on request: ``pytest --waves`` (or ``HBFSIM_WAVES=1``) makes each simulation
write ``waves/<test id>.vcd`` and a ``.gtkw`` save file that shows the block's ports first
(never committed, see waves/README.md).
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

from amaranth.sim import Simulator

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim import scenarios
from hbfsim.cosim.golden import cpl_masks
from hbfsim.model.controller import Request
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR, Media
from hbfsim.model.system import HbfSystem
from hbfsim.rtl.system import top

__all__ = ["CLOCK_PERIOD", "FAST", "assert_same_run", "run_model", "run_rtl",
           "run_rtl_ports", "simulate", "small_config", "workload"]

#: Any period will do: the contract counts cycles, not seconds.
CLOCK_PERIOD = 1e-9

_WAVES = Path(__file__).resolve().parents[2] / "waves"


def _wave_stem() -> str:
    """``<test module>.<test name and parameters>`` of the running test, file-name safe."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "sim").split(" ")[0]
    module, _, name = test.rpartition("::")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{Path(module).stem}.{name}")[:150]


def simulate(dut, *testbenches, background=(), deadline=None) -> None:
    """Run ``dut`` with a clock, the given testbenches and background testbenches.

    Parameters
    ----------
    dut : Elaboratable
        The design under test.
    *testbenches : async callables ``tb(ctx)``
        Run to completion; the simulation ends when all of them return.
    background : iterable of async callables
        Device models and monitors that run while the testbenches do.
    deadline : float, optional
        Stop after this many simulated seconds (guards against a hung testbench).
    """
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD, if_exists=True)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)

    def go():
        if deadline is None:
            sim.run()
        else:
            sim.run_until(deadline)

    if os.environ.get("HBFSIM_WAVES"):
        _WAVES.mkdir(exist_ok=True)
        stem = _WAVES / _wave_stem()
        with sim.write_vcd(f"{stem}.vcd", f"{stem}.gtkw", traces=key_signals(dut)):
            go()
    else:
        go()


def key_signals(dut) -> list:
    """The ports a GTKWave save file should show first: the component's interface members
    (for the Controller: req, resp, cmd[c], cpl[c], drain, m_valid)."""
    sig = getattr(dut, "signature", None)
    if sig is None:
        return []
    out = []
    for name in sig.members:
        member = getattr(dut, name, None)
        if member is not None:
            out.append(member)
    return out


def small_config(**overrides):
    """A small, valid stack configuration for unit tests (overrides win), in the stack
    shape unless the overrides ask for the channel shape (``host_ports = "channel"``)."""
    from hbfsim.config import load_config

    v = dict(host_ports="stack", channels=2, subarrays_per_channel=4,
             active_per_channel=4, admission=16, mshr_entries=8, queue_depth=4,
             write_buffer_entries=4, pages_per_block=256)
    v.update(overrides)
    if "capacity_bytes" not in v:
        # Eight erase blocks per subarray: small page numbers, and a valid split (config.py).
        v["capacity_bytes"] = (v.get("stacks", 1) * v["channels"] * v["subarrays_per_channel"]
                               * v["pages_per_block"] * 4096 * 8)
    return load_config(**v)


# ------------------------------------------------------------------------------------------
# The whole RTL (Controller for one stack, System for several) against the golden model
# (model.system.HbfSystem), cycle for cycle, with the model's NAND media behind both (the
# media promise of contract §1). Shared by test_rtl_controller.py and test_rtl_system.py.

#: Short NAND timings keep the simulated cycle count small: tR 9, tPROG 17, tBERS 43 ticks.
FAST = dict(t_read_us=0.01, t_prog_us=0.02, t_erase_us=0.05, buffer_hit_ticks=2,
            pages_per_block=4, write_deadline_ticks=40, read_agg_window_ticks=6,
            read_agg_threshold_bytes=2048, write_drain_high_water=2,
            write_drain_window_ticks=30)


def workload(seed, n, *, pages, reads=1.0, gap=3, sizes=(32, 128, 512, 4096)):
    """``n`` requests (op, page, offset, bytes, arrival) over ``pages`` logical pages (the
    co-simulation's generator, so both levels are driven alike)."""
    return scenarios.workload(random.Random(seed), n, pages=pages, reads=reads, gap=gap,
                              sizes=sizes)


FLUSH_STATS = ("flush_full", "flush_raw", "flush_pressure", "flush_deadline", "flush_drain")


def run_model(cfg, reqs, resp_ready=None, probe=None):
    """Golden run of ``reqs`` (op, logical page, offset, bytes, arrival).

    Returns ``({id: (accept, done, mshr_hit, buffer_hit, error)}, commands)``; a command is
    ``(tick, global channel, subarray, op, channel-local page, tag)`` with the global channel
    ``stack * channels + channel`` (as the trace numbers them). ``resp_ready`` is the
    consumer's ``f(tick) -> bool`` (``HbfSystem.resp_ready``; None: always high). ``probe``
    (a dict) receives ``flushes``: the model's flush counters per cause (§5).
    """
    system = HbfSystem(cfg)
    system.resp_ready = resp_ready
    log = []
    for s, stack in enumerate(system.stacks):
        media, base = stack.media, s * cfg.channels

        def logged(t, ch, sub, op, local, tag, issue=media.issue, base=base):
            log.append((t, base + ch, sub, op, local, tag))
            return issue(t, ch, sub, op, local, tag)

        def logged_group(t, ch, g, ops, issue=media.issue_group, base=base):
            # MP2's fields, as run_rtl_ports logs them: (t, channel, op, megaplane, planes,
            # row)
            M, S = cfg.megaplane_planes, cfg.subarrays_per_channel
            log.append((t, base + ch, ops[0][1], g,
                        sum(1 << (sub - g * M) for sub, _, _, _ in ops), ops[0][2] // S))
            return issue(t, ch, g, ops)

        media.issue = logged
        media.issue_group = logged_group
    system.run_requests([Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, a)
                         for i, (op, page, off, n, a) in enumerate(reqs)])
    out = {r.id: (r.t_accept, r.t_done, int(r.mshr_hit), int(r.buffer_hit), int(r.error))
           for r in system.completed}
    if probe is not None:
        probe["flushes"] = [system.stats[k] for k in FLUSH_STATS]
    return out, log


def run_rtl(cfg, reqs, resp_ready=None, max_cycles=20000, dut=None, probe=None, **options):
    """The RTL top (:func:`hbfsim.rtl.system.top`) with one model ``Media`` per stack behind
    it; same result shape as :func:`run_model`.

    The testbench presents requests as contract §4.1 says (in arrival order, from
    ``max(arrival, previous accept + 1)``, address relative to ``base_address``), raises
    ``drain`` from the cycle after the last request left M (``m_valid`` low with nothing left
    to present), drives ``resp.ready = resp_ready(t)``, and delivers each media's completions
    after the cycle's commands are issued, as the golden run does. ``options`` go to the top
    block (``sector_bytes``, ...); ``dut`` overrides it. ``probe`` (a dict) receives
    ``flushes`` (the ``flushes`` counters after the last response, as :func:`run_model`'s)
    and, for a ``System``, ``contended``: the cycles in which several stacks offered a
    response.
    """
    dut = top(cfg, **options) if dut is None else dut
    chans = cfg.channels
    medias = [Media(cfg) for _ in range(cfg.stacks)]
    ready = (lambda t: True) if resp_ready is None else resp_ready
    idle_cpl = {"valid": 0, "subarray": 0, "tag": {"kind": 0, "index": 0}, "buffer_hit": 0,
                "error": 0}
    log = []
    accepted: dict[int, int] = {}
    done: dict[int, tuple] = {}

    offers = getattr(dut, "offers", None)
    contended = 0

    async def tb(ctx):
        nonlocal contended
        k, last_accept, drain = 0, -1, 0
        for t in range(max_cycles):
            if len(done) == len(reqs):
                if probe is not None:    # every flush precedes its writes' responses
                    probe["flushes"] = [ctx.get(dut.flushes[i]) for i in range(len(FLUSH_STATS))]
                return
            if offers is not None:
                contended += ctx.get(offers).bit_count() > 1
            # drain from the cycle after the last request left M (model: system.drain_at)
            drain |= int(k == len(reqs) and not ctx.get(dut.m_valid))
            ctx.set(dut.drain, drain)
            take = int(bool(ready(t)))
            ctx.set(dut.resp.ready, take)
            present = k < len(reqs) and t >= max(reqs[k][4], last_accept + 1)
            ctx.set(dut.req.valid, present)
            if present:
                op, page, off, n, _ = reqs[k]
                ctx.set(dut.req.payload, {"id": k, "op": 0 if op == "R" else 1, "source": 0,
                                          "addr": page * PAGE_BYTES + off, "bytes": n})
            for port in dut.cpl:
                ctx.set(port, idle_cpl)
            if present and ctx.get(dut.req.ready):
                accepted[k] = t
                k, last_accept = k + 1, t
            if take and ctx.get(dut.resp.valid):
                r = ctx.get(dut.resp.payload)
                assert r.id not in done, f"request {r.id} answered twice"
                done[r.id] = (t, r.mshr_hit, r.buffer_hit, r.error)
            for g, port in enumerate(dut.cmd):
                cmd = ctx.get(port)
                if cmd.valid:
                    tag = cmd.tag.index * 2 + cmd.tag.kind.value
                    log.append((t, g, cmd.subarray, cmd.op.value, cmd.page, tag))
                    medias[g // chans].issue(t, g % chans, cmd.subarray, cmd.op.value,
                                             cmd.page, tag)
            for s, media in enumerate(medias):
                for ch, sub, tag, flags in media.deliver(t):
                    ctx.set(dut.cpl[s * chans + ch], {
                        "valid": 1, "subarray": sub, "tag": {"kind": tag & 1, "index": tag >> 1},
                        "buffer_hit": int(bool(flags & FLAG_BUFFER_HIT)),
                        "error": int(bool(flags & FLAG_ERROR))})
            await ctx.tick()
        raise AssertionError(f"not done after {max_cycles} cycles: {len(done)} of {len(reqs)}")

    simulate(dut, tb)
    if probe is not None and offers is not None:
        probe["contended"] = contended
    return {i: (accepted[i],) + done[i] for i in done}, log


def run_rtl_ports(cfg, reqs, resp_ready=None, max_cycles=20000, probe=None, **options):
    """:func:`run_rtl` for one stack in the channel shape (``req[p]``, ``resp[p]``, one per
    channel, docs/timing-contract.md §1): each request enters the port of the channel its
    page maps to (the write channel for a write), and each port presents its requests in
    arrival order from ``max(arrival, previous accept on that port + 1)`` (§4.1). Same
    result shape as :func:`run_rtl`; with multi-plane commands a command is ``(tick,
    channel, op, megaplane, planes, row)`` (MP2) and the media answers per command (MP7),
    as the co-simulation's testbench does. A stack-shape configuration runs on its one
    port (every request in arrival order)."""
    from hbfsim.model.mapping import Mapper as PageMapper

    assert cfg.stacks == 1, "run_rtl_ports drives one stack"
    dut = top(cfg, **options)
    P = dut.ports
    req_ports = [dut.req] if P == 1 else [dut.req[p] for p in range(P)]
    resp_ports = [dut.resp] if P == 1 else [dut.resp[p] for p in range(P)]
    mapper = PageMapper(cfg)
    fifos = [[] for _ in range(P)]
    for i, (op, page, off, n, a) in enumerate(reqs):
        fifos[mapper.channel_of(page, write=op == "W")[0] if P > 1 else 0].append(i)
    media = Media(cfg)
    ready = (lambda t: True) if resp_ready is None else resp_ready
    multiplane = cfg.multiplane != "off"
    M, S = cfg.megaplane_planes, cfg.subarrays_per_channel
    idle_cpl = ({"valid": 0, "megaplane": 0, "planes": 0, "buffer_hit": 0, "error": 0}
                if multiplane else
                {"valid": 0, "subarray": 0, "tag": {"kind": 0, "index": 0}, "buffer_hit": 0,
                 "error": 0})
    log, accepted, done = [], {}, {}

    async def tb(ctx):
        heads, last, drain = [0] * P, [-1] * P, 0
        for t in range(max_cycles):
            if len(done) == len(reqs):
                if probe is not None:
                    probe["flushes"] = [ctx.get(dut.flushes[i]) for i in range(len(FLUSH_STATS))]
                return
            closed = all(heads[p] == len(fifos[p]) for p in range(P))
            drain |= int(closed and not ctx.get(dut.m_valid))
            ctx.set(dut.drain, drain)
            take = int(bool(ready(t)))
            shown = []
            for p in range(P):
                ctx.set(resp_ports[p].ready, take)
                k = fifos[p][heads[p]] if heads[p] < len(fifos[p]) else None
                present = k is not None and t >= max(reqs[k][4], last[p] + 1)
                ctx.set(req_ports[p].valid, present)
                if present:
                    op, page, off, n, _ = reqs[k]
                    ctx.set(req_ports[p].payload, {"id": k, "op": 0 if op == "R" else 1,
                                                 "source": 0, "addr": page * PAGE_BYTES + off,
                                                 "bytes": n})
                shown.append(k if present else None)
            for port in dut.cpl:
                ctx.set(port, idle_cpl)
            for p in range(P):
                if shown[p] is not None and ctx.get(req_ports[p].ready):
                    accepted[shown[p]] = t
                    heads[p], last[p] = heads[p] + 1, t
                if take and ctx.get(resp_ports[p].valid):
                    r = ctx.get(resp_ports[p].payload)
                    assert r.id not in done, f"request {r.id} answered twice"
                    assert fifos[p].count(r.id), f"request {r.id} answered on port {p}"
                    done[r.id] = (t, r.mshr_hit, r.buffer_hit, r.error)
            for g, port in enumerate(dut.cmd):
                cmd = ctx.get(port)
                if cmd.valid and multiplane:   # MP2: (t, channel, op, megaplane, planes, row)
                    mp, planes, row = cmd.megaplane, cmd.planes, cmd.row
                    log.append((t, g, cmd.op.value, mp, planes, row))
                    media.issue_group(t, g, mp, [(mp * M + p, cmd.op.value,
                                                  row * S + mp * M + p, p)
                                                 for p in range(M) if planes >> p & 1])
                elif cmd.valid:
                    tag = cmd.tag.index * 2 + cmd.tag.kind.value
                    log.append((t, g, cmd.subarray, cmd.op.value, cmd.page, tag))
                    media.issue(t, g, cmd.subarray, cmd.op.value, cmd.page, tag)
            for ch, sub, tag, flags in media.deliver(t):
                if multiplane:   # MP7: one completion per command, per-plane masks
                    _, mask, hit, err = cpl_masks(sub, tag, flags)
                    ctx.set(dut.cpl[ch], {"valid": 1, "megaplane": sub, "planes": mask,
                                          "buffer_hit": hit, "error": err})
                    continue
                ctx.set(dut.cpl[ch], {
                    "valid": 1, "subarray": sub, "tag": {"kind": tag & 1, "index": tag >> 1},
                    "buffer_hit": int(bool(flags & FLAG_BUFFER_HIT)),
                    "error": int(bool(flags & FLAG_ERROR))})
            await ctx.tick()
        raise AssertionError(f"not done after {max_cycles} cycles: {len(done)} of {len(reqs)}")

    simulate(dut, tb)
    return {i: (accepted[i],) + done[i] for i in done}, log


def assert_same_run(reqs, rtl, model, rtl_cmds, model_cmds) -> None:
    """Every request's (accept, done, flags) and every media command equal."""
    for i in range(len(reqs)):
        assert rtl.get(i) == model[i], (f"request {i} {reqs[i]}: RTL (accept, done, mshr_hit, "
                                        f"buffer_hit, error) {rtl.get(i)} != model {model[i]}")
    # Commands of one cycle on different channels are simultaneous: compare in (t, channel)
    # order.
    assert sorted(rtl_cmds) == sorted(model_cmds)
