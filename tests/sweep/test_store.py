"""hbfsim/sweep/store.py: finished points survive a stop; the table in CSV and Parquet."""

import csv

import pyarrow.parquet as pq

from hbfsim.sweep.points import point_id
from hbfsim.sweep.store import PointStore, write_table


def _ident(name):
    text = '{"run":"%s"}' % name
    return point_id(text), text


def _result(x):
    return {"metrics": {"requests": x, "last_completion_tick": 10 * x}, "host_seconds": 0.5}


def test_points_survive_and_a_torn_last_line_is_ignored(tmp_path):
    (a, ia), (b, ib) = _ident("a"), _ident("b")
    s = PointStore(tmp_path)
    s.add(a, ia, _result(1))
    s.add(b, ib, _result(2))
    s.close()
    text = (tmp_path / "points.jsonl").read_text()
    (tmp_path / "points.jsonl").write_text(text[:-5])       # stopped mid-line
    s = PointStore(tmp_path, "device")
    assert s.usable(a, ia) and not s.usable(b, ib) and len(s.bad) == 1
    s.add(b, ib, _result(3))
    s.close()
    again = PointStore(tmp_path, "device")
    assert again.entries[b]["metrics"]["requests"] == 3 and len(again.bad) == 1
    assert not again.usable(a, ib)              # compared by content, not only by id


def test_table_has_the_union_of_columns_in_both_formats(tmp_path):
    rows = [{"point": "a", "n": 1, "f": 0.5}, {"point": "b", "n": 2.5, "extra": "z"}]
    c, p = write_table(tmp_path, rows)
    with open(c, newline="") as f:
        got = list(csv.DictReader(f))
    assert got[0] == {"point": "a", "n": "1", "f": "0.5", "extra": ""}
    t = pq.read_table(p).to_pylist()
    assert t[1] == {"point": "b", "n": 2.5, "f": None, "extra": "z"}
    assert t[0]["n"] == 1.0
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]


def test_store_creates_nothing_until_a_point_is_added(tmp_path):
    PointStore(tmp_path / "missing").close()
    assert not (tmp_path / "missing").exists()
