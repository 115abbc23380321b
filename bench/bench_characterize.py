"""Characterize the HBF tier of several profiles and print the tables of
docs/serving-hbf-tier.md (markdown), with the host time of each characterization.

    python bench/bench_characterize.py [--profiles reference,ocp-grade3,hbf-serving]
                                       [--changes] [--lines] [--engine compiled|reference]

Always recomputes (no cache). ``--changes`` adds the controller-change table (one
characterization of hbf-serving per change); ``--lines`` characterizes hbf-serving with
128 B line requests (slow: 32 requests per page). ``--engine`` runs every transfer on that
engine (default: the configuration's ``engine`` key, compiled; the same figures,
docs/engine.md); the line under the first table names, per profile, the engine that ran.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from hbfsim.config import ENGINES, load_config
from hbfsim.serve import characterize as ch

CHANGES = (
    ("hbf-serving", {}),
    ("channels 16 -> 8", {"channels": 8}),
    ("mshr_entries 8192 -> 2048", {"mshr_entries": 2048}),
    ("t_read_us 15 -> 30", {"t_read_us": 30.0}),
    ("scheduler read-priority -> fcfs", {"scheduler": "fcfs"}),
    ("scheduler read-priority -> write-drain", {"scheduler": "write-drain"}),
    ("scheduler read-priority -> partition-2r2w", {"scheduler": "partition-2r2w"}),
    ("write_buffer_entries 4096 -> 1024", {"write_buffer_entries": 1024}),
)


def figures(t) -> list[str]:
    return [f"{t.read_bw / 1e9:.1f}", f"{t.read_latency_s * 1e6:.2f}",
            f"{t.read_curve[0][1] * 1e6:.2f}",
            f"{t.kv_read_bw / 1e9:.1f}", f"{t.kv_read_latency_s * 1e6:.2f}",
            f"{t.write_bw / 1e9:.2f}", f"{t.write_latency_s * 1e6:.1f}",
            f"{t.write_curve[0][1] * 1e6:.1f}", f"{t.write_amplification:.4f}"] + mixed(t)


def mixed(t) -> list[str]:
    """Reads under KV writes (the mixed row) beside the same reads alone."""
    (m,) = [r for r in t.points if r["kind"] == "mixed"]
    (alone,) = [r for r in t.points if r["kind"] == "read" and r["fit"]
                and r["pattern"] == "stream" and r["bytes"] == m["bytes"]]
    return [f"{m['seconds'] * 1e6:.1f} ({alone['seconds'] * 1e6:.1f})",
            f"{m['write_seconds'] * 1e6:.1f}"]


HEAD = ("| {} | stream GB/s | stream latency us | first read us | kv GB/s | kv latency us "
        "| write GB/s | write latency us | first write us | WA | mixed: reads us (alone) "
        "| mixed: writes us | host s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="reference,ocp-grade3,hbf-serving")
    ap.add_argument("--changes", action="store_true")
    ap.add_argument("--lines", action="store_true")
    ap.add_argument("--engine", choices=ENGINES,
                    help="the engine of every transfer (default: the configuration's engine "
                         "key, compiled)")
    a = ap.parse_args(argv)
    eng = {} if a.engine is None else {"engine": a.engine}
    profiles = a.profiles.split(",")
    try:                  # every profile checked before the first characterization
        cfgs = {p: load_config(profile=p, **eng) for p in profiles}
    except ValueError as e:
        print(f"bench_characterize: {e}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="hbfsim-char-")
    results = {}
    print(HEAD.format("profile"))
    for p in profiles:
        cfg = cfgs[p]
        t0 = time.perf_counter()
        t = ch.characterize(cfg, cache=False, cache_dir=tmp)
        host = time.perf_counter() - t0
        results[p] = (cfg, t)
        print(f"| `{p}` | " + " | ".join(figures(t)) + f" | {host:.2f} |")
    print()
    for p, (_, t) in results.items():      # each names the engine that ran
        print(f"`{p}`: {t.source}")
    for p, (cfg, t) in results.items():
        print(f"\n#### `{p}`: measurements (W = {ch.wave_pages(cfg)} pages)\n")
        print("| kind | pattern | bytes | outstanding | measured us | line us | residual |"
              " GB/s |\n|---|---|---|---|---|---|---|---|")
        for r in t.points:
            line = (f"{r['line_s'] * 1e6:.2f} | {r['residual']:+.1%}" if "line_s" in r
                    else "- | -")
            print(f"| {r['kind']} | {r['pattern']} | {r['bytes']:,} | {r['outstanding']} | "
                  f"{r['seconds'] * 1e6:.2f} | {line} | {r['bytes'] / r['seconds'] / 1e9:.2f} |")
        t0 = time.perf_counter()
        rows = ch.check_against_device(cfg, t)
        host = time.perf_counter() - t0
        print(f"\n`{p}`: prediction against direct device-model runs ({host:.2f} s)\n")
        print("| transfer (not in the fit) | bytes | device us | predicted us | error | "
              "tolerance |\n|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['label']} | {r['bytes']:,} | {r['measured_s'] * 1e6:.2f} | "
                  f"{r['predicted_s'] * 1e6:.2f} | {r['error']:+.1%} | "
                  f"{r['tolerance']:.0%} |")
    if a.changes:
        print("\n" + HEAD.format("change"))
        for label, changes in CHANGES:
            cfg = load_config(profile="hbf-serving", **changes, **eng)
            t0 = time.perf_counter()
            t = ch.characterize(cfg, cache=False, cache_dir=tmp)
            print(f"| {label} | " + " | ".join(figures(t))
                  + f" | {time.perf_counter() - t0:.2f} |")
    if a.lines:
        cfg = load_config(profile="hbf-serving", **eng)
        t0 = time.perf_counter()
        t = ch.characterize(cfg, cache=False, cache_dir=tmp, request_bytes=128)
        print("\n" + HEAD.format("requests"))
        print("| 128 B lines | " + " | ".join(figures(t))
              + f" | {time.perf_counter() - t0:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
