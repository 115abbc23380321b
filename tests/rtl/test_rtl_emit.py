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


def test_emit_verilog_of_several_stacks_is_the_system():
    """§2: same top-module name and port scheme; media ports numbered stack * channels +
    channel; the request address spans every stack."""
    cfg = small_config(channels=2, stacks=2)
    text = emit_verilog(cfg, sector_bytes=32)
    top = text[text.index("module hbf_controller("):]
    top = top[:top.index("endmodule")]
    ports = dict((name, width) for width, name in re.findall(
        r"^\s*(?:input|output)\s+(?:\[(\d+):0\]\s+)?(\w+)", top, re.M))
    assert {"clk", "rst", "req__valid", "req__ready", "req__payload", "resp__valid",
            "resp__ready", "resp__payload", "drain", "m_valid"} <= ports.keys()
    assert {f"cmd__{k}" for k in range(4)} | {f"cpl__{k}" for k in range(4)} <= ports.keys()
    assert "cmd__4" not in ports
    one = emit_verilog(small_config(channels=2), sector_bytes=32)
    one_ports = dict((name, width) for width, name in re.findall(
        r"^\s*(?:input|output)\s+(?:\[(\d+):0\]\s+)?(\w+)",
        one[one.index("module hbf_controller("):], re.M))
    # twice the pages: one more address bit; every other payload is a stack's
    assert int(ports["req__payload"]) == int(one_ports["req__payload"]) + 1
    assert ports["resp__payload"] == one_ports["resp__payload"]
    assert ports["cmd__3"] == one_ports["cmd__1"]


def test_emit_verilog_rejects_unsupported_configurations():
    with pytest.raises(ValueError, match="page_cache_pages"):
        emit_verilog(small_config(page_cache_pages=4))


def test_geometry_vocabulary_changes_nothing_in_the_rtl():
    """Dies, megaplanes and SRAM sizes are labels while ``multiplane = "off"``: the RTL
    accepts them and emits the same Verilog (docs/flashaccel.md)."""
    plain = small_config(subarrays_per_channel=6, active_per_channel=6)
    named = small_config(subarrays_per_channel=6, active_per_channel=6, planes_per_die=3,
                         megaplane_planes=3, plane_sram_bytes=32 << 10,
                         base_die_sram_bytes=32 << 20)
    assert emit_verilog(named, sector_bytes=32) == emit_verilog(plain, sector_bytes=32)


@pytest.mark.parametrize("profile", ["flashaccel", "ocp-grade1", "ocp-grade2"])
def test_the_rtl_rejects_nothing_the_new_profiles_need(profile):
    from hbfsim.config import load_config
    from hbfsim.rtl.controller import check_supported

    check_supported(load_config(profile=profile))  # raises naming the key otherwise


def _port_widths(text):
    top = text[text.index("module hbf_controller("):]
    return dict((name, int(width or 0) + 1) for width, name in re.findall(
        r"^\s*(?:input|output)\s+(?:\[(\d+):0\]\s+)?(\w+)", top, re.M))


def test_multiplane_commands_carry_the_planes_mask():
    """docs/timing-contract.md §7a MP2, MP7: cmd is (valid, op, megaplane, planes,
    row), cpl (valid, megaplane, planes, buffer_hit mask, error mask); no tag."""
    from hbfsim.rtl.layouts import Widths, cmd_layout, cpl_layout

    cfg = small_config(multiplane="megaplane", megaplane_planes=2)
    w = Widths.of(cfg)
    assert [n for n, _ in cmd_layout(w)] == ["valid", "op", "megaplane", "planes", "row"]
    assert [n for n, _ in cpl_layout(w)] == ["valid", "megaplane", "planes", "buffer_hit",
                                             "error"]
    assert (w.planes, w.megaplane) == (2, 1)
    ports = _port_widths(emit_verilog(cfg, sector_bytes=32))
    assert ports["cmd__0"] == 1 + 1 + 1 + 2 + w.row
    assert ports["cpl__0"] == 1 + 1 + 3 * 2


def test_multiplane_off_has_no_new_hardware():
    """With multiplane off the layouts are the single-plane ones (subarray, page, tag)."""
    from hbfsim.rtl.layouts import Widths, cmd_layout

    w = Widths.of(small_config(megaplane_planes=2))
    assert w.planes == 0
    assert [n for n, _ in cmd_layout(w)] == ["valid", "op", "subarray", "page", "tag"]


def test_multiplane_is_supported_in_both_shapes():
    """Multi-plane commands in the stack and the channel shape."""
    from hbfsim.rtl.controller import check_supported

    check_supported(small_config(multiplane="page", megaplane_planes=2))
    check_supported(small_config(multiplane="megaplane", megaplane_planes=2,
                                 host_ports="channel"))
