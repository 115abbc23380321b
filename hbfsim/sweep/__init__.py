"""``hbfsim sweep GRID.toml``: any grid of configuration keys x workloads, as one table.

A grid file names a kind of run (``device``: the golden model on a workload; ``serve``: the
serving level), the settings every point shares, and lists of values to combine. Each point
runs in a worker process (``local``) or as a task on an existing Ray cluster (``ray``), is
appended to ``points.jsonl`` as it finishes (so an interrupted sweep resumes where it
stopped), and the finished sweep is one table, ``results.csv`` and ``results.parquet``.
See docs/sweep.md.
"""

from hbfsim.sweep.grid import Grid, GridError, Point, load_grid

__all__ = ["Grid", "GridError", "Point", "load_grid"]
