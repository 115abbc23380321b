"""The ``study`` sub-command: argument parsing, the run, and the lines printed after it.

:func:`register` adds it to the ``hbfsim`` command; :func:`main` is ``python -m
hbfsim.studies``. Parsing needs only the registered names, so no study module is imported
until a study runs (``hbfsim --help`` stays fast).
"""

from __future__ import annotations

import argparse
import sys

from hbfsim.studies.registry import STUDIES
from hbfsim.studies.runner import run_study

__all__ = ["main", "register", "run_cli"]


def _add_arguments(p) -> None:
    p.add_argument("name", metavar="NAME",
                   help="study: " + ", ".join(STUDIES))
    p.add_argument("--quick", action="store_true",
                   help="run the reduced sweep (seconds; what CI runs)")
    p.add_argument("--out", metavar="DIR", help="output folder (default results/NAME)")
    p.add_argument("--workers", metavar="N", type=int, default=None,
                   help="worker processes (default: one per core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--engine", choices=("compiled", "reference"), default=None,
                   help="the engine of every device run (the engine key: compiled by "
                        "default; docs/engine.md); the same as --set engine=...; for "
                        "flashaccel and serving, the engine their HBF stack is "
                        "characterized on (recomputed, not read from the cache)")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="config_set",
                   help="HbfConfig key for every run of a device study (repeatable), e.g. "
                        "--set host_ports=stack; refused for a key the "
                        "study sets itself")


def _config_set(items) -> dict:
    """``KEY=VALUE`` strings as a dict (values as TOML-like scalars: true/false, integers,
    floats, else text); a malformed or repeated item is a one-line error naming it."""
    out: dict = {}
    for item in items:
        key, eq, text = item.partition("=")
        key, text = key.strip().replace("-", "_"), text.strip()   # kebab case as --param
        if not eq or not key or not text:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        if key in out:
            raise ValueError(f"--set {key}: given twice")
        low = text.lower()
        if low in ("true", "false"):
            out[key] = low == "true"
            continue
        for conv in (int, float):
            try:
                out[key] = conv(text)
                break
            except ValueError:
                pass
        else:
            out[key] = text
    return out


def register(subparsers):
    """Add the ``study`` sub-command to an argparse sub-parser collection.

    The parser's ``func`` default is :func:`run_cli`; bad input raises ValueError with a
    message naming the bad value (the caller prints it as one line and exits 2).
    """
    p = subparsers.add_parser(
        "study", help="run one of the source's studies as a parallel sweep",
        description="Run a study of the source (" + ", ".join(STUDIES) + ") and write "
                    "runs.csv, plot.png, summary.md and summary.json to results/NAME.")
    _add_arguments(p)
    p.set_defaults(func=run_cli)
    return p


def run_cli(a) -> int:
    """Run the ``study`` sub-command from parsed arguments; return the exit code."""
    if a.name not in STUDIES:
        raise ValueError(f"study must be one of {', '.join(STUDIES)}, not {a.name!r}")
    if a.workers is not None and a.workers < 1:
        raise ValueError(f"--workers must be a positive integer, not {a.workers}")
    config_set = _config_set(a.config_set)
    if getattr(a, "engine", None):
        if "engine" in config_set:
            raise ValueError("--engine and --set engine=...: give one")
        from hbfsim.studies.base import Study

        study = STUDIES[a.name]
        if not study.tasks_take_engine and type(study).config_kwargs is Study.config_kwargs:
            raise ValueError(f"--engine applies to the studies that run the device model; "
                             f"{a.name} runs none")
        config_set["engine"] = a.engine     # flashaccel, serving: their tasks take it
    s = run_study(a.name, a.out, quick=a.quick, workers=a.workers,
                  progress=not a.no_progress, config_set=config_set)
    print(f"hbfsim study {a.name}{' --quick' if a.quick else ''}: {s['runs']} runs, "
          f"{s['workers']} worker(s), {s['host_seconds']:.1f} s")
    for line in STUDIES[a.name].headline(s):
        print(f"  {line}")
    for k, v in s["files"].items():
        print(f"  {k}: {v}")
    return 0


def main(argv=None) -> int:
    """``python -m hbfsim.studies NAME ...``: the sub-command without the hbfsim command."""
    ap = argparse.ArgumentParser(prog="python -m hbfsim.studies",
                                 description="Run a study of the source as a parallel sweep.")
    _add_arguments(ap)
    a = ap.parse_args(argv)
    try:
        return run_cli(a)
    except ValueError as e:
        print(f"hbfsim: error: {e}", file=sys.stderr)
        return 2
