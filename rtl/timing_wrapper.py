"""A scan wrapper that puts a design with more ports than package pins on an FPGA.

Issue 12 item 3: the timing flow (:mod:`hbfsim.rtl.timing`) places and routes the
controller on an ECP5 in a 365-IO package; a configuration whose ports need more pins is
placed inside this wrapper instead. Every input port of the core is driven by a flip-flop of
one long input shift register (fed from the pin ``si``), and every output port is captured
into a flip-flop of an output shift register (shifted out on ``so``), so:

* the core's paths are those of a design with registered ports (register -> core ->
  register), which is what a controller inside a larger chip would see;
* nothing is constant and every output is observed, so synthesis removes nothing of the
  core;
* the wrapper adds one flip-flop per port bit and a 2-input multiplexer per output bit, and
  no logic on the core's own paths;
* the reset pin is registered once (``rst_q``) before it reaches the core, so no path
  starts at a pad: the pad's net to every flip-flop's reset input took 10-11 ns on the
  base point and was most of the "late" register inputs of the detailed report, which are
  meant to be the core's (docs/rtl.md "Issue 23 step 3"). The core sees the reset one
  cycle after the pin; the shift registers take none (they hold scan data only). The
  ``capture`` pin is registered too (``capture_q``): the scan chain's control, fanned out to
  every output flip-flop, is then no pad path either.

Pins: ``clk``, ``rst``, ``si``, ``capture`` (load the output register from the core instead
of shifting, from the next cycle), ``so``.
"""

from __future__ import annotations

__all__ = ["ScanWrapper"]

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, DomainRenamer, Elaboratable, Module,
                          ResetSignal, Signal, Value)
from amaranth.lib import wiring


class ScanWrapper(Elaboratable):
    """Registered scan access to every port of ``core``.

    Parameters
    ----------
    core : wiring.Component
        The design (its signature gives the ports).

    Members
    -------
    si, capture : Signal, inputs
    so : Signal, output
    in_bits, out_bits : int
        Port bits of the core driven / captured (the wrapper's flip-flops).
    """

    def __init__(self, core: wiring.Component):
        self.core = core
        self.si = Signal()
        self.capture = Signal()
        self.so = Signal()
        self._inputs, self._outputs = [], []
        for _path, member, value in core.signature.flatten(core):
            (self._inputs if member.flow == wiring.In else self._outputs).append(
                Value.cast(value))
        self.in_bits = sum(len(v) for v in self._inputs)
        self.out_bits = sum(len(v) for v in self._outputs)

    def ports(self) -> list:
        return [self.si, self.capture, self.so]

    def elaborate(self, platform):
        m = Module()
        # the core in a domain of its own: the pin's clock, the pin's reset registered
        rst_q = Signal(init=1, name="rst_q", reset_less=True)
        m.d.sync += rst_q.eq(ResetSignal("sync"))
        m.domains.core = ClockDomain("core")
        m.d.comb += [ClockSignal("core").eq(ClockSignal("sync")), ResetSignal("core").eq(rst_q)]
        m.submodules.core = DomainRenamer("core")(self.core)
        scan_in = Signal(max(1, self.in_bits), name="scan_in", reset_less=True)
        m.d.sync += scan_in.eq(Cat(self.si, scan_in[:-1]))
        pos = 0
        for v in self._inputs:
            m.d.comb += v.eq(scan_in[pos:pos + len(v)])
            pos += len(v)
        outs = Cat(*self._outputs)
        scan_out = Signal(max(1, self.out_bits), name="scan_out", reset_less=True)
        capture_q = Signal(name="capture_q", reset_less=True)
        m.d.sync += capture_q.eq(self.capture)
        with m.If(capture_q):
            m.d.sync += scan_out.eq(outs)
        with m.Else():
            m.d.sync += scan_out.eq(Cat(scan_out[1:], self.si))
        m.d.comb += self.so.eq(scan_out[0])
        return m
