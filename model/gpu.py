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
  admission is full (L1).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Iterable, Iterator, NamedTuple

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.requests import write_pattern
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

# Heap events are (tick, seq, kind, producer): kind 0 launches the next kernel, kind n > 0
# lets the producer issue up to n accesses (n = bound at its start, 1 per completion).
_LAUNCH = 0
_NEVER = 1 << 62        # a tick later than any simulation reaches


class GpuError(ValueError):
    """A malformed GPU program or GPU configuration; the message names field and value."""


# ----------------------------------------------------------------------------- clocks
def gpu_cycles_to_ticks(cycles: int, cfg: HbfConfig) -> int:
    """Convert a GPU-core-cycle delay to controller ticks, rounding up.

    ``ticks = ceil(cycles * memory_clock_khz / gpu_clock_khz)`` in integer arithmetic: a GPU
    delay is never shortened, a positive delay costs at least one tick and zero stays zero.
    It is the inverse direction of contract §9 (ticks -> GPU cycles, also rounded up).
    """
    if cycles <= 0:
        return 0
    return -(-cycles * cfg.memory_clock_khz // cfg.gpu_clock_khz)


def us_to_gpu_cycles(us: float, cfg: HbfConfig) -> int:
    """Microseconds to GPU core cycles: round half up of ``us * gpu_clock_mhz`` (exact)."""
    v = Decimal(repr(us)) * Decimal(repr(cfg.gpu_clock_mhz))
    return int(v.quantize(Decimal(1), rounding=ROUND_HALF_UP))


# ----------------------------------------------------------------------------- config
@dataclass(frozen=True)
class GpuConfig:
    """GPU-side parameters (the HBF side is :class:`hbfsim.config.HbfConfig`).

    Members
    -------
    sms : int
        Streaming multiprocessors. Producers name their SM; it groups them for statistics
        (the HBF port, one request per tick, is tighter than any SM issue rate).
    partitions : int
        Memory sub-partitions, each with one FIFO in front of the HBF port.
    partition_bytes : int
        Address interleave of the partitions (a power of two, at least 32).
    return_cycles : int
        GPU cycles from an HBF response to the warp seeing it (interconnect and fill path);
        added to every completion-triggered delay. It is also the lookahead the driver may
        use, so a larger value runs faster.
    launch_cycles : int
        GPU cycles from a kernel's barrier to the next kernel's launch.
    """

    sms: int = 8
    partitions: int = 8
    partition_bytes: int = 256
    return_cycles: int = 0
    launch_cycles: int = 0

    def __post_init__(self):
        for name in ("sms", "partitions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GpuError(f"{name} must be a positive integer, not {v!r}")
        for name in ("return_cycles", "launch_cycles"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise GpuError(f"{name} must be a non-negative integer, not {v!r}")
        pb = self.partition_bytes
        if isinstance(pb, bool) or not isinstance(pb, int) or pb < 32 or pb & (pb - 1):
            raise GpuError(f"partition_bytes must be a power of two >= 32, not {pb!r}")


def partition_of(addr: int, cfg: HbfConfig, gpu: GpuConfig) -> int:
    """Memory sub-partition of a byte address (rotated interleave).

    ``chunk = (a - B) // partition_bytes``, ``page = (a - B) // 4096``,
    ``partition = (chunk + page) mod partitions``: consecutive chunks rotate over the
    partitions and every page starts one partition later, so page-strided streams do not
    all land in one partition.
    """
    rel = addr - cfg.base_address
    return (rel // gpu.partition_bytes + rel // PAGE_BYTES) % gpu.partitions


# ----------------------------------------------------------------------------- program
class Producer:
    """One warp: a lazy access stream with a bounded number of requests outstanding.

    Parameters
    ----------
    accesses : iterable of (op, addr, nbytes)
        ``op`` is ``"R"`` or ``"W"``; one access is one HBF request (a 32 B sector or a
        64/128 B line; it may not cross a 4 KiB page). Consumed lazily.
    bound : int
        Most requests this producer may have outstanding (issued, not yet completed).
    start : int
        GPU cycles after the kernel launch before the first access.
    compute : int or None
        GPU cycles between a completion and the access it releases (the dependent
        compute); None takes the kernel's value.
    sm : int
        The SM the warp runs on (statistics only).

    Members
    -------
    out, peak, issued : int
        Outstanding now, most outstanding ever, requests issued (runtime state).
    """

    __slots__ = ("accesses", "bound", "start", "compute", "sm", "pid", "it", "nxt", "out",
                 "kernel", "cticks", "peak", "issued")

    def __init__(self, accesses: Iterable, bound: int = 1, start: int = 0,
                 compute: int | None = None, sm: int = 0):
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise GpuError(f"bound must be a positive integer, not {bound!r}")
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise GpuError(f"start must be a non-negative integer of GPU cycles, not {start!r}")
        if compute is not None and (isinstance(compute, bool) or not isinstance(compute, int)
                                    or compute < 0):
            raise GpuError(f"compute must be a non-negative integer of GPU cycles, "
                           f"not {compute!r}")
        self.accesses = accesses
        self.bound = bound
        self.start = start
        self.compute = compute
        self.sm = sm
        self.pid = -1
        self.out = self.peak = self.issued = 0
        self.kernel = None
        self.it = None
        self.nxt = None
        self.cticks = 0


class Kernel:
    """Producers that run together; the next kernel starts after this one's barrier.

    Parameters
    ----------
    name : str
        Kernel name (statistics).
    producers : iterable of Producer, or a callable returning one
        Materialised at launch (the producers' access streams stay lazy).
    compute : int
        Default compute delay in GPU cycles for producers that give none.

    Members
    -------
    launch, end : int
        Launch tick and the tick its last request completed (-1 until known).
    requests : int
        Requests its producers issued.
    """

    __slots__ = ("name", "producers", "compute", "index", "launch", "end", "requests",
                 "out", "live", "feeding", "nproducers", "ucticks")

    def __init__(self, name: str, producers, compute: int = 0):
        if isinstance(compute, bool) or not isinstance(compute, int) or compute < 0:
            raise GpuError(f"kernel {name!r}: compute must be a non-negative integer of GPU "
                           f"cycles, not {compute!r}")
        self.name = name
        self.producers = producers
        self.compute = compute
        self.index = -1
        self.launch = self.end = -1
        self.requests = self.out = self.live = self.feeding = self.nproducers = 0
        self.ucticks = -1


class GpuProgram:
    """A closed-loop GPU program: kernels in order, separated by barriers.

    Parameters
    ----------
    kernels : iterable of Kernel, or a callable returning one
        A callable makes the program re-runnable (each run calls it for fresh kernels);
        kernels are pulled one at a time, so a program never sits in memory at once.
    name : str
        Program (workload) name.
    config : dict
        HBF configuration overrides the workload was designed for (placement maps, the
        source study's resources); informational, :func:`run_closed_loop` does not apply
        them.
    gpu : GpuConfig or None
        The GPU configuration the workload was designed for.
    expected : dict
        Counts the program generates (e.g. ``requests``), for checks and reports.
    params : dict
        The parameters it was built with.
    """

    def __init__(self, kernels, name: str = "program", config: dict | None = None,
                 gpu: GpuConfig | None = None, expected: dict | None = None,
                 params: dict | None = None):
        self._kernels = kernels
        self.name = name
        self.config = dict(config or {})
        self.gpu = gpu
        self.expected = dict(expected or {})
        self.params = dict(params or {})

    def __iter__(self) -> Iterator[Kernel]:
        k = self._kernels
        return iter(k() if callable(k) else k)

    def accesses(self) -> Iterator[tuple]:
        """Every access of the program in kernel/producer order, lazily (for counting)."""
        for kernel in self:
            prods = kernel.producers
            for p in (prods() if callable(prods) else prods):
                yield from p.accesses

    def __repr__(self):
        return f"GpuProgram({self.name!r}, params={self.params!r})"


def program_spec(program, gpu: GpuConfig | None = None, limit: int | None = None) -> dict:
    """A GPU program as plain JSON-friendly data (materialises every access).

    Parameters
    ----------
    program : GpuProgram or iterable of Kernel
        A re-runnable program is left re-runnable; a one-shot one is consumed.
    gpu : GpuConfig, optional
        Default ``program.gpu`` or :class:`GpuConfig()`.
    limit : int, optional
        Keep only the first ``limit`` accesses in kernel/producer order: the producer that
        reaches the limit is cut there and every later producer and kernel is dropped.

    Returns
    -------
    dict
        ``{"name", "gpu": {GpuConfig fields}, "kernels": [{"name", "compute", "producers":
        [{"bound", "start", "compute", "sm", "accesses": [[op, addr, nbytes], ...]}]}]}``;
        :func:`program_from_spec` rebuilds the program. The co-simulation sends programs
        to the simulator process in this form.
    """
    g = gpu or getattr(program, "gpu", None) or GpuConfig()
    left = limit if limit is not None else -1
    kernels = []
    for k in program:
        if left == 0:
            break
        prods = []
        for p in (k.producers() if callable(k.producers) else k.producers):
            if left == 0:
                break
            acc = []
            for op, addr, nb in p.accesses:
                if left == 0:
                    break
                acc.append([op, addr, nb])
                left -= 1
            prods.append({"bound": p.bound, "start": p.start, "compute": p.compute,
                          "sm": p.sm, "accesses": acc})
        kernels.append({"name": k.name, "compute": k.compute, "producers": prods})
    return {"name": getattr(program, "name", "program"),
            "gpu": {f: getattr(g, f) for f in ("sms", "partitions", "partition_bytes",
                                               "return_cycles", "launch_cycles")},
            "kernels": kernels}


def program_from_spec(spec: dict) -> GpuProgram:
    """Rebuild a re-runnable :class:`GpuProgram` from :func:`program_spec`'s data.

    Raises
    ------
    GpuError
        A missing or malformed field (the message names it).
    """
    try:
        gpu = GpuConfig(**spec["gpu"])
        kernels = [(str(k["name"]), int(k["compute"]),
                    [(p["bound"], p["start"], p["compute"], p["sm"],
                      [tuple(a) for a in p["accesses"]]) for p in k["producers"]])
                   for k in spec["kernels"]]
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, GpuError):
            raise
        raise GpuError(f"GPU program spec: missing or malformed field {e}") from None
    for name, _, prods in kernels:
        for i, (*_, accesses) in enumerate(prods):
            for a in accesses:
                if len(a) != 3 or a[0] not in ("R", "W"):
                    raise GpuError(f"GPU program spec: kernel {name!r} producer {i}: access "
                                   f"must be [op R|W, addr, nbytes], not {list(a)!r}")

    def make():
        return [Kernel(name, [Producer(acc, bound=b, start=st, compute=c, sm=sm)
                              for b, st, c, sm, acc in prods], compute=kc)
                for name, kc, prods in kernels]

    make()      # Producer and Kernel check their fields now, not when the program runs
    return GpuProgram(make, str(spec.get("name", "program")), gpu=gpu)


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


# ----------------------------------------------------------------------------- closed loop
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
                # the port arbiter: one grant per tick, round-robin over the partitions
                if queued:
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
            direct = not queued and k is not None and k.ucticks >= 0
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
                now = st
            if now < st and system.n_done != system.submitted:
                raise GpuError(f"internal: rewinding the system from tick {st} to {now} "
                               f"with {system.submitted - system.n_done} requests open")
        self.next_id = rid
        self.reads, self.writes = reads, writes
        self.pw_sum, self.pw_max = pw_sum, pw_max
        return self._result(start)


class GpuPort(_GpuCore):
    """The closed-loop GPU model stepped one tick at a time, for any controller.

    The controller is the caller's. For every tick the port must act in (:meth:`next_tick`)
    the caller calls :meth:`tick`, which handles that tick's GPU events (launches, accesses
    released by earlier completions) and the port arbiter's grant; the caller presents the
    granted request to its controller (``arrival`` = the grant tick; it waits in an ingress
    FIFO while the controller's ``req.ready`` is low, as ``HbfSystem.submit`` does) and
    reports every response handshake with :meth:`respond`, after filling in the request's
    ``t_accept`` and response flags. Within a tick the order is: :meth:`tick`, then the
    controller, then :meth:`respond` for the tick's response; a response in tick ``t``
    releases accesses from tick ``t + 1 + return`` on.

    Driven so, the port sees exactly what :class:`ClosedLoop` sees from an
    :class:`HbfSystem`: :func:`run_stepped` drives it against one (the reference for
    ClosedLoop's chunked driver, tests/model/test_gpu.py), and the co-simulation drives it
    against the RTL, so that the GPU's next requests depend on the RTL's own responses
    (docs/cosim.md).

    Parameters
    ----------
    cfg, program, gpu, record
        As :class:`ClosedLoop`.
    start : int
        The tick of the first kernel launch.
    """

    def __init__(self, cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                 record: bool = False, start: int = 0):
        super().__init__(cfg, program, gpu, record)
        self.start_tick = start
        self.t = start - 1                 # the last tick handled
        self.kernel_iter = iter(self.program)
        self.next_kernel = next(self.kernel_iter, None)
        if self.next_kernel is None:
            self.closed = True
        else:
            heapq.heappush(self.heap, (start, self.seq, _LAUNCH, None))
            self.seq += 1

    @property
    def exhausted(self) -> bool:
        """No request will be granted again: the controller's input may close (G6, W2)."""
        return self.closed

    @property
    def finished(self) -> bool:
        """Every kernel has ended (its last request completed)."""
        k = self.cur
        return (self.closed and not self.heap and self.next_kernel is None
                and (k is None or k.live == 0))

    def next_tick(self) -> int | None:
        """The next tick :meth:`tick` must handle, or None while the port waits only for
        responses (or has finished): the next tick while a partition FIFO holds a request
        (one grant per tick), else the earliest pending launch or release."""
        if self.queued:
            return self.t + 1
        return self.heap[0][0] if self.heap else None

    def tick(self, t: int) -> GpuRequest | None:
        """Handle GPU tick ``t``; return the request the port arbiter grants in it, if any.

        Raises
        ------
        GpuError
            ``t`` is not after the last tick handled, or a tick that needed handling was
            skipped (a caller bug: the timing would be wrong).
        """
        nxt = self.next_tick()
        if t <= self.t or (nxt is not None and nxt < t):
            raise GpuError(f"internal: GPU port stepped to tick {t} after tick {self.t} "
                           f"with tick {nxt} pending")
        self.t = t
        heap = self.heap
        while heap and heap[0][0] <= t:
            _, _, kind, p = heapq.heappop(heap)
            if kind == _LAUNCH:
                self._launch(t)
            else:
                self._issue(p, kind, t)
        r = None
        if self.queued:
            parts = self.parts
            n = self.nparts
            i = self.rr
            while not parts[i]:
                i = i + 1 if i + 1 < n else 0
            r = parts[i].popleft()
            self.queued -= 1
            self.rr = i + 1 if i + 1 < n else 0
            r.arrival = self.last_grant = t
            w = t - r.created
            self.pw_sum += w
            if w > self.pw_max:
                self.pw_max = w
        if not self.closed and self._inputs_exhausted():
            self.closed = True
        return r

    def respond(self, req: GpuRequest, t: int) -> None:
        """The controller answered ``req`` in tick ``t`` (its ``t_accept`` and flags set)."""
        if t < self.t:
            raise GpuError(f"internal: a response of tick {t} reported after GPU tick "
                           f"{self.t} was handled")
        self._on_response(req, t)

    def result(self) -> GpuResult:
        """The run's :class:`GpuResult` (``system`` is None unless the caller set it)."""
        return self._result(self.start_tick)


def run_stepped(cfg: HbfConfig, program, gpu: GpuConfig | None = None, keep: bool = False,
                record: bool = False, trace=None, resp_ready=None) -> GpuResult:
    """Run ``program`` through a :class:`GpuPort` against a fresh :class:`HbfSystem`, one
    tick at a time (no horizon, no lookahead): the reference :class:`ClosedLoop` must equal.

    ``resp_ready`` is the consumer's ``resp.ready`` per tick (``HbfSystem.resp_ready``).
    """
    port = GpuPort(cfg, program, gpu, record)
    system = port.system = HbfSystem(cfg, on_response=port.respond, keep=keep, trace=trace)
    system.resp_ready = resp_ready
    t = port.start_tick
    while True:
        r = port.tick(t)
        if r is not None:
            system.submit(r)
        system.t = t
        if port.exhausted:
            system.close_input()
            system.run()
            break
        system.run(until=t)
        if port.next_tick() is None and system.n_done == system.submitted:
            raise GpuError(port._describe(t))
        t += 1
    return port.result()


def run_closed_loop(cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                    keep: bool = False, record: bool = False, trace=None,
                    resp_ready=None) -> GpuResult:
    """Run ``program`` closed-loop on a fresh :class:`HbfSystem`; see :class:`ClosedLoop`."""
    return ClosedLoop(cfg, program, gpu, keep=keep, record=record, trace=trace,
                      resp_ready=resp_ready).run()


# ----------------------------------------------------------------------------- open loop
def open_loop_requests(records) -> list[Request]:
    """Freeze a recorded run's controller-ingress ticks (source §5.2 fixed-arrival replay).

    Parameters
    ----------
    records : GpuResult or iterable of RequestRecord
        A closed-loop run made with ``record=True``.

    Returns
    -------
    list of Request
        Fresh requests in source (ingress) order with ``arrival`` = the recorded
        ``t_accept``; same ids, addresses, sizes, sources and write data. No GPU execution.

    Raises
    ------
    ValueError
        A record was never accepted, or two records of one partition share a tick (the
        replay admits at most one request per partition per tick).
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
        key = (r.t_accept, r.source)
        if key in seen:
            raise ValueError(f"request {r.id}: partition {r.source} already admits a request "
                             f"in tick {r.t_accept}")
        seen.add(key)
        out.append(Request(r.id, r.op, r.addr, r.nbytes, r.source, r.t_accept, r.data))
    return out


def run_open_loop(cfg: HbfConfig, records, keep: bool = True, trace=None) -> HbfSystem:
    """Replay :func:`open_loop_requests` on a fresh system and run it to completion."""
    system = HbfSystem(cfg, keep=keep, trace=trace)
    system.run_requests(open_loop_requests(records))
    return system
