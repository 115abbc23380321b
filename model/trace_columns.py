"""Columnar, streaming reading and checking of hbf-trace-v1 files (numpy, 4 MiB blocks).

``hbfsim trace validate`` and ``hbfsim replay`` read big traces through :func:`load_trace`:
the 15 columns are parsed block by block into numpy arrays and every rule of
:func:`hbfsim.model.trace.validate_trace` is checked on whole columns. Only a file that
passes every check is answered from the columns. Anything else (a bad line, a broken rule,
quoted fields, bytes outside ASCII) goes through the exact row reader and row validator,
so the error message is the row validator's, naming the line, the request and the values.
"""

from __future__ import annotations

import csv

import numpy as np

from hbfsim.config import MAX_TICK, PAGE_BYTES, HbfConfig
from hbfsim.model.request_columns import _ints, _trim, line_blocks
from hbfsim.textfile import open_csv

__all__ = ["TraceColumns", "load_trace", "replay_list"]

_N = 15
_STATE_NAMES = ("Ingress", "Mapped", "Buffered", "Queued", "MediaOp", "Return", "Completed")
_STATE_LEN = np.array([len(s) for s in _STATE_NAMES])
_STATE_BYTES = np.zeros((len(_STATE_NAMES), 9), np.uint8)
for _i, _s in enumerate(_STATE_NAMES):
    _STATE_BYTES[_i, :len(_s)] = np.frombuffer(_s.encode(), np.uint8)
_INT = ["sim_cycle", "request_id", "source_subpartition", "address", "page", "channel",
        "subarray", "bytes", "queue_depth", "latency", "cache_hit", "mshr_hit", "error"]
_ORDER = ["sim_cycle", "request_id", "source_subpartition", "op", "address", "page", "channel",
          "subarray", "state", "bytes", "queue_depth", "latency", "cache_hit", "mshr_hit",
          "error"]


class TraceColumns(dict):
    """Column name -> numpy array (ints as uint64 or int64, ``op`` as bool "is a write",
    ``state`` as its index in STATES), rows in file order; ``summary`` once validated."""

    summary: dict = {}


def _state_codes(b, s, e):
    """Index of each span's state name, or -1 where it is none of them."""
    n = e - s
    last = len(b) - 1
    c0 = b[np.minimum(s, last)]
    c1 = b[np.minimum(s + 1, last)]
    code = np.full(len(s), -1, np.int64)
    for i, name in enumerate(_STATE_NAMES):
        m = (n == len(name)) & (c0 == ord(name[0])) & (c1 == ord(name[1]))
        code[m] = i
    ok = code >= 0
    for k in range(9):
        m = ok & (k < n)
        idx = np.flatnonzero(m)
        bad = b[s[idx] + k] != _STATE_BYTES[code[idx], k]
        code[idx[bad]] = -1
        ok[idx[bad]] = False
    return code


def _block(b: np.ndarray):
    """Parse one block of complete lines: ``(columns, n_lines, first_bad, starts, ends)``."""
    isnl = b == 10
    nl = np.flatnonzero(isnl)
    nlines = len(nl)
    starts = np.empty(nlines, np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    iscomma = b == 44
    ncomma = np.add.reduceat(iscomma, starts, dtype=np.int32)
    length = nl - starts - (b[np.maximum(nl - 1, 0)] == 13) * (nl > starts)
    empty = length == 0  # the row reader skips only empty lines
    good = ~empty & (ncomma == _N - 1)
    bad_line = ~empty & ~good
    commas = np.flatnonzero(iscomma)
    line_of_comma = np.repeat(np.arange(nlines), ncomma)
    c = commas[good[line_of_comma]].reshape(-1, _N - 1)
    st, en = starts[good], nl[good]
    bounds = [st] + [c[:, i] + 1 for i in range(_N - 1)]
    ends = [c[:, i] for i in range(_N - 1)] + [en]
    cols = {}
    ok = np.ones(len(st), bool)
    for name, s, e in zip(_ORDER, bounds, ends):
        s, e = _trim(b, s, e)
        if name == "op":
            ch = b[np.minimum(s, len(b) - 1)]
            ok &= (e - s == 1) & ((ch == 82) | (ch == 87))
            cols[name] = ch == 87
        elif name == "state":
            code = _state_codes(b, s, e)
            ok &= code >= 0
            cols[name] = code
        else:
            v, good_v = _ints(b, s, e)
            ok &= good_v
            cols[name] = v
    good_idx = np.flatnonzero(good)
    bad_line[good_idx[~ok]] = True
    first_bad = int(np.argmax(bad_line)) if bad_line.any() else None
    return _compact(cols), nlines, first_bad, starts, nl


#: Narrow dtypes for the columns that allow them (memory: 10 M rows stay under 1 GB); a value
#: beyond the narrow type leaves the file to the row reader (see _parse).
_NARROW = {"source_subpartition": np.uint32, "channel": np.uint32, "subarray": np.uint32,
           "queue_depth": np.uint32, "bytes": np.uint32, "cache_hit": np.uint8,
           "mshr_hit": np.uint8, "error": np.uint8, "state": np.int8}


def _compact(cols: dict) -> dict | None:
    for name, dt in _NARROW.items():
        v = cols[name]
        if len(v) and v.max() > np.iinfo(dt).max:
            return None
        cols[name] = v.astype(dt)
    return cols


def _parse(fh, first_line: int, check_line):
    parts, lines = [], []
    line0 = first_line
    for b in line_blocks(fh):
        if b is None:
            return None
        cols, nlines, first_bad, starts, nl = _block(b)
        if cols is None:
            return None
        if first_bad is not None:
            text = bytes(b[starts[first_bad]:nl[first_bad]]).decode("ascii")
            check_line(line0 + first_bad, text)
            return None
        isnl_len = nl - starts - (b[np.maximum(nl - 1, 0)] == 13) * (nl > starts)
        lines.append(line0 + np.flatnonzero(isnl_len > 0))
        parts.append(cols)
        line0 += nlines
    out = TraceColumns()
    for name in _ORDER:  # one column at a time, each block's copy freed as it is joined
        out[name] = np.concatenate([p.pop(name) for p in parts]) if parts else np.empty(0)
    out["line"] = (np.concatenate(lines) if lines else np.empty(0, np.int64)).astype(np.uint32)
    return out


def _valid(t: TraceColumns, cfg: HbfConfig):
    """Every rule of validate_trace on whole columns: the summary, or None on any violation
    (the row validator then names it). Temporaries are dropped as soon as a rule is checked:
    ten million rows must not cost several copies of a column."""
    n = len(t["line"])
    if n == 0:
        return None
    u = np.uint64
    lo, hi = u(cfg.base_address), u(cfg.base_address + cfg.capacity_bytes)
    addr, nbytes, state = t["address"], t["bytes"], t["state"]
    if (t["sim_cycle"] > MAX_TICK).any() or (t["latency"] > MAX_TICK).any():
        return None
    for col in ("cache_hit", "mshr_hit", "error"):
        if (t[col] > 1).any():
            return None
    if ((t["error"] == 1) & (state != 6)).any():
        return None
    if ((addr < lo) | (addr >= hi)).any():
        return None
    rel = addr - lo
    off = rel % u(PAGE_BYTES)
    off += nbytes
    if (nbytes < 1).any() or (off > PAGE_BYTES).any():
        return None
    del off
    rel //= u(PAGE_BYTES)          # now the page of each address
    if (t["page"] != rel).any():
        return None
    del rel
    order = np.argsort(t["page"], kind="stable")  # one channel per page
    ps = t["page"][order]
    same = ps[1:] == ps[:-1]
    del ps
    cs = t["channel"][order]
    del order
    if (same & (cs[1:] != cs[:-1])).any():
        return None
    del cs, same
    # per request, rows in file order
    order = np.argsort(t["request_id"], kind="stable")
    rid = t["request_id"][order]
    cont = rid[1:] == rid[:-1]           # row i+1 continues row i's request
    del rid
    st = state[order]
    if (cont & (st[1:] <= st[:-1])).any():   # a repeated state, or states out of order
        return None
    first = np.concatenate([[True], ~cont])
    head = np.flatnonzero(first)
    group = np.cumsum(first, dtype=np.int64)
    group -= 1
    del first
    tail = np.concatenate([head[1:] - 1, [n - 1]])
    if (st[head] != 0).any() or (st[tail] != 6).any():   # Ingress ... Completed
        return None
    for col in ("op", "address", "bytes", "source_subpartition"):
        v = t[col][order]
        if (v != v[head][group]).any():
            return None
    del v
    cyc = t["sim_cycle"][order].astype(np.int64)
    if (cont & (cyc[1:] < cyc[:-1])).any():
        return None
    del cont
    cyc -= t["latency"][order].astype(np.int64)      # now each row's arrival
    if (cyc < 0).any() or (cyc != cyc[head][group]).any():
        return None
    del cyc
    size = tail - head + 1
    levels = np.unique(np.where(size == 2, 1, 2))
    if len(levels) > 1:
        return None
    level = int(levels[0])
    if level == 2:
        present = np.zeros((len(head), 7), bool)
        present[group, st] = True
        need = present[:, 1] & present[:, 5] & (present[:, 2] | ~t["op"][order][head])
        if not need.all():
            return None
    return {"rows": n, "requests": len(head), "level": level}


def load_trace(path, cfg: HbfConfig, name=None):
    """Read and validate a trace: ``(summary, columns)``.

    ``columns`` is a :class:`TraceColumns` when the columnar path answered, else the row
    reader's list of :class:`~hbfsim.model.trace.TraceRow`; ``summary`` is
    :func:`~hbfsim.model.trace.validate_trace`'s.

    Raises
    ------
    InputError
        Whatever the row reader or the row validator refuses (the same message).
    """
    from pathlib import Path

    from hbfsim.model.requests import InputError
    from hbfsim.model.trace import (check_header, parse_row, read_trace, trace_checks,
                                    validate_trace)

    p = Path(path)
    name = str(p) if name is None else name
    cols = None
    fh, head, plain = open_csv(p, "trace", InputError)
    with fh:
        if head and plain:
            check_header(p, next(csv.reader([head.decode("ascii")]), None))

            def check_line(lineno, text):
                parse_row(p, lineno, next(csv.reader([text]), []))

            cols = _parse(fh, 2, check_line)
    if cols is not None:
        summary = _valid(cols, cfg)
        if summary is not None:
            summary["checks"] = trace_checks(cfg)
            cols.summary = summary
            return summary, cols
    rows = read_trace(p)
    return validate_trace(rows, cfg, name), rows


def replay_list(data):
    """Device-only replay of a loaded trace (``load_trace``'s second value): its Ingress rows
    as requests in (sim_cycle, row) order, a lazy RequestList for columns."""
    from hbfsim.model.request_columns import Columns
    from hbfsim.model.requests import RequestList
    from hbfsim.model.trace import requests_from_rows

    if not isinstance(data, TraceColumns):
        return requests_from_rows(data)
    m = data["state"] == 0
    cols = Columns(data["sim_cycle"][m].astype(np.int64), data["op"][m], data["address"][m],
                   data["bytes"][m].astype(np.uint16),
                   data["source_subpartition"][m].astype(np.uint32))
    return RequestList(cols, ids=data["request_id"][m].astype(np.int64))
