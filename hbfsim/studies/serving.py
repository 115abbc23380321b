"""LLM serving on an HBM-HBF-host hierarchy (serving paper, Tables 4-7).

Every configuration of the serving paper's Tables 4, 5 and 6 is one ``hbfsim serve`` run: the
command's own parser turns the arguments into settings as serve/cli.py ``run_cli`` does, and
:func:`hbfsim.serve.run.run_serving` serves them (so a row is what the command prints for the
arguments in its ``command`` column), once with the HBF tier
characterized on the device model (``--hbf-model device``, profile ``hbf-serving``) and once
with the source's Table 1 constants (``--hbf-model constant``); HBM-only rows have no HBF
tier and run once. Workloads are the agentic presets of serve/agentic.py at a per-trace
``scale`` (docs/serving-workloads.md); docs/results-serving.md discusses the results.

The device runs are the HBF stack's characterization (profile ``hbf-serving``), on the
engine ``hbfsim study serving --engine`` names (in :meth:`tasks`: a cached entry only if made
on it, else recomputed; each run's ``hbf_timing`` column names the engine that made it) or the
profile's default; the serving simulation is this package's Python on either engine.
"""

from __future__ import annotations

import math

from hbfsim.studies.base import Study
from hbfsim.studies.common import figure, md_table

__all__ = ["Serving", "STUDY", "PUBLISHED", "SCALES"]

#: HBF timing models: the device model's characterization and the serving paper's Table 1
#: constants.
HBF_MODELS = ("device", "constant")
#: The HbfConfig profile the device model characterizes (hbfsim/config.py, PROFILES).
DEVICE_PROFILE = "hbf-serving"

#: Fraction of each preset's turns (serving paper Table 3: 25k / 100k / 500k) a sweep runs.
#: The quick sweep keeps CI in seconds; the full one runs the paper's turn counts except the
#: 500k trace, cut to a fifth (100k turns of the extended sessions) to fit the 2-core
#: machine's budget.
SCALES = {
    True: {"agentic-qwen32b": 0.04, "agentic-100k": 0.01, "agentic-500k": 0.002},
    False: {"agentic-qwen32b": 1.0, "agentic-100k": 1.0, "agentic-500k": 0.2},
}

SCHEDULER_LABELS = {"fcfs": "FCFS", "cache-aware": "Cache aware",
                    "buffered": "Cache aware, 10%"}

# serving paper Table 4: Qwen3-32B, 1 GPU, TP1, 25k turns, HBM weights. Per row: clock (s), energy
# (MJ), HBM KV writes (TB), HBF KV writes (TB), device hit (%), host hit (%), life (years).
_T4 = {
    ("8 HBM", "fcfs"): (19033.77, 2.323, 158.54, 0.00, 0.16, 96.36, None),
    ("8 HBM", "cache-aware"): (18479.17, 2.274, 148.41, 0.00, 6.61, 89.92, None),
    ("8 HBM", "buffered"): (16313.41, 2.245, 69.35, 0.00, 56.79, 39.73, None),
    ("4 HBM + 4 HBF", "fcfs"): (23228.20, 2.983, 8.23, 147.15, 7.30, 89.23, 0.75),
    ("4 HBM + 4 HBF", "cache-aware"): (20821.73, 2.849, 7.91, 93.00, 41.72, 54.80, 1.06),
    ("4 HBM + 4 HBF", "buffered"): (16614.28, 2.703, 6.89, 7.48, 96.06, 0.47, 10.57),
}
_T4_KEYS = ("completion_s", "energy_mj", "hbm_kv_writes_tb", "hbf_kv_writes_tb",
            "device_hit_pct", "host_hit_pct", "hbf_life_years")

PUBLISHED = {
    "table4": {f"{m} / {s}": dict(zip(_T4_KEYS, v)) for (m, s), v in _T4.items()},
    # serving paper Table 5: Llama-3.1-405B, 8 GPUs, TP8, 100k turns, 10 % buffer.
    "table5": {
        "8+0, HBM weights": {"completion_s": 39666, "energy_mj": 53.60, "tpot_ms": 90.85},
        "H3 8+8, HBM weights": {"completion_s": 21439, "energy_mj": 40.70, "tpot_ms": 438.61},
        "H3 8+8, HBF weights": {"completion_s": 21423, "energy_mj": 42.06, "tpot_ms": 438.27},
    },
    # serving paper Table 6: GLM-5.2, 16 GPUs, 10 % buffer; the 100k (original) and 500k (extended)
    # traces.
    "table6": {
        "agentic-100k": {
            "HBM-only 8+0 TP16, HBM weights": {"completion_s": 11354, "energy_mj": 9.11,
                                               "tpot_ms": 218.72},
            "H3 8+8 TP16, HBM weights": {"completion_s": 4543, "energy_mj": 7.19,
                                         "tpot_ms": 279.15},
            "H3 8+8 TP16, HBF weights": {"completion_s": 4538, "energy_mj": 9.54,
                                         "tpot_ms": 278.01},
            "H3 8+8 TP8, HBF weights": {"completion_s": 4204, "energy_mj": 10.31,
                                        "tpot_ms": 230.67},
            "H3 8+8 TP8, split weights": {"completion_s": 4433, "energy_mj": 7.79,
                                          "tpot_ms": 252.61},
        },
        "agentic-500k": {
            "HBM-only 8+0 TP16, HBM weights": {"completion_s": 198411, "energy_mj": 91.99,
                                               "tpot_ms": 191.93},
            "H3 8+8 TP16, HBM weights": {"completion_s": 28279, "energy_mj": 37.62,
                                         "tpot_ms": 355.63},
            "H3 8+8 TP16, HBF weights": {"completion_s": 27036, "energy_mj": 48.17,
                                         "tpot_ms": 333.66},
            "H3 8+8 TP8, HBF weights": {"completion_s": 24385, "energy_mj": 52.06,
                                        "tpot_ms": 280.43},
            "H3 8+8 TP8, split weights": {"completion_s": 25661, "energy_mj": 40.89,
                                          "tpot_ms": 307.66},
        },
    },
    # Serving paper Table 7: net energy savings relative to the same model's and trace's
    # HBM-only run, percent (8+8: H3 with HBM weights; 6+2 and 4+4: shared sites, expert
    # placement). Its per-contribution entries are not in the text we have.
    "table7_net_pct": {"Llama 8+8 100k": 24.06, "GLM 6+2 100k": 15.58, "GLM 8+8 100k": 21.09,
                       "GLM 4+4 500k": 54.37, "GLM 8+8 500k": 59.10},
    # The serving paper's abstract: the fastest HBF systems cut completion time by
    # 36.1-87.7 % against HBM-only ones.
    "completion_reduction_pct": (36.1, 87.7),
}

# ---------------------------------------------------------------- the configurations
# (label, hbfsim serve arguments). Memory figures per GPU; the two packagings of the serving
# paper's Figure 2.
_QWEN = ["--model", "qwen3-32b", "--gpus", "1", "--weights", "hbm"]
_T4_MEMORY = {"8 HBM": ["--hbm", "8", "--hbf", "0"],
              "4 HBM + 4 HBF": ["--hbm", "4", "--hbf", "4", "--packaging", "shared"]}
_LLAMA = ["--model", "llama-3.1-405b", "--gpus", "8", "--tp", "8"]
_T5 = {"8+0, HBM weights": ["--hbm", "8", "--hbf", "0", "--weights", "hbm"],
       "H3 8+8, HBM weights": ["--hbm", "8", "--hbf", "8", "--packaging", "h3",
                               "--weights", "hbm"],
       "H3 8+8, HBF weights": ["--hbm", "8", "--hbf", "8", "--packaging", "h3",
                               "--weights", "hbf"]}
# Both GLM parallelisms use data-parallel attention (serving paper Table 3, "+ DPA").
_GLM = ["--model", "glm-5", "--gpus", "16", "--dpa"]
_H3 = ["--hbm", "8", "--hbf", "8", "--packaging", "h3"]
# TP16 is one 16-GPU replica with EP16, TP8 two 8-GPU replicas with EP8 (serving paper Table 6).
_T6 = {"HBM-only 8+0 TP16, HBM weights": ["--hbm", "8", "--hbf", "0", "--tp", "16",
                                          "--ep", "16", "--weights", "hbm"],
       "H3 8+8 TP16, HBM weights": _H3 + ["--tp", "16", "--ep", "16", "--weights", "hbm"],
       "H3 8+8 TP16, HBF weights": _H3 + ["--tp", "16", "--ep", "16", "--weights", "hbf"],
       "H3 8+8 TP8, HBF weights": _H3 + ["--tp", "8", "--ep", "8", "--weights", "hbf"],
       "H3 8+8 TP8, split weights": _H3 + ["--tp", "8", "--ep", "8", "--weights", "split"],
       # Shared-site expert placement (serving paper Table 6 caption, Figure 6 and Table 7's
       # "GLM 6+2" and "GLM 4+4" columns); the paper publishes only their Table 7 net savings.
       "shared 6+2 TP8, split weights": ["--hbm", "6", "--hbf", "2", "--packaging", "shared",
                                         "--tp", "8", "--ep", "8", "--weights", "split"],
       # Half the routed experts do not fit 96 GB of HBM (119 GB of weights per GPU); a
       # quarter does, as the source's selection fits the experts it keeps to the HBM.
       "shared 4+4 TP8, split weights": ["--hbm", "4", "--hbf", "4", "--packaging", "shared",
                                         "--tp", "8", "--ep", "8", "--weights", "split",
                                         "--split-fraction", "0.25"]}

#: The serving paper's Table 7 columns: (group, configuration) against the group's HBM-only row.
_T7 = {"Llama 8+8 100k": ("table5", "H3 8+8, HBM weights"),
       "GLM 6+2 100k": ("table6/agentic-100k", "shared 6+2 TP8, split weights"),
       "GLM 8+8 100k": ("table6/agentic-100k", "H3 8+8 TP16, HBM weights"),
       "GLM 4+4 500k": ("table6/agentic-500k", "shared 4+4 TP8, split weights"),
       "GLM 8+8 500k": ("table6/agentic-500k", "H3 8+8 TP16, HBM weights")}

#: What the serving paper models that the engine does not (yet); each is a difference the
#: results page names, not a row left out.
NOT_MODELED = {
    "dpa": "data-parallel attention (serving paper Table 3, DPA): KV capacity divides evenly "
           "(every GPU holds 1/p of its group's sequences); the calibrated cost model slows "
           "attention by the expected busiest-rank load of uniform placement, not a draw of "
           "real placements",
    "dsa": "GLM-5's sparse attention (DSA) is costed as dense attention over the whole "
           "context (exact up to its 2,048-token top-k, an upper bound beyond)",
    "split": "split placement keeps a fixed fraction of every layer's routed experts in HBM "
             "(--split-fraction: 0.5, and 0.25 on shared 4+4, where half does not fit), not "
             "the source's offline lookup of the hottest experts",
}

#: Shape check (b): an HBF configuration "finishes sooner" when its completion time is at
#: least 1 % below HBM-only's (the source's reductions are 36-88 %). Check (c) compares
#: which configuration is fastest and which leanest as the source does, with no tolerance
#: (its Table 5 times differ by 0.07 %), and reports both margins.
TOLERANCE = 0.01

_GROUPS = ("table5", "table6/agentic-100k", "table6/agentic-500k")


def _task(table, config, trace, scale, hbf_model, args, scheduler="buffered", group=None):
    """One task: a configuration, its trace and scale, the HBF model, the command line."""
    argv = list(args) + ["--scheduler", scheduler, "--headroom", "0.1",
                         "--workload", f"{trace}:scale={scale:g}"]
    if hbf_model == "device":
        argv += ["--hbf-model", "device", "--hbf-profile", DEVICE_PROFILE]
    elif hbf_model == "constant":
        argv += ["--hbf-model", "constant"]
    return dict(table=table, group=group or table, config=config, scheduler=scheduler,
                hbf_model=hbf_model, trace=trace, scale=scale, argv=argv)


def _models(args):
    """HBF models a configuration runs with: none without HBF stacks."""
    return HBF_MODELS if args[args.index("--hbf") + 1] != "0" else ("none",)


def _num(v):
    """A row value as a float (JSON writes NaN as null and infinity as ``"inf"``)."""
    if v is None or v == "":
        return math.nan
    if v == "inf":
        return math.inf
    return float(v)


def _cell(ours, pub=None, digits=2, scale=1.0):
    """``ours (published)`` for a table cell; ``-`` where a figure is missing."""
    def f(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        if isinstance(v, float) and math.isinf(v):
            return "inf"
        v *= scale
        return f"{v:,.{digits}f}"
    if pub is None:
        return f(ours)
    return f"{f(ours)} ({pub if isinstance(pub, str) else f(pub)})"


def _ratio(a, b):
    a, b = _num(a), _num(b)
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return None
    return a / b


def _order_of_magnitude(r):
    """'About an order of magnitude': within half a decade of 10x, 10**0.5 .. 10**1.5."""
    return r is not None and 10 ** 0.5 <= r <= 10 ** 1.5


class Serving(Study):
    """The serving paper's Tables 4-7 at a scale this machine runs, device vs constant HBF."""

    name = "serving"
    title = "LLM serving on an HBM-HBF-host hierarchy"
    source = "Tables 4-7"
    document = "the serving paper"
    reference = ""                 # the published figures are the paper's tables (PUBLISHED)
    results_page = "docs/results-serving.md"
    tasks_take_engine = True

    # ------------------------------------------------------------------ the sweep
    def tasks(self, quick: bool, engine: str | None = None) -> list:
        # Characterize the device model's stack once here (cached by its configuration's
        # hash: milliseconds when warm), so that the workers all find it in the cache; an
        # engine asked for runs it (an entry made on the other engine is recomputed:
        # characterize(same_engine=True)).
        from hbfsim.serve.run import hbf_timing

        hbf_timing("device", None, DEVICE_PROFILE, engine=engine)
        out = self._tasks(quick)
        for task in out:
            task["engine"] = engine
        return out

    def _tasks(self, quick: bool) -> list:
        sc = SCALES[bool(quick)]
        out = []
        for mem, margs in _T4_MEMORY.items():
            for sched in SCHEDULER_LABELS:
                for m in _models(margs):
                    out.append(_task("table4", mem, "agentic-qwen32b", sc["agentic-qwen32b"],
                                     m, _QWEN + margs, sched))
        for cfg, cargs in _T5.items():
            for m in _models(cargs):
                out.append(_task("table5", cfg, "agentic-100k", sc["agentic-100k"], m,
                                 _LLAMA + cargs))
        for trace in ("agentic-100k", "agentic-500k"):
            for cfg, cargs in _T6.items():
                for m in _models(cargs):
                    out.append(_task("table6", cfg, trace, sc[trace], m, _GLM + cargs,
                                     group=f"table6/{trace}"))
        return out

    def run(self, task: dict) -> list:
        import argparse

        from hbfsim.serve import cli
        from hbfsim.serve.report import flatten
        from hbfsim.serve.run import DEFAULTS, run_serving

        # The command's own parser and settings, then its entry point (serve/cli.py run_cli):
        # a row is what `hbfsim serve` prints for the arguments in its "command" column.
        ap = argparse.ArgumentParser(prog="hbfsim")
        cli.register(ap.add_subparsers(dest="cmd"))
        a = ap.parse_args(["serve", *task["argv"]])
        settings = {k: getattr(a, k) for k in DEFAULTS if k != "cache"}
        settings["cache"] = not a.no_cache
        head = {k: task[k] for k in ("table", "group", "config", "scheduler", "hbf_model",
                                     "trace", "scale")}
        head["command"] = "hbfsim serve " + " ".join(task["argv"])
        try:
            s = run_serving(settings, label=lambda k: "--" + k.replace("_", "-"),
                            engine=task.get("engine"))
        except ValueError as e:   # the command's own refusal, e.g. weights that do not fit
            return [dict(head, status=f"not run: {e}")]
        s.pop("energy_j")         # the same breakdown as energy_breakdown_mj, in joules
        # The summary's own labels keep their meaning under names that do not clash with the
        # task's keys (its "scheduler" is a label, its "hbf_model" the timing's source line).
        s["engine_host_s"] = s.pop("host_seconds", None)
        s["scheduler_label"] = s.pop("scheduler")
        s["hbf_timing"] = s.pop("hbf_model")
        return [dict(head, status="run", **flatten(s))]

    # ------------------------------------------------------------------ the summary
    def summarize(self, rows: list, quick: bool) -> dict:
        ran = [r for r in rows if r["status"] == "run"]
        by = {(r["group"], r["config"], r["scheduler"], r["hbf_model"]): r for r in ran}
        out = {"scales": SCALES[bool(quick)], "device_profile": DEVICE_PROFILE,
               "not_run": [{k: r[k] for k in ("group", "config", "hbf_model", "status")}
                           for r in rows if r["status"] != "run"],
               "not_modeled": NOT_MODELED, "published": PUBLISHED,
               "configurations": sorted({f"{r['group']}: {r['config']}"
                                         + (f" / {r['scheduler']}" if r["table"] == "table4"
                                            else "") for r in rows}),
               "rows_per_hbf_model": {m: sum(r["hbf_model"] == m for r in ran)
                                      for m in HBF_MODELS + ("none",)}}
        checks: dict = {"a_buffered_order_of_magnitude": {},
                        "b_hbf_finishes_sooner": {}, "c_fastest_not_most_efficient": {}}
        # (a) Table 4, 4 HBM + 4 HBF: buffered cache-aware vs FCFS, device hit and life.
        pf, pb = _T4[("4 HBM + 4 HBF", "fcfs")], _T4[("4 HBM + 4 HBF", "buffered")]
        for m in HBF_MODELS:
            f = by.get(("table4", "4 HBM + 4 HBF", "fcfs", m))
            b = by.get(("table4", "4 HBM + 4 HBF", "buffered", m))
            if not (f and b):
                continue
            hit = _ratio(b["device_hit"], f["device_hit"])
            life = _ratio(b["hbf_life_years"], f["hbf_life_years"])
            checks["a_buffered_order_of_magnitude"][m] = {
                "device_hit_fcfs": _num(f["device_hit"]), "device_hit_buffered":
                _num(b["device_hit"]), "device_hit_ratio": hit,
                "life_fcfs_years": _num(f["hbf_life_years"]),
                "life_buffered_years": _num(b["hbf_life_years"]), "life_ratio": life,
                "device_hit_holds": _order_of_magnitude(hit),
                "life_holds": _order_of_magnitude(life),
                "holds": _order_of_magnitude(hit) and _order_of_magnitude(life),
                "published": {"device_hit_ratio": pb[4] / pf[4], "life_ratio": pb[6] / pf[6]}}
        # (b) and (c) per long trace (Tables 5 and 6) and HBF model, over the configurations
        # the source states them for: Table 5's rows, and Figure 6's six GLM configurations,
        # which are Table 6's published rows ("HBF configurations finish sooner than HBM-only
        # serving. Among the plotted configurations, ..."). The shared-site rows, which the
        # source neither tabulates nor plots, get the same test as an extension beyond the
        # source (``beyond_source``), reported beside the checks, never folded into them.
        beyond: dict = {}
        for g in _GROUPS:
            plotted = set(_published_group(g))
            base = [r for r in ran if r["group"] == g and r["hbf_model"] == "none"]
            for m in HBF_MODELS:
                every = [r for r in ran if r["group"] == g and r["hbf_model"] == m]
                hbf = [r for r in every if r["config"] in plotted]
                other = [r for r in every if r["config"] not in plotted]
                key = f"{g}/{m}"
                if base and other:
                    beyond[key] = _sooner(other, base[0])
                if not hbf:
                    continue
                if base:
                    checks["b_hbf_finishes_sooner"][key] = {
                        **_sooner(hbf, base[0]), "published": _published_b(g)}
                fast = min(hbf, key=lambda r: _num(r["completion_s"]))
                eff = min(hbf, key=lambda r: _num(r["energy_mj"]))
                checks["c_fastest_not_most_efficient"][key] = {
                    "fastest": fast["config"], "fastest_s": _num(fast["completion_s"]),
                    "fastest_mj": _num(fast["energy_mj"]),
                    "most_efficient": eff["config"], "most_efficient_s":
                    _num(eff["completion_s"]), "most_efficient_mj": _num(eff["energy_mj"]),
                    # how much slower the leanest is, how much more the fastest spends
                    "time_margin": _num(eff["completion_s"]) / _num(fast["completion_s"]) - 1,
                    "energy_margin": _num(fast["energy_mj"]) / _num(eff["energy_mj"]) - 1,
                    "holds": fast["config"] != eff["config"],
                    "published": _published_c(g)}
        # A check holds when every case of it holds; "computed" says whether any case ran.
        out["checks"] = {k: {"computed": bool(v), "holds": bool(v) and all(
            x["holds"] for x in v.values()), "cases": v} for k, v in checks.items()}
        out["beyond_source"] = {"b_unplotted_hbf_finishes_sooner": {
            "computed": bool(beyond), "holds": bool(beyond) and all(
                x["holds"] for x in beyond.values()), "cases": beyond}}
        # serving paper Table 7: energy-savings contributions over the same trace's HBM-only run.
        t7 = {}
        from hbfsim.serve.energy import table7_contributions
        for col, (g, cfg) in _T7.items():
            base = [r for r in ran if r["group"] == g and r["hbf_model"] == "none"]
            for m in HBF_MODELS:
                r = by.get((g, cfg, "buffered", m))
                if base and r:
                    t7[f"{col}/{m}"] = table7_contributions(_energy(r), _energy(base[0]))
        out["table7"] = t7
        return out

    # ------------------------------------------------------------------ the figure
    def plot(self, rows, summary, path):
        fig, (ax, ax2) = figure(12.0, 4.8)
        ran = [r for r in rows if r["status"] == "run"]
        marks = {"table5": "o", "table6/agentic-100k": "s", "table6/agentic-500k": "^"}
        colors = {"device": "tab:blue", "constant": "tab:orange", "published": "k"}
        for g, mk in marks.items():
            base = [r for r in ran if r["group"] == g and r["hbf_model"] == "none"]
            if not base:
                continue
            t0, e0 = _num(base[0]["completion_s"]), _num(base[0]["energy_mj"])
            for m in HBF_MODELS:
                pts = [(_num(r["completion_s"]) / t0, _num(r["energy_mj"]) / e0)
                       for r in ran if r["group"] == g and r["hbf_model"] == m]
                if pts:
                    ax.scatter(*zip(*pts), marker=mk, color=colors[m],
                               s=55 if m == "device" else 20,
                               label=f"{g} hbfsim {m}")
            pub = _published_group(g)
            pb = next(iter(pub.values()))
            pts = [(v["completion_s"] / pb["completion_s"], v["energy_mj"] / pb["energy_mj"])
                   for k, v in pub.items() if v is not pb]
            ax.scatter(*zip(*pts), marker=mk, facecolors="none", edgecolors="k", s=45,
                       label=f"{g} source")
        ax.axvline(1.0, color="grey", ls=":", lw=0.8)
        ax.axhline(1.0, color="grey", ls=":", lw=0.8)
        ax.set_xlabel("completion time / HBM-only")
        ax.set_ylabel("energy / HBM-only")
        ax.set_title("HBF configurations vs HBM-only (serving paper Figure 6 style)")
        ax.legend(fontsize=6)
        # Hit rates per scheduler: device hits, host hits stacked on them (serving paper Table 4).
        t4 = [r for r in ran if r["table"] == "table4"]
        labels, dev, host = [], {m: [] for m in HBF_MODELS + ("source",)}, \
            {m: [] for m in HBF_MODELS + ("source",)}
        for mem in _T4_MEMORY:
            for sch in SCHEDULER_LABELS:
                labels.append(f"{mem.replace(' + ', '+')}\n{SCHEDULER_LABELS[sch]}")
                for m in HBF_MODELS:
                    r = [x for x in t4 if x["config"] == mem and x["scheduler"] == sch
                         and x["hbf_model"] in (m, "none")]
                    dev[m].append(100 * _num(r[0]["device_hit"]) if r else math.nan)
                    host[m].append(100 * _num(r[0]["host_hit"]) if r else math.nan)
                dev["source"].append(_T4[(mem, sch)][4])
                host["source"].append(_T4[(mem, sch)][5])
        w = 0.27
        for i, (m, c) in enumerate(zip(dev, ("tab:blue", "tab:orange", "grey"))):
            xs = [x + (i - 1) * w for x in range(len(labels))]
            name = "source" if m == "source" else f"hbfsim {m}"
            ax2.bar(xs, dev[m], w, color=c, label=f"device hit, {name}")
            ax2.bar(xs, host[m], w, bottom=dev[m], color=c, alpha=0.35, hatch="//",
                    label=f"host hit, {name}")
        ax2.set_xticks(range(len(labels)), labels, fontsize=6)
        ax2.set_ylim(0, 115)
        ax2.set_ylabel("% of admitted input tokens")
        ax2.set_title("Qwen3-32B hit rates per scheduler (serving paper Table 4)")
        ax2.legend(fontsize=6, ncols=3, loc="upper center")
        fig.savefig(path, dpi=110)

    # ------------------------------------------------------------------ the report
    def report(self, rows, s) -> str:
        ran = [r for r in rows if r["status"] == "run"]
        sc = s["scales"]
        out = [f"Scales (fraction of each preset's turns): {sc['agentic-qwen32b']:g} of "
               f"agentic-qwen32b (25k), {sc['agentic-100k']:g} of agentic-100k, "
               f"{sc['agentic-500k']:g} of agentic-500k. Cells read `hbfsim (source)`; the "
               f"device model characterizes profile `{s['device_profile']}`, the constant "
               "model is serving paper Table 1; HBM-only rows have no HBF and run once.", ""]
        # Table 4
        t = []
        for mem in _T4_MEMORY:
            for sch, lab in SCHEDULER_LABELS.items():
                pub = _T4[(mem, sch)]
                for r in ran:
                    if r["table"] != "table4" or r["config"] != mem or r["scheduler"] != sch:
                        continue
                    t.append([mem, lab, r["hbf_model"], _cell(r["completion_s"], pub[0], 0),
                              _cell(r["energy_mj"], pub[1], 3),
                              _cell(r["hbm_kv_writes_tb"], pub[2]),
                              _cell(r["hbf_kv_writes_tb"], pub[3]),
                              _cell(_num(r["device_hit"]) * 100, pub[4]),
                              _cell(_num(r["host_hit"]) * 100, pub[5]),
                              _cell(_num(r["hbf_life_years"]), pub[6])])
        out += ["**Table 4** (Qwen3-32B, 1 GPU, TP1, HBM weights):", "",
                md_table(["memory", "scheduling", "HBF model", "clock s", "energy MJ",
                          "HBM KV TB", "HBF KV TB", "device hit %", "host hit %",
                          "life years"], t), ""]
        # Tables 5 and 6
        for g in _GROUPS:
            pub = _published_group(g)
            t = []
            cfgs = list(pub) + [c for c in (_T5 if g == "table5" else _T6) if c not in pub]
            for cfg in cfgs:
                p = pub.get(cfg, {})
                for r in [x for x in rows if x["group"] == g and x["config"] == cfg]:
                    if r["status"] != "run":
                        t.append([cfg, r["hbf_model"], r["status"], "", "", "", ""])
                        continue
                    t.append([cfg, r["hbf_model"], _cell(r["completion_s"],
                                                         p.get("completion_s", "n/p"), 0),
                              _cell(r["energy_mj"], p.get("energy_mj", "n/p")),
                              _cell(r["tpot_ms.mean"], p.get("tpot_ms", "n/p")),
                              _cell(_num(r["device_hit"]) * 100),
                              _cell(_num(r["hbf_life_years"]))])
            head = ("**Table 5** (Llama-3.1-405B, 8 GPUs, TP8, agentic-100k, 10 % buffer):"
                    if g == "table5" else f"**Table 6** (GLM-5 for GLM-5.2, 16 GPUs, "
                    f"{g.split('/')[1]}, 10 % buffer):")
            out += [head, "", md_table(["configuration", "HBF model", "time s", "energy MJ",
                                        "TPOT ms", "device hit %", "life years"], t), ""]
        # Table 7
        if s["table7"]:
            t = [[k, *(f"{v[c]:+.2f}" for c in ("reduced_weight_reads", "increased_kv_reads",
                                                "avoided_prefill", "other", "net")),
                  _cell(PUBLISHED["table7_net_pct"].get(k.rsplit("/", 1)[0]))]
                 for k, v in s["table7"].items()]
            out += ["**Table 7** (vs the trace's HBM-only run; 8+8 is H3 with HBM weights, "
                    "6+2 and 4+4 shared sites with split weights; percentage points of the "
                    "HBM-only energy, positive saves):", "",
                    md_table(["run", "weight reads", "KV reads", "avoided prefill", "other",
                              "net", "source net"], t), ""]
        out += ["**Shape checks**:", ""] + [f"- {x}" for x in _check_lines(s["checks"])]
        extra = _beyond_lines(s.get("beyond_source", {}))
        if extra:
            out += ["", "**Beyond the source** (check (b)'s test on the shared-site rows, which "
                    "the source neither tabulates nor plots):", ""] + [f"- {x}" for x in extra]
        if s["not_run"]:
            out += ["", "Not run:"] + [f"- {r['group']} {r['config']} ({r['hbf_model']}): "
                                       f"{r['status']}" for r in s["not_run"]]
        out += ["", "Not modeled by the engine:"] + [f"- {v}" for v in NOT_MODELED.values()]
        return "\n".join(out)

    def headline(self, s: dict) -> list[str]:
        c = s["checks"]
        out = []
        for key, what in (("a_buffered_order_of_magnitude", "buffered vs FCFS, 4+4 Qwen3-32B: "
                           "device hit and life x10"),
                          ("b_hbf_finishes_sooner", "HBF finishes long traces sooner"),
                          ("c_fastest_not_most_efficient", "fastest HBF is not the leanest")):
            v = c[key]
            held = sum(bool(x["holds"]) for x in v["cases"].values())
            out.append(f"({key[0]}) {what}: {'holds' if v['holds'] else 'does not hold'} "
                       f"({held}/{len(v['cases'])} cases)")
        for m, v in c["a_buffered_order_of_magnitude"]["cases"].items():
            out.append(f"    {m}: device hit {_fx(v['device_hit_ratio'])}, life "
                       f"{_fx(v['life_ratio'])} (source 13.2x, 14.1x)")
        v = s.get("beyond_source", {}).get("b_unplotted_hbf_finishes_sooner")
        if v and v["computed"]:
            held = sum(bool(x["holds"]) for x in v["cases"].values())
            out.append(f"(b') beyond the source, shared-site rows finish sooner: "
                       f"{'holds' if v['holds'] else 'does not hold'} "
                       f"({held}/{len(v['cases'])} cases)")
        return out


def _published_group(g):
    """The published rows of group ``g`` (Table 5, or Table 6 on one trace); HBM-only first."""
    return PUBLISHED["table5"] if g == "table5" else PUBLISHED["table6"][g.split("/")[1]]


def _sooner(hbf, base):
    """Check (b)'s test on rows ``hbf``: each finishes more than ``TOLERANCE`` sooner than the
    HBM-only row ``base`` of the same trace."""
    t0 = _num(base["completion_s"])
    red = {r["config"]: 1 - _num(r["completion_s"]) / t0 for r in hbf}
    return {"hbm_only": base["config"], "hbm_only_s": t0,
            "completion_s": {r["config"]: _num(r["completion_s"]) for r in hbf},
            "reduction": red, "best_reduction": max(red.values()),
            "holds": all(v > TOLERANCE for v in red.values())}


def _published_b(g):
    """Check (b) on the published figures: completion-time reduction of every HBF row."""
    rows = list(_published_group(g).items())
    t0 = rows[0][1]["completion_s"]
    red = {k: 1 - v["completion_s"] / t0 for k, v in rows[1:]}
    return {"reduction": red, "best_reduction": max(red.values()),
            "holds": all(v > TOLERANCE for v in red.values())}


def _published_c(g):
    """Check (c) on the published figures: the fastest and the least-energy HBF rows."""
    rows = list(_published_group(g).items())[1:]
    fast = min(rows, key=lambda kv: kv[1]["completion_s"])[0]
    eff = min(rows, key=lambda kv: kv[1]["energy_mj"])[0]
    return {"fastest": fast, "most_efficient": eff, "holds": fast != eff}


def _energy(r):
    """A row's energy breakdown in joules, as serve/energy.py's ``energy_breakdown`` keys."""
    e = {k.split(".", 1)[1]: _num(v) * 1e6 for k, v in r.items()
         if k.startswith("energy_breakdown_mj.")}
    e["total"] = _num(r["energy_mj"]) * 1e6
    return e


def _check_lines(c) -> list[str]:
    """One line per shape check and HBF model: holds / does not hold, with the figures."""
    def hold(x):
        return "holds" if x else "does not hold"

    out = []
    for m, v in c["a_buffered_order_of_magnitude"]["cases"].items():
        out.append(f"(a) {m}: buffered vs FCFS on 4 HBM + 4 HBF: device hit "
                   f"{v['device_hit_fcfs']:.1%} -> {v['device_hit_buffered']:.1%} "
                   f"({_fx(v['device_hit_ratio'])}, {hold(v['device_hit_holds'])}), life "
                   f"{_cell(v['life_fcfs_years'])} -> {_cell(v['life_buffered_years'])} y "
                   f"({_fx(v['life_ratio'])}, {hold(v['life_holds'])}); source 13.2x / "
                   f"14.1x: {hold(v['holds'])}")
    for k, v in c["b_hbf_finishes_sooner"]["cases"].items():
        red = v["reduction"]
        pub = v["published"]["reduction"]
        out.append(f"(b) {k}: HBF completion {min(red.values()):.1%} .. "
                   f"{max(red.values()):.1%} shorter than HBM-only (source "
                   f"{min(pub.values()):.1%} .. {max(pub.values()):.1%}): {hold(v['holds'])}")
    for k, v in c["c_fastest_not_most_efficient"]["cases"].items():
        out.append(f"(c) {k}: fastest HBF {v['fastest']} ({v['fastest_s']:,.0f} s, "
                   f"{v['fastest_mj']:.2f} MJ), least energy {v['most_efficient']} "
                   f"({v['most_efficient_s']:,.0f} s, {v['most_efficient_mj']:.2f} MJ; "
                   f"{v['time_margin']:.1%} slower, the fastest spends "
                   f"{v['energy_margin']:.1%} more): "
                   f"{hold(v['holds'])} (source: {v['published']['fastest']} / "
                   f"{v['published']['most_efficient']})")
    return out or ["no shape check could be computed"]


def _beyond_lines(b) -> list[str]:
    """One line per trace and HBF model for the checks beyond the source: each row's
    completion-time reduction against the trace's HBM-only row."""
    v = b.get("b_unplotted_hbf_finishes_sooner", {})
    return [f"(b') {k}: " + ", ".join(f"{cfg} {red:.1%}" for cfg, red in x["reduction"].items())
            + f" shorter than HBM-only: {'holds' if x['holds'] else 'does not hold'}"
            for k, x in v.get("cases", {}).items()]


def _fx(r):
    return "-" if r is None else f"{r:.2f}x"


STUDY = Serving()
