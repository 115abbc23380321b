"""Run one sweep point and flatten what it measured into one table row.

A point runner must be importable by a worker process or a Ray task by name alone, so it is
a module-level function taking a :class:`~hbfsim.sweep.grid.Point` and returning a dict of
scalars. :func:`identify` builds everything a point needs without running it, so that a bad
combination is refused before the first point runs (docs/sweep.md, "Bad input"), and gives
the point its id: a hash of the fully resolved run (the resolved configuration, the
workload and its parameters, and the content of every file they name), so that a resumed
sweep reuses a finished point only when it is the same run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from pathlib import Path

from hbfsim.sweep.grid import GridError, Point, normal_value

__all__ = ["describe", "identify", "identity_text", "point_id", "prepare", "run_point", "table_row",
           "flatten"]

#: Settings a device point takes besides HbfConfig keys.
_DEVICE_EXTRA = {"profile", "config"}


def flatten(d: dict, prefix: str = "") -> dict:
    """Scalars of a nested statistics dict under dotted keys; lists and None are left out
    (per-channel lists would give every configuration a different set of columns), and so
    is a float that is not finite (no figure; the journal holds finite numbers only)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, float) and not math.isfinite(v):
            continue
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
        raise GridError(f"point {point.index} ({describe(point)}): {e}") from None


def describe(point: Point) -> str:
    """A point by its settings, for messages: ``workload W, key=value, ...``."""
    parts = [f"workload {point.workload}"] + [f"{k}={v!r}" for k, v in point.values.items()]
    return ", ".join(parts)


def _serve_prepared(point: Point, memo: dict | None = None) -> dict:
    """A serve point checked as :func:`hbfsim.serve.run.prepare_serving` checks a run (the
    settings, the model, the workload, the HBF configuration; nothing characterized): the
    grid's keys are its settings (``hbm``, ``scheduler``, ...), the workload its spec."""
    from hbfsim.serve.run import prepare_serving

    if point.params:
        raise GridError(f"point {point.index} ({describe(point)}): kind 'serve' takes no "
                        f"[params] (workload parameters go in the spec: PRESET:key=value)")
    s = dict(point.settings, workload=point.workload)
    try:
        return prepare_serving(s, workloads=memo)
    except ValueError as e:
        raise GridError(f"point {point.index} ({describe(point)}): {e}") from None


def _run_serve(point: Point) -> dict:
    from hbfsim.serve.run import run_serving

    pre = _serve_prepared(point)
    s = run_serving(pre["s"], prepared=pre)
    s.pop("host_seconds", None)
    energy = s.pop("energy_j")
    return flatten(s) | flatten(energy, "energy_j.")


# ----------------------------------------------------------------------------- identity
def _file_digest(path, memo: dict | None = None) -> str:
    """SHA-256 of a file's bytes (what a point reads from it). ``memo`` (one check phase's
    dict) reads a file named by many points once; across runs nothing is remembered, since
    a file rewritten within the file system's timestamp granularity keeps its size and
    modification time."""
    key = ("file", os.path.realpath(path))
    if memo is not None and key in memo:
        return memo[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if memo is not None:
        memo[key] = h.hexdigest()
    return h.hexdigest()


def _normal(v, memo=None):
    """``v`` as it enters a point's identity: integral floats as integers, and a string that
    names an existing file as the digest of its content (a model config.json, a trace)."""
    v = normal_value(v)
    if isinstance(v, str) and v and Path(v).is_file():
        return {"file_sha256": _file_digest(v, memo)}
    if isinstance(v, (list, tuple)):
        return [_normal(x, memo) for x in v]
    return v


def _preset_spec(spec: str, memo=None):
    """A serving preset spec ``NAME:k=v,...`` as ``[NAME, {k: v}]`` with ``scale`` 1 and
    ``seed`` 0 filled in and values normalised, so that two spellings of one preset are one
    workload; a trace file is its content's digest; anything else (a sample) as it is."""
    if Path(spec).is_file():
        return {"file_sha256": _file_digest(spec, memo)}
    name, sep, rest = spec.partition(":")
    if not sep and name.startswith("sample-"):
        return spec
    kw: dict = {"scale": 1, "seed": 0}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        k, _, v = item.partition("=")
        v = v.strip()
        try:
            val = normal_value(float(v)) if v.lower() not in ("nan", "inf", "-inf") else v
        except ValueError:
            val = v.lower() if v.lower() == "none" else v
        kw[k.strip()] = val
    return [name.strip(), kw]


def _device_identity(point: Point, cfg, memo=None) -> dict:
    from hbfsim.model.workload_params import registry_name

    config = {k: normal_value(v) for k, v in cfg.as_dict().items()
              if k not in ("profile", "trace_file", "trace_level", "engine")}
    # (labels, outputs and the engine: both engines give the same figures)
    work = "default" if point.workload == "default" else registry_name(point.workload)
    return {"kind": "device", "workload": work, "config": config,
            "params": {k: _normal(v, memo) for k, v in sorted(point.params.items())}}


def _serve_identity(pre: dict, memo=None) -> dict:
    from hbfsim.serve.characterize import _canonical

    s = dict(pre["s"])
    for k in ("workload", "format", "model", "hbf_config", "hbf_profile", "cache"):
        s.pop(k)
    if s["tp"] is None:
        s["tp"] = s["gpus"]
    shape = pre["mc"]
    model = dataclasses.asdict(shape) if dataclasses.is_dataclass(shape) else repr(shape)
    return {"kind": "serve", "settings": {k: normal_value(v) for k, v in sorted(s.items())},
            "model": model, "workload": _preset_spec(pre["s"]["workload"], memo),
            "format": pre["s"]["format"],
            "hbf": None if pre["hbf_cfg"] is None else _canonical(pre["hbf_cfg"])}


def identity_text(ident: dict) -> str:
    """The canonical JSON text of an identity (what the id hashes and the journal keeps)."""
    return json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str,
                      allow_nan=False)


def point_id(text: str) -> str:
    """16 hex digits of the SHA-256 of an identity's text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def identify(point: Point, memo: dict | None = None) -> tuple[Point, str]:
    """Check ``point`` as its run will build it and return it with its id, and its
    identity's text.

    Raises
    ------
    GridError
        The point cannot run: one line naming the point by its settings and the key.
    """
    if point.kind == "device":
        cfg, _ = _device_setup(point)
        ident = _device_identity(point, cfg, memo)
    elif point.kind == "serve":
        ident = _serve_identity(_serve_prepared(point, memo), memo)
    else:
        raise GridError(f"point {point.index}: unknown kind {point.kind!r}")
    try:
        text = identity_text(ident)
    except (ValueError, OSError) as e:
        raise GridError(f"point {point.index} ({describe(point)}): {e}") from None
    return dataclasses.replace(point, id=point_id(text)), text


def prepare(point: Point) -> None:
    """Build the point's configuration and workload; raise GridError if either is bad."""
    identify(point)


def _run_device(point: Point) -> dict:
    from hbfsim.model.workloads import DeviceStream
    from hbfsim.simulate import choose_engine, run_closed, run_open, say_once

    cfg, work = _device_setup(point)
    engine, note = choose_engine(cfg)     # the point's engine key (both give the same rows)
    say_once(note)
    row: dict = {}
    if work is None or isinstance(work, DeviceStream):
        if work is None:
            from hbfsim.model.requests import default_workload
            reqs = default_workload(cfg)
        else:
            reqs = iter(work)
        fin = run_open(cfg, reqs, engine)
    else:
        fin = run_closed(cfg, work, engine)
        row.update(flatten(fin.result.summary(), "gpu."))
    return flatten(fin.stats) | row


def run_point(point: Point) -> dict:
    """Run ``point``; return its journal entry: ``metrics`` (every scalar the run measured,
    dotted names) and ``host_seconds``. The table's row is built from it and the current
    grid (:func:`table_row`)."""
    t0 = time.perf_counter()
    if point.kind == "device":
        metrics = _run_device(point)
    elif point.kind == "serve":
        metrics = _run_serve(point)
    else:
        raise GridError(f"point {point.index}: unknown kind {point.kind!r}")
    return {"metrics": metrics, "host_seconds": round(time.perf_counter() - t0, 4)}


def table_row(point: Point, entry: dict) -> dict:
    """The table's row of ``point`` (of the current grid) from its journal ``entry``: id,
    grid index, workload, the point's grid values under their grid keys, the metrics (one
    whose name is a column already as ``stat.NAME``), then ``host_seconds``."""
    row = {"point": point.id, "index": point.index, "workload": point.workload}
    row.update(point.values)
    for k, v in entry["metrics"].items():   # a metric never hides a grid column of its name
        row[f"stat.{k}" if k in row else k] = v
    row["host_seconds"] = entry["host_seconds"]
    return row
