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
        # ``positive`` is a flip-flop of its own, computed from the next state (v2 §0
        # "registered outputs", as StageQueue's ``ready``): K's launch test reads a register,
        # not the comparison of (y, r) with zero
        pos = Signal(init=int(gq > 0 or (gq == 0 and gr != 0)), name="positive_reg")
        m.d.comb += [self.y.eq(y), self.r.eq(r), self.positive.eq(pos)]

        # x - cost + γ in mixed radix: y - bytes + γ div b, r + γ mod b with one carry (r < b
        # and γ mod b < b, so the sum is below 2b)
        wide = len(y) + 2
        r_sum = Signal(range(2 * max(2, b)))
        m.d.comb += r_sum.eq(r + gr)
        carry = r_sum >= b
        r_next = Signal.like(r)
        m.d.comb += r_next.eq(Mux(carry, r_sum - b, r_sum))

        def capped(y_next, name):
            # min(γ, .): compare (y, r) with (γ div b, γ mod b); then x > 0 of the result
            above = (y_next > gq) | ((y_next == gq) & (r_next > gr))
            y_c = Signal(signed(wide), name=f"y_{name}")
            r_c = Signal.like(r, name=f"r_{name}")
            pos_c = Signal(name=f"positive_{name}")
            m.d.comb += [y_c.eq(Mux(above, gq, y_next)), r_c.eq(Mux(above, gr, r_next))]
            m.d.comb += pos_c.eq((y_c > 0) | ((y_c == 0) & (r_c != 0)))
            return y_c, r_c, pos_c

        # both next states, with and without this cycle's launch, computed in parallel from
        # the registers and the byte count (K's registered slot data); the launch, which
        # arrives last (it depends on E's room and the channel's credit), only selects
        y_keep = Signal(signed(wide), name="y_keep")
        y_spend = Signal(signed(wide), name="y_spend")
        m.d.comb += [y_keep.eq(y + gq + carry), y_spend.eq(y - self.bytes + gq + carry)]
        keep, spend = capped(y_keep, "keep_capped"), capped(y_spend, "spend_capped")
        m.d.sync += [y.eq(Mux(self.launch, spend[0], keep[0])),
                     r.eq(Mux(self.launch, spend[1], keep[1])),
                     pos.eq(Mux(self.launch, spend[2], keep[2]))]

        checks = self._checks
        protocol(m, checks, ~self.launch | self.positive,
                 "a response launched without positive link credit (§8)")
        protocol(m, checks, ~self.launch | ((self.bytes >= 1) & (self.bytes <= PAGE_BYTES)),
                 "a response launched with a size outside 1..4096 bytes")
        invariant(m, checks, r < b if b > 1 else r == 0, "credit remainder not below b")
        invariant(m, checks, (y >= self._y_min) & (y <= gq), "link credit outside its range")
        cover(m, checks, ~self.positive, "link credit not positive: a launch waits")
        # the registered flag and the launch-selected next state equal v2 §8's formulas
        invariant(m, checks, pos == ((y > 0) | ((y == 0) & (r != 0))),
                  "registered positive differs from x > 0 (v2 §8)")
        if checks:
            y_ref = Signal(signed(wide), name="chk_y_next")
            m.d.comb += y_ref.eq(y - Mux(self.launch, self.bytes, 0) + gq + carry)
            above = (y_ref > gq) | ((y_ref == gq) & (r_next > gr))
            invariant(m, checks, (Mux(self.launch, spend[0], keep[0])
                                  == Mux(above, gq, y_ref))
                      & (Mux(self.launch, spend[1], keep[1]) == Mux(above, gr, r_next)),
                      "the credit's next state differs from min(γ, x - cost + γ) (v2 §8)")
        return m
