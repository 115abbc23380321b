"""The GPU side of the closed loop: kernel launch, warp issue into the memory
sub-partition FIFOs, the response return path, and what a run produces.

:class:`_GpuCore` holds the state the GPU keeps between controller ticks: the event heap
(kernel launches, accesses released by completions), one FIFO per memory sub-partition,
the port arbiter's round-robin pointer, and the per-request bookkeeping of the response
callback (latency, records, the next access a completion releases, a kernel's barrier).
It does not decide when ticks happen: :class:`~hbfsim.model.gpu.ClosedLoop` drives it
against an :class:`HbfSystem` in chunks and :class:`~hbfsim.model.gpu_port.GpuPort` steps
it one tick at a time for any controller; the one-port arbiter's grant (G5) is written out
in each driver's tick loop (it runs once per request), the channel shape's per-port grants
(G5') are one method both call (:meth:`_GpuCore._grant_ports`). :class:`GpuRequest`,
:class:`RequestRecord` and :class:`GpuResult` are the request and result types both drivers
share. Re-exported by :mod:`hbfsim.model.gpu`; docs/gpu.md describes the rules.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.gpu_config import GpuConfig, GpuError, gpu_cycles_to_ticks
from hbfsim.model.gpu_program import Kernel, Producer
from hbfsim.model.mapping import Mapper
from hbfsim.model.requests import write_pattern
from hbfsim.model.system import HbfSystem

__all__ = ["GpuRequest", "GpuResult", "RequestRecord"]


# Heap events are (tick, seq, kind, producer): kind 0 launches the next kernel, kind n > 0
# lets the producer issue up to n accesses (n = bound at its start, 1 per completion).
_LAUNCH = 0
_NEVER = 1 << 62        # a tick later than any simulation reaches


class GpuRequest(Request):
    """A :class:`Request` that remembers its producer and creation tick (GPU side)."""

    __slots__ = ("producer", "created")


class RequestRecord(NamedTuple):
    """One request of a recorded closed-loop run (``record=True``)."""

    id: int
    kernel: int
    producer: int
    sm: int
    source: int
    op: str
    addr: int
    nbytes: int
    data: bytes | None
    created: int
    arrival: int
    t_accept: int
    t_done: int
    mshr_hit: bool
    error: bool


@dataclass
class GpuResult:
    """What a closed-loop run produced.

    Members
    -------
    system : HbfSystem or None
        The finished HBF system (``collect_stats(result.system)`` for controller figures);
        None for a :class:`GpuPort` run against another controller (the RTL).
    start_tick, end_tick : int
        First kernel launch and last kernel barrier (the last completion).
    span_ticks, span_gpu_cycles, span_us : int, int, float
        ``end - start + 1`` ticks (the system window's convention), in both clock units.
    kernels : list of dict
        Per kernel: name, launch, end, requests, producers.
    requests, reads, writes : int
        Requests issued.
    gpu_latency_sum, gpu_latency_max : int
        Creation-to-response ticks (includes partition wait, port wait and service).
    partition_wait_sum, partition_wait_max : int
        Ticks from creation to the grant (waiting in a partition FIFO).
    peak_outstanding : int
        The most requests any producer had outstanding.
    bound_violations : int
        Producers that ever exceeded their bound (always 0; a self-check).
    records : list of RequestRecord or None
        With ``record=True``, every request in completion order.
    cfg : HbfConfig
        The HBF configuration the run used.
    """

    system: HbfSystem
    start_tick: int
    end_tick: int
    span_ticks: int
    span_gpu_cycles: int
    span_us: float
    kernels: list
    requests: int
    reads: int
    writes: int
    gpu_latency_sum: int
    gpu_latency_max: int
    partition_wait_sum: int
    partition_wait_max: int
    peak_outstanding: int
    bound_violations: int
    records: list | None = None
    cfg: HbfConfig | None = None

    @property
    def gpu_latency_mean(self) -> float:
        return self.gpu_latency_sum / self.requests if self.requests else 0.0

    def summary(self) -> dict:
        """A JSON-friendly dictionary of the GPU-side figures."""
        cfg = self.cfg
        return {
            "start_tick": self.start_tick, "end_tick": self.end_tick,
            "span_ticks": self.span_ticks, "span_gpu_cycles": self.span_gpu_cycles,
            "span_us": self.span_us, "requests": self.requests, "reads": self.reads,
            "writes": self.writes, "kernels": len(self.kernels),
            "gpu_latency_mean_ticks": self.gpu_latency_mean,
            "gpu_latency_max_ticks": self.gpu_latency_max,
            "gpu_latency_max_gpu_cycles": cfg.ticks_to_gpu_cycles(self.gpu_latency_max),
            "partition_wait_max_ticks": self.partition_wait_max,
            "peak_outstanding": self.peak_outstanding,
        }


class _GpuCore:
    """The GPU side of a closed loop: kernels, producers, partition FIFOs, the port arbiter's
    state and the response callback. :class:`ClosedLoop` drives it against an
    :class:`HbfSystem` in chunks; :class:`GpuPort` steps it one tick at a time for any
    controller (the RTL in co-simulation)."""

    def __init__(self, cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                 record: bool = False):
        self.cfg = cfg
        self.program = program
        self.gpu = gpu or getattr(program, "gpu", None) or GpuConfig()
        self.record = record
        self.system: HbfSystem | None = None
        g = self.gpu
        self.ret = gpu_cycles_to_ticks(g.return_cycles, cfg)
        self.launch_gap = gpu_cycles_to_ticks(g.launch_cycles, cfg)
        self.heap: list = []
        self.seq = 0
        self.parts = [deque() for _ in range(g.partitions)]
        self.queued = 0
        self.rr = 0
        # G5' (channel shape, timing-contract.md §14): one pointer per system port
        self.channel_shape = cfg.host_ports == "channel"
        self.prr = [0] * (cfg.stacks * cfg.channels)
        self._C = cfg.channels
        self._mapper = None
        self.next_id = 0
        self.kernels_done: list[Kernel] = []
        self.cur: Kernel | None = None
        self.next_kernel: Kernel | None = None
        self.kernel_iter = None
        self.closed = False
        self.n_kernels = 0
        self.n_producers = 0
        self.reads = self.writes = 0
        self.lat_sum = self.lat_max = 0
        self.pw_sum = self.pw_max = 0
        self.peak = 0
        self.violations = 0
        self.records: list | None = [] if record else None
        self.end_tick = -1
        # direct chunks (ClosedLoop.run): accesses created from the response callback are
        # granted at once when last_grant < tick < direct_before; chunk_h is the running
        # chunk's end. -1 (the stepped port) sends every released access through the heap.
        self.direct_before = -1
        self.last_grant = -1
        self.chunk_h = -1
        self.base = cfg.base_address
        self.pb = g.partition_bytes
        self.nparts = g.partitions
        self.submit = None

    def _port_of(self, req) -> int:
        """The system port ``stack * C + channel`` a request's page maps to (docs/timing-contract.md §1, §2)."""
        m = self._mapper
        if m is None:
            # the system's own mapper where there is one; a stepped port against another
            # controller (the RTL) maps with a mapper of the same configuration
            m = self._mapper = self.system.mapper if self.system is not None else Mapper(self.cfg)
        stack, q = m.stack_of((req.addr - self.base) // PAGE_BYTES)
        return stack * self._C + m.channel_of(q, req.op == "W")[0]

    def _grant_ports(self, x: int) -> list[tuple[int, GpuRequest]]:
        """The G5' grants of tick ``x`` (channel shape, docs/gpu.md G5',
        timing-contract.md §14), taken out of the partition FIFOs.

        Each partition FIFO offers only its head; each system port grants at most one
        request: the first partition at or after the port's own round-robin pointer whose
        head maps to it, and that pointer moves past it. Both drivers call this, so the
        chunked :class:`ClosedLoop` and the stepped :class:`GpuPort` decide alike.

        Returns
        -------
        list of (int, GpuRequest)
            ``(port, request)`` in ascending port order (the order the system takes them),
            each with ``arrival = x``; ``queued``, ``last_grant`` and the partition-wait
            figures are updated.
        """
        parts, nparts, prr, port_of = self.parts, self.nparts, self.prr, self._port_of
        cand: dict[int, list[int]] = {}
        for i in range(nparts):
            if parts[i]:
                cand.setdefault(port_of(parts[i][0]), []).append(i)
        out = []
        for k in sorted(cand):
            ptr = prr[k]
            i = min(cand[k], key=lambda j, ptr=ptr: (j - ptr) % nparts)
            r = parts[i].popleft()
            prr[k] = i + 1 if i + 1 < nparts else 0
            r.arrival = x
            w = x - r.created
            self.pw_sum += w
            if w > self.pw_max:
                self.pw_max = w
            out.append((k, r))
        if out:
            self.queued -= len(out)
            self.last_grant = x
        return out

    # ---------------------------------------------------------------- response callback
    def _on_response(self, req, t: int) -> None:
        p = req.producer
        p.out -= 1
        lat = t - req.created
        self.lat_sum += lat
        if lat > self.lat_max:
            self.lat_max = lat
        if self.records is not None:
            self.records.append(RequestRecord(
                req.id, p.kernel.index, p.pid, p.sm, req.source, req.op, req.addr, req.nbytes,
                req.data if req.op == "W" else None, req.created, req.arrival, req.t_accept,
                t, req.mshr_hit, req.error))
        acc = p.nxt
        if acc is None:
            if p.out == 0:
                k = p.kernel
                k.live -= 1
                if k.live == 0:
                    self._kernel_end(k, t)
            return
        # the released slot issues the next access after the return path and compute
        c = t + 1 + self.ret + p.cticks
        if not self.last_grant < c < self.direct_before:
            if c <= self.chunk_h:      # the driver's horizon rule was broken: a model bug
                raise GpuError(f"internal: response in tick {t} schedules tick {c} inside the "
                               f"running chunk (through {self.chunk_h})")
            heapq.heappush(self.heap, (c, self.seq, 1, p))
            self.seq += 1
            return
        # Direct issue (a direct chunk of run()): the partition FIFOs are empty, no other
        # GPU event lies before the chunk's end, and every response of the kernel creates
        # its access in a later tick than the previous one (one response per tick, one
        # compute delay for all producers). The arbiter would grant the access in its
        # creation tick c, exactly as the tick-by-tick driver does, so it is created and
        # submitted now with arrival = c.
        op, addr, nb = acc
        rel = addr - self.base
        nparts = self.nparts
        part = (rel // self.pb + rel // PAGE_BYTES) % nparts
        rid = self.next_id
        if op == "R":
            r = GpuRequest(rid, op, addr, nb, part, c)
            self.reads += 1
        elif op == "W":
            r = GpuRequest(rid, op, addr, nb, part, c, write_pattern(rid, nb))
            self.writes += 1
        else:
            raise GpuError(f"kernel {p.kernel.name!r} producer {p.pid}: op must be "
                           f"R or W, not {op!r}")
        self.next_id = rid + 1
        r.producer = p
        r.created = c
        k = p.kernel
        k.requests += 1
        p.issued += 1
        out = p.out + 1
        p.out = out
        if out > p.peak:
            p.peak = out
            if out > self.peak:
                self.peak = out
        self.rr = part + 1 if part + 1 < nparts else 0
        self.last_grant = c
        self.submit(r)
        acc = p.nxt = next(p.it, None)
        if acc is None:
            k.feeding -= 1
            if not self.closed and self._inputs_exhausted():
                self.system.close_input()      # G6: right after the program's last grant
                self.closed = True

    def _kernel_end(self, k: Kernel, t: int) -> None:
        k.end = t
        self.end_tick = t
        if self.next_kernel is not None:
            heapq.heappush(self.heap, (t + 1 + self.ret + self.launch_gap, self.seq,
                                       _LAUNCH, None))
            self.seq += 1

    # ---------------------------------------------------------------- GPU events
    def _launch(self, now: int) -> None:
        k = self.next_kernel
        self.next_kernel = next(self.kernel_iter, None)
        if k is None:
            return
        if not isinstance(k, Kernel):
            raise GpuError(f"a GPU program yields Kernel objects, not {type(k).__name__}")
        k.index = self.n_kernels
        self.n_kernels += 1
        k.launch = now
        self.cur = k
        self.kernels_done.append(k)
        prods = k.producers
        prods = list(prods() if callable(prods) else prods)
        k.nproducers = len(prods)
        live = 0
        cfg = self.cfg
        ctick = set()
        for p in prods:
            if not isinstance(p, Producer):
                raise GpuError(f"kernel {k.name!r}: producers must be Producer objects, "
                               f"not {type(p).__name__}")
            if p.kernel is not None:
                raise GpuError(f"kernel {k.name!r}: a Producer object can run only once")
            p.pid = self.n_producers
            self.n_producers += 1
            p.kernel = k
            p.cticks = c = gpu_cycles_to_ticks(k.compute if p.compute is None else p.compute,
                                               cfg)
            ctick.add(c)
            p.it = iter(p.accesses)
            p.nxt = next(p.it, None)
            if p.nxt is None:
                continue
            live += 1
            heapq.heappush(self.heap, (now + gpu_cycles_to_ticks(p.start, cfg), self.seq,
                                       p.bound, p))
            self.seq += 1
        k.live = k.feeding = live
        # one compute delay for every producer: responses (one per tick) then create their
        # follow-up accesses in strictly increasing ticks, which the direct path needs
        k.ucticks = ctick.pop() if len(ctick) == 1 else -1
        if live == 0:
            self._kernel_end(k, now)

    def _inputs_exhausted(self) -> bool:
        k = self.cur
        # a pending launch always has next_kernel set, so no heap scan is needed
        return self.next_kernel is None and not self.queued and (k is None or k.feeding == 0)

    def _issue(self, p: Producer, n: int, x: int) -> None:
        """Producer ``p`` creates up to ``n`` accesses in tick ``x`` (within its bound) into
        the partition FIFOs."""
        acc = p.nxt
        if acc is None:
            return
        k = p.kernel
        out = p.out
        bound = p.bound if out + n >= p.bound else out + n
        base, pb, nparts, parts = self.base, self.pb, self.nparts, self.parts
        rid = self.next_id
        while out < bound and acc is not None:
            op, addr, nb = acc
            rel = addr - base
            part = (rel // pb + rel // PAGE_BYTES) % nparts
            if op == "R":
                r = GpuRequest(rid, op, addr, nb, part, x)
                self.reads += 1
            elif op == "W":
                r = GpuRequest(rid, op, addr, nb, part, x, write_pattern(rid, nb))
                self.writes += 1
            else:
                raise GpuError(f"kernel {k.name!r} producer {p.pid}: op must be R or W, "
                               f"not {op!r}")
            rid += 1
            r.producer = p
            r.created = x
            parts[part].append(r)
            out += 1
            acc = next(p.it, None)
        self.next_id = rid
        self.queued += out - p.out
        k.requests += out - p.out
        p.issued += out - p.out
        p.out = out
        p.nxt = acc
        if acc is None:
            k.feeding -= 1
        if out > p.peak:
            p.peak = out
            if out > self.peak:
                self.peak = out

    def _describe(self, t: int) -> str:
        k = self.cur
        return (f"GPU deadlock at tick {t}: kernel {k.name if k else None!r} has "
                f"{k.live if k else 0} unfinished producers, nothing in flight")

    def _result(self, start: int) -> GpuResult:
        cfg = self.cfg
        end = self.end_tick if self.end_tick >= 0 else start
        span = end - start + 1
        kernels = [{"name": k.name, "launch": k.launch, "end": k.end,
                    "requests": k.requests, "producers": k.nproducers}
                   for k in self.kernels_done]
        return GpuResult(
            system=self.system, start_tick=start, end_tick=end, span_ticks=span,
            span_gpu_cycles=cfg.ticks_to_gpu_cycles(span), span_us=cfg.ticks_to_us(span),
            kernels=kernels, requests=self.next_id, reads=self.reads, writes=self.writes,
            gpu_latency_sum=self.lat_sum, gpu_latency_max=self.lat_max,
            partition_wait_sum=self.pw_sum, partition_wait_max=self.pw_max,
            peak_outstanding=self.peak, bound_violations=self.violations,
            records=self.records, cfg=self.cfg)
