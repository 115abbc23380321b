"""Protecting reads from write interference (source §6.2).

FCFS, read priority, write drain and 1R/3W, 2R/2W, 3R/1W partitions against the read-start
delay, with read-only, extended-deadline and request-counting-admission controls.
"""

from __future__ import annotations

from hbfsim.studies.base import Study
from hbfsim.studies.common import figure, fmt, md_table, p95, pct, run_closed, \
    study_config

__all__ = ["RwIsolation", "STUDY"]

POLICIES = ("fcfs", "read-priority", "write-drain", "partition-1r3w", "partition-2r2w",
            "partition-3r1w")
DELAYS = (0, 50, 100, 150, 200, 250)
PUBLISHED = {
    "4p_100us": {"read_p95": {"read-priority": 232456, "partition-3r1w": 169730},
                 "kernel": {"read-priority": 776097, "partition-3r1w": 911850},
                 "write_p95": {"read-priority": 226715, "partition-3r1w": 905889}},
    "4p_read_p95_3r1w_vs_shared": {0: (118999, 152968), 50: (289058, 169710)},
    "budget_shared_ok_us": [0, 150, 250], "budget_only_3r1w_us": [50, 100],
    "configurations": 37, "deadline_failures": 1,
}


class RwIsolation(Study):
    """Protecting reads from write interference (source §6.2)."""

    name = "rw-isolation"
    title = "Protecting reads from write interference"
    source = "§6.2"

    def tasks(self, quick: bool) -> list:
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
                 for w in (4, 16) for p in POLICIES for d in DELAYS]
        tasks += [dict(kind="read-only", scheduler="read-priority", write_pages=0,
                       read_delay_us=d, deadline_ticks=10000, admission=4096) for d in DELAYS]
        # the source's extended-deadline control (400 us) and our request-counting admission
        tasks += [dict(kind="extended-deadline", scheduler=p, write_pages=16, read_delay_us=100,
                       deadline_ticks=340000, admission=4096) for p in POLICIES]
        tasks += [dict(kind="admission-256", scheduler=p, write_pages=4, read_delay_us=100,
                       deadline_ticks=10000, admission=256) for p in POLICIES]
        return tasks

    def config_kwargs(self, task: dict) -> dict:
        from hbfsim.model.workloads import rw_isolation

        return dict(rw_isolation().config, scheduler=task["scheduler"],
                    write_deadline_ticks=task["deadline_ticks"], admission=task["admission"])

    def run(self, task: dict) -> list:
        from hbfsim.model.workloads import rw_isolation

        cfg = study_config(self, task)
        w = rw_isolation(cfg, write_pages=task["write_pages"], read_delay_us=task["read_delay_us"])
        res, s = run_closed(cfg, w, record=True)
        rl = [r.t_done - r.created for r in res.records if r.op == "R"]
        wl = [r.t_done - r.created for r in res.records if r.op == "W"]
        g = cfg.ticks_to_gpu_cycles
        rp, wp = p95(rl), p95(wl)
        return [dict(task, requests=s["requests"], read_p95_gpu_cycles=g(rp),
                     write_p95_gpu_cycles=None if wp is None else g(wp),
                     kernel_gpu_cycles=res.span_gpu_cycles, page_programs=s["page_programs"],
                     strict_errors=s["strict_errors"], errors=s["errors"],
                     deadline_flushes=s["timeout_flushes"], page_reads=s["page_reads"])]

    def summarize(self, rows: list, quick: bool) -> dict:
        ro = {r["read_delay_us"]: r["read_p95_gpu_cycles"] for r in rows
              if r["kind"] == "read-only"}
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
                "read_change": pct(iso["read_p95_gpu_cycles"], sh["read_p95_gpu_cycles"]),
                "write_ratio": iso["write_p95_gpu_cycles"] / sh["write_p95_gpu_cycles"],
                "kernel_change": pct(iso["kernel_gpu_cycles"], sh["kernel_gpu_cycles"]),
                "budget": budget,
                "shared_meets_budget": None if budget is None else
                sh["read_p95_gpu_cycles"] <= budget,
                "3r1w_meets_budget": None if budget is None else
                iso["read_p95_gpu_cycles"] <= budget}
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
                "published": PUBLISHED}

    def plot(self, rows, summary, path):
        fig, (ax, ax2) = figure()
        main = [r for r in rows if r["kind"] == "main" and r["write_pages"] == 4]
        for p in POLICIES:
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
        pub = PUBLISHED["4p_read_p95_3r1w_vs_shared"]
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

    def report(self, rows, s) -> str:
        out = ["512 sector reads over 16 pages (4 outstanding per reader warp) starting after "
               "the nominal delay, beside `write_pages` pages of 128 full-coverage sector stores "
               "(128 outstanding per writer warp); 4 channels x 1 subarray x 1 active slot, "
               "strict deadline 10,000 ticks, admission 4096 (page-operation semantics: see "
               "docs/results.md). Latency is creation to response, p95 in GPU cycles.", ""]
        t = []
        for wp, byd in s["table"].items():
            for d, pol in sorted(byd.items(), key=lambda kv: float(kv[0])):
                for p, v in pol.items():
                    t.append([wp, d, p, fmt(v["read_p95_gpu_cycles"]),
                              fmt(v["write_p95_gpu_cycles"]), fmt(v["kernel_gpu_cycles"]),
                              v["strict_errors"]])
        out += [md_table(["written pages", "read delay us", "policy", "read p95", "write p95",
                          "kernel", "strict errors"], t), ""]
        out.append("Read-only controls (read p95): " + ", ".join(
            f"{d} us: {v:,}" for d, v in sorted(s["read_only_p95"].items())))
        t = []
        for d, h in sorted(s["headline_4_pages"].items(), key=lambda kv: float(kv[0])):
            t.append([d, fmt(h["read_p95_shared"]), fmt(h["read_p95_3r1w"]),
                      f"{h['read_change'] * 100:+.1f}%", f"{h['write_ratio']:.2f}x",
                      f"{h['kernel_change'] * 100:+.1f}%",
                      {True: "yes", False: "no", None: "-"}[h["shared_meets_budget"]],
                      {True: "yes", False: "no", None: "-"}[h["3r1w_meets_budget"]]])
        out += ["", "3R/1W against shared read priority, 4 written pages (source at 100 us: read "
                "p95 -27.0%, write p95 4.00x, kernel +17.5%; budget met by sharing at 0/150/250 "
                "us, only by 3R/1W at 50/100 us):", "",
                md_table(["delay us", "shared read p95", "3R/1W read p95", "read change",
                          "write p95 ratio", "kernel change", "shared meets budget",
                          "3R/1W meets budget"], t), "",
                f"Strict-deadline failures: {s['deadline_failures']} of {s['configurations']} "
                f"configurations (source: 1 of 37)."]
        if s["controls"]:
            t = [[c["kind"], c["scheduler"], c["write_pages"], c["admission"], c["deadline_ticks"],
                  fmt(c["read_p95_gpu_cycles"]), fmt(c["write_p95_gpu_cycles"]),
                  fmt(c["kernel_gpu_cycles"]), c["strict_errors"]] for c in s["controls"]]
            out += ["", "Controls (read delay 100 us):", "",
                    md_table(["control", "policy", "written pages", "admission", "deadline ticks",
                              "read p95", "write p95", "kernel", "strict errors"], t)]
        return "\n".join(out)

    def headline(self, s: dict) -> list[str]:
        return [f"4 pages, {d} us: 3R/1W read p95 {h['read_change'] * 100:+.1f}%, write p95 "
                f"{h['write_ratio']:.2f}x, kernel {h['kernel_change'] * 100:+.1f}%"
                for d, h in s["headline_4_pages"].items()] + \
               [f"strict-deadline failures: {s['deadline_failures']} of {s['configurations']}"]


STUDY = RwIsolation()
