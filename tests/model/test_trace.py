"""hbf-trace-v1: writer levels, strict reader, device-only replay."""

import pytest

from hbfsim.config import load_config
from hbfsim.model.requests import InputError, default_workload
from hbfsim.model.system import HbfSystem
from hbfsim.model.trace import COLUMNS, TraceWriter, read_trace, replay_requests


def _write(tmp_path, level):
    cfg = load_config()
    path = tmp_path / f"t{level}.csv"
    tw = TraceWriter(path, level)
    system = HbfSystem(cfg, trace=tw)
    system.run_requests(default_workload(cfg))
    tw.close()
    return cfg, path, system


def test_levels_and_states(tmp_path):
    cfg, p1, system = _write(tmp_path, 1)
    rows = read_trace(p1)
    assert {r["state"] for r in rows} == {"Ingress", "Completed"}
    assert len(rows) == 2 * len(system.completed)
    _, p2, _ = _write(tmp_path, 2)
    rows2 = read_trace(p2)
    states = {r["state"] for r in rows2}
    assert states == {"Ingress", "Mapped", "Buffered", "Queued", "MediaOp", "Return",
                      "Completed"}
    # per request, state cycles never go backwards
    by = {}
    for r in rows2:
        by.setdefault(r["request_id"], []).append(r["sim_cycle"])
    assert all(v == sorted(v) for v in by.values())


def test_replay_reproduces_ingress(tmp_path):
    cfg, p, system = _write(tmp_path, 2)
    reqs = replay_requests(read_trace(p), cfg)
    assert len(reqs) == len(system.completed)
    again = HbfSystem(cfg)
    again.run_requests(reqs)
    a = {r.id: r.t_accept for r in system.completed}
    b = {r.id: r.t_accept for r in again.completed}
    assert a == b  # replaying accept ticks as arrivals reproduces ingress exactly


@pytest.mark.parametrize("header,match", [
    (COLUMNS[:-1], "missing column"),
    (COLUMNS + ["extra"], "unexpected column"),
    (COLUMNS[1:2] + COLUMNS[:1] + COLUMNS[2:], "reordered"),
])
def test_reader_rejects_bad_columns(tmp_path, header, match):
    p = tmp_path / "bad.csv"
    p.write_text(",".join(header) + "\n")
    with pytest.raises(InputError, match=match):
        read_trace(p)


def test_reader_rejects_bad_values(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text(",".join(COLUMNS) + "\n" + "1,2,0,R,0x10,0,0,0,Sleeping,32,0,0,0,0,0\n")
    with pytest.raises(InputError, match="line 2: state 'Sleeping'"):
        read_trace(p)
    p.write_text(",".join(COLUMNS) + "\n" + "x,2,0,R,0x10,0,0,0,Ingress,32,0,0,0,0,0\n")
    with pytest.raises(InputError, match="line 2: sim_cycle 'x'"):
        read_trace(p)


def test_validate_summary_and_replay_refuses_what_validate_refuses(tmp_path):
    from hbfsim.model.trace import validate_trace

    cfg, p, _ = _write(tmp_path, 1)
    rows = read_trace(p)
    s = validate_trace(rows, cfg)
    assert (s["level"], s["rows"], s["requests"]) == (1, len(rows), len(rows) // 2)
    del rows[1]  # a request loses its Completed (or Ingress) row
    with pytest.raises(InputError, match="has no"):
        validate_trace(rows, cfg)
    with pytest.raises(InputError, match="has no"):
        replay_requests(rows, cfg)


@pytest.mark.parametrize("level,block", [(1, 1 << 24), (2, 1 << 24), (2, 300)])
def test_columnar_trace_path_agrees_with_the_row_path(tmp_path, monkeypatch, level, block):
    from hbfsim.model import request_columns
    from hbfsim.model.trace import validate_trace
    from hbfsim.model.trace_columns import TraceColumns, load_trace, replay_list

    monkeypatch.setattr(request_columns, "_BLOCK", block)   # line_blocks' default
    cfg, p, _ = _write(tmp_path, level)
    summary, cols = load_trace(p, cfg)
    assert isinstance(cols, TraceColumns)  # the fast path answered
    rows = read_trace(p)
    assert summary == validate_trace(rows, cfg, str(p))

    def key(reqs):
        return [(r.id, r.op, r.addr, r.nbytes, r.source, r.arrival, r.data) for r in reqs]
    assert key(replay_list(cols)) == key(replay_requests(rows, cfg))
