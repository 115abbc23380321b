"""What the GPU runs: warps (:class:`Producer`), :class:`Kernel` and :class:`GpuProgram`,
and the program's plain-data form.

A program is a description only: kernels in order, separated by barriers, each a set of
warps with a lazy access stream, a bound on outstanding requests, a start offset and a
compute delay. Nothing here simulates; the closed loop (:mod:`hbfsim.model.gpu`) and the
stepped port (:mod:`.gpu_port`) run programs. :func:`program_spec` and
:func:`program_from_spec` turn a program into JSON-friendly data and back, the form the
co-simulation sends to the simulator process. Separate from the issue machinery because
workloads build programs without running them. Re-exported by :mod:`hbfsim.model.gpu`.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from hbfsim.model.gpu_config import GpuConfig, GpuError

__all__ = ["GpuProgram", "Kernel", "Producer", "program_from_spec", "program_spec"]


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
