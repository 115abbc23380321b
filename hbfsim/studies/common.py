"""Helpers the studies share: statistics, formatting, Markdown tables, figures, runs."""

from __future__ import annotations

import math

__all__ = ["GB", "figure", "fmt", "md_table", "p95", "pct", "run_closed", "study_config"]

GB = 1e9


def p95(values) -> int | None:
    """Nearest-rank 95th percentile (as model/stats.py)."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(0.95 * len(v)) - 1)]


def pct(new, old) -> float | None:
    """Relative change ``new / old - 1`` (None when undefined)."""
    if new is None or not old:
        return None
    return new / old - 1


def fmt(v, spec=",") -> str:
    """Format a table cell: ``-`` for None, thousands separators, floats to 3 places."""
    if v is None:
        return "-"
    if isinstance(v, float) and spec == ",":
        spec = ",.3f"
    return format(v, spec)


def md_table(header: list[str], rows: list[list]) -> str:
    """Return a Markdown table with ``header`` and one line per row."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def figure(w=10.0, h=4.2, ncols=2):
    """A matplotlib figure on the Agg canvas (no pyplot: no global state, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols) if ncols > 1 else [fig.subplots(1, 1)]
    return fig, list(axes)


def run_closed(cfg, program, record=False):
    """Run ``program`` closed loop through the GPU model on the configuration's engine
    (hbfsim.simulate; the reference where the compiled engine is not built, saying so once);
    return ``(result, stats)``. ``record`` keeps a RequestRecord per request in
    ``result.records`` (both engines: the same records)."""
    from hbfsim.simulate import choose_engine, say_once
    from hbfsim.simulate import run_closed as simulate_closed

    engine, note = choose_engine(cfg)
    say_once(note)
    fin = simulate_closed(cfg, program, engine, gpu=program.gpu, record=record)
    return fin.result, fin.stats


def study_config(study, task: dict):
    """The task's :class:`~hbfsim.config.HbfConfig`: the study's own keywords
    (``study.config_kwargs(task)``) and the user's ``hbfsim study --set`` values, which the
    runner put in ``task["config_set"]`` after checking that none is a key the study sets."""
    from hbfsim.config import load_config

    return load_config(**study.config_kwargs(task), **(task.get("config_set") or {}))
