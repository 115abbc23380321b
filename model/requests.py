"""Open-loop request sources: the CSV request file and the embedded default workload.

CSV format (issue 2 item 6): header ``tick,op,address,bytes,source``; arrival in controller
ticks, ``R`` or ``W``, byte address in decimal or 0x-hex, size in bytes, source memory
sub-partition. Request ids are the 0-based data-line order. Rows may come in any tick order;
they are presented in (tick, line) order. Write data is not in the file: a write of request
``id`` stores the byte ``id mod 256`` in every position, so that a later read shows which
write it observes (docs/model.md, functional data).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from hbfsim.config import MAX_TICK, PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.mapping import AddressError, Mapper
from hbfsim.model.request_columns import Columns

__all__ = ["CSV_HEADER", "InputError", "RequestList", "default_workload", "load_requests_csv",
           "parse_int", "write_pattern"]

CSV_HEADER = ["tick", "op", "address", "bytes", "source"]
#: Largest value of each integer field (ticks: hbfsim.config.MAX_TICK; the address and size
#: are then checked against the configured range by the mapper).
_FIELD_MAX = {"tick": MAX_TICK, "address": (1 << 64) - 1, "bytes": PAGE_BYTES,
              "source": (1 << 32) - 1}


class InputError(ValueError):
    """Bad input file; the message names the file, line and field."""


_HEX = frozenset("0123456789abcdefABCDEF")


def parse_int(text: str) -> int:
    """A decimal or 0x-hex integer (ASCII digits only, optional ``-`` for decimal, at most
    64 digits); raises ValueError otherwise."""
    t = text.strip()
    if t.lower().startswith("0x"):
        digits = t[2:]
        if not digits or len(digits) > 64 or not all(c in _HEX for c in digits):
            raise ValueError(text)  # int() alone would take "0x_ff" and "0x-5"
        return int(digits, 16)
    if len(t) > 64:
        raise ValueError(text)
    if not t or not t.isascii() or not (t.isdigit() or (t[0] == "-" and t[1:].isdigit())):
        raise ValueError(text)
    return int(t)


def write_pattern(req_id: int, nbytes: int) -> bytes:
    """The data a CSV/workload write stores: its id's low byte, repeated."""
    return bytes([req_id & 0xFF]) * nbytes


class RequestList:
    """The requests of a CSV file, held as numpy columns and presented in (tick, line) order.

    Iterating yields fresh :class:`Request` objects lazily (a block at a time), so ten
    million requests cost their columns, not ten million objects; ``len``, indexing and
    slicing work as on a list (in presentation order).
    """

    _STEP = 1 << 16

    def __init__(self, cols, ids=None):
        self.cols = cols
        self.ids = ids  # request ids; None = the data-line order
        # stable: equal ticks keep their line order
        self.order = np.argsort(cols.tick, kind="stable")

    def __len__(self):
        return len(self.order)

    def _make(self, idx):
        c = self.cols
        out = []
        rids = idx if self.ids is None else self.ids[idx]
        for rid, t, w, a, n, src in zip(rids.tolist(), c.tick[idx].tolist(),
                                        c.write[idx].tolist(), c.addr[idx].tolist(),
                                        c.nbytes[idx].tolist(), c.source[idx].tolist()):
            out.append(Request(rid, "W" if w else "R", a, n, src, t,
                               write_pattern(rid, n) if w else None))
        return out

    def __iter__(self):
        for i in range(0, len(self.order), self._STEP):
            yield from self._make(self.order[i:i + self._STEP])

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._make(self.order[key])
        return self._make(self.order[[key]])[0]


def _check_row(p, lineno: int, row: list, mapper: Mapper):
    """One data row: ``(tick, write, addr, nbytes, source)``, or None for a blank row.

    Raises
    ------
    InputError
        Naming the file, line and field.
    """
    if not row or all(not c.strip() for c in row):
        return None
    if len(row) != 5:
        raise InputError(f"{p} line {lineno}: expected 5 fields, found {len(row)}")
    vals = []
    for name, text in zip(("tick", "address", "bytes", "source"),
                          (row[0], row[2], row[3], row[4])):
        try:
            v = parse_int(text)
        except ValueError:
            raise InputError(f"{p} line {lineno}: {name} {text.strip()[:40]!r} is not a "
                             "decimal or 0x-hex integer") from None
        if v < 0:
            raise InputError(f"{p} line {lineno}: {name} must be non-negative, not {v}")
        if v > _FIELD_MAX[name]:
            raise InputError(f"{p} line {lineno}: {name} {text.strip()[:40]} is larger "
                             f"than {_FIELD_MAX[name]}")
        vals.append(v)
    tick, addr, nbytes, source = vals
    op = row[1].strip().upper()
    if op not in ("R", "W"):
        raise InputError(f"{p} line {lineno}: op must be R or W, not {row[1][:40]!r}")
    try:
        mapper.check(addr, nbytes)
    except AddressError as e:
        raise InputError(f"{p} line {lineno}: {e}") from None
    return tick, op == "W", addr, nbytes, source


def _check_header(p, header) -> None:
    if header is None:
        raise InputError(f"{p}: empty file; expected header {','.join(CSV_HEADER)}")
    if [h.strip() for h in header] != CSV_HEADER:
        raise InputError(f"{p} line 1: header must be {','.join(CSV_HEADER)}, "
                         f"not {','.join(header)[:80]}")


def _read_rows(p, text: str, mapper: Mapper) -> Columns:
    """The exact row-by-row reader (the csv module): quoted fields, bare CRs, any UTF-8."""
    reader = csv.reader(io.StringIO(text, newline=""))
    ticks, writes, addrs, sizes, sources = [], [], [], [], []
    try:
        _check_header(p, next(reader, None))
        for lineno, row in enumerate(reader, start=2):
            r = _check_row(p, lineno, row, mapper)
            if r is not None:
                for col, v in zip((ticks, writes, addrs, sizes, sources), r):
                    col.append(v)
    except csv.Error as e:
        raise InputError(f"{p} line {reader.line_num}: not CSV: {e}") from None
    return Columns(np.array(ticks, np.int64), np.array(writes, bool),
                   np.array(addrs, np.uint64), np.array(sizes, np.uint16),
                   np.array(sources, np.uint32))


def load_requests_csv(path: str | Path, cfg: HbfConfig) -> RequestList:
    """Read and validate a request CSV file (columnar and streaming: see
    :mod:`hbfsim.model.request_columns`).

    Returns
    -------
    RequestList
        The requests in (tick, line) order; ids are the 0-based data-line order.

    Raises
    ------
    InputError
        Unreadable file, wrong header, or a bad field (message names line and field).
    """
    from hbfsim.model.request_columns import parse_columns
    from hbfsim.textfile import decode, open_csv

    p = Path(path)
    mapper = Mapper(cfg)
    fh, head, plain = open_csv(p, "requests", InputError)
    with fh:
        cols = None
        if plain:
            _check_header(p, next(csv.reader([head.decode("ascii")]), None) if head else None)

            def check_line(lineno, text):
                _check_row(p, lineno, next(csv.reader([text]), []), mapper)

            cols = parse_columns(fh, cfg, 2, check_line)
        if cols is None:
            fh.seek(0)
            cols = _read_rows(p, decode(fh.read(), p, InputError), mapper)
    return RequestList(cols)


def default_workload(cfg: HbfConfig) -> list[Request]:
    """The embedded mixed read/write workload of ``hbfsim run`` (a few hundred requests).

    It shows, in order: 16 pages each read by 32 sector requests at once (one page read and
    31 MSHR hits each); four pages written as 128 B stores in shuffled order with some
    fragments repeated (coverage union, full-page PROGRAMs, acknowledgements after PROGRAM);
    one page written only half (a strict-policy incomplete-page error); and the first 16
    pages read again after their MSHRs closed (NAND page-buffer hits).
    """
    B = cfg.base_address
    reqs: list[Request] = []
    t = 0

    def add(op, addr, n, tick, src):
        rid = len(reqs)
        data = write_pattern(rid, n) if op == "W" else None
        reqs.append(Request(rid, op, addr, n, src, tick, data))

    for page in range(16):
        for k in range(32):
            add("R", B + page * PAGE_BYTES + 32 * ((k * 37) % 128), 32, t, k % 8)
            t += 1
    wbase = 1024
    for page in range(4):
        order = [(j * 13) % 32 for j in range(32)]
        order[5:5] = [order[0], order[1]]  # repeated fragments: no extra coverage
        for j in order:
            add("W", B + (wbase + page) * PAGE_BYTES + 128 * j, 128, t, page)
            t += 1
    for j in range(16):  # half a page: incomplete at its deadline
        add("W", B + (wbase + 8) * PAGE_BYTES + 128 * j, 128, t, 7)
        t += 1
    t += 30000
    for page in range(16):
        add("R", B + page * PAGE_BYTES, 64, t, 0)
        t += 1
    return reqs
