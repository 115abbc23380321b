"""The response stages of one response port: R, K and E with the link credit.

Implements docs/timing-contract.md §8 and DP7: R takes the next waiter (a locked table
keeps the port, else the MSHR's offer first), K launches it while its channel's deficit
credit (:mod:`.link_credit`) is positive and the two-entry egress queue E
(:mod:`.stage_queue`), whose head is ``resp``, has room.
"""

from __future__ import annotations

__all__ = ["ResponseArbiter"]

from amaranth.hdl import Array, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.admission import slot_layout
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol, proving
from hbfsim.rtl.layouts import EntryKind, Widths, event_layout, resp_layout, ret_layout
from hbfsim.rtl.link_credit import LinkCredit
from hbfsim.rtl.mutations import check_mutations
from hbfsim.rtl.stage_queue import StageQueue


def waiter_layout(w: Widths) -> data.StructLayout:
    """A waiter taken by R (§8): its table entry, request slot and flags."""
    return data.StructLayout({
        "kind": EntryKind,
        "index": unsigned(w.tag_index),
        "slot": unsigned(w.slot),
        "channel": unsigned(w.channel),
        "last": 1,
        "buffer_hit": 1,
        "error": 1,
    })


def egress_layout(w: Widths) -> data.StructLayout:
    """A launched response in E (§8): the response and the slot its handshake releases."""
    return data.StructLayout({"resp": resp_layout(w), "slot": unsigned(w.slot)})


class ResponseArbiter(wiring.Component):
    """R, K and E of one response port (docs/timing-contract.md §8, DP7).

    Each table (:class:`~hbfsim.rtl.mshr.Mshr`, :class:`~hbfsim.rtl.write_buffer.WriteBuffer`)
    offers the next waiter of the entry its response choice holds; R takes one of the two
    offers (a locked table keeps the port, else the MSHR first) while R is empty or hands
    its waiter to K. Every waiter spends at least one cycle in R (DP7): K takes only from R,
    so the admission store's read address (``slot_next``) is R's or K's register, never a
    table's offer. K launches its waiter into E while the channel's credit is positive and
    E has room; the handshake on ``resp`` (E's head) releases the request slot.

    Parameters
    ----------
    cfg : HbfConfig
        ``channels``, ``channel_bw_gbps``, ``memory_clock_mhz``.
    id_bits, source_bits : int
        Widths of the request id and source.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): credit never under- or overflows, a locked
        table keeps the port; the two tables are never locked at once (their protocol).
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.
    own_credit : bool
        Channel shape (§8, §15 item 4): this is the response port of one channel, whose
        entries alone it serves, so it keeps that channel's one :class:`LinkCredit` and K
        tests it without a channel multiplexer.

    Members
    -------
    mshr_ret, wb_ret : ``In(stream.Signature(ret_layout))``
        The tables' offers; ``ready`` is the handshake.
    mshr_sel, wb_sel : ``Out(1)``
        R takes that table's offer in this cycle (the ``ret`` handshake).
    mshr_locked, wb_locked : ``In(1)``
        The table is draining an entry it was chosen for.
    slot : ``Out(range(admission))``
        The slot of the waiter in K.
    slot_next : ``Out(range(admission))``
        The slot of the waiter K holds in the next cycle (the synchronous read address, S5).
    slot_next_used : ``Out(1)``
        K holds a waiter in the next cycle, so the read of ``slot_next`` is used (else
        ``slot_next`` is a stale register and its data is not read).
    slot_data : ``In(slot_layout)``, ``slot_hit`` : ``In(1)``
        The size and response fields of K's slot, read synchronously from ``slot_next`` in
        the cycle before, and its ``mshr_hit`` flag.
    resp : ``Out(stream.Signature(resp_layout))``
        The host response: the head of E.
    mshr_launched, wb_launched : ``Out(event_layout)``
        K launched the last waiter of the named entry: FREE from the next cycle.
    release : ``Out(data.StructLayout({"valid": 1, "slot": slot}))``
        The ``resp`` handshake, naming the request slot it releases (§4.1).
    k_valid, e_occupancy : ``Out``
        Observability: K holds a waiter; responses in E.
    """

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8,
                 checks: bool | str = True, mutations=(), own_credit: bool = False):
        self._cfg = cfg
        self._own = own_credit
        self._w = w = Widths.of(cfg, id_bits=id_bits, source_bits=source_bits)
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        slot_ev = data.StructLayout({"valid": 1, "slot": unsigned(w.slot)})
        super().__init__({
            "mshr_ret": In(stream.Signature(ret_layout(w, w.mshr_index))),
            "wb_ret": In(stream.Signature(ret_layout(w, w.wb_index))),
            "mshr_sel": Out(1),
            "wb_sel": Out(1),
            "mshr_locked": In(1),
            "wb_locked": In(1),
            "mshr_launched": Out(event_layout(w.mshr_index)),
            "wb_launched": Out(event_layout(w.wb_index)),
            "slot": Out(w.slot),
            "slot_next": Out(w.slot),
            "slot_next_used": Out(1),
            "slot_data": In(slot_layout(w)),
            "slot_hit": In(1),
            "resp": Out(stream.Signature(resp_layout(w))),
            "release": Out(slot_ev),
            "k_valid": Out(1),
            "e_occupancy": Out(range(3)),
        })

    def elaborate(self, platform):
        """R, K and E of one response port (§8, DP7)."""
        m = Module()
        cfg, w, checks = self._cfg, self._w, self._checks
        wl = waiter_layout(w)
        m.submodules.egress = egress = StageQueue(egress_layout(w), checks=checks)
        credits = []
        for c in range(1 if self._own else cfg.channels):
            # the credit's protocol (a launch only with positive credit) is K's to keep: an
            # assertion here even in a proof of this block
            credits.append(LinkCredit(cfg, checks=bool(checks), mutations=self._mutations))
            m.submodules[f"credit{c}"] = credits[-1]

        # R and K hold a waiter each; payloads are defined only while valid (§0)
        r_valid, k_valid = Signal(), Signal()
        r = Signal(wl, name="r", reset_less=True)
        k = Signal(wl, name="k", reset_less=True)

        # ---- K: launch while the channel's credit is positive and E has room (§8) ----
        m.d.comb += self.slot.eq(k.slot)
        positive = Array([cr.positive for cr in credits])[k.channel] if len(credits) > 1 \
            else credits[0].positive
        if "credit-stale" in self._mutations:
            stale = Signal(init=1, name="positive_before")
            m.d.sync += stale.eq(positive)
            positive = stale
        launch = Signal()
        m.d.comb += launch.eq(k_valid & positive & egress.inp.ready)
        for c, cr in enumerate(credits):
            m.d.comb += [cr.launch.eq(launch if self._own else launch & (k.channel == c)),
                         cr.bytes.eq(self.slot_data.bytes)]
        e_in = egress.inp.payload
        m.d.comb += [
            egress.inp.valid.eq(launch),
            e_in.slot.eq(k.slot),
            e_in.resp.id.eq(self.slot_data.id),
            e_in.resp.op.eq(self.slot_data.op),
            e_in.resp.source.eq(self.slot_data.source),
            e_in.resp.mshr_hit.eq(self.slot_hit),
            e_in.resp.buffer_hit.eq(k.buffer_hit),
            e_in.resp.cache_hit.eq(0),
            e_in.resp.error.eq(k.error),
            self.mshr_launched.valid.eq(launch & k.last & (k.kind == EntryKind.MSHR)),
            self.mshr_launched.index.eq(k.index),
            self.wb_launched.valid.eq(launch & k.last & (k.kind == EntryKind.WBUF)),
            self.wb_launched.index.eq(k.index),
        ]
        k_free = ~k_valid | launch

        # ---- R: take the next waiter while R is empty or its waiter moves to K (§8) ----
        mr, wr = self.mshr_ret, self.wb_ret
        if "response-wb-first" in self._mutations:
            sel_wb = self.wb_locked | (~self.mshr_locked & wr.valid)
            sel_mshr = ~sel_wb & (self.mshr_locked | mr.valid)
        else:
            sel_mshr = self.mshr_locked | (~self.wb_locked & mr.valid)
            sel_wb = ~sel_mshr & (self.wb_locked | wr.valid)
        take = Signal()
        m.d.comb += take.eq((~r_valid | k_free) & (sel_mshr | sel_wb))
        m.d.comb += [mr.ready.eq(take & sel_mshr), wr.ready.eq(take & sel_wb),
                     self.mshr_sel.eq(take & sel_mshr), self.wb_sel.eq(take & sel_wb)]
        chosen = Signal(wl)
        m.d.comb += chosen.kind.eq(Mux(sel_mshr, EntryKind.MSHR, EntryKind.WBUF))
        m.d.comb += [getattr(chosen, f).eq(Mux(sel_mshr, getattr(mr.payload, f),
                                               getattr(wr.payload, f)))
                     for f in ("index", "slot", "channel", "last", "error")]
        m.d.comb += chosen.buffer_hit.eq(sel_mshr & mr.payload.buffer_hit)

        # R hands its waiter to K when K is empty or launches in this cycle
        r_to_k = r_valid & k_free
        # DP7: every waiter spends a cycle in R, none goes straight from the tables' offer to
        # K, so the admission store's read address is R's register (``new_to_k``, the
        # straight path, is a constant 0; kept as such, the emitted Verilog is unchanged)
        new_to_k = 0
        m.d.sync += k_valid.eq(r_to_k | new_to_k | (k_valid & ~launch))
        # §8, S5: the slot K holds in the next cycle, for the admission store's synchronous
        # read (R issues the read, K uses the data)
        m.d.comb += [self.slot_next.eq(Mux(r_to_k, r.slot, Mux(new_to_k, chosen.slot, k.slot))),
                     self.slot_next_used.eq(r_to_k | new_to_k | (k_valid & ~launch))]
        with m.If(r_to_k):
            m.d.sync += k.eq(r)
        with m.Elif(new_to_k):
            m.d.sync += k.eq(chosen)
        with m.If(take):
            m.d.sync += [r_valid.eq(1), r.eq(chosen)]
        with m.Elif(r_to_k):
            m.d.sync += r_valid.eq(0)

        # ---- E: the response port; the handshake releases the request slot (§4.1) ----
        out = egress.out.payload
        m.d.comb += [
            self.resp.valid.eq(egress.out.valid),
            self.resp.payload.eq(out.resp),
            egress.out.ready.eq(self.resp.ready),
            self.release.valid.eq(self.resp.valid & self.resp.ready),
            self.release.slot.eq(out.slot),
            self.k_valid.eq(k_valid),
            self.e_occupancy.eq(egress.occupancy),
        ]

        protocol(m, checks, ~(self.mshr_locked & self.wb_locked),
                 "the MSHR and the write buffer are both locked on the response")
        protocol(m, checks, ~k_valid | ((self.slot_data.bytes >= 1)
                                        & (self.slot_data.bytes <= 4096)),
                 "a request slot holds a size outside 1..4096 bytes")
        invariant(m, checks, ~self.mshr_locked | ~take | sel_mshr,
                  "a locked MSHR lost the port (§8)")
        invariant(m, checks, ~self.wb_locked | ~take | sel_wb,
                  "a locked write buffer lost the port (§8)")
        # DP7: R may hold a waiter while K is empty, for one cycle only
        invariant(m, checks, ~r_valid | k_valid | r_to_k,
                  "R holds a waiter while K is empty and does not hand it to K (DP7)")
        cover(m, checks, k_valid & ~positive, "a launch waits for link credit")
        cover(m, checks, k_valid & positive & ~egress.inp.ready, "a launch waits: E full")
        cover(m, checks, r_valid, "R holds a waiter behind K")
        if proving(checks):   # the waiters R and K hold (rtl/controller_lemmas.py)
            self.proof = dict(r=(r_valid, r), k=(k_valid, k), egress=egress)
        return m
