"""Readers for public LLM request traces, and ``load_workload``, the one entry point of the CLI.

Formats (docs/serving-workloads.md):

- **Mooncake** JSONL (kvcache-ai/Mooncake ``FAST25-release/traces``): one object a line,
  ``timestamp`` (ms since the first request), ``input_length``, ``output_length``,
  ``hash_ids`` (one id per 512-token block of the input, equal ids = equal prefix). Mooncake
  has no session id: every line is a session of one turn with an absolute arrival, and
  reuse across requests is what its ``hash_ids`` say.
- **Azure** LLM inference trace CSV (Azure/AzurePublicDataset, 2023 and 2024): ``TIMESTAMP``
  (a date-time string), ``ContextTokens``, ``GeneratedTokens``. No prefix information: every
  request gets hashes of its own.
- **BurstGPT** CSV (HPMLL/BurstGPT): ``Timestamp`` (seconds), ``Model``, ``Request tokens``,
  ``Response tokens``, ``Total tokens``, ``Log Type``; an optional ``Session ID`` groups rows
  into sessions. Rows with ``Response tokens`` 0 are the dataset's failed requests (its
  README) and are skipped; unique hashes as for Azure.

Every reader is strict: one-line :class:`WorkloadError` ``FILE:LINE: field 'NAME' ...`` for a
bad value, non-UTF-8 bytes, an empty file or a missing column. Arrival times must not go back
(refused, not sorted: a trace out of order is a damaged or concatenated file, and silent
sorting would renumber its sessions); the first arrival becomes time 0. CRLF line ends, a
UTF-8 byte-order mark and blank lines are accepted.
"""

from __future__ import annotations

import csv
import io
import json
import math
from contextlib import ExitStack
from datetime import datetime
from importlib import resources
from pathlib import Path

from hbfsim.serve.workload import Turn, Workload, WorkloadError

__all__ = ["FORMATS", "MAX_TOKENS", "MOONCAKE_BLOCK_TOKENS", "SAMPLES", "load_workload",
           "read_azure", "read_burstgpt", "read_mooncake", "read_trace", "sample_path"]

FORMATS = ("mooncake", "azure", "burstgpt")
MOONCAKE_BLOCK_TOKENS = 512
# Unique-hash traces (Azure, BurstGPT) use the same granularity, so that every reader's
# workloads compare on one block size.
_BLOCK_TOKENS = MOONCAKE_BLOCK_TOKENS
# A request above 2**24 tokens (16.8M: beyond every context window of 2026, the largest being
# 10M) is a damaged field, not a request.
MAX_TOKENS = 1 << 24
# Arrivals later than ~32 years after the first are a unit error (ms read as s, ns as ms).
_MAX_SPAN_S = 1e9
SAMPLES = {"mooncake": "sample_mooncake.jsonl", "azure": "sample_azure.csv",
           "burstgpt": "sample_burstgpt.csv"}


def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read trace: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise WorkloadError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at "
                            f"column {col})") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise WorkloadError(f"{path}:1: empty file: no requests")
    return text


class _CsvText(str):
    """A CSV field: the one place where a token count may arrive as text."""


class _HugeInt:
    """A JSON integer too long to be a field of a trace (more than :data:`_MAX_DIGITS`
    digits): kept as its length so that the field's own check names it, instead of
    Python's int conversion failing with a message that names no file, line or field."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self):
        return f"<an integer of {self.digits} digits>"


#: Digits of the longest integer a trace field may hold (a 64-bit id has 20).
_MAX_DIGITS = 24


def _parse_int(text: str):
    return int(text) if len(text) <= _MAX_DIGITS else _HugeInt(text)


def _tokens(where: str, field: str, v, *, low: int = 1) -> int:
    """A token count from CSV text or a JSON number (a JSON string is refused)."""
    if isinstance(v, _CsvText):
        t = v.strip()
        if not (t.isascii() and (t.isdigit() or (t[:1] == "-" and t[1:].isdigit()))):
            raise WorkloadError(f"{where}: field {field!r} must be an integer token count, "
                                f"not {v if len(v) <= 40 else v[:40] + '...'!r}")
        v = _parse_int(t)
    if isinstance(v, _HugeInt):
        raise WorkloadError(f"{where}: field {field!r} is {v!r}, above the {MAX_TOKENS} "
                            "limit")
    if isinstance(v, bool) or not isinstance(v, int):
        raise WorkloadError(f"{where}: field {field!r} must be an integer token count, "
                            f"not {_shown(v)}")
    if v < low:
        raise WorkloadError(f"{where}: field {field!r} must be >= {low}, not {v}")
    if v > MAX_TOKENS:
        raise WorkloadError(f"{where}: field {field!r} is {v} tokens, above the "
                            f"{MAX_TOKENS} limit")
    return v


class _Clock:
    """Arrival times of one trace: finite, >= 0, never going back, first at 0."""

    def __init__(self, path: Path, field: str):
        self.path, self.field = path, field
        self.first = self.prev = None
        self.prev_line = 0

    def __call__(self, line: int, t: float, shown) -> float:
        where = f"{self.path}:{line}"
        if not math.isfinite(t) or t < 0:
            raise WorkloadError(f"{where}: field {self.field!r} must be a finite time >= 0, "
                                f"not {shown!r}")
        if self.prev is not None and t < self.prev:
            raise WorkloadError(f"{where}: field {self.field!r} goes back in time ({shown!r} "
                                f"is before line {self.prev_line}); sort the trace by time")
        if self.first is None:
            self.first = t
        if t - self.first > _MAX_SPAN_S:
            raise WorkloadError(f"{where}: field {self.field!r} is {t - self.first:.3g} s "
                                "after the first arrival; wrong time unit?")
        self.prev, self.prev_line = t, line
        return t - self.first


def _unique_hashes(counter: list, input_tokens: int) -> tuple:
    n = -(-input_tokens // _BLOCK_TOKENS)
    h = tuple(range(counter[0], counter[0] + n))
    counter[0] += n
    return h


def read_mooncake(path) -> Workload:
    """Read a Mooncake JSONL trace; every line is a one-turn session.

    Raises
    ------
    WorkloadError
        ``FILE:LINE: field ...`` for a bad line.
    """
    p = Path(path)
    text = _text(p)
    clock = _Clock(p, "timestamp")
    interned = {}
    turns = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line:
            continue
        where = f"{p}:{lineno}"
        try:
            obj = json.loads(line, parse_int=_parse_int)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{where}: not a JSON object ({e.msg} at column "
                                f"{e.colno})") from None
        except RecursionError:
            raise WorkloadError(f"{where}: JSON nested too deeply to be a trace line (a "
                                "line is one flat object)") from None
        except ValueError as e:  # e.g. a float literal Python cannot convert
            raise WorkloadError(f"{where}: not a JSON object ({' '.join(str(e).split())[:120]})"
                                ) from None
        if not isinstance(obj, dict):
            raise WorkloadError(f"{where}: not a JSON object but a {type(obj).__name__}")
        for field in ("timestamp", "input_length", "output_length", "hash_ids"):
            if field not in obj:
                raise WorkloadError(f"{where}: field {field!r} is missing")
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            raise WorkloadError(f"{where}: field 'timestamp' must be a number of ms, "
                                f"not {_shown(ts)}")
        arrival = clock(lineno, ts / 1000.0, ts)
        n_in = _tokens(where, "input_length", obj["input_length"])
        n_out = _tokens(where, "output_length", obj["output_length"])
        ids = obj["hash_ids"]
        if not isinstance(ids, list):
            raise WorkloadError(f"{where}: field 'hash_ids' must be a list, not {_shown(ids)}")
        need = -(-n_in // MOONCAKE_BLOCK_TOKENS)
        if len(ids) != need:
            raise WorkloadError(f"{where}: field 'hash_ids' has {len(ids)} ids; input_length "
                                f"{n_in} needs ceil({n_in}/{MOONCAKE_BLOCK_TOKENS}) = {need}")
        for h in ids:
            if isinstance(h, bool) or not isinstance(h, int) or h < 0:
                raise WorkloadError(f"{where}: field 'hash_ids' holds {_shown(h)}, not an "
                                    f"integer >= 0 of at most {_MAX_DIGITS} digits")
        # One int object per distinct id: a long trace repeats its shared prefixes often.
        hashes = tuple(interned.setdefault(h, h) for h in ids)
        turns.append(Turn(len(turns), 0, n_in, n_out, hashes, arrival))
    return Workload(p.name, MOONCAKE_BLOCK_TOKENS, tuple(turns))


def _shown(v, limit: int = 60) -> str:
    """``repr`` of a bad value, cut to ``limit`` characters (a damaged field may be huge)."""
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + f"... ({len(r)} characters)"


def _records(p: Path, reader):
    """The records of a csv reader; a malformed one is a one-line WorkloadError naming the
    line it starts on (an unterminated quote swallows the rest of the file into one field,
    which the csv module reports as 'field larger than field limit')."""
    start = 1
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise WorkloadError(f"{p}:{start}: malformed CSV record starting on this line: "
                                f"{e} (a stray '\"' opens a quoted field that runs on to "
                                f"line {reader.line_num})") from None
        yield rec
        start = reader.line_num + 1


def _csv_rows(p: Path, required, optional=()):
    """Yield ``(line, {column: text})`` for the non-blank data rows of a CSV trace."""
    reader = csv.reader(io.StringIO(_text(p)))
    records = _records(p, reader)
    header = None
    for rec in records:
        if any(f.strip() for f in rec):
            header = [f.strip() for f in rec]
            break
    line = reader.line_num
    if header is None:
        raise WorkloadError(f"{p}:1: empty file: no header")
    missing = [c for c in required if c not in header]
    if missing:
        raise WorkloadError(f"{p}:{line}: field {missing[0]!r} is missing from the header "
                            f"({', '.join(header)})")
    cols = {c: header.index(c) for c in (*required, *optional) if c in header}
    width = len(header)
    rows = 0
    for rec in records:
        if not any(f.strip() for f in rec):
            continue
        line = reader.line_num
        if len(rec) != width:
            raise WorkloadError(f"{p}:{line}: {len(rec)} fields, the header has {width}")
        rows += 1
        yield line, {c: _CsvText(rec[i]) for c, i in cols.items()}
    if not rows:
        raise WorkloadError(f"{p}:{line}: no requests after the header")


def read_azure(path) -> Workload:
    """Read an Azure LLM inference trace CSV; every row is a one-turn session.

    Raises
    ------
    WorkloadError
        ``FILE:LINE: field ...`` for a bad row.
    """
    p = Path(path)
    clock = _Clock(p, "TIMESTAMP")
    counter = [0]
    turns = []
    t0 = None
    for line, row in _csv_rows(p, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        where = f"{p}:{line}"
        text = row["TIMESTAMP"].strip()
        try:
            # Python 3.11 reads the trace's 7 fractional digits (truncating the 100 ns one).
            stamp = datetime.fromisoformat(text)
        except ValueError:
            raise WorkloadError(f"{where}: field 'TIMESTAMP' must be a date-time such as "
                                f"2023-11-16 18:15:46.6805900, not {text!r}") from None
        if t0 is None:
            t0 = stamp
        try:
            rel = (stamp - t0).total_seconds()
        except TypeError:
            raise WorkloadError(f"{where}: field 'TIMESTAMP' mixes time zones with the first "
                                f"row: {text!r}") from None
        # The clock sees seconds since the first row; going back shows as a negative time.
        if rel < 0:
            raise WorkloadError(f"{where}: field 'TIMESTAMP' goes back in time ({text!r} is "
                                f"before line {clock.prev_line}); sort the trace by time")
        arrival = clock(line, rel, text)
        n_in = _tokens(where, "ContextTokens", row["ContextTokens"])
        n_out = _tokens(where, "GeneratedTokens", row["GeneratedTokens"])
        turns.append(Turn(len(turns), 0, n_in, n_out, _unique_hashes(counter, n_in), arrival))
    return Workload(p.name, _BLOCK_TOKENS, tuple(turns))


def read_burstgpt(path) -> Workload:
    """Read a BurstGPT CSV; ``Session ID`` (when present) groups rows into sessions.

    Rows whose ``Response tokens`` is 0 (failed requests) are skipped. Without a session
    column every row is a one-turn session. With one, a session's turns keep their own
    arrival times (the trace says when each came), in file order.

    Raises
    ------
    WorkloadError
        ``FILE:LINE: field ...`` for a bad row, or no successful request at all.
    """
    p = Path(path)
    clock = _Clock(p, "Timestamp")
    counter = [0]
    sessions: dict = {}
    last = 0
    for line, row in _csv_rows(p, ("Timestamp", "Request tokens", "Response tokens"),
                               ("Total tokens", "Session ID")):
        where = f"{p}:{line}"
        last = line
        text = row["Timestamp"].strip()
        try:
            ts = float(text)
        except ValueError:
            raise WorkloadError(f"{where}: field 'Timestamp' must be a number of seconds, "
                                f"not {text!r}") from None
        arrival = clock(line, ts, text)
        n_in = _tokens(where, "Request tokens", row["Request tokens"])
        n_out = _tokens(where, "Response tokens", row["Response tokens"], low=0)
        if "Total tokens" in row:
            total = _tokens(where, "Total tokens", row["Total tokens"])
            if total != n_in + n_out:
                raise WorkloadError(f"{where}: field 'Total tokens' is {total}, not Request "
                                    f"+ Response = {n_in + n_out}")
        if n_out == 0:
            continue
        key = row.get("Session ID", "").strip() or ("row", line)
        sessions.setdefault(key, []).append((n_in, n_out, arrival))
    if not sessions:
        raise WorkloadError(f"{p}:{last}: field 'Response tokens' is 0 on every row: no "
                            "successful request")
    turns = []
    for s, reqs in enumerate(sessions.values()):
        for k, (n_in, n_out, arrival) in enumerate(reqs):
            turns.append(Turn(s, k, n_in, n_out, _unique_hashes(counter, n_in), arrival))
    return Workload(p.name, _BLOCK_TOKENS, tuple(turns))


_READERS = {"mooncake": read_mooncake, "azure": read_azure, "burstgpt": read_burstgpt}


def _sniff(p: Path) -> str:
    if p.suffix.lower() in (".jsonl", ".json"):
        return "mooncake"
    head = _text(p).lstrip()[:4096]
    if head.startswith("{"):
        return "mooncake"
    reader = csv.reader(io.StringIO(head))
    first = next(_records(p, reader), [])
    names = {f.strip() for f in first}
    if "ContextTokens" in names:
        return "azure"
    if "Request tokens" in names:
        return "burstgpt"
    raise WorkloadError(f"{p}:1: not a known trace format (header {', '.join(first)!s}); "
                        f"give the format: one of {', '.join(FORMATS)}")


def read_trace(path, format: str | None = None) -> Workload:
    """Read a trace file of a named format, or one sniffed from its extension and header.

    Parameters
    ----------
    path : str or Path
        The trace file.
    format : str or None
        One of :data:`FORMATS`; ``None``: ``.jsonl``/``.json`` or a line starting ``{`` is
        Mooncake, a CSV header with ``ContextTokens`` Azure, with ``Request tokens`` BurstGPT.

    Raises
    ------
    WorkloadError
        Unknown format, or a bad file (``FILE:LINE: field ...``).
    """
    p = Path(path)
    if format is None:
        format = _sniff(p)
    if format not in _READERS:
        raise WorkloadError(f"unknown trace format {format!r}; expected one of "
                            f"{', '.join(FORMATS)}")
    return _READERS[format](p)


def sample_path(format: str):
    """The packaged sample trace of a format, as an ``importlib.resources`` traversable."""
    if format not in SAMPLES:
        raise WorkloadError(f"no sample trace for {format!r}; expected one of "
                            f"{', '.join(SAMPLES)}")
    return resources.files("hbfsim.serve").joinpath("data", SAMPLES[format])


def _value(spec: str, key: str, text: str):
    t = text.strip()
    if t.lower() == "none":
        return None
    if "/" in t:
        return tuple(_value(spec, key, x) for x in t.split("/"))
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    raise WorkloadError(f"workload {spec!r}: parameter {key!r} must be a number, "
                        f"median/sigma or none, not {text!r}")


def _closed_loop_params(spec: str, params: str, names) -> dict:
    """``key=value`` pairs of a closed-loop spec: every name of ``names`` once, integers."""
    kw = {}
    for item in filter(None, (x.strip() for x in params.split(","))):
        key, eq, val = (x.strip() for x in item.partition("="))
        if not eq or not key:
            raise WorkloadError(f"workload {spec!r}: parameter {item!r} must be key=value")
        if key not in names:
            raise WorkloadError(f"workload {spec!r}: unknown parameter {key!r}; expected "
                                f"{', '.join(names)}")
        try:
            kw[key] = int(val)
        except ValueError:
            kw[key] = None
        if kw[key] is None or kw[key] < 1:
            raise WorkloadError(f"workload {spec!r}: parameter {key!r} must be an integer "
                                f">= 1, not {val!r}")
    missing = [k for k in names if k not in kw]
    if missing:
        raise WorkloadError(f"workload {spec!r}: missing parameter {missing[0]!r} "
                            f"(needs {', '.join(names)})")
    return kw


def load_workload(spec, *, format: str | None = None) -> Workload:
    """The workload a CLI argument names: a trace file, a packaged sample or a preset.

    Parameters
    ----------
    spec : str or Path
        - a path to a trace file (format from ``format`` or sniffed, :func:`read_trace`);
        - ``sample-mooncake``, ``sample-azure``, ``sample-burstgpt``: the packaged samples;
        - ``PRESET[:key=value,...]``: a generator preset of ``hbfsim.serve.agentic``
          (``agentic-qwen32b``, ``agentic-100k``, ``agentic-500k``) with ``scale``, ``seed``
          and any :func:`~hbfsim.serve.agentic.generate` keyword; a (median, sigma) pair
          is written ``median/sigma``, ``None`` as ``none``. Example:
          ``agentic-qwen32b:scale=0.01,seed=3,think_s=5/0.5``;
        - ``closed-loop:users=N,requests=R,input=I,output=O``: a fixed-concurrency client
          (:mod:`hbfsim.serve.closed_loop`), every parameter required.
    format : str or None
        Trace format for a path (ignored otherwise).

    Returns
    -------
    Workload
        Already validated.

    Raises
    ------
    WorkloadError
        One line naming the file and line, or the spec and its parameter.
    """
    from hbfsim.serve import closed_loop as cl
    from hbfsim.serve.agentic import PRESETS, preset

    text = str(spec)
    name, _, params = text.partition(":")
    if not isinstance(spec, Path) and name == cl.NAME:
        return cl.closed_loop(**_closed_loop_params(text, params, cl.PARAMS))
    # Names first (a file called like a preset is reached as ./NAME), then files.
    if not isinstance(spec, Path) and name.startswith("sample-") and not params:
        with ExitStack() as stack:
            path = stack.enter_context(resources.as_file(sample_path(name[7:])))
            return read_trace(path, name[7:]).validate()
    if isinstance(spec, Path) or name not in PRESETS and Path(text).exists():
        return read_trace(text, format).validate()
    if name not in PRESETS:
        raise WorkloadError(f"workload {text!r}: no such trace file, and not a preset "
                            f"({', '.join(PRESETS)}), {cl.NAME}:... or sample "
                            f"({', '.join('sample-' + f for f in SAMPLES)})")
    kw = {}
    for item in filter(None, (x.strip() for x in params.split(","))):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise WorkloadError(f"workload {text!r}: parameter {item!r} must be key=value")
        kw[key] = _value(text, key, val)
    return preset(name, **kw).validate()
