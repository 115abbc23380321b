"""Read MSHR table: page-keyed miss entries with per-request waiter lists.

Implements docs/timing-contract.md §4.2 (read dispatch, steps 2-3), §4.3 (read MSHR
entries), the MSHR side of §6 (enqueue offers) and of §8 (responses in waiter-list order)
under the registered pipeline: DP1 (the dispatch written a cycle later from the register
W), DP2 (offers in allocation order; DP2a under aggregation), DP4 (the free list), DP6
(issue and completion applied a cycle later) and the MSHR side of DP7 (C1 / C2 / cursor);
with the structures of docs/rtl.md "Issue 12, part C" that change no cycle (the state as
an AND-OR of its events). The port count ``P`` is a parameter (1 in the stack shape,
``channels`` in the channel shape). sources.md R1, R2 (waiter lists as linked lists in a
memory of request slots).
"""

from __future__ import annotations

__all__ = ["Mshr", "MshrState", "disp_layout"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, lemma, protocol, proving
from hbfsim.rtl.entry_table import (check_waiters, offer_fifo, offer_registered,
                                    registered_lookup, response_stages, sliced_pools,
                                    pool_lemmas, stage_lemmas)
from hbfsim.rtl.free_list import free_list, free_list_heads, port_pools
from hbfsim.rtl.layouts import (EntryKind, Widths, done_layout, event_layout, queue_op_layout,
                                ret_layout, target_layout)
from hbfsim.rtl.logic import named, onehot_index, onehot_select, tree_sum
from hbfsim.rtl.mutations import check_mutations


class MshrState(enum.Enum, shape=3):
    """State of one MSHR entry (contract §4.3). WAIT, QUEUED and ISSUED are mergeable."""

    FREE = 0
    WAIT = 1
    QUEUED = 2
    ISSUED = 3
    RETURN = 4


def disp_layout(w: Widths) -> data.StructLayout:
    """A read dispatched from the map register M (contract §4.2)."""
    return data.StructLayout({
        "page": unsigned(w.page),
        "target": target_layout(w),
        "bytes": unsigned(w.bytes),
        "slot": unsigned(w.slot),
    })


class Mshr(wiring.Component):
    """Read MSHR table of ``mshr_entries`` entries (docs/timing-contract.md §4.3, DP1-DP7).

    A read dispatched on ``disp`` (port ``p``'s map register M) merges into the mergeable
    (WAIT, QUEUED or ISSUED) entry of its page, joining the tail of that entry's waiter list
    (an MSHR hit), or allocates the entry at the head of the free list (DP4); with neither,
    ``disp.ready`` is low and the read stalls. With ``mshr_merge = false`` every read
    allocates. The decision is written into the entry a cycle later from the port's
    register W (DP1), whose entry ``tags`` and ``pending`` already include and
    ``w_entry`` names, so that the controller forwards it into M's match vector.

    A WAIT entry is *ready* in demand mode, or once its byte count reaches
    ``read_agg_threshold_bytes`` or ``read_agg_window_ticks`` cycles have passed since its
    allocation. Demand reads leave per channel in allocation order (a FIFO of offers, DP2);
    aggregation reads through a registered offer of the lowest-index candidate (DP2a).
    ``issue[c]`` and ``done[c]`` take effect a cycle later (ISSUED from ``td + 2``, RETURN
    with its flags from ``tc + 2``, DP6). ``ret`` offers the next waiter of the entry the
    response choice C1 / C2 / cursor holds (DP7); a handshake on ``ret`` is the response
    stage R taking the waiter, and an entry whose waiters have all been taken stays in
    RETURN (``drained``, no longer offered) until ``launched`` names it: FREE from the
    cycle after its last waiter's launch.

    Waiter lists are linked lists threaded through a memory with one word per request slot
    (``admission`` words): an entry keeps head and tail slots, the memory keeps each slot's
    successor, so every merged request gets its own response, in arrival order.

    Parameters
    ----------
    cfg : HbfConfig
        ``mshr_entries``, ``mshr_merge``, ``channels``, ``admission``, ``read_mode``,
        ``read_agg_window_ticks`` and ``read_agg_threshold_bytes`` are used.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`) of the table and of its ports: at most one
        mergeable entry per page, a FREE entry has no waiter and a busy one has at least
        one, no waiter is lost or answered twice (a set of the request slots inside the
        table), byte counts do not overflow; events name entries in the right state; the
        free list holds exactly the FREE entries no W writes, each offer FIFO exactly its
        channel's WAIT entries.
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.
    ports : int
        The port count ``P``: 1 in the stack shape, ``channels`` in the channel shape
        (§4.2.3, §8). With ``P > 1`` the per-port members below are arrays of ``P`` (the
        one-bit ones ``P``-bit vectors): per port a W register, a merge and a head of the
        free list (DP4); response port ``p`` drains the RETURN entries of channel ``p``.
    registered : bool or None
        The registered lookup structures (:func:`~hbfsim.rtl.entry_table.registered_lookup`:
        M's hit flags registered with its vectors, which arrive qualified by the entries'
        next-cycle states; with several ports, the free list's heads in registers). None
        (default): chosen by the table's size, ``mshr_entries > 8``. The same cycles either way
        (§13); the formal set checks both.

    Members
    -------
    disp : ``In(stream.Signature(disp_layout))``, per port
        Read dispatch from M: page, its mapping, request bytes and admission slot.
    disp_match : ``In(mshr_entries)``, per port
        M's registered match vector (§4.2, the lookup L of the request on ``disp``), without
        W's entry: bit ``i`` when entry ``i`` held the page at the lookup or was allocated
        for it since. The table qualifies it (kept only while the entry is mergeable)
        instead of comparing pages; with ``mshr_merge = false`` it is unused.
    w_match : ``In(1)``, per port
        W's entry was allocated for the page of the read on ``disp`` (the controller's
        flag, registered with M's load): the table adds W's entry to ``disp_match``, and
        its hit is ``w_match`` ORed after the entries' hit tree (from registers only).
    w_entry : ``Out(mshr_entries)``, per port
        The entry W writes in this cycle (one-hot; M's allocation of the last cycle).
    disp_hit : ``Out(1)``, per port
        The read on ``disp`` merges into an existing entry (valid with ``disp.valid``).
    disp_index : ``Out(range(mshr_entries))``, per port
        The entry it merges into or allocates.
    enq : ``Out(stream.Signature(queue_op_layout)).array(channels)``
        Per channel, the oldest WAIT entry of that channel (DP2) or its registered offer
        (DP2a).
    issue : ``In(event_layout).array(channels)``
        The channel decided the READ of an entry (QUEUED -> ISSUED); one per plane lane
        with multi-plane commands.
    done : ``In(done_layout).array(channels)``
        The channel delivered the completion of an entry (ISSUED -> RETURN).
    ret : ``Out(stream.Signature(ret_layout))``, per port
        The next waiter of the entry being drained; a handshake is R taking it.
    ret_sel : ``In(1)``, per port
        R takes this table's offer in this cycle (driven by the response port; the
        cursor follows the handshake).
    ret_locked : ``Out(1)``, per port
        The cursor holds a partly drained entry.
    launched : ``In(event_layout)``, per port
        The last waiter of the named entry was launched (§8).
    tags : ``Out(ArrayLayout(page, mshr_entries))``, ``pending`` : ``Out(mshr_entries)``
        Page of every entry and whether it is in WAIT, QUEUED or ISSUED (W's entries
        included), for L and the write buffer's flush rule (§4.4).
    disp_any : ``In(1)``, per port; ``pending_next`` : ``Out(mshr_entries)``
        Only with ``registered``: the OR of ``disp_match``, registered with it, and the
        entries joinable in the next cycle (W's, and those that do not complete in this
        one), with which M qualifies its vector when it registers it; the hit then reads
        flip-flops only.
    stored_tags : ``Out(ArrayLayout(page, mshr_entries))``, ``w_page`` : ``Out(page)``, per port
        The same pages apart: every entry's page register, and the page W writes into its
        entry (``w_entry``), so that L compares its page with registers and picks W's result
        after the compares (``tags[i]`` is ``w_page[p]`` where ``w_entry[p][i]``, else
        ``stored_tags[i]``).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=(),
                 ports: int = 1, registered: bool | None = None):
        self._cfg = cfg
        self._w = w = Widths.of(cfg)
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._ports = P = ports
        n, c = cfg.mshr_entries, cfg.channels
        # M's hit flag registered with its vector, the free list's heads in registers
        # (entry_table.registered_lookup: tables of more than eight entries)
        self._registered = registered = (registered_lookup(n) if registered is None
                                         else bool(registered))

        def per_port(member):
            return member if P == 1 else member.array(P)

        super().__init__({
            "launched": per_port(In(event_layout(w.mshr_index))),
            "disp_match": per_port(In(n)),
            **({"disp_any": In(P)} if registered else {}),
            "w_entry": per_port(Out(n)),
            "w_match": In(P),
            "disp": per_port(In(stream.Signature(disp_layout(w)))),
            "disp_hit": Out(P),
            "disp_index": per_port(Out(range(max(2, n)))),
            "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
            "issue": In(event_layout(w.mshr_index)).array(c * max(1, w.planes)),
            "done": In(done_layout(w.mshr_index)).array(c * max(1, w.planes)),
            "ret": per_port(Out(stream.Signature(ret_layout(w, w.mshr_index)))),
            "ret_sel": In(P),
            "ret_locked": Out(P),
            "tags": Out(data.ArrayLayout(unsigned(w.page), n)),
            "pending": Out(n),
            **({"pending_next": Out(n)} if registered else {}),
            "stored_tags": Out(data.ArrayLayout(unsigned(w.page), n)),
            "w_page": per_port(Out(unsigned(w.page))),
        })

    @property
    def registered(self) -> bool:
        """Whether this table takes the registered lookup structures (``registered``)."""
        return self._registered

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def elaborate(self, platform):
        """Per port a W register, a merge and a head of the free list (DP4); per response
        port ``C1``, ``C2`` and a cursor over the entries of its channel (DP7)."""
        m = Module()
        cfg, w, checks = self._cfg, self._w, self._checks
        merge_on = cfg.mshr_merge
        aggregation = cfg.read_mode == "aggregation"
        n, channels = cfg.mshr_entries, cfg.channels
        mut = self._mutations
        P = self._ports
        per_channel = P > 1 and cfg.pools == "channel"     # §4.5: a pool per channel
        # per entry the ports whose W can write it: every port, or its pool's (§4.5 B2: port
        # p allocates and merges only entries of its own pool, and only response port p
        # answers them)
        pool_k = n // P if per_channel else n
        # each port's structures over its own pool's entries only (entry_table.sliced_pools):
        # its W's one-hot, match vector, hit index and tail, and its DP7 stages
        sliced = per_channel and sliced_pools(pool_k)
        own = [range(p * pool_k, (p + 1) * pool_k) if sliced else range(n) for p in range(P)]
        writers = [[i // pool_k] if per_channel else list(range(P)) for i in range(n)]
        # per entry the channels whose queue, command and completion ports can name it: its
        # pool's, or every channel (``lanes`` event ports per channel, channel-major)
        lanes = len(self.issue) // channels
        chans = [[i // pool_k] if per_channel else list(range(channels)) for i in range(n)]
        lanes_of = [[c * lanes + k for c in chans[i] for k in range(lanes)] for i in range(n)]

        def sx(p):   # a per-port name's suffix: none in the stack shape (its Verilog unchanged)
            return "" if P == 1 else f"_p{p}"

        def per_port(x):
            return [x] if P == 1 else list(x)

        disps, disp_match = per_port(self.disp), per_port(self.disp_match)
        w_match = [self.w_match] if P == 1 else [self.w_match[p] for p in range(P)]
        registered = self._registered
        disp_any = (([self.disp_any] if P == 1 else [self.disp_any[p] for p in range(P)])
                    if registered else None)
        launched = per_port(self.launched)

        state = [Signal(MshrState, name=f"state{i}") for i in range(n)]
        page = [Signal(w.page, name=f"page{i}") for i in range(n)]
        target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
        nbytes = [Signal(range(cfg.admission * PAGE_BYTES + 1), name=f"bytes{i}")
                  for i in range(n)]
        head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
        tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
        buffer_hit = [Signal(name=f"buffer_hit{i}") for i in range(n)]
        error = [Signal(name=f"error{i}") for i in range(n)]
        drained = [Signal(name=f"drained{i}") for i in range(n)]
        m.submodules.next_slot = next_slot = memory.Memory(
            shape=unsigned(w.slot), depth=cfg.admission, init=[])
        if P == 1:   # (the ports' names come from these variables)
            link_wr = next_slot.write_port()
            link_rd = next_slot.read_port(domain="comb")
            link_wrs, link_rds = [link_wr], [link_rd]
        else:
            link_wrs = [next_slot.write_port() for _ in range(P)]
            link_rds = [next_slot.read_port(domain="comb") for _ in range(P)]

        mergeable = [named(m, (s == MshrState.WAIT) | (s == MshrState.QUEUED)
                           | (s == MshrState.ISSUED), f"mergeable{i}") for i, s in enumerate(state)]
        joinable = mergeable
        if "mshr-merge-return" in mut:
            joinable = [mergeable[i] | (state[i] == MshrState.RETURN) for i in range(n)]

        # ---- DP1: per port a W holds M's decision of the previous cycle and writes it into its
        # entry ----
        w_alloc = [Signal(name=f"w_alloc{sx(p)}") for p in range(P)]
        w_merge = [Signal(name=f"w_merge{sx(p)}") for p in range(P)]
        w_oh = [Signal(len(own[p]), name=f"w_onehot{sx(p)}") for p in range(P)]
        w_d = [Signal(disp_layout(w), name=f"w_payload{sx(p)}", reset_less=True)
               for p in range(P)]
        w_tail = [Signal(w.slot, name=f"w_tail{sx(p)}", reset_less=True) for p in range(P)]
        if P == 1:
            w_new_p = [[named(m, w_alloc[0] & w_oh[0][i], f"w_new{i}") for i in range(n)]]
            w_new = w_new_p[0]
            m.d.comb += self.w_entry.eq(Cat(*w_new))
        else:
            w_new_p = [[named(m, w_alloc[p] & w_oh[p][i - own[p][0]], f"w_new{i}{sx(p)}")
                        if p in writers[i] else Const(0, 1) for i in range(n)]
                       for p in range(P)]
            w_new = [named(m, Cat(*[w_new_p[p][i] for p in writers[i]]).any(), f"w_new{i}")
                     for i in range(n)]
            for p in range(P):
                m.d.comb += self.w_entry[p].eq(Cat(*w_new_p[p]))
        # the entry W allocates counts as mergeable for M (DP1: M sees the last decision of its
        # port; a page's reads enter one port, so no other port's W can hold its entry): M's
        # vector (``disp_match``, registered) plus W's entry when the controller's flag
        # ``w_match`` says W allocated it for M's page
        matches, hits, hit_indexes = [], [], []
        for p in range(P):
            if not merge_on:   # every read allocates its own entry (§4.2 read step 3)
                matches.append([Const(0, 1)] * len(own[p]))
                hits.append(Const(0, 1))
                hit_indexes.append(Const(0, 1))
                continue
            vec = {i: named(m, disp_match[p][i] | (w_match[p] & w_new_p[p][i]),
                            f"disp_vec{i}{sx(p)}") for i in own[p]}
            match = [named(m, (joinable[i] | w_new_p[p][i]) & vec[i], f"match{i}{sx(p)}")
                     if p in writers[i] else Const(0, 1) for i in own[p]]
            # at most one mergeable entry per page: the hit is an OR, its index an OR encoding.
            # W's term of the hit is the flag alone, ORed after the entries' tree: W's entry is
            # FREE (not joinable) and off M's registered vector (it left the free list, which
            # holds no pending entry, in the cycle M's vector was last loaded or qualified), and
            # the flag implies W's allocation; so W's one-hot is not on the hit's path (issue
            # 12, seed 3's path). With ``registered`` (more than eight entries), M's vector was
            # qualified when it was registered with ``pending_next`` (the entries joinable in
            # this cycle) and the controller registered its OR with it (``disp_any``): the hit
            # reads flip-flops only, not the entries' states (issue 23: the 32-entry
            # state-to-hit tree led the 4 x 32 point's critical path). An invariant compares
            # it with the OR of ``match``.
            if registered:
                entries_hit = disp_any[p]
            else:
                entries_hit = Cat(*[joinable[i] & disp_match[p][i] for i in range(n)]).any()
            hit = named(m, entries_hit | w_match[p], f"hit{sx(p)}")
            hit_index = onehot_index(m, match, f"hit_index{sx(p)}")
            if sliced:   # the table's index
                hit_index = named(m, hit_index + own[p][0], f"hit_entry{sx(p)}")
            same = hit == Cat(*match).any()
            if per_channel:
                # only a read's: a write's M compares too, and under a partition scheduler
                # its page's read entry is another channel's pool (§4.5)
                same = same | ~disps[p].valid
            invariant(m, checks, same,
                      f"the MSHR hit{sx(p)} differs from the OR of its match vector "
                      "(DP1, W's flag)")
            matches.append(match)
            hits.append(hit)
            hit_indexes.append(hit_index)
        if checks:
            self._lookup_protocol(m, disps, disp_match, disp_any, w_match, w_alloc, w_new_p, w_d,
                                  mergeable, page)

        # ---- DP4: allocation from the free list; an entry joins it when its last waiter is
        # launched (FREE from the next cycle, §8) ----
        if P == 1:
            any_free, free_index, free_oh, free_pop, free_count = free_list(
                m, n, self.launched.valid, self.launched.index, "free_list", checks=checks,
                member=[(state[i] == MshrState.FREE) & ~w_new[i] for i in range(n)])
            ready = [hits[0] | any_free]
            free_indexes, free_ohs = [free_index], [free_oh]
        elif per_channel:
            # §4.5: a pool per channel, each the one-port free list over its own entries
            granted, free_indexes, free_ohs, pool_pops, free_count = port_pools(
                m, n, disps, hits, launched, checks=checks,
                member=[(state[i] == MshrState.FREE) & ~w_new[i] for i in range(n)])
            ready = [hits[p] | granted[p] for p in range(P)]
            any_free = Cat(*[g for g in granted]).any()
            free_index = free_indexes[0]
        else:
            want = [named(m, d.valid & ~hits[p], f"want{sx(p)}") for p, d in enumerate(disps)]
            granted, free_indexes, free_count, _ap, _ranks = free_list_heads(
                m, n, [ev.valid for ev in launched], [ev.index for ev in launched], want,
                "free_list", registered=registered, checks=checks,
                member=[(state[i] == MshrState.FREE) & ~w_new[i] for i in range(n)])
            free_ohs = [[named(m, free_indexes[p] == i, f"free_list_head{i}{sx(p)}")
                         for i in range(n)] for p in range(P)]
            ready = [hits[p] | granted[p] for p in range(P)]
            any_free = Cat(*[g for g in granted]).any()
            free_index = free_indexes[0]
        fires, allocates = [], []
        for p, d in enumerate(disps):
            if P == 1:
                m.d.comb += [
                    d.ready.eq(ready[p]),
                    self.disp_hit.eq(hits[p]),
                    self.disp_index.eq(Mux(hits[p], hit_indexes[p], free_indexes[p])),
                ]
            else:
                m.d.comb += [
                    d.ready.eq(ready[p]),
                    self.disp_hit[p].eq(hits[p]),
                    self.disp_index[p].eq(Mux(hits[p], hit_indexes[p], free_indexes[p])),
                ]
            fire = named(m, d.valid & d.ready, f"fire{sx(p)}")
            merge = named(m, fire & hits[p], f"merge{sx(p)}")
            allocate = named(m, fire & ~hits[p], f"allocate{sx(p)}")
            fires.append(fire)
            allocates.append(allocate)
            if P == 1:
                free_pop(allocate)
            elif per_channel:
                pool_pops[p](allocate)
            match = matches[p]
            # a merge behind the entry W is writing appends to W's waiter (its tail is not
            # written)
            same_w = named(m, (w_alloc[p] | w_merge[p]) & (w_oh[p] & Cat(*match)).any(),
                           f"w_same{sx(p)}")
            hit_tail = Mux(same_w, w_d[p].slot, onehot_select(m, [tail[i] for i in own[p]],
                                                              match, f"hit_tail{sx(p)}"))
            m.d.sync += [w_alloc[p].eq(allocate), w_merge[p].eq(merge),
                         w_oh[p].eq(Mux(allocate, Cat(*[free_ohs[p][i] for i in own[p]]),
                                        Cat(*match))),
                         w_d[p].eq(d.payload), w_tail[p].eq(hit_tail)]
            m.d.comb += [
                link_wrs[p].addr.eq(w_tail[p]),
                link_wrs[p].data.eq(w_d[p].slot),
                link_wrs[p].en.eq(0 if "mshr-dropped-waiter" in mut else w_merge[p]),
            ]
        # L and the write buffer see W's entries as pending, with their pages (DP1)
        for i in range(n):
            tag = page[i]
            for p in reversed(writers[i]):
                tag = Mux(w_new_p[p][i], w_d[p].page, tag)
            m.d.comb += [self.tags[i].eq(tag), self.stored_tags[i].eq(page[i]),
                         self.pending[i].eq(mergeable[i] | w_new[i])]
        for p in range(P):
            m.d.comb += (self.w_page if P == 1 else self.w_page[p]).eq(w_d[p].page)
        merge_en_p = [[named(m, w_merge[p] & w_oh[p][i - own[p][0]], f"w_merge{i}{sx(p)}")
                       if p in writers[i] else Const(0, 1) for i in range(n)]
                      for p in range(P)]
        merge_en = merge_en_p[0] if P == 1 else [
            named(m, Cat(*[merge_en_p[p][i] for p in writers[i]]).any(), f"w_merge{i}")
            for i in range(n)]

        # ---- DP2: per channel, the WAIT entries in allocation order; a channel's reads enter
        # one port (its own in the channel shape), so one W pushes its FIFO ----
        w_index = [onehot_index(m, [w_oh[p][j] for j in range(len(own[p]))], f"w_index{sx(p)}")
                   for p in range(P)]
        if sliced:   # the table's indices
            w_index = [named(m, w_index[p] + own[p][0], f"w_entry{sx(p)}") for p in range(P)]
        enq_fire, enq_index, fifo_count = [], [], []
        held = []
        if aggregation:
            # ---- DP2a: an entry is ready from DP1's view (bytes merged up to t - 2 at the
            # threshold, or t >= alloc + window, and t >= alloc + 2: its WAIT state), a
            # candidate from the next cycle (``ready_q``); per channel a registered offer
            # ``OR_c`` takes the lowest-index candidate (``offer_registered``, DP3's
            # structure) ----
            window = cfg.read_agg_window_ticks
            cap = max(window, 2)
            age = [Signal(range(cap + 1), name=f"age{i}") for i in range(n)]
            cand = []
            for i in range(n):
                waiting = state[i] == MshrState.WAIT
                ready = named(m, waiting & ((nbytes[i] >= cfg.read_agg_threshold_bytes)
                                            | (age[i] >= window)), f"ready{i}")
                ready_q = Signal(name=f"ready_q{i}")
                m.d.sync += ready_q.eq(ready)
                cand.append(named(m, ready_q & waiting, f"candidate{i}"))
                # cycles since the allocation decision: 2 in the first WAIT cycle (W writes
                # the entry in alloc + 1), saturating at max(window, 2)
                with m.If(w_new[i]):
                    m.d.sync += age[i].eq(2)
                with m.Elif(waiting & (age[i] != cap)):
                    m.d.sync += age[i].eq(age[i] + 1)
            enq_fire, enq_index, held = offer_registered(m, self.enq, cand, target,
                                                         EntryKind.MSHR)
        for c, port in (() if aggregation else enumerate(self.enq)):
            q = 0 if P == 1 else c
            fire_c, index_c, count_c = offer_fifo(
                m, port, named(m, w_alloc[q] & (w_d[q].target.channel == c), f"offer_push{c}"),
                w_index[q], w_d[q].target, EntryKind.MSHR, n, f"offer_fifo{c}", checks=checks,
                member=[(state[i] == MshrState.WAIT) & (target[i].channel == c)
                        for i in range(n)])
            enq_fire.append(fire_c)
            enq_index.append(index_c)
            fifo_count.append(count_c)
            if P > 1:
                invariant(m, checks, ~w_alloc[q] | (w_d[q].target.channel == c),
                          f"port {c}: W allocated an entry of another channel (DP2)")

        # ---- DP7: the response choice C1 / C2 / cursor, per response port over the entries of
        # its channel ----
        pops, curs, lasts, regss = response_stages(
            m, self.ret, self.ret_locked, lambda i: state[i] == MshrState.RETURN, drained, head,
            tail, target, error, link_rds, ports=P, pool_k=pool_k, per_channel=per_channel,
            buffer_hit=buffer_hit)

        # ---- per-entry next state ----
        issue_qs, done_qs = [], []
        for i in range(n):
            for p in writers[i]:
                with m.If(w_new_p[p][i]):
                    m.d.sync += [page[i].eq(w_d[p].page), target[i].eq(w_d[p].target),
                                 nbytes[i].eq(w_d[p].bytes), head[i].eq(w_d[p].slot),
                                 tail[i].eq(w_d[p].slot), buffer_hit[i].eq(0), error[i].eq(0)]
            for p in writers[i]:
                with m.If(merge_en_p[p][i]):
                    m.d.sync += [nbytes[i].eq(nbytes[i] + w_d[p].bytes), tail[i].eq(w_d[p].slot)]
            # DP6: the issue and completion events decoded per entry into flip-flops and
            # applied a cycle later (ISSUED from td + 2, RETURN with its flags from tc + 2)
            issues = [self.issue[j] for j in lanes_of[i]]
            dones = [self.done[j] for j in lanes_of[i]]
            issue_i = Cat(*[e.valid & (e.index == i) for e in issues]).any()
            done_i = Cat(*[e.valid & (e.index == i) for e in dones]).any()
            issue_q, done_q = Signal(name=f"issue_q{i}"), Signal(name=f"done_q{i}")
            done_bh, done_err = Signal(name=f"done_bh_q{i}"), Signal(name=f"done_err_q{i}")
            m.d.sync += [issue_q.eq(issue_i), done_q.eq(done_i)]
            with m.If(done_i):
                m.d.sync += [
                    done_bh.eq(Cat(*[e.valid & (e.index == i) & e.buffer_hit
                                     for e in dones]).any()),
                    done_err.eq(Cat(*[e.valid & (e.index == i) & e.error
                                      for e in dones]).any())]
            with m.If(done_q):
                m.d.sync += [buffer_hit[i].eq(done_bh), error[i].eq(done_err)]
            for p in writers[i]:
                with m.If(pops[p] & (curs[p] == i) & lasts[p]):
                    m.d.sync += drained[i].eq(1)
            ev_f = (launched[0].valid & (launched[0].index == i) if P == 1 else
                    Cat(*[launched[p].valid & (launched[p].index == i)
                          for p in writers[i]]).any())
            with m.If(ev_f):
                m.d.sync += drained[i].eq(0)
            # The state's events exclude each other (each needs a different state), so the next
            # state is an AND-OR of the events, not a priority chain (docs/rtl.md part C, (i)).
            ev_w = w_new[i]
            ev_q = Cat(*[enq_fire[c] & (enq_index[c] == i) for c in chans[i]]).any()
            ev_s, ev_r = issue_q, done_q
            hold = named(m, ~(ev_w | ev_q | ev_s | ev_r | ev_f), f"state_hold{i}")
            sv = state[i].as_value()
            # FREE 0, WAIT 1, QUEUED 2, ISSUED 3, RETURN 4
            m.d.sync += sv.eq(Cat(ev_w | ev_s | (hold & sv[0]), ev_q | ev_s | (hold & sv[1]),
                                  ev_r | (hold & sv[2])))
            issue_qs.append(issue_q)
            done_qs.append(done_q)
            # joinable in the next cycle: W's entry (WAIT from the next cycle), or joinable now
            # and not leaving (a read entry leaves only by its completion, DP6's done_q, to
            # RETURN; the mutant's RETURN entries by their free)
            if registered:
                leave = ev_f if "mshr-merge-return" in mut else ev_r
                m.d.comb += self.pending_next[i].eq((joinable[i] & ~leave) | w_new[i])
            events = Cat(ev_w, ev_q, ev_s, ev_r, ev_f)
            invariant(m, checks, (events & (events - 1)) == 0,
                      f"MSHR entry {i}: two state events in one cycle (DP6)")

        if checks:
            inside, waiters = self._add_checks(
                m, state, page, mergeable, head, tail, w_alloc, w_new, merge_en, w_d, fires,
                pops, curs, regss, nbytes, drained, any_free, free_index, free_count,
                fifo_count, enq_index, issue_qs, done_qs, merge_en_p, w_new_p, free_indexes,
                disps, held)
        if proving(checks):
            self._add_lemmas(m, state, mergeable, head, tail, target, buffer_hit, error,
                             drained, regss, inside, waiters, next_slot, w_alloc, w_merge, w_oh,
                             w_d, w_tail, pops, nbytes)
            # what the controller's proof states about this table (rtl/controller_lemmas.py)
            self.proof = dict(state=state, issue_q=issue_qs, done_q=done_qs, inside=inside,
                              drained=drained, target=target, page=page,
                              pools=self._pools_listed, w_alloc=w_alloc, w_merge=w_merge,
                              w_payload=w_d, w_new=w_new_p)
        return m

    def _add_lemmas(self, m, state, mergeable, head, tail, target, buffer_hit, error,
                    drained, regss, inside, waiters, next_slot, w_alloc, w_merge, w_oh, w_d,
                    w_tail, pops, nbytes):
        """What makes the table's properties inductive (docs/formal.md "Induction"), stated
        only in a proof of this block: DP7's stages (``stage_lemmas``), the waiter lists
        (``waiter_list_lemmas``, one port) and, before any response, at most a page of bytes
        per waiter."""
        checks, n, P = self._checks, self._cfg.mshr_entries, self._ports
        self._pools_listed = None   # each pool's listed slots (one list per pool)
        in_return = [(s == MshrState.RETURN) & ~drained[i] for i, s in enumerate(state)]
        channel = [t.channel for t in target]
        # shared pools (§4.2.3): a port's lists are its channel's entries (§1, §8)
        owned = ([[ch == p for ch in channel] for p in range(P)]
                 if P > 1 and self._cfg.pools != "channel" else None)
        stage_lemmas(m, checks, regss, in_return, dict(
            h2=head, t2=tail, ch2=channel, bh2=buffer_hit, er2=error,
            lk_tail=tail, lk_ch=channel, lk_bh=buffer_hit, lk_er=error), "MSHR",
            pools=len(regss) > 1 and self._cfg.pools == "channel", owned=owned)
        busy = [(s != MshrState.FREE) & ~drained[i] for i, s in enumerate(state)]
        rets = [self.ret] if P == 1 else list(self.ret)
        undrawn, self._pools_listed = pool_lemmas(
            m, checks, self._cfg.admission, busy, mergeable, in_return, head, tail, regss,
            inside, waiters, next_slot, w_alloc, w_merge, w_oh, [d.slot for d in w_d], w_tail,
            pops, [r.payload.slot for r in rets], "MSHR", owned=owned)
        for i in range(n):
            lemma(m, checks, ~undrawn[i] | (nbytes[i] <= waiters[i] * PAGE_BYTES),
                  f"MSHR entry {i}: more bytes than a page per waiter")

    def _lookup_protocol(self, m, disps, disp_match, disp_any, w_match, w_alloc, w_new_p, w_d,
                         mergeable, page):
        """What the controller's M promises the table (DP1; the controller asserts the same
        of its vectors against a fresh lookup): the flag ``w_match`` only with W's
        allocation, M's vector without W's entry, and for a read on ``disp`` the vector
        (over the mergeable entries) and the flag equal to a fresh lookup of its page."""
        checks, n = self._checks, self._cfg.mshr_entries
        for p, d in enumerate(disps):
            protocol(m, checks, ~w_match[p] | w_alloc[p],
                     f"port {p}: w_match without W's allocation (DP1)")
            protocol(m, checks, (disp_match[p] & Cat(*w_new_p[p])) == 0,
                     f"port {p}: M's MSHR vector holds W's entry (DP1)")
            if disp_any is not None:
                # the vector was qualified with ``pending_next`` of the cycle before, and the
                # flag is its OR (registered with it); with a pool per channel the OR of the
                # port's pool's part (§4.5: a read merges only there; under a partition
                # scheduler a write port's vector also holds the read ports' entries of its
                # page, for its blockers, §4.2.4)
                pn_q = Signal(n, name=f"pending_next_q{p}")
                m.d.sync += pn_q.eq(self.pending_next)
                mine = disp_match[p]
                if len(disps) > 1 and self._cfg.pools == "channel":
                    k = n // len(disps)
                    mine = mine & Const(((1 << k) - 1) << (p * k), n)
                protocol(m, checks, ((disp_match[p] & ~pn_q) == 0)
                         & (disp_any[p] == mine.any()),
                         f"port {p}: M's MSHR vector holds an entry that was not pending_next, "
                         "or its flag is not its OR (DP1)")
            if not self._cfg.mshr_merge:
                continue
            fresh = Cat(*[mergeable[i] & (page[i] == d.payload.page) for i in range(n)])
            protocol(m, checks, ~d.valid | (((Cat(*mergeable) & disp_match[p]) == fresh)
                                            & (w_match[p] == (w_alloc[p] & (w_d[p].page
                                                                            == d.payload.page)))),
                     f"port {p}: M's MSHR vector differs from a fresh lookup of its page (DP1)")

    def _add_checks(self, m, state, page, mergeable, head, tail, w_alloc, w_new, merge_en, w_d,
                    fires, pops, curs, regss, nbytes, drained, any_free, free_index, free_count,
                    fifo_count, enq_index, issue_qs, done_qs, merge_en_p, w_new_p, free_indexes,
                    disps, held):
        """The properties of ``Mshr._add_checks`` with W (waiters counted when W writes) and
        the cursor (the next waiter in the cursor, not in ``head``), plus the deep structures':
        the free list holds exactly the FREE entries no W writes, each offer FIFO exactly
        its channel's WAIT entries, its head a WAIT entry. Lists hold one item per port."""
        cfg, checks = self._cfg, self._checks
        n, P = cfg.mshr_entries, len(fires)
        for d in disps:
            protocol(m, checks, ~d.valid | ((d.payload.bytes >= 1)
                                            & (d.payload.bytes <= PAGE_BYTES)),
                     "read dispatched with a size outside 1..4096 bytes")
        # a slot is inside the table from its dispatch; an entry a W still writes is not FREE
        all_free = Cat(*[s == MshrState.FREE for s in state]).all() & (
            ~w_alloc[0] if P == 1 else ~Cat(*w_alloc).any())
        if P == 1:
            inside = check_waiters(m, checks, cfg.admission, fires[0], disps[0].payload.slot,
                                   pops[0], self.ret, all_free, "MSHR")
        else:
            inside = check_waiters(m, checks, cfg.admission, fires,
                                   [d.payload.slot for d in disps], pops, list(self.ret),
                                   all_free, "MSHR")
        waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
        for i in range(n):
            gone = tree_sum([pops[p] & (curs[p] == i) for p in range(P)]) if P > 1 else \
                pops[0] & (curs[0] == i)
            with m.If(w_new[i]):
                m.d.sync += waiters[i].eq(1)
            with m.Else():
                m.d.sync += waiters[i].eq(waiters[i] + merge_en[i] - gone)
            free = (state[i] == MshrState.FREE) | drained[i]
            invariant(m, checks, ~drained[i] | (state[i] == MshrState.RETURN),
                      f"MSHR entry {i}: drained outside RETURN")
            invariant(m, checks, free == (waiters[i] == 0),
                      f"MSHR entry {i}: FREE exactly when its waiter list is empty")
            # DP7: the cursor holds the next waiter of the entry it drains
            first = head[i]
            for regs in regss:
                first = Mux(regs["locked"] & (regs["lock_index"] == i), regs["lk_head"], first)
            invariant(m, checks, free | ((first == tail[i]) == (waiters[i] == 1)),
                      f"MSHR entry {i}: next waiter == tail exactly when one waiter is left")
            for j in range(i + 1, n) if cfg.mshr_merge else ():
                invariant(m, checks, ~(mergeable[i] & mergeable[j] & (page[i] == page[j])),
                          f"MSHR entries {i} and {j} are both mergeable for one page")
        # what the registered events imply (DP1, DP6), stated so that the properties are
        # inductive (docs/formal.md): W writes a FREE entry, an issue applies to a QUEUED
        # entry, a completion to an ISSUED one whose issue has applied
        for i in range(n):
            invariant(m, checks, ~w_new[i] | (state[i] == MshrState.FREE),
                      f"MSHR entry {i}: W writes an entry that is not FREE (DP1)")
            invariant(m, checks, ~issue_qs[i] | (state[i] == MshrState.QUEUED),
                      f"MSHR entry {i}: a registered issue of an entry not QUEUED (DP6)")
            invariant(m, checks, ~done_qs[i] | ((state[i] == MshrState.ISSUED) & ~issue_qs[i]),
                      f"MSHR entry {i}: a registered completion of an entry not ISSUED (DP6)")
        states = Array(state)
        issue_q, done_q = Array(issue_qs), Array(done_qs)
        for c in range(len(self.issue)):
            ev, done = self.issue[c], self.done[c]
            # one issue per QUEUED entry: it is QUEUED until its issue applies (DP6)
            protocol(m, checks,
                     ~ev.valid | ((ev.index < n) & (states[ev.index] == MshrState.QUEUED)
                                  & ~issue_q[ev.index]),
                     f"issue[{c}] names an MSHR entry that is not QUEUED")
            # DP6: ISSUED from td + 2; a completion in td + 1 would find its issue pending;
            # one completion per entry
            protocol(m, checks,
                     ~done.valid | ((done.index < n) & ((states[done.index] == MshrState.ISSUED)
                                                        | issue_q[done.index])
                                    & ~done_q[done.index]),
                     f"done[{c}] names an MSHR entry that is not ISSUED")
        for ev in ([self.launched] if P == 1 else list(self.launched)):
            protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                     "launched names an MSHR entry with waiters left to take")
        cap = cfg.admission * PAGE_BYTES
        for i in range(n):
            for p in range(P):
                invariant(m, checks, ~merge_en_p[p][i] | (nbytes[i] + w_d[p].bytes <= cap),
                          f"MSHR entry {i}: byte count overflows")
        # DP4: the free list holds the FREE entries that no W is writing
        free_now = [(state[i] == MshrState.FREE) & ~w_new[i] for i in range(n)]
        invariant(m, checks, free_count == tree_sum(free_now),
                  "the MSHR free list's count differs from the FREE entries (DP4)")
        if P == 1:
            invariant(m, checks, ~any_free | Array(free_now)[free_index],
                      "the MSHR free list's head is not a FREE entry (DP4)")
        else:
            for p in range(P):
                invariant(m, checks, ~fires[p] | self.disp_hit[p]
                          | Array(free_now)[free_indexes[p]],
                          f"port {p}: the MSHR free list's head is not a FREE entry (DP4)")
                for q in range(p):
                    invariant(m, checks, ~(fires[p] & ~self.disp_hit[p] & fires[q]
                                           & ~self.disp_hit[q])
                              | (free_indexes[p] != free_indexes[q]),
                              f"ports {q} and {p} allocated one MSHR entry (DP4)")
        # DP2: each channel's offer FIFO holds its WAIT entries; the head is one of them
        for c, count in enumerate(fifo_count):
            invariant(m, checks, (count == 0) | (states[enq_index[c]] == MshrState.WAIT),
                      f"channel {c}: the MSHR offer FIFO's head is not a WAIT entry (DP2)")
        if fifo_count:
            invariant(m, checks, tree_sum(fifo_count) == tree_sum([s == MshrState.WAIT
                                                                   for s in state]),
                      "the MSHR offer FIFOs hold other than the WAIT entries (DP2)")
        for c, (hv, hi) in enumerate(held):   # DP2a: OR_c holds a WAIT entry
            invariant(m, checks, ~hv | (states[hi] == MshrState.WAIT),
                      f"channel {c}: the MSHR offer register holds a non-WAIT entry (DP2a)")
        cover(m, checks, Cat(*merge_en).any(), "a read merges (MSHR hit)")
        cover(m, checks, Cat(*[d.valid & ~d.ready for d in disps]).any() if P > 1 else
              disps[0].valid & ~disps[0].ready, "a read stalls: no free entry")
        for st in (MshrState.QUEUED, MshrState.ISSUED, MshrState.RETURN):
            cover(m, checks, Cat(*[s == st for s in state]).any(), f"an entry in {st.name}")
        for p, regs in enumerate(regss):
            cover(m, checks, regs["locked"] & ~pops[p],
                  "the cursor keeps its entry without a handshake")
            ret = self.ret if P == 1 else self.ret[p]
            cover(m, checks, pops[p] & ~ret.payload.last, "a merged waiter is answered")
            cover(m, checks, regs["v1"] & regs["v2"], "C1 holds an entry while C2 holds another")
        if P > 1:
            cover(m, checks, Cat(*[f & ~self.disp_hit[p] for p, f in enumerate(fires)]).all(),
                  "every port allocates an MSHR entry in one cycle (DP4)")
        return inside, waiters
