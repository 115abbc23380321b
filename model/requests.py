"""Open-loop request sources: the CSV request file and the embedded default workload.

CSV format (issue 2 item 6): header ``tick,op,address,bytes,source``; arrival in controller
ticks, ``R`` or ``W``, byte address in decimal or 0x-hex, size in bytes, source memory
sub-partition. Request ids are the 0-based data-line order. Rows may come in any tick order;
they are presented in (tick, line) order. Write data is not in the file: a write of request
``id`` stores the byte ``id mod 256`` in every position, so that a later read shows which
write it observes (DESIGN-NOTES §5).
"""

from __future__ import annotations

import csv
from pathlib import Path

from hbfsim.config import MAX_TICK, PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.mapping import AddressError, Mapper

__all__ = ["CSV_HEADER", "InputError", "default_workload", "load_requests_csv", "parse_int",
           "write_pattern"]

CSV_HEADER = ["tick", "op", "address", "bytes", "source"]
#: Largest value of each integer field (ticks: hbfsim.config.MAX_TICK; the address and size
#: are then checked against the configured range by the mapper).
_FIELD_MAX = {"tick": MAX_TICK, "address": (1 << 64) - 1, "bytes": PAGE_BYTES,
              "source": (1 << 32) - 1}


class InputError(ValueError):
    """Bad input file; the message names the file, line and field."""


def parse_int(text: str) -> int:
    t = text.strip()
    if t.lower().startswith("0x"):
        return int(t[2:], 16)
    if not t or not (t.isdigit() or (t[0] == "-" and t[1:].isdigit())):
        raise ValueError(text)
    return int(t)


def write_pattern(req_id: int, nbytes: int) -> bytes:
    """The data a CSV/workload write stores: its id's low byte, repeated."""
    return bytes([req_id & 0xFF]) * nbytes


def load_requests_csv(path: str | Path, cfg: HbfConfig) -> list[Request]:
    """Read and validate a request CSV file.

    Raises
    ------
    InputError
        Unreadable file, wrong header, or a bad field (message names line and field).
    """
    p = Path(path)
    mapper = Mapper(cfg)
    try:
        fh = p.open(newline="")
    except OSError as e:
        raise InputError(f"cannot read requests {str(p)!r}: {e.strerror}") from None
    rows = []
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{p}: empty file; expected header {','.join(CSV_HEADER)}")
        if [h.strip() for h in header] != CSV_HEADER:
            raise InputError(f"{p} line 1: header must be {','.join(CSV_HEADER)}, "
                             f"not {','.join(header)}")
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 5:
                raise InputError(f"{p} line {lineno}: expected 5 fields, found {len(row)}")
            vals = []
            for name, text in zip(("tick", "address", "bytes", "source"),
                                  (row[0], row[2], row[3], row[4])):
                try:
                    v = parse_int(text)
                except ValueError:
                    raise InputError(f"{p} line {lineno}: {name} {text.strip()!r} is not a "
                                     "decimal or 0x-hex integer") from None
                if v < 0:
                    raise InputError(f"{p} line {lineno}: {name} must be non-negative, "
                                     f"not {v}")
                if v > _FIELD_MAX[name]:
                    raise InputError(f"{p} line {lineno}: {name} {text.strip()} is larger "
                                     f"than {_FIELD_MAX[name]}")
                vals.append(v)
            tick, addr, nbytes, source = vals
            op = row[1].strip().upper()
            if op not in ("R", "W"):
                raise InputError(f"{p} line {lineno}: op must be R or W, not {row[1]!r}")
            try:
                mapper.check(addr, nbytes)
            except AddressError as e:
                raise InputError(f"{p} line {lineno}: {e}") from None
            rows.append((tick, len(rows), op, addr, nbytes, source))
    rows.sort(key=lambda r: (r[0], r[1]))
    out = []
    for tick, rid, op, addr, nbytes, source in rows:
        data = write_pattern(rid, nbytes) if op == "W" else None
        out.append(Request(rid, op, addr, nbytes, source, tick, data))
    return out


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
