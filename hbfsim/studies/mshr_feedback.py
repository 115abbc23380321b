"""MSHR merging (source §5.2): the closed loop against a fixed-arrival replay.

Merging on/off, closed loop through the GPU model against an open-loop replay of the
merging-off run's recorded ingress, with the slots counted as the source's page operations
(``mshr_entries``) or as our requests (``admission``).
"""

from __future__ import annotations

from hbfsim.studies.base import Study
from hbfsim.studies.common import figure, fmt, md_table, run_closed

__all__ = ["MshrFeedback", "STUDY"]

PUBLISHED = {
    # tR 15 us: (slots) -> closed-loop and replayed window reductions
    "reduction_15us": {32: (0.758, 0.001), 128: (0.611, 0.008), 4096: (0.100, 0.100)},
    "windows_15us_128": {"closed_off": 87703, "closed_on": 34101, "replay_on": 86987},
    "kernel_15us_128": {"off": 93699, "on": 40164},
}


def _mf_kwargs(task, merge: bool) -> dict:
    from hbfsim.model.workloads import mshr_grid

    # the source's slots are one stack-wide count (HBF-Sim's MSHR table): the pools shared
    # by the ports, not the channel shape's default of a pool per channel
    # (docs/timing-contract.md §4.5; docs/results.md "Pools per channel")
    kw = dict(mshr_grid().config, t_read_us=task["t_read_us"], mshr_merge=merge,
              pools="stack")
    if task["slot_kind"] == "mshr":      # the source's admission slots (docs/model.md)
        kw.update(mshr_entries=task["slots"], admission=4096)
    else:                                # our request-counting admission (L1, docs/sources.md)
        kw.update(admission=task["slots"], mshr_entries=4096)
    return kw


def _mf_config(task, merge: bool):
    from hbfsim.config import load_config

    return load_config(**_mf_kwargs(task, merge), **(task.get("config_set") or {}))


def _mf_key(r):
    return (r["slot_kind"], r["t_read_us"], r["entries"], r["slots"])


class MshrFeedback(Study):
    """MSHR merging: closed loop vs fixed-arrival replay (source §5.2)."""

    name = "mshr-feedback"
    title = "MSHR merging: closed loop vs fixed-arrival replay"
    source = "§5.2"

    def tasks(self, quick: bool) -> list:
        if quick:
            return [dict(entries=32, slots=s, t_read_us=15.0, slot_kind="mshr")
                    for s in (32, 128, 4096)] + \
                   [dict(entries=32, slots=128, t_read_us=1.0, slot_kind="mshr")]
        return [dict(entries=e, slots=s, t_read_us=tr, slot_kind=k)
                for k in ("mshr", "admission") for tr in (15.0, 1.0) for e in (32, 1)
                for s in (32, 128, 4096)]

    def config_kwargs(self, task: dict) -> dict:
        return _mf_kwargs(task, True)  # merging on and off set the same keys

    def run(self, task: dict) -> list:
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
            res, s = run_closed(cfg, mshr_grid(cfg, entries=task["entries"]), record=True)
            closed[merge] = res
            row("closed", merge, s, res.span_gpu_cycles)
        # fixed-arrival replay of the merging-off run's ingress (the source's baseline trace)
        for merge in (False, True):
            s = collect_stats(run_open_loop(_mf_config(task, merge), closed[False], keep=False))
            row("replay", merge, s, None)
        return rows

    def summarize(self, rows: list, quick: bool) -> dict:
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
                               for k, v in PUBLISHED["reduction_15us"].items()},
            "windows_15us_128": PUBLISHED["windows_15us_128"],
            "kernel_15us_128": PUBLISHED["kernel_15us_128"]}}

    def plot(self, rows, summary, path):
        cases = [c for c in summary["cases"] if c["entries"] == 32]
        trs = sorted({c["t_read_us"] for c in cases}, reverse=True)
        fig, axes = figure(5.2 * len(trs), 4.2, len(trs))
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
                    pub = PUBLISHED["reduction_15us"].get(c["slots"])
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

    def report(self, rows, s) -> str:
        pub = PUBLISHED["reduction_15us"]
        t = []
        for c in s["cases"]:
            p = pub.get(c["slots"]) if c["t_read_us"] == 15.0 and c["entries"] == 32 \
                and c["slot_kind"] == "mshr" else None
            t.append([c["slot_kind"], f"{c['t_read_us']:g}", c["entries"], c["slots"],
                      fmt(c["closed_off"]), fmt(c["closed_on"]), fmt(c["replay_on"]),
                      f"{c['closed_reduction'] * 100:.1f}%", f"{c['replay_reduction'] * 100:.1f}%",
                      f"{p[0] * 100:.1f}% / {p[1] * 100:.1f}%" if p else ""])
        return "\n".join([
            "16 pages x `entries` 128 B loads, one warp per load; 4 channels x 8 subarrays, 2 "
            "active slots per channel; page buffers on, page cache off. Windows are first "
            "admission to last completion in GPU cycles. *Replay* freezes the merging-off closed "
            "loop's ingress (accept) ticks and replays them into the merging-on controller. "
            "`slot_kind = mshr` sweeps `mshr_entries` (the source's admission slots count page "
            "operations, docs/model.md); `admission` sweeps our request-counting admission.", "",
            md_table(["slots are", "tR us", "entries/page", "slots", "closed off", "closed on",
                      "replay on", "closed reduction", "replay reduction",
                      "source closed / replay"], t)])

    def headline(self, s: dict) -> list[str]:
        return [f"{c['slot_kind']} slots {c['slots']}, tR {c['t_read_us']:g} us, "
                f"{c['entries']} entries/page: closed-loop reduction "
                f"{c['closed_reduction'] * 100:.1f}%, replay {c['replay_reduction'] * 100:.1f}%"
                for c in s["cases"] if c["entries"] == 32]


STUDY = MshrFeedback()
