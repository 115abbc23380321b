"""The compiled engine in bounded memory: requests or kernels streamed in, answered ones out.

:func:`hbfsim.engine.run_compiled_closed_loop` holds the whole program's arrays and every
request's record to the end (about 300 bytes a request: 30 GiB for the §5.5 decode step).
:func:`run_streamed` runs the same loop (the same events: ``_engine.run_closed_loop_streamed``
steps ``run_stepped`` with the skip) with the program pulled one kernel at a time
(:class:`KernelFeed`) and every answered request handed back in response order, a block at a
time, then retired (:class:`StreamedOutputs`: the trace rows written, the statistics' sums
and latency histograms kept), so the memory follows the largest kernel and the requests in
flight (docs/engine.md, Memory). :func:`run_open_streamed` does the same for an open-loop
stream: its requests are submitted a chunk at a time as the run reaches their ticks;
:func:`run_window_streamed` runs a request list with a bounded window of open requests.
"""

from __future__ import annotations

import numpy as np

from hbfsim.engine import (_channel_shape, program_arrays, require_compiled,
                           stats_of_counters, trace_compiled)

__all__ = ["KernelFeed", "RecordedOutputs", "StreamedOutputs", "run_open_streamed",
           "run_streamed", "run_window_streamed"]


class KernelFeed:
    """A GPU program's kernels one at a time, each as :func:`hbfsim.engine.program_arrays`
    of that kernel alone (its accesses generated when the engine launches it).

    Members
    -------
    names : list of str
        The names of the kernels loaded so far.
    """

    _NONE = object()

    def __init__(self, program, on_load=None):
        self._on_load = on_load
        self._it = iter(program)
        self._next = self._NONE
        self.names: list[str] = []
        self._sm: list[np.ndarray] = []          # per kernel loaded, its producers' SMs

    def has_next(self) -> bool:
        """Whether another kernel follows (pulls it from the program, as _GpuCore does)."""
        if self._next is self._NONE:
            self._next = next(self._it, None)
        return self._next is not None

    def load(self) -> dict:
        """The next kernel's arrays (after :meth:`has_next` said there is one)."""
        if not self.has_next():
            raise RuntimeError("internal: the engine loaded a kernel past the program's end")
        k, self._next = self._next, self._NONE
        if self._on_load is not None:
            self._on_load(k.name)
        arrays = program_arrays([k])
        self.names.extend(arrays.pop("kernel_names"))
        self._sm.append(arrays["producer_sm"])
        return arrays

    def producers(self) -> tuple[np.ndarray, np.ndarray]:
        """Per producer loaded so far (the engine's producer numbers, in launch order as
        _GpuCore numbers ``pid``): its kernel's index and its SM."""
        i64 = np.int64
        if not self._sm:
            return np.zeros(0, i64), np.zeros(0, i64)
        kernel = np.repeat(np.arange(len(self._sm), dtype=i64), [len(a) for a in self._sm])
        return kernel, np.concatenate(self._sm).astype(i64)


class StreamedOutputs:
    """The sink of a streamed run: each block of answered requests (columns, response
    order) written to the trace and summed into what the statistics read.

    Parameters
    ----------
    cfg : HbfConfig
    trace : TraceWriter or None
    progress : callable, optional
        ``progress(answered)`` after each block.
    on_block : callable, optional
        ``on_block(columns)`` with each block, after it is counted (a caller's own figures
        from the answered requests, such as their response ticks).

    Members
    -------
    columns : tuple of str or None
        The columns the engine hands over (``None``: every column): without a trace or an
        ``on_block``, only the five the statistics read.
    """

    STATS_COLUMNS = ("op", "nbytes", "arrival", "t_done", "mshr_hit")

    def __init__(self, cfg, trace=None, progress=None, on_block=None):
        from hbfsim.model.stats import LatencyCounts

        self.cfg = cfg
        self.trace = trace
        self.progress = progress
        self.on_block = on_block
        self.answered = 0
        self.requested = {"R": 0, "W": 0}
        self.n_req = {"R": 0, "W": 0}
        self.lat = {"R": LatencyCounts(), "W": LatencyCounts()}
        self.lat_first = LatencyCounts()
        self.columns = self.STATS_COLUMNS if trace is None and on_block is None else None

    def __call__(self, cols: dict) -> None:
        w = cols["op"] == 1
        lat = cols["t_done"] - cols["arrival"]
        nb = cols["nbytes"]
        n = len(w)
        if not w.any():                # reads only (a decode step's blocks): no masks
            self.lat["R"].add(lat)
            self.lat_first.add(lat[~cols["mshr_hit"]])
            self.requested["R"] += int(nb.sum())
            self.n_req["R"] += n
        else:
            r = ~w
            self.lat["R"].add(lat[r])
            self.lat["W"].add(lat[w])
            self.lat_first.add(lat[r & ~cols["mshr_hit"]])
            self.requested["R"] += int(nb[r].sum())
            self.requested["W"] += int(nb[w].sum())
            self.n_req["W"] += int(w.sum())
            self.n_req["R"] += int(r.sum())
        if self.trace is not None:
            run = dict(cols, order=np.arange(n))
            trace_compiled(self.trace, self.cfg, run, cols["op"], cols["addr"], nb,
                           cols["arrival"], cols["id"], cols["source"])
        self.answered += n
        if self.on_block is not None:
            self.on_block(cols)
        if self.progress is not None:
            self.progress(self.answered)


class RecordedOutputs(StreamedOutputs):
    """:class:`StreamedOutputs` that also keeps every answered request as the reference's
    :class:`~hbfsim.model.gpu_issue.RequestRecord` (``record=True``), in response order.

    The fields are the reference's (model/gpu_issue.py ``_GpuCore._on_response``): the
    system's columns, the GPU's creation tick and producer (the ``created`` and ``producer``
    columns of a recording run), the producer's kernel index and SM from the program
    (``feed``), and for a write its data, ``write_pattern(id, nbytes)`` as ``_GpuCore``
    creates it (the controller never changes a write's data; a read's record has None).

    Members
    -------
    records : list of RequestRecord
    """

    def __init__(self, cfg, feed: KernelFeed, trace=None, progress=None):
        super().__init__(cfg, trace, progress)
        self.columns = None                     # the records read most columns
        self.feed = feed
        self.records: list = []
        self._kernel = self._sm = np.zeros(0, np.int64)

    def __call__(self, cols: dict) -> None:
        from hbfsim.model.gpu_issue import RequestRecord
        from hbfsim.model.requests import write_pattern

        super().__call__(cols)
        prod = cols["producer"]
        if len(prod) and int(prod.max()) >= len(self._kernel):
            self._kernel, self._sm = self.feed.producers()
        ids, nb, w = cols["id"].tolist(), cols["nbytes"].tolist(), (cols["op"] == 1).tolist()
        data = [write_pattern(i, n) if x else None for i, n, x in zip(ids, nb, w)]
        self.records.extend(map(RequestRecord._make, zip(
            ids, self._kernel[prod].tolist(), prod.tolist(), self._sm[prod].tolist(),
            cols["source"].tolist(), ["W" if x else "R" for x in w], cols["addr"].tolist(),
            nb, data, cols["created"].tolist(), cols["arrival"].tolist(),
            cols["t_accept"].tolist(), cols["t_done"].tolist(), cols["mshr_hit"].tolist(),
            cols["error"].tolist())))


def run_streamed(cfg, program, gpu=None, trace=None, progress=None, every: int = 1 << 15,
                 start: int = 0, block_shift: int = 16, poison: bool = False,
                 on_kernel=None, record: bool = False):
    """Run a GPU program closed loop on the compiled engine in bounded memory.

    Parameters
    ----------
    cfg : HbfConfig
    program : GpuProgram or iterable of Kernel
    gpu : GpuConfig, optional
        Default ``program.gpu`` or ``GpuConfig()``.
    trace : TraceWriter, optional
        Rows are written as requests are answered (the caller closes it).
    progress : callable, optional
        ``progress(answered)`` every ``every`` answered requests.
    every : int
        Answered requests handed back at a time.
    on_kernel : callable, optional
        ``on_kernel(name)`` before a kernel's accesses are generated.
    start : int
        The GPU's first tick.
    block_shift, poison : int, bool
        Records are freed in blocks of ``2**block_shift`` requests; ``poison`` overwrites
        them instead (tests: a record read after it was retired shows in the results).
    record : bool
        Keep a :class:`~hbfsim.model.gpu_issue.RequestRecord` per request, in response
        order, as the reference's ``record=True`` (:class:`RecordedOutputs`); the memory
        then grows with the run.

    Returns
    -------
    (dict, dict, list, tuple, dict, list or None)
        The statistics (``collect_stats``'s dict), the GPU's result figures, the kernel
        names, the blocks still held at the end (requests, GPU requests), the counters and
        the records (None without ``record``).
    """
    from hbfsim.model.gpu_config import GpuConfig

    eng = require_compiled()
    g = gpu or getattr(program, "gpu", None) or GpuConfig()
    feed = KernelFeed(program, on_kernel)
    out = (RecordedOutputs(cfg, feed, trace, progress) if record
           else StreamedOutputs(cfg, trace, progress))
    res = eng.run_closed_loop_streamed(cfg, g, feed, _channel_shape(cfg), start, True, out,
                                       every, block_shift, poison, record, out.columns)
    c = res["counters"]
    first = c["first_arrival_tick"] if c["submitted"] else None
    stats = stats_of_counters(cfg, c, c["submitted"], first, out.requested, out.n_req,
                              out.lat, out.lat_first)
    return (stats, res["gpu"], feed.names, res["blocks_held"], c,
            out.records if record else None)


def _columns(ids, op, addr, nbytes, arrival, source):
    """A stream's six request columns as the engine takes them (contiguous int64, ``op``
    int8; ``source`` zeros when None)."""
    i64 = np.int64
    source = np.zeros(len(ids), i64) if source is None else source
    return (np.ascontiguousarray(ids, i64), np.ascontiguousarray(op, np.int8),
            np.ascontiguousarray(addr, i64), np.ascontiguousarray(nbytes, i64),
            np.ascontiguousarray(arrival, i64), np.ascontiguousarray(source, i64))


def run_open_streamed(cfg, ids, op, addr, nbytes, arrival, source=None, trace=None,
                      progress=None, every: int = 1 << 15, chunk: int = 1 << 16,
                      block_shift: int = 16, poison: bool = False):
    """Run an open-loop request stream on the compiled engine in bounded memory.

    Parameters
    ----------
    cfg : HbfConfig
    ids, op, addr, nbytes, arrival, source : array of int
        Per request, in submission order (``op`` 0 = R, 1 = W; ``source`` default 0).
    trace, progress, every, block_shift, poison
        As :func:`run_streamed`'s.
    chunk : int
        Requests submitted at a time (with the rest of the last one's tick).

    Returns
    -------
    (dict, dict, int)
        The statistics, the counters and the request blocks still held at the end.
    """
    eng = require_compiled()
    n = len(arrival)
    out = StreamedOutputs(cfg, trace, progress)
    res = eng.run_open_loop_streamed(cfg, *_columns(ids, op, addr, nbytes, arrival, source),
                                     out, every, chunk, block_shift, poison, out.columns)
    c = res["counters"]
    stats = stats_of_counters(cfg, c, c["submitted"], int(arrival[0]) if n else None,
                              out.requested, out.n_req, out.lat, out.lat_first)
    return stats, c, res["blocks_held"]


def run_window_streamed(cfg, ids, op, addr, nbytes, arrival, window: int, source=None,
                        on_block=None, every: int = 1 << 15, block_shift: int = 16,
                        poison: bool = False):
    """Run a request list on the compiled engine with at most ``window`` requests open.

    The first ``window`` requests are submitted with their own arrival ticks; each response
    submits the next request of the list with arrival = the response's tick (in the cycle
    of its handshake, so that cycle's ingress may accept it), and a response after the list
    is exhausted closes the input: what ``serve/characterize.py``'s ``measure`` does from
    the golden model's response callback (``engine/window_source.cpp``). ``window >=
    len(ids)`` is the open loop: every request submitted, the input closed, then the run.

    Parameters
    ----------
    cfg : HbfConfig
    ids, op, addr, nbytes, arrival, source : array of int
        Per request, in submission order (``op`` 0 = R, 1 = W; ``source`` default 0);
        ``arrival`` is read for the first ``window`` only.
    window : int
        At most this many requests open (>= 1).
    on_block : callable, optional
        ``on_block(columns)`` with each block of answered requests, in response order.
    every, block_shift, poison
        As :func:`run_streamed`'s.

    Returns
    -------
    (dict, dict)
        The statistics (``collect_stats``'s dict) and the counters.
    """
    eng = require_compiled()
    out = StreamedOutputs(cfg, on_block=on_block)
    res = eng.run_window_streamed(cfg, *_columns(ids, op, addr, nbytes, arrival, source),
                                  window, out, every, block_shift, poison, out.columns)
    c = res["counters"]
    first = c["first_arrival_tick"] if c["submitted"] else None
    stats = stats_of_counters(cfg, c, c["submitted"], first, out.requested, out.n_req,
                              out.lat, out.lat_first)
    return stats, c
