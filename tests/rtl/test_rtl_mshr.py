"""The RTL MSHR table (docs/timing-contract.md §4.3, DP1-DP7) on its own: the properties it
asserts on its ports. Its cycles are the controller's: tests/rtl/test_rtl_controller.py
compares the whole controller with the golden model with every block's checks on, and the
formal block ``mshr`` (tests/rtl/test_rtl_formal.py) proves its properties to a depth."""

from __future__ import annotations

import pytest
from rtl_helpers import simulate, small_config

from hbfsim.rtl.mshr import Mshr


@pytest.mark.parametrize("event", ["done", "issue", "launched"])
def test_an_event_for_a_free_entry_trips_an_assertion(event):
    """From reset every entry is FREE: a completion, an issue or a launch naming one breaks
    the neighbours' protocol, and the simulation stops on the assertion that says so."""
    dut = Mshr(small_config())
    port = {"done": dut.done[0], "issue": dut.issue[0], "launched": dut.launched}[event]
    want = {"done": "not ISSUED", "issue": "not QUEUED", "launched": "waiters left"}[event]

    async def tb(ctx):
        await ctx.tick()
        ctx.set(port.valid, 1)
        await ctx.tick()
        await ctx.tick()

    with pytest.raises(AssertionError, match=want):
        simulate(dut, tb)


def test_the_channel_shape_has_a_port_per_channel():
    """With ``ports = P`` the dispatch, the W register's entry and the response port are
    one per port."""
    cfg = small_config(host_ports="channel", channels=4)
    dut = Mshr(cfg, ports=4)
    assert len(dut.disp) == len(dut.w_entry) == len(dut.ret) == len(dut.launched) == 4
    assert len(dut.disp_hit) == len(dut.w_match) == 4
    dut._MustUse__silence = True
