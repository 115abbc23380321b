"""``hbfsim sweep GRID.toml [--out DIR] [--backend local|ray] [--address A] [--workers N]``.

Every point is validated before the first one runs; finished points are skipped on a rerun
with the same output folder (``--fresh`` refuses to reuse one); the table is written when the
last point finishes. Bad input: one line on stderr, exit 2, nothing written.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hbfsim.sweep.backends import BACKENDS, run_local, run_ray
from hbfsim.sweep.grid import GridError, load_grid
from hbfsim.sweep.points import prepare
from hbfsim.sweep.store import CSV, PARQUET, POINTS, PointStore, write_table

__all__ = ["register", "run_cli"]


def register(subparsers):
    """Add the ``sweep`` sub-command; bad input raises GridError (printed as one line)."""
    p = subparsers.add_parser(
        "sweep", help="run a grid of configuration keys x workloads as one table",
        description="Run every point of GRID.toml (docs/sweep.md) in local processes or on "
                    "a Ray cluster; finished points are kept in DIR/points.jsonl and skipped "
                    "on a rerun; the table is DIR/results.csv and DIR/results.parquet.")
    p.add_argument("grid", metavar="GRID.toml", help="the grid file")
    p.add_argument("--out", metavar="DIR", help="output folder (default results/sweep/NAME)")
    p.add_argument("--backend", default="local", help="local (worker processes; default) or "
                   "ray (tasks on an existing Ray cluster, needs hbfsim[cluster])")
    p.add_argument("--address", metavar="A", help="Ray cluster address for --backend ray "
                   "(host:port, ray://host:port or auto)")
    p.add_argument("--workers", metavar="N", help="local worker processes (default: one per "
                   "core) or Ray tasks in flight (default: all)")
    p.add_argument("--fresh", action="store_true",
                   help="refuse an output folder that already holds points")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def _workers(text) -> int | None:
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise GridError(f"--workers must be a positive integer, not {text!r}")
    return n


def _out_folder(a, grid) -> Path:
    if a.out is not None and not a.out.strip():
        raise GridError("--out must name a folder, not ''")
    out = Path(a.out) if a.out else Path("results") / "sweep" / grid.name
    if out.exists() and not out.is_dir():
        raise GridError(f"--out {str(out)!r} exists and is not a folder")
    for name in (POINTS, CSV, PARQUET):
        f = out / name
        if f.exists() and not f.is_file():
            raise GridError(f"--out {str(out)!r}: {name} exists and is not a regular file")
        if f.resolve() == Path(a.grid).resolve():
            raise GridError(f"--out {str(out)!r}: {name} would overwrite the grid file")
    return out


def run_cli(a) -> int:
    """Run the ``sweep`` sub-command from parsed arguments; return the exit code."""
    if not a.grid:
        raise GridError("GRID.toml must name a file, not ''")
    if a.backend not in BACKENDS:
        raise GridError(f"--backend must be one of {', '.join(BACKENDS)}, not {a.backend!r}")
    if a.address is not None and a.backend != "ray":
        raise GridError("--address needs --backend ray")
    if a.backend == "ray" and not a.address:
        raise GridError("--backend ray needs --address (host:port, ray://host:port or auto)")
    workers = _workers(a.workers)
    grid = load_grid(a.grid)
    out = _out_folder(a, grid)
    points = grid.points()
    for p in points:                      # refuse a bad combination before any work
        prepare(p)
    if out.exists() and a.fresh and (out / POINTS).exists():
        raise GridError(f"--fresh: {str(out)!r} already holds {POINTS}")
    store = PointStore(out)               # reads finished points; creates nothing
    todo = [p for p in points if p.id not in store]
    skipped = len(points) - len(todo)
    runner = run_local(todo, workers) if a.backend == "local" else \
        run_ray(todo, a.address, workers)            # connects now: fail before any output
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GridError(f"--out {str(out)!r}: cannot create folder: {e.strerror}") from None
    from hbfsim.outputs import OutputError, resolve_outputs

    try:  # every output checked before the first point runs (docs/outputs.md)
        resolve_outputs({f"--out {POINTS}": out / POINTS, f"--out {CSV}": out / CSV,
                         f"--out {PARQUET}": out / PARQUET}, {"grid": a.grid})
    except OutputError as e:
        raise GridError(str(e)) from None
    print(f"hbfsim sweep {grid.name}: {len(points)} points ({len(grid.workloads)} workload(s) "
          f"x {len(points) // len(grid.workloads)} combinations), {skipped} already done, "
          f"{len(todo)} to run on {a.backend}", flush=True)
    from tqdm import tqdm

    t0 = time.perf_counter()
    try:
        with tqdm(total=len(todo), desc=grid.name, unit="point", file=sys.stderr,
                  disable=a.no_progress or not todo) as bar:
            for _, row in runner:
                store.add(row)
                bar.update()
    finally:
        store.close()
    rows = [store.rows[p.id] for p in points]
    csv_path, pq_path = write_table(out, rows)
    print(f"  {len(todo)} point(s) in {time.perf_counter() - t0:.1f} s; table: {csv_path}, "
          f"{pq_path} ({len(rows)} rows)")
    return 0
