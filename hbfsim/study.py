"""``hbfsim study NAME``: the source's studies as parallel parameter sweeps.

    hbfsim study NAME [--quick] [--out DIR] [--workers N] [--no-progress]
    python -m hbfsim.study NAME [...]            (the same, without the hbfsim command)

Studies (000_5f193da23ae2984d.txt §5.2-§6.2; REFERENCE §2c and §6):

=================  ==========================================================================
media-saturation   §5.4: 1-16 channels x 256/512/1024/2048 producers, fixed 32-slot control
mshr-feedback      §5.2: merging on/off, closed loop vs open-loop replay of the recorded ingress
placement          §6.1: interleave/grouped/contiguous; active-page striping vs interleave
rw-isolation       §6.2: FCFS, read priority, write drain, 1R/3W, 2R/2W, 3R/1W vs read start
page-service       §5.3: 64 pages, 1/4 channels, tR 1/15 us, burst and isolated arrivals
=================  ==========================================================================

Every study runs its runs in parallel processes (``ProcessPoolExecutor``, default one
worker per core) behind a tqdm progress bar and writes to ``results/<name>/`` (or
``--out``): ``runs.csv`` (one row per simulation), ``plot.png`` (matplotlib, Agg),
``summary.md`` (our figures beside the published ones) and ``summary.json``.
``--quick`` runs a reduced sweep in seconds (CI runs all five). :func:`run_study` is the
Python entry point; :func:`register` adds the ``study`` sub-command to a parser.
docs/results.md discusses every figure against the source.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["STUDIES", "main", "register", "run_cli", "run_study", "study_names"]

GB = 1e9


# ============================================================================ helpers
def _p95(values) -> int | None:
    """Nearest-rank 95th percentile (as model/stats.py)."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(0.95 * len(v)) - 1)]


def _pct(new, old) -> float | None:
    """Relative change ``new / old - 1`` (None when undefined)."""
    if new is None or not old:
        return None
    return new / old - 1


def _fmt(v, spec=",") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and spec == ",":
        spec = ",.3f"
    return format(v, spec)


def _md_table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _figure(w=10.0, h=4.2, ncols=2):
    """A matplotlib figure on the Agg canvas (no pyplot: no global state, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols) if ncols > 1 else [fig.subplots(1, 1)]
    return fig, list(axes)


def _closed(cfg, program, record=False):
    from hbfsim.model.gpu import run_closed_loop
    from hbfsim.model.stats import collect_stats

    res = run_closed_loop(cfg, program, gpu=program.gpu, record=record)
    return res, collect_stats(res.system)


# ============================================================================ studies
@dataclass(frozen=True)
class Study:
    """One study: its sweep, one task's simulation, the summary, the plot and the report."""

    name: str
    title: str
    source: str
    tasks: Callable[[bool], list]           # quick -> [task dict]
    run: Callable[[dict], list]             # task -> [row dict]
    summarize: Callable[[list, bool], dict]  # rows, quick -> summary
    plot: Callable[[list, dict, Path], None]
    report: Callable[[list, dict], str]     # markdown body


# ----------------------------------------------------------------------------- §5.4
MS_PUBLISHED = {
    "bandwidth_gbs": {1: 8.738, 2: 17.472, 4: 34.920, 8: 69.774, 16: 139.285},
    "producers_16ch_gbs": {256: 69.0, 512: 138.291, 1024: 139.285},
    "doubling_2048_change": 0.002,
    "fixed_32_slots_16ch_gbs": 8.738,
    "utilization": {1: 0.9999, 16: 0.9963},
    "sector_bandwidth_16ch_gbs": 1.088,
}


def _ms_tasks(quick: bool) -> list:
    chans = [1, 2, 4, 8, 16]
    if quick:
        tasks = [dict(channels=c, producers=1024, active_total=0) for c in chans]
        tasks += [dict(channels=16, producers=512, active_total=0),
                  dict(channels=16, producers=1024, active_total=32)]
        return tasks
    tasks = [dict(channels=c, producers=p, active_total=0)
             for p in (256, 512, 1024, 2048) for c in chans]
    tasks += [dict(channels=c, producers=1024, active_total=32) for c in chans]
    return tasks


def _ms_run(task: dict) -> list:
    from hbfsim.config import PAGE_BYTES, load_config
    from hbfsim.model.workloads import media_saturation

    c, p, at = task["channels"], task["producers"], task["active_total"]
    cfg = load_config(**media_saturation().config, channels=c, active_total=at)
    w = media_saturation(cfg, producers=p)
    res, s = _closed(cfg, w)
    stat_slots = cfg.channels * min(cfg.subarrays_per_channel, cfg.active_per_channel)
    slots = min(stat_slots, at) if at else stat_slots
    t_read_s = cfg.t_read_ticks / (cfg.memory_clock_khz * 1000)
    secs = s["window_ticks"] / (cfg.memory_clock_khz * 1000)
    return [dict(channels=c, producers=p, active_total=at, slots=slots,
                 requests=s["requests"], page_reads=s["page_reads"],
                 array_bandwidth_gbs=s["array_bandwidth_gbs"],
                 ceiling_gbs=slots * PAGE_BYTES / t_read_s / GB,
                 media_utilization=s["media_utilization"] * stat_slots / slots,
                 sector_bandwidth_gbs=s["requested_read_bytes"] / secs / GB,
                 window_us=s["window_us"], span_gpu_cycles=res.span_gpu_cycles)]


def _ms_summary(rows: list, quick: bool) -> dict:
    main = {r["channels"]: r for r in rows if r["producers"] == 1024 and not r["active_total"]}
    fixed = {r["channels"]: r for r in rows if r["active_total"] == 32}
    p16 = {r["producers"]: r for r in rows if r["channels"] == 16 and not r["active_total"]}
    bw = {c: main[c]["array_bandwidth_gbs"] for c in sorted(main)}
    out = {
        "bandwidth_gbs": bw,
        "ceiling_gbs": {c: main[c]["ceiling_gbs"] for c in sorted(main)},
        "fraction_of_ceiling": {c: main[c]["array_bandwidth_gbs"] / main[c]["ceiling_gbs"]
                                for c in sorted(main)},
        "utilization": {c: main[c]["media_utilization"] for c in sorted(main)},
        "scaling_1_to_16": bw[16] / bw[1] if 1 in bw and 16 in bw else None,
        "producers_16ch_gbs": {p: p16[p]["array_bandwidth_gbs"] for p in sorted(p16)},
        "fixed_32_slots_gbs": {c: fixed[c]["array_bandwidth_gbs"] for c in sorted(fixed)},
        "sector_bandwidth_16ch_gbs": main[16]["sector_bandwidth_gbs"] if 16 in main else None,
        "published": MS_PUBLISHED,
    }
    if 1024 in p16 and 2048 in p16:
        out["doubling_2048_change"] = _pct(p16[2048]["array_bandwidth_gbs"],
                                           p16[1024]["array_bandwidth_gbs"])
    return out


def _ms_plot(rows, summary, path):
    fig, (ax, ax2) = _figure()
    for p in sorted({r["producers"] for r in rows}):
        pts = sorted((r["channels"], r["array_bandwidth_gbs"]) for r in rows
                     if r["producers"] == p and not r["active_total"])
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{p} producers")
    pts = sorted((r["channels"], r["array_bandwidth_gbs"]) for r in rows if r["active_total"])
    if pts:
        ax.plot(*zip(*pts), marker="s", ls="--", label="32 slots in total (control)")
    ceil = sorted(summary["ceiling_gbs"].items())
    ax.plot(*zip(*ceil), ls=":", color="grey", label="ceiling subarrays x 4 KiB / tR")
    pub = sorted(MS_PUBLISHED["bandwidth_gbs"].items())
    ax.plot(*zip(*pub), ls="none", marker="x", color="k", ms=9, label="source, 1024 producers")
    from matplotlib.ticker import FixedLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_major_locator(FixedLocator([1, 2, 4, 8, 16]))
    ax.yaxis.set_major_locator(FixedLocator([4, 8, 16, 32, 64, 128]))
    ax.set_xlabel("channels (32 subarrays, 32 active slots each)")
    ax.set_ylabel("array bandwidth (GB/s)")
    ax.set_title("Media scaling, tR 15 us (source §5.4)")
    ax.legend(fontsize=7)
    ut = sorted(summary["utilization"].items())
    ax2.plot([c for c, _ in ut], [u * 100 for _, u in ut], marker="o", label="hbfsim")
    ax2.plot([1, 16], [99.99, 99.63], ls="none", marker="x", color="k", label="source")
    ax2.set_xscale("log", base=2)
    ax2.xaxis.set_major_formatter(ScalarFormatter())
    ax2.xaxis.set_major_locator(FixedLocator([1, 2, 4, 8, 16]))
    ax2.set_xlabel("channels")
    ax2.set_ylabel("media utilization (%)")
    ax2.set_title("Occupancy of the active slots, 1024 producers")
    ax2.legend(fontsize=7)
    fig.savefig(path, dpi=110)


def _ms_report(rows, s) -> str:
    pub = MS_PUBLISHED
    t = [[c, _fmt(s["bandwidth_gbs"][c]), _fmt(pub["bandwidth_gbs"].get(c)),
          _fmt(s["ceiling_gbs"][c]), f"{s['fraction_of_ceiling'][c]:.4f}",
          f"{s['utilization'][c]:.4f}"] for c in s["bandwidth_gbs"]]
    out = ["1024 producers each read one sector of their own page; 32 subarrays and 32 "
           "active slots per channel, admission 4096, tR 15 us, page cache off.", "",
           _md_table(["channels", "hbfsim GB/s", "source GB/s", "ceiling GB/s",
                      "fraction of ceiling", "media utilization"], t), ""]
    if s.get("scaling_1_to_16"):
        out.append(f"Scaling 1 -> 16 channels: **{s['scaling_1_to_16']:.2f}x** "
                   f"(source 15.94x).")
    if s["producers_16ch_gbs"]:
        t = [[p, _fmt(v), _fmt(pub["producers_16ch_gbs"].get(p))]
             for p, v in s["producers_16ch_gbs"].items()]
        out += ["", "Producer controls at 16 channels (512 slots):", "",
                _md_table(["producers", "hbfsim GB/s", "source GB/s"], t)]
    if s.get("doubling_2048_change") is not None:
        out.append(f"\n2048 vs 1024 producers at 16 channels: "
                   f"{s['doubling_2048_change'] * 100:+.2f}% (source about +0.2%).")
    if s["fixed_32_slots_gbs"]:
        t = [[c, _fmt(v)] for c, v in s["fixed_32_slots_gbs"].items()]
        out += ["", "Fixed-slot control (`active_total = 32` for the whole stack; source "
                "8.738 GB/s at 16 channels):", "", _md_table(["channels", "hbfsim GB/s"], t)]
    if s.get("sector_bandwidth_16ch_gbs"):
        out.append(f"\nGPU sector bandwidth at 16 channels: "
                   f"{s['sector_bandwidth_16ch_gbs']:.3f} GB/s (source 1.088 GB/s).")
    return "\n".join(out)


# ----------------------------------------------------------------------------- §5.2
MF_PUBLISHED = {
    # tR 15 us: (slots) -> closed-loop and replayed window reductions
    "reduction_15us": {32: (0.758, 0.001), 128: (0.611, 0.008), 4096: (0.100, 0.100)},
    "windows_15us_128": {"closed_off": 87703, "closed_on": 34101, "replay_on": 86987},
    "kernel_15us_128": {"off": 93699, "on": 40164},
}


def _mf_tasks(quick: bool) -> list:
    if quick:
        return [dict(entries=32, slots=s, t_read_us=15.0, slot_kind="mshr")
                for s in (32, 128, 4096)] + \
               [dict(entries=32, slots=128, t_read_us=1.0, slot_kind="mshr")]
    return [dict(entries=e, slots=s, t_read_us=tr, slot_kind=k)
            for k in ("mshr", "admission") for tr in (15.0, 1.0) for e in (32, 1)
            for s in (32, 128, 4096)]


def _mf_config(task, merge: bool):
    from hbfsim.config import load_config
    from hbfsim.model.workloads import mshr_grid

    kw = dict(mshr_grid().config, t_read_us=task["t_read_us"], mshr_merge=merge)
    if task["slot_kind"] == "mshr":      # the source's admission slots (docs/model.md)
        kw.update(mshr_entries=task["slots"], admission=4096)
    else:                                # our request-counting admission (REFERENCE L1)
        kw.update(admission=task["slots"], mshr_entries=4096)
    return load_config(**kw)


def _mf_run(task: dict) -> list:
    from hbfsim.model.gpu import run_open_loop
    from hbfsim.model.stats import collect_stats
    from hbfsim.model.workloads import mshr_grid

    rows = []
    closed = {}

    def row(mode, merge, s, span):
        rows.append(dict(task, mode=mode, merge=merge, requests=s["requests"],
                         window_ticks=s["window_ticks"],
                         window_gpu_cycles=s["window_gpu_cycles"],
                         span_gpu_cycles=span, page_reads=s["page_reads"],
                         page_buffer_hits=s["page_buffer_hits"], mshr_hits=s["mshr_hits"]))

    for merge in (False, True):
        cfg = _mf_config(task, merge)
        res, s = _closed(cfg, mshr_grid(cfg, entries=task["entries"]), record=True)
        closed[merge] = res
        row("closed", merge, s, res.span_gpu_cycles)
    # fixed-arrival replay of the merging-off run's ingress (the source's baseline trace)
    for merge in (False, True):
        s = collect_stats(run_open_loop(_mf_config(task, merge), closed[False], keep=False))
        row("replay", merge, s, None)
    return rows


def _mf_key(r):
    return (r["slot_kind"], r["t_read_us"], r["entries"], r["slots"])


def _mf_summary(rows: list, quick: bool) -> dict:
    groups: dict = {}
    for r in rows:
        groups.setdefault(_mf_key(r), {})[(r["mode"], r["merge"])] = r
    cases = []
    for (kind, tr, e, slots), g in sorted(groups.items()):
        off = g[("closed", False)]["window_gpu_cycles"]
        on = g[("closed", True)]["window_gpu_cycles"]
        rep = g[("replay", True)]["window_gpu_cycles"]
        cases.append(dict(slot_kind=kind, t_read_us=tr, entries=e, slots=slots,
                          closed_off=off, closed_on=on, replay_on=rep,
                          replay_off=g[("replay", False)]["window_gpu_cycles"],
                          kernel_off=g[("closed", False)]["span_gpu_cycles"],
                          kernel_on=g[("closed", True)]["span_gpu_cycles"],
                          closed_reduction=1 - on / off, replay_reduction=1 - rep / off))
    return {"cases": cases, "published": {
        "reduction_15us": {k: {"closed": v[0], "replay": v[1]}
                           for k, v in MF_PUBLISHED["reduction_15us"].items()},
        "windows_15us_128": MF_PUBLISHED["windows_15us_128"],
        "kernel_15us_128": MF_PUBLISHED["kernel_15us_128"]}}


def _mf_plot(rows, summary, path):
    cases = [c for c in summary["cases"] if c["entries"] == 32]
    trs = sorted({c["t_read_us"] for c in cases}, reverse=True)
    fig, axes = _figure(5.2 * len(trs), 4.2, len(trs))
    for ax, tr in zip(axes, trs):
        cs = [c for c in cases if c["t_read_us"] == tr]
        labels, closed, replay = [], [], []
        for c in cs:
            labels.append(f"{c['slots']}\n{c['slot_kind']}")
            closed.append(c["closed_reduction"] * 100)
            replay.append(c["replay_reduction"] * 100)
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], closed, 0.4, label="closed loop (hbfsim)")
        ax.bar([x + 0.2 for x in xs], replay, 0.4, label="fixed-arrival replay (hbfsim)")
        if tr == 15.0:
            for x, c in zip(xs, cs):
                pub = MF_PUBLISHED["reduction_15us"].get(c["slots"])
                if pub and c["slot_kind"] == "mshr":
                    ax.plot([x - 0.2, x + 0.2], [pub[0] * 100, pub[1] * 100], ls="none",
                            marker="x", color="k", ms=9)
            ax.plot([], [], ls="none", marker="x", color="k", label="source")
        ax.set_xticks(list(xs), labels, fontsize=7)
        ax.set_xlabel("slots / slot semantics")
        ax.set_ylabel("window reduction from merging (%)")
        ax.set_title(f"16 pages x 32 entries, tR {tr:g} us (source §5.2)")
        ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)


def _mf_report(rows, s) -> str:
    pub = MF_PUBLISHED["reduction_15us"]
    t = []
    for c in s["cases"]:
        p = pub.get(c["slots"]) if c["t_read_us"] == 15.0 and c["entries"] == 32 \
            and c["slot_kind"] == "mshr" else None
        t.append([c["slot_kind"], f"{c['t_read_us']:g}", c["entries"], c["slots"],
                  _fmt(c["closed_off"]), _fmt(c["closed_on"]), _fmt(c["replay_on"]),
                  f"{c['closed_reduction'] * 100:.1f}%", f"{c['replay_reduction'] * 100:.1f}%",
                  f"{p[0] * 100:.1f}% / {p[1] * 100:.1f}%" if p else ""])
    return "\n".join([
        "16 pages x `entries` 128 B loads, one warp per load; 4 channels x 8 subarrays, 2 "
        "active slots per channel; page buffers on, page cache off. Windows are first "
        "admission to last completion in GPU cycles. *Replay* freezes the merging-off closed "
        "loop's ingress (accept) ticks and replays them into the merging-on controller. "
        "`slot_kind = mshr` sweeps `mshr_entries` (the source's admission slots count page "
        "operations, docs/model.md); `admission` sweeps our request-counting admission.", "",
        _md_table(["slots are", "tR us", "entries/page", "slots", "closed off", "closed on",
                   "replay on", "closed reduction", "replay reduction",
                   "source closed / replay"], t)])


# ----------------------------------------------------------------------------- §6.1
PL_PUBLISHED = {
    "A_kernel": {"interleave": 6505, "contiguous": 6550},
    "B_64_1": {32: {"interleave": 1092373, "striping": 277353},
               4: {"interleave": 141530, "striping": 277353}},
}


def _pl_tasks(quick: bool) -> list:
    if quick:
        tasks = [dict(part="A", pages=16, entries=32, stride=1, mapping=m)
                 for m in ("interleave", "grouped", "contiguous")]
        tasks += [dict(part="B", pages=64, entries=1, stride=st, mapping=m)
                  for st in (4, 32) for m in ("interleave", "striping")]
        return tasks
    tasks = [dict(part="A", pages=16, entries=e, stride=1, mapping=m)
             for e in (1, 8, 32) for m in ("interleave", "grouped", "contiguous")]
    tasks += [dict(part="B", pages=p, entries=e, stride=st, mapping=m)
              for p in (64, 128) for e in (1, 8) for st in (1, 4, 32)
              for m in ("interleave", "modulo", "striping")]
    return tasks


def _pl_run(task: dict) -> list:
    from hbfsim.config import load_config
    from hbfsim.model.mapping import Mapper
    from hbfsim.model.workloads import placement

    kw = dict(pages=task["pages"], entries=task["entries"], stride=task["stride"],
              mapping=task["mapping"])
    conf = dict(placement(None, **kw).config)
    conf["active_total"] = 8            # the source's cap: eight operations controller-wide
    if task["part"] == "A":             # the diagnostic: tR/tPROG/tBERS 20/40/80 ticks
        conf.update(admission=256, hbf_tR=20, hbf_tPROG=40, hbf_tBERS=80)
    cfg = load_config(**conf)
    w = placement(cfg, **kw)
    res, s = _closed(cfg, w)
    m = Mapper(cfg)
    used = set()
    for p in w.expected["active_pages"]:
        _, q = m.stack_of(p)
        ch, _, sub = m.channel_of(q)
        used.add((ch, sub))
    return [dict(task, span_gpu_cycles=res.span_gpu_cycles, window_ticks=s["window_ticks"],
                 page_reads=s["page_reads"], page_buffer_hits=s["page_buffer_hits"],
                 mshr_hits=s["mshr_hits"], page_services=s["page_services"],
                 channels_used=len({c for c, _ in used}), subarrays_used=len(used))]


def _pl_summary(rows: list, quick: bool) -> dict:
    a = {}
    for r in rows:
        if r["part"] == "A":
            a.setdefault(str(r["entries"]), {})[r["mapping"]] = {
                k: r[k] for k in ("span_gpu_cycles", "page_reads", "page_buffer_hits",
                                  "mshr_hits", "page_services")}
    b = {}
    idx = {(r["pages"], r["entries"], r["stride"], r["mapping"]): r
           for r in rows if r["part"] == "B"}
    for (p, e, st, m), r in sorted(idx.items()):
        if m != "striping" or (p, e, st, "interleave") not in idx:
            continue
        i = idx[(p, e, st, "interleave")]
        b[f"{p}p/{e}e/stride{st}"] = {
            "pages": p, "entries": e, "stride": st,
            "interleave": i["span_gpu_cycles"], "striping": r["span_gpu_cycles"],
            "modulo": idx.get((p, e, st, "modulo"), {}).get("span_gpu_cycles"),
            "speedup": i["span_gpu_cycles"] / r["span_gpu_cycles"],
            "subarrays_interleave": i["subarrays_used"], "subarrays_striping":
            r["subarrays_used"], "page_reads": (i["page_reads"], r["page_reads"])}
    return {"diagnostic": a, "striping": b, "published": PL_PUBLISHED}


def _pl_plot(rows, summary, path):
    fig, (ax, ax2) = _figure()
    b = summary["striping"]
    labels = list(b)
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [b[k]["interleave"] / 1e3 for k in labels], 0.4,
           label="interleave (I)")
    ax.bar([x + 0.2 for x in xs], [b[k]["striping"] / 1e3 for k in labels], 0.4,
           label="active-page striping (S)")
    for x, k in zip(xs, labels):
        v = b[k]
        pub = PL_PUBLISHED["B_64_1"].get(v["stride"]) if (v["pages"], v["entries"]) == \
            (64, 1) else None
        if pub:
            ax.plot([x - 0.2, x + 0.2], [pub["interleave"] / 1e3, pub["striping"] / 1e3],
                    ls="none", marker="x", color="k", ms=9)
    ax.plot([], [], ls="none", marker="x", color="k", label="source (64 pages, 1 entry)")
    ax.set_xticks(list(xs), [f"{b[k]['pages']}p {b[k]['entries']}e\ns{b[k]['stride']}"
                             for k in labels], fontsize=6)
    ax.set_xlabel("pages, entries/page, page stride")
    ax.set_ylabel("kernel time (k GPU cycles)")
    ax.set_title("Striping vs interleave, tR 15 us, 8 slots (source §6.1)")
    ax.legend(fontsize=7)
    a = summary["diagnostic"]
    ents = sorted(a, key=int)
    maps = ["interleave", "grouped", "contiguous"]
    for j, m in enumerate(maps):
        ax2.bar([i + (j - 1) * 0.27 for i in range(len(ents))],
                [a[e][m]["span_gpu_cycles"] if m in a[e] else 0 for e in ents], 0.27, label=m)
    ax2.set_xticks(range(len(ents)), [f"{e} entries/page" for e in ents])
    ax2.set_ylabel("kernel time (GPU cycles)")
    ax2.set_title("Placement diagnostic: 16 pages, tR 20 ticks")
    ax2.legend(fontsize=7)
    fig.savefig(path, dpi=110)


def _pl_report(rows, s) -> str:
    out = ["Diagnostic (16 pages, 4 channels, 32 subarrays in total, 8 active operations "
           "stack-wide, admission 256, tR/tPROG/tBERS 20/40/80 ticks, merging and page "
           "buffers on). Source: 16 array reads at 32 entries/page for every mapping; kernel "
           "6,505 (interleave) -> 6,550 cycles (contiguous), +0.69%.", ""]
    t = []
    for e, d in sorted(s["diagnostic"].items(), key=lambda kv: int(kv[0])):
        for m, v in d.items():
            t.append([e, m, _fmt(v["span_gpu_cycles"]), v["page_reads"], v["page_buffer_hits"],
                      v["mshr_hits"], v["page_services"]])
    out += [_md_table(["entries/page", "mapping", "kernel GPU cycles", "array reads",
                       "buffer hits", "MSHR hits", "page services"], t), ""]
    out += ["Active-page striping (S) vs built-in interleave (I), tR 15 us, 4 channels, 32 "
            "subarrays, 8 active operations stack-wide, admission 4096. Source (64 pages, "
            "1 entry): stride 32 1,092,373 -> 277,353 cycles (3.94x), stride 4 141,530 -> "
            "277,353 (0.51x).", ""]
    t = [[v["pages"], v["entries"], v["stride"], _fmt(v["interleave"]), _fmt(v["modulo"]),
          _fmt(v["striping"]), f"{v['speedup']:.2f}x",
          f"{v['subarrays_interleave']} / {v['subarrays_striping']}"]
         for v in s["striping"].values()]
    out.append(_md_table(["pages", "entries", "stride", "I cycles", "explicit modulo",
                          "S cycles", "speedup I/S", "subarrays I / S"], t))
    return "\n".join(out)


# ----------------------------------------------------------------------------- §6.2
RW_POLICIES = ("fcfs", "read-priority", "write-drain", "partition-1r3w", "partition-2r2w",
               "partition-3r1w")
RW_DELAYS = (0, 50, 100, 150, 200, 250)
RW_PUBLISHED = {
    "4p_100us": {"read_p95": {"read-priority": 232456, "partition-3r1w": 169730},
                 "kernel": {"read-priority": 776097, "partition-3r1w": 911850},
                 "write_p95": {"read-priority": 226715, "partition-3r1w": 905889}},
    "4p_read_p95_3r1w_vs_shared": {0: (118999, 152968), 50: (289058, 169710)},
    "budget_shared_ok_us": [0, 150, 250], "budget_only_3r1w_us": [50, 100],
    "configurations": 37, "deadline_failures": 1,
}


def _rw_tasks(quick: bool) -> list:
    if quick:
        tasks = [dict(kind="main", scheduler=p, write_pages=4, read_delay_us=d,
                      deadline_ticks=10000, admission=4096)
                 for p in ("read-priority", "partition-3r1w") for d in (0, 100, 250)]
        tasks += [dict(kind="read-only", scheduler="read-priority", write_pages=0,
                       read_delay_us=d, deadline_ticks=10000, admission=4096)
                  for d in (0, 100, 250)]
        tasks.append(dict(kind="main", scheduler="read-priority", write_pages=16,
                          read_delay_us=100, deadline_ticks=10000, admission=4096))
        return tasks
    tasks = [dict(kind="main", scheduler=p, write_pages=w, read_delay_us=d,
                  deadline_ticks=10000, admission=4096)
             for w in (4, 16) for p in RW_POLICIES for d in RW_DELAYS]
    tasks += [dict(kind="read-only", scheduler="read-priority", write_pages=0,
                   read_delay_us=d, deadline_ticks=10000, admission=4096) for d in RW_DELAYS]
    # the source's extended-deadline control (400 us) and our request-counting admission
    tasks += [dict(kind="extended-deadline", scheduler=p, write_pages=16, read_delay_us=100,
                   deadline_ticks=340000, admission=4096) for p in RW_POLICIES]
    tasks += [dict(kind="admission-256", scheduler=p, write_pages=4, read_delay_us=100,
                   deadline_ticks=10000, admission=256) for p in RW_POLICIES]
    return tasks


def _rw_run(task: dict) -> list:
    from hbfsim.config import load_config
    from hbfsim.model.workloads import rw_isolation

    conf = dict(rw_isolation().config, scheduler=task["scheduler"],
                write_deadline_ticks=task["deadline_ticks"], admission=task["admission"])
    cfg = load_config(**conf)
    w = rw_isolation(cfg, write_pages=task["write_pages"], read_delay_us=task["read_delay_us"])
    res, s = _closed(cfg, w, record=True)
    rl = [r.t_done - r.created for r in res.records if r.op == "R"]
    wl = [r.t_done - r.created for r in res.records if r.op == "W"]
    g = cfg.ticks_to_gpu_cycles
    rp, wp = _p95(rl), _p95(wl)
    return [dict(task, requests=s["requests"], read_p95_gpu_cycles=g(rp),
                 write_p95_gpu_cycles=None if wp is None else g(wp),
                 kernel_gpu_cycles=res.span_gpu_cycles, page_programs=s["page_programs"],
                 strict_errors=s["strict_errors"], errors=s["errors"],
                 deadline_flushes=s["timeout_flushes"], page_reads=s["page_reads"])]


def _rw_summary(rows: list, quick: bool) -> dict:
    ro = {r["read_delay_us"]: r["read_p95_gpu_cycles"] for r in rows if r["kind"] == "read-only"}
    table: dict = {}
    for r in rows:
        if r["kind"] != "main":
            continue
        table.setdefault(str(r["write_pages"]), {}).setdefault(str(r["read_delay_us"]), {})[
            r["scheduler"]] = {k: r[k] for k in ("read_p95_gpu_cycles", "write_p95_gpu_cycles",
                                                 "kernel_gpu_cycles", "strict_errors")}
    head = {}
    four = table.get("4", {})
    for d, pol in four.items():
        sh, iso = pol.get("read-priority"), pol.get("partition-3r1w")
        if not (sh and iso):
            continue
        budget = 1.5 * ro[int(d)] if int(d) in ro else None
        head[d] = {
            "read_p95_shared": sh["read_p95_gpu_cycles"], "read_p95_3r1w":
            iso["read_p95_gpu_cycles"],
            "read_change": _pct(iso["read_p95_gpu_cycles"], sh["read_p95_gpu_cycles"]),
            "write_ratio": iso["write_p95_gpu_cycles"] / sh["write_p95_gpu_cycles"],
            "kernel_change": _pct(iso["kernel_gpu_cycles"], sh["kernel_gpu_cycles"]),
            "budget": budget,
            "shared_meets_budget": None if budget is None else
            sh["read_p95_gpu_cycles"] <= budget,
            "3r1w_meets_budget": None if budget is None else iso["read_p95_gpu_cycles"] <= budget}
    fails = [r for r in rows if r["strict_errors"]]
    return {"read_only_p95": ro, "table": table, "headline_4_pages": head,
            "configurations": len(rows), "deadline_failures": len(fails),
            "failed": [{k: r[k] for k in ("kind", "scheduler", "write_pages", "read_delay_us",
                                          "deadline_ticks", "strict_errors")} for r in fails],
            "controls": [{k: r[k] for k in ("kind", "scheduler", "write_pages", "admission",
                                            "deadline_ticks", "read_p95_gpu_cycles",
                                            "write_p95_gpu_cycles", "kernel_gpu_cycles",
                                            "strict_errors")}
                         for r in rows if r["kind"] in ("extended-deadline", "admission-256")],
            "published": RW_PUBLISHED}


def _rw_plot(rows, summary, path):
    fig, (ax, ax2) = _figure()
    main = [r for r in rows if r["kind"] == "main" and r["write_pages"] == 4]
    for p in RW_POLICIES:
        pts = sorted((r["read_delay_us"], r["read_p95_gpu_cycles"]) for r in main
                     if r["scheduler"] == p)
        if pts:
            ax.plot([d for d, _ in pts], [v / 1e3 for _, v in pts], marker="o", label=p)
            wpts = sorted((r["read_delay_us"], r["write_p95_gpu_cycles"]) for r in main
                          if r["scheduler"] == p)
            ax2.plot([d for d, _ in wpts], [v / 1e3 for _, v in wpts], marker="o", label=p)
    ro = sorted(summary["read_only_p95"].items())
    if ro:
        ax.plot([d for d, _ in ro], [v / 1e3 for _, v in ro], ls="--", color="grey",
                label="read only")
        ax.plot([d for d, _ in ro], [1.5 * v / 1e3 for _, v in ro], ls=":", color="grey",
                label="budget 1.5 x read only")
    pub = RW_PUBLISHED["4p_read_p95_3r1w_vs_shared"]
    xs = sorted(pub) + [100]
    ax.plot(xs, [pub[d][0] / 1e3 for d in sorted(pub)] + [232.456], ls="none", marker="x",
            color="k", ms=8, label="source, shared read priority")
    ax.plot(xs, [pub[d][1] / 1e3 for d in sorted(pub)] + [169.730], ls="none", marker="+",
            color="k", ms=10, label="source, 3R/1W")
    ax.set_xlabel("nominal read-start delay (us)")
    ax.set_ylabel("read p95 (k GPU cycles)")
    ax.set_title("4 written pages (source §6.2)")
    ax.legend(fontsize=6)
    ax2.set_xlabel("nominal read-start delay (us)")
    ax2.set_ylabel("write p95 (k GPU cycles)")
    ax2.set_title("Write p95, 4 written pages")
    ax2.legend(fontsize=6)
    fig.savefig(path, dpi=110)


def _rw_report(rows, s) -> str:
    out = ["512 sector reads over 16 pages (4 outstanding per reader warp) starting after "
           "the nominal delay, beside `write_pages` pages of 128 full-coverage sector stores "
           "(128 outstanding per writer warp); 4 channels x 1 subarray x 1 active slot, "
           "strict deadline 10,000 ticks, admission 4096 (page-operation semantics: see "
           "docs/results.md). Latency is creation to response, p95 in GPU cycles.", ""]
    t = []
    for wp, byd in s["table"].items():
        for d, pol in sorted(byd.items(), key=lambda kv: float(kv[0])):
            for p, v in pol.items():
                t.append([wp, d, p, _fmt(v["read_p95_gpu_cycles"]),
                          _fmt(v["write_p95_gpu_cycles"]), _fmt(v["kernel_gpu_cycles"]),
                          v["strict_errors"]])
    out += [_md_table(["written pages", "read delay us", "policy", "read p95", "write p95",
                       "kernel", "strict errors"], t), ""]
    out.append("Read-only controls (read p95): " + ", ".join(
        f"{d} us: {v:,}" for d, v in sorted(s["read_only_p95"].items())))
    t = []
    for d, h in sorted(s["headline_4_pages"].items(), key=lambda kv: float(kv[0])):
        t.append([d, _fmt(h["read_p95_shared"]), _fmt(h["read_p95_3r1w"]),
                  f"{h['read_change'] * 100:+.1f}%", f"{h['write_ratio']:.2f}x",
                  f"{h['kernel_change'] * 100:+.1f}%",
                  {True: "yes", False: "no", None: "-"}[h["shared_meets_budget"]],
                  {True: "yes", False: "no", None: "-"}[h["3r1w_meets_budget"]]])
    out += ["", "3R/1W against shared read priority, 4 written pages (source at 100 us: read "
            "p95 -27.0%, write p95 4.00x, kernel +17.5%; budget met by sharing at 0/150/250 "
            "us, only by 3R/1W at 50/100 us):", "",
            _md_table(["delay us", "shared read p95", "3R/1W read p95", "read change",
                       "write p95 ratio", "kernel change", "shared meets budget",
                       "3R/1W meets budget"], t), "",
            f"Strict-deadline failures: {s['deadline_failures']} of {s['configurations']} "
            f"configurations (source: 1 of 37)."]
    if s["controls"]:
        t = [[c["kind"], c["scheduler"], c["write_pages"], c["admission"], c["deadline_ticks"],
              _fmt(c["read_p95_gpu_cycles"]), _fmt(c["write_p95_gpu_cycles"]),
              _fmt(c["kernel_gpu_cycles"]), c["strict_errors"]] for c in s["controls"]]
        out += ["", "Controls (read delay 100 us):", "",
                _md_table(["control", "policy", "written pages", "admission", "deadline ticks",
                           "read p95", "write p95", "kernel", "strict errors"], t)]
    return "\n".join(out)


# ----------------------------------------------------------------------------- §5.3
PS_PUBLISHED = {
    # (channels, tR us, arrivals) -> window us
    "hbfsim_source": {(1, 15, "burst"): 960.032, (4, 15, "burst"): 240.080,
                      (1, 1, "burst"): 64.032, (4, 1, "burst"): 16.080},
    "mqsim": {(1, 15, "burst"): 981.126, (4, 15, "burst"): 245.316,
              (1, 1, "burst"): 85.126, (4, 1, "burst"): 21.316,
              (1, 15, "isolated"): 3165.336, (1, 1, "isolated"): 3151.336},
}


def _ps_tasks(quick: bool) -> list:
    arr = ("burst",) if quick else ("burst", "isolated")
    return [dict(channels=c, t_read_us=tr, arrivals=a) for a in arr for c in (1, 4)
            for tr in (15.0, 1.0)]


def _ps_run(task: dict) -> list:
    from hbfsim.config import load_config
    from hbfsim.model.stats import collect_stats
    from hbfsim.model.system import HbfSystem
    from hbfsim.model.workloads import burst_page_service

    gap = 0.01 if task["arrivals"] == "burst" else 50.0
    cfg = load_config(**burst_page_service().config, channels=task["channels"],
                      t_read_us=task["t_read_us"])
    w = burst_page_service(cfg, gap_us=gap)
    system = HbfSystem(cfg, keep=False)
    system.run_requests(iter(w))
    s = collect_stats(system)
    return [dict(task, gap_us=gap, requests=s["requests"], page_reads=s["page_reads"],
                 mshr_hits=s["mshr_hits"], window_ticks=s["window_ticks"],
                 window_us=s["window_us"])]


def _ps_key(c, tr, a) -> str:
    return f"C{c}/tR{tr:g}/{a}"


def _ps_summary(rows: list, quick: bool) -> dict:
    win = {(r["channels"], r["t_read_us"], r["arrivals"]): r["window_us"] for r in rows}
    windows = {}
    for (c, tr, a), v in sorted(win.items()):
        k = (c, int(tr), a)
        mq = PS_PUBLISHED["mqsim"].get(k) or (PS_PUBLISHED["mqsim"].get((1, int(tr), a))
                                              if a == "isolated" else None)
        windows[_ps_key(c, tr, a)] = {
            "channels": c, "t_read_us": tr, "arrivals": a, "hbfsim_us": v,
            "source_hbfsim_us": PS_PUBLISHED["hbfsim_source"].get(k), "mqsim_us": mq,
            "mqsim_over_ours": _pct(mq, v),
            "mqsim_over_source": _pct(mq, PS_PUBLISHED["hbfsim_source"].get(k))}
    growth = {}
    for (c, tr, a), v in win.items():
        if tr == 15.0 and (c, 1.0, a) in win:
            growth[f"C{c}/{a}"] = {"channels": c, "arrivals": a,
                                   "hbfsim_us": v - win[(c, 1.0, a)],
                                   "expected_us": 64 * 14 / c if a == "burst" else 14.0}
    return {"windows": windows, "growth": growth,
            "page_reads": sorted({r["page_reads"] for r in rows})}


def _ps_plot(rows, summary, path):
    fig, (ax, ax2) = _figure()
    ws = [v for v in summary["windows"].values() if v["arrivals"] == "burst"]
    labels = [f"C={v['channels']}\ntR {v['t_read_us']:g}" for v in ws]
    xs = range(len(ws))
    ax.bar([x - 0.27 for x in xs], [v["hbfsim_us"] for v in ws], 0.27, label="hbfsim")
    ax.bar(list(xs), [v["source_hbfsim_us"] or 0 for v in ws], 0.27, label="HBF-Sim (source)")
    ax.bar([x + 0.27 for x in xs], [v["mqsim_us"] or 0 for v in ws], 0.27, label="MQSim (source)")
    ax.set_yscale("log")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("burst completion window (us)")
    ax.set_title("64 pages, one serial subarray per channel (source §5.3)")
    ax.legend(fontsize=7)
    g = list(summary["growth"].values())
    ax2.bar([x - 0.2 for x in range(len(g))], [v["hbfsim_us"] for v in g], 0.4, label="hbfsim")
    ax2.bar([x + 0.2 for x in range(len(g))], [v["expected_us"] for v in g], 0.4,
            label="64 x dtR / C (burst), dtR (isolated)")
    ax2.set_xticks(range(len(g)), [k for k in summary["growth"]], fontsize=8)
    ax2.set_ylabel("window growth tR 1 -> 15 us (us)")
    ax2.set_title("Growth with tR")
    ax2.legend(fontsize=7)
    fig.savefig(path, dpi=110)


def _ps_report(rows, s) -> str:
    t = [[k, f"{v['hbfsim_us']:.3f}", _fmt(v["source_hbfsim_us"]), _fmt(v["mqsim_us"]),
          "-" if v["mqsim_over_ours"] is None else f"{v['mqsim_over_ours'] * 100:+.1f}%",
          "-" if v["mqsim_over_source"] is None else f"{v['mqsim_over_source'] * 100:+.1f}%"]
         for k, v in s["windows"].items()]
    g = [[k, f"{v['hbfsim_us']:.3f}", f"{v['expected_us']:.3f}"] for k, v in s["growth"].items()]
    return "\n".join([
        "64 unique pages x 32 merged 128 B requests, one subarray and one active slot per "
        "channel, page cache off; burst = pages 10 ns apart, isolated = 50 us apart. MQSim "
        "isolated figures are the source's (published for one configuration per tR).", "",
        _md_table(["case", "hbfsim us", "HBF-Sim (source) us", "MQSim (source) us",
                   "MQSim / hbfsim - 1", "MQSim / HBF-Sim - 1"], t), "",
        _md_table(["growth tR 1 -> 15 us", "hbfsim us", "expected us"], g), "",
        f"Array page reads per run: {', '.join(map(str, s['page_reads']))} (source: exactly 64)."])


STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("media-saturation", "Media resource scaling", "§5.4", _ms_tasks, _ms_run, _ms_summary,
          _ms_plot, _ms_report),
    Study("mshr-feedback", "MSHR merging: closed loop vs fixed-arrival replay", "§5.2",
          _mf_tasks, _mf_run, _mf_summary, _mf_plot, _mf_report),
    Study("placement", "Locality/parallelism-aware placement", "§6.1", _pl_tasks, _pl_run,
          _pl_summary, _pl_plot, _pl_report),
    Study("rw-isolation", "Protecting reads from write interference", "§6.2", _rw_tasks,
          _rw_run, _rw_summary, _rw_plot, _rw_report),
    Study("page-service", "External page-service cross-check", "§5.3", _ps_tasks, _ps_run,
          _ps_summary, _ps_plot, _ps_report),
)}


def study_names() -> list[str]:
    return list(STUDIES)


# ============================================================================ the runner
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


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_csv(path: Path, rows: list) -> None:
    cols: list = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in cols})
    os.replace(tmp, path)


def run_study(name: str, out_dir=None, quick: bool = False, workers: int | None = None,
              progress: bool = False) -> dict:
    """Run study ``name`` and write its results; return the summary dictionary.

    Parameters
    ----------
    name : str
        One of :func:`study_names`.
    out_dir : path, optional
        Output folder (created); default ``results/<name>``.
    quick : bool
        Run the reduced sweep (seconds).
    workers : int, optional
        Worker processes (default: one per core; 1 runs in this process).
    progress : bool
        Show a tqdm progress bar on stderr.

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
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create output folder {str(out)!r}: {e.strerror}") from None
    tasks = study.tasks(quick)
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
        from concurrent.futures import as_completed

        with ProcessPoolExecutor(max_workers=n) as pool:
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
    files = {k: str(out / v) for k, v in (("csv", "runs.csv"), ("plot", "plot.png"),
                                          ("summary_md", "summary.md"),
                                          ("summary_json", "summary.json"))}
    summary["files"] = files
    _write_csv(out / "runs.csv", rows)
    tmp_png = out / "plot.partial.png"
    study.plot(rows, raw, tmp_png)
    os.replace(tmp_png, out / "plot.png")
    md = [f"# {study.title} ({name}; source {study.source})", "",
          f"{'Quick (reduced) sweep' if quick else 'Full sweep'}: {len(rows)} simulations in "
          f"{len(tasks)} tasks, {n} worker process(es), {wall:.1f} s host time. Published "
          f"figures: 000_5f193da23ae2984d.txt {study.source} and REFERENCE §2c; discussion "
          f"in docs/results.md.", "", study.report(rows, raw), "",
          "Files: `runs.csv` (every run), `plot.png`, `summary.json`.", ""]
    _atomic_write(out / "summary.md", "\n".join(md))
    _atomic_write(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


# ============================================================================ command line
def _headline(s: dict) -> list[str]:
    name = s["study"]
    if name == "media-saturation":
        bw = s["bandwidth_gbs"]
        out = ["array bandwidth (1024 producers): " + ", ".join(
            f"{c} ch {v:.3f}" for c, v in bw.items()) + " GB/s"]
        if s.get("scaling_1_to_16"):
            out.append(f"scaling 1 -> 16 channels {s['scaling_1_to_16']:.2f}x (source 15.94x)")
        return out
    if name == "mshr-feedback":
        return [f"{c['slot_kind']} slots {c['slots']}, tR {c['t_read_us']:g} us, "
                f"{c['entries']} entries/page: closed-loop reduction "
                f"{c['closed_reduction'] * 100:.1f}%, replay {c['replay_reduction'] * 100:.1f}%"
                for c in s["cases"] if c["entries"] == 32]
    if name == "placement":
        return [f"{k}: striping speedup {v['speedup']:.2f}x" for k, v in s["striping"].items()]
    if name == "rw-isolation":
        return [f"4 pages, {d} us: 3R/1W read p95 {h['read_change'] * 100:+.1f}%, write p95 "
                f"{h['write_ratio']:.2f}x, kernel {h['kernel_change'] * 100:+.1f}%"
                for d, h in s["headline_4_pages"].items()] + \
               [f"strict-deadline failures: {s['deadline_failures']} of {s['configurations']}"]
    if name == "page-service":
        return [f"{k}: {v['hbfsim_us']:.3f} us" for k, v in s["windows"].items()] + \
               [f"growth {k}: {v['hbfsim_us']:.3f} us (expected {v['expected_us']:.3f})"
                for k, v in s["growth"].items()]
    return []


def _add_arguments(p) -> None:
    p.add_argument("name", metavar="NAME",
                   help="study: " + ", ".join(STUDIES))
    p.add_argument("--quick", action="store_true",
                   help="run the reduced sweep (seconds; what CI runs)")
    p.add_argument("--out", metavar="DIR", help="output folder (default results/NAME)")
    p.add_argument("--workers", metavar="N", type=int, default=None,
                   help="worker processes (default: one per core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


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
    s = run_study(a.name, a.out, quick=a.quick, workers=a.workers,
                  progress=not a.no_progress)
    print(f"hbfsim study {a.name}{' --quick' if a.quick else ''}: {s['runs']} runs, "
          f"{s['workers']} worker(s), {s['host_seconds']:.1f} s")
    for line in _headline(s):
        print(f"  {line}")
    for k, v in s["files"].items():
        print(f"  {k}: {v}")
    return 0


def main(argv=None) -> int:
    """``python -m hbfsim.study NAME ...``: the sub-command without the hbfsim command."""
    ap = argparse.ArgumentParser(prog="python -m hbfsim.study",
                                 description="Run a study of the source as a parallel sweep.")
    _add_arguments(ap)
    a = ap.parse_args(argv)
    try:
        return run_cli(a)
    except ValueError as e:
        print(f"hbfsim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
