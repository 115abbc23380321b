"""hbf-trace-v1: the frozen 15-column request trace (the HBF-Sim paper §4.4).

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

from hbfsim.config import MAX_TICK, PAGE_BYTES, HbfConfig
from hbfsim.model.requests import InputError, parse_int

__all__ = ["COLUMNS", "STATES", "TraceRow", "TraceWriter", "check_header", "parse_row",
           "read_trace", "replay_requests", "requests_from_rows", "trace_checks",
           "validate_trace"]

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
            # Return: tc + 2 for a read (DP6), tc + 1 for a write (docs/timing-contract.md
            # §4, the request's events)
            ret = tc + 2 if r.op == "R" else tc + 1
            st.append((ret, "Return", 0))
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
    """One parsed trace row (column name -> int or str); ``line`` is its line in the file."""

    line = 0


def read_trace(path) -> list[TraceRow]:
    """Read an hbf-trace-v1 file strictly.

    Raises
    ------
    InputError
        Missing, added or reordered columns (named), or a malformed value (line and column).
    """
    from hbfsim.textfile import read_text

    p = Path(path)
    text = read_text(p, "trace", InputError)
    reader = csv.reader(io.StringIO(text, newline=""))
    check_header(p, next(reader, None))
    rows = []
    try:
        for lineno, rec in enumerate(reader, start=2):
            row = parse_row(p, lineno, rec)
            if row is not None:
                rows.append(row)
    except csv.Error as e:
        raise InputError(f"{p} line {reader.line_num}: not CSV: {e}") from None
    return rows


def check_header(p, header) -> None:
    """Refuse a header that is not the 15 hbf-trace-v1 columns, naming what differs."""
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


def parse_row(p, lineno: int, rec: list):
    """One data record as a :class:`TraceRow` (None for an empty line).

    Raises
    ------
    InputError
        A wrong field count or a malformed value, naming the line and the column.
    """
    if not rec:
        return None
    if len(rec) != len(COLUMNS):
        raise InputError(f"{p} line {lineno}: expected {len(COLUMNS)} fields, "
                         f"found {len(rec)}")
    row = TraceRow()
    row.line = lineno
    for name, val in zip(COLUMNS, rec):
        if name in _INT_COLS:
            try:
                row[name] = parse_int(val)
            except ValueError:
                raise InputError(f"{p} line {lineno}: {name} {val[:40]!r} is not an "
                                 "integer") from None
        else:
            row[name] = val.strip()
    if row["op"] not in ("R", "W"):
        raise InputError(f"{p} line {lineno}: op must be R or W, not {row['op'][:40]!r}")
    if row["state"] not in STATES:
        raise InputError(f"{p} line {lineno}: state {row['state'][:40]!r} is not one of "
                         f"{', '.join(STATES)}")
    return row


def replay_requests(rows, cfg: HbfConfig):
    """Device-only replay: the Ingress rows become requests arriving at their Ingress tick.

    Raises
    ------
    InputError
        Whatever :func:`validate_trace` refuses (replay refuses what validate refuses).
    """
    validate_trace(rows, cfg)
    return requests_from_rows(rows)


def requests_from_rows(rows):
    """The Ingress rows of validated rows as requests in (sim_cycle, row) order."""
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


#: States every request has at level 2 (Buffered too for a write); Queued and MediaOp are
#: absent for requests served without a media operation (MSHR, buffer and cache hits).
_LEVEL2_REQUIRED = ("Ingress", "Mapped", "Return", "Completed")
_ORDER = {s: i for i, s in enumerate(STATES)}
_FLAG_COLS = ("cache_hit", "mshr_hit", "error")


def validate_trace(rows, cfg: HbfConfig, name: str = "trace") -> dict:
    """Check an hbf-trace-v1 trace against the trace's own rules (docs/model.md).

    Every row: ``sim_cycle`` in 0..MAX_TICK, no negative field, flags 0/1, ``error`` only on
    Completed, ``address`` in the HBF range, ``bytes`` 1..4096 inside one page, ``page`` the
    page of ``address``. Every request: one Ingress and one Completed row (level 1) or every
    lifecycle state it must pass, each once, in state order (level 2: Ingress, Mapped,
    Buffered for a write, Return, Completed; Queued and MediaOp where a media operation
    served it); cycles non-decreasing; op, address, bytes and source unchanged; one arrival
    (``sim_cycle - latency``, so latency >= 0 at every row). Every page: one channel.

    Returns
    -------
    dict
        ``rows``, ``requests``, ``level`` and ``checks`` (a list of what was checked).

    Raises
    ------
    InputError
        The first violation, naming the line, the request and the values.
    """
    lo, hi = cfg.base_address, cfg.base_address + cfg.capacity_bytes
    per: dict[int, list] = {}
    page_channel: dict[int, tuple] = {}
    levels = set()

    def bad(r, msg):
        raise InputError(f"{name} line {r.line}: request {r['request_id']}: {msg}")

    for r in rows:
        for col in _INT_COLS:
            if r[col] < 0:
                bad(r, f"{col} must be non-negative, not {r[col]}")
        if r["sim_cycle"] > MAX_TICK:
            bad(r, f"sim_cycle {r['sim_cycle']} is larger than {MAX_TICK}")
        for col in _FLAG_COLS:
            if r[col] not in (0, 1):
                bad(r, f"{col} must be 0 or 1, not {r[col]}")
        if r["error"] and r["state"] != "Completed":
            bad(r, f"error is set on a {r['state']} row (only Completed carries it)")
        addr, nbytes = r["address"], r["bytes"]
        if not lo <= addr < hi:
            bad(r, f"address {addr:#x} is outside the HBF range [{lo:#x}, {hi:#x})")
        off = (addr - lo) % PAGE_BYTES
        if not 1 <= nbytes <= PAGE_BYTES - off:
            bad(r, f"bytes {nbytes} at page offset {off} must be 1..{PAGE_BYTES - off} "
                   "(inside one 4 KiB page)")
        page = (addr - lo) // PAGE_BYTES
        if r["page"] != page:
            bad(r, f"page {r['page']} is not the page of address {addr:#x} ({page})")
        known = page_channel.setdefault(page, (r["channel"], r.line))
        if known[0] != r["channel"]:
            bad(r, f"page {page} on channel {r['channel']}, but on channel {known[0]} at "
                   f"line {known[1]} (one channel per page)")
        per.setdefault(r["request_id"], []).append(r)
    for rid, rs in per.items():
        first = rs[0]
        states = [r["state"] for r in rs]
        if len(set(states)) != len(states):
            dup = next(s for s in states if states.count(s) > 1)
            bad(rs[[i for i, s in enumerate(states) if s == dup][1]], f"{dup} row repeated")
        for a, b in zip(rs, rs[1:]):
            if _ORDER[b["state"]] < _ORDER[a["state"]]:
                bad(b, f"{b['state']} row after {a['state']} (states out of order)")
            if b["sim_cycle"] < a["sim_cycle"]:
                bad(b, f"sim_cycle {b['sim_cycle']} at {b['state']} is earlier than "
                       f"{a['sim_cycle']} at {a['state']}")
        for need in ("Ingress", "Completed"):
            if need not in states:
                bad(first, f"has no {need} row")
        level = 1 if set(states) == {"Ingress", "Completed"} else 2
        levels.add(level)
        if level == 2:
            required = _LEVEL2_REQUIRED + (("Buffered",) if first["op"] == "W" else ())
            missing = [s for s in required if s not in states]
            if missing:
                bad(first, f"level-2 trace lacks its {', '.join(missing)} row(s)")
        arrival = first["sim_cycle"] - first["latency"]
        for r in rs:
            for col in ("op", "address", "bytes", "source_subpartition"):
                if r[col] != first[col]:
                    bad(r, f"{col} {r[col]!r} at {r['state']} differs from {first[col]!r} at "
                           f"{first['state']}")
            if r["sim_cycle"] - r["latency"] != arrival:
                bad(r, f"latency {r['latency']} at cycle {r['sim_cycle']} implies arrival "
                       f"{r['sim_cycle'] - r['latency']}, not {arrival} as at "
                       f"{first['state']}")
            if arrival < 0:
                bad(r, f"latency {first['latency']} exceeds its cycle {first['sim_cycle']}")
    if len(levels) > 1:
        raise InputError(f"{name}: mixes level-1 and level-2 requests")
    if not per:
        raise InputError(f"{name}: no rows")
    return {"rows": len(rows), "requests": len(per), "level": levels.pop(),
            "checks": trace_checks(cfg)}


def trace_checks(cfg: HbfConfig) -> list[str]:
    """What :func:`validate_trace` checks, in words (``trace validate`` prints it)."""
    lo, hi = cfg.base_address, cfg.base_address + cfg.capacity_bytes
    return ["header and 15 fields per row", "values in range (address in the HBF range "
            f"[{lo:#x}, {hi:#x}), bytes inside one page, flags 0/1, no negative field)",
            "page matches address, one channel per page",
            "one row per lifecycle state, in order, cycles non-decreasing",
            "op, address, bytes and source unchanged; one arrival per request "
            "(latency = cycle - arrival >= 0)"]
