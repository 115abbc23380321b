"""The cocotb test module: the Verilated controller against the golden model, event by event.

The simulator process reads a :class:`hbfsim.cosim.scenario.Batch` from the JSON file named by
``$HBFSIM_COSIM_BATCH`` and runs one cocotb test per scenario (reset in between). Per
scenario the golden model runs first (:func:`hbfsim.cosim.golden.run_golden`); then the RTL
runs with the same requests, the same NAND media (:class:`hbfsim.model.media.Media`, one
completion per channel per cycle) and the same ``resp.ready`` pattern, and a
:class:`~hbfsim.cosim.scoreboard.Scoreboard` compares every accept, media command and
response as it happens. Both sides write hbf-trace-v1 level 1; on a pass the two files are
byte-identical.

A scenario with a GPU program runs it closed loop on both sides: the golden model through
:class:`~hbfsim.model.gpu.ClosedLoop`, the RTL through a :class:`~hbfsim.model.gpu.GpuPort`
stepped here, whose port grants feed the request drivers (in the channel shape each grant
goes to the driver of its port, G5') and whose responses are the RTL's own ``resp`` handshakes
(docs/cosim.md "Request sources").

Timing (docs/cosim.md "How it works"). cocotb's ``Clock`` toggles ``clk`` inside the
simulator (GPI), period 4 ns. Cycle ``t`` starts at the rising edge ``e + 4t``; the
testbench acts only at ``e + 4t + 3``, after the falling edge and before the next rising
edge: it reads the outputs of cycle ``t`` (every output is a function of registered state
only: no port of ``hbf_controller`` depends combinationally on an input, which the run
checks) and drives the inputs of cycle ``t``, which the next edge latches. Python is woken
only for cycles that need it:

* a request to present (the driver knows the cycle), and the cycle after an accept; a
  request that waits for ``req.ready`` is held and sleeps on a change of ``req.ready``;
* a media completion due (``Media.next_due``), and the cycle after one to clear ``cpl``;
* ``resp.valid`` high (it stays awake while it is), any ``cmd[c]`` changing, or ``m_valid``
  falling while ``drain`` waits for it: value-change triggers, which fire at the edge that
  starts the cycle;
* the cycle of the next event the golden model expects (so a missing event is caught in its
  own cycle), and the end of the watch window after the last one.

Between those cycles the inputs hold values that are right for every cycle skipped
(``req.valid`` low or the waiting request, ``cpl`` invalid, ``drain`` as set), and NAND
latencies of 12,750 ticks cost C++ time only.

Request presentation, the drain rule and completion delivery follow
tests/rtl/test_rtl_controller.py and contract §4.1/§1: requests in arrival order from cycle
``max(arrival, previous accept + 1)``; ``drain`` from the first cycle in which every request
has been accepted and M is empty; the media's completions of cycle ``t`` are delivered after
the commands of cycle ``t`` were issued to it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim.golden import OPS, cpl_masks, run_golden, summary
from hbfsim.cosim.ports import ControllerPorts, channel_shape
from hbfsim.cosim.scenario import SCENARIO_ENV, Batch, Scenario
from hbfsim.cosim.scoreboard import Mismatch, Scoreboard
from hbfsim.model.controller import Request
from hbfsim.model.gpu import GpuPort
from hbfsim.model.mapping import Mapper
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR, Media
from hbfsim.model.trace import TraceWriter

#: Clock period and the offset in it at which the testbench acts (simulation steps = ns).
PERIOD = 4
ACT = 3
RESET_CYCLES = 4


def file_stem(name: str) -> str:
    """A scenario name made safe for file names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


class RequestDriver:
    """Presents requests on ``req`` (contract §4.1) in arrival order and reports accepts.

    It holds an ingress FIFO of :class:`Request` objects, each presented from cycle
    ``max(arrival, previous accept + 1)``. A request-list scenario fills the FIFO at once;
    with a GPU program the :class:`~hbfsim.model.gpu.GpuPort` appends each grant of this
    driver's port in its tick (``arrival`` = the grant tick), and ``exhausted`` follows the
    GPU.
    """

    def __init__(self, ports: ControllerPorts, mapper: Mapper, requests=(), gpu=None,
                 port: int = 0):
        # the channel shape has one driver per request port (§1)
        self.valid, self.ready, self.payload = ports.reqs[port]
        self.codec = ports.req
        self.system = ports.system
        self.fifo = deque(requests)
        self.gpu = gpu
        self.mapper = mapper
        self.base = mapper.base
        self.last = -1

    @property
    def all_accepted(self) -> bool:
        """Every request there will ever be has been accepted (the input is closed)."""
        return not self.fifo and (self.gpu is None or self.gpu.exhausted)

    def _pack(self, r: Request) -> int:
        rel = r.addr - self.base
        if not self.system:      # a stack's own port: the stack-local address (§2)
            page, off = divmod(rel, PAGE_BYTES)
            rel = self.mapper.stack_of(page)[1] * PAGE_BYTES + off
        return self.codec.pack({"id": r.id, "op": OPS[r.op], "addr": rel,
                                "bytes": r.nbytes, "source": r.source})

    def next_cycle(self) -> int | None:
        """First cycle at which the FIFO's head is presented (None: the FIFO is empty)."""
        if not self.fifo:
            return None
        a = self.fifo[0].arrival
        return a if a > self.last else self.last + 1

    def present(self, t: int) -> bool:
        """Drive ``req`` for cycle ``t``; True if a request is presented."""
        nxt = self.next_cycle()
        if nxt is None or t < nxt:
            self.valid.write(0)
            return False
        self.valid.write(1)
        self.payload.write(self._pack(self.fifo[0]))
        return True

    def take(self, t: int) -> Request | None:
        """After :meth:`present` (and, for a system of stacks, once the inputs settled):
        the request accepted in cycle ``t``, if ``req.ready`` is high."""
        if not self.ready.read():
            return None
        self.last = t
        return self.fifo.popleft()


class MediaResponder:
    """The NAND side: takes ``cmd[k]`` into the :class:`Media` of its stack, drives the
    completions on ``cpl[k]`` for one cycle each (at most one per channel per cycle, contract
    §1). Port ``k`` is channel ``k mod channels`` of stack ``k div channels`` (one
    :class:`Media` per stack, as the golden model's stack controllers have)."""

    def __init__(self, ports: ControllerPorts, cfg):
        self.medias = [Media(cfg) for _ in range(cfg.stacks)]
        self.channels = cfg.channels
        self.ports = ports.cpls
        self.codec = ports.cpl
        self.driven: list[int] = []
        self._packed: dict = {}
        self.multiplane = cfg.multiplane != "off"
        self.M, self.S = cfg.megaplane_planes, cfg.subarrays_per_channel
        self.delivered: list[tuple] = []    # multi-plane: this cycle's completions (MP7)

    def issue_group(self, t: int, k: int, op: int, g: int, planes: int, row: int) -> None:
        """A multi-plane command of cycle ``t`` on port ``k`` (MP2): plane ``p`` of the mask
        is subarray ``g * M + p``, its page ``row * S`` plus that subarray (§3); the
        media's tag of each operation is its plane."""
        s, ch = divmod(k, self.channels)
        ops = [(g * self.M + p, op, row * self.S + g * self.M + p, p)
               for p in range(self.M) if planes >> p & 1]
        self.medias[s].issue_group(t, ch, g, ops)

    def _pack_group(self, g: int, tags, flags) -> tuple[int, tuple]:
        masks = cpl_masks(g, tags, flags)
        v = self._packed.get(masks)
        if v is None:
            v = self._packed[masks] = self.codec.pack({
                "valid": 1, "megaplane": g, "planes": masks[1], "buffer_hit": masks[2],
                "error": masks[3]})
        return v, masks

    def _pack(self, sub: int, tag: int, flags: int) -> int:
        key = (sub, tag, flags)
        v = self._packed.get(key)
        if v is None:
            v = self._packed[key] = self.codec.pack({
                "valid": 1, "subarray": sub, "tag.kind": tag & 1, "tag.index": tag >> 1,
                "buffer_hit": int(bool(flags & FLAG_BUFFER_HIT)),
                "error": int(bool(flags & FLAG_ERROR))})
        return v

    def issue(self, t: int, k: int, sub: int, op: int, page: int, tag: int) -> None:
        """The command of cycle ``t`` on port ``k`` goes to its stack's media."""
        s, ch = divmod(k, self.channels)
        self.medias[s].issue(t, ch, sub, op, page, tag)

    def cycle(self, t: int) -> None:
        """Drive the completions of cycle ``t`` (after its commands were issued)."""
        now = []
        self.delivered = []
        for s, media in enumerate(self.medias):
            off = s * self.channels
            for ch, sub, tag, flags in media.deliver(t):
                if self.multiplane:     # (channel, megaplane, tags = planes, flags), MP7
                    v, masks = self._pack_group(sub, tag, flags)
                    self.ports[off + ch].write(v)
                    self.delivered.append((t, off + ch) + masks)
                else:
                    self.ports[off + ch].write(self._pack(sub, tag, flags))
                now.append(off + ch)
        self.delivered.sort()       # by channel, as the scoreboard's streams are
        for k in self.driven:
            if k not in now:
                self.ports[k].write(0)
        self.driven = now

    def next_cycle(self, t: int) -> int | None:
        """The next cycle this responder must act in."""
        if self.driven:
            return t + 1
        due = [d for d in (m.next_due() for m in self.medias) if d is not None]
        if not due:
            return None
        d = min(due)
        return d if d > t else t + 1


class CommandMonitor:
    """Samples every ``cmd[k]``; each valid command is an event (``k``: the global channel,
    ``stack * channels + channel``) and goes to the media."""

    def __init__(self, ports: ControllerPorts, media: MediaResponder):
        self.ports = list(enumerate(ports.cmds))
        self.valid = ports.cmd.mask("valid")
        self.multiplane = media.multiplane
        if self.multiplane:
            self.get = ports.cmd.getter("op", "megaplane", "planes", "row")
        else:
            self.get = ports.cmd.getter("subarray", "op", "page", "tag.index", "tag.kind")
        self.issue = media.issue
        self.issue_group = media.issue_group
        self.triggers = [port.handle.value_change for _, port in self.ports]

    def sample(self, t: int) -> list[tuple]:
        """``(t, channel, subarray, op, page, tag)`` of the commands of cycle ``t``; with
        multi-plane commands ``(t, channel, op, megaplane, planes, row)`` (MP2)."""
        out = []
        if self.multiplane:
            for ch, port in self.ports:
                v = port.read()
                if v & self.valid:
                    op, g, planes, row = self.get(v)
                    out.append((t, ch, op, g, planes, row))
                    self.issue_group(t, ch, op, g, planes, row)
            return out
        for ch, port in self.ports:
            v = port.read()
            if v & self.valid:
                sub, op, page, index, kind = self.get(v)
                tag = index * 2 + kind  # docs/rtl.md "Command tag"
                out.append((t, ch, sub, op, page, tag))
                self.issue(t, ch, sub, op, page, tag)
        return out


class ResponseMonitor:
    """Drives ``resp.ready`` from the scenario's pattern and samples the handshakes (§8);
    in the channel shape one per response port, all driven by the one pattern (the golden
    model's ``HbfSystem.resp_ready`` holds every port)."""

    def __init__(self, ports: ControllerPorts, ready_fn, port: int = 0):
        self.valid, self.ready, self.payload = ports.resps[port]
        self.ready_fn = ready_fn
        self.get = ports.resp.getter("id", "op", "source", "mshr_hit", "buffer_hit",
                                     "cache_hit", "error")
        self.busy = False  # resp.valid was high in the last sampled cycle

    def sample(self, t: int) -> tuple | None:
        """``(t, id, op, source, mshr_hit, buffer_hit, cache_hit, error)`` of cycle ``t``'s
        handshake, or None."""
        ready = self.ready_fn is None or self.ready_fn(t)
        self.ready.write(1 if ready else 0)
        self.busy = bool(self.valid.read())
        if self.busy and ready:
            return (t,) + self.get(self.payload.read())
        return None


class TraceRecorder:
    """Writes the RTL side's hbf-trace-v1 rows with the golden model's :class:`TraceWriter`,
    from the presented :class:`Request` objects filled in from the observed accepts and
    responses; keeps the requests in flight by id."""

    def __init__(self, cfg, mapper: Mapper, path: Path):
        self.cfg = cfg
        self.mapper = mapper
        self.writer = TraceWriter(path, 1)
        self.inflight: dict[int, Request] = {}
        self.inside = [0] * cfg.stacks   # per stack: accepted and not yet answered
        self.accepted = 0
        # several stacks in the stack shape: accepted at the system port, not yet by their
        # stack (the channel shape has no route stage, §2)
        self.route: deque[Request] | None = \
            deque() if cfg.stacks > 1 and not channel_shape(cfg) else None

    def accept(self, t: int, r: Request) -> None:
        """Request ``r`` was accepted in cycle ``t`` (call before this cycle's response:
        the Ingress depth counts the stack's requests accepted and not answered before t).
        With several stacks in the stack shape the depth is counted when the stack takes it
        from the route stage (:meth:`routed`), as the golden model does (§2)."""
        page = (r.addr - self.cfg.base_address) // PAGE_BYTES
        r.stack, r.q = self.mapper.stack_of(page)
        r.ch, r.local, r.sub = self.mapper.channel_of(r.q, r.op == "W")
        r.t_accept = t
        if self.route is not None:
            self.route.append(r)
        else:
            r.depth = self.inside[r.stack]
            self.inside[r.stack] += 1
        self.inflight[r.id] = r
        self.accepted += 1

    def routed(self, t: int, bits: int) -> None:
        """The route stage's head was taken by stack ``bits.bit_length() - 1`` in cycle
        ``t`` (call before this cycle's response, as :meth:`accept`)."""
        r = self.route.popleft() if self.route else None
        if r is None or bits != 1 << r.stack:
            raise RuntimeError(f"cycle {t}: routed = {bits:#x}, but the route stage's head is "
                               f"{'empty' if r is None else f'request {r.id} for stack {r.stack}'}")
        r.depth = self.inside[r.stack]
        self.inside[r.stack] += 1

    def respond(self, ev: tuple) -> Request:
        """Record the response ``ev``; return its request (with flags and ``t_done``)."""
        r = self.inflight.pop(ev[1], None)
        if r is None:   # the scoreboard compared the event first; this is a second response
            raise RuntimeError(f"cycle {ev[0]}: response for request {ev[1]}, which is not "
                               "in flight")
        r.t_done = ev[0]
        self.inside[r.stack] -= 1
        r.mshr_hit, r.buffer_hit, r.cache_hit, r.error = (bool(x) for x in ev[4:])
        self.writer.request(r, self.cfg)
        return r

    def close(self) -> None:
        self.writer.close()


class Testbench:
    """One scenario: golden run, reset, the event-driven cycle loop, results.

    Parameters
    ----------
    dut : cocotb handle
        ``hbf_controller``.
    sc : Scenario
    out_dir : Path
        Traces and the result JSON go here.
    tail_cycles : int
        Cycles watched after the last expected event.
    """

    def __init__(self, dut, sc: Scenario, out_dir: Path, tail_cycles: int = 32):
        self.dut = dut
        self.sc = sc
        self.cfg = sc.cfg()
        self.out = Path(out_dir)
        self.stem = file_stem(sc.name)
        self.tail = tail_cycles
        self.ports = ControllerPorts(dut, self.cfg)
        self.mapper = Mapper(self.cfg)
        self.e = 0
        self.wakes = self.sleeps = 0
        self.gpu: GpuPort | None = None
        self.ingress: list | None = None

    def vcd_time(self, t: int) -> int:
        return self.e + PERIOD * t

    def _now_cycle(self) -> int:
        d = get_sim_time("step") - self.e
        if d % PERIOD:
            raise RuntimeError(f"an output of hbf_controller changed at time {self.e + d}, "
                               "between clock edges: a port depends combinationally on an "
                               "input, which this testbench assumes it does not")
        return d // PERIOD

    async def _reset(self) -> None:
        p = self.ports
        p.rst.write(1)
        for valid, _ready, _payload in p.reqs:
            valid.write(0)
        for _valid, ready, _payload in p.resps:
            ready.write(0)
        p.drain.write(0)
        for c in p.cpls:
            c.write(0)
        Clock(p.clk, PERIOD, unit="step").start(start_high=False)
        for _ in range(RESET_CYCLES):
            await RisingEdge(p.clk)
        self.e = get_sim_time("step")
        await Timer(ACT, unit="step")
        p.rst.write(0)

    async def run(self) -> dict:
        sc = self.sc
        golden_trace = self.out / f"{self.stem}.golden.csv"
        rtl_trace = self.out / f"{self.stem}.rtl.csv"
        t0 = time.perf_counter()
        expected, golden_system = run_golden(sc, golden_trace)
        golden_s = time.perf_counter() - t0
        result = {"name": sc.name, "passed": False, "events_compared": 0,
                  "expected_events": expected.count(), "mismatches": 0, "diff": "",
                  "golden_s": golden_s, "golden_trace": str(golden_trace),
                  "rtl_trace": str(rtl_trace), "requests": sc.n_requests,
                  "closed_loop": sc.program is not None}
        await self._reset()
        sb = Scoreboard(expected, sc.name, self.vcd_time)
        trace = TraceRecorder(self.cfg, self.mapper, rtl_trace)
        # a GPU program runs here, closed loop on the RTL's responses (issue 4 item 1)
        self.gpu = GpuPort(self.cfg, sc.gpu_program()) if sc.program is not None else None
        self.ingress = [] if self.gpu is not None else None
        t1 = time.perf_counter()
        try:
            cycles = await self._loop(sb, trace)
        except Mismatch as m:
            result.update(mismatches=1, diff=m.text, mismatch_cycle=m.cycle,
                          mismatch_stream=m.stream)
            cycles = m.cycle
        finally:
            trace.close()
        wall = time.perf_counter() - t1
        result.update(events_compared=sb.compared, cycles=cycles, wall_s=wall,
                      cycles_per_s=cycles / wall if wall > 0 else 0.0,
                      requests_per_s=trace.accepted / wall if wall > 0 else 0.0,
                      wakes=self.wakes, sleeps=self.sleeps,
                      golden_summary=summary(expected), rtl_summary=summary(sb.actual),
                      vcd_cycle0_ns=self.e)
        same = golden_trace.read_bytes() == rtl_trace.read_bytes()
        result["traces_identical"] = same
        if not result["mismatches"] and not same:
            a = golden_trace.read_text().splitlines()
            b = rtl_trace.read_text().splitlines()
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            result.update(mismatches=1, diff=(
                f"events agree but the hbf-trace-v1 files differ at line {k + 1}:\n"
                f"  golden: {a[k] if k < len(a) else '(end of file)'}\n"
                f"  RTL:    {b[k] if k < len(b) else '(end of file)'}"))
        self._check_flushes(golden_system, result)
        if self.gpu is not None:
            self._check_gpu(expected, result)
        result["passed"] = result["mismatches"] == 0
        return result

    def _check_flushes(self, golden_system, result: dict) -> None:
        """Statistics the ports do not show (§5): the write buffer's flush counters per
        cause, read from the RTL's ``flushes`` port after the last event, must equal the
        golden model's (``flush_full`` ... ``flush_drain``)."""
        names = ("full", "raw", "pressure", "deadline", "drain")
        rtl = ControllerPorts.flush_counts(self.ports.flushes.read())
        gold = [golden_system.stats[f"flush_{c}"] for c in names]
        result["flushes"] = {"golden": dict(zip(names, gold)), "rtl": dict(zip(names, rtl))}
        if not result["mismatches"] and rtl != gold:
            result.update(mismatches=1, diff=(
                "events agree but the write buffer's flush counters differ (full, raw, "
                f"pressure, deadline, drain):\n  golden: {gold}\n  RTL:    {rtl}"))

    def _check_gpu(self, expected, result: dict) -> None:
        """The GPU run against the RTL must end like the golden closed loop: every kernel
        with the same launch and end tick and request count. Writes the realised ingress
        (what the GPU presented, with its grant ticks) beside the traces for `hbfsim waves`."""
        gpu = self.gpu.result()
        result["gpu_kernels"] = gpu.kernels
        path = self.out / f"{self.stem}.ingress.json"
        path.write_text(json.dumps(self.ingress))
        result["ingress"] = str(path)
        if result["mismatches"]:
            return
        if not self.gpu.finished:
            result.update(mismatches=1, diff=(
                f"the GPU program did not finish on the RTL: kernel "
                f"{self.gpu.cur.name if self.gpu.cur else None!r} has unfinished producers "
                f"after every expected event was seen"))
        elif gpu.kernels != expected.kernels:
            k = next(i for i, (a, b) in enumerate(zip(gpu.kernels + [None],
                                                      expected.kernels + [None])) if a != b)
            result.update(mismatches=1, diff=(
                f"events agree but the GPU's kernel {k} differs:\n"
                f"  golden: {expected.kernels[k] if k < len(expected.kernels) else None}\n"
                f"  RTL:    {gpu.kernels[k] if k < len(gpu.kernels) else None}"))

    def _drivers(self) -> list[RequestDriver]:
        """One request driver per port: the channel shape presents each request on the port
        of its mapped channel (§1), in arrival order per port; otherwise one driver.
        With a GPU program the drivers start empty and the loop hands each of the
        :class:`GpuPort`'s grants to the driver of its port (G5 / G5', docs/gpu.md)."""
        p, gpu = self.ports, self.gpu
        if gpu is not None:
            return [RequestDriver(p, self.mapper, (), gpu, port=k) for k in range(len(p.reqs))]
        if len(p.reqs) == 1:
            return [RequestDriver(p, self.mapper, self.sc.model_requests(), None)]
        fifos = [[] for _ in p.reqs]
        C = self.cfg.channels
        for r in self.sc.model_requests():
            page = (r.addr - self.cfg.base_address) // PAGE_BYTES
            stack, q = self.mapper.stack_of(page)
            fifos[stack * C + self.mapper.channel_of(q, r.op == "W")[0]].append(r)
        return [RequestDriver(p, self.mapper, f, None, port=k) for k, f in enumerate(fifos)]

    async def _loop(self, sb: Scoreboard, trace: TraceRecorder) -> int:
        """The cycle loop; returns the cycles simulated. Raises Mismatch."""
        p = self.ports
        gpu = self.gpu
        ingress = self.ingress
        drvs = self._drivers()
        media = MediaResponder(p, self.cfg)
        cmon = CommandMonitor(p, media)
        ready = self.sc.ready()
        rmons = [ResponseMonitor(p, ready, port=k) for k in range(len(p.resps))]
        m_valid, drain_port = p.m_valid, p.drain
        check = sb.check
        settle = p.system
        drain = False
        end = sb.last_expected_cycle() + self.tail
        t = 0
        while True:
            self.wakes += 1
            # the GPU's events of this cycle and its port grants, before the request ports
            # (GpuPort: grants, controller, then respond); each grant joins its port's
            # driver: port 0 under G5, system port stack * C + channel under G5' (§1, §2)
            if gpu is not None:
                g = gpu.next_tick()
                if g is not None and g <= t:
                    for k, r in gpu.grants(t):
                        drvs[k].fifo.append(r)
            all_accepted = all(d.all_accepted for d in drvs)
            # drain: from the first cycle with every request accepted and M empty (§1, W2)
            if not drain and all_accepted and not m_valid.read():
                drain = True
                drain_port.write(1)
            # Drive every input of the cycle first: the requests (§4.1), resp.ready (§8), and
            # the completions of this cycle after its commands were issued to the media
            # (§1, §7). A system of stacks routes req.payload to req.ready combinationally
            # (§2), so its req.ready is read once the inputs have settled.
            presented = [d.present(t) for d in drvs]
            evs = [e for e in (rm.sample(t) for rm in rmons) if e is not None]
            cmds = cmon.sample(t)
            media.cycle(t)
            if settle and any(presented):
                await ReadOnly()
            # accepts in port order: each takes the next admission depth (§4.1)
            accs = [d.take(t) if pr else None for d, pr in zip(drvs, presented)]
            accepted = [a for a in accs if a is not None]
            for acc in accepted:
                trace.accept(t, acc)
                if ingress is not None:
                    ingress.append([acc.id, acc.op, acc.addr, acc.nbytes, acc.source,
                                    acc.arrival])
            check(t, "accept", sorted((t, a.id) for a in accepted))
            routed = p.routed.read() if p.routed is not None else 0
            if routed:
                trace.routed(t, routed)
            # responses in port order, as the golden model hands them over (§8)
            check(t, "resp", evs)
            for ev in evs:
                req = trace.respond(ev)
                if gpu is not None:
                    gpu.respond(req, t)
            check(t, "cmd", cmds)
            check(t, "cpl", media.delivered)
            if t >= end and sb.done():
                return t
            # plan the next wake-up
            nxt = t + 1
            # Stay awake while an output is busy or an input must change next cycle (cpl
            # to clear; req.valid after an accept). A request that waits for req.ready
            # holds its inputs and sleeps on a change of req.ready instead.
            waiting = [d.valid.last and a is None for d, a in zip(drvs, accs)]
            if not (any(rm.busy for rm in rmons) or cmds or media.driven or accepted
                    or routed):
                cands = [end]
                for c in ([d.next_cycle() for d, wt in zip(drvs, waiting) if not wt]
                          + [media.next_cycle(t), sb.next_cycle(),
                             gpu.next_tick() if gpu is not None else None]):
                    if c is not None:
                        cands.append(c)
                wake = min(cands)
                if wake > nxt:
                    self.sleeps += 1
                    trig = [Timer(PERIOD * (wake - t), unit="step"),
                            *[rm.valid.handle.value_change for rm in rmons], *cmon.triggers]
                    if not drain and all(d.all_accepted for d in drvs):
                        trig.append(m_valid.handle.value_change)
                    trig += [d.ready.handle.value_change for d, wt in zip(drvs, waiting) if wt]
                    if p.routed is not None:
                        trig.append(p.routed.handle.value_change)
                    fired = await First(*trig)
                    if fired is trig[0]:
                        t = wake
                    else:
                        t = self._now_cycle()
                        await Timer(ACT, unit="step")
                    continue
                nxt = max(wake, nxt)
            await Timer(PERIOD * (nxt - t), unit="step")
            t = nxt


def _load_batch() -> Batch | None:
    path = os.environ.get(SCENARIO_ENV)
    return Batch.read(path) if path else None


_BATCH = _load_batch()
_NAMES = [s.name for s in _BATCH.scenarios] if _BATCH else ["(no batch)"]


@cocotb.test()
@cocotb.parametrize(scenario=_NAMES)
async def cosim(dut, scenario: str) -> None:
    """Run one scenario of the batch; fail with the scoreboard's diff on a mismatch."""
    if _BATCH is None:
        raise RuntimeError(f"${SCENARIO_ENV} does not name a scenario batch file")
    sc = next(s for s in _BATCH.scenarios if s.name == scenario)
    out = Path(_BATCH.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tb = Testbench(dut, sc, out, _BATCH.tail_cycles)
    result = await tb.run()
    path = out / f"{file_stem(sc.name)}.result.json"
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, path)
    if not result["passed"]:
        raise AssertionError(result["diff"])
