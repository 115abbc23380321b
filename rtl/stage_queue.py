"""The two-entry queue of a contract-2 pipeline stage: a port's ingress queue Q (§4.1), the
system's route stage (§2, stack shape) and a response port's egress queue E (§8).

Implements docs/timing-contract.md §4.1 ("``req[p].ready`` ... ``occ_p(t) < 2``": the
input is ready from the occupancy at the start of the cycle, a registered value, so no input
reaches ``ready``) and the in-order hand-over of §2 and §8: an item accepted in ``t`` is at
the head from ``t + 1`` at the earliest, the head leaves when the next stage takes it.
"""

from __future__ import annotations

__all__ = ["StageQueue"]

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.rtl.checks import check_mode, cover, invariant, lemma, proving


class StageQueue(wiring.Component):
    """A first-in first-out queue of ``depth`` items between two pipeline stages.

    ``inp.ready`` is ``occupancy < depth`` from the start of the cycle (§4.1), kept in a
    flip-flop of its own (computed from the next occupancy), independent of ``out.ready``;
    ``out.valid`` is ``occupancy > 0`` and ``out.payload`` the head, both registers (§0
    "registered outputs"). An item taken on
    ``inp`` in ``t`` is visible on ``out`` from ``t + 1``; a full queue that hands its head
    on in ``t`` takes no new item in ``t`` (the occupancy at the start of ``t`` decides).

    Parameters
    ----------
    layout : data.StructLayout
        The item.
    depth : int
        Entries (2 for every queue of the contract).
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): occupancy within ``0..depth``.
    ring : bool
        Keep the items in a ring (written at a write pointer, the head read at a read
        pointer through a ``depth``:1 multiplexer; a pop moves no item) instead of a shift
        register: the same items in the same cycles. The controller's ingress queue uses it
        (docs/rtl.md "Issue 12, part C", the what-if's (k): no shift path from a pop to
        every item).

    Members
    -------
    inp : ``In(stream.Signature(layout))``
        Items in.
    out : ``Out(stream.Signature(layout))``
        The head.
    occupancy : ``Out(range(depth + 1))``
        Items held (observability; the controller's ``m_valid`` and the system's).
    """

    def __init__(self, layout, *, depth: int = 2, checks: bool | str = True,
                 ring: bool = False):
        if not (isinstance(depth, int) and depth >= 1):
            raise ValueError(f"depth must be a positive integer, not {depth!r}")
        self._ring = bool(ring)
        self._layout = layout
        self._depth = depth
        self._checks = check_mode(checks)
        super().__init__({
            "inp": In(stream.Signature(layout)),
            "out": Out(stream.Signature(layout)),
            "occupancy": Out(range(depth + 1)),
        })

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        # Payload registers need no reset: payloads are defined only while valid (§0).
        items = [Signal(self._layout, name=f"item{k}", reset_less=True) for k in range(depth)]
        occ = Signal(range(depth + 1))
        # ``ready`` = occupancy below depth, kept as a flip-flop of its own (§0, §4.1)
        room = Signal(init=1)
        push = Signal()
        pop = Signal()
        m.d.comb += [
            self.inp.ready.eq(room),
            self.out.valid.eq(occ != 0),
            self.out.payload.eq(items[0]) if not self._ring else [],
            self.occupancy.eq(occ),
            push.eq(self.inp.valid & self.inp.ready),
            pop.eq(self.out.valid & self.out.ready),
        ]
        occ_next = Signal(range(depth + 2))
        m.d.comb += occ_next.eq(occ + push - pop)
        m.d.sync += [occ.eq(occ_next), room.eq(occ_next < depth)]
        if self._ring:
            self._ring_items(m, items, push, pop)
        write_pos = occ - pop
        for k in range(depth if not self._ring else 0):
            with m.If(push & (write_pos == k)):
                m.d.sync += items[k].eq(self.inp.payload)
            with m.Elif(pop):
                if k + 1 < depth:
                    m.d.sync += items[k].eq(items[k + 1])
        checks = self._checks
        if proving(checks):   # the items held, oldest first (rtl/controller_lemmas.py)
            first = self._rd if self._ring else 0
            held = []
            for j in range(depth):
                at = Array(items)[(first + j) % depth] if self._ring else items[j]
                held.append((occ > j, at))
            self.proof = dict(held=held)
            if self._ring:
                lemma(m, checks, self._wr == (self._rd + occ) % depth,
                      "stage queue: the ring's write pointer is not the read pointer plus "
                      "the occupancy")
        invariant(m, checks, occ <= depth, "stage queue occupancy beyond its depth")
        invariant(m, checks, room == (occ < depth), "stage queue ready differs from occupancy")
        cover(m, checks, ~self.inp.ready, "stage queue full")
        cover(m, checks, push & pop, "stage queue takes and hands on in one cycle")
        return m

    def _ring_items(self, m, items, push, pop) -> None:
        """The items as a ring: ``push`` writes at ``ring_wr``, the head is ``items[ring_rd]``."""
        depth = self._depth
        wr = Signal(range(max(2, depth)), name="ring_wr")
        rd = Signal(range(max(2, depth)), name="ring_rd")
        self._rd, self._wr = rd, wr
        m.d.comb += self.out.payload.eq(Array(items)[rd])
        with m.If(push):
            m.d.sync += wr.eq(Mux(wr == depth - 1, 0, wr + 1))
        with m.If(pop):
            m.d.sync += rd.eq(Mux(rd == depth - 1, 0, rd + 1))
        for k in range(depth):
            with m.If(push & (wr == k)):
                m.d.sync += items[k].eq(self.inp.payload)
