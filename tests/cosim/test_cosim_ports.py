"""The co-simulation's view of the ports: codecs agree with the Amaranth layouts, names and
widths agree with the emitted Verilog (no simulator needed)."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.lib import data

from hbfsim.cosim.ports import Codecs, StructCodec, port_names
from hbfsim.cosim.runner import ports_control_file
from hbfsim.cosim.scenarios import config
from hbfsim.rtl.layouts import Widths, cmd_layout, cpl_layout, req_layout, resp_layout

LAYOUTS = {"req": req_layout, "resp": resp_layout, "cmd": cmd_layout, "cpl": cpl_layout}


def _flat(view, prefix=""):
    """Every leaf field of a data.Const view as {dotted name: int}."""
    out = {}
    for name, field in view.shape():
        v = getattr(view, name)
        if isinstance(field.shape, data.Layout):
            out |= _flat(v, prefix + name + ".")
        else:
            out[prefix + name] = v.value if hasattr(v, "value") else int(v)
    return out


@pytest.mark.parametrize("rtl", ["A", "16ch"])
@pytest.mark.parametrize("which", sorted(LAYOUTS))
def test_codec_agrees_with_amaranth_layout(rtl, which):
    layout = LAYOUTS[which](Widths.of(config(rtl)))
    codec = StructCodec(layout)
    rng = random.Random(7)
    for _ in range(200):
        v = rng.getrandbits(codec.size)
        fields = _flat(data.Const(layout, v))
        assert codec.unpack(v) == fields
        assert codec.pack(fields) == v
    # packing goes through the same bits as Layout.const(...).as_value()
    names = list(codec.fields)
    get = codec.getter(*names)
    v = rng.getrandbits(codec.size)
    assert dict(zip(names, get(v))) == codec.unpack(v)


def test_codec_rejects_bad_fields():
    codec = StructCodec(cmd_layout(Widths.of(config())))
    with pytest.raises(ValueError, match="not a field"):
        codec.pack({"nope": 1})
    with pytest.raises(ValueError, match="subarray = 4 does not fit"):
        codec.pack({"subarray": 4})


@pytest.mark.parametrize("rtl", ["A", "C", "2stacks", "3stacks-contiguous"])
def test_port_names_and_widths_match_emitted_verilog(rtl):
    from hbfsim.rtl.emit import emit_verilog

    cfg = config(rtl)
    text = emit_verilog(cfg)
    header = re.search(r"module hbf_controller\((.*?)\);", text, re.S).group(1)
    assert sorted(n.strip() for n in header.split(",")) == sorted(port_names(cfg))
    codecs = Codecs(cfg)
    last = f"cmd__{cfg.stacks * cfg.channels - 1}"
    for port, codec in [("req__payload", codecs.req), ("resp__payload", codecs.resp),
                        ("cmd__0", codecs.cmd), ("cpl__0", codecs.cpl), (last, codecs.cmd)]:
        m = re.search(rf"(?:input|output) \[(\d+):0\] {port};", text)
        assert int(m.group(1)) + 1 == codec.size, port
    if cfg.stacks == 1:     # one stack: the controller's own layouts
        assert codecs.req.size == StructCodec(req_layout(Widths.of(cfg))).size
    vlt = ports_control_file(cfg)
    assert vlt.startswith("`verilator_config")
    assert all(f'-var "{n}"' in vlt for n in port_names(cfg))


@pytest.mark.parametrize("rtl,stacks", [("ports", 1), ("ports-partition", 1), ("ports", 2)])
def test_channel_shape_port_names_match_emitted_verilog(rtl, stacks):
    """§1, §2: ``req__<k>`` and ``resp__<k>`` per channel of every stack
    (``k = stack * C + channel``), each with the one-stack layouts."""
    from hbfsim.cosim.ports import host_ports
    from hbfsim.rtl.emit import emit_verilog

    cfg = config(rtl, stacks=stacks, capacity_bytes=config(rtl).capacity_bytes * stacks)
    assert host_ports(cfg) == stacks * cfg.channels > 1
    text = emit_verilog(cfg)
    header = re.search(r"module hbf_controller\((.*?)\);", text, re.S).group(1)
    assert sorted(n.strip() for n in header.split(",")) == sorted(port_names(cfg))
    codecs = Codecs(cfg)
    assert not codecs.system    # each port is its stack's: stack-local addresses (§2)
    for p in range(stacks * cfg.channels):
        for port, codec in [(f"req__{p}__payload", codecs.req),
                            (f"resp__{p}__payload", codecs.resp)]:
            m = re.search(rf"(?:input|output) \[(\d+):0\] {port};", text)
            assert int(m.group(1)) + 1 == codec.size, port
