"""``hbfsim sweep GRID.toml [--out DIR] [--backend local|ray] [--address A] [--workers N]``.

Everything is checked before anything is written: the grid's size from its axes (above
``--max-points`` it is refused with the count), then every point built as its run will build
it and given its id (its fully resolved run, :func:`hbfsim.sweep.points.identify`), the
output folder, and the backend. Then the folder is created and locked (one sweep per
folder), finished points whose journal entries check out are skipped, and the table is
built from the current grid when the last point finishes. Bad input: one line on stderr,
exit 2, nothing written.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

from hbfsim.sweep.backends import BACKENDS, connect_ray, ray_tasks, run_local
from hbfsim.sweep.grid import GridError, load_grid
from hbfsim.sweep.points import describe, identify, table_row
from hbfsim.sweep.store import CSV, LOCK, PARQUET, POINTS, PointStore, SweepLock, write_table

#: Default bound on a grid's points: each is checked (its configuration and workload built)
#: before the first runs, about 2 ms a device point, so 10,000 points are 20 s of checks
#: and a table of 10,000 rows; a bigger sweep says so with --max-points.
MAX_POINTS = 10_000

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
    p.add_argument("--max-points", metavar="N", help=f"refuse a grid of more points than N "
                   f"(default {MAX_POINTS:,}); the count comes from the axes, before any "
                   f"point is built")
    p.add_argument("--fresh", action="store_true",
                   help="refuse an output folder that already holds points")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--engine", choices=("compiled", "reference"), default=None,
                   help="the engine of every device point (over the grid's engine key; "
                        "compiled by default; both give the same rows, docs/engine.md)")
    p.set_defaults(func=run_cli)
    return p


def _positive(option: str, text, limit: int | None = None) -> int | None:
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise GridError(f"{option} must be a positive integer, not {text!r}")
    if limit is not None and n > limit:
        raise GridError(f"{option} {n:,} is more than {limit:,} ({_limit_reason(option)})")
    return n


def _limit_reason(option: str) -> str:
    return {"--workers": "processes this machine can hold, 64 per core",
            "--max-points": "checking alone takes about 2 ms a point: 5.5 hours"}[option]


def _workers(text) -> int | None:
    return _positive("--workers", text, 64 * (os.cpu_count() or 1))


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
    if (out / LOCK).exists() and not (out / LOCK).is_file():
        raise GridError(f"--out {str(out)!r}: {LOCK} exists and is not a regular file")
    return out


def _identify_all(grid) -> tuple[list, dict]:
    """Every point checked and given its id; two points that are one run are refused."""
    memo: dict = {}
    points, idents, first = [], {}, {}
    for p in grid.points():
        q, text = identify(p, memo)
        if q.id in first:
            o = first[q.id]
            raise GridError(f"{grid.path}: points {o.index} ({describe(o)}) and {q.index} "
                            f"({describe(q)}) are one run (the same resolved settings, "
                            f"workload and files); list each once")
        first[q.id] = q
        points.append(q)
        idents[q.id] = text
    return points, idents


def _store(out: Path, kind: str) -> PointStore:
    try:
        return PointStore(out, kind)
    except OSError as e:
        raise GridError(f"--out {str(out)!r}: {e.strerror or e}") from None


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
    max_points = _positive("--max-points", a.max_points, 10_000_000) or MAX_POINTS
    grid = load_grid(a.grid)
    size = grid.size()                    # from the axes: nothing expanded yet
    if size > max_points:
        raise GridError(f"{a.grid}: the grid has {size:,} points ({grid.shape()}), more than "
                        f"--max-points {max_points:,}; shrink it or raise --max-points")
    out = _out_folder(a, grid)
    points, idents = _identify_all(grid)  # every point built, before any output
    if out.exists() and a.fresh and (out / POINTS).exists():
        raise GridError(f"--fresh: {str(out)!r} already holds {POINTS}")
    if out.exists():
        _store(out, grid.kind)            # an unreadable journal is refused now, by name
    ray = connect_ray(a.address) if a.backend == "ray" else None   # fail before any output
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GridError(f"--out {str(out)!r}: cannot create folder: {e.strerror}") from None
    lock = SweepLock(out)
    try:
        lock.acquire(a.grid)
    except BlockingIOError as e:
        raise GridError(f"--out {str(out)!r}: {e}") from None
    except OSError as e:
        raise GridError(f"--out {str(out)!r}: cannot lock {LOCK}: {e.strerror}") from None
    try:
        return _sweep(a, grid, out, points, idents, workers, ray)
    finally:
        lock.release()


def _sweep(a, grid, out, points, idents, workers, ray) -> int:
    from hbfsim.outputs import OutputError, resolve_outputs

    try:  # every output checked before the first point runs (docs/outputs.md)
        resolve_outputs({f"--out {POINTS}": out / POINTS, f"--out {CSV}": out / CSV,
                         f"--out {PARQUET}": out / PARQUET}, {"grid": a.grid})
    except OutputError as e:
        raise GridError(str(e)) from None
    store = _store(out, grid.kind)        # read under the lock: what is finished now
    note = store.note()
    if note:
        print(f"hbfsim sweep: note: {note}", file=sys.stderr, flush=True)
    todo = [p for p in points if not store.usable(p.id, idents[p.id])]
    if getattr(a, "engine", None):        # no part of a point's identity or its table row
        todo = [dataclasses.replace(p, settings={**p.settings, "engine": a.engine})
                if p.kind == "device" else p for p in todo]
    skipped = len(points) - len(todo)
    runner = run_local(todo, workers) if ray is None else ray_tasks(ray, todo, workers)
    print(f"hbfsim sweep {grid.name}: {len(points)} points ({len(grid.workloads)} workload(s) "
          f"x {len(points) // len(grid.workloads)} combinations), {skipped} already done, "
          f"{len(todo)} to run on {a.backend}", flush=True)
    from tqdm import tqdm

    t0 = time.perf_counter()
    try:
        with tqdm(total=len(todo), desc=grid.name, unit="point", file=sys.stderr,
                  disable=a.no_progress or not todo) as bar:
            for p, result in runner:
                store.add(p.id, idents[p.id], result)
                bar.update()
    finally:
        store.close()
    rows = [table_row(p, store.entries[p.id]) for p in points]
    csv_path, pq_path = write_table(out, rows)
    print(f"  {len(todo)} point(s) in {time.perf_counter() - t0:.1f} s; table: {csv_path}, "
          f"{pq_path} ({len(rows)} rows)")
    return 0
