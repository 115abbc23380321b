"""The grid file: parse, validate and expand it into points with stable ids.

Format (TOML; docs/sweep.md)::

    [sweep]
    name = "channels"                 # names the default output folder
    kind = "device"                   # device | serve
    workloads = ["media-saturation"]  # each point runs once per workload

    [base]                            # settings every point shares
    profile = "ocp-grade3"

    [params]                          # workload parameters every point shares (device)
    producers = 256

    [grid]                            # every combination of these values
    channels = [1, 2, 4, 8, 16]
    "param.producers" = [256, 512]    # "param." addresses a workload parameter

A point is one combination x one workload. Its id is a hash of everything that defines it,
so a resumed sweep recognises finished points even if the grid gained or lost values.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Grid", "GridError", "Point", "load_grid", "KINDS"]

KINDS = ("device", "serve")  # the golden model; the serving level (hbfsim.serve.run)
_TABLES = {"sweep", "base", "params", "grid"}
_SWEEP_KEYS = {"name", "kind", "workloads"}
PARAM_PREFIX = "param."


class GridError(ValueError):
    """A bad grid file: the message names the file, the table and the key."""


@dataclass(frozen=True)
class Point:
    """One run of a sweep.

    Members
    -------
    id : str
        16 hex digits of a SHA-256 over kind, workload, settings and parameters.
    index : int
        Position in the expanded grid (the table's row order).
    kind, workload : str
    settings : dict
        Configuration keys: ``[base]`` updated by this point's ``[grid]`` values.
    params : dict
        Workload parameters: ``[params]`` updated by this point's ``param.*`` values.
    values : dict
        This point's ``[grid]`` values only, under their grid keys (the table's columns).
    """

    id: str
    index: int
    kind: str
    workload: str
    settings: dict = field(hash=False)
    params: dict = field(hash=False)
    values: dict = field(hash=False)


@dataclass(frozen=True)
class Grid:
    """A parsed grid file; :meth:`points` expands it."""

    path: str
    name: str
    kind: str
    workloads: tuple
    base: dict
    params: dict
    grid: dict

    def points(self) -> list[Point]:
        """Every combination of the ``[grid]`` values (in file order) x every workload."""
        keys = list(self.grid)
        out = []
        combos = itertools.product(*(self.grid[k] for k in keys)) if keys else [()]
        for combo in combos:
            values = dict(zip(keys, combo))
            settings = dict(self.base)
            params = dict(self.params)
            for k, v in values.items():
                if k.startswith(PARAM_PREFIX):
                    params[k[len(PARAM_PREFIX):]] = v
                else:
                    settings[k] = v
            for w in self.workloads:
                ident = json.dumps({"kind": self.kind, "workload": w, "settings": settings,
                                    "params": params}, sort_keys=True)
                pid = hashlib.sha256(ident.encode()).hexdigest()[:16]
                out.append(Point(pid, len(out), self.kind, w, settings, params, values))
        return out


def _scalar_ok(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, (bool, int, str))


def _check_value(where: str, key: str, v) -> None:
    if isinstance(v, list):
        for x in v:
            _check_value(where, key, x)
        return
    if isinstance(v, dict):
        raise GridError(f"{where}: key {key!r} must be a value, not a table")
    if not _scalar_ok(v):
        raise GridError(f"{where}: key {key!r} has a value that is not finite: {v!r}")


def parse_grid(text: str, path: str = "<grid>") -> Grid:
    """Parse grid text; raise :class:`GridError` naming the table and key of a problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{path}: not valid TOML: {e}") from None
    extra = set(data) - _TABLES
    if extra:
        raise GridError(f"{path}: unknown table or key {sorted(extra)[0]!r} "
                        f"(expected [sweep], [base], [params], [grid])")
    for t in _TABLES & set(data):
        if not isinstance(data[t], dict):
            raise GridError(f"{path}: {t!r} must be a table ([{t}])")
    sw = data.get("sweep", {})
    bad = set(sw) - _SWEEP_KEYS
    if bad:
        raise GridError(f"{path}: [sweep] has unknown key {sorted(bad)[0]!r} "
                        f"(expected {', '.join(sorted(_SWEEP_KEYS))})")
    kind = sw.get("kind", "device")
    if kind not in KINDS:
        raise GridError(f"{path}: [sweep] kind must be one of {', '.join(KINDS)}, not {kind!r}")
    name = sw.get("name", Path(path).stem)
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise GridError(f"{path}: [sweep] name must be a plain folder name, not {name!r}")
    workloads = sw.get("workloads", ["default"] if kind == "device" else None)
    if workloads is None:
        raise GridError(f"{path}: [sweep] workloads is required for kind 'serve'")
    if isinstance(workloads, str):
        workloads = [workloads]
    if (not isinstance(workloads, list) or not workloads
            or not all(isinstance(w, str) and w for w in workloads)):
        raise GridError(f"{path}: [sweep] workloads must be a non-empty list of names, "
                        f"not {workloads!r}")
    if len(set(workloads)) != len(workloads):
        raise GridError(f"{path}: [sweep] workloads lists a name twice")
    base, params, grid = (data.get(t, {}) for t in ("base", "params", "grid"))
    for t, table in (("base", base), ("params", params)):
        for k, v in table.items():
            _check_value(f"{path}: [{t}]", k, v)
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise GridError(f"{path}: [grid] {k!r} must be a non-empty list of values, "
                            f"not {v!r}")
        _check_value(f"{path}: [grid]", k, v)
        if any(isinstance(x, list) for x in v):
            raise GridError(f"{path}: [grid] {k!r} values must be single values, not lists")
        if len({json.dumps(x) for x in v}) != len(v):
            raise GridError(f"{path}: [grid] {k!r} lists a value twice")
        if k == PARAM_PREFIX or (k.startswith(PARAM_PREFIX) and not k[len(PARAM_PREFIX):]):
            raise GridError(f"{path}: [grid] {k!r} names no parameter")
        inner = k[len(PARAM_PREFIX):] if k.startswith(PARAM_PREFIX) else k
        if k.startswith(PARAM_PREFIX) and inner in params:
            raise GridError(f"{path}: [grid] {k!r} is also fixed in [params]")
        if not k.startswith(PARAM_PREFIX) and k in base:
            raise GridError(f"{path}: [grid] {k!r} is also fixed in [base]")
    return Grid(path, name, kind, tuple(workloads), dict(base), dict(params), dict(grid))


def load_grid(path) -> Grid:
    """Read and parse a grid file; raise :class:`GridError` for an unreadable one."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise GridError(f"cannot read grid file {str(p)!r}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise GridError(f"{p}:{line}: not UTF-8 text") from None
    return parse_grid(text, str(p))
