"""The write buffer in the channel shape of contract 2: a merge or an allocation per port,
one pressure victim per cycle, a read-after-write probe per port, a response port per
channel.

Implements docs/timing-contract.md §4.2.3 (allocation from the shared pool by several
ports), §4.2.4 (a page held by a read and a write port in one cycle under a partition
scheduler) and §8 (R per port) for :class:`~hbfsim.rtl.write_buffer.WriteBuffer`, whose
:meth:`~hbfsim.rtl.write_buffer.WriteBuffer.elaborate` calls :func:`elaborate_ports` when
the block has more than one port. The stack shape and the checks both shapes share stay in
``write_buffer.py``.
"""

from __future__ import annotations

__all__ = ["elaborate_ports"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.checks import cover, invariant, protocol
from hbfsim.rtl.entry_table import check_waiters, drain_waiters, grant_free, offer_enqueues
from hbfsim.rtl.layouts import EntryKind, target_layout
from hbfsim.rtl.logic import at_least, lowest_set, named, select, tree_sum
from hbfsim.rtl.write_buffer import (FLUSH_CAUSES, FlushCause, WbState, _or_fields,
                                     count_flushes, sector_range)


def elaborate_ports(wb):
    """``WriteBuffer.elaborate`` in the channel shape (contract 2, ``P`` ports; v2 §4.2.3,
    §4.2.4, §8): a merge or an allocation per port, one pressure victim per cycle, a
    read-after-write probe per port, a response port per channel.

    Parameters
    ----------
    wb : WriteBuffer
        The block (its ``_ports`` is more than 1).

    Returns
    -------
    Module
    """
    m = Module()
    cfg, w, P = wb._cfg, wb._w, wb._ports
    n = cfg.write_buffer_entries
    strict = cfg.write_timeout_policy == "strict"
    sectors = PAGE_BYTES // wb._sector
    shift = wb._sector.bit_length() - 1
    deadline = cfg.write_deadline_ticks
    mut = wb._mutations
    disps = list(wb.disp)

    state = [Signal(WbState, name=f"state{i}") for i in range(n)]
    page = [Signal(w.page, name=f"page{i}") for i in range(n)]
    target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
    cov = [Signal(sectors, name=f"cov{i}") for i in range(n)]
    remain = [Signal(range(max(2, deadline)), name=f"remain{i}") for i in range(n)]
    cause = [Signal(FlushCause, name=f"cause{i}") for i in range(n)]
    pressure = [Signal(name=f"pressure{i}") for i in range(n)]
    older = [Signal(n, name=f"older{i}") for i in range(n)]
    head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
    tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
    error = [Signal(name=f"error{i}") for i in range(n)]

    m.submodules.next_slot = next_slot = memory.Memory(
        shape=unsigned(w.slot), depth=cfg.admission, init=[])
    link_wrs = [next_slot.write_port() for _ in range(P)]
    link_rds = [next_slot.read_port(domain="comb") for _ in range(P)]

    used = [named(m, s != WbState.FREE, f"used{i}") for i, s in enumerate(state)]
    is_open = [named(m, s == WbState.OPEN, f"open{i}") for i, s in enumerate(state)]
    full = [named(m, c.all(), f"full{i}") for i, c in enumerate(cov)]
    m.d.comb += [wb.tags[i].eq(page[i]) for i in range(n)]
    m.d.comb += [wb.in_use.eq(Cat(*used)), wb.is_open.eq(Cat(*is_open))]

    # ---- dispatch of a write per port: merge into its page's OPEN entry or allocate ----
    hits, hit_indexes = [], []
    for p in range(P):
        match = [is_open[i] & wb.disp_open[p][i] for i in range(n)]
        hit, hit_index = lowest_set(m, match, f"hit_index_p{p}")
        hits.append(named(m, hit, f"hit_p{p}"))
        hit_indexes.append(hit_index)
    want = [named(m, d.valid & ~hits[p], f"want_p{p}") for p, d in enumerate(disps)]
    grants, granted, alloc_index = grant_free(m, [~u for u in used], want, "alloc")
    fires, merges, allocs = [], [], []
    for p, d in enumerate(disps):
        m.d.comb += [
            d.ready.eq(hits[p] | granted[p]),
            wb.disp_merge[p].eq(hits[p]),
            wb.disp_index[p].eq(Mux(hits[p], hit_indexes[p], alloc_index[p])),
        ]
        fire = named(m, d.valid & d.ready, f"fire_p{p}")
        fires.append(fire)
        merges.append(named(m, fire & hits[p], f"merge_p{p}"))
        allocs.append(named(m, fire & ~hits[p], f"allocate_p{p}"))
        m.d.comb += [link_wrs[p].addr.eq(select(m, tail, hit_indexes[p], f"hit_tail_p{p}")),
                     link_wrs[p].data.eq(d.payload.slot),
                     link_wrs[p].en.eq(merges[p])]
    # Per entry, the one port that allocates it or merges into it in this cycle (a page
    # has one write port), and that write's sector mask: the byte range is selected
    # before the mask is decoded, so the coverage logic grows with the entries, not with
    # entries x ports (two thermometer decoders per entry)
    masks, sources = [], []
    for i in range(n):
        src = Cat(*[grants[i][p] | (merges[p] & (hit_indexes[p] == i)) for p in range(P)])
        src = named(m, src, f"src{i}")
        sources.append(src)
        invariant(m, wb._checks, (src & (src - 1)) == 0,
                  f"write-buffer entry {i} written by two ports in one cycle")
        lo = Signal(range(sectors), name=f"src_first{i}")
        hi_plus_1 = Signal(range(sectors + 1), name=f"hi_plus_1_e{i}")
        if wb._sectors_in:
            # each port's sectors decoded in its X stage and held in M_p (as the stack
            # shape's m_sectors): no adder between M's dispatch and the coverage
            m.d.comb += [lo.eq(_or_fields(src, [s.first for s in wb.disp_sectors])),
                         hi_plus_1.eq(_or_fields(src, [s.end for s in wb.disp_sectors]))]
        else:
            off = Signal(ceil_log2(PAGE_BYTES), name=f"src_offset{i}")
            nb = Signal(range(PAGE_BYTES + 1), name=f"src_bytes{i}")
            m.d.comb += [off.eq(_or_fields(src, [d.payload.offset for d in disps])),
                         nb.eq(_or_fields(src, [d.payload.bytes for d in disps]))]
            m.d.comb += [lo.eq(off >> shift), hi_plus_1.eq(((off + nb - 1) >> shift) + 1)]
        mask = Signal(sectors, name=f"mask_e{i}")
        m.d.comb += mask.eq(at_least(m, lo, sectors, f"from_lo_e{i}")
                            & ~at_least(m, hi_plus_1, sectors, f"from_hi_e{i}"))
        masks.append(mask)
    if wb._sectors_in and wb._checks:
        for p, d in enumerate(disps):
            ref_lo, ref_end = sector_range(m, d.payload.offset, d.payload.bytes, wb._sector,
                                           f"chk_sectors_p{p}")
            ds = wb.disp_sectors[p]
            protocol(m, wb._checks, ~d.valid | ((ds.first == ref_lo) & (ds.end == ref_end)),
                     f"port {p}: disp_sectors differs from the sectors of the write's byte "
                     "range")
    # a write stalls when it neither merges nor gets an entry for its rank (§4.2.3)
    stalled = named(m, Cat(*[d.valid & ~hits[p] & ~granted[p]
                             for p, d in enumerate(disps)]).any(), "stalled")

    # ---- flush triggers (§4.4 first bullet); a read-after-write probe per port ----
    probe_match = []
    for p in range(P):
        pm = [named(m, used[i] & wb.probe_used[p][i], f"probe_match{i}_p{p}")
              for i in range(n)]
        m.d.comb += wb.probe_block[p].eq(Cat(*pm).any())
        probe_match.append(pm)
    pressure_live = named(m, Cat(*[used[i] & pressure[i] for i in range(n)]).any(),
                          "pressure_live")
    oldest_open = [is_open[i] & ~(older[i] & Cat(*is_open)).any() for i in range(n)]
    remain_zero = [r == 0 for r in remain]
    triggers = []
    for i in range(n):
        raw = named(m, Cat(*[wb.probe[p].valid & probe_match[p][i] for p in range(P)]).any()
                    & is_open[i], f"raw{i}")
        # v2 §4.2 write step 2 (§19 question 9): an entry a read of another port flushes
        # with cause raw in this cycle (reads dispatch first, §4.2.4) is not the pressure
        # victim; none is chosen this cycle, as the golden model does
        # (model/controller_ports.py).
        victim = named(m, stalled & ~pressure_live & oldest_open[i] & ~raw, f"victim{i}")
        triggers.append((victim, [(full[i], FlushCause.FULL), (raw, FlushCause.RAW),
                                  (victim, FlushCause.PRESSURE),
                                  (remain_zero[i], FlushCause.DEADLINE),
                                  (wb.drain, FlushCause.DRAIN)]))

    # ---- FLUSH: strict errors and enqueue eligibility (§4.4), recorded sets (§16) ----
    blockers = [Signal(cfg.mshr_entries, name=f"blockers{i}") for i in range(n)]
    older_page = [Signal(n, name=f"older_page{i}") for i in range(n)]
    pend_now, used_now = Cat(*wb.mshr_pending), Cat(*used)
    blocker_live = [named(m, blockers[i] & pend_now, f"blocker_live{i}") for i in range(n)]
    older_live = [named(m, older_page[i] & used_now, f"older_live{i}") for i in range(n)]
    for i in range(n):
        with m.If(~grants[i].any()):
            m.d.sync += [blockers[i].eq(blocker_live[i]), older_page[i].eq(older_live[i])]
        for p in range(P):
            with m.If(grants[i][p]):
                # v2 §4.2.4: a read of the page dispatched in this cycle on another port
                # (disp_fwd) counts as earlier
                m.d.sync += [blockers[i].eq((wb.disp_pend[p] & pend_now)
                                            | wb.disp_fwd[p]),
                             older_page[i].eq(wb.probe_used[p] & used_now)]
    eligible, mshr_wait, strict_error, serialized = [], [], [], []
    for i in range(n):
        in_flush = state[i] == WbState.FLUSH
        same_page_older = older_live[i].any()
        mshr_busy = blocker_live[i].any()
        if wb._checks:   # v2 §18 step 4: the recorded sets equal v1's comparisons
            v1_older = Cat(*[older[i][j] & used[j] & (page[j] == page[i]) for j in range(n)])
            v1_busy = Cat(*[wb.mshr_pending[k] & (wb.mshr_tags[k] == page[i])
                            for k in range(cfg.mshr_entries)])
            invariant(m, wb._checks, ~used[i] | (older_live[i] == v1_older),
                      f"write-buffer entry {i}: the recorded older set differs from the "
                      "page comparisons (v2 §4.4)")
            invariant(m, wb._checks, ~used[i] | (blocker_live[i] == v1_busy),
                      f"write-buffer entry {i}: the recorded blocker set differs from the "
                      "MSHR page comparisons (v2 §4.4)")
        complete = full[i] if strict and "wb-strict-partial" not in mut else 1
        serialized.append(named(m, ~same_page_older, f"serialized{i}"))
        order_ok = 1 if "wb-w4-ignored" in mut else serialized[i]
        eligible.append(named(m, in_flush & complete & order_ok & ~mshr_busy,
                              f"eligible{i}"))
        mshr_wait.append(in_flush & mshr_busy)
        strict_error.append(in_flush & ~full[i] if strict else Const(0))
    if wb._checks:
        for p, d in enumerate(disps):
            fresh_used = Cat(*[used[j] & (page[j] == d.payload.page) for j in range(n)])
            fresh_pend = Cat(*[wb.mshr_pending[k] & (wb.mshr_tags[k] == d.payload.page)
                               for k in range(cfg.mshr_entries)])
            protocol(m, wb._checks, ~allocs[p]
                     | ((wb.probe_used[p] & used_now) == fresh_used),
                     f"port {p}: probe_used differs from the in-use entries of the page of "
                     "a write that allocates (v2 §4.2)")
            protocol(m, wb._checks, ~allocs[p]
                     | ((wb.disp_pend[p] & pend_now) == fresh_pend),
                     f"port {p}: disp_pend differs from the pending MSHR entries of the "
                     "page of a write that allocates (v2 §4.4)")
    enq_fire, enq_index = offer_enqueues(m, wb.enq, eligible, target, EntryKind.WBUF)

    # ---- responses: port p drains the RETURN entries of channel p (v2 §8) ----
    drained = [Signal(name=f"drained{i}") for i in range(n)]
    pops, curs, lasts = [], [], []
    for p in range(P):
        pop, cur, last, _locked = drain_waiters(
            m, wb.ret[p], wb.ret_sel[p], wb.ret_locked[p],
            [(s == WbState.RETURN) & ~drained[i] & (target[i].channel == p)
             for i, s in enumerate(state)],
            head, tail, target, error, link_rds[p], taken=True, prefix=f"p{p}_")
        pops.append(pop)
        curs.append(cur)
        lasts.append(last)

    m.d.comb += [
        wb.occupied.eq(tree_sum(used)),
        wb.programs_queued.eq(Cat(*[s == WbState.QUEUED for s in state]).any()),
    ]
    for i in range(n):
        m.d.comb += wb.cause[i].eq(cause[i])

    # ---- per-entry next state ----
    leaving = {why: [] for why in FLUSH_CAUSES}
    alloc_mask = Cat(*[g.any() for g in grants])
    lanes = len(wb.issue) // cfg.channels
    for i in range(n):
        allocated_here = grants[i].any()
        for p, d in enumerate(disps):
            with m.If(grants[i][p]):
                m.d.sync += [
                    state[i].eq(WbState.OPEN),
                    page[i].eq(d.payload.page),
                    target[i].eq(d.payload.target),
                    cov[i].eq(masks[i]),
                    remain[i].eq(deadline - 1),
                    cause[i].eq(FlushCause.NONE),
                    pressure[i].eq(0),
                    # entries allocated in the same cycle are older by index: the k-th
                    # port takes the k-th lowest entry, so index order is the order in
                    # which the golden model allocates them (its pressure order)
                    older[i].eq(Cat(*used) | (alloc_mask & ((1 << i) - 1))),
                    head[i].eq(d.payload.slot),
                    tail[i].eq(d.payload.slot),
                    error[i].eq(0),
                ]
        with m.If(~allocated_here & alloc_mask.any()):
            m.d.sync += older[i].eq(older[i] & ~alloc_mask)
        for p in range(P):
            # a page maps to one write port: at most one port merges into an entry
            with m.If(merges[p] & (hit_indexes[p] == i)):
                merged = masks[i] if "wb-coverage-overwrite" in mut else cov[i] | masks[i]
                m.d.sync += [cov[i].eq(merged), tail[i].eq(disps[p].payload.slot)]
        with m.If(~allocated_here & (remain[i] != 0)):
            m.d.sync += remain[i].eq(remain[i] - 1)

        victim, causes = triggers[i]
        with m.If(victim):
            m.d.sync += pressure[i].eq(1)
        earlier = Const(0)
        for cond, why in causes:
            leaving[why].append(is_open[i] & cond & ~earlier)
            earlier = earlier | cond
        with m.If(is_open[i]):
            for k, (cond, why) in enumerate(causes):
                with (m.If if k == 0 else m.Elif)(cond):
                    m.d.sync += [state[i].eq(WbState.FLUSH), cause[i].eq(why)]
        with m.If(strict_error[i]):
            m.d.sync += [state[i].eq(WbState.RETURN), error[i].eq(1)]
        for c in range(cfg.channels):
            with m.If(enq_fire[c] & (enq_index[c] == i)):
                m.d.sync += state[i].eq(WbState.QUEUED)
            for k in range(c * lanes, (c + 1) * lanes):
                with m.If(wb.issue[k].valid & (wb.issue[k].index == i)):
                    m.d.sync += state[i].eq(WbState.PROGRAM)
                with m.If(wb.done[k].valid & (wb.done[k].index == i)):
                    m.d.sync += [state[i].eq(WbState.RETURN),
                                 error[i].eq(wb.done[k].error)]
        for p in range(P):
            with m.If(pops[p] & (curs[p] == i)):
                with m.If(lasts[p]):
                    m.d.sync += drained[i].eq(1)
                with m.Else():
                    m.d.sync += head[i].eq(link_rds[p].data)
            with m.If(wb.launched[p].valid & (wb.launched[p].index == i)):
                m.d.sync += [state[i].eq(WbState.FREE), drained[i].eq(0)]

    count_flushes(m, leaving, wb.flushes, wb._checks)

    if wb._checks:
        _add_port_checks(wb, m, state, page, head, tail, grants, merges, hit_indexes,
                              pops, curs, cov, full, fires, leaving, stalled, strict_error,
                              mshr_wait, drained, granted, want, used, serialized, triggers)
    return m


def _add_port_checks(wb, m, state, page, head, tail, grants, merges, hit_indexes, pops,
                     curs, cov, full, fires, leaving, stalled, strict_error, mshr_wait,
                     drained, granted, want, used, serialized, triggers):
    """``WriteBuffer._add_checks`` with ``P`` ports, and v2 §18 step 6's allocation properties
    (one-hot grants to FREE entries, the k-th free count, one pressure victim)."""
    cfg, checks, P = wb._cfg, wb._checks, wb._ports
    n = cfg.write_buffer_entries
    disps = list(wb.disp)
    for p, d in enumerate(disps):
        pl = d.payload
        protocol(m, checks, ~d.valid | ((pl.bytes >= 1) & (pl.offset + pl.bytes
                                                            <= PAGE_BYTES)),
                 f"port {p}: write dispatched with a byte range outside its page")
    check_waiters(m, checks, cfg.admission, fires, [d.payload.slot for d in disps], pops,
                  list(wb.ret), Cat(*[s == WbState.FREE for s in state]).all(),
                  "write buffer")
    for why in FLUSH_CAUSES:
        cover(m, checks, Cat(*leaving[why]).any(), f"an entry flushes with cause {why.name}")
    cover(m, checks, stalled, "a write stalls: no OPEN entry of its page, none for its rank")
    cover(m, checks, Cat(*granted).all(), "every port allocates a write-buffer entry")
    invariant(m, checks, (Cat(*[v for v, _ in triggers]) & (Cat(*[v for v, _ in triggers])
                                                            - 1)) == 0,
              "two pressure victims in one cycle (v2 §4.2)")
    free = [~u for u in used]
    n_free, n_want, n_got = tree_sum(free), tree_sum(want), tree_sum(granted)
    invariant(m, checks, n_got == Mux(n_want < n_free, n_want, n_free),
              "write-buffer allocation: granted ports differ from min(wanting, free) "
              "(v2 §4.2.3)")
    waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
    for i in range(n):
        g = grants[i]
        invariant(m, checks, (g & (g - 1)) == 0,
                  f"write-buffer entry {i} granted to two ports in one cycle")
        invariant(m, checks, ~g.any() | free[i],
                  f"write-buffer entry {i} granted while not FREE")
        wb._coverage_checks(m, i, state, cov, full)
        add = Const(0, 1)
        gone = Const(0, 1)
        for p in range(P):
            add = add | (merges[p] & (hit_indexes[p] == i))
            gone = gone | (pops[p] & (curs[p] == i))
        with m.If(g.any()):
            m.d.sync += waiters[i].eq(1)
        with m.Else():
            m.d.sync += waiters[i].eq(waiters[i] + add - gone)
        wb._entry_invariants(m, i, state, page, head, tail, waiters, serialized, drained[i])
    wb._media_protocols(m, state)
    for p in range(P):
        ev = wb.launched[p]
        protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                 f"launched[{p}] names a write-buffer entry with waiters left to take")
