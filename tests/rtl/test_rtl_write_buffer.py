"""The RTL write buffer (docs/timing-contract.md §4.4, §5, DP1-DP7) on its own: the
validation of its sector size and the properties it asserts on its ports. Its cycles are
the controller's: tests/rtl/test_rtl_controller.py compares the whole controller with the
golden model with every block's checks on, and the formal block ``write_buffer``
(tests/rtl/test_rtl_formal.py) proves its properties to a depth."""

from __future__ import annotations

import gc

import pytest
from rtl_helpers import simulate, small_config

from hbfsim.rtl.write_buffer import WriteBuffer


@pytest.mark.parametrize("sector_bytes", [0, 48, 8192, 2.0])
def test_sector_bytes_is_validated(sector_bytes):
    with pytest.raises(ValueError, match="sector_bytes must be a power of two"):
        WriteBuffer(small_config(), sector_bytes=sector_bytes)
    gc.collect()  # a refused component must leave no unused-elaboratable warning behind


@pytest.mark.parametrize("event", ["done", "issue", "launched"])
def test_an_event_for_a_free_entry_trips_an_assertion(event):
    """From reset every entry is FREE: a completion, an issue or a launch naming one breaks
    the neighbours' protocol, and the simulation stops on the assertion that says so."""
    # partial policy: the strict one also flags an issue of an incomplete page (W3)
    dut = WriteBuffer(small_config(write_timeout_policy="partial"), sector_bytes=32)
    port = {"done": dut.done[0], "issue": dut.issue[0], "launched": dut.launched}[event]
    want = {"done": "not PROGRAM", "issue": "not QUEUED", "launched": "waiters left"}[event]

    async def tb(ctx):
        await ctx.tick()
        ctx.set(port.valid, 1)
        await ctx.tick()
        await ctx.tick()

    with pytest.raises(AssertionError, match=want):
        simulate(dut, tb)
