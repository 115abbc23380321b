"""Verilog output of the stack controller (docs/rtl.md "Verilog").

The top module's ports are the contract's four interfaces and ``drain`` (timing contract §1),
flattened by Amaranth into ``req__valid``, ``req__payload`` (packed as ``req_layout``) and so on.
"""

from __future__ import annotations

__all__ = ["emit_verilog"]

from amaranth.back import verilog

from hbfsim.config import HbfConfig
from hbfsim.rtl.controller import Controller


def emit_verilog(cfg: HbfConfig, *, name: str = "hbf_controller", checks: bool = False,
                 **options) -> str:
    """Return the Verilog of :class:`Controller` for ``cfg``.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration (see :func:`hbfsim.rtl.controller.check_supported`).
    name : str
        Name of the top module.
    checks : bool
        Keep the simulation assertions (emitted as immediate ``assert`` statements).
    **options
        ``id_bits``, ``source_bits``, ``sector_bytes`` of :class:`Controller`.

    Raises
    ------
    ValueError
        For a configuration the RTL does not implement.
    """
    return verilog.convert(Controller(cfg, checks=checks, **options), name=name)
