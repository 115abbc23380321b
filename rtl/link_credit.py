"""The deficit link credit of one channel under contract 2, without a multiplier.

Implements docs/timing-contract-v2.md §8 "Link credit per channel" and "How the RTL computes
it": in units of ``g = gcd(G, F)`` a byte costs ``b = F / g`` and a tick adds ``γ = G / g``;
``x(0) = γ``, a launch is allowed in ``t`` iff ``x(t) > 0``, ``x(t+1) = min(γ, x(t) - cost(t)
+ γ)``. The register keeps ``x = b * y + r`` in mixed radix (a signed byte count ``y`` and a
remainder ``0 <= r < b``): a tick adds the constants ``γ div b`` and ``γ mod b``, a launch
subtracts its byte count from ``y``, the cap compares ``(y, r)`` with the constants.
"""

from __future__ import annotations

__all__ = ["LinkCredit"]

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol


class LinkCredit(wiring.Component):
    """One channel's link credit ``x = b * y + r`` (v2 §8).

    Parameters
    ----------
    cfg : HbfConfig
        ``link_byte_cost`` (``b``) and ``link_gain`` (``γ``), from ``channel_bw_gbps`` and
        ``memory_clock_mhz``.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): ``x`` within ``[1 - 4096 b + γ, γ]``, the
        remainder below ``b``; a launch only while ``x > 0`` (the neighbour's protocol).

    Members
    -------
    launch : ``In(1)``
        A response of ``bytes`` bytes is launched on this channel in this cycle.
    bytes : ``In(range(4097))``
        Its size (1..4096).
    positive : ``Out(1)``
        ``x > 0`` at the start of the cycle: a launch is allowed.
    y : ``Out(signed)``, ``r`` : ``Out(unsigned)``
        The credit's byte count and remainder (observability; ``x = b * y + r``).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True):
        self._b = b = cfg.link_byte_cost
        self._gain = g = cfg.link_gain
        self._checks = check_mode(checks)
        # y lies in [floor((1 - 4096 b + γ) / b), γ div b]
        self._y_min = (1 - PAGE_BYTES * b + g) // b
        self._y_max = g // b
        y_bits = 1 + max(bits_for(abs(self._y_min)), bits_for(self._y_max + 1))
        super().__init__({
            "launch": In(1),
            "bytes": In(range(PAGE_BYTES + 1)),
            "positive": Out(1),
            "y": Out(signed(y_bits)),
            "r": Out(range(max(2, b))),
        })

    @property
    def x_range(self) -> tuple[int, int]:
        """The bounds of ``x`` (v2 §8: ``[1 - 4096 b + γ, γ]``)."""
        return 1 - PAGE_BYTES * self._b + self._gain, self._gain

    def elaborate(self, platform):
        m = Module()
        b, gain = self._b, self._gain
        gq, gr = divmod(gain, b)
        y = Signal.like(self.y, init=gq)
        r = Signal.like(self.r, init=gr)
        m.d.comb += [self.y.eq(y), self.r.eq(r), self.positive.eq((y > 0) | ((y == 0) & (r != 0)))]

        # x - cost + γ in mixed radix: y - bytes + γ div b, r + γ mod b with one carry (r < b
        # and γ mod b < b, so the sum is below 2b)
        wide = len(y) + 2
        r_sum = Signal(range(2 * max(2, b)))
        m.d.comb += r_sum.eq(r + gr)
        carry = r_sum >= b
        y_next = Signal(signed(wide))
        r_next = Signal.like(r)
        spent = Mux(self.launch, self.bytes, 0)
        m.d.comb += [
            y_next.eq(y - spent + gq + carry),
            r_next.eq(Mux(carry, r_sum - b, r_sum)),
        ]
        # min(γ, .): compare (y, r) with (γ div b, γ mod b)
        above = (y_next > gq) | ((y_next == gq) & (r_next > gr))
        m.d.sync += [y.eq(Mux(above, gq, y_next)), r.eq(Mux(above, gr, r_next))]

        checks = self._checks
        protocol(m, checks, ~self.launch | self.positive,
                 "a response launched without positive link credit (§8)")
        protocol(m, checks, ~self.launch | ((self.bytes >= 1) & (self.bytes <= PAGE_BYTES)),
                 "a response launched with a size outside 1..4096 bytes")
        invariant(m, checks, r < b if b > 1 else r == 0, "credit remainder not below b")
        invariant(m, checks, (y >= self._y_min) & (y <= gq), "link credit outside its range")
        cover(m, checks, ~self.positive, "link credit not positive: a launch waits")
        return m
