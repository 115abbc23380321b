"""The figures of a serving run (serving paper Tables 4-6): a dict, a summary, JSON, CSV.

Definitions (docs/serving.md, "Outputs"): completion time is the last turn's completion;
throughput counts input + output tokens of completed turns per second of completion time
(the source's Figure 1 metric) and output tokens separately; TTFT = first token - arrival;
TPOT = (completion - first token) / (output tokens - 1) per turn with at least two output
tokens (the source's Table 5 reports its mean); device / host hit rate = fraction of admitted
input tokens served from HBM or HBF / from host DRAM or SSD (Table 4), the rest recomputed.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from hbfsim.serve.energy import energy_breakdown, hbf_lifetime_years

__all__ = ["summarize", "format_summary", "to_json", "to_csv", "flatten"]


def _pct(a, q):
    return float(np.percentile(a, q)) if len(a) else math.nan


def summarize(run, node, cost, scheduler, workload, hbf_timing, meta: dict | None = None) -> dict:
    """The run's figures as a JSON-ready dict."""
    reps = run.replicas
    arrival = np.concatenate([r.arrival for r in reps]) if reps else np.zeros(0)
    first = np.concatenate([r.first for r in reps]) if reps else np.zeros(0)
    done = np.concatenate([r.done for r in reps]) if reps else np.zeros(0)
    turns = [t for r in reps for t in r.turns]
    n_out = np.array([t.output_tokens for t in turns], dtype=np.float64)
    n_in = np.array([t.input_tokens for t in turns], dtype=np.float64)
    ok = ~np.isnan(done)
    rejected = int(sum(int(r.rejected.sum()) for r in reps))
    ttft = (first - arrival)[ok]
    multi = ok & (n_out >= 2)
    tpot = (done[multi] - first[multi]) / (n_out[multi] - 1)
    clock = run.clock_s
    tokens = float(n_in[ok].sum() + n_out[ok].sum())
    adm = sum(r.admitted_tokens for r in reps)
    dev = sum(r.device_hit_tokens for r in reps)
    host = sum(r.host_hit_tokens for r in reps)
    e = energy_breakdown(run.tally, node)
    hbf_w = run.tally.written[1]
    life = math.nan
    if node.hbf.stacks:
        # Every GPU's HBF takes its share of the writes: capacity of all GPUs in use.
        cap = node.hbf.capacity * cost.tp * len(reps)
        life = hbf_lifetime_years(hbf_w, clock, cap, node.hbf.pe_cycles,
                                  hbf_timing.write_amplification if hbf_timing else 1.0)
    pages = reps[0].pages if reps else [0, 0, 0, 0]
    out = {
        "model": cost.model.name,
        "node": node.label,
        "gpu": node.gpu.name,
        "gpus": node.gpus,
        "tp": cost.tp,
        "ep": cost.ep,
        "dpa": cost.dpa,
        "replicas": len(reps),
        "weights": cost.weights,
        "scheduler": scheduler.label,
        "hbf_model": hbf_timing.source if (hbf_timing and node.hbf.stacks) else "none",
        "hbf_stack_gb": node.hbf.capacity / node.hbf.stacks / 1e9 if node.hbf.stacks else 0.0,
        "workload": workload.name,
        "turns": len(turns),
        "completed": int(ok.sum()),
        "rejected": rejected,
        "completion_s": clock,
        "throughput_tok_s": tokens / clock if clock > 0 else math.nan,
        "output_tok_s": float(n_out[ok].sum()) / clock if clock > 0 else math.nan,
        "ttft_s": {"p50": _pct(ttft, 50), "p95": _pct(ttft, 95), "p99": _pct(ttft, 99)},
        "tpot_ms": {"mean": float(tpot.mean() * 1e3) if len(tpot) else math.nan,
                    "p50": _pct(tpot, 50) * 1e3, "p95": _pct(tpot, 95) * 1e3,
                    "p99": _pct(tpot, 99) * 1e3},
        "energy_mj": e["total"] / 1e6,
        "energy_breakdown_mj": {k: v / 1e6 for k, v in e.items() if k != "total"},
        "hbm_kv_writes_tb": run.tally.written[0] / 1e12,
        "hbf_kv_writes_tb": hbf_w / 1e12,
        "device_hit": dev / adm if adm else 0.0,
        "host_hit": host / adm if adm else 0.0,
        "recomputed": (adm - dev - host) / adm if adm else 0.0,
        "hbf_life_years": life,
        "kv_pages": {"hbm": pages[0], "hbf": pages[1], "dram": pages[2], "ssd": pages[3]},
        "preemptions": sum(r.preemptions for r in reps),
        "iterations": sum(r.iterations for r in reps),
        "max_running": max((r.max_running for r in reps), default=0),
    }
    if meta:
        out.update(meta)
    return out


def _num(v, unit="", digits=2):
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded"
    return f"{v:,.{digits}f}{unit}"


def format_summary(s: dict) -> str:
    """The summary printed by ``hbfsim serve``."""
    t, p = s["ttft_s"], s["tpot_ms"]
    b = s["energy_breakdown_mj"]
    life = "— (no HBF)" if s["hbf_model"] == "none" else _num(s["hbf_life_years"], " years")
    lines = [
        f"hbfsim serve: {s['model']} on {s['gpus']} x {s['gpu']} ({s['node']}), TP{s['tp']}"
        f"{'/EP' + str(s['ep']) if s['ep'] > 1 else ''}{' + DPA' if s['dpa'] else ''}, "
        f"{s['replicas']} replica(s), "
        f"weights in {s['weights']}, {s['scheduler']}"
        + (f", {s['cost_model']} cost model" if "cost_model" in s else ""),
        f"  workload      {s['workload']}: {s['turns']:,} turns, {s['completed']:,} completed"
        f", {s['rejected']:,} rejected",
        f"  HBF timing    {s['hbf_model']}" + (
            f"; {s['hbf_stack_gb']:,.1f} GB per stack" if s["hbf_stack_gb"] else ""),
        f"  completion    {_num(s['completion_s'], ' s')}   throughput "
        f"{_num(s['throughput_tok_s'], ' tok/s', 0)} "
        f"(output {_num(s['output_tok_s'], ' tok/s', 0)})",
        f"  TTFT          p50 {_num(t['p50'], ' s', 3)}  p95 {_num(t['p95'], ' s', 3)}  "
        f"p99 {_num(t['p99'], ' s', 3)}",
        f"  TPOT          mean {_num(p['mean'], ' ms')}  p50 {_num(p['p50'], ' ms')}  "
        f"p95 {_num(p['p95'], ' ms')}  p99 {_num(p['p99'], ' ms')}",
        f"  energy        {_num(s['energy_mj'], ' MJ', 4)}: "
        f"weights {_num(b['weight_reads'], '', 4)}"
        f", KV reads {_num(b['kv_reads'], '', 4)}, KV writes+moves "
        f"{_num(b['kv_writes'] + b['kv_moves'], '', 4)}, prefill compute "
        f"{_num(b['compute_prefill'], '', 4)}, decode compute {_num(b['compute_decode'], '', 4)}"
        f", other {_num(b['special_functions'] + b['interconnect'], '', 4)}",
        f"  KV writes     HBM {_num(s['hbm_kv_writes_tb'], ' TB', 4)}  HBF "
        f"{_num(s['hbf_kv_writes_tb'], ' TB', 4)}",
        f"  hits          device {s['device_hit']:.2%}  host {s['host_hit']:.2%}  "
        f"recomputed {s['recomputed']:.2%}",
        f"  HBF life      {life}",
        f"  engine        {s['iterations']:,} events, {s['preemptions']:,} preemptions, "
        f"peak batch {s['max_running']}, KV pages HBM {s['kv_pages']['hbm']:,} HBF "
        f"{s['kv_pages']['hbf']:,}",
    ]
    if "host_seconds" in s:
        lines.append(f"  host time     {s['host_seconds']:.2f} s")
    return "\n".join(lines)


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else "inf"
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    return v


def to_json(s: dict) -> str:
    """JSON text (NaN -> null, infinity -> "inf")."""
    return json.dumps(_clean(s), indent=2) + "\n"


def flatten(s: dict) -> dict:
    """One flat row: nested keys joined with ``.``."""
    row = {}
    for k, v in s.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                row[f"{k}.{k2}"] = v2
        else:
            row[k] = v
    return row


def to_csv(rows: list) -> str:
    """CSV text of flattened summaries (header = union of keys, in first-seen order)."""
    flat = [flatten(r) for r in rows]
    keys = []
    for r in flat:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in flat:
        w.writerow(r)
    return buf.getvalue()
