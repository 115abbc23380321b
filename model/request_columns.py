"""Columnar, streaming reader of request CSVs: numpy over 4 MiB blocks of the file.

A 10-million-line request CSV is parsed, checked and ordered in seconds and a few hundred
MB (bench/bench_csv.py), instead of minutes and gigabytes of Python objects. The parser
handles the plain form of the format (ASCII, unquoted fields, ``\\n`` or ``\\r\\n`` line ends,
blank lines, spaces around fields, decimal or ``0x`` hex integers); anything else (quoted
fields, a bare ``\\r``, bytes outside ASCII) makes :func:`parse_columns` return ``None`` and
the exact row-by-row reader in :mod:`hbfsim.model.requests` reads the whole file. A line the
columnar parser cannot accept is handed to that reader's row check, so both report the same
one-line error; the columnar parser never accepts a line that the row reader refuses.
"""

from __future__ import annotations

import numpy as np

from hbfsim.config import MAX_TICK, PAGE_BYTES, HbfConfig

__all__ = ["Columns", "parse_columns"]

_BLOCK = 1 << 22  # 4 MiB: smaller blocks keep the per-block temporaries (and the heap) small
_SPACE = (32, 9, 13)  # space, tab, CR (of a CRLF line end)


class Columns:
    """The requests of a CSV file as numpy columns, in data-line order.

    Members
    -------
    tick, addr : numpy.ndarray
        int64 arrival ticks, uint64 byte addresses.
    write : numpy.ndarray
        bool, True for ``W``.
    nbytes, source : numpy.ndarray
        uint16 sizes, uint32 source sub-partitions.
    """

    def __init__(self, tick, write, addr, nbytes, source):
        self.tick, self.write, self.addr, self.nbytes, self.source = \
            tick, write, addr, nbytes, source

    def __len__(self):
        return len(self.tick)



#: Bytes the fast path leaves to the row reader: a quote (quoted fields), non-ASCII (the row
#: reader decodes and names the line), NUL (a binary file).
_SPECIAL = np.zeros(256, bool)
_SPECIAL[34] = True
_SPECIAL[128:] = True
_SPECIAL[0] = True


def line_blocks(fh, block: int | None = None):
    """Yield the bytes of ``fh`` in blocks of whole lines, as uint8 arrays (about ``block``
    bytes each, default ``_BLOCK`` read at call time; the last line gets a newline if it
    lacks one).

    Yields ``None`` and stops at the first block the columnar readers must leave to the row
    reader: one holding a quote, a non-ASCII byte, a NUL, or a bare CR (which ends a record
    for the csv module). Shared by the request-CSV and trace readers.
    """
    block = _BLOCK if block is None else block
    carry = b""
    while True:
        chunk = fh.read(block)
        data = carry + chunk
        if not chunk:
            if not data:
                return
            if not data.endswith(b"\n"):
                data += b"\n"
            carry = b""
        else:
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            if not data:
                continue
        b = np.frombuffer(data, np.uint8)
        if _SPECIAL[b].any():
            yield None
            return
        cr = np.flatnonzero(b == 13)
        if len(cr) and (b[np.minimum(cr + 1, len(b) - 1)] != 10).any():
            yield None
            return
        yield b
        if not chunk:
            return

def _trim(b: np.ndarray, s: np.ndarray, e: np.ndarray):
    """Move span starts/ends past spaces, tabs and CRs (a few passes: fields are short)."""
    space = np.zeros(256, bool)
    space[list(_SPACE)] = True
    for _ in range(64):
        m = (s < e) & space[b[np.minimum(s, len(b) - 1)]]
        if not m.any():
            break
        s = s + m
    for _ in range(64):
        m = (s < e) & space[b[np.maximum(e - 1, 0)]]
        if not m.any():
            break
        e = e - m
    return s, e


#: Bytes that make a line more than a blank line (blank and comma-only lines are skipped).
_CONTENT = np.ones(256, bool)
_CONTENT[[32, 9, 13, 44, 10]] = False

_DIGIT = np.full(256, 255, np.uint8)
_DIGIT[48:58] = np.arange(10)
_DIGIT[97:103] = np.arange(10, 16)
_DIGIT[65:71] = np.arange(10, 16)


def _ints(b: np.ndarray, s: np.ndarray, e: np.ndarray):
    """Parse the spans ``b[s:e]`` as decimal or 0x-hex integers: ``(values, ok)``.

    Decimal up to 19 digits and hex up to 16 digits fit uint64; anything longer, empty,
    signed or with a stray character is not ok (the row reader then names the problem)."""
    last = len(b) - 1
    n = e - s
    hexm = (n > 2) & (b[np.minimum(s, last)] == 48) & \
        ((b[np.minimum(s + 1, last)] | 32) == 120)
    ds = s + 2 * hexm
    n = e - ds
    base = np.where(hexm, 16, 10).astype(np.uint64)
    ok = (n > 0) & (n <= np.where(hexm, 16, 19))
    val = np.zeros(len(s), np.uint64)
    top = int(n[ok].max()) if ok.any() else 0
    for k in range(top):
        m = ok & (k < n)
        d = _DIGIT[b[ds[m] + k]]
        bad = d >= base[m]
        if bad.any():
            idx = np.flatnonzero(m)[bad]
            ok[idx] = False
            m[idx] = False
            d = _DIGIT[b[ds[m] + k]]
        val[m] = val[m] * base[m] + d.astype(np.uint64)
    return val, ok


def _block(b: np.ndarray, cfg: HbfConfig):
    """Parse one block of complete lines: ``(columns, n_lines, first_bad_line or None)``;
    ``columns`` holds the rows before the first bad line (all rows when none is bad)."""
    isnl = b == 10
    nl = np.flatnonzero(isnl)
    nlines = len(nl)
    starts = np.empty(nlines, np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    # per-line counts by segment reductions over the line starts (no per-byte search)
    iscomma = b == 44
    commas = np.flatnonzero(iscomma)
    ncomma = np.add.reduceat(iscomma, starts, dtype=np.int32)
    has = np.logical_or.reduceat(_CONTENT[b], starts)
    line_of_comma = np.repeat(np.arange(nlines), ncomma)  # commas come in line order
    bad_line = has & (ncomma != 4)
    good = has & (ncomma == 4)
    c = commas[good[line_of_comma]].reshape(-1, 4)
    st, en = starts[good], nl[good]
    spans = [(st, c[:, 0]), (c[:, 0] + 1, c[:, 1]), (c[:, 1] + 1, c[:, 2]),
             (c[:, 2] + 1, c[:, 3]), (c[:, 3] + 1, en)]
    spans = [_trim(b, s, e) for s, e in spans]
    tick, ok0 = _ints(b, *spans[0])
    addr, ok2 = _ints(b, *spans[2])
    nbytes, ok3 = _ints(b, *spans[3])
    source, ok4 = _ints(b, *spans[4])
    os_, oe = spans[1]
    opc = b[np.minimum(os_, len(b) - 1)] | 32
    okop = (oe - os_ == 1) & ((opc == 114) | (opc == 119))
    base, limit = cfg.base_address, cfg.base_address + cfg.capacity_bytes
    with np.errstate(over="ignore"):
        off = (addr - np.uint64(base)) % np.uint64(PAGE_BYTES)
    ok = (ok0 & ok2 & ok3 & ok4 & okop & (tick <= MAX_TICK) & (source <= (1 << 32) - 1)
          & (addr >= np.uint64(base)) & (addr < np.uint64(limit)) & (nbytes >= 1)
          & (nbytes <= PAGE_BYTES) & (off + nbytes <= PAGE_BYTES))
    good_idx = np.flatnonzero(good)
    bad_line[good_idx[~ok]] = True
    first_bad = int(np.argmax(bad_line)) if bad_line.any() else None
    keep = slice(None) if first_bad is None else slice(0, int(np.searchsorted(good_idx,
                                                                               first_bad)))
    cols = (tick[keep].astype(np.int64), (opc == 119)[keep], addr[keep],
            nbytes[keep].astype(np.uint16), source[keep].astype(np.uint32))
    return cols, nlines, first_bad, starts, nl


def parse_columns(fh, cfg: HbfConfig, first_line: int, check_line):
    """Parse the data lines of an open binary file ``fh`` positioned after the header.

    Parameters
    ----------
    fh : binary file
    cfg : HbfConfig
        For the address range.
    first_line : int
        Line number of the first data line (2 after the header).
    check_line : callable
        ``check_line(lineno, text)``: the row reader's check of one line; raises its
        InputError for a bad line.

    Returns
    -------
    Columns or None
        None when the file needs the row reader (quoted fields, a bare CR, non-ASCII).
    """
    parts = []
    line0 = first_line
    for b in line_blocks(fh):
        if b is None:
            return None
        cols, nlines, first_bad, starts, nl = _block(b, cfg)
        if first_bad is not None:
            text = bytes(b[starts[first_bad]:nl[first_bad]]).decode("ascii")
            check_line(line0 + first_bad, text)
            return None  # the row reader accepts what this parser did not: let it read all
        parts.append(cols)
        line0 += nlines
    if not parts:
        e = np.empty(0, np.int64)
        return Columns(e, e.astype(bool), e.astype(np.uint64), e.astype(np.uint16),
                       e.astype(np.uint32))
    return Columns(*(np.concatenate([p[i] for p in parts]) for i in range(5)))
