"""Validation of ``hbfsim serve`` against published H100 / H200 measurements (issue 25).

    python -m hbfsim.serve.validate                 # the table, calibration and held-out errors
    python -m hbfsim.serve.validate --fit           # refit the globals on the calibration set
    python -m hbfsim.serve.validate --write-doc     # regenerate docs/validation-serving.md's table

Reads ``serve/data/validation.toml`` (each point: source, setup, published figure, and its
set, fixed before any fit: ``calibration``, ``held-out``, or ``held-out-2`` / ``held-out-3``,
held-out groups added after the fit and never seen by it), writes for every point a Mooncake trace
of its requests (all at time 0, exactly ISL input and OSL output tokens, no shared prefix)
and a model file (the preset's shape at the run's weight and KV dtype) under ``--out``
(default ``build/validation``), runs the ``hbfsim serve`` command printed in the table, and
compares the simulated figure with the published one. ``--fit`` minimizes the sum of squared
log ratios over the calibration points only, by coordinate search within physical bounds,
and writes serve/data/calibration.toml. Errors: geometric mean of ``|ratio - 1|`` and the
worst point, per set. Metrics (:data:`METRICS`): output tokens per second of the whole run,
the median first-token latency, the mean time per output token, and the latency of the
whole run (a batch of requests all at time 0, as ``benchmark_latency`` measures it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tomllib
from importlib import resources
from pathlib import Path

__all__ = ["BOUNDS", "MAX_REQUESTS", "SETS", "METRICS", "load_points", "trace_requests",
           "prepare", "simulate_point", "errors", "format_table", "fit", "main"]

#: Requests per point at most (the published counts are kept in the data file).
MAX_REQUESTS = 3000
#: Batch limits of every point whose source states none (docs/validation-serving.md,
#: "Setup"); a source's ``max_batch`` / ``max_tokens`` replace them.
MAX_BATCH, MAX_TOKENS = 2048, 8192
#: Physical bounds of the fitted globals (serve/calibration.py FITTED).
BOUNDS = {"fp8_compute_efficiency": (0.3, 0.95), "h100_mem_efficiency": (0.5, 1.0),
          "h200_mem_efficiency": (0.5, 1.0), "overlap_loss": (0.0, 1.0),
          "step_overhead_s": (0.0, 0.02), "link_latency_s": (0.0, 2e-5),
          "moe_efficiency": (0.1, 1.0)}
#: Requests per point while fitting: the table's own, so that the fit minimizes what the
#: table reports.
FIT_REQUESTS = MAX_REQUESTS
_HBM = {"h100": (5, "hbm3"), "h200": (6, "hbm3e")}
#: The sets of points: the fit reads ``calibration`` only; ``held-out`` was split off before
#: the first fit, ``held-out-2`` added after the last one (never seen by any fit),
#: ``held-out-3`` after the fix of experts sharded by TP (``ep < tp``), globals unchanged.
SETS = ("calibration", "held-out", "held-out-2", "held-out-3")
#: Metric name -> unit in the table.
METRICS = {"output_tok_s": "out tok/s", "ttft_ms": "ms", "tpot_ms": "ms/token",
           "latency_ms": "ms"}
DOC = Path("docs/validation-serving.md")
BEGIN, END = "<!-- validation table: begin -->", "<!-- validation table: end -->"


def load_points(path=None) -> dict:
    """The validation data file as a dict (``sources``, ``models``, ``points``)."""
    if path is None:
        text = resources.files("hbfsim.serve").joinpath("data", "validation.toml").read_text()
    else:
        text = Path(path).read_text()
    data = tomllib.loads(text)
    for name, src in data["sources"].items():
        if src["metric"] not in METRICS:
            raise ValueError(f"source {name}: metric must be one of {', '.join(METRICS)}, "
                             f"not {src['metric']!r}")
    for pt in data["points"]:
        if pt["set"] not in SETS:
            raise ValueError(f"point {pt['id']}: set must be one of {', '.join(SETS)}, "
                             f"not {pt['set']!r}")
        if pt["source"] not in data["sources"]:
            raise ValueError(f"point {pt['id']}: unknown source {pt['source']!r}")
        if "published_requests" not in pt and "trace_requests" not in pt:
            raise ValueError(f"point {pt['id']}: needs published_requests or trace_requests")
        c = pt.get("concurrency")
        if c is not None and (not isinstance(c, int) or c < 1
                              or trace_requests(pt) % c):
            raise ValueError(f"point {pt['id']}: concurrency must be an integer >= 1 that "
                             f"divides its {trace_requests(pt)} requests, not {c!r}")
        ep = pt.get("ep")
        if ep is not None and (isinstance(ep, bool) or not isinstance(ep, int) or ep < 1
                               or pt["tp"] % ep):
            raise ValueError(f"point {pt['id']}: ep must be an integer that divides its "
                             f"tp = {pt['tp']}, not {ep!r}")
        if "dpa" in pt and not isinstance(pt["dpa"], bool):
            raise ValueError(f"point {pt['id']}: dpa must be true or false, not {pt['dpa']!r}")
        if "metric" in pt and pt["metric"] not in METRICS:
            raise ValueError(f"point {pt['id']}: metric must be one of {', '.join(METRICS)}, "
                             f"not {pt['metric']!r}")
    return data


def metric_of(data, pt) -> str:
    """The point's metric: its own ``metric`` key, else its source's."""
    return pt.get("metric", data["sources"][pt["source"]]["metric"])


def trace_requests(pt, max_requests: int = MAX_REQUESTS) -> int:
    """Requests in the point's trace: ``trace_requests`` where the source publishes no count
    (a concurrency-1 run: every request runs alone, so one stands for all), else the
    published count, at most ``max_requests``."""
    return min(pt.get("trace_requests", pt.get("published_requests")), max_requests)


def _shape(data, pt):
    from hbfsim.shapes import ModelShape, model_shape

    name = pt["model"]
    spec = data.get("models", {}).get(name)
    base = model_shape(dict(name=name, **spec)) if spec else model_shape(name)
    fp8 = data["sources"][pt["source"]]["dtype"] == "fp8"
    d = dataclasses.asdict(base)
    d.update(name=f"{name}-{'fp8' if fp8 else 'bf16'}", dtype_bytes=1 if fp8 else 2,
             kv_dtype_bytes=1 if fp8 else 2)
    return ModelShape(**d)


def prepare(data: dict, pt: dict, out: Path, max_requests: int = MAX_REQUESTS) -> tuple:
    """Write the point's trace and model files under ``out``; return ``(settings, command)``."""
    from hbfsim.serve.traces import MOONCAKE_BLOCK_TOKENS

    out.mkdir(parents=True, exist_ok=True)
    shape = _shape(data, pt)
    model_file = out / f"{shape.name}.json"
    model_file.write_text(json.dumps(dataclasses.asdict(shape), indent=1) + "\n")
    n = trace_requests(pt, max_requests)
    if "concurrency" in pt:
        # A fixed-concurrency client: the workload spec replaces a trace file.
        trace = (f"closed-loop:users={pt['concurrency']},requests={n // pt['concurrency']},"
                 f"input={pt['isl']},output={pt['osl']}")
    else:
        full = n == trace_requests(pt)
        trace = out / f"{pt['id']}{'' if full else '-fit'}.jsonl"
        blocks = -(-pt["isl"] // MOONCAKE_BLOCK_TOKENS)
        with trace.open("w") as f:
            for i in range(n):
                f.write(json.dumps({"timestamp": 0, "input_length": pt["isl"],
                                    "output_length": pt["osl"],
                                    "hash_ids": list(range(i * blocks, (i + 1) * blocks)),
                                    }) + "\n")
    hbm, stack = _HBM[pt["gpu"]]
    src = data["sources"][pt["source"]]
    moe = shape.experts > 0
    # MoE: expert parallelism over the TP group and attention data parallelism (the
    # TensorRT-LLM points) unless the point states its engine's (vLLM shards experts by TP:
    # ``ep = 1``, ``dpa = false``).
    ep = pt.get("ep", pt["tp"]) if moe else None
    dpa = bool(pt.get("dpa", moe))
    # The engine's batch limits where the source states them, else the page's defaults.
    max_batch, max_tokens = src.get("max_batch", MAX_BATCH), src.get("max_tokens", MAX_TOKENS)
    s = {"model": str(model_file), "gpu": pt["gpu"], "gpus": pt["gpus"], "tp": pt["tp"],
         "hbm": hbm, "hbf": 0, "hbm_stack": stack, "dtype": src["dtype"],
         "scheduler": "fcfs", "max_batch": max_batch, "max_tokens": max_tokens,
         "workload": str(trace), "dpa": dpa, "ep": ep,
         "cost_model": "calibrated", "reserve_output": src.get("reserve_output", False)}
    ep_dpa = (f" --ep {ep}" if moe else "") + (" --dpa" if dpa else "")
    cmd = (f"hbfsim serve --model {model_file} --gpu {pt['gpu']} --gpus {pt['gpus']} "
           f"--tp {pt['tp']}{ep_dpa} "
           f"--hbm {hbm} --hbf 0 --hbm-stack {stack} --dtype {src['dtype']} --scheduler fcfs "
           f"--max-batch {max_batch} --max-tokens {max_tokens}"
           f"{' --reserve-output' if s['reserve_output'] else ''} --workload {trace}")
    return s, cmd


def metric_value(metric: str, r: dict) -> float:
    """The figure ``metric`` (:data:`METRICS`) of a run's summary ``r``: ``output_tok_s``
    (output tokens per second of the whole run), ``ttft_ms`` (median first-token latency),
    ``tpot_ms`` (mean time per output token after the first, over requests: what
    genai-perf and AIPerf call inter-token latency), ``latency_ms`` (the whole run, from
    time 0 to the last completion: a batch's end-to-end latency)."""
    if metric == "output_tok_s":
        return r["output_tok_s"]
    if metric == "ttft_ms":
        return r["ttft_s"]["p50"] * 1e3
    if metric == "tpot_ms":
        return r["tpot_ms"]["mean"]
    if metric == "latency_ms":
        return r["completion_s"] * 1e3
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")


def simulate_point(data, pt, settings, values=None) -> float:
    """The simulated figure of the point's metric (:func:`metric_value`)."""
    from hbfsim.serve.run import run_serving

    return metric_value(metric_of(data, pt), run_serving(settings, cost_values=values))


def errors(rows, which: str) -> dict:
    """Geometric mean of ``|ratio - 1|`` and the worst point over the rows of set ``which``."""
    sel = [r for r in rows if r["set"] == which]
    if not sel:
        return {"n": 0, "geomean": math.nan, "worst": math.nan, "worst_id": ""}
    dev = [abs(r["ratio"] - 1) for r in sel]
    g = math.exp(sum(math.log(max(d, 1e-6)) for d in dev) / len(dev))
    w = max(range(len(sel)), key=lambda i: dev[i])
    return {"n": len(sel), "geomean": g, "worst": sel[w]["ratio"], "worst_id": sel[w]["id"]}


def run_all(data, out: Path, values=None, only_set=None, progress=False,
            max_requests=MAX_REQUESTS, cost_model="calibrated"):
    """Simulate every point (of set ``only_set``); one row per point."""
    rows = []
    for pt in data["points"]:
        if only_set and pt["set"] != only_set:
            continue
        s, cmd = prepare(data, pt, out, max_requests)
        if cost_model != "calibrated":
            s["cost_model"] = cost_model
            cmd += f" --cost-model {cost_model}"
        sim = simulate_point(data, pt, s, values)
        rows.append({"id": pt["id"], "set": pt["set"], "measured": float(pt["measured"]),
                     "simulated": sim, "ratio": sim / pt["measured"], "command": cmd,
                     "metric": metric_of(data, pt), "pt": pt})
        if progress:
            print(f"  {pt['id']:<30} {pt['measured']:>10,.0f} {sim:>12,.1f} "
                  f"{sim / pt['measured']:.3f}", file=sys.stderr)
    return rows


def format_table(data, rows) -> str:
    """The Markdown table of the validation page, then the error summary."""
    out = ["| id | set | source (table / row / column) | setup | metric | measured | "
           "simulated | ratio |", "|---|---|---|---|---|---:|---:|---:|"]
    for r in rows:
        pt = r["pt"]
        src = data["sources"][pt["source"]]
        where = f"[{pt['source']}]({src['url']}): {pt['table']} / {pt['row']} / {pt['column']}"
        setup = (f"{pt['model']} {src['dtype'].upper()}, {pt['gpus']} x {pt['gpu'].upper()} "
                 f"TP{pt['tp']}, ISL/OSL {pt['isl']}/{pt['osl']}, "
                 f"{trace_requests(pt)} requests")
        m = r["measured"]       # as published: every digit, no trailing ".0"
        measured = f"{m:,.0f}" if m == int(m) else f"{m:,}"
        out.append(f"| {r['id']} | {r['set']} | {where} | {setup} | {METRICS[r['metric']]} | "
                   f"{measured} | {r['simulated']:,.1f} | {r['ratio']:.3f} |")
    out.append("")
    for which in SETS:
        e = errors(rows, which)
        out.append(f"- **{which}** ({e['n']} points): geometric-mean |ratio - 1| = "
                   f"{100 * e['geomean']:.1f} %, worst point {e['worst_id']} at ratio "
                   f"{e['worst']:.3f}")
    out += ["", "The command of each point (its trace and model files are written by the "
            "script):", ""]
    out += [f"    {r['id']}: {r['command']}" for r in rows]
    return "\n".join(out)


def _objective(data, out, values):
    rows = run_all(data, out, values, only_set="calibration", max_requests=FIT_REQUESTS)
    return sum(math.log(r["ratio"]) ** 2 for r in rows)


def fit(data, out: Path, start: dict, sweeps: int = 1, steps: int = 5, log=print) -> dict:
    """Coordinate search of the fitted globals on the calibration points only.

    Each sweep refines every parameter in turn by a golden-section search over its bounds
    (:data:`BOUNDS`, narrowed around the current value after the first sweep), keeping the
    others fixed; objective: sum over calibration points of ``log(simulated / measured)^2``.
    """
    v = dict(start)
    best = _objective(data, out, v)
    log(f"fit: start {best:.4f}")
    phi = (math.sqrt(5) - 1) / 2
    for sweep in range(sweeps):
        for k, (lo0, hi0) in BOUNDS.items():
            # The first sweep searches a quarter of the bounds around the start (the previous
            # fit), later ones narrower.
            span = (hi0 - lo0) / 4 ** (sweep + 1)
            lo, hi = max(lo0, v[k] - span / 2), min(hi0, v[k] + span / 2)
            a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
            fa = _objective(data, out, {**v, k: a})
            fb = _objective(data, out, {**v, k: b})
            for _ in range(steps):
                if fa < fb:
                    hi, b, fb = b, a, fa
                    a = hi - phi * (hi - lo)
                    fa = _objective(data, out, {**v, k: a})
                else:
                    lo, a, fa = a, b, fb
                    b = lo + phi * (hi - lo)
                    fb = _objective(data, out, {**v, k: b})
            x, fx = (a, fa) if fa < fb else (b, fb)
            if fx < best:
                v[k], best = x, fx
            log(f"fit: sweep {sweep + 1} {k} = {v[k]:.6g}  objective {best:.4f}")
    return v


def _write_calibration(values, rows, path):
    ids = ", ".join(f'"{r["id"]}"' for r in rows if r["set"] == "calibration")
    lines = ["# Global cost-model parameters fitted by `python -m hbfsim.serve.validate --fit` "
             "on the", "# calibration points of serve/data/validation.toml only (never the "
             "held-out ones).", "[fit]", 'status = "fitted"',
             'objective = "sum over calibration points of log(simulated / measured)^2"',
             f"points = [{ids}]", "", "[params]"]
    lines += [f"{k} = {values[k]:.6g}" for k in BOUNDS]
    Path(path).write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hbfsim.serve.validate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/validation", help="folder for traces and models")
    ap.add_argument("--fit", action="store_true", help="refit on the calibration set and "
                    "write serve/data/calibration.toml")
    ap.add_argument("--cost-model", default="calibrated", choices=("calibrated", "roofline"),
                    help="cost model of the table (roofline: the model before issue 25)")
    ap.add_argument("--write-doc", action="store_true", help="replace the table in "
                    f"{DOC} (between its markers)")
    a = ap.parse_args(argv)
    from hbfsim.serve.calibration import fitted_values

    data = load_points()
    out = Path(a.out)
    if a.fit:
        values = fit(data, out, fitted_values(), log=lambda m: print(m, file=sys.stderr))
        here = Path(__file__).resolve().parent / "data" / "calibration.toml"
        rows = run_all(data, out, values)
        _write_calibration(values, rows, here)
    rows = run_all(data, out, progress=True, cost_model=a.cost_model)
    table = format_table(data, rows)
    print(table)
    if a.write_doc:
        if a.cost_model != "calibrated":
            raise SystemExit("--write-doc writes the calibrated table only")
        text = DOC.read_text()
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        DOC.write_text(text[:i] + "\n" + table + "\n" + text[j:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
