"""Admission slots: the request slots that bound the requests inside the controller.

Implements docs/timing-contract.md §4.1 (L1): a slot is taken in the accept cycle and
released by the response handshake, usable again from the next cycle, so ``alloc_ready`` is
``inflight(t) < admission``, a flip-flop computed from the next-state count. Each slot holds
what the response needs (§1 ``resp``): id, op, source, size, and the ``mshr_hit`` flag
recorded at dispatch, read synchronously by the response stages.

In the channel shape (``ports = P > 1``, §4.1) the
count is shared by ``P`` request ports: every port is ready while at least ``P`` slots are
free (with fewer than ``P`` slots in all, port ``p`` while ``rank_p(t) = (p - t) mod P`` is
below the free slots), and every port has its own accept, release, ``mshr_hit`` and read
port, and its own bank of the slot store (§19 question 1: a response leaves on the port its
request entered, so a port's slots are written and read by that port alone; the slot numbers
and the count stay stack-wide).
"""

from __future__ import annotations

__all__ = ["SLOT_LIST_ABOVE", "Admission", "slot_free_list", "slot_layout"]

from amaranth.hdl import Array, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, lemma, protocol, proving
from hbfsim.rtl.free_list import free_list_heads
from hbfsim.rtl.layouts import ReqOp, Widths
from hbfsim.rtl.logic import lowest_onehot, lowest_set, named, onehot_index, select, tree_sum
from hbfsim.rtl.mutations import check_mutations


#: Above this many request slots the channel shape's slots come from a free list
#: (:func:`slot_free_list`).
SLOT_LIST_ABOVE = 32


def slot_free_list(admission: int, ports: int) -> bool:
    """Whether the channel shape's admission (``ports > 1``) of ``admission`` slots takes its
    slots from a free list of slot numbers and keeps each slot's ``mshr_hit`` flag in its
    port's bank (§13: the same cycles, other structures; slot numbers are internal, §4.1).

    * **Candidates from both ends** (at most :data:`SLOT_LIST_ABOVE` slots): port ``p``'s
      candidate is a one-hot of the free slots, alternately the lowest and the highest,
      from a prefix network over every slot, with a flip-flop per slot for "in use" and
      for ``mshr_hit``: ``P`` networks and ``3 P`` comparators per slot, so the cost grows
      as ``P x admission`` (at 16 ports x 4,096 slots, ``ocp-grade3``, the block alone
      took 343 s and 6.7 GB to elaborate). Its paths are short, and both of issue 23's
      timing points (16 slots) keep it.
    * **A free list** (above :data:`SLOT_LIST_ABOVE`): :func:`free_list_heads` over slot
      numbers (a RAM of ``admission`` words read at the heads, the accepting ports ranked,
      the releases pushed in port order) and the ``mshr_hit`` flags in a one-bit RAM per
      port beside its bank of the slot store (cleared when the store is written, a cycle
      after the accept; set by the port's hit): logic of ``P x P`` and RAM words per slot.
    """
    return ports > 1 and admission >= ports and admission > SLOT_LIST_ABOVE


def _rank(p: int, ports: int, phase):
    """``(p - t) mod P`` for ``phase = t mod P`` (§4.1), as a chain of constants."""
    out = Const(p % ports)
    for ph in range(1, ports):
        out = Mux(phase == ph, (p - ph) % ports, out)
    return out


def slot_layout(w: Widths) -> data.StructLayout:
    """What a request slot keeps for the response."""
    return data.StructLayout({
        "id": unsigned(w.id),
        "op": ReqOp,
        "source": unsigned(w.source),
        "bytes": unsigned(w.bytes),
    })


class Admission(wiring.Component):
    """``admission`` request slots; the lowest free slot is taken first (in the channel shape
    with ``admission >= P``, port ``p``'s candidate from both ends of the free slots).

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
    slot_list : bool or None
        The channel shape's structures (:func:`slot_free_list`; None: by the slot count).
    ports : int
        Request ports sharing the count: 1 (stack shape), or ``channels`` in the channel
        shape (§4.1). With ``P > 1`` every member below except ``inflight``
        is one per port: ``alloc_ready``, ``alloc`` and ``rd_hit`` are ``P``-bit vectors
        (bit ``p`` for port ``p``), the others arrays of ``P``.

    Members
    -------
    alloc_ready : ``Out(1)``
        A slot is free (``inflight < admission``): a flip-flop computed from the next-state
        count (§0: ``req.ready`` is a register output).
    alloc : ``In(1)``
        Take the slot ``alloc_slot`` for ``alloc_data`` (the accept handshake).
    alloc_slot : ``Out(range(admission))``
        The lowest free slot (channel shape: port ``p``'s candidate, alternately the lowest
        and the highest free slots, see ``_elaborate_ports``).
    alloc_data : ``In(slot_layout)``
        The accepted request's response fields.
    hit : ``In(data.StructLayout({"valid": 1, "slot": slot}))``
        Record ``mshr_hit`` for a slot (the read merged at dispatch).
    release : ``In(data.StructLayout({"valid": 1, "slot": slot}))``
        The slot's response was handshaken.
    rd_slot : ``In(range(admission))``, ``rd_data`` : ``Out(slot_layout)``, ``rd_hit`` : ``Out(1)``
        A synchronous read of a slot (``rd_data`` and ``rd_hit`` are the slot ``rd_slot``
        named in the cycle before, §16 S5).
    rd_used : ``In(P)``
        Channel shape only: port ``p``'s read is used (its data reaches a response). A slot
        taken in ``t`` is written into its port's store at the end of ``t + 1`` (from
        registers, off the accept's path), so a used read names it from ``t + 2`` on
        (a protocol property; the response stages read a slot many cycles after its accept).
    inflight : ``Out(range(admission + 1))``
        Slots in use.
    """

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8,
                 checks: bool | str = True, mutations=(), ports: int = 1,
                 slot_list: bool | None = None):
        self._cfg = cfg
        self._slot_list = (slot_free_list(cfg.admission, ports) if slot_list is None
                           else slot_list and ports > 1 and cfg.admission >= ports)
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._w = w = Widths.of(cfg, id_bits=id_bits, source_bits=source_bits)
        self._ports = ports
        slot_ev = data.StructLayout({"valid": 1, "slot": unsigned(w.slot)})
        if ports > 1:
            super().__init__({
                "alloc_ready": Out(ports),
                "alloc": In(ports),
                "alloc_slot": Out(w.slot).array(ports),
                "alloc_data": In(slot_layout(w)).array(ports),
                "hit": In(slot_ev).array(ports),
                "release": In(slot_ev).array(ports),
                "rd_slot": In(w.slot).array(ports),
                "rd_used": In(ports),
                "rd_data": Out(slot_layout(w)).array(ports),
                "rd_hit": Out(ports),
                "inflight": Out(range(cfg.admission + 1)),
            })
            return
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
        if self._ports > 1:
            return self._elaborate_ports()
        m = Module()
        n = self._cfg.admission
        w = self._w
        # One flip-flop signal per slot: conditional writes to single bits of one wide
        # vector would each become a full-width multiplexer.
        used = [Signal(name=f"used{i}") for i in range(n)]
        mshr_hit = [Signal(name=f"mshr_hit{i}") for i in range(n)]
        m.submodules.store = store = memory.Memory(shape=slot_layout(w), depth=n, init=[])
        wr = store.write_port()
        # a synchronous read (the data one cycle after the address), so that the store can
        # be a RAM with registered output
        rd = store.read_port()

        any_free, free = lowest_set(m, [~u for u in used], "free_slot")
        rd_hit_q = Signal(name="rd_hit_q")
        take = named(m, self.alloc & any_free, "take")
        # §0, §4.1: ``inflight < admission`` as a flip-flop of its own, from the next-state
        # count, so that ``req.ready`` is a register output
        room = Signal(init=1, name="room")
        after = Signal(range(n + 2), name="inflight_next")
        # the count kept in a register of its own, not a population count of the used bits
        # (docs/rtl.md "Issue 12, part C", (h): the same values, a shorter path)
        count = Signal(range(n + 1), name="inflight_count")
        m.d.comb += after.eq(count + take - self.release.valid)
        m.d.sync += count.eq(after)
        invariant(m, self._checks, count == tree_sum(used),
                  "the registered admission count differs from the used slots")
        m.d.sync += room.eq(after < n)
        m.d.comb += self.alloc_ready.eq(room)
        invariant(m, self._checks, room == any_free,
                  "the registered admission room differs from a free slot")
        m.d.comb += [
            self.alloc_slot.eq(free),
            wr.addr.eq(free),
            wr.data.eq(self.alloc_data),
            wr.en.eq(take),
            rd.addr.eq(self.rd_slot),
            self.rd_data.eq(rd.data),
            # the flag registered with the synchronous read
            self.rd_hit.eq(rd_hit_q),
            self.inflight.eq(tree_sum(used)),
        ]
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
        if proving(self._checks):   # the slots in use (rtl/controller_lemmas.py)
            self.proof = dict(used=used)
            self._size_lemmas(m, used, store)
        return m

    def _size_lemmas(self, m, used, store):
        """A proof's lemmas: a slot in use holds a request of 1..4096 bytes (what the
        controller accepted, §1), so the response's read of it does too."""
        for i, u in enumerate(used):
            rp = store.read_port(domain="comb")
            m.d.comb += rp.addr.eq(i)
            lemma(m, self._checks, ~u | ((rp.data.bytes >= 1) & (rp.data.bytes <= PAGE_BYTES)),
                  f"request slot {i}: in use with a size outside 1..4096 bytes")

    def _elaborate_ports(self):
        """The channel shape (§4.1): ``P`` ports over one count, every port or none
        (``free >= P``; the rotating rank when ``admission < P``).

        Slot numbers are stack-wide (the tables' waiter lists are kept by slot), but the
        store is banked per port (§19 question 1): a response leaves on the port its request
        entered (§1), so port ``p``'s slots are written by its accepts and read by its
        response stages only, and bank ``p`` is a one-write-port RAM of ``admission`` words
        (the words of the slots other ports hold are unused in it). The count is a register
        of its own, not a population count of the used bits.
        """
        m = Module()
        n, P, w = self._cfg.admission, self._ports, self._w
        checks = self._checks
        slot_list = self._slot_list
        # a flip-flop per slot for "in use" (with the free list only for the checks) and for
        # ``mshr_hit`` (with the free list in the ports' RAMs instead, below)
        used = [Signal(name=f"used{i}") for i in range(n)] if not slot_list or checks else None
        mshr_hit = None if slot_list else [Signal(name=f"mshr_hit{i}") for i in range(n)]
        wrs, rds, stores = [], [], []
        for p in range(P):
            store = memory.Memory(shape=slot_layout(w), depth=n, init=[])
            m.submodules[f"store{p}"] = store
            stores.append(store)
            wrs.append(store.write_port())
            rds.append(store.read_port())

        takes = [named(m, self.alloc[p], f"take_p{p}") for p in range(P)]
        taken = None
        if slot_list:
            # The free slots as a free list of slot numbers (slot_free_list): the accepting
            # ports ranked, the k-th takes the k-th slot from the list's head (all of them
            # get one: a port accepts only while free >= P, §4.1); a release joins the tail
            # at the end of its cycle, usable from the next, as in ``used``
            granted, slots, list_count, _ap, _ranks = free_list_heads(
                m, n, [r.valid for r in self.release], [r.slot for r in self.release], takes,
                "free_slots", checks=checks,
                member=None if used is None else [~u for u in used])
            for p in range(P):
                invariant(m, checks, granted[p] == takes[p],
                          f"port {p}: an accept without a slot from the free list (§4.1)")
        elif n >= P:
            avail = [~u for u in used]
            # A port accepts only while free >= P (§4.1), so P distinct free slots exist
            # whenever any port accepts: port p takes a slot of its own candidate, without
            # waiting for the lower ports' accepts. The candidates alternate from both ends
            # of the free slots (port 0 the lowest, port 1 the highest, port 2 the second
            # lowest, ...), one-hot, so that each is one prefix network deep (slot numbers
            # are internal, §4.1: which free slot a request takes moves no cycle).
            grants = []
            low, high = list(avail), list(avail)
            for p in range(P):
                k = p // 2
                if p % 2 == 0:
                    _, g = lowest_onehot(m, low, f"free_low_k{k}")
                    low = [named(m, a & ~gi, f"avail_low_k{k + 1}_{i}")
                           for i, (a, gi) in enumerate(zip(low, g))] if p + 2 < P else low
                else:
                    _, g = lowest_onehot(m, high[::-1], f"free_high_k{k}")
                    g = g[::-1]
                    high = [named(m, a & ~gi, f"avail_high_k{k + 1}_{i}")
                            for i, (a, gi) in enumerate(zip(high, g))] if p + 2 < P else high
                grants.append(g)
            slots = [onehot_index(m, g, f"alloc_slot_p{p}") for p, g in enumerate(grants)]
            taken = [[named(m, takes[p] & grants[p][i], f"take_p{p}_slot{i}")
                      for i in range(n)] for p in range(P)]
        else:
            avail = [~u for u in used]
            # The k-th accepting port (in port order) takes the k-th lowest free slot: at
            # most the free count of ports accept (below P slots the accepted ports have
            # distinct ranks below the free count, §4.1).
            kth = []
            for k in range(P):
                found, idx = lowest_set(m, avail, f"free_slot_k{k}")
                kth.append(idx)
                if k + 1 < P:   # the free slots above the k-th, named (built once per level)
                    avail = [named(m, a & ~(found & (idx == i)), f"avail_k{k + 1}_{i}")
                             for i, a in enumerate(avail)]
            slots = []
            count = 0
            for p in range(P):
                slot = Signal(w.slot, name=f"alloc_slot_p{p}")
                pick = kth[0]
                for k in range(1, p + 1):   # a chain, not an index: count <= p (no case gaps)
                    pick = Mux(count == k, kth[k], pick)
                m.d.comb += slot.eq(pick)
                slots.append(slot)
                count = count + takes[p]
            taken = [[named(m, takes[p] & (slots[p] == i), f"take_p{p}_slot{i}")
                      for i in range(n)] for p in range(P)]
        # §0, §4.1: the admission term of ready_p(t), registered from the next-state count:
        # with admission >= P every port while admission - inflight(t) >= P (one comparator);
        # below P slots the rotating rank (p - t) mod P < admission - inflight(t), from the
        # next cycle's phase t + 1 mod P
        now = Signal(range(n + 1), name="inflight_count")
        after = Signal(range(n + P + 1), name="inflight_next")
        m.d.comb += after.eq(now + tree_sum(takes) - tree_sum([r.valid for r in self.release]))
        m.d.sync += now.eq(after)
        if used is not None:
            invariant(m, checks, now == tree_sum(used),
                      "the registered admission count differs from the used slots")
        if slot_list:
            invariant(m, checks, list_count + now == n,
                      "the slots in the free list and in use differ from the admission")
        if n >= P:
            room_all = Signal(init=1, name="room_all")
            m.d.sync += room_all.eq(after + P <= n)
            m.d.comb += self.alloc_ready.eq(room_all.replicate(P))
            if checks:
                invariant(m, checks, room_all == (now + P <= n),
                          "the registered admission room differs from free >= P (§4.1)")
        else:
            phase = Signal(range(P), name="phase")
            phase_next = Signal(range(P), name="phase_next")
            m.d.comb += phase_next.eq(Mux(phase == P - 1, 0, phase + 1))
            m.d.sync += phase.eq(phase_next)
            room = Signal(P, init=sum(1 << p for p in range(P) if p < n), name="room")
            for p in range(P):
                m.d.sync += room[p].eq(_rank(p, P, phase_next) + after < n)
            m.d.comb += self.alloc_ready.eq(room)
            if checks:
                for p in range(P):
                    invariant(m, checks, room[p] == (_rank(p, P, phase) + now < n),
                              f"port {p}: the registered admission room differs from the "
                              "rank rule (§4.1, admission < P)")
        m.d.comb += self.inflight.eq(now)
        pending = []   # per port: the store's write a cycle after the accept
        for p in range(P):
            # the store is written a cycle after the accept, from registers (slot, data and
            # enable of the accept): the k-th free slot reaches no RAM write address. A slot
            # taken in t is read by the response stages many cycles later (accept -> R is
            # at least the cycles of §4a's dispatch, enqueue and media), never in t + 1; the
            # ``protocol`` below says so
            wr_en = Signal(name=f"store_wr_en_p{p}")
            wr_slot = Signal(w.slot, name=f"store_wr_slot_p{p}", reset_less=True)
            wr_data = Signal(slot_layout(w), name=f"store_wr_data_p{p}", reset_less=True)
            m.d.sync += [wr_en.eq(takes[p]), wr_slot.eq(slots[p]),
                         wr_data.eq(self.alloc_data[p])]
            pending.append((wr_en, wr_slot, wr_data))
            m.d.comb += [self.alloc_slot[p].eq(slots[p]),
                         wrs[p].addr.eq(wr_slot),
                         wrs[p].data.eq(wr_data),
                         wrs[p].en.eq(wr_en),
                         rds[p].addr.eq(self.rd_slot[p]),
                         self.rd_data[p].eq(rds[p].data)]
            protocol(m, checks, ~(wr_en & self.rd_used[p]) | (self.rd_slot[p] != wr_slot),
                     f"port {p}: the response stages read a request slot in the cycle after "
                     "its accept (the slot store is written a cycle after the accept)")
            if not slot_list:
                m.d.sync += self.rd_hit[p].eq(select(m, mshr_hit, self.rd_slot[p],
                                                     f"rd_hit_p{p}"))
                continue
            # the port's mshr_hit flags: a one-bit RAM beside its bank of the store, cleared
            # with the store's write (a cycle after the accept), set by the port's hit (a
            # read's merge, at least three cycles after its accept: Q, X, M, then the
            # registered hit), read with the store (the flag as it was in the cycle of the
            # read, like the flip-flops'); a port's hits name its own slots (§1)
            flags = memory.Memory(shape=1, depth=n, init=[])
            m.submodules[f"mshr_hit{p}"] = flags
            clear, mark, look = flags.write_port(), flags.write_port(), flags.read_port()
            hit = self.hit[p]
            m.d.comb += [clear.addr.eq(wr_slot), clear.data.eq(0), clear.en.eq(wr_en),
                         mark.addr.eq(hit.slot), mark.data.eq(1), mark.en.eq(hit.valid),
                         look.addr.eq(self.rd_slot[p]), self.rd_hit[p].eq(look.data)]
            protocol(m, checks, ~(wr_en & hit.valid) | (hit.slot != wr_slot),
                     f"port {p}: mshr_hit recorded for a request slot in the cycle after its "
                     "accept (its flag is cleared then)")
        for i in range(n) if used is not None else ():
            for p in range(P):
                with m.If(taken[p][i] if taken is not None else
                          takes[p] & (slots[p] == i)):
                    if "admission-slot-reuse" in self._mutations:
                        if mshr_hit is not None:
                            m.d.sync += mshr_hit[i].eq(0)
                    elif mshr_hit is not None:
                        m.d.sync += [used[i].eq(1), mshr_hit[i].eq(0)]
                    else:
                        m.d.sync += used[i].eq(1)
            for p in range(P):
                with m.If(self.release[p].valid & (self.release[p].slot == i)):
                    m.d.sync += used[i].eq(0)
                if mshr_hit is None:
                    continue
                with m.If(self.hit[p].valid & (self.hit[p].slot == i)):
                    m.d.sync += mshr_hit[i].eq(1)
        if checks:
            # the bank a slot was written to: a response port reads only its own port's
            # slots (§1: a response leaves on the port its request entered)
            owner = [Signal(range(P), name=f"chk_owner{i}") for i in range(n)]
            for i in range(n):
                for p in range(P):
                    with m.If(takes[p] & (slots[p] == i)):
                        m.d.sync += owner[i].eq(p)
            for p in range(P):
                rel, hit = self.release[p], self.hit[p]
                protocol(m, checks, ~rel.valid | select(m, used, rel.slot, f"release_used_p{p}"),
                         f"port {p}: response for a request slot that holds no request")
                protocol(m, checks, ~rel.valid | (Array(owner)[rel.slot] == p),
                         f"port {p}: response for a request slot another port took")
                protocol(m, checks, ~hit.valid | select(m, used, hit.slot, f"hit_used_p{p}"),
                         f"port {p}: mshr_hit recorded for a request slot that holds no request")
                if slot_list:   # the flag is kept in the port's own RAM
                    protocol(m, checks, ~hit.valid | (Array(owner)[hit.slot] == p),
                             f"port {p}: mshr_hit recorded for a request slot another port took")
                # the controller accepts on a port only while it is ready (§4.1), and
                # a request slot is answered on one port (its channel's, §8)
                protocol(m, checks, ~self.alloc[p] | self.alloc_ready[p],
                         f"port {p}: a request accepted while alloc_ready is low")
                for q in range(p):
                    rq = self.release[q]
                    protocol(m, checks, ~(rel.valid & rq.valid) | (rel.slot != rq.slot),
                             f"ports {q} and {p} released one request slot")
                invariant(m, checks, ~takes[p] | ~select(m, used, slots[p], f"take_used_p{p}"),
                          f"port {p}: a request slot handed out while it still holds a request")
                if proving(checks):   # what the size lemmas rest on (the host's promise, §1)
                    data_p = self.alloc_data[p]
                    protocol(m, checks, ~takes[p] | ((data_p.bytes >= 1)
                                                     & (data_p.bytes <= PAGE_BYTES)),
                             f"port {p}: a request of a size outside 1..4096 bytes accepted")
                for q in range(p):
                    invariant(m, checks, ~(takes[p] & takes[q]) | (slots[p] != slots[q]),
                              f"ports {q} and {p} took one request slot")
            cover(m, checks, self.alloc.all(), "every port accepts in one cycle")
            cover(m, checks, ~self.alloc_ready.any(), "admission full")
        if proving(checks):   # the slots in use and their ports (rtl/controller_lemmas.py)
            self.proof = dict(used=used, owner=owner)
            for p, (store, (wr_en, wr_slot, wr_data)) in enumerate(zip(stores, pending)):
                lemma(m, checks, ~wr_en | ((wr_data.bytes >= 1) & (wr_data.bytes <= PAGE_BYTES)
                                           & Array(used)[wr_slot] & (Array(owner)[wr_slot] == p)),
                      f"port {p}: the store's pending write holds a size outside 1..4096 "
                      "bytes, or a slot not the port's")
                for i in range(n):
                    rp = store.read_port(domain="comb")
                    m.d.comb += rp.addr.eq(i)
                    mine = used[i] & (owner[i] == p) & ~(wr_en & (wr_slot == i))
                    lemma(m, checks, ~mine | ((rp.data.bytes >= 1)
                                              & (rp.data.bytes <= PAGE_BYTES)),
                          f"port {p}, request slot {i}: in use with a size outside 1..4096 "
                          "bytes")
        return m

    def _check_sync_read(self, m, used, mshr_hit, store):
        """§13 (synchronous-read memories): the synchronous read returns what a combinational read of the
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
                  "the synchronous slot read differs from the slot's contents (§8)")

    def _add_checks(self, m, used, take, free):
        checks, n = self._checks, self._cfg.admission
        if proving(checks):   # what the size lemmas rest on (the host's promise, §1)
            protocol(m, checks, ~take | ((self.alloc_data.bytes >= 1)
                                         & (self.alloc_data.bytes <= PAGE_BYTES)),
                     "a request of a size outside 1..4096 bytes accepted")
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
