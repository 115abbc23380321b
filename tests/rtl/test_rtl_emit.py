"""Verilog output of the controller (rtl/emit.py)."""

from __future__ import annotations

import re

import pytest
from rtl_helpers import small_config

from hbfsim.rtl.emit import emit_verilog


def test_emit_verilog_has_the_contract_ports():
    cfg = small_config(channels=2)
    text = emit_verilog(cfg, sector_bytes=32)
    top = text[text.index("module hbf_controller"):]
    top = top[:top.index("endmodule")]
    ports = set(re.findall(r"^\s*(?:input|output)\s+(?:\[\d+:\d+\]\s+)?(\w+)", top, re.M))
    assert {"clk", "rst", "req__valid", "req__ready", "req__payload", "resp__valid",
            "resp__ready", "resp__payload", "cmd__0", "cmd__1", "cpl__0", "cpl__1",
            "drain"} <= ports
    assert "assert" not in top  # simulation checks are off by default


def test_emit_verilog_rejects_unsupported_configurations():
    with pytest.raises(ValueError, match="page_cache_pages"):
        emit_verilog(small_config(page_cache_pages=4))
