"""Read MSHR table: page-keyed miss entries with per-request waiter lists.

Implements docs/history.md §4.2 (read dispatch, steps 2-3), §4.3 (read MSHR entries),
the MSHR side of §6 (enqueue candidates) and of §8 (responses in waiter-list order);
sources.md R1, R2 (waiter lists as linked lists in a memory of request slots).
"""

from __future__ import annotations

__all__ = ["Mshr", "MshrState", "disp_layout"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol
from hbfsim.rtl.layouts import (EntryKind, Widths, done_layout, event_layout, queue_op_layout,
                                ret_layout, target_layout)
from hbfsim.rtl.entry_table import check_waiters, drain_waiters, grant_free, offer_enqueues
from hbfsim.rtl.logic import lowest_set, named, select, tree_sum
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
    """Read MSHR table of ``mshr_entries`` entries.

    A read dispatched on ``disp`` merges into the mergeable (WAIT, QUEUED or ISSUED) entry of
    its page, joining the tail of that entry's waiter list (an MSHR hit), or allocates the
    lowest FREE entry in WAIT; with neither, ``disp.ready`` is low and the read stalls. With
    ``mshr_merge = false`` every read allocates.
    A WAIT entry is *ready* in demand mode, or once its byte count reaches
    ``read_agg_threshold_bytes`` or ``read_agg_window_ticks`` cycles have passed since its
    allocation; per channel the lowest-index ready entry is offered on ``enq[c]`` and moves
    to QUEUED when taken. ``issue[c]`` moves it to ISSUED, ``done[c]`` to RETURN (the flags
    are kept for every waiter). ``ret`` offers the head waiter of the entry being drained:
    the one locked by an earlier choice, else the lowest-index entry in RETURN. The entry is
    FREE from the cycle after its last waiter's handshake.

    Under contract 2 (v2 §4.3, §8) a handshake on ``ret`` is the response stage R taking the
    waiter; an entry whose waiters have all been taken stays in RETURN (``drained``, no
    longer offered) until ``launched`` names it: FREE from the cycle after its last
    waiter's launch.

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
        table), byte counts do not overflow; events name entries in the right state.
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.
    ports : int
        1, or ``P = channels`` in the channel shape of contract 2 (v2 §4.2.3, §8): then
        ``disp``, ``disp_index``, ``disp_match``, ``ret`` and ``launched`` are arrays of
        ``P`` (one per request / response port), ``disp_hit``, ``ret_sel`` and
        ``ret_locked`` ``P``-bit vectors. Each port merges on its own; the ports that
        allocate take FREE entries by :func:`~hbfsim.rtl.entry_table.grant_free` (the k-th
        lowest free entry to the k-th port from the pool's pointer); response port ``p``
        drains the RETURN entries of channel ``p``.

    Members
    -------
    disp : ``In(stream.Signature(disp_layout))``
        Read dispatch from M: page, its mapping, request bytes and admission slot.
    disp_hit : ``Out(1)``
        The read on ``disp`` merges into an existing entry (valid with ``disp.valid``).
    disp_index : ``Out(range(mshr_entries))``
        The entry it merges into or allocates.
    enq : ``Out(stream.Signature(queue_op_layout)).array(channels)``
        Per channel, the lowest-index ready WAIT entry of that channel (§6).
    issue : ``In(event_layout).array(channels)``
        The channel issued the READ of an entry (QUEUED -> ISSUED).
    done : ``In(done_layout).array(channels)``
        The channel delivered the completion of an entry (ISSUED -> RETURN).
    ret : ``Out(stream.Signature(ret_layout))``
        Head waiter of the entry being drained; a handshake pops it.
    ret_sel : ``In(1)``
        The response arbiter chose this table in this cycle: the offered entry stays
        chosen until its list is empty (§8). Must be high while ``ret_locked``.
    ret_locked : ``Out(1)``
        An entry is chosen and partly drained (or was chosen without a handshake).
    tags : ``Out(ArrayLayout(page, mshr_entries))``, ``pending`` : ``Out(mshr_entries)``
        Page of every entry and whether it is in WAIT, QUEUED or ISSUED, for the write
        buffer's flush rule (§4.4).
    launched : ``In(event_layout)``
        Contract 2 only: the last waiter of the named entry was launched (v2 §8).
    disp_match : ``In(mshr_entries)``
        Contract 2 only: M's registered match vector (v2 §4.2, the lookup L of the request
        on ``disp``): bit ``i`` when entry ``i`` held the page at the lookup or was
        allocated for it since. The table qualifies it (kept only while the entry is
        mergeable) instead of comparing pages; with ``mshr_merge = false`` it is unused.
    w_entry : ``Out(mshr_entries)``
        ``pipeline = "deep"`` only (docs/timing-contract.md DP1): the entry the W
        register writes in this cycle (one-hot; M's allocation of the last cycle), for the
        controller's forwarding into M's match vector. Under deep ``tags`` and ``pending``
        include that entry, the offers leave per channel in allocation order (DP2), free
        entries are allocated from a free list (DP4), issue and completion take effect a
        cycle later (DP6) and ``ret`` is fed by C1 / C2 / a cursor (DP7):
        :mod:`hbfsim.rtl.mshr_deep`.
    w_match : ``In(1)``
        ``pipeline = "deep"`` only: W's entry was allocated for the page of the read on
        ``disp`` (the controller's flag, registered with M's load). Under deep
        ``disp_match`` is M's registered vector without W's entry; the table adds W's entry
        itself, and its hit is ``w_match`` ORed after the entries' hit tree (from registers
        only).
        In the channel shape (``ports = P``) under deep, ``w_entry`` is an array of ``P``
        (each port's W) and ``w_match`` a ``P``-bit vector (each port's flag), and
        :mod:`hbfsim.rtl.mshr_deep` elaborates the table with ``P`` W registers, a free
        list with ``P`` heads (DP4) and ``C1`` / ``C2`` / a cursor per response port (DP7).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=(),
                 ports: int = 1):
        self._cfg = cfg
        self._w = w = Widths.of(cfg)
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._ports = P = ports
        n, c = cfg.mshr_entries, cfg.channels
        v2 = {"launched": In(event_layout(w.mshr_index)),
              "disp_match": In(n)} if cfg.contract == 2 else {}
        if getattr(cfg, "pipeline", "standard") == "deep":   # DP1: W's allocation, for M
            v2["w_entry"] = Out(n)
            v2["w_match"] = In(1)
        if P > 1:   # the channel shape (v2 §4.2.3, §8): one of each per port
            deep = {"w_entry": Out(n).array(P), "w_match": In(P)} if "w_entry" in v2 else {}
            super().__init__(deep | {
                "launched": In(event_layout(w.mshr_index)).array(P),
                "disp_match": In(n).array(P),
                "disp": In(stream.Signature(disp_layout(w))).array(P),
                "disp_hit": Out(P),
                "disp_index": Out(range(max(2, n))).array(P),
                "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
                "issue": In(event_layout(w.mshr_index)).array(c * max(1, w.planes)),
                "done": In(done_layout(w.mshr_index)).array(c * max(1, w.planes)),
                "ret": Out(stream.Signature(ret_layout(w, w.mshr_index))).array(P),
                "ret_sel": In(P),
                "ret_locked": Out(P),
                "tags": Out(data.ArrayLayout(unsigned(w.page), n)),
                "pending": Out(n),
            })
            return
        super().__init__(v2 | {
            "disp": In(stream.Signature(disp_layout(w))),
            "disp_hit": Out(1),
            "disp_index": Out(range(max(2, n))),
            "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
            "issue": In(event_layout(w.mshr_index)).array(c * max(1, w.planes)),
            "done": In(done_layout(w.mshr_index)).array(c * max(1, w.planes)),
            "ret": Out(stream.Signature(ret_layout(w, w.mshr_index))),
            "ret_sel": In(1),
            "ret_locked": Out(1),
            "tags": Out(data.ArrayLayout(unsigned(w.page), n)),
            "pending": Out(n),
        })

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def elaborate(self, platform):
        if getattr(self._cfg, "pipeline", "standard") == "deep":
            from hbfsim.rtl.mshr_deep import elaborate_deep

            return elaborate_deep(self)
        m = Module()
        cfg, w = self._cfg, self._w
        n, channels = cfg.mshr_entries, cfg.channels
        aggregation = cfg.read_mode == "aggregation"
        window = cfg.read_agg_window_ticks

        state = [Signal(MshrState, name=f"state{i}") for i in range(n)]
        page = [Signal(w.page, name=f"page{i}") for i in range(n)]
        target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
        nbytes = [Signal(range(cfg.admission * PAGE_BYTES + 1), name=f"bytes{i}")
                  for i in range(n)]
        head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
        tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
        buffer_hit = [Signal(name=f"buffer_hit{i}") for i in range(n)]
        error = [Signal(name=f"error{i}") for i in range(n)]
        # Cycles since allocation, saturating at the window (aggregation only, §4.3).
        age = [Signal(range(window + 1), name=f"age{i}") for i in range(n)] if aggregation else []

        # Successor of each request slot in its entry's waiter list.
        m.submodules.next_slot = next_slot = memory.Memory(
            shape=unsigned(w.slot), depth=cfg.admission, init=[])
        P = self._ports
        if P > 1:   # one merge and one response port per host channel (v2 §14)
            link_wrs = [next_slot.write_port() for _ in range(P)]
            link_rds = [next_slot.read_port(domain="comb") for _ in range(P)]
        else:
            link_wr = next_slot.write_port()
            link_rd = next_slot.read_port(domain="comb")

        # ---- dispatch from M: merge (MSHR hit) or allocate the lowest free entry (§4.2) ----
        mergeable = [named(m, (s == MshrState.WAIT) | (s == MshrState.QUEUED)
                           | (s == MshrState.ISSUED), f"mergeable{i}")
                     for i, s in enumerate(state)]
        joinable = mergeable
        if "mshr-merge-return" in self._mutations:
            joinable = [mergeable[i] | (state[i] == MshrState.RETURN) for i in range(n)]
        if P > 1:
            self._elaborate_ports(m, state, page, target, nbytes, head, tail, buffer_hit,
                                  error, age, link_wrs, link_rds, joinable, mergeable)
            return m
        if cfg.mshr_merge and cfg.contract == 2:
            # v2 §4.2: the lookup register, qualified by the entry's state (no page compare)
            match = [joinable[i] & self.disp_match[i] for i in range(n)]
        elif cfg.mshr_merge:
            match = [joinable[i] & (page[i] == self.disp.payload.page) for i in range(n)]
        else:  # merging off: every read allocates its own entry (§4.2 read step 3)
            match = [Const(0, 1)] * n
        hit, hit_index = lowest_set(m, match, "hit_index")
        any_free, free_index = lowest_set(m, [s == MshrState.FREE for s in state], "free_index")
        m.d.comb += [
            self.disp.ready.eq(hit | any_free),
            self.disp_hit.eq(hit),
            self.disp_index.eq(Mux(hit, hit_index, free_index)),
        ]
        fire = named(m, self.disp.valid & self.disp.ready, "fire")
        merge = named(m, fire & hit, "merge")
        allocate = named(m, fire & ~hit, "allocate")
        m.d.comb += [
            link_wr.addr.eq(select(m, tail, hit_index, "hit_tail")),
            link_wr.data.eq(self.disp.payload.slot),
            link_wr.en.eq(0 if "mshr-dropped-waiter" in self._mutations else merge),
        ]
        for i in range(n):
            m.d.comb += [self.tags[i].eq(page[i]), self.pending[i].eq(mergeable[i])]

        # ---- readiness and the per-channel enqueue candidates (§4.3, §6) ----
        if not aggregation:
            ready = [s == MshrState.WAIT for s in state]
        else:
            ready = [named(m, (state[i] == MshrState.WAIT)
                           & ((nbytes[i] >= cfg.read_agg_threshold_bytes) | (age[i] >= window)),
                           f"ready{i}")
                     for i in range(n)]
        enq_fire, enq_index = offer_enqueues(m, self.enq, ready, target, EntryKind.MSHR)

        # ---- responses: drain one entry's waiter list in order (§8) ----
        v2 = cfg.contract == 2
        # v2 §8: every waiter of the entry has been taken into R; FREE after the last launch
        drained = [Signal(name=f"drained{i}") for i in range(n)] if v2 else [Const(0)] * n
        pop, cur, last, locked = drain_waiters(
            m, self.ret, self.ret_sel, self.ret_locked,
            [(s == MshrState.RETURN) & ~drained[i] for i, s in enumerate(state)]
            if v2 else [s == MshrState.RETURN for s in state],
            head, tail, target, error, link_rd, buffer_hit=buffer_hit, taken=v2)

        # ---- per-entry next state; the sources of each field exclude each other ----
        for i in range(n):
            with m.If(allocate & (free_index == i)):
                m.d.sync += [
                    state[i].eq(MshrState.WAIT),
                    page[i].eq(self.disp.payload.page),
                    target[i].eq(self.disp.payload.target),
                    nbytes[i].eq(self.disp.payload.bytes),
                    head[i].eq(self.disp.payload.slot),
                    tail[i].eq(self.disp.payload.slot),
                    buffer_hit[i].eq(0),
                    error[i].eq(0),
                ]
                if aggregation:
                    m.d.sync += age[i].eq(min(1, window))
            with m.If(merge & (hit_index == i)):
                m.d.sync += [
                    nbytes[i].eq(nbytes[i] + self.disp.payload.bytes),
                    tail[i].eq(self.disp.payload.slot),
                ]
            if aggregation:
                with m.If((state[i] == MshrState.WAIT) & (age[i] != window)):
                    m.d.sync += age[i].eq(age[i] + 1)
            # one issue and one done port per channel; with multi-plane commands one per
            # plane of a channel's megaplane (several entries per cycle, MP7)
            lanes = len(self.issue) // channels
            for c in range(channels):
                with m.If(enq_fire[c] & (enq_index[c] == i)):
                    m.d.sync += state[i].eq(MshrState.QUEUED)
                for k in range(c * lanes, (c + 1) * lanes):
                    with m.If(self.issue[k].valid & (self.issue[k].index == i)):
                        m.d.sync += state[i].eq(MshrState.ISSUED)
                    with m.If(self.done[k].valid & (self.done[k].index == i)):
                        m.d.sync += [
                            state[i].eq(MshrState.RETURN),
                            buffer_hit[i].eq(self.done[k].buffer_hit),
                            error[i].eq(self.done[k].error),
                        ]
            with m.If(pop & (cur == i)):
                with m.If(last):
                    m.d.sync += drained[i].eq(1) if v2 else state[i].eq(MshrState.FREE)
                with m.Else():
                    m.d.sync += head[i].eq(link_rd.data)
            if v2:
                with m.If(self.launched.valid & (self.launched.index == i)):
                    m.d.sync += [state[i].eq(MshrState.FREE), drained[i].eq(0)]

        if self._checks:
            self._add_checks(m, state, page, mergeable, head, tail, allocate, merge, hit_index,
                             free_index, pop, cur, locked, nbytes, fire, ready, drained)
        return m

    def _elaborate_ports(self, m, state, page, target, nbytes, head, tail, buffer_hit, error,
                         age, link_wrs, link_rds, joinable, mergeable):
        """The rest of :meth:`elaborate` in the channel shape (contract 2, ``P`` ports):
        a merge per port, allocation by v2 §4.2.3, a response port per channel (v2 §8)."""
        cfg, P = self._cfg, self._ports
        n, channels = cfg.mshr_entries, cfg.channels
        aggregation = cfg.read_mode == "aggregation"
        window = cfg.read_agg_window_ticks
        disps = list(self.disp)
        # ---- dispatch: per port a merge into its page's entry, else an allocation ----
        hits, hit_indexes = [], []
        for p, d in enumerate(disps):
            if cfg.mshr_merge:   # v2 §4.2: M_p's lookup register, qualified by the state
                match = [joinable[i] & self.disp_match[p][i] for i in range(n)]
            else:
                match = [Const(0, 1)] * n
            hit, hit_index = lowest_set(m, match, f"hit_index_p{p}")
            hits.append(named(m, hit, f"hit_p{p}"))
            hit_indexes.append(hit_index)
        free = [named(m, s == MshrState.FREE, f"free{i}") for i, s in enumerate(state)]
        want = [named(m, d.valid & ~hits[p], f"want_p{p}") for p, d in enumerate(disps)]
        grants, granted, alloc_index = grant_free(m, free, want, "alloc")
        fires, merges = [], []
        for p, d in enumerate(disps):
            m.d.comb += [
                d.ready.eq(hits[p] | granted[p]),
                self.disp_hit[p].eq(hits[p]),
                self.disp_index[p].eq(Mux(hits[p], hit_indexes[p], alloc_index[p])),
            ]
            fires.append(named(m, d.valid & d.ready, f"fire_p{p}"))
            merge = named(m, fires[p] & hits[p], f"merge_p{p}")
            merges.append(merge)
            wr = link_wrs[p]
            m.d.comb += [wr.addr.eq(select(m, tail, hit_indexes[p], f"hit_tail_p{p}")),
                         wr.data.eq(d.payload.slot),
                         wr.en.eq(0 if "mshr-dropped-waiter" in self._mutations else merge)]
        for i in range(n):
            m.d.comb += [self.tags[i].eq(page[i]), self.pending[i].eq(mergeable[i])]

        # ---- readiness and the per-channel enqueue candidates (§4.3, §6) ----
        if not aggregation:
            ready = [s == MshrState.WAIT for s in state]
        else:
            ready = [named(m, (state[i] == MshrState.WAIT)
                           & ((nbytes[i] >= cfg.read_agg_threshold_bytes) | (age[i] >= window)),
                           f"ready{i}")
                     for i in range(n)]
        enq_fire, enq_index = offer_enqueues(m, self.enq, ready, target, EntryKind.MSHR)

        # ---- responses: port p drains the RETURN entries of channel p (v2 §8) ----
        drained = [Signal(name=f"drained{i}") for i in range(n)]
        pops, curs, lasts = [], [], []
        for p in range(P):
            pop, cur, last, _locked = drain_waiters(
                m, self.ret[p], self.ret_sel[p], self.ret_locked[p],
                [(s == MshrState.RETURN) & ~drained[i] & (target[i].channel == p)
                 for i, s in enumerate(state)],
                head, tail, target, error, link_rds[p], buffer_hit=buffer_hit, taken=True,
                prefix=f"p{p}_")
            pops.append(pop)
            curs.append(cur)
            lasts.append(last)

        # ---- per-entry next state; the sources of each field exclude each other ----
        lanes = len(self.issue) // channels
        for i in range(n):
            for p, d in enumerate(disps):
                with m.If(grants[i][p]):
                    m.d.sync += [
                        state[i].eq(MshrState.WAIT),
                        page[i].eq(d.payload.page),
                        target[i].eq(d.payload.target),
                        nbytes[i].eq(d.payload.bytes),
                        head[i].eq(d.payload.slot),
                        tail[i].eq(d.payload.slot),
                        buffer_hit[i].eq(0),
                        error[i].eq(0),
                    ]
                    if aggregation:
                        m.d.sync += age[i].eq(min(1, window))
                # a page maps to one read port: at most one port merges into an entry
                with m.If(merges[p] & (hit_indexes[p] == i)):
                    m.d.sync += [nbytes[i].eq(nbytes[i] + d.payload.bytes),
                                 tail[i].eq(d.payload.slot)]
            if aggregation:
                with m.If((state[i] == MshrState.WAIT) & (age[i] != window)):
                    m.d.sync += age[i].eq(age[i] + 1)
            for c in range(channels):
                with m.If(enq_fire[c] & (enq_index[c] == i)):
                    m.d.sync += state[i].eq(MshrState.QUEUED)
                for k in range(c * lanes, (c + 1) * lanes):
                    with m.If(self.issue[k].valid & (self.issue[k].index == i)):
                        m.d.sync += state[i].eq(MshrState.ISSUED)
                    with m.If(self.done[k].valid & (self.done[k].index == i)):
                        m.d.sync += [
                            state[i].eq(MshrState.RETURN),
                            buffer_hit[i].eq(self.done[k].buffer_hit),
                            error[i].eq(self.done[k].error),
                        ]
            # an entry's waiters all leave through its channel's port (v2 §8)
            for p in range(P):
                with m.If(pops[p] & (curs[p] == i)):
                    with m.If(lasts[p]):
                        m.d.sync += drained[i].eq(1)
                    with m.Else():
                        m.d.sync += head[i].eq(link_rds[p].data)
                with m.If(self.launched[p].valid & (self.launched[p].index == i)):
                    m.d.sync += [state[i].eq(MshrState.FREE), drained[i].eq(0)]

        if self._checks:
            self._add_port_checks(m, state, page, mergeable, head, tail, grants, merges,
                                  hit_indexes, pops, curs, nbytes, fires, drained, granted,
                                  alloc_index, free, want)

    def _add_port_checks(self, m, state, page, mergeable, head, tail, grants, merges,
                         hit_indexes, pops, curs, nbytes, fires, drained, granted,
                         alloc_index, free, want):
        """The properties of :meth:`_add_checks` with ``P`` ports, and v2 §18 step 6's
        allocation properties: one-hot grants, only to FREE entries, the k-th free rule."""
        cfg, checks, P = self._cfg, self._checks, self._ports
        n = cfg.mshr_entries
        disps = list(self.disp)
        for p, d in enumerate(disps):
            protocol(m, checks, ~d.valid | ((d.payload.bytes >= 1)
                                            & (d.payload.bytes <= PAGE_BYTES)),
                     f"port {p}: read dispatched with a size outside 1..4096 bytes")
        check_waiters(m, checks, cfg.admission, fires, [d.payload.slot for d in disps], pops,
                      list(self.ret), Cat(*[s == MshrState.FREE for s in state]).all(), "MSHR")
        waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
        for i in range(n):
            add = Const(0, 1)
            for p in range(P):
                add = add | (merges[p] & (hit_indexes[p] == i))
            gone = Const(0, 1)
            for p in range(P):
                gone = gone | (pops[p] & (curs[p] == i))
            with m.If(grants[i].any()):
                m.d.sync += waiters[i].eq(1)
            with m.Else():
                m.d.sync += waiters[i].eq(waiters[i] + add - gone)
            f = (state[i] == MshrState.FREE) | drained[i]
            invariant(m, checks, ~drained[i] | (state[i] == MshrState.RETURN),
                      f"MSHR entry {i}: drained outside RETURN")
            invariant(m, checks, f == (waiters[i] == 0),
                      f"MSHR entry {i}: FREE exactly when its waiter list is empty")
            invariant(m, checks, f | ((head[i] == tail[i]) == (waiters[i] == 1)),
                      f"MSHR entry {i}: head == tail exactly when one waiter is left")
            # v2 §4.2.3 (S1): a grant is one-hot and goes to a FREE entry
            g = grants[i]
            invariant(m, checks, (g & (g - 1)) == 0,
                      f"MSHR entry {i} granted to two ports in one cycle")
            invariant(m, checks, ~g.any() | free[i], f"MSHR entry {i} granted while not FREE")
            for j in range(i + 1, n if cfg.mshr_merge else 0):
                invariant(m, checks, ~(mergeable[i] & mergeable[j] & (page[i] == page[j])),
                          f"MSHR entries {i} and {j} are both mergeable for one page")
        # the k-th free rule: the granted ports hold the lowest free entries, as many as
        # min(wanting ports, free entries)
        n_free, n_want, n_got = tree_sum(free), tree_sum(want), tree_sum(granted)
        invariant(m, checks, n_got == Mux(n_want < n_free, n_want, n_free),
                  "MSHR allocation: granted ports differ from min(wanting, free) (v2 §4.2.3)")
        states = Array(state)
        for c in range(len(self.issue)):
            ev, done = self.issue[c], self.done[c]
            protocol(m, checks,
                     ~ev.valid | ((ev.index < n) & (states[ev.index] == MshrState.QUEUED)),
                     f"issue[{c}] names an MSHR entry that is not QUEUED")
            protocol(m, checks,
                     ~done.valid | ((done.index < n) & (states[done.index] == MshrState.ISSUED)),
                     f"done[{c}] names an MSHR entry that is not ISSUED")
        for p in range(P):
            ev = self.launched[p]
            protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                     f"launched[{p}] names an MSHR entry with waiters left to take")
        cap = cfg.admission * PAGE_BYTES
        for i in range(n):
            for p, d in enumerate(disps):
                invariant(m, checks, ~(merges[p] & (hit_indexes[p] == i))
                          | (nbytes[i] + d.payload.bytes <= cap),
                          f"MSHR entry {i}: byte count overflows")
        cover(m, checks, Cat(*granted).all(), "every port allocates an MSHR entry in a cycle")
        cover(m, checks, Cat(*[w & ~g for w, g in zip(want, granted)]).any(),
              "a read stalls: no free entry for its rank")

    def _add_checks(self, m, state, page, mergeable, head, tail, allocate, merge, hit_index,
                    free_index, pop, cur, locked, nbytes, fire, ready, drained):
        cfg, checks = self._cfg, self._checks
        v2 = cfg.contract == 2
        n = cfg.mshr_entries
        d = self.disp.payload
        protocol(m, checks, ~self.disp.valid | ((d.bytes >= 1) & (d.bytes <= PAGE_BYTES)),
                 "read dispatched with a size outside 1..4096 bytes")
        check_waiters(m, checks, cfg.admission, fire, d.slot, pop, self.ret,
                      Cat(*[s == MshrState.FREE for s in state]).all(), "MSHR")
        # Waiters per entry: simulation-only bookkeeping for the leak checks.
        waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
        for i in range(n):
            with m.If(allocate & (free_index == i)):
                m.d.sync += waiters[i].eq(1)
            with m.If(merge & (hit_index == i)):
                m.d.sync += waiters[i].eq(waiters[i] + 1)
            with m.If(pop & (cur == i)):
                m.d.sync += waiters[i].eq(waiters[i] - 1)
            free = state[i] == MshrState.FREE
            if v2:   # v2 §8: all waiters taken into R, the last not yet launched
                free = free | drained[i]
                invariant(m, checks, ~drained[i] | (state[i] == MshrState.RETURN),
                          f"MSHR entry {i}: drained outside RETURN")
            invariant(m, checks, free == (waiters[i] == 0),
                      f"MSHR entry {i}: FREE exactly when its waiter list is empty")
            invariant(m, checks, free | ((head[i] == tail[i]) == (waiters[i] == 1)),
                      f"MSHR entry {i}: head == tail exactly when one waiter is left")
            for j in range(i + 1, n if cfg.mshr_merge else 0):
                invariant(m, checks, ~(mergeable[i] & mergeable[j] & (page[i] == page[j])),
                          f"MSHR entries {i} and {j} are both mergeable for one page")
        states = Array(state)
        for c in range(len(self.issue)):
            ev, done = self.issue[c], self.done[c]
            protocol(m, checks,
                     ~ev.valid | ((ev.index < n) & (states[ev.index] == MshrState.QUEUED)),
                     f"issue[{c}] names an MSHR entry that is not QUEUED")
            protocol(m, checks,
                     ~done.valid | ((done.index < n) & (states[done.index] == MshrState.ISSUED)),
                     f"done[{c}] names an MSHR entry that is not ISSUED")
        if v2:
            ev = self.launched
            protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                     "launched names an MSHR entry with waiters left to take")
        else:
            protocol(m, checks, ~locked | self.ret_sel,
                     "ret_sel dropped while an MSHR entry was being drained")
        cap = cfg.admission * PAGE_BYTES
        for i in range(n):
            invariant(m, checks, ~(merge & (hit_index == i)) | (nbytes[i] + d.bytes <= cap),
                      f"MSHR entry {i}: byte count overflows")
        cover(m, checks, merge, "a read merges (MSHR hit)")
        cover(m, checks, self.disp.valid & ~self.disp.ready, "a read stalls: no free entry")
        for st in (MshrState.QUEUED, MshrState.ISSUED, MshrState.RETURN):
            cover(m, checks, Cat(*[s == st for s in state]).any(), f"an entry in {st.name}")
        cover(m, checks, locked & ~pop, "a chosen entry keeps the port without a handshake")
        cover(m, checks, pop & ~self.ret.payload.last, "a merged waiter is answered")
        if cfg.read_mode == "aggregation":
            for i in range(n):
                cover(m, checks, ready[i] & (nbytes[i] >= cfg.read_agg_threshold_bytes),
                      f"MSHR entry {i} ready by the byte threshold")
