"""Verilog output of the controller: one stack, or the system of several (docs/rtl.md "Verilog").

The top module's ports are the contract's four interfaces and ``drain`` (timing contract §1,
§2), flattened by Amaranth into ``req__valid``, ``req__payload`` (packed as ``req_layout``,
or ``system_req_layout`` for several stacks), ``cmd__<k>`` and so on.
"""

from __future__ import annotations

__all__ = ["emit_verilog"]

from amaranth.back import verilog

from hbfsim.config import HbfConfig
from hbfsim.rtl.system import top


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
    """
    # emit_src=False: no ``(* src = "file:line" *)`` attribute on every wire and cell. They
    # were 37 % of the default configuration's Verilog (6.2 of 16.7 MB), the text Amaranth
    # writes and Yosys parses and writes again, and they made the output depend on the
    # checkout's path; the names (``named`` signals, per-entry registers) locate the logic
    return verilog.convert(top(cfg, checks=checks, **options), name=name, emit_src=False)
