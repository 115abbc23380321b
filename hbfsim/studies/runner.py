"""Run a study's sweep in worker processes and write its four output files.

The sweep runs in a process pool (one task per job) behind a tqdm bar; the rows, the summary,
the plot and the report come from the :class:`~hbfsim.studies.base.Study`. Every file is
written by the functions of the "output files" section below, so that the output policy is
in one place.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path

from hbfsim.studies.registry import STUDIES

__all__ = ["run_study", "write_csv", "write_plot", "write_text"]


def _work(name: str, task: dict) -> tuple[list, float]:
    t0 = time.perf_counter()
    rows = STUDIES[name].run(task)
    return rows, time.perf_counter() - t0


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k) if not isinstance(k, str) else k: _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    return o


# ============================================================================ output files
# Every file goes through hbfsim.outputs: checked before the sweep starts, written to a
# hidden temporary in the same folder and renamed when complete (docs/outputs.md).
def _target(path):
    from hbfsim.outputs import Target, resolve_outputs

    return path if isinstance(path, Target) else resolve_outputs({str(path): path})[str(path)]


def write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` (a path or a checked :class:`~hbfsim.outputs.Target`)."""
    _target(path).write_text(text)


def write_csv(path, rows: list) -> None:
    """Write ``rows`` as CSV (columns in first-seen order, None empty)."""
    cols: list = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    with _target(path).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in cols})


def write_plot(path, draw) -> None:
    """Call ``draw(tmp)`` to save a PNG at a temporary name (same suffix: matplotlib reads
    it), renamed to ``path`` when complete."""
    with _target(path).temp_path() as tmp:
        draw(tmp)


# ============================================================================ the runner
def _apply_config_set(study, tasks: list, config_set: dict) -> None:
    """Check ``hbfsim study --set`` values before any work and put them in every task: the
    study must run device configurations, every key and value must be valid, and none may
    be a key the study sets itself (the user's value would not be what ran)."""
    from hbfsim.config import ALIASES, ConfigError, load_config

    if study.config_kwargs(tasks[0]) is None:
        raise ValueError(f"--set applies to the device studies; {study.name} takes no "
                         f"HbfConfig of its own (see its command's options)")
    try:
        load_config(**config_set)
    except ConfigError as e:
        raise ValueError(f"--set: {e}") from None
    mine: dict = {}
    for k in config_set:
        if ALIASES.get(k, k) in mine:
            raise ValueError(f"--set {mine[ALIASES.get(k, k)]} and --set {k} are one key "
                             f"({ALIASES.get(k, k)})")
        mine[ALIASES.get(k, k)] = k
    for key in ("trace_file", "trace_level"):
        if key in mine:
            # a study's runs write no trace (they would all write one file); the value
            # would be recorded in summary.json and do nothing
            raise ValueError(f"--set {mine[key]}: a study writes no trace (its "
                             f"{len(tasks)} runs would share one file); trace one run with "
                             f"hbfsim run --trace")
    for task in tasks:
        own_kw = study.config_kwargs(task)
        own = {ALIASES.get(k, k) for k in own_kw}
        clash = sorted(set(mine) & own)
        if clash:
            raise ValueError(f"--set {mine[clash[0]]}: study {study.name} sets {clash[0]} "
                             f"itself (its sweep or its workload); choose another key")
        try:   # the combination each run will build
            load_config(**own_kw, **config_set)
        except ConfigError as e:
            shown = ", ".join(f"{k}={v!r}" for k, v in own_kw.items())
            raise ValueError(f"--set with study {study.name}'s run ({shown}): {e}") from None
        task["config_set"] = dict(config_set)


def _check_engine_only(study, config_set: dict) -> None:
    """Refuse ``hbfsim study --set`` for a study without an ``HbfConfig`` of its own, but
    the engine of one that takes it (:attr:`~hbfsim.studies.base.Study.tasks_take_engine`),
    whose value is checked as the configuration key."""
    from hbfsim.config import ConfigError, load_config

    other = [k for k in config_set if not (study.tasks_take_engine and k == "engine")]
    if other:
        only = (": its device runs are fixed configurations of its own, which take only "
                "--engine (the same as --set engine=...)") if study.tasks_take_engine \
            else " (see its command's options)"
        raise ValueError(f"--set applies to the device studies; {study.name} takes no "
                         f"HbfConfig of its own{only}")
    try:
        load_config(engine=config_set["engine"])
    except ConfigError as e:
        raise ValueError(f"--set: {e}") from None


def run_study(name: str, out_dir=None, quick: bool = False, workers: int | None = None,
              progress: bool = False, config_set: dict | None = None) -> dict:
    """Run study ``name`` and write its results; return the summary dictionary.

    Parameters
    ----------
    name : str
        One of :func:`~hbfsim.studies.study_names`.
    out_dir : path, optional
        Output folder (created); default ``results/<name>``.
    quick : bool
        Run the reduced sweep (seconds).
    workers : int, optional
        Worker processes (default: one per core; 1 runs in this process).
    progress : bool
        Show a tqdm progress bar on stderr.
    config_set : dict, optional
        ``HbfConfig`` keys and values applied to every run of a device study (``hbfsim
        study --set``), e.g. ``{"host_ports": "stack"}``; refused for keys the study sets
        itself. A study with ``tasks_take_engine`` (``flashaccel``, ``serving``) takes only
        ``engine`` (``hbfsim study --engine``), passed to its ``tasks``.

    Returns
    -------
    dict
        The study's summary (also written as ``summary.json``) plus ``study``, ``quick``,
        ``runs``, ``tasks``, ``workers``, ``host_seconds`` and ``files``.

    Raises
    ------
    ValueError
        Unknown study name or a bad ``workers`` value (the message names it).
    """
    if name not in STUDIES:
        raise ValueError(f"study must be one of {', '.join(STUDIES)}, not {name!r}")
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    study = STUDIES[name]
    out = Path(out_dir) if out_dir is not None else Path("results") / name
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {str(out)!r} is a file")
    # the sweep and every --set value checked against the study before --out exists
    from hbfsim.studies.base import Study

    own = type(study).config_kwargs is not Study.config_kwargs
    if config_set and not own:
        # before its tasks: a study without an HbfConfig may do work to list them
        _check_engine_only(study, config_set)
    if study.tasks_take_engine:
        # its fixed device runs (a characterized HBF tier) on the engine asked, if any
        tasks = study.tasks(quick, engine=(config_set or {}).get("engine"))
    else:
        tasks = study.tasks(quick)
    if config_set and own:
        _apply_config_set(study, tasks, config_set)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create output folder {str(out)!r}: {e.strerror}") from None
    from hbfsim.outputs import resolve_outputs

    names = {"csv": "runs.csv", "plot": "plot.png", "summary_md": "summary.md",
             "summary_json": "summary.json"}
    # all four outputs checked before the sweep: a directory or an unwritable folder is
    # found now, not after minutes of simulation
    targets = resolve_outputs({k: out / v for k, v in names.items()})
    from tqdm import tqdm

    tqdm.monitor_interval = 0            # no monitor thread (the pool forks workers)
    t0 = time.perf_counter()
    results: list = [None] * len(tasks)
    n = min(workers, len(tasks))
    if n <= 1:
        with tqdm(total=len(tasks), desc=name, unit="run", disable=not progress,
                  file=sys.stderr) as bar:
            for i, task in enumerate(tasks):
                results[i] = _work(name, task)
                bar.update()
    else:
        # imported here, not at the top: the process pool costs ~7 ms at `hbfsim --help`
        from concurrent.futures import ProcessPoolExecutor, as_completed

        from hbfsim.sweep.backends import die_with_parent

        # workers end with the study, however it ends (kill -9 included; issue 26)
        with ProcessPoolExecutor(max_workers=n, initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            futs = {pool.submit(_work, name, task): i for i, task in enumerate(tasks)}
            with tqdm(total=len(tasks), desc=name, unit="run", disable=not progress,
                      file=sys.stderr) as bar:
                for f in as_completed(futs):
                    results[futs[f]] = f.result()
                    bar.update()
    rows = []
    for rs, host in results:
        for r in rs:
            r = dict(r)
            r["host_seconds"] = round(host / len(rs), 4)
            rows.append(r)
    raw = study.summarize(rows, quick)
    wall = time.perf_counter() - t0
    summary = _jsonable(raw)
    summary.update(study=name, quick=quick, runs=len(rows), tasks=len(tasks), workers=n,
                   host_seconds=wall)
    files = {k: str(out / v) for k, v in names.items()}
    summary["files"] = files
    write_csv(targets["csv"], rows)
    write_plot(targets["plot"], lambda tmp: study.plot(rows, raw, tmp))
    if config_set:
        summary["config_set"] = dict(config_set)
    if config_set and study.tasks_take_engine:   # engine only; some rows are no device run
        setting = (f" Its device runs on `engine = {config_set['engine']!r}` (`--engine`; "
                   f"the HBF stack's characterization recomputed on it).")
    else:
        setting = ("" if not config_set else " Every run with " + ", ".join(
            f"`{k} = {v!r}`" for k, v in config_set.items()) + " (`--set`).")
    md = [f"# {study.title} ({name}; {study.document} {study.source})", "",
          f"{'Quick (reduced) sweep' if quick else 'Full sweep'}: {len(rows)} simulations in "
          f"{len(tasks)} tasks, {n} worker process(es), {wall:.1f} s host time.{setting} "
          f"Published figures: {study.cites()}; discussion in {study.results_page}.", "",
          study.report(rows, raw), "",
          "Files: `runs.csv` (every run), `plot.png`, `summary.json`.", ""]
    write_text(targets["summary_md"], "\n".join(md))
    write_text(targets["summary_json"], json.dumps(summary, indent=2) + "\n")
    return summary
