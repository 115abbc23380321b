"""Run one sweep point and flatten what it measured into one table row.

A point runner must be importable by a worker process or a Ray task by name alone, so it is
a module-level function taking a :class:`~hbfsim.sweep.grid.Point` and returning a dict of
scalars. ``prepare`` builds everything a point needs without running it, so that a bad
combination is refused before the first point runs (docs/sweep.md, "Bad input").
"""

from __future__ import annotations

import time

from hbfsim.sweep.grid import GridError, Point

__all__ = ["prepare", "run_point", "flatten"]

#: Settings a device point takes besides HbfConfig keys.
_DEVICE_EXTRA = {"profile", "config"}


def flatten(d: dict, prefix: str = "") -> dict:
    """Scalars of a nested statistics dict under dotted keys; lists and None are left out
    (per-channel lists would give every configuration a different set of columns)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (bool, int, float, str)):
            out[key] = v
    return out


def _device_setup(point: Point):
    from hbfsim.config import ConfigError, load_config
    from hbfsim.model.gpu import GpuError

    s = dict(point.settings)
    path = s.pop("config", None)
    profile = s.pop("profile", None)
    try:
        cfg = load_config(path, profile, **s)
        if point.workload == "default":
            if point.params:
                raise GridError("workload 'default' takes no parameters, got "
                                f"{', '.join(sorted(point.params))}")
            return cfg, None
        from hbfsim.model.workloads import get_workload

        name = point.workload.replace("-", "_")
        work = get_workload(name, cfg, **point.params)
        if getattr(work, "config", None):
            # The workload's study settings sit under the grid's own (as `run --workload`).
            cfg = load_config(path, profile, base=work.config, **s)
            work = get_workload(name, cfg, **point.params)
        return cfg, work
    except (ConfigError, GpuError, TypeError, ValueError, OSError) as e:
        raise GridError(f"point {point.index} ({_describe(point)}): {e}") from None


def _describe(point: Point) -> str:
    parts = [f"workload {point.workload}"] + [f"{k}={v!r}" for k, v in point.values.items()]
    return ", ".join(parts)


def _serve_settings(point: Point) -> dict:
    """A serve point's settings for :func:`hbfsim.serve.run.run_serving` (validated): the
    grid's keys are its settings (``hbm``, ``scheduler``, ...), the workload its spec."""
    from hbfsim.serve.run import validate

    if point.params:
        raise GridError(f"point {point.index} ({_describe(point)}): kind 'serve' takes no "
                        f"[params] (workload parameters go in the spec: PRESET:key=value)")
    s = dict(point.settings, workload=point.workload)
    try:
        return validate(s)
    except ValueError as e:
        raise GridError(f"point {point.index} ({_describe(point)}): {e}") from None


def _run_serve(point: Point) -> dict:
    from hbfsim.serve.run import run_serving

    s = run_serving(_serve_settings(point))
    s.pop("host_seconds", None)
    energy = s.pop("energy_j")
    return flatten(s) | flatten(energy, "energy_j.")


def prepare(point: Point) -> None:
    """Build the point's configuration and workload; raise GridError if either is bad."""
    if point.kind == "device":
        _device_setup(point)
    elif point.kind == "serve":
        _serve_settings(point)
    else:
        raise GridError(f"point {point.index}: unknown kind {point.kind!r}")


def _run_device(point: Point) -> dict:
    from hbfsim.model.gpu import run_closed_loop
    from hbfsim.model.stats import collect_stats
    from hbfsim.model.system import HbfSystem
    from hbfsim.model.workloads import DeviceStream

    cfg, work = _device_setup(point)
    row: dict = {}
    if work is None or isinstance(work, DeviceStream):
        if work is None:
            from hbfsim.model.requests import default_workload
            reqs = default_workload(cfg)
        else:
            reqs = iter(work)
        system = HbfSystem(cfg, keep=False)
        for r in reqs:
            system.submit(r)
        system.close_input()
        system.run()
    else:
        result = run_closed_loop(cfg, work)
        system = result.system
        row.update(flatten(result.summary(), "gpu."))
    stats = collect_stats(system)
    return flatten(stats) | row


def run_point(point: Point) -> dict:
    """Run ``point``; return its row: id, workload, grid values, then the metrics."""
    t0 = time.perf_counter()
    if point.kind == "device":
        metrics = _run_device(point)
    elif point.kind == "serve":
        metrics = _run_serve(point)
    else:
        raise GridError(f"point {point.index}: unknown kind {point.kind!r}")
    row = {"point": point.id, "index": point.index, "workload": point.workload}
    row.update(point.values)
    for k, v in metrics.items():        # a metric never hides a grid column of its name
        row[f"stat.{k}" if k in row else k] = v
    row["host_seconds"] = round(time.perf_counter() - t0, 4)
    return row
