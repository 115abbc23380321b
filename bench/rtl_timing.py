"""Print Fmax, resources and the critical path of the controller over a sweep (issue 12).

    python bench/rtl_timing.py [--sweep mshr_entries|write_buffer_entries|channels]
                               [--values 8,16,32] [--sector-bytes 32] [--seed 1] [--json F]
                               [--wrapper auto|always|never] [--set KEY=VALUE ...]

Each row is one ``hbfsim rtl timing`` run (Yosys ``synth_ecp5`` + nextpnr-ecp5, LFE5U-85F-6
CABGA381; needs the ``timing`` extra): Yosys 0.5-4 min and nextpnr 1-4 min per point on a
2-core machine. The base point and the sweeps are those of bench/rtl_area.py (2 channels x 4
subarrays, 8 MSHRs, 4 write-buffer entries, 16 request slots, queue depth 4, 256 MiB,
bench/rtl_base.toml). A point whose ports outnumber the package's pins (4 channels and up)
is placed inside the scan wrapper, marked ``yes`` in the ``wrapped`` column;
``--wrapper always`` wraps every point, as the Fmax targets of docs/rtl.md are measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rtl_area import BASE, SWEEPS  # noqa: E402

from hbfsim.config import load_config  # noqa: E402
from hbfsim.rtl.timing import timing_report  # noqa: E402
from hbfsim.studies.cli import _config_set  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", choices=[k for k, _ in SWEEPS], action="append",
                    help="sweep only this key (repeatable; default: all)")
    ap.add_argument("--values", help="comma-separated values for a single --sweep")
    ap.add_argument("--sector-bytes", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wrapper", choices=("auto", "always", "never"), default="auto",
                    help="scan wrapper around the ports, as hbfsim rtl timing (default auto: "
                         "only when they outnumber the package's pins)")
    ap.add_argument("--json", metavar="F", help="also write every row as JSON")
    ap.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                    dest="config_set", help="override a key of the base point (repeatable), "
                    "e.g. --set host_ports=channel")
    a = ap.parse_args(argv)
    try:
        base = BASE | _config_set(a.config_set)
        load_config(**base)
    except ValueError as e:
        ap.error(str(e))
    sweeps = [(k, v) for k, v in SWEEPS if not a.sweep or k in a.sweep]
    if a.values:
        if len(sweeps) != 1:
            ap.error("--values needs exactly one --sweep")
        sweeps = [(sweeps[0][0], tuple(int(x) for x in a.values.split(",")))]
    print(f"LFE5U-85F-6 CABGA381, coverage granularity {a.sector_bytes} B, nextpnr seed "
          f"{a.seed}; resources of the placed netlist (Yosys stat after synth_ecp5)"
          + (f"; base point with {_config_set(a.config_set)}" if a.config_set else ""))
    print("| sweep | value | wrapped | Fmax MHz | LUT4 | FF | DPR16X4 | DP16KD | MULT18 | "
          "critical path | late inputs | yosys s | nextpnr s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for key, values in sweeps:
        for v in values:
            r = timing_report(load_config(**(base | {key: v})), sector_bytes=a.sector_bytes,
                              seed=a.seed, wrapper=a.wrapper)
            res, cp = r["resources"], r["critical_path"]
            print(f"| {key} | {v} | {'yes' if r['wrapped'] else 'no'} | {r['fmax_mhz']:.2f} | "
                  f"{res.get('LUT4', 0):,} | {res.get('TRELLIS_FF', 0):,} | "
                  f"{res.get('TRELLIS_DPR16X4', 0):,} | {res.get('DP16KD', 0):,} | "
                  f"{res.get('MULT18X18D', 0):,} | {cp['from']} -> {cp['to']} | "
                  f"{r['endpoints']['late']:,} of {r['endpoints']['endpoints']:,} | "
                  f"{r['yosys_s']:.0f} | {r['nextpnr_s']:.0f} |", flush=True)
            rows.append({"sweep": key, "value": v} | r)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
