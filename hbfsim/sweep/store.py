"""The sweep's output folder: finished points as JSON lines, the table as CSV and Parquet.

``points.jsonl`` is appended one line per finished point and flushed at once, so a sweep
stopped at any moment keeps every point it finished; a line cut short by the stop is
ignored on resume (and the point re-run). ``results.csv`` and ``results.parquet`` hold the
current grid's points in grid order and are rewritten whole, through a temporary file in
the same folder, when the sweep ends.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

__all__ = ["PointStore", "write_table"]

POINTS = "points.jsonl"
CSV = "results.csv"
PARQUET = "results.parquet"


class PointStore:
    """Finished points of one output folder, keyed by point id."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / POINTS
        self.rows: dict[str, dict] = {}
        self.dropped = 0
        if self.path.exists():
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        self.dropped += 1      # cut short by an interrupted sweep
                        continue
                    if isinstance(row, dict) and isinstance(row.get("point"), str):
                        self.rows[row["point"]] = row
                    else:
                        self.dropped += 1
        self._f = None

    def __contains__(self, point_id: str) -> bool:
        return point_id in self.rows

    def add(self, row: dict) -> None:
        """Record a finished point (appended and flushed at once)."""
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
            if self.dropped:
                self._f.write("\n")         # a torn last line must not swallow the next one
        self._f.write(json.dumps(row, sort_keys=False) + "\n")
        self._f.flush()
        self.rows[row["point"]] = row

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _columns(rows: list[dict]) -> list[str]:
    cols: list[str] = []
    seen = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
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

    Columns are the union of the rows' keys in first-seen order; a missing value is empty
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
