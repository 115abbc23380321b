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

A point is one combination x one workload. Its id (given by
:func:`hbfsim.sweep.points.identify`, not here) is a hash of its fully resolved run, so a
resumed sweep recognises finished points even if the grid gained or lost values, and an
edited configuration file is a new point. Keys are spelled either way (``page-stride`` or
``page_stride``, ``hbf_num_channels`` or ``channels``): one key is one key, and a value
listed twice by value (``15`` and ``15.0``) is refused. :meth:`Grid.size` counts the points
from the axes before anything is expanded.
"""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Grid", "GridError", "Point", "load_grid", "KINDS", "canonical_key", "param_key",
           "normal_value"]

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
        16 hex digits of a SHA-256 over the resolved run (:func:`hbfsim.sweep.points.identify`);
        empty until then.
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

    def size(self) -> int:
        """The number of points, from the axes alone (nothing is expanded)."""
        n = len(self.workloads)
        for v in self.grid.values():
            n *= len(v)
        return n

    def shape(self) -> str:
        """The product behind :meth:`size`, for messages: ``5 x 2 values x 3 workloads``."""
        axes = [f"{len(v)} {k}" for k, v in self.grid.items()]
        return " x ".join(axes + [f"{len(self.workloads)} workload(s)"])

    def points(self) -> list[Point]:
        """Every combination of the ``[grid]`` values (in file order) x every workload."""
        keys = list(self.grid)
        out = []
        combos = itertools.product(*(self.grid[k] for k in keys)) if keys else [()]
        for combo in combos:
            values = dict(zip(keys, combo))
            settings = {canonical_key(k, self.kind): v for k, v in self.base.items()}
            params = {param_key(k): v for k, v in self.params.items()}
            for k, v in values.items():
                if k.startswith(PARAM_PREFIX):
                    params[param_key(k[len(PARAM_PREFIX):])] = v
                else:
                    settings[canonical_key(k, self.kind)] = v
            for w in self.workloads:
                out.append(Point("", len(out), self.kind, w, settings, params, values))
        return out


def param_key(key: str) -> str:
    """A workload parameter's name as ``--param`` takes it: ``page-stride`` is
    ``page_stride``."""
    return key.strip().replace("-", "_")


def canonical_key(key: str, kind: str = "device") -> str:
    """One spelling per setting: kebab case as snake case (``hbf-model`` is ``hbf_model``,
    as on the command line), and for ``device`` the reference simulator's ``hbf_*`` alias
    as the key it names (``hbf_num_channels`` is ``channels``)."""
    k = key.strip().replace("-", "_")
    if kind == "device":
        from hbfsim.config import ALIASES

        k = ALIASES.get(k, k)
    return k


def normal_value(v):
    """A value as it compares: an integral float is its integer (``15.0`` is ``15``)."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [normal_value(x) for x in v]
    return v


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
        seen: dict = {}
        for x in v:
            norm = json.dumps(normal_value(x))
            if norm in seen:
                same = "" if repr(seen[norm]) == repr(x) else f" ({seen[norm]!r} and {x!r})"
                raise GridError(f"{path}: [grid] {k!r} lists a value twice{same}")
            seen[norm] = x
        if k == PARAM_PREFIX or (k.startswith(PARAM_PREFIX) and not k[len(PARAM_PREFIX):]):
            raise GridError(f"{path}: [grid] {k!r} names no parameter")
    _one_spelling(path, kind, base, params, grid)
    return Grid(path, name, kind, tuple(workloads), dict(base), dict(params), dict(grid))


def _one_spelling(path: str, kind: str, base: dict, params: dict, grid: dict) -> None:
    """Refuse one setting named twice under two spellings (``page-stride`` and
    ``page_stride``, ``hbf_num_channels`` and ``channels``), or fixed and swept."""
    fixed_s = {}
    for k in base:
        c = canonical_key(k, kind)
        if c in fixed_s:
            raise GridError(f"{path}: [base] {fixed_s[c]!r} and {k!r} are one key ({c})")
        fixed_s[c] = k
    fixed_p = {}
    for k in params:
        c = param_key(k)
        if c in fixed_p:
            raise GridError(f"{path}: [params] {fixed_p[c]!r} and {k!r} are one parameter "
                            f"({c})")
        fixed_p[c] = k
    swept: dict = {}
    for k in grid:
        is_param = k.startswith(PARAM_PREFIX)
        c = ("param", param_key(k[len(PARAM_PREFIX):])) if is_param else \
            ("key", canonical_key(k, kind))
        if c in swept:
            raise GridError(f"{path}: [grid] {swept[c]!r} and {k!r} are one "
                            f"{'parameter' if is_param else 'key'} ({c[1]})")
        swept[c] = k
        if is_param and c[1] in fixed_p:
            raise GridError(f"{path}: [grid] {k!r} is also fixed in [params]"
                            + ("" if fixed_p[c[1]] == c[1] else f" (as {fixed_p[c[1]]!r})"))
        if not is_param and c[1] in fixed_s:
            raise GridError(f"{path}: [grid] {k!r} is also fixed in [base]"
                            + ("" if fixed_s[c[1]] == k else f" (as {fixed_s[c[1]]!r})"))


def load_grid(path) -> Grid:
    """Read and parse a grid file; raise :class:`GridError` for an unreadable one."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise GridError(f"cannot read grid file {str(p)!r}: {e.strerror}") from None
    from hbfsim.textfile import decode

    return parse_grid(decode(raw, p, GridError), str(p))   # a UTF-8 BOM is accepted
