"""Run a configuration on the engine it names: the one place commands get a finished run.

``engine = "compiled"`` (the default; ``--engine``) runs the C++ engine (docs/engine.md),
``"reference"`` the Python golden model. Both produce the same events, so the same
statistics, hbf-trace-v1 rows and response order; the statistics are computed and the trace
rows written by the golden model's own code for both (:func:`hbfsim.engine.stats_of_counters`,
:func:`hbfsim.engine.trace_compiled`); the compiled engine runs in bounded memory
(:mod:`hbfsim.engine_stream`). Where the compiled engine cannot run a request (the
extension is not built, or the run asks for something it does not do), the reference runs
and :func:`choose_engine` returns the one line that says why; it never falls back silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hbfsim.config import ENGINES, HbfConfig
from hbfsim.progress import COMPILED_EVERY, Progress

__all__ = ["Finished", "choose_engine", "run_closed", "run_open", "say_once"]

_SAID: set = set()


def say_once(note: str | None) -> None:
    """Print ``note`` on stderr once per process (the fallback line of a study's or a
    sweep's many runs, in its worker processes)."""
    import sys

    if note and note not in _SAID:
        _SAID.add(note)
        print(f"hbfsim: {note}", file=sys.stderr, flush=True)


@dataclass
class Finished:
    """A finished run, whichever engine ran it.

    Members
    -------
    engine : str
        ``compiled`` or ``reference``: the engine that ran.
    stats : dict
        :func:`hbfsim.model.stats.collect_stats`'s dictionary.
    submitted, n_done, end_tick : int
        Requests submitted and answered, and the tick the run stopped at.
    result : GpuResult or None
        A closed loop's GPU figures (``system`` is the reference's HbfSystem, or None).
    """

    engine: str
    stats: dict
    submitted: int
    n_done: int
    end_tick: int
    result: object = None


def choose_engine(cfg: HbfConfig, engine: str | None = None,
                  needs: tuple[str, ...] = ()) -> tuple[str, str | None]:
    """The engine that will run, and the line that says why it is not the one asked for.

    Parameters
    ----------
    cfg : HbfConfig
        Its ``engine`` key is the default.
    engine : str, optional
        ``--engine``: overrides the key.
    needs : tuple of str
        Features of this run the compiled engine does not have yet, named for the user (for
        example ``"record=True (per-request records)"``); any makes the reference run.

    Returns
    -------
    (str, str or None)
        ``compiled`` or ``reference``, and None or one line (no newline) to show the user.

    Raises
    ------
    ValueError
        ``engine`` is not one of :data:`hbfsim.config.ENGINES`.
    """
    from hbfsim import engine as eng

    name = cfg.engine if engine is None else engine
    if name not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, not {name!r}")
    if name == "reference":
        return name, None
    if not eng.compiled_available() or eng.stale():
        return "reference", f"{eng.engine_status()}; running the reference engine"
    if needs:
        return "reference", (f"the compiled engine does not do {' or '.join(needs)} yet; "
                             f"running the reference engine")
    return "compiled", None


def _stream_arrays(requests):
    """``(id, op, addr, nbytes, arrival, source)`` numpy arrays of requests in submission
    order: straight from a request CSV's columns, else one pass over the Request objects."""
    from hbfsim.model.requests import RequestList

    if isinstance(requests, RequestList):
        c, o = requests.cols, requests.order
        ids = o if requests.ids is None else requests.ids[o]
        return (np.asarray(ids, np.int64), np.asarray(c.write[o], np.int8),
                np.asarray(c.addr[o], np.int64), np.asarray(c.nbytes[o], np.int64),
                np.asarray(c.tick[o], np.int64), np.asarray(c.source[o], np.int64))
    code = {"R": 0, "W": 1}
    rows = []
    for r in requests:
        if r.op not in code:
            raise ValueError(f"request {r.id}: op must be R or W, not {r.op!r}")
        rows.append((r.id, code[r.op], r.addr, r.nbytes, r.arrival, r.source))
    cols = list(zip(*rows)) if rows else [()] * 6
    dt = (np.int64, np.int8, np.int64, np.int64, np.int64, np.int64)
    return tuple(np.array(c, d) for c, d in zip(cols, dt))


def run_open(cfg: HbfConfig, requests, engine: str, trace=None,
             progress: Progress | None = None, total: int | None = None) -> Finished:
    """Run an open-loop request stream (Request objects in arrival order, or a request
    CSV's :class:`~hbfsim.model.requests.RequestList`) to completion on ``engine``.

    ``trace`` is an open :class:`~hbfsim.model.trace.TraceWriter` (the caller closes it);
    ``total`` the stream's length where ``requests`` has none (the bar's end).
    """
    from hbfsim.model.stats import collect_stats

    progress = progress or Progress(None, "", enabled=False)
    if engine == "compiled":
        from hbfsim.engine_stream import run_open_streamed

        ids, op, addr, nbytes, arrival, source = _stream_arrays(requests)
        if progress.bar is not None:
            progress.bar.total = len(ids)
        stats, c, _ = run_open_streamed(cfg, ids, op, addr, nbytes, arrival, source, trace,
                                        progress.to if progress.enabled else None,
                                        every=COMPILED_EVERY)
        progress.to(c["completions"])
        return Finished("compiled", stats, c["submitted"], c["completions"], c["end_tick"])
    from hbfsim.model.system import HbfSystem

    system = HbfSystem(cfg, trace=trace, keep=False)
    if progress.bar is not None:
        progress.bar.total = len(requests) if hasattr(requests, "__len__") else total
    progress.hook(system)
    for r in requests:
        system.submit(r)
    system.close_input()
    system.run()
    progress.to(system.n_done)
    return Finished("reference", collect_stats(system), system.submitted, system.n_done,
                    system.t)


def _gpu_result(cfg: HbfConfig, fig: dict, names: list, records: list | None = None):
    """The compiled port's figures as the reference's GpuResult (model/gpu_issue.py
    ``_GpuCore._result``: the same conversions), with ``records`` (``record=True``)."""
    from hbfsim.model.gpu_issue import GpuResult

    span = fig["span_ticks"]
    kernels = [{"name": names[i], "launch": k["launch"], "end": k["end"],
                "requests": k["requests"], "producers": k["producers"]}
               for i, k in enumerate(fig["kernels"])]
    return GpuResult(
        system=None, start_tick=fig["start_tick"], end_tick=fig["end_tick"], span_ticks=span,
        span_gpu_cycles=cfg.ticks_to_gpu_cycles(span), span_us=cfg.ticks_to_us(span),
        kernels=kernels, requests=fig["requests"], reads=fig["reads"], writes=fig["writes"],
        gpu_latency_sum=fig["gpu_latency_sum"], gpu_latency_max=fig["gpu_latency_max"],
        partition_wait_sum=fig["partition_wait_sum"],
        partition_wait_max=fig["partition_wait_max"],
        peak_outstanding=fig["peak_outstanding"], bound_violations=fig["bound_violations"],
        records=records, cfg=cfg)


def run_closed(cfg: HbfConfig, program, engine: str, gpu=None, trace=None,
               progress: Progress | None = None, total: int | None = None,
               record: bool = False) -> Finished:
    """Run a GPU program closed loop on ``engine``: the reference
    :class:`~hbfsim.model.gpu.ClosedLoop`, or the compiled loop it equals in bounded memory
    (:func:`hbfsim.engine_stream.run_streamed`: kernels pulled one at a time, answered
    requests written out and retired). ``total`` is the program's request count when known
    (the bar's end). ``record`` keeps a RequestRecord per request in the result's
    ``records``, in response order (on the compiled engine built from the streamed blocks:
    :class:`hbfsim.engine_stream.RecordedOutputs`; the memory then grows with the run)."""
    from hbfsim.model.stats import collect_stats

    progress = progress or Progress(None, "", enabled=False)
    if engine == "compiled":
        from hbfsim.engine_stream import run_streamed

        if progress.bar is not None:
            progress.bar.total = total
        stats, fig, names, _, c, records = run_streamed(
            cfg, program, gpu, trace, progress.to if progress.enabled else None,
            every=COMPILED_EVERY, on_kernel=progress.kernel if progress.enabled else None,
            record=record)
        progress.to(c["completions"])
        return Finished("compiled", stats, c["submitted"], c["completions"], c["end_tick"],
                        _gpu_result(cfg, fig, names, records))
    from hbfsim.model.gpu import ClosedLoop

    loop = ClosedLoop(cfg, program, gpu, trace=trace, record=record)
    if progress.bar is not None:
        progress.bar.total = total
    progress.hook(loop.system)
    result = loop.run()
    system = loop.system
    progress.to(system.n_done)
    return Finished("reference", collect_stats(system), system.submitted, system.n_done,
                    system.t, result)
