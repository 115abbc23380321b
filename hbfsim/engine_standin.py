"""Stand-in drivers of one component, for the differential tests and the benchmark.

They are not part of the model: they drive a media or a GPU port the way a controller
would, through the component's own per-call API, so that the golden model's component and
the compiled one (:mod:`hbfsim.engine`) can be compared event for event, and timed, while
the controller's contract is rewritten (docs/engine.md). ``engine/engine_standin.cpp``
holds the same two drivers in C++ (``Media.replay``, ``GpuPort.run_standin``); both write
the same log, so a log from either driver and either component can be compared row by row.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["GPU_LOG_WIDTH", "MEDIA_LOG_WIDTH", "gpu_figures", "replay_media", "run_gpu"]

MEDIA_LOG_WIDTH = 6
GPU_LOG_WIDTH = 9


def replay_media(media, rows) -> np.ndarray:
    """Replay a media command stream through ``media``'s per-call API; return the log.

    Parameters
    ----------
    media : hbfsim.model.media.Media or hbfsim._engine.Media
        The component.
    rows : array of shape (n, 7)
        ``kind, t, ch, sub, op, local, tag`` per call; kind 0 ``issue``, 1 ``deliver(t)``,
        2 ``backlog(t)``, 3 ``next_due()``.

    Returns
    -------
    numpy.ndarray of shape (m, 6)
        ``[0, t, latency, 0, 0, 0]`` per issue, ``[1, t, ch, sub, tag, flags]`` per
        delivered completion, ``[2, t, backlog, 0, 0, 0]``, ``[3, t, next_due or -1, 0, 0,
        0]``.
    """
    log = []
    for kind, t, ch, sub, op, local, tag in np.asarray(rows, dtype=np.int64).tolist():
        if kind == 0:
            log.append((0, t, media.issue(t, ch, sub, op, local, tag), 0, 0, 0))
        elif kind == 1:
            for d in media.deliver(t):
                log.append((1, t) + tuple(d))
        elif kind == 2:
            log.append((2, t, int(media.backlog(t)), 0, 0, 0))
        else:
            d = media.next_due()
            log.append((3, t, -1 if d is None else d, 0, 0, 0))
    return np.array(log, dtype=np.int64).reshape(-1, MEDIA_LOG_WIDTH)


def run_gpu(port, delays) -> np.ndarray:
    """Drive a GPU port with a stand-in controller that answers after given delays.

    Every granted request is answered ``delays[id % len(delays)]`` ticks after its grant;
    the responses of one tick are reported in (tick, grant order), after the tick's grants
    (GpuPort's order). The port is stepped only in the ticks :meth:`next_tick` names.

    Parameters
    ----------
    port : hbfsim.model.gpu_port.GpuPort or hbfsim._engine.GpuPort
        The component, fresh.
    delays : sequence of int
        Non-negative response delays in ticks.

    Returns
    -------
    numpy.ndarray of shape (m, 9)
        ``[0, t, port, id, created, partition, op (0 R, 1 W), addr, nbytes]`` per grant and
        ``[1, t, id, 0, 0, 0, 0, 0, 0]`` per response, in the order they happened.
    """
    delays = [int(d) for d in delays]
    if not delays or min(delays) < 0:
        raise ValueError(f"delays must be a non-empty list of ticks >= 0, not {delays!r}")
    nd = len(delays)
    compiled = not hasattr(port, "_on_response")
    pending: list = []
    seq = 0
    log = []
    while True:
        nt = port.next_tick()
        nr = pending[0][0] if pending else None
        if nt is None and nr is None:
            break
        t = nt if nr is None else nr if nt is None else min(nt, nr)
        if nt == t:
            if compiled:
                g = port.grants(t)
                granted = []
                for row in zip(*(g[k].tolist() for k in ("port", "id", "created", "source",
                                                         "op", "addr", "nbytes"))):
                    log.append((0, t) + row)
                    granted.append((row[1], row[1]))
            else:
                granted = []
                for k, r in port.grants(t):
                    log.append((0, t, k, r.id, r.created, r.source, int(r.op == "W"), r.addr,
                                r.nbytes))
                    granted.append((r.id, r))
            for i, handle in granted:
                heapq.heappush(pending, (t + delays[i % nd], seq, handle))
                seq += 1
        while pending and pending[0][0] == t:
            _, _, handle = heapq.heappop(pending)
            port.respond(handle, t)
            log.append((1, t, handle if compiled else handle.id, 0, 0, 0, 0, 0, 0))
    return np.array(log, dtype=np.int64).reshape(-1, GPU_LOG_WIDTH)


def gpu_figures(result) -> dict:
    """The integer figures of a GPU run, alike for both components: a
    :class:`~hbfsim.model.gpu_issue.GpuResult` or the compiled port's ``result()``."""
    if isinstance(result, dict):
        return result
    keys = ("start_tick", "end_tick", "span_ticks", "requests", "reads", "writes",
            "gpu_latency_sum", "gpu_latency_max", "partition_wait_sum", "partition_wait_max",
            "peak_outstanding", "bound_violations")
    out = {k: getattr(result, k) for k in keys}
    out["kernels"] = [{k: kd[k] for k in ("launch", "end", "requests", "producers")}
                      for kd in result.kernels]
    return out
