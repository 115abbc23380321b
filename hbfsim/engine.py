"""The compiled engine's Python side: is it built, and its components from a configuration.

``hbfsim._engine`` is a C++17 extension (``engine/``, built by ``pip install -e .`` through
setup.py; docs/engine.md). Today it holds the components that do not depend on the
controller's contract: the NAND media (:func:`compiled_media`, the mirror of
:class:`hbfsim.model.media.Media`) and the stepped GPU request injection
(:func:`compiled_gpu_port`, the mirror of :class:`hbfsim.model.gpu_port.GpuPort`); and the
stack controller of the one timing contract with the system loop, run on an open-loop
request stream (:func:`run_compiled`, the mirror of :class:`hbfsim.model.system.HbfSystem`
stepped by :func:`hbfsim.model.loop.run_cycles`) or closed loop
(:func:`run_compiled_closed_loop`). The extension is optional: :func:`engine_status` says in
one line whether it is built and how to build it.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np

__all__ = ["BUILD_COMMAND", "CompiledRun", "compiled_available", "compiled_gpu_port",
           "compiled_media", "engine_status", "program_arrays", "require_compiled",
           "compiled_stats", "run_compiled", "run_compiled_closed_loop", "stale",
           "stats_of_counters",
           "trace_compiled"]

#: How to build (or rebuild) the extension in this repository's venv.
BUILD_COMMAND = ".venv/bin/pip install -e ."

try:
    from hbfsim import _engine
    _WHY = ""
except ImportError as e:          # no compiler at install time, or never installed
    _engine = None
    _WHY = str(e)

if _engine is not None and os.environ.get("HBFSIM_ENGINE_MUTANT"):
    # a deliberately broken variant, for showing that the differential tests catch it
    _engine._set_mutant(int(os.environ["HBFSIM_ENGINE_MUTANT"]))

_SOURCES = Path(__file__).resolve().parent.parent / "engine"


# the last hash computed per sources folder, with the files' (path, mtime, size) it was
# computed from: a run checks staleness each call, and hashing every source took ~2 ms
_HASHED: dict[str, tuple[tuple, str | None]] = {}


def _source_signature(root: str) -> tuple:
    """Every ``*.cpp`` / ``*.hpp`` under ``root`` as (path, mtime in ns, size), sorted."""
    out, todo = [], [root]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                if e.is_dir():
                    todo.append(e.path)
                elif e.name.endswith((".cpp", ".hpp")):
                    st = e.stat()
                    out.append((e.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


def _source_hash() -> str | None:
    """setup.py's hash of engine/**/*.[ch]pp, or None outside a source checkout.

    Recomputed only when a source file's path, modification time or size changed since the
    last call (the check of every run_compiled* call)."""
    if not _SOURCES.is_dir():
        return None
    root = str(_SOURCES)
    sig = _source_signature(root)
    seen = _HASHED.get(root)
    if seen is not None and seen[0] == sig:
        return seen[1]
    files = sorted(_SOURCES.rglob("*.[ch]pp"))
    digest = None
    if files:
        h = hashlib.sha256()
        for p in files:
            h.update(p.relative_to(_SOURCES).as_posix().encode())
            h.update(p.read_bytes())
        digest = h.hexdigest()[:16]
    _HASHED[root] = (sig, digest)
    return digest


def compiled_available() -> bool:
    """True when ``hbfsim._engine`` imported."""
    return _engine is not None


#: How long (seconds) one staleness check answers for its sources folder. Every
#: run_compiled* call checks, and listing engine/'s files costs a stat per file (about
#: 130 us a call on the 2-core VM of docs/benchmarks.md, three times a one-request run);
#: an edit of the sources is still seen by the first call this long after it.
STALE_CHECK_SECONDS = 1.0
_CHECKED: dict[str, tuple[float, bool]] = {}   # sources folder -> (when, stale)
_clock = time.monotonic


def stale() -> bool:
    """True when the built extension was compiled from other sources than engine/ holds
    (checked at most once per :data:`STALE_CHECK_SECONDS` per sources folder)."""
    if _engine is None:
        return False
    root, now = str(_SOURCES), _clock()
    seen = _CHECKED.get(root)
    if seen is not None and now - seen[0] < STALE_CHECK_SECONDS:
        return seen[1]
    h = _source_hash()
    result = h is not None and h != _engine.SOURCE_HASH
    _CHECKED[root] = (now, result)
    return result


def engine_status() -> str:
    """One line: whether the compiled engine is built, current, and how to build it."""
    if _engine is None:
        return (f"compiled engine: not built ({_WHY}); build it with `{BUILD_COMMAND}` "
                f"(needs a C++17 compiler)")
    if stale():
        return (f"compiled engine: built but stale (engine/ changed since the build); "
                f"rebuild it with `{BUILD_COMMAND}`")
    return f"compiled engine: built ({Path(_engine.__file__).name}, sources {_engine.SOURCE_HASH})"


def require_compiled():
    """Return the extension module, or raise ImportError with :func:`engine_status`'s line."""
    if _engine is None or stale():
        raise ImportError(engine_status())
    return _engine


def compiled_media(cfg):
    """The compiled :class:`~hbfsim.model.media.Media` of one stack of ``cfg``."""
    return require_compiled().Media(cfg)


def _channel_shape(cfg) -> bool:
    # model/gpu_issue.py's _GpuCore.channel_shape, read the same way
    return cfg.host_ports == "channel"


def program_arrays(program) -> dict[str, np.ndarray]:
    """A GPU program as the flat arrays the compiled engine takes (materialises it).

    Parameters
    ----------
    program : GpuProgram or iterable of Kernel
        A re-runnable program stays re-runnable; a one-shot one is consumed.

    Returns
    -------
    dict of numpy.ndarray
        ``kernel_compute``, ``kernel_producers`` (offsets, kernels + 1), ``producer_bound``,
        ``producer_start``, ``producer_compute`` (-1: the kernel's), ``producer_sm``,
        ``producer_accesses`` (offsets, producers + 1), ``access_op`` (0 R, 1 W),
        ``access_addr``, ``access_nbytes``; and ``kernel_names`` (a list, Python only).

    Raises
    ------
    GpuError
        An access whose op is not ``"R"`` or ``"W"`` (named by kernel, producer and value).
    """
    from array import array

    from hbfsim.model.gpu_config import GpuError

    kc, kp, names = [], [0], []
    pb, ps, pc, psm, pa = [], [], [], [], [0]
    # per producer, numpy chunks: from its accesses' arrays() where they have one
    # (model/workloads_llm.py LineWalk), else one pass over the tuples into 17 bytes an access
    # (no Python object kept per access: a kernel may have millions)
    c_op, c_addr, c_nb = [], [], []
    n = 0
    i64 = np.int64
    for k in program:
        names.append(k.name)
        kc.append(k.compute)
        prods = k.producers() if callable(k.producers) else k.producers
        for p in prods:
            as_arrays = getattr(p.accesses, "arrays", None)
            if as_arrays is not None:
                op, addr, nb = as_arrays()
                if op not in ("R", "W"):
                    raise GpuError(f"kernel {k.name!r} producer {len(pb)}: op must be R or "
                                   f"W, not {op!r}")
                c_op.append(np.full(len(addr), op == "W", np.uint8))
                c_addr.append(np.asarray(addr, i64))
                c_nb.append(np.asarray(nb, i64))
                n += len(addr)
            else:
                ops, addrs, nbs = array("B"), array("q"), array("q")
                for op, addr, nb in p.accesses:
                    if op == "R":
                        ops.append(0)
                    elif op == "W":
                        ops.append(1)
                    else:
                        raise GpuError(f"kernel {k.name!r} producer {len(pb)}: op must be R "
                                       f"or W, not {op!r}")
                    addrs.append(addr)
                    nbs.append(nb)
                if ops:
                    c_op.append(np.frombuffer(ops, np.uint8))
                    c_addr.append(np.frombuffer(addrs, i64))
                    c_nb.append(np.frombuffer(nbs, i64))
                    n += len(ops)
            pb.append(p.bound)
            ps.append(p.start)
            pc.append(-1 if p.compute is None else p.compute)
            psm.append(p.sm)
            pa.append(n)
        kp.append(len(pb))

    def joined(chunks, dt):
        return np.concatenate(chunks) if chunks else np.zeros(0, dt)

    return {"kernel_compute": np.array(kc, i64), "kernel_producers": np.array(kp, i64),
            "producer_bound": np.array(pb, i64), "producer_start": np.array(ps, i64),
            "producer_compute": np.array(pc, i64), "producer_sm": np.array(psm, i64),
            "producer_accesses": np.array(pa, i64), "access_op": joined(c_op, np.uint8),
            "access_addr": joined(c_addr, i64), "access_nbytes": joined(c_nb, i64),
            "kernel_names": names}


def compiled_gpu_port(cfg, program, gpu=None, start: int = 0):
    """The compiled :class:`~hbfsim.model.gpu_port.GpuPort` for ``program`` on ``cfg``.

    ``program`` is a GpuProgram (materialised through :func:`program_arrays`) or the arrays
    themselves; ``gpu`` defaults to ``program.gpu`` or ``GpuConfig()``, as GpuPort's.
    """
    from hbfsim.model.gpu_config import GpuConfig

    eng = require_compiled()
    g = gpu or getattr(program, "gpu", None) or GpuConfig()
    arrays = program if isinstance(program, dict) else program_arrays(program)
    return eng.GpuPort(cfg, g, arrays, _channel_shape(cfg), start)


# ------------------------------------------------------------------ the controller, open loop
#: Per-request outputs of :func:`run_compiled`, in submission order (the golden model's
#: Request fields: t_accept, t_map, t_done, depth; entry_info's tq, ti, tc and depth as
#: tq, ti, tc, entry_depth; the mapping; the response flags).
REQUEST_COLUMNS = ("t_accept", "t_map", "t_done", "depth", "tq", "ti", "tc", "entry_depth",
                   "stack", "channel", "subarray", "mshr_hit", "buffer_hit", "cache_hit",
                   "error")


class CompiledRun(dict):
    """What :func:`run_compiled` returns: a dict of numpy arrays (:data:`REQUEST_COLUMNS`,
    one row per submitted request), ``order`` (request indices in response order) and
    ``counters`` (the statistics' counters summed over the stacks, and ``per_channel`` rows
    ``(stack, channel, requests, media_ops, link_stall_ticks)``)."""


def run_compiled(cfg, arrival, op, addr, nbytes, ids=None, progress=None,
                 every: int = 0) -> CompiledRun:
    """Run an open-loop request stream through the compiled controller to completion.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration (the one timing contract, every shape and mode).
    arrival, addr, nbytes : array of int
        Per request, in submission order (arrival ticks non-decreasing).
    op : array
        ``"R"`` / ``"W"`` strings, or 0 (read) / 1 (write).
    ids : array of int, optional
        Request ids, used in error messages (default: a request is named by its row,
        ``0 .. n-1``).
    progress : callable, optional
        ``progress(responses)``, called every ``every`` responses (a progress bar; it
        changes no event). A signal (Ctrl-C) is raised there.
    every : int
        How many responses between calls (0: none).

    Returns
    -------
    CompiledRun
        Also the stream as submitted: ``op`` (0/1), ``addr``, ``nbytes``, ``arrival`` and,
        if ``ids`` was given, ``id`` (the arrays given, not copies, where they were
        contiguous int64 / int8 already). No ``id`` column is made up when none was given,
        and there is no ``source`` (an open-loop stream has none; a closed loop's run has
        both).

    Raises
    ------
    ValueError
        A bad request (named by its id).
    ImportError
        The extension is not built or is stale (:func:`engine_status`'s line).
    """
    eng = require_compiled()
    arrival = np.ascontiguousarray(arrival, dtype=np.int64)
    n = arrival.size
    op = np.asarray(op)
    if op.dtype.kind in "US":
        codes = np.full(n, -1, np.int8)
        codes[op == "R"] = 0
        codes[op == "W"] = 1
        bad = np.nonzero(codes < 0)[0]
    else:
        # checked before the narrowing to int8, which would wrap 256 to 0 (a read)
        bad = np.nonzero((op != 0) & (op != 1))[0]
        codes = op.astype(np.int8, copy=False)
    if ids is not None:
        ids = np.ascontiguousarray(ids, np.int64)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"request {i if ids is None else ids[i]}: op must be R or W, "
                         f"not {op[i].item()!r}")
    addr = np.ascontiguousarray(addr, dtype=np.int64)
    nbytes = np.ascontiguousarray(nbytes, dtype=np.int64)
    out = eng.run_open_loop(cfg, ids, codes, addr, nbytes, arrival, progress, every)
    # the stream's own columns: the arrays as given (int64 / int8 views where they were);
    # no id column is made up when none was given, and no source (an open-loop stream has
    # none): 16 bytes per request of fresh memory that nothing reads (docs/engine.md)
    out.update(op=codes, addr=addr, nbytes=nbytes, arrival=arrival)
    if ids is not None:
        out["id"] = ids
    return CompiledRun(out)


def run_compiled_closed_loop(cfg, program, gpu=None, start: int = 0,
                             skip: bool = True, progress=None, every: int = 0) -> CompiledRun:
    """Run a GPU program closed loop against the compiled controller, one tick at a time:
    the compiled mirror of :func:`hbfsim.model.gpu_port.run_stepped` (the reference
    ``ClosedLoop`` equals it, docs/gpu.md).

    Parameters
    ----------
    cfg : HbfConfig
        The configuration (the one timing contract, every shape and mode).
    program : GpuProgram, iterable of Kernel, or dict
        What the GPU runs (materialised through :func:`program_arrays`), or its arrays.
    gpu : GpuConfig, optional
        Default ``program.gpu`` or ``GpuConfig()``, as GpuPort's.
    start : int
        The GPU's first tick.
    skip : bool
        Skip the ticks in which neither the GPU nor the controller has an event (C3; every
        event is the same, only ``counters["steps"]`` differs from ``run_stepped``'s).
    progress, every : callable, int
        As :func:`run_compiled`'s.

    Returns
    -------
    CompiledRun
        :func:`run_compiled`'s arrays and counters (rows in submission order: the GPU's
        grant order; ``id`` the GPU request id, ``arrival`` its grant tick, ``source`` its
        memory sub-partition) and ``gpu``: the compiled port's result figures
        (``hbfsim.engine_standin.gpu_figures`` of the golden ``GpuResult``).

    Raises
    ------
    ValueError
        A configuration the compiled engine does not run (one line naming it).
    GpuError
        A bad program, or a GPU waiting for a response no event brings.
    """
    from hbfsim.model.gpu_config import GpuConfig

    eng = require_compiled()
    g = gpu or getattr(program, "gpu", None) or GpuConfig()
    arrays = program if isinstance(program, dict) else program_arrays(program)
    return CompiledRun(eng.run_closed_loop(cfg, g, arrays, _channel_shape(cfg), start, skip,
                                           progress, every))


def trace_compiled(writer, cfg, run: CompiledRun, op, addr, nbytes, arrival, ids=None,
                   source=None) -> None:
    """Write a compiled open-loop run's hbf-trace-v1 rows through the golden model's
    :class:`hbfsim.model.trace.TraceWriter` (one writer, so the two engines' traces are
    byte for byte the same when their events are): every request in response order, as
    ``HbfSystem`` writes them when each completes.

    Parameters
    ----------
    writer : TraceWriter
        The open writer (its level decides the rows); the caller closes it.
    cfg : HbfConfig
        The run's configuration.
    run : CompiledRun
        What :func:`run_compiled` returned for this stream.
    op, addr, nbytes, arrival, ids, source : array
        The stream as given to :func:`run_compiled` (``ids`` default ``0 .. n-1``,
        ``source`` default 0).
    """
    from types import SimpleNamespace

    op = np.asarray(op)
    ops = np.where((op == "W") | (op == 1), "W", "R") if op.dtype.kind not in "US" else op
    n = len(ops)
    ids = np.arange(n) if ids is None else np.asarray(ids)
    source = np.zeros(n, np.int64) if source is None else np.asarray(source)
    arrival, addr, nbytes = (np.asarray(x) for x in (arrival, addr, nbytes))
    order = run["order"]
    step = 1 << 16          # a block of rows at a time: no Python object per request held
    for b in range(0, len(order), step):
        idx = order[b:b + step]
        cols = {k: run[k][idx].tolist() for k in REQUEST_COLUMNS}
        rid, src, rop, radr, rnb, rarr = (x[idx].tolist() for x in
                                          (ids, source, ops, addr, nbytes, arrival))
        for j in range(len(idx)):
            r = SimpleNamespace(
                id=int(rid[j]), source=int(src[j]), op=str(rop[j]), addr=radr[j],
                nbytes=rnb[j], arrival=rarr[j], stack=cols["stack"][j],
                ch=cols["channel"][j], sub=cols["subarray"][j],
                t_accept=cols["t_accept"][j], t_map=cols["t_map"][j],
                t_done=cols["t_done"][j], depth=cols["depth"][j],
                entry_info=(cols["tq"][j], cols["ti"][j], cols["tc"][j],
                            cols["entry_depth"][j]),
                cache_hit=cols["cache_hit"][j], mshr_hit=cols["mshr_hit"][j],
                error=cols["error"][j])
            writer.request(r, cfg)


def compiled_stats(cfg, run: CompiledRun, op, nbytes, arrival) -> dict:
    """The statistics of a compiled open-loop run, computed by the golden model's
    :func:`hbfsim.model.stats.collect_stats` (one definition of every figure) from the run's
    arrays and counters, presented as the finished ``HbfSystem`` it reads.

    Parameters
    ----------
    cfg : HbfConfig
        The run's configuration.
    run : CompiledRun
        What :func:`run_compiled` returned for this stream.
    op, nbytes, arrival : array
        The stream as given to :func:`run_compiled`.
    """
    c = run["counters"]
    op = np.asarray(op)
    write = (op == "W") if op.dtype.kind in "US" else (op == 1)
    nbytes = np.asarray(nbytes, dtype=np.int64)
    arrival = np.asarray(arrival, dtype=np.int64)
    order = run["order"]
    lat = (run["t_done"] - arrival)[order]
    w = write[order]
    first = ~w & ~run["mshr_hit"][order]
    n = len(arrival)
    return stats_of_counters(
        cfg, c, submitted=n, first_arrival=int(arrival[0]) if n else None,
        requested={"R": int(nbytes[~write].sum()), "W": int(nbytes[write].sum())},
        n_req={"R": int((~write).sum()), "W": int(write.sum())},
        lat={"R": lat[~w], "W": lat[w]}, lat_first=lat[first])


def stats_of_counters(cfg, c: dict, submitted: int, first_arrival, requested: dict,
                      n_req: dict, lat: dict, lat_first) -> dict:
    """:func:`hbfsim.model.stats.collect_stats` of a compiled run given by its counters and
    the per-request sums it reads (the system is presented as the finished ``HbfSystem``).

    Parameters
    ----------
    cfg : HbfConfig
    c : dict
        The run's ``counters``.
    submitted : int
    first_arrival : int or None
        The first request's arrival tick (None: no request).
    requested, n_req : dict
        ``"R"`` / ``"W"``: bytes and requests submitted.
    lat : dict
        ``"R"`` / ``"W"``: latencies (arrival to response), an array or a
        :class:`hbfsim.model.stats.LatencyCounts`; ``lat_first`` as one.
    """
    from collections import Counter
    from types import SimpleNamespace

    from hbfsim.model.stats import collect_stats

    st = Counter({k: c[k] for k in ("page_cache_hits", "raw_events", "partial_programs",
                                    "padding_bytes", "strict_errors", "media_errors")})
    for cause in ("full", "raw", "pressure", "deadline", "drain"):
        st["flush_" + cause] = c["flush_" + cause]
    stacks = []
    rows = c["per_channel"]
    for s, sd in enumerate(c["per_stack"]):
        mine = [r for r in rows if r[0] == s]
        media = SimpleNamespace(
            page_reads=sd["page_reads"], buffer_hits=sd["buffer_hits"],
            page_programs=sd["page_programs"], block_erases=sd["block_erases"],
            busy_ticks=sd["busy_ticks"], gc_relocations=sd["gc_relocations"],
            blocks=sd["blocks"], zone_pec=lambda z=sd["zone_pec"]: dict(z),
            valid_pages=lambda v=sd["valid_pages"]: v)
        stacks.append(SimpleNamespace(
            stack=s, media=media, mshr_hits=sd["mshr_hits"], agg_wait=sd["agg_wait"],
            ch_requests=[r[2] for r in mine], ch_ops=[r[3] for r in mine],
            ch_link_stall=[r[4] for r in mine]))
    system = SimpleNamespace(
        cfg=cfg, stats=st, stacks=stacks, first_arrival=first_arrival,
        last_completion=c["last_completion_tick"], n_done=c["completions"],
        submitted=submitted, requested=requested, n_req=n_req, lat=lat, lat_first=lat_first,
        errors=c["errors"])
    return collect_stats(system)
