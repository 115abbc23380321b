"""Bad traces through `trace validate` and `replay`, and odd traces that are valid
(tests/bad_input/harness.py)."""

from __future__ import annotations

import pytest

from hbfsim.cli import main
from tests.bad_input.harness import ROW, _case, _run


# ---------------------------------------------------------------- traces
@pytest.fixture(scope="module")
def good_traces(tmp_path_factory):
    """Level-1 and level-2 traces of the default run, as lists of rows (lists of fields)."""
    d = tmp_path_factory.mktemp("traces")
    out = {}
    for level in (1, 2):
        p = d / f"t{level}.csv"
        assert main(["run", "--trace", str(p), "--trace-level", str(level)]) == 0
        lines = p.read_text().splitlines()
        out[level] = (lines[0], [ln.split(",") for ln in lines[1:]])
    return out


C = {name: i for i, name in enumerate(
    ["sim_cycle", "request_id", "source_subpartition", "op", "address", "page", "channel",
     "subarray", "state", "bytes", "queue_depth", "latency", "cache_hit", "mshr_hit",
     "error"])}


def _set(row_index, col, value):
    def f(rows):
        rows[row_index][C[col]] = value(rows[row_index][C[col]]) if callable(value) else value
        return rows
    return f


def _first(state, op=None):
    def find(rows):
        return next(i for i, r in enumerate(rows) if r[C["state"]] == state
                    and (op is None or r[C["op"]] == op))
    return find


def _at(find, col, value):
    def f(rows):
        i = find(rows)
        rows[i][C[col]] = value(rows[i][C[col]]) if callable(value) else value
        return rows
    return f


def _drop(find):
    def f(rows):
        del rows[find(rows)]
        return rows
    return f


def _dup(find):
    def f(rows):
        i = find(rows)
        rows.insert(i + 1, list(rows[i]))
        return rows
    return f


def _swap_first_two(rows):
    rows[0], rows[1] = rows[1], rows[0]
    return rows


def _other_page_same_channel(rows):
    # give a request of another page the channel of page 0's first row, but keep its page
    page0 = rows[0]
    for r in rows:
        if r[C["page"]] == page0[C["page"]]:
            r[C["channel"]] = str(int(page0[C["channel"]]) + 1)
            break
    return rows


TRACE_BAD = [
    # (level, mutation, match)
    (1, _at(_first("Completed"), "latency", "-5"), r"latency must be non-negative"),
    (1, _at(_first("Ingress"), "latency", lambda v: str(int(v) + 1)),
     r"latency 1 exceeds its cycle 0"),
    (1, _at(_first("Completed"), "latency", lambda v: str(int(v) + 7)), r"implies arrival"),
    (1, _at(_first("Ingress"), "bytes", "0"), r"bytes 0 .* must be 1\.\."),
    (1, _at(_first("Ingress"), "bytes", "5000"), r"bytes 5000"),
    (1, _at(_first("Completed"), "bytes", "64"), r"bytes|differs"),
    (1, _at(_first("Ingress"), "address", "0x10"), r"address 0x10 is outside the HBF range"),
    (1, _at(_first("Ingress"), "address", "0xc000000000"), r"outside the HBF range"),
    (1, _at(_first("Completed"), "address", lambda v: hex(int(v, 16) + 32)),
     r"address .* differs"),
    (1, _at(_first("Completed"), "op", lambda v: "W" if v == "R" else "R"), r"op .* differs"),
    (1, _at(_first("Completed"), "source_subpartition", "99"),
     r"source_subpartition 99 at Completed differs"),
    (1, _at(_first("Ingress"), "page", "123456"), r"page 123456 is not the page of address"),
    (1, _drop(_first("Ingress")), r"has no Ingress row"),
    (1, _drop(_first("Completed")), r"has no Completed row"),
    (1, _dup(_first("Ingress")), r"Ingress row repeated"),
    (1, _dup(_first("Completed")), r"Completed row repeated"),
    (1, _swap_first_two, r"Ingress row after Completed|out of order"),
    (1, _at(_first("Completed"), "sim_cycle", "0"), r"earlier than|implies arrival"),
    (1, _at(_first("Ingress"), "cache_hit", "2"), r"cache_hit must be 0 or 1, not 2"),
    (1, _at(_first("Ingress"), "mshr_hit", "-1"), r"mshr_hit must be non-negative"),
    (1, _at(_first("Ingress"), "error", "1"), r"error is set on a Ingress row"),
    (1, _at(_first("Completed"), "error", "3"), r"error must be 0 or 1"),
    (1, _at(_first("Ingress"), "queue_depth", "-1"), r"queue_depth must be non-negative"),
    (1, _at(_first("Ingress"), "request_id", "-3"), r"request_id must be non-negative"),
    (1, _at(_first("Ingress"), "channel", "-1"), r"channel must be non-negative"),
    (1, _at(_first("Ingress"), "sim_cycle", "4611686018427387904"), r"sim_cycle .* larger"),
    (1, _other_page_same_channel, r"one channel per page"),
    (1, lambda rows: rows[:0], r"no rows"),
    (1, _at(_first("Ingress"), "state", "Teleported"), r"state 'Teleported' is not one of"),
    (1, _at(_first("Ingress"), "state", "ingress"), r"state 'ingress' is not one of"),
    (1, _at(_first("Ingress"), "op", "X"), r"op must be R or W, not 'X'"),
    (1, _at(_first("Ingress"), "address", "zz"), r"address 'zz' is not an integer"),
    (1, _at(_first("Ingress"), "latency", "1.5"), r"latency '1.5' is not an integer"),
    (1, _at(_first("Ingress"), "bytes", ""), r"bytes '' is not an integer"),
    (1, lambda rows: [r[:-1] for r in rows], r"line 2: expected 15 fields, found 14"),
    (1, lambda rows: rows[:3] + [rows[3] + ["x"]] + rows[4:], r"line 5: expected 15 fields"),
    (2, _drop(_first("Mapped")), r"lacks its Mapped row"),
    (2, _drop(_first("Return")), r"lacks its Return row"),
    (2, _drop(_first("Buffered", "W")), r"lacks its Buffered row"),
    (2, _dup(_first("MediaOp")), r"MediaOp row repeated"),
    (2, _dup(_first("Queued")), r"Queued row repeated"),
    (2, _at(_first("Mapped"), "sim_cycle", lambda v: str(int(v) - 1_000_000)),
     r"latency .* implies arrival|earlier than|non-negative"),
    (2, _at(_first("Return"), "address", lambda v: hex(int(v, 16) + 64)), r"differs"),
    (2, _at(_first("Mapped"), "error", "1"), r"error is set on a Mapped row"),
    (2, lambda rows: [r for r in rows if not (r[C["request_id"]] == "0"
                                              and r[C["state"]] not in ("Ingress",
                                                                        "Completed"))],
     r"mixes level-1 and level-2"),
]


@pytest.mark.parametrize("level,mutate,match", TRACE_BAD,
                         ids=[f"L{c[0]}-{i}" for i, c in enumerate(TRACE_BAD)])
@pytest.mark.parametrize("cmd", ["validate", "replay"])
def test_bad_trace(tmp_path, monkeypatch, capsys, good_traces, level, mutate, match, cmd):
    header, rows = good_traces[level]
    rows = mutate([list(r) for r in rows])
    text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    argv = (["trace", "validate", "tr.csv"] if cmd == "validate"
            else ["replay", "tr.csv", "--trace", "out.csv", "--stats-json", "s.json"])
    _case(tmp_path, monkeypatch, capsys, argv, {"tr.csv": text}, match)


TRACE_HEADER_BAD = [
    ("", r"empty file; expected the hbf-trace-v1 header"),
    ("sim_cycle,request_id\n", r"missing column\(s\) source_subpartition"),
    ("sim_cycle,request_id,source_subpartition,op,address,page,channel,subarray,state,bytes,"
     "queue_depth,latency,cache_hit,mshr_hit,error,extra\n", r"unexpected column\(s\) extra"),
    ("request_id,sim_cycle,source_subpartition,op,address,page,channel,subarray,state,bytes,"
     "queue_depth,latency,cache_hit,mshr_hit,error\n", r"column 1 is 'request_id'.*reordered"),
    ("tick,op,address,bytes,source\n" + ROW, r"not hbf-trace-v1: missing column"),
]


@pytest.mark.parametrize("text,match", TRACE_HEADER_BAD)
@pytest.mark.parametrize("cmd", [["trace", "validate", "tr.csv"], ["replay", "tr.csv"]])
def test_bad_trace_header(tmp_path, monkeypatch, capsys, text, match, cmd):
    _case(tmp_path, monkeypatch, capsys, cmd, {"tr.csv": text}, match)


def test_bad_trace_bytes(tmp_path, monkeypatch, capsys, good_traces):
    header, rows = good_traces[1]
    text = (header + "\n" + ",".join(rows[0]) + "\n").encode() + b"\xff\xfe\n"
    _case(tmp_path, monkeypatch, capsys, ["trace", "validate", "tr.csv"], {"tr.csv": text},
          r"tr.csv line 3: not UTF-8 text")


@pytest.mark.parametrize("variant", ["crlf", "blank lines", "spaces in header"])
def test_odd_trace_is_accepted(tmp_path, monkeypatch, capsys, good_traces, variant):
    header, rows = good_traces[1]
    body = [",".join(r) for r in rows]
    if variant == "crlf":
        text = "\r\n".join([header] + body) + "\r\n"
    elif variant == "blank lines":
        text = "\n".join([header, ""] + body[:10] + [""] + body[10:]) + "\n\n"
    else:
        text = "\n".join([header.replace(",", ", ")] + body) + "\n"
    for argv in (["trace", "validate", "tr.csv"], ["replay", "tr.csv"]):
        rc, _, err, _, _ = _run(tmp_path, monkeypatch, capsys, argv, {"tr.csv": text})
        assert rc == 0 and err == "", err

