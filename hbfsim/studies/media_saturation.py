"""Media resource scaling (source §5.4): array bandwidth against channels and producers.

1-16 channels x 256/512/1024/2048 producers, each reading one sector of its own page, and a
fixed 32-slot control (``active_total = 32`` for the whole stack).
"""

from __future__ import annotations

from hbfsim.studies.base import Study
from hbfsim.studies.common import GB, figure, fmt, md_table, pct, run_closed, study_config

__all__ = ["MediaSaturation", "STUDY"]

PUBLISHED = {
    "bandwidth_gbs": {1: 8.738, 2: 17.472, 4: 34.920, 8: 69.774, 16: 139.285},
    "producers_16ch_gbs": {256: 69.0, 512: 138.291, 1024: 139.285},
    "doubling_2048_change": 0.002,
    "fixed_32_slots_16ch_gbs": 8.738,
    "utilization": {1: 0.9999, 16: 0.9963},
    "sector_bandwidth_16ch_gbs": 1.088,
}


class MediaSaturation(Study):
    """Media resource scaling (source §5.4)."""

    name = "media-saturation"
    title = "Media resource scaling"
    source = "§5.4"

    def tasks(self, quick: bool) -> list:
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

    def config_kwargs(self, task: dict) -> dict:
        from hbfsim.model.workloads import media_saturation

        return dict(media_saturation().config, channels=task["channels"],
                    active_total=task["active_total"])

    def run(self, task: dict) -> list:
        from hbfsim.config import PAGE_BYTES
        from hbfsim.model.workloads import media_saturation

        c, p, at = task["channels"], task["producers"], task["active_total"]
        cfg = study_config(self, task)
        w = media_saturation(cfg, producers=p)
        res, s = run_closed(cfg, w)
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

    def summarize(self, rows: list, quick: bool) -> dict:
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
            "published": PUBLISHED,
        }
        if 1024 in p16 and 2048 in p16:
            out["doubling_2048_change"] = pct(p16[2048]["array_bandwidth_gbs"],
                                              p16[1024]["array_bandwidth_gbs"])
        return out

    def plot(self, rows, summary, path):
        fig, (ax, ax2) = figure()
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
        pub = sorted(PUBLISHED["bandwidth_gbs"].items())
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

    def report(self, rows, s) -> str:
        pub = PUBLISHED
        t = [[c, fmt(s["bandwidth_gbs"][c]), fmt(pub["bandwidth_gbs"].get(c)),
              fmt(s["ceiling_gbs"][c]), f"{s['fraction_of_ceiling'][c]:.4f}",
              f"{s['utilization'][c]:.4f}"] for c in s["bandwidth_gbs"]]
        out = ["1024 producers each read one sector of their own page; 32 subarrays and 32 "
               "active slots per channel, admission 4096, tR 15 us, page cache off.", "",
               md_table(["channels", "hbfsim GB/s", "source GB/s", "ceiling GB/s",
                         "fraction of ceiling", "media utilization"], t), ""]
        if s.get("scaling_1_to_16"):
            out.append(f"Scaling 1 -> 16 channels: **{s['scaling_1_to_16']:.2f}x** "
                       f"(source 15.94x).")
        if s["producers_16ch_gbs"]:
            t = [[p, fmt(v), fmt(pub["producers_16ch_gbs"].get(p))]
                 for p, v in s["producers_16ch_gbs"].items()]
            out += ["", "Producer controls at 16 channels (512 slots):", "",
                    md_table(["producers", "hbfsim GB/s", "source GB/s"], t)]
        if s.get("doubling_2048_change") is not None:
            out.append(f"\n2048 vs 1024 producers at 16 channels: "
                       f"{s['doubling_2048_change'] * 100:+.2f}% (source about +0.2%).")
        if s["fixed_32_slots_gbs"]:
            t = [[c, fmt(v)] for c, v in s["fixed_32_slots_gbs"].items()]
            out += ["", "Fixed-slot control (`active_total = 32` for the whole stack; source "
                    "8.738 GB/s at 16 channels):", "", md_table(["channels", "hbfsim GB/s"], t)]
        if s.get("sector_bandwidth_16ch_gbs"):
            out.append(f"\nGPU sector bandwidth at 16 channels: "
                       f"{s['sector_bandwidth_16ch_gbs']:.3f} GB/s (source 1.088 GB/s).")
        return "\n".join(out)

    def headline(self, s: dict) -> list[str]:
        bw = s["bandwidth_gbs"]
        out = ["array bandwidth (1024 producers): " + ", ".join(
            f"{c} ch {v:.3f}" for c, v in bw.items()) + " GB/s"]
        if s.get("scaling_1_to_16"):
            out.append(f"scaling 1 -> 16 channels {s['scaling_1_to_16']:.2f}x (source 15.94x)")
        return out


STUDY = MediaSaturation()
