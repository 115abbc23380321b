"""Admission slots: the request slots that bound the requests inside the controller.

Implements docs/timing-contract.md §4.1 (L1): a slot is taken in the accept cycle and
released by the response handshake, usable again from the next cycle, so ``alloc_ready`` is
``inflight(t) < admission``. Each slot holds what the response needs (§1 ``resp``): id, op,
source, size, and the ``mshr_hit`` flag recorded at dispatch.
"""

from __future__ import annotations

__all__ = ["Admission", "slot_layout"]

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol
from hbfsim.rtl.layouts import ReqOp, Widths
from hbfsim.rtl.logic import lowest_set, named, select, tree_sum
from hbfsim.rtl.mutations import check_mutations


def slot_layout(w: Widths) -> data.StructLayout:
    """What a request slot keeps for the response."""
    return data.StructLayout({
        "id": unsigned(w.id),
        "op": ReqOp,
        "source": unsigned(w.source),
        "bytes": unsigned(w.bytes),
    })


class Admission(wiring.Component):
    """``admission`` request slots; the lowest free slot is taken first.

    Parameters
    ----------
    cfg : HbfConfig
        ``admission`` is used.
    id_bits, source_bits : int
        Widths of the request id and source.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): a slot is never handed out twice, ``inflight``
        counts the slots held; a release or hit names a slot in use (the neighbours'
        protocol: one response per request slot).
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.

    Members
    -------
    alloc_ready : ``Out(1)``
        A slot is free (``inflight < admission``); under contract 2 a flip-flop computed from
        the next-state count (v2 §0: ``req.ready`` is a register output).
    alloc : ``In(1)``
        Take the slot ``alloc_slot`` for ``alloc_data`` (the accept handshake).
    alloc_slot : ``Out(range(admission))``
        The lowest free slot.
    alloc_data : ``In(slot_layout)``
        The accepted request's response fields.
    hit : ``In(data.StructLayout({"valid": 1, "slot": slot}))``
        Record ``mshr_hit`` for a slot (the read merged at dispatch).
    release : ``In(data.StructLayout({"valid": 1, "slot": slot}))``
        The slot's response was handshaken.
    rd_slot : ``In(range(admission))``, ``rd_data`` : ``Out(slot_layout)``, ``rd_hit`` : ``Out(1)``
        Combinational read of a slot; under contract 2 a synchronous one (``rd_data`` and
        ``rd_hit`` are the slot ``rd_slot`` named in the cycle before, v2 §16 S5).
    inflight : ``Out(range(admission + 1))``
        Slots in use.
    """

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8,
                 checks: bool | str = True, mutations=()):
        self._cfg = cfg
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._w = w = Widths.of(cfg, id_bits=id_bits, source_bits=source_bits)
        slot_ev = data.StructLayout({"valid": 1, "slot": unsigned(w.slot)})
        super().__init__({
            "alloc_ready": Out(1),
            "alloc": In(1),
            "alloc_slot": Out(w.slot),
            "alloc_data": In(slot_layout(w)),
            "hit": In(slot_ev),
            "release": In(slot_ev),
            "rd_slot": In(w.slot),
            "rd_data": Out(slot_layout(w)),
            "rd_hit": Out(1),
            "inflight": Out(range(cfg.admission + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._cfg.admission
        w = self._w
        # One flip-flop signal per slot: conditional writes to single bits of one wide
        # vector would each become a full-width multiplexer.
        used = [Signal(name=f"used{i}") for i in range(n)]
        mshr_hit = [Signal(name=f"mshr_hit{i}") for i in range(n)]
        m.submodules.store = store = memory.Memory(shape=slot_layout(w), depth=n, init=[])
        wr = store.write_port()
        v2 = self._cfg.contract == 2
        # v2 §16 (S5): under contract 2 a synchronous read (the data one cycle after the
        # address), so that the store can be a RAM with registered output
        rd = store.read_port() if v2 else store.read_port(domain="comb")

        any_free, free = lowest_set(m, [~u for u in used], "free_slot")
        rd_hit_q = Signal(name="rd_hit_q") if v2 else None
        take = named(m, self.alloc & any_free, "take")
        if self._cfg.contract == 2:
            # v2 §0, §4.1: ``inflight < admission`` as a flip-flop of its own, from the
            # next-state count, so that ``req.ready`` is a register output
            room = Signal(init=1, name="room")
            after = Signal(range(n + 2), name="inflight_next")
            m.d.comb += after.eq(tree_sum(used) + take - self.release.valid)
            m.d.sync += room.eq(after < n)
            m.d.comb += self.alloc_ready.eq(room)
            invariant(m, self._checks, room == any_free,
                      "the registered admission room differs from a free slot")
        else:
            m.d.comb += self.alloc_ready.eq(any_free)
        m.d.comb += [
            self.alloc_slot.eq(free),
            wr.addr.eq(free),
            wr.data.eq(self.alloc_data),
            wr.en.eq(take),
            rd.addr.eq(self.rd_slot),
            self.rd_data.eq(rd.data),
            # v2: the flag registered with the synchronous read
            self.rd_hit.eq(rd_hit_q if v2 else select(m, mshr_hit, self.rd_slot, "rd_hit")),
            self.inflight.eq(tree_sum(used)),
        ]
        if v2:
            m.d.sync += rd_hit_q.eq(select(m, mshr_hit, self.rd_slot, "rd_hit"))
            if self._checks:
                self._check_sync_read(m, used, mshr_hit, store)
        for i in range(n):
            with m.If(take & (free == i)):
                if "admission-slot-reuse" in self._mutations:
                    m.d.sync += mshr_hit[i].eq(0)
                else:
                    m.d.sync += [used[i].eq(1), mshr_hit[i].eq(0)]
            with m.If(self.release.valid & (self.release.slot == i)):
                m.d.sync += used[i].eq(0)
            with m.If(self.hit.valid & (self.hit.slot == i)):
                m.d.sync += mshr_hit[i].eq(1)
        if self._checks:
            self._add_checks(m, used, take, free)
        return m

    def _check_sync_read(self, m, used, mshr_hit, store):
        """v2 §18 step 4: the synchronous read returns what a combinational read of the
        same slot returns now, for a slot that held a request and got no ``mshr_hit`` in the
        cycle of the read (the response pipeline reads only such slots)."""
        chk = store.read_port(domain="comb")
        prev = Signal.like(self.rd_slot, name="chk_rd_prev")
        steady = Signal(name="chk_rd_steady")
        m.d.sync += [prev.eq(self.rd_slot),
                     steady.eq(select(m, used, self.rd_slot, "chk_rd_used")
                               & ~(self.hit.valid & (self.hit.slot == self.rd_slot)))]
        m.d.comb += chk.addr.eq(prev)
        invariant(m, self._checks, ~steady | ((self.rd_data.as_value() == chk.data.as_value())
                                              & (self.rd_hit
                                                 == select(m, mshr_hit, prev, "chk_rd_hit"))),
                  "the synchronous slot read differs from the slot's contents (v2 §8)")

    def _add_checks(self, m, used, take, free):
        checks, n = self._checks, self._cfg.admission
        # exactly one response per request: a response releases a slot in use
        protocol(m, checks, ~self.release.valid | select(m, used, self.release.slot,
                                                         "release_used"),
                 "response for a request slot that holds no request")
        protocol(m, checks, ~self.hit.valid | select(m, used, self.hit.slot, "hit_used"),
                 "mshr_hit recorded for a request slot that holds no request")
        # The slots handed out and not yet released, kept apart from ``used``.
        held = Signal(n, name="chk_held")
        add = Signal(n, name="chk_take")
        drop = Signal(n, name="chk_release")
        m.d.comb += [add.eq(Mux(take, 1 << free, 0)),
                     drop.eq(Mux(self.release.valid, 1 << self.release.slot, 0))]
        m.d.sync += held.eq((held & ~drop) | add)
        invariant(m, checks, ~take | ~(held >> free)[0],
                  "a request slot handed out while it still holds a request")
        for i in range(n):
            invariant(m, checks, used[i] == held[i],
                      f"request slot {i}: in use differs from handed out and not released")
        cover(m, checks, ~self.alloc_ready, "every request slot in use")
        cover(m, checks, take & self.release.valid, "a slot taken and one released in a cycle")
