"""The sweep's output folder: a journal of finished points, the table as CSV and Parquet,
and the lock that keeps one sweep per folder.

``points.jsonl`` is appended one line per finished point and flushed at once, so a sweep
stopped at any moment keeps every point it finished. Each line is checked against its
schema before use (:func:`check_entry`: every field present, the id the hash of the
identity it carries, every metric a finite scalar); a line that fails (cut short by a stop,
edited, written by another version) is not used, its point runs again, and the caller says
so in one line. ``results.csv`` and ``results.parquet`` hold the current grid's points in
grid order and are rewritten whole, through a temporary file in the same folder, when the
sweep ends. ``.sweep.lock`` is held (``flock``) while a sweep writes the folder; the
kernel releases it when that process ends, however it ends.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
from pathlib import Path

from hbfsim.textfile import loads_untrusted

__all__ = ["PointStore", "SweepLock", "check_entry", "write_table"]

POINTS = "points.jsonl"
CSV = "results.csv"
PARQUET = "results.parquet"
LOCK = ".sweep.lock"
#: The journal's line format; a line of another version is recomputed, never read.
JOURNAL_VERSION = 2
_ENTRY_KEYS = {"v", "point", "identity", "metrics", "host_seconds"}
_ID = re.compile(r"[0-9a-f]{16}")
#: Metrics every point of a kind records (a line without them is not a finished point).
REQUIRED_METRICS = {"device": ("requests", "last_completion_tick"),
                    "serve": ("completion_s",)}


class JournalError(ValueError):
    """A journal line that must not be used; the message says why, in a few words."""


def _finite_scalar(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, (bool, int, str))


def check_entry(line: str, kind: str | None = None) -> dict:
    """The journal entry on ``line``, checked against its schema.

    Raises
    ------
    JournalError
        Not JSON, nested too deeply, not an object, a field missing or extra, another
        version, an id that is not the hash of its identity, a metric that is not a finite
        scalar, a required metric missing, or a host time that is not finite and >= 0.
    """
    try:
        d = loads_untrusted(line)
    except ValueError as e:
        raise JournalError(f"not JSON ({str(e)[:60]})") from None
    if not isinstance(d, dict):
        raise JournalError("not a JSON object")
    if set(d) != _ENTRY_KEYS:
        gone = sorted(_ENTRY_KEYS - set(d))
        raise JournalError(f"field {gone[0]!r} missing" if gone else
                           f"unknown field {sorted(set(d) - _ENTRY_KEYS)[0]!r}")
    if d["v"] != JOURNAL_VERSION or isinstance(d["v"], bool):
        raise JournalError(f"journal version {d['v']!r}, not {JOURNAL_VERSION}")
    pid, ident = d["point"], d["identity"]
    if not isinstance(pid, str) or not _ID.fullmatch(pid):
        raise JournalError(f"point id {pid!r:.40} is not 16 hex digits")
    if not isinstance(ident, str) or hashlib.sha256(ident.encode()).hexdigest()[:16] != pid:
        raise JournalError(f"point {pid}: id is not the hash of its identity")
    m = d["metrics"]
    if not isinstance(m, dict) or not m:
        raise JournalError(f"point {pid}: metrics must be a non-empty object")
    for k, v in m.items():
        if not k or not _finite_scalar(v):
            raise JournalError(f"point {pid}: metric {k!r:.40} = {v!r:.40} is not a finite "
                               f"number or text")
    for k in REQUIRED_METRICS.get(kind, ()):
        if k not in m:
            raise JournalError(f"point {pid}: metric {k!r} missing")
        if isinstance(m[k], (bool, str)):
            raise JournalError(f"point {pid}: metric {k!r} must be a number, not {m[k]!r:.40}")
    h = d["host_seconds"]
    if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) or h < 0:
        raise JournalError(f"point {pid}: host_seconds {h!r:.40} is not a finite number >= 0")
    return d


class PointStore:
    """Finished points of one output folder, keyed by point id, every entry checked.

    Members
    -------
    entries : dict
        Point id -> checked journal entry (the last valid line of each id wins).
    bad : list of (line number, reason)
        Lines not used (their points run again).
    """

    def __init__(self, folder: Path, kind: str | None = None):
        self.folder = Path(folder)
        self.path = self.folder / POINTS
        self.entries: dict[str, dict] = {}
        self.bad: list[tuple[int, str]] = []
        self._torn = False
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as e:
            raise OSError(e.errno, f"cannot read {self.path}: {e.strerror}") from None
        self._torn = bool(data) and not data.endswith(b"\n")
        for n, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                entry = check_entry(raw.decode("utf-8"), kind)
            except UnicodeDecodeError:
                self.bad.append((n, "not UTF-8 text"))
                continue
            except JournalError as e:
                self.bad.append((n, str(e)))
                continue
            self.entries[entry["point"]] = entry
        self._f = None

    def usable(self, point_id: str, identity: str) -> bool:
        """Whether a finished entry of ``point_id`` is the run ``identity`` describes
        (compared by content, not only by the hash)."""
        e = self.entries.get(point_id)
        return e is not None and e["identity"] == identity

    def note(self) -> str | None:
        """One line on the lines not used, or None."""
        if not self.bad:
            return None
        n, why = self.bad[0]
        more = f" (and {len(self.bad) - 1} more)" if len(self.bad) > 1 else ""
        return (f"{self.path}: {len(self.bad)} line(s) not used, their points run again: "
                f"line {n}: {why}{more}")

    def add(self, point_id: str, identity: str, result: dict) -> dict:
        """Record a finished point (appended and flushed at once); return its entry."""
        entry = {"v": JOURNAL_VERSION, "point": point_id, "identity": identity,
                 "metrics": result["metrics"], "host_seconds": result["host_seconds"]}
        text = json.dumps(entry, allow_nan=False)
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
            if self._torn:
                self._f.write("\n")         # a torn last line must not swallow the next one
        self._f.write(text + "\n")
        self._f.flush()
        self.entries[point_id] = entry
        return entry

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class SweepLock:
    """The folder's lock: one sweep writes a folder at a time.

    :meth:`acquire` takes ``flock(LOCK_EX | LOCK_NB)`` on ``DIR/.sweep.lock`` and writes the
    holder (pid, grid, start) into it; a second sweep is refused naming the first. The
    kernel drops the lock when the holding process ends (kill -9 included), so a stale file
    never blocks.
    """

    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK
        self._fd = None

    def acquire(self, grid: str) -> None:
        """Take the lock; raise ``BlockingIOError`` naming the holder if another has it."""
        import fcntl
        import time

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise BlockingIOError(f"another sweep is writing to it ({holder}); wait for it "
                                  f"to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        os.pwrite(fd, f"pid {os.getpid()}, grid {grid}, since {stamp} UTC\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)            # closing the descriptor drops the flock
            self._fd = None


def _columns(rows: list[dict]) -> list[str]:
    """The union of the rows' keys in first-seen order, ``host_seconds`` (the host's time,
    the one column that differs between two runs of one point) last."""
    cols: list[str] = []
    seen = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    if "host_seconds" in seen:
        cols.remove("host_seconds")
        cols.append("host_seconds")
    return cols


def _replace_via_temp(path: Path, write) -> None:
    """``write(tmp)`` a hidden temporary beside ``path``, renamed over it when complete
    (the output-safety rule of :mod:`hbfsim.outputs`: devices and FIFOs in place)."""
    from hbfsim.outputs import resolve_outputs

    target = resolve_outputs({str(path): path})[str(path)]
    with target.temp_path() as tmp:
        write(tmp)


def write_table(folder: Path, rows: list[dict]) -> tuple[Path, Path]:
    """Write ``rows`` as ``results.csv`` and ``results.parquet``; return both paths.

    Columns are the union of the rows' keys in first-seen order (``host_seconds`` last); a
    missing value is empty
    in CSV and null in Parquet. Parquet column types come from pyarrow's inference (a
    column mixing ints and floats becomes double).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    cols = _columns(rows)

    def csv_write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow({k: "" if r.get(k) is None else r.get(k) for k in cols})

    def parquet_write(tmp):
        data = {}
        for k in cols:
            vals = [r.get(k) for r in rows]
            kinds = {type(v) for v in vals if v is not None}
            if kinds == {int, float}:
                vals = [None if v is None else float(v) for v in vals]
            elif len(kinds) > 1:
                vals = [None if v is None else str(v) for v in vals]
            data[k] = vals
        pq.write_table(pa.table(data), tmp)

    _replace_via_temp(folder / CSV, csv_write)
    _replace_via_temp(folder / PARQUET, parquet_write)
    return folder / CSV, folder / PARQUET
