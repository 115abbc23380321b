"""External page-service cross-check (source §5.3) against HBF-Sim and MQSim.

64 pages, 1/4 channels, tR 1/15 us, burst and isolated arrivals.
"""

from __future__ import annotations

from hbfsim.studies.base import Study
from hbfsim.studies.common import figure, fmt, md_table, pct, study_config

__all__ = ["PageService", "STUDY"]

PUBLISHED = {
    # (channels, tR us, arrivals) -> window us
    "hbfsim_source": {(1, 15, "burst"): 960.032, (4, 15, "burst"): 240.080,
                      (1, 1, "burst"): 64.032, (4, 1, "burst"): 16.080},
    "mqsim": {(1, 15, "burst"): 981.126, (4, 15, "burst"): 245.316,
              (1, 1, "burst"): 85.126, (4, 1, "burst"): 21.316,
              (1, 15, "isolated"): 3165.336, (1, 1, "isolated"): 3151.336},
}


def _ps_key(c, tr, a) -> str:
    return f"C{c}/tR{tr:g}/{a}"


class PageService(Study):
    """External page-service cross-check (source §5.3)."""

    name = "page-service"
    title = "External page-service cross-check"
    source = "§5.3"

    def tasks(self, quick: bool) -> list:
        arr = ("burst",) if quick else ("burst", "isolated")
        return [dict(channels=c, t_read_us=tr, arrivals=a) for a in arr for c in (1, 4)
                for tr in (15.0, 1.0)]

    def config_kwargs(self, task: dict) -> dict:
        from hbfsim.model.workloads import burst_page_service

        return dict(burst_page_service().config, channels=task["channels"],
                    t_read_us=task["t_read_us"])

    def run(self, task: dict) -> list:
        from hbfsim.model.workloads import burst_page_service
        from hbfsim.simulate import choose_engine, run_open, say_once

        gap = 0.01 if task["arrivals"] == "burst" else 50.0
        cfg = study_config(self, task)
        w = burst_page_service(cfg, gap_us=gap)
        engine, note = choose_engine(cfg)
        say_once(note)
        s = run_open(cfg, iter(w), engine).stats
        return [dict(task, gap_us=gap, requests=s["requests"], page_reads=s["page_reads"],
                     mshr_hits=s["mshr_hits"], window_ticks=s["window_ticks"],
                     window_us=s["window_us"])]

    def summarize(self, rows: list, quick: bool) -> dict:
        win = {(r["channels"], r["t_read_us"], r["arrivals"]): r["window_us"] for r in rows}
        windows = {}
        for (c, tr, a), v in sorted(win.items()):
            k = (c, int(tr), a)
            mq = PUBLISHED["mqsim"].get(k) or (PUBLISHED["mqsim"].get((1, int(tr), a))
                                               if a == "isolated" else None)
            windows[_ps_key(c, tr, a)] = {
                "channels": c, "t_read_us": tr, "arrivals": a, "hbfsim_us": v,
                "source_hbfsim_us": PUBLISHED["hbfsim_source"].get(k), "mqsim_us": mq,
                "mqsim_over_ours": pct(mq, v),
                "mqsim_over_source": pct(mq, PUBLISHED["hbfsim_source"].get(k))}
        growth = {}
        for (c, tr, a), v in win.items():
            if tr == 15.0 and (c, 1.0, a) in win:
                growth[f"C{c}/{a}"] = {"channels": c, "arrivals": a,
                                       "hbfsim_us": v - win[(c, 1.0, a)],
                                       "expected_us": 64 * 14 / c if a == "burst" else 14.0}
        return {"windows": windows, "growth": growth,
                "page_reads": sorted({r["page_reads"] for r in rows})}

    def plot(self, rows, summary, path):
        fig, (ax, ax2) = figure()
        ws = [v for v in summary["windows"].values() if v["arrivals"] == "burst"]
        labels = [f"C={v['channels']}\ntR {v['t_read_us']:g}" for v in ws]
        xs = range(len(ws))
        ax.bar([x - 0.27 for x in xs], [v["hbfsim_us"] for v in ws], 0.27, label="hbfsim")
        ax.bar(list(xs), [v["source_hbfsim_us"] or 0 for v in ws], 0.27, label="HBF-Sim (source)")
        ax.bar([x + 0.27 for x in xs], [v["mqsim_us"] or 0 for v in ws], 0.27,
               label="MQSim (source)")
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

    def report(self, rows, s) -> str:
        t = [[k, f"{v['hbfsim_us']:.3f}", fmt(v["source_hbfsim_us"]), fmt(v["mqsim_us"]),
              "-" if v["mqsim_over_ours"] is None else f"{v['mqsim_over_ours'] * 100:+.1f}%",
              "-" if v["mqsim_over_source"] is None else f"{v['mqsim_over_source'] * 100:+.1f}%"]
             for k, v in s["windows"].items()]
        g = [[k, f"{v['hbfsim_us']:.3f}", f"{v['expected_us']:.3f}"]
             for k, v in s["growth"].items()]
        return "\n".join([
            "64 unique pages x 32 merged 128 B requests, one subarray and one active slot per "
            "channel, page cache off; burst = pages 10 ns apart, isolated = 50 us apart. MQSim "
            "isolated figures are the source's (published for one configuration per tR).", "",
            md_table(["case", "hbfsim us", "HBF-Sim (source) us", "MQSim (source) us",
                      "MQSim / hbfsim - 1", "MQSim / HBF-Sim - 1"], t), "",
            md_table(["growth tR 1 -> 15 us", "hbfsim us", "expected us"], g), "",
            f"Array page reads per run: {', '.join(map(str, s['page_reads']))} "
            f"(source: exactly 64)."])

    def headline(self, s: dict) -> list[str]:
        return [f"{k}: {v['hbfsim_us']:.3f} us" for k, v in s["windows"].items()] + \
               [f"growth {k}: {v['hbfsim_us']:.3f} us (expected {v['expected_us']:.3f})"
                for k, v in s["growth"].items()]


STUDY = PageService()
