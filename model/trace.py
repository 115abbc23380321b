"""hbf-trace-v1: the frozen 15-column request trace (REFERENCE §3; source §4.4).

Rows are written when a request completes, all of that request's rows together in state
order; requests appear in completion order. Level 1 writes the Ingress and Completed rows,
level 2 every state of contract §4. Column meanings (docs/trace.md):

``sim_cycle`` tick the state was entered; ``page`` global logical page; ``channel``
``stack * channels + channel``; ``queue_depth`` requests inside the controller at Ingress,
the channel queue occupancy after the page operation was enqueued at Queued, else 0;
``latency`` ticks since arrival; flags as 0/1.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.requests import InputError, parse_int

__all__ = ["COLUMNS", "STATES", "TraceRow", "TraceWriter", "read_trace", "replay_requests"]

COLUMNS = ["sim_cycle", "request_id", "source_subpartition", "op", "address", "page",
           "channel", "subarray", "state", "bytes", "queue_depth", "latency", "cache_hit",
           "mshr_hit", "error"]
STATES = ("Ingress", "Mapped", "Buffered", "Queued", "MediaOp", "Return", "Completed")
_INT_COLS = {"sim_cycle", "request_id", "source_subpartition", "address", "page", "channel",
             "subarray", "bytes", "queue_depth", "latency", "cache_hit", "mshr_hit", "error"}


class TraceWriter:
    """Write hbf-trace-v1 rows to a file (atomically: a hidden temporary renamed on close,
    by the output-safety rule of :mod:`hbfsim.outputs`).

    Parameters
    ----------
    path : str, Path or hbfsim.outputs.Target
        Output file; a :class:`~hbfsim.outputs.Target` already checked by the command
        (a plain path is checked here on its own).
    level : int
        1 = Ingress and Completed rows; 2 = every state.
    """

    def __init__(self, path, level: int = 2):
        from hbfsim.outputs import Target, resolve_outputs

        target = path if isinstance(path, Target) else resolve_outputs({"trace": path})["trace"]
        self.path = target.path
        self.level = level
        self.fh, self._commit, self._abort = target.opener("w", newline="")
        self.fh.write(",".join(COLUMNS) + "\n")
        self.rows = 0

    def request(self, r, cfg: HbfConfig) -> None:
        page = (r.addr - cfg.base_address) // PAGE_BYTES
        ch = r.stack * cfg.channels + r.ch
        flags = f"{int(r.cache_hit)},{int(r.mshr_hit)}"
        pre = f"{r.id},{r.source},{r.op},{r.addr:#x},{page},{ch},{r.sub},"
        out = [f"{r.t_accept},{pre}Ingress,{r.nbytes},{r.depth},{r.t_accept - r.arrival},"
               f"{flags},0\n"]
        if self.level >= 2:
            tq, ti, tc, depth = r.entry_info
            tm = r.t_map
            st = [(r.t_accept + 1, "Mapped", 0)]
            if r.op == "W":
                st.append((tm + 1, "Buffered", 0))
            if tq >= 0:
                st.append((max(tq + 1, tm + 1), "Queued", depth))
            if ti >= 0:
                st.append((max(ti, tm + 1), "MediaOp", 0))
            st.append((tc + 1, "Return", 0))
            for cyc, name, d in st:
                out.append(f"{cyc},{pre}{name},{r.nbytes},{d},{cyc - r.arrival},{flags},0\n")
        out.append(f"{r.t_done},{pre}Completed,{r.nbytes},0,{r.t_done - r.arrival},{flags},"
                   f"{int(r.error)}\n")
        self.fh.write("".join(out))
        self.rows += len(out)

    def close(self) -> None:
        self._commit()

    def abort(self) -> None:
        self._abort()


class TraceRow(dict):
    """One parsed trace row (column name -> int or str)."""


def read_trace(path) -> list[TraceRow]:
    """Read an hbf-trace-v1 file strictly.

    Raises
    ------
    InputError
        Missing, added or reordered columns (named), or a malformed value (line and column).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"cannot read trace {str(p)!r}: {e.strerror}") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise InputError(f"{p}: empty file; expected the hbf-trace-v1 header")
    header = [h.strip() for h in header]
    if header != COLUMNS:
        missing = [c for c in COLUMNS if c not in header]
        added = [c for c in header if c not in COLUMNS]
        if missing:
            msg = f"missing column(s) {', '.join(missing)}"
        elif added:
            msg = f"unexpected column(s) {', '.join(added)}"
        else:
            i = next(i for i, (a, b) in enumerate(zip(header, COLUMNS)) if a != b)
            msg = f"column {i + 1} is {header[i]!r}, expected {COLUMNS[i]!r} (reordered)"
        raise InputError(f"{p} line 1: not hbf-trace-v1: {msg}")
    rows = []
    for lineno, rec in enumerate(reader, start=2):
        if not rec:
            continue
        if len(rec) != len(COLUMNS):
            raise InputError(f"{p} line {lineno}: expected {len(COLUMNS)} fields, "
                             f"found {len(rec)}")
        row = TraceRow()
        for name, val in zip(COLUMNS, rec):
            if name in _INT_COLS:
                try:
                    row[name] = parse_int(val)
                except ValueError:
                    raise InputError(f"{p} line {lineno}: {name} {val!r} is not an "
                                     "integer") from None
            else:
                row[name] = val.strip()
        if row["op"] not in ("R", "W"):
            raise InputError(f"{p} line {lineno}: op must be R or W, not {row['op']!r}")
        if row["state"] not in STATES:
            raise InputError(f"{p} line {lineno}: state {row['state']!r} is not one of "
                             f"{', '.join(STATES)}")
        rows.append(row)
    return rows


def replay_requests(rows, cfg: HbfConfig):
    """Device-only replay: the Ingress rows become requests arriving at their Ingress tick.

    Raises
    ------
    InputError
        When the trace holds no Ingress rows or repeats a request id.
    """
    from hbfsim.model.controller import Request
    from hbfsim.model.requests import write_pattern

    seen = set()
    reqs = []
    for i, r in enumerate(rows):
        if r["state"] != "Ingress":
            continue
        if r["request_id"] in seen:
            raise InputError(f"trace repeats Ingress of request {r['request_id']}")
        seen.add(r["request_id"])
        data = write_pattern(r["request_id"], r["bytes"]) if r["op"] == "W" else None
        reqs.append((r["sim_cycle"], i, Request(r["request_id"], r["op"], r["address"],
                                                r["bytes"], r["source_subpartition"],
                                                r["sim_cycle"], data)))
    if not reqs:
        raise InputError("trace has no Ingress rows to replay")
    reqs.sort(key=lambda x: (x[0], x[1]))
    return [r for _, _, r in reqs]
