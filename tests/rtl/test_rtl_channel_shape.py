"""The channel shape in the RTL (docs/timing-contract.md §1, §14): the admission term of
§4.1 against a plain-Python reference cycle for cycle, the ports, multi-plane commands, the
system layer as wiring, and the shape with one channel, which is the stack shape. The whole
controller is compared with the golden model in tests/rtl/test_rtl_controller.py and by
the co-simulation (tests/cosim, the channel-shape scenarios)."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.hdl import Fragment, Shape
from rtl_helpers import simulate, small_config

from hbfsim.rtl.admission import Admission
from hbfsim.rtl.controller import check_supported
from hbfsim.rtl.emit import emit_verilog


@pytest.mark.parametrize("admission,ports,slot_list", [
    (3, 4, None), (6, 4, None), (16, 2, None), (6, 4, True), (16, 2, True), (40, 4, None)])
def test_admission_ready_follows_the_admission_term(admission, ports, slot_list):
    """§4.1: ``ready_p(t)`` is ``admission - inflight(t) >= P`` when ``admission >= P`` and
    ``(p - t) mod P < admission - inflight(t)`` below ``P`` slots, a register; an accept
    takes a slot, a release frees it from the next cycle; accepted ports get distinct
    slots, and a slot is released by the port that took it (§1: a response leaves on the
    port its request entered; the slot store is banked per port). Both structures
    (``slot_list``: forced, or by the slot count: 40 slots take the free list)."""
    cfg = small_config(host_ports="channel", channels=ports, admission=admission)
    dut = Admission(cfg, ports=ports, slot_list=slot_list)
    rng = random.Random(admission * 10 + ports)
    stats = {"held": 0, "all": 0}

    async def tb(ctx):
        held, owner = set(), {}
        for t in range(400):
            free = admission - len(held)
            ready = [free >= ports if admission >= ports else (p - t) % ports < free
                     for p in range(ports)]
            got = ctx.get(dut.alloc_ready)
            assert [bool(got >> p & 1) for p in range(ports)] == ready, (t, held)
            acc = [ready[p] and rng.random() < 0.7 for p in range(ports)]
            # at most one release per port, of a slot that port took
            rel = [next((s for s in sorted(held) if owner[s] == p
                         and rng.random() < ports / (2 * admission)), None)
                   for p in range(ports)]
            ctx.set(dut.alloc, sum(1 << p for p, a in enumerate(acc) if a))
            for p in range(ports):
                ctx.set(dut.release[p].valid, rel[p] is not None)
                ctx.set(dut.release[p].slot, rel[p] or 0)
            owner.update({ctx.get(dut.alloc_slot[p]): p for p in range(ports) if acc[p]})
            slots = [ctx.get(dut.alloc_slot[p]) for p in range(ports) if acc[p]]
            assert len(set(slots)) == len(slots) and not set(slots) & held
            stats["held"] += 0 < free <= ports - 1
            stats["all"] += all(acc)
            await ctx.tick()
            held = (held - set(rel)) | set(slots)

    simulate(dut, tb)
    assert stats["held"] > 20


def test_channel_shape_with_one_channel_is_the_stack_shape():
    """With one channel there is one port: the channel shape's Verilog is the stack
    shape's (the golden model's channel shape equals its stack shape there, §14)."""
    stack = small_config(channels=1)
    chan = small_config(channels=1, host_ports="channel")
    assert emit_verilog(chan, sector_bytes=32) == emit_verilog(stack, sector_bytes=32)


def test_channel_shape_ports():
    """§1: ``req__<p>`` and ``resp__<p>`` per channel."""
    v = emit_verilog(small_config(channels=2, host_ports="channel"),
                     sector_bytes=32)
    for p in range(2):
        for name in ("req", "resp"):
            for sig in ("valid", "ready", "payload"):
                assert f" {name}__{p}__{sig}" in v
    assert " req__valid" not in v


@pytest.mark.parametrize("mode", ["page", "megaplane"])
def test_channel_shape_takes_multiplane_commands(mode):
    """Multi-plane commands (docs/timing-contract.md §7a) in the channel shape: the
    media ports carry the stack shape's multi-plane command layout (no tag; plane mask)."""
    from hbfsim.rtl.layouts import Widths, cmd_layout

    cfg = small_config(channels=2, host_ports="channel", multiplane=mode,
                       megaplane_planes=2)
    check_supported(cfg)
    v = emit_verilog(cfg, sector_bytes=32)
    stack = emit_verilog(cfg.replace(host_ports="stack"), sector_bytes=32)
    width = Shape.cast(cmd_layout(Widths.of(cfg))).width
    for text in (v, stack):
        assert re.search(rf"output \[{width - 1}:0\] cmd__1;", text)
    assert " req__1__valid" in v and " req__1__valid" not in stack


@pytest.mark.parametrize("channels", [1, 2])
def test_channel_shape_of_several_stacks_is_wiring(channels):
    """§2: ``S * C`` request and response ports, port ``k = stack * C + channel`` wired to
    its stack's port with the stack-local request layout; no route stage, no round robin
    (no ``rr``, ``offers`` or ``routed``)."""
    from hbfsim.rtl.layouts import req_layout
    from hbfsim.rtl.system import System, stack_config

    cfg = small_config(channels=channels, stacks=2, host_ports="channel")
    check_supported(cfg)
    sys_ = System(cfg, checks=False)
    assert len(sys_.req) == len(sys_.resp) == 2 * channels
    assert sys_.req[0].payload.shape() == req_layout(sys_.widths)   # stack-local address
    assert sys_.stack_cfg == stack_config(cfg)
    assert not {"rr", "offers", "routed"} & set(sys_.signature.members)
    Fragment.get(sys_, None)     # elaborates (and so uses) it
    v = emit_verilog(cfg, sector_bytes=32)
    for k in range(2 * channels):
        assert f" req__{k}__valid" in v and f" resp__{k}__payload" in v
    assert f" req__{2 * channels}__valid" not in v and " rr;" not in v
