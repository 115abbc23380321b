"""Emit the registered pipeline's Verilog for a fixed set of configurations, or compare two
such sets: the check that a refactoring of rtl/ changes no emitted design (docs/rtl.md
"Verification").

    python bench/rtl_verilog_equal.py emit DIR        # ten configurations x checks off / on
    python bench/rtl_verilog_equal.py emit DIR --set pools=stack   # a key on every one
    python bench/rtl_verilog_equal.py compare OLD NEW

``--set`` pins a key that a commit added or whose default it changed (the channel shape's
pools since 2026-12-04: ``--set pools=stack`` against a checkout from before).

``compare`` strips Amaranth's ``(* src = "file:line" *)`` attributes (they move with every
edit) and numbers its automatic inter-module ports alike (``\\port$N$0``: they follow the
order in which elaboration creates values), and reports each file as ``identical`` (byte
for byte otherwise) or ``DIFFERENT`` with the first differing lines; exit status 1 if any
differs. Run ``emit`` on a checkout of each commit.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BASE = dict(channels=2, subarrays_per_channel=4, active_per_channel=4, admission=16,
            mshr_entries=8, queue_depth=4, write_buffer_entries=4, pages_per_block=256)
CONFIGS = {
    "stack-base": dict(host_ports="stack"),
    "channel-base": dict(host_ports="channel"),
    "channel-aggregation": dict(host_ports="channel", read_mode="aggregation"),
    "stack-aggregation": dict(host_ports="stack", read_mode="aggregation"),
    "channel-merge-off": dict(host_ports="channel", mshr_merge=False),
    "stack-page": dict(host_ports="stack", multiplane="page", megaplane_planes=2),
    "channel-megaplane": dict(host_ports="channel", multiplane="megaplane",
                              megaplane_planes=2),
    "channel-2stacks": dict(host_ports="channel", stacks=2),
    "stack-2stacks": dict(host_ports="stack", stacks=2),
    "channel-partition": dict(host_ports="channel", channels=4, scheduler="partition-2r2w"),
}


def emit(out: Path, sets: dict | None = None) -> None:
    from hbfsim.config import load_config
    from hbfsim.rtl.emit import emit_verilog

    out.mkdir(parents=True, exist_ok=True)
    for name, over in CONFIGS.items():
        v = BASE | over | (sets or {})
        v["capacity_bytes"] = v.get("stacks", 1) * v["channels"] * 4 * 256 * 4096 * 8
        cfg = load_config(**v)
        t0 = time.perf_counter()
        for checks in (False, True):
            text = emit_verilog(cfg, checks=checks, sector_bytes=32)
            (out / f"{name}{'-checks' if checks else ''}.v").write_text(text)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)


def _lines(path: Path) -> list[str]:
    text = re.sub(r'\(\* src = "[^"]*" \*\) ?', "", path.read_text())
    # Amaranth numbers the ports it adds between modules (``\port$5865$0``) in the order
    # elaboration creates values; the same netlist read in another order renumbers them
    text = re.sub(r"port\$\d+\$0", "port$N$0", text)
    return [line for line in text.split("\n") if line.strip()]


def compare(old: Path, new: Path) -> int:
    bad = 0
    for f in sorted(old.glob("*.v")):
        other = new / f.name
        if not other.exists():
            print(f"MISSING    {f.name}")
            bad += 1
            continue
        a, b = _lines(f), _lines(other)
        if a == b:
            print(f"identical  {f.name}")
            continue
        bad += 1
        diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
                if d[:1] in "+-" and d[:3] not in ("+++", "---")]
        print(f"DIFFERENT  {f.name}: {len(diff)} lines")
        for d in diff[:6]:
            print(f"    {d[:120]}")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emit")
    e.add_argument("dir", type=Path)
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a configuration key for every configuration (an integer, a float, "
                        "true or false as written, else a string)")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "emit":
        from hbfsim.cli import _param_value

        sets = {}
        for kv in a.set:
            key, eq, value = kv.partition("=")
            if not eq or not key:
                ap.error(f"--set {kv!r}: expected KEY=VALUE")
            sets[key] = _param_value(value)   # the CLI's --param reading of a value
        from hbfsim.config import ConfigError, load_config
        try:   # every configuration checked before the folder or any file is written
            for over in CONFIGS.values():
                load_config(**(BASE | over | sets))
        except ConfigError as e:
            ap.error(f"--set: {e}")
        emit(a.dir, sets)
        return 0
    for d in (a.old, a.new):
        if not d.is_dir():
            print(f"rtl_verilog_equal: {d} is not a folder", file=sys.stderr)
            return 2
    return compare(a.old, a.new)


if __name__ == "__main__":
    sys.exit(main())
