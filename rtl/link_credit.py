"""The deficit link credit of one channel, without a multiplier.

Implements docs/timing-contract.md §8 "Link credit per channel" and "How the RTL computes
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
from hbfsim.rtl.mutations import check_mutations


class LinkCredit(wiring.Component):
    """One channel's link credit ``x = b * y + r`` (§8).

    Parameters
    ----------
    cfg : HbfConfig
        ``link_byte_cost`` (``b``) and ``link_gain`` (``γ``), from ``channel_bw_gbps`` and
        ``memory_clock_mhz``.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): ``x`` within ``[1 - 4096 b + γ, γ]``, the
        remainder below ``b``; a launch only while ``x > 0`` (the neighbour's protocol).
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.

    The tick's carry and next remainder, which depend on ``r`` alone, are registers
    (``carry_reg``, ``r_next_reg``) computed a cycle ahead, so the credit's path does not
    start with ``r``'s adder and compare (issue 12, no cycle changes); an invariant ties
    them to ``r``.

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

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=()):
        self._b = b = cfg.link_byte_cost
        self._gain = g = cfg.link_gain
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
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
        """The bounds of ``x`` (§8: ``[1 - 4096 b + γ, γ]``)."""
        return 1 - PAGE_BYTES * self._b + self._gain, self._gain

    def elaborate(self, platform):
        m = Module()
        b, gain = self._b, self._gain
        gq, gr = divmod(gain, b)
        y = Signal.like(self.y, init=gq)
        r = Signal.like(self.r, init=gr)
        # ``positive`` is a flip-flop of its own, computed from the next state (§0
        # "registered outputs", as StageQueue's ``ready``): K's launch test reads a register,
        # not the comparison of (y, r) with zero
        pos = Signal(init=int(gq > 0 or (gq == 0 and gr != 0)), name="positive_reg")
        m.d.comb += [self.y.eq(y), self.r.eq(r), self.positive.eq(pos)]

        # x - cost + γ in mixed radix: y - bytes + γ div b, r + γ mod b with one carry (r < b
        # and γ mod b < b, so the sum is below 2b)
        wide = len(y) + 2

        def step(v):
            # (carry, remainder) of v + γ mod b, for a remainder v < b
            v_sum = v + gr
            c = v_sum >= b
            return c, Mux(c, v_sum - b, v_sum)

        # the tick's carry and next remainder depend on r alone, so they are kept in
        # registers of their own, computed a cycle ahead from r's next value (which is
        # γ mod b when capped, else this cycle's r_next): the credit's path starts at the
        # comparisons of y, not at r's adder and compare (issue 12)
        c0, rn0 = divmod(2 * gr, b) if b > 1 else (0, 0)
        carry = Signal(init=c0, name="carry_reg")
        r_next = Signal.like(r, init=rn0, name="r_next_reg")

        p0 = int(gq > 0 or (gq == 0 and gr != 0))   # x > 0 of the cap (γ, always > 0)

        def capped(t, name):
            # The next state of y is t + γ div b + carry (t = y, or y - bytes with a
            # launch), capped at (γ div b, γ mod b), and positive is x > 0 of the result.
            # The cap's test and x > 0 are read from t itself, beside the adder that forms
            # y_next instead of after it (one carry chain on the credit's path, not three):
            #   y_next > γ div b   <=>  t + carry > 0
            #   y_next == γ div b  <=>  t + carry == 0
            #   y_next > 0         <=>  t > -(γ div b + carry), and == likewise
            y_next = Signal(signed(wide), name=f"y_{name}_next")
            m.d.comb += y_next.eq(t + Mux(carry, gq + 1, gq))
            above = Mux(carry, t >= 0, t > 0) | (Mux(carry, t == -1, t == 0) & (r_next > gr))
            pos_next = Mux(carry, (t > -gq - 1) | ((t == -gq - 1) & (r_next != 0)),
                           (t > -gq) | ((t == -gq) & (r_next != 0)))
            y_c = Signal(signed(wide), name=f"y_{name}")
            r_c = Signal.like(r, name=f"r_{name}")
            pos_c = Signal(name=f"positive_{name}")
            m.d.comb += [y_c.eq(Mux(above, gq, y_next)), r_c.eq(Mux(above, gr, r_next)),
                         pos_c.eq(Mux(above, p0, pos_next))]
            return y_c, r_c, pos_c, above

        # both next states, with and without this cycle's launch, computed in parallel from
        # the registers and the byte count (K's registered slot data); the launch, which
        # arrives last (it depends on E's room and the channel's credit), only selects
        t_spend = Signal(signed(wide), name="y_minus_bytes")
        if "credit-off-by-one" in self._mutations:
            m.d.comb += t_spend.eq(y - self.bytes + 1)
        else:
            m.d.comb += t_spend.eq(y - self.bytes)
        keep, spend = capped(y, "keep_capped"), capped(t_spend, "spend_capped")
        m.d.sync += [y.eq(Mux(self.launch, spend[0], keep[0])),
                     r.eq(Mux(self.launch, spend[1], keep[1])),
                     pos.eq(Mux(self.launch, spend[2], keep[2]))]
        # r's next value is γ mod b (capped) or r_next: the step of each, selected as r.
        # The capped step is the reset value; written as an AND-OR, not a multiplexer
        # with a constant arm, so Yosys does not turn the late select into the flip-flops'
        # synchronous set / reset (LSR), a path nextpnr's Fmax does not time
        next_c, next_rn = step(r_next)
        to_cap = Signal(name="to_cap")
        m.d.comb += to_cap.eq(Mux(self.launch, spend[3], keep[3]))
        keep_n = ~to_cap
        m.d.sync += [carry.eq((to_cap & c0) | (keep_n & next_c)),
                     r_next.eq((to_cap.replicate(len(r)) & rn0)
                               | (keep_n.replicate(len(r)) & next_rn))]

        checks = self._checks
        protocol(m, checks, ~self.launch | self.positive,
                 "a response launched without positive link credit (§8)")
        protocol(m, checks, ~self.launch | ((self.bytes >= 1) & (self.bytes <= PAGE_BYTES)),
                 "a response launched with a size outside 1..4096 bytes")
        invariant(m, checks, r < b if b > 1 else r == 0, "credit remainder not below b")
        ref_c, ref_rn = step(r)
        invariant(m, checks, (carry == ref_c) & (r_next == ref_rn),
                  "the registered carry or next remainder differs from r's (deep)")
        invariant(m, checks, (y >= self._y_min) & (y <= gq), "link credit outside its range")
        cover(m, checks, ~self.positive, "link credit not positive: a launch waits")
        # the registered flag and the launch-selected next state equal §8's formulas
        invariant(m, checks, pos == ((y > 0) | ((y == 0) & (r != 0))),
                  "registered positive differs from x > 0 (§8)")
        if checks:
            y_ref = Signal(signed(wide), name="chk_y_next")
            m.d.comb += y_ref.eq(y - Mux(self.launch, self.bytes, 0) + gq + carry)
            above = (y_ref > gq) | ((y_ref == gq) & (r_next > gr))
            invariant(m, checks, (Mux(self.launch, spend[0], keep[0])
                                  == Mux(above, gq, y_ref))
                      & (Mux(self.launch, spend[1], keep[1]) == Mux(above, gr, r_next)),
                      "the credit's next state differs from min(γ, x - cost + γ) (§8)")
        return m
