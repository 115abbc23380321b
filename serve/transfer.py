"""One synthetic transfer on one HBF stack, run to its last response: what the serving
level's characterization measures (:mod:`hbfsim.serve.characterize`, docs/serving-hbf-tier.md).

A transfer is a list of runs ``(first_page, bytes)`` cut into requests of at most a page
(:func:`measure`: reads or writes, every request ready at tick 0 or a closed window of
``outstanding`` requests; :func:`measure_mixed`: a read and a write transfer together). It
runs on the configuration's engine: the compiled engine (the window as
``engine/window_source.cpp``) or the golden model (the window from its response callback),
which give the same figures (tests/engine/test_window_source.py).
"""

from __future__ import annotations

import numpy as np

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem

__all__ = ["DEFAULT_REQUEST_BYTES", "measure", "measure_mixed"]

#: Request size of the synthetic transfers: one 4 KiB page. The serving level's HBF
#: traffic is bulk copies (weights streamed, KV blocks moved between tiers), which a copy
#: engine issues page by page. The MSHR merges the 32 line requests of a page into one
#: NAND read (R1), so media timing is the same for lines; lines differ at the port, which
#: takes one request per tick (contract §1): 850 MHz x 128 B = 108.8 GB/s at most, and in
#: the request slots (admission), which hold 32 times fewer pages of lines.
DEFAULT_REQUEST_BYTES = PAGE_BYTES


def _request_columns(cfg: HbfConfig, runs, request_bytes) -> tuple[np.ndarray, np.ndarray]:
    """Addresses and sizes of requests of at most ``request_bytes`` (never across a page)
    covering every run, in order.

    ``request_bytes`` is an int or a sequence used in rotation, one entry per page (a page
    is cut into requests of that size; the last one is shorter where the page's part of
    the run ends first).
    """
    sizes = np.array((request_bytes,) if isinstance(request_bytes, int) else
                     tuple(request_bytes), np.int64)
    first = np.array([f for f, _ in runs], np.int64)
    nbytes = np.array([b for _, b in runs], np.int64)
    # the pages of every run, in order: address and the run's bytes in it
    npages = np.maximum(-(-nbytes // PAGE_BYTES), 0)
    run = np.repeat(np.arange(len(runs)), npages)
    i = np.arange(len(run)) - np.repeat(np.cumsum(npages) - npages, npages)
    page_addr = cfg.base_address + (first[run] + i) * PAGE_BYTES
    page_len = np.minimum(PAGE_BYTES, nbytes[run] - i * PAGE_BYTES)
    size = sizes[np.arange(len(run)) % len(sizes)]
    # each page cut into requests of its size
    parts = -(-page_len // size)
    page = np.repeat(np.arange(len(run)), parts)
    off = (np.arange(len(page)) - np.repeat(np.cumsum(parts) - parts, parts)) * size[page]
    return page_addr[page] + off, np.minimum(size[page], page_len[page] - off)


def _requests(cfg: HbfConfig, op: str, runs, request_bytes) -> list[Request]:
    """:func:`_request_columns`' requests as Request objects (ids from 0, arrival 0)."""
    addr, nbytes = _request_columns(cfg, runs, request_bytes)
    return [Request(i, op, a, n, 0, 0) for i, (a, n) in enumerate(zip(addr.tolist(),
                                                                      nbytes.tolist()))]


def _engine(cfg: HbfConfig) -> str:
    """The engine the measurements run on (``cfg.engine``; hbfsim.simulate.choose_engine:
    the reference where the compiled engine is not built, saying so once)."""
    from hbfsim.simulate import choose_engine, say_once

    engine, note = choose_engine(cfg)
    say_once(note)
    return engine


# ----------------------------------------------------------------------------- one run
def measure(cfg: HbfConfig, op: str, runs, *, request_bytes=DEFAULT_REQUEST_BYTES,
            outstanding: int | None = None, engine: str | None = None) -> dict:
    """Run one transfer on a fresh stack and return its time and statistics.

    Parameters
    ----------
    cfg : HbfConfig
        One stack (``stacks = 1``).
    op : str
        ``"R"`` or ``"W"``.
    runs : list of (first_page, bytes)
        What to transfer (:func:`stream_runs`, :func:`kv_runs`).
    request_bytes : int or sequence of int
        Request size (see :func:`_requests`).
    outstanding : int, optional
        GPU-side bound on requests issued and not yet answered: the next request is issued
        in the tick its predecessor's response arrives. None: every request is ready at
        tick 0 and only the controller's admission bounds them (L1 backpressure), as for a
        copy engine with the whole transfer queued.
    engine : str, optional
        ``compiled`` or ``reference`` (the same figures); default ``cfg.engine`` as
        :func:`hbfsim.simulate.choose_engine` decides.

    Returns
    -------
    dict
        ``seconds`` (window, first arrival to last response), ``bytes``, ``requests``,
        ``page_reads``, ``page_buffer_hits``, ``page_programs``, ``padding_bytes``,
        ``errors``, ``latency_p50_s`` (median request latency), ``steady_bw``.
    """
    if cfg.stacks != 1:
        raise ValueError(f"measure() drives one stack, not stacks = {cfg.stacks}")
    if outstanding is not None and (isinstance(outstanding, bool)
                                    or not isinstance(outstanding, int) or outstanding < 1):
        raise ValueError(f"outstanding must be a positive integer or None, not "
                         f"{outstanding!r}")
    engine = engine or _engine(cfg)
    if engine == "compiled":
        st, done, n = _measure_compiled(cfg, op, runs, request_bytes, outstanding)
    else:
        st, done, n = _measure_reference(cfg, op, runs, request_bytes, outstanding)
    if st["completions"] != n:
        raise RuntimeError(f"{st['completions']} of {n} requests completed")
    hz = cfg.memory_clock_khz * 1000
    lat = st["read_latency_ticks"] if op == "R" else st["write_latency_ticks"]
    return {"seconds": st["window_ticks"] / hz, "bytes": sum(n for _, n in runs),
            "requests": n, "page_reads": st["page_reads"],
            "page_buffer_hits": st["page_buffer_hits"], "page_programs": st["page_programs"],
            "padding_bytes": st["padding_bytes"], "errors": st["errors"],
            "latency_p50_s": lat["p50"] / hz, "steady_bw": _steady_bw(done, hz)}


def _measure_compiled(cfg, op, runs, request_bytes, outstanding):
    """measure()'s run on the compiled engine (hbfsim.engine_stream.run_window_streamed: the
    bulk or the closed window of :func:`_measure_reference`, the same events): the
    statistics, the (response tick, bytes) of every response in order, the request count."""
    from hbfsim.engine_stream import run_window_streamed

    addr, nbytes = _request_columns(cfg, runs, request_bytes)
    n = len(addr)
    ticks, sizes = [], []

    def block(cols):
        ticks.append(cols["t_done"])
        sizes.append(cols["nbytes"])

    zeros = np.zeros(n, np.int64)
    st, _ = run_window_streamed(cfg, np.arange(n, dtype=np.int64),
                                np.full(n, op == "W", np.int8), addr, nbytes, zeros,
                                max(1, n if outstanding is None else min(outstanding, n)),
                                on_block=block)
    done = list(zip(np.concatenate(ticks).tolist(), np.concatenate(sizes).tolist())) \
        if ticks else []
    return st, done, n


def _measure_reference(cfg, op, runs, request_bytes, outstanding):
    """measure()'s run on the golden model: the statistics, the (response tick, bytes) of
    every response in order, the request count."""
    reqs = _requests(cfg, op, runs, request_bytes)
    done: list[tuple[int, int]] = []          # (response tick, bytes), response order
    # bulk: every request ready at tick 0 (open loop); else a closed-loop window
    bulk = outstanding is None or outstanding >= len(reqs)
    it = iter(reqs[len(reqs) if bulk else outstanding:])

    def responded(req, t):
        done.append((t, req.nbytes))
        if bulk:
            return
        r = next(it, None)
        if r is not None:
            r.arrival = t   # issued in the tick its predecessor's response arrives
            system.submit(r)
        elif system.submitted == len(reqs):
            system.close_input()

    system = HbfSystem(cfg, on_response=responded, keep=False)
    for r in reqs if bulk else reqs[:outstanding]:
        system.submit(r)
    if bulk:
        system.close_input()
    system.run()
    return collect_stats(system), done, len(reqs)


def _steady_bw(done, hz) -> float | None:
    """Bytes per second answered between the responses at 25 % and 75 % of the bytes.

    The middle half of a long transfer: the pipeline is full, so neither the first tR nor
    the tail of the last wave counts (the line's latency carries them).
    """
    total = sum(n for _, n in done)
    acc = 0
    t25 = t75 = None
    b25 = b75 = 0
    for t, n in done:
        acc += n
        if t25 is None and acc >= total / 4:
            t25, b25 = t, acc
        if acc >= 3 * total / 4:
            t75, b75 = t, acc
            break
    if t25 is None or t75 is None or t75 <= t25:
        return None
    return (b75 - b25) * hz / (t75 - t25)


def measure_mixed(cfg: HbfConfig, read_runs, write_runs, *,
                  request_bytes=DEFAULT_REQUEST_BYTES, engine: str | None = None) -> dict:
    """Run a read transfer and a write transfer together on a fresh stack.

    The requests interleave one store, one load, while both last (a KV offload issued
    alongside a weight stream), all ready at tick 0. Returns ``read_s`` and ``write_s``:
    first arrival to the last response of each direction. ``engine`` as :func:`measure`'s.
    """
    engine = engine or _engine(cfg)
    if engine == "compiled":
        last, n, done, errors = _mixed_compiled(cfg, read_runs, write_runs, request_bytes)
    else:
        last, n, done, errors = _mixed_reference(cfg, read_runs, write_runs, request_bytes)
    if done != n or errors:
        raise RuntimeError(f"mixed transfer: {done} of {n} requests completed, "
                           f"{errors} errors")
    hz = cfg.memory_clock_khz * 1000
    # the window rule of the statistics: inclusive of the first and the last tick
    return {"read_s": (last["R"] + 1) / hz, "write_s": (last["W"] + 1) / hz,
            "bytes": sum(b for _, b in read_runs),
            "write_bytes": sum(b for _, b in write_runs)}


def _mixed_compiled(cfg, read_runs, write_runs, request_bytes):
    """measure_mixed()'s run on the compiled engine (the open loop of
    :func:`_mixed_reference`): the last response tick of each op, the requests, the
    responses and the errors."""
    from hbfsim.engine_stream import run_window_streamed

    ra, rn = _request_columns(cfg, read_runs, request_bytes)
    wa, wn = _request_columns(cfg, write_runs, request_bytes)
    # one store, one load, while both last; the rest of the longer one after
    m = min(len(ra), len(wa))
    op = np.concatenate([np.tile(np.array([1, 0], np.int8), m),
                         np.full(len(wa) - m, 1, np.int8), np.full(len(ra) - m, 0, np.int8)])
    addr = np.concatenate([np.column_stack([wa[:m], ra[:m]]).ravel(), wa[m:], ra[m:]])
    nbytes = np.concatenate([np.column_stack([wn[:m], rn[:m]]).ravel(), wn[m:], rn[m:]])
    n = len(op)
    last = {"R": 0, "W": 0}

    def block(cols):
        for code, name in ((0, "R"), (1, "W")):
            t = cols["t_done"][cols["op"] == code]
            if len(t):
                last[name] = max(last[name], int(t.max()))

    _, c = run_window_streamed(cfg, np.arange(n, dtype=np.int64), op, addr, nbytes,
                               np.zeros(n, np.int64), max(n, 1), on_block=block)
    return last, n, c["completions"], c["errors"]


def _mixed_reference(cfg, read_runs, write_runs, request_bytes):
    """measure_mixed()'s run on the golden model: the last response tick of each op, the
    requests, the responses and the errors."""
    reads = _requests(cfg, "R", read_runs, request_bytes)
    writes = _requests(cfg, "W", write_runs, request_bytes)
    last = {"R": 0, "W": 0}

    def responded(req, t):
        if t > last[req.op]:
            last[req.op] = t

    system = HbfSystem(cfg, on_response=responded, keep=False)
    n = 0
    for i in range(max(len(reads), len(writes))):
        for part in (writes, reads):
            if i < len(part):
                part[i].id = n
                n += 1
                system.submit(part[i])
    system.close_input()
    system.run()
    return last, n, system.n_done, system.errors
