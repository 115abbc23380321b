"""GPU request injection: the closed-loop GPU model and fixed-arrival (open-loop) replay.

Implements GPU request injection as the HBF-Sim paper's §3.1 / §5.2 describe it: GPU
producers (warps) issue sector (32 B) and line (64/128 B) loads and stores through memory
sub-partitions into the HBF system's request port; a producer's next request waits on its
completions, so the controller's service time feeds back into when later requests arrive.
Open loop freezes the controller-ingress ticks of a closed-loop run and replays them in
source order with no GPU execution. docs/gpu.md describes the model and its rules.

Structure (what the hardware has, in the order a request passes it):

* :class:`Producer` - one warp: an access stream, a bound on outstanding requests, a start
  offset and a compute delay between a completion and the access it enables.
* :class:`Kernel` - producers that run together; kernels are separated by barriers (a kernel
  ends in the tick its last request completes).
* memory sub-partitions - one FIFO per partition; a request's partition follows from its
  address (:func:`partition_of`) and is kept as its ``source`` for return routing (A5).
* the port arbiter - round-robin over non-empty partition FIFOs, at most one grant per
  controller tick (so at most one admission per partition per tick); a granted request is
  submitted with ``arrival`` = the grant tick and waits in the system's ingress FIFO while
  admission is full (L1). In the channel shape (G5') every system port grants at
  most one request per tick, from the partition heads that map to it.

This module is the public entry point: it holds the closed-loop driver
(:class:`ClosedLoop`) and the open-loop replay, and re-exports the rest of the GPU model
from the files that follow the hardware's seams:

* :mod:`.gpu_config` - :class:`GpuConfig` (SMs, sub-partitions, interleave, delays), the
  partition interleave and the GPU-cycle / tick conversions; :class:`GpuError`.
* :mod:`.gpu_program` - what the SMs run: :class:`Producer`, :class:`Kernel`,
  :class:`GpuProgram` and the plain-data form (:func:`program_spec`).
* :mod:`.gpu_issue` - the GPU-side state machine: kernel launch, warp issue into the
  sub-partition FIFOs, the response return path; :class:`GpuResult`.
* :mod:`.gpu_port` - the same GPU stepped tick by tick for any controller
  (:class:`GpuPort`, the co-simulation's) and :func:`run_stepped`.
"""

from __future__ import annotations

import heapq

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.gpu_config import (GpuConfig, GpuError, gpu_cycles_to_ticks, partition_of,
                                     us_to_gpu_cycles)
from hbfsim.model.gpu_issue import (_LAUNCH, _NEVER, GpuRequest, GpuResult, RequestRecord,
                                    _GpuCore)
from hbfsim.model.gpu_port import GpuPort, run_stepped
from hbfsim.model.gpu_program import (GpuProgram, Kernel, Producer, program_from_spec,
                                      program_spec)
from hbfsim.model.system import HbfSystem

__all__ = [
    "ClosedLoop",
    "GpuConfig",
    "GpuError",
    "GpuPort",
    "GpuProgram",
    "GpuRequest",
    "GpuResult",
    "Kernel",
    "Producer",
    "RequestRecord",
    "gpu_cycles_to_ticks",
    "open_loop_requests",
    "partition_of",
    "program_from_spec",
    "program_spec",
    "run_closed_loop",
    "run_open_loop",
    "run_stepped",
    "us_to_gpu_cycles",
]


# ----------------------------------------------------------------------------- closed loop
class ClosedLoop(_GpuCore):
    """Run a :class:`GpuProgram` against an :class:`HbfSystem` with completion feedback.

    Parameters
    ----------
    cfg : HbfConfig
        HBF configuration (also supplies ``gpu_clock_mhz``).
    program : GpuProgram or iterable of Kernel
        What to run.
    gpu : GpuConfig, optional
        GPU configuration; default ``program.gpu`` or :class:`GpuConfig()`.
    keep : bool
        Keep completed requests in ``system.completed``.
    record : bool
        Keep a :class:`RequestRecord` per request (needed for open-loop replay).
    trace : TraceWriter, optional
        hbf-trace-v1 writer handed to the system.
    resp_ready : callable, optional
        ``f(tick) -> bool``, the consumer's ``resp.ready`` (``HbfSystem.resp_ready``;
        default always ready).

    Notes
    -----
    The driver advances the system in chunks with ``HbfSystem.run(until=H)``. Every event a
    response can cause lies at least ``1 + return ticks`` after it, so a chunk may run
    ``return ticks`` beyond the current tick without missing one; with a backlog in the
    partition FIFOs the arbiter needs every tick and the chunk is one tick. When the
    system skipped idle ticks past the next GPU event, the driver moves ``system.t`` back
    to that event: the skipped ticks were no-ops (C3), so this is exact (docs/gpu.md).
    """

    def __init__(self, cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                 keep: bool = False, record: bool = False, trace=None, resp_ready=None):
        super().__init__(cfg, program, gpu, record)
        self.system = HbfSystem(cfg, on_response=self._on_response, keep=keep, trace=trace)
        self.system.resp_ready = resp_ready
        self.submit = self.system.submit

    # ---------------------------------------------------------------- the driver
    def run(self) -> GpuResult:
        """Run the program to its last barrier; return a :class:`GpuResult`.

        Each round handles the GPU ticks ``now .. x`` (issue events, one port grant per
        tick) and then runs the system in a chunk through tick ``h``. In a horizon chunk
        ``h`` is at most ``now + return ticks`` (a response in tick t causes events from
        ``t + 1 + return`` on) and stops before the next known GPU event. In a direct chunk
        (partition FIFOs empty, one compute delay for the whole kernel) the response
        callback creates and grants the released accesses itself, so ``h`` is the tick
        before the next known GPU event, or unbounded (docs/gpu.md §2). The per-request
        work is written out here because it runs once per request.
        """
        system = self.system
        heap = self.heap
        heappop, heappush = heapq.heappop, heapq.heappush
        self.kernel_iter = iter(self.program)
        self.next_kernel = next(self.kernel_iter, None)
        start = system.t
        if self.next_kernel is None:
            system.close_input()
            return self._result(start)
        heappush(heap, (start, self.seq, _LAUNCH, None))
        self.seq += 1
        ret = self.ret
        parts = self.parts
        nparts = len(parts)
        submit = system.submit
        sysrun = system.run
        queued = 0          # requests waiting in partition FIFOs
        rr = 0              # arbiter pointer: the partition to look at first
        ports = system.ports
        grant_ports = self._grant_ports     # G5' (channel shape)
        rid = 0             # next request id (creation order)
        reads = writes = 0
        lg = -1             # tick of the last grant
        pw_sum = pw_max = 0
        now = start
        while True:
            limit = now + ret
            x = now
            while True:
                # GPU events of tick x; a launch may start producers in the same tick
                while heap and heap[0][0] <= x:
                    _, _, kind, p = heappop(heap)
                    if kind == _LAUNCH:
                        self.queued = queued
                        self._launch(x)
                        continue
                    if p.nxt is None:
                        continue
                    self.next_id, self.reads, self.writes, self.queued = \
                        rid, reads, writes, queued
                    self._issue(p, kind, x)
                    rid, reads, writes, queued = \
                        self.next_id, self.reads, self.writes, self.queued
                if queued and ports:
                    # G5' (timing-contract.md §14): one grant per port per tick, decided
                    # by the code the stepped GpuPort uses (_GpuCore._grant_ports)
                    self.queued, self.pw_sum, self.pw_max, self.last_grant = \
                        queued, pw_sum, pw_max, lg
                    for k, r in grant_ports(x):
                        submit(r, k)
                    queued, pw_sum, pw_max, lg = \
                        self.queued, self.pw_sum, self.pw_max, self.last_grant
                # the port arbiter: one grant per tick, round-robin over the partitions
                elif queued:
                    i = rr
                    while not parts[i]:
                        i = i + 1 if i + 1 < nparts else 0
                    r = parts[i].popleft()
                    queued -= 1
                    rr = i + 1 if i + 1 < nparts else 0
                    r.arrival = lg = x
                    w = x - r.created
                    pw_sum += w
                    if w > pw_max:
                        pw_max = w
                    submit(r)
                if x >= limit:
                    break
                nx = x + 1 if queued else (heap[0][0] if heap else limit + 1)
                if nx > limit:
                    break
                x = nx
            self.queued = queued
            if not self.closed and self._inputs_exhausted():
                # no request will ever come again: assert drain after the last accept (W2)
                system.close_input()
                self.closed = True
            if self.closed:
                system.t = now
                sysrun()
                break
            g0 = heap[0][0] if heap else None
            k = self.cur
            # no direct chunks in the channel shape: its S * C response ports may respond
            # several times in one tick, which the direct rule excludes (docs/gpu.md §2)
            direct = not queued and not ports and k is not None and k.ucticks >= 0
            if queued:
                h = x
            elif direct:
                # a direct chunk: responses create and grant their follow-up accesses from
                # the callback (_on_response), so the system may run up to the next known
                # GPU event (or to quiescence) and skip idle ticks on its own
                h = None if g0 is None else g0 - 1
            else:
                h = limit
                if g0 is not None and g0 - 1 < h:
                    h = g0 - 1
            self.next_id, self.reads, self.writes, self.rr, self.last_grant = \
                rid, reads, writes, rr, lg
            self.chunk_h = _NEVER if h is None else h
            if direct:
                self.direct_before = _NEVER if g0 is None else g0
            system.t = now
            sysrun(h)
            self.direct_before = self.chunk_h = -1
            rid, reads, writes, rr, lg = \
                self.next_id, self.reads, self.writes, self.rr, self.last_grant
            if self.closed:          # the last access was granted inside the chunk
                sysrun()
                break
            st = system.t
            g = h + 1 if queued else (heap[0][0] if heap else None)
            if h is None or st <= h:
                # the system stopped by itself: nothing in flight, nothing queued
                if g is None:
                    raise GpuError(self._describe(st))
                now = g
            elif g is not None and g < st:
                now = g      # the system skipped no-op ticks past the next GPU event (C3)
            else:
                # the system stopped at h in a skip: the ticks up to its next event are
                # no-ops (C3), so the next round starts at that event or the next GPU
                # event, whichever is first (one-tick horizons would evaluate every tick)
                nt = system.t_resume
                if nt is None or nt <= st:
                    now = st
                elif g is not None and g < nt:
                    now = g
                else:
                    now = nt
            if now < st and system.n_done != system.submitted:
                raise GpuError(f"internal: rewinding the system from tick {st} to {now} "
                               f"with {system.submitted - system.n_done} requests open")
        self.next_id = rid
        self.reads, self.writes = reads, writes
        self.pw_sum, self.pw_max = pw_sum, pw_max
        return self._result(start)


def run_closed_loop(cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                    keep: bool = False, record: bool = False, trace=None,
                    resp_ready=None) -> GpuResult:
    """Run ``program`` closed-loop on a fresh :class:`HbfSystem`; see :class:`ClosedLoop`."""
    return ClosedLoop(cfg, program, gpu, keep=keep, record=record, trace=trace,
                      resp_ready=resp_ready).run()


# ----------------------------------------------------------------------------- open loop
def open_loop_requests(records, port_of=None) -> list[Request]:
    """Freeze a recorded run's controller-ingress ticks (source §5.2 fixed-arrival replay).

    Parameters
    ----------
    records : GpuResult or iterable of RequestRecord
        A closed-loop run made with ``record=True``.
    port_of : callable, optional
        ``port_of(record)`` -> the system request port the record entered by (the channel
        shape, G5'). A port accepts one request per tick, but one partition's requests,
        granted in different ticks to different ports, may be accepted in the same tick, so
        there the uniqueness check is per port. Without it (one port per stack) it is per
        partition, which G5 grants at most once per tick.

    Returns
    -------
    list of Request
        Fresh requests in source (ingress) order with ``arrival`` = the recorded
        ``t_accept``; same ids, addresses, sizes, sources and write data. No GPU execution.

    Raises
    ------
    ValueError
        A record was never accepted, or two records of one partition (of one port, with
        ``port_of``) share a tick.
    """
    if isinstance(records, GpuResult):
        if records.records is None:
            raise ValueError("the closed-loop run was made without record=True")
        records = records.records
    rows = sorted(records, key=lambda r: (r.t_accept, r.id))
    out = []
    seen = set()
    for r in rows:
        if r.t_accept < 0:
            raise ValueError(f"request {r.id}: t_accept {r.t_accept} (never accepted)")
        if port_of is None:
            key = (r.t_accept, r.source)
            if key in seen:
                raise ValueError(f"request {r.id}: partition {r.source} already admits a "
                                 f"request in tick {r.t_accept}")
        else:
            key = (r.t_accept, "port", port_of(r))
            if key in seen:
                raise ValueError(f"request {r.id}: port {key[2]} already accepts a request "
                                 f"in tick {r.t_accept}")
        seen.add(key)
        out.append(Request(r.id, r.op, r.addr, r.nbytes, r.source, r.t_accept, r.data))
    return out


def run_open_loop(cfg: HbfConfig, records, keep: bool = True, trace=None) -> HbfSystem:
    """Replay :func:`open_loop_requests` on a fresh system and run it to completion."""
    system = HbfSystem(cfg, keep=keep, trace=trace)
    port_of = None
    if system.ports:                       # channel shape: one port per (stack, channel)
        m, base, C = system.mapper, cfg.base_address, cfg.channels

        def port_of(r):
            stack, q = m.stack_of((r.addr - base) // PAGE_BYTES)
            return stack * C + m.channel_of(q, r.op == "W")[0]
    system.run_requests(open_loop_requests(records, port_of))
    return system
