"""The write buffer under Amendment A (``pipeline = "deep"``, stack shape).

Implements docs/timing-contract.md DP1 (the dispatch written a cycle later from the
register W), DP3 (registered offers), DP4 (the free list), DP5 (registered flush decisions)
and the write buffer's side of DP7 (C1 / C2 / cursor) for
:class:`~hbfsim.rtl.write_buffer.WriteBuffer`, whose
:meth:`~hbfsim.rtl.write_buffer.WriteBuffer.elaborate` calls :func:`elaborate_deep` when
``cfg.pipeline == "deep"``; with the structures of docs/rtl.md "Issue 12, part C" that change
no cycle (the state as an AND-OR of its events, "coverage complete" a flip-flop). The checks
both pipelines share stay in ``write_buffer.py``.
"""

from __future__ import annotations

__all__ = ["elaborate_deep"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import memory

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.checks import cover, invariant, protocol
from hbfsim.rtl.entry_table import check_waiters, drain_cursor, free_list, offer_registered
from hbfsim.rtl.layouts import EntryKind, target_layout
from hbfsim.rtl.logic import at_least, named, onehot_index, onehot_select, tree_sum
from hbfsim.rtl.write_buffer import (FLUSH_CAUSES, FlushCause, WbState, count_flushes,
                                     sector_range, wdisp_layout)


def elaborate_deep(wb) -> Module:
    """``WriteBuffer.elaborate`` under ``pipeline = "deep"``.

    Parameters
    ----------
    wb : WriteBuffer
        The block (one port, contract 2, ``pipeline = "deep"``).

    Returns
    -------
    Module
    """
    m = Module()
    cfg, w, checks = wb._cfg, wb._w, wb._checks
    n = cfg.write_buffer_entries
    strict = cfg.write_timeout_policy == "strict"
    sectors = PAGE_BYTES // wb._sector
    deadline = cfg.write_deadline_ticks
    mut = wb._mutations

    state = [Signal(WbState, name=f"state{i}") for i in range(n)]
    page = [Signal(w.page, name=f"page{i}") for i in range(n)]
    target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
    cov = [Signal(sectors, name=f"cov{i}") for i in range(n)]
    # Cycles left to the deadline: 0 from cycle alloc + write_deadline_ticks on (§4.4)
    remain = [Signal(range(max(2, deadline)), name=f"remain{i}") for i in range(n)]
    cause = [Signal(FlushCause, name=f"cause{i}") for i in range(n)]
    pressure = [Signal(name=f"pressure{i}") for i in range(n)]
    older = [Signal(n, name=f"older{i}") for i in range(n)]
    head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
    tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
    error = [Signal(name=f"error{i}") for i in range(n)]
    drained = [Signal(name=f"drained{i}") for i in range(n)]
    # "coverage complete" as a flip-flop from the coverage's next value (part C, (j))
    full = [Signal(name=f"full{i}") for i in range(n)]
    m.submodules.next_slot = next_slot = memory.Memory(
        shape=unsigned(w.slot), depth=cfg.admission, init=[])
    link_wr = next_slot.write_port()
    link_rd = next_slot.read_port(domain="comb")

    used = [named(m, s != WbState.FREE, f"used{i}") for i, s in enumerate(state)]
    is_open = [named(m, s == WbState.OPEN, f"open{i}") for i, s in enumerate(state)]

    # ---- DP1: W holds M's decision of the previous cycle and writes it into its entry ----
    d = wb.disp.payload
    w_alloc, w_merge = Signal(name="w_alloc"), Signal(name="w_merge")
    w_oh = Signal(n, name="w_onehot")
    w_d = Signal(wdisp_layout(w), name="w_payload", reset_less=True)
    w_mask = Signal(sectors, name="w_mask", reset_less=True)
    w_tail = Signal(w.slot, name="w_tail", reset_less=True)
    w_blk = Signal(cfg.mshr_entries, name="w_blockers", reset_less=True)
    w_old = Signal(n, name="w_older_page", reset_less=True)
    w_new = [named(m, w_alloc & w_oh[i], f"w_new{i}") for i in range(n)]
    m.d.comb += wb.w_entry.eq(Cat(*w_new))
    # for M and L the entry W allocates is in use and OPEN, with its page (DP1)
    used_e = [named(m, used[i] | w_new[i], f"used_e{i}") for i in range(n)]
    open_e = [named(m, is_open[i] | w_new[i], f"open_e{i}") for i in range(n)]
    m.d.comb += [wb.tags[i].eq(Mux(w_new[i], w_d.page, page[i])) for i in range(n)]
    m.d.comb += [wb.in_use.eq(Cat(*used_e)), wb.is_open.eq(Cat(*open_e))]
    # M's vectors (registered) plus W's entry when the controller's flag ``w_match`` says
    # W allocated it for M's page (DP1)
    w_fwd = [named(m, wb.w_match & w_new[i], f"w_fwd{i}") for i in range(n)]
    disp_open = Cat(*[wb.disp_open[i] | w_fwd[i] for i in range(n)])
    probe_used = Cat(*[wb.probe_used[i] | w_fwd[i] for i in range(n)])
    # one OPEN entry per page: the hit is an OR, its index an OR encoding. W's term of the
    # hit is the flag alone, ORed after the entries' tree (W's entry is FREE and off M's
    # registered vectors; the flag implies W's allocation), so the hit reads registers
    # only (issue 12); an invariant compares it with the OR of ``match``.
    match = [named(m, open_e[i] & disp_open[i], f"match{i}") for i in range(n)]
    hit = named(m, Cat(*[is_open[i] & wb.disp_open[i] for i in range(n)]).any() | wb.w_match,
                "hit")
    hit_index = onehot_index(m, match, "hit_index")
    invariant(m, checks, hit == Cat(*match).any(),
              "the write buffer's hit differs from the OR of its match vector (DP1, W's flag)")
    # DP4: allocation from the free list (the amendment's second difference from the what-if)
    any_free, free_index, free_oh, free_pop, free_count = free_list(
        m, n, wb.launched.valid, wb.launched.index, "free_list")
    m.d.comb += [
        wb.disp.ready.eq(hit | any_free),
        wb.disp_merge.eq(hit),
        wb.disp_index.eq(Mux(hit, hit_index, free_index)),
    ]
    fire = named(m, wb.disp.valid & wb.disp.ready, "fire")
    merge = named(m, fire & hit, "merge")
    allocate = named(m, fire & ~hit, "allocate")
    stalled = named(m, wb.disp.valid & ~hit & ~any_free, "stalled")
    free_pop(allocate)
    if wb._sectors_in:
        lo, hi_plus_1 = wb.disp_sectors.first, wb.disp_sectors.end
        if checks:
            ref_lo, ref_end = sector_range(m, d.offset, d.bytes, wb._sector, "chk_sectors")
            protocol(m, checks, ~wb.disp.valid | ((lo == ref_lo) & (hi_plus_1 == ref_end)),
                     "disp_sectors differs from the sectors of the write's byte range")
    else:
        lo, hi_plus_1 = sector_range(m, d.offset, d.bytes, wb._sector, "sectors")
    mask = Signal(sectors)
    m.d.comb += mask.eq(at_least(m, lo, sectors, "from_lo")
                        & ~at_least(m, hi_plus_1, sectors, "from_hi"))
    # a merge behind the entry W is writing appends to W's waiter (its tail is not written)
    same_w = named(m, (w_alloc | w_merge) & (w_oh & Cat(*match)).any(), "w_same")
    hit_tail = Mux(same_w, w_d.slot, onehot_select(m, tail, match, "hit_tail"))
    m.d.sync += [w_alloc.eq(allocate), w_merge.eq(merge),
                 w_oh.eq(Mux(allocate, Cat(*free_oh), Cat(*match))),
                 w_d.eq(d), w_mask.eq(mask), w_tail.eq(hit_tail),
                 # the blocker and older sets (v2 §16 S2, S3) from M's vectors, as standard
                 w_blk.eq(wb.disp_pend & Cat(*wb.mshr_pending)),
                 w_old.eq(probe_used & Cat(*used_e))]
    m.d.comb += [link_wr.addr.eq(w_tail), link_wr.data.eq(w_d.slot), link_wr.en.eq(w_merge)]
    merge_en = [named(m, w_merge & w_oh[i], f"w_merge{i}") for i in range(n)]

    # ---- DP5: flush decisions, from the state at the start of the cycle ----
    probe_match = [named(m, used_e[i] & probe_used[i], f"probe_match{i}") for i in range(n)]
    # as the hit: W's term is the flag, after the entries' tree
    m.d.comb += wb.probe_block.eq(Cat(*[used[i] & wb.probe_used[i] for i in range(n)]).any()
                                  | wb.w_match)
    invariant(m, checks, wb.probe_block == Cat(*probe_match).any(),
              "probe_block differs from the OR of the in-use match vector (DP1, W's flag)")
    pressure_live = named(m, Cat(*[used[i] & pressure[i] for i in range(n)]).any(),
                          "pressure_live")
    # the victim: the oldest entry OPEN at the start of the cycle (W's entry is not yet)
    oldest_open = [is_open[i] & ~(older[i] & Cat(*is_open)).any() for i in range(n)]
    # a decision pending (taken last cycle): the entry is still OPEN, FLUSH from next cycle
    dec = [Signal(len(FLUSH_CAUSES), name=f"flush_dec{i}") for i in range(n)]
    pending = [named(m, dec[i].any(), f"flush_pending{i}") for i in range(n)]
    victims, leaving = [], {why: [] for why in FLUSH_CAUSES}
    for i in range(n):
        raw = wb.probe.valid & probe_match[i] & is_open[i]
        victim = named(m, stalled & ~pressure_live & oldest_open[i], f"victim{i}")
        victims.append(victim)
        conds = [full[i], raw, victim, remain[i] == 0, wb.drain]
        flags, earlier = [], Const(0)
        for cond in conds:   # by §4.4's priority, among OPEN entries with none pending
            flags.append(is_open[i] & ~pending[i] & cond & ~earlier)
            earlier = earlier | cond
        m.d.sync += dec[i].eq(Cat(*flags))
        # counted as it leaves OPEN (the flush counters show it from t + 2, DP5)
        for k, why in enumerate(FLUSH_CAUSES):
            leaving[why].append(dec[i][k])

    # ---- FLUSH: strict errors and enqueue eligibility (§4.4, DP3) ----
    blockers = [Signal(cfg.mshr_entries, name=f"blockers{i}") for i in range(n)]
    older_page = [Signal(n, name=f"older_page{i}") for i in range(n)]
    pend_now, used_now = Cat(*wb.mshr_pending), Cat(*used)
    blocker_live = [named(m, blockers[i] & pend_now, f"blocker_live{i}") for i in range(n)]
    older_live = [named(m, older_page[i] & used_now, f"older_live{i}") for i in range(n)]
    eligible, serialized, strict_error, mshr_wait, cand, elig_q = [], [], [], [], [], []
    for i in range(n):
        with m.If(w_new[i]):
            m.d.sync += [blockers[i].eq(w_blk & pend_now), older_page[i].eq(w_old & used_now)]
        with m.Else():
            m.d.sync += [blockers[i].eq(blocker_live[i]), older_page[i].eq(older_live[i])]
        in_flush = state[i] == WbState.FLUSH
        mshr_busy = blocker_live[i].any()
        complete = full[i] if strict and "wb-strict-partial" not in mut else 1
        serialized.append(named(m, ~older_live[i].any(), f"serialized{i}"))
        order_ok = 1 if "wb-w4-ignored" in mut else serialized[i]
        # DP5: a merge still in W completes its coverage before the entry is offered or
        # errors (the merge of the cycle after the decision lands in FLUSH)
        eligible.append(named(m, in_flush & complete & order_ok & ~mshr_busy & ~merge_en[i],
                              f"eligible{i}"))
        mshr_wait.append(in_flush & mshr_busy)
        strict_error.append(named(m, in_flush & ~full[i] & ~merge_en[i], f"strict_error{i}")
                            if strict else Const(0))
        # DP3: a candidate from the cycle after it is first eligible until it is enqueued
        q = Signal(name=f"eligible_q{i}")
        m.d.sync += q.eq(eligible[i])
        elig_q.append(q)
        cand.append(named(m, q & in_flush, f"candidate{i}"))
    enq_fire, enq_index, held = offer_registered(m, wb.enq, cand, target, EntryKind.WBUF)

    # ---- DP7: the response choice C1 / C2 / cursor ----
    pop, cur, last, regs = drain_cursor(
        m, wb.ret, wb.ret_locked,
        [(s == WbState.RETURN) & ~drained[i] for i, s in enumerate(state)],
        head, tail, target, error, link_rd)

    m.d.comb += [
        wb.occupied.eq(tree_sum(used)),
        wb.programs_queued.eq(Cat(*[s == WbState.QUEUED for s in state]).any()),
    ]
    for i in range(n):
        m.d.comb += wb.cause[i].eq(cause[i])

    # ---- per-entry next state ----
    w_oh_now = Cat(*[w_oh[j] for j in range(n)])
    w_mask_all = named(m, w_mask.all(), "w_mask_all")
    for i in range(n):
        with m.If(w_new[i]):
            m.d.sync += [
                page[i].eq(w_d.page),
                target[i].eq(w_d.target),
                # DP1: deadline = tm + write_deadline_ticks; W writes in tm + 1
                remain[i].eq(max(0, deadline - 2)),
                cause[i].eq(FlushCause.NONE),
                pressure[i].eq(0),
                older[i].eq(Cat(*used)),
                head[i].eq(w_d.slot),
                tail[i].eq(w_d.slot),
                error[i].eq(0),
            ]
        with m.Elif(w_alloc):
            m.d.sync += older[i].eq(older[i] & ~w_oh_now)
        with m.If(merge_en[i]):
            m.d.sync += tail[i].eq(w_d.slot)
        merged = w_mask if "wb-coverage-overwrite" in mut else cov[i] | w_mask
        cov_next = Signal(sectors, name=f"cov_next{i}")
        m.d.comb += cov_next.eq(Mux(w_new[i], w_mask, Mux(merge_en[i], merged, cov[i])))
        # ``full`` = ``cov_next.all()``, with W's one-hot after the AND trees (which read
        # registers only) instead of in front of them (issue 12: seed 3's path at 105.7 MHz)
        m.d.sync += [cov[i].eq(cov_next),
                     full[i].eq(Mux(w_new[i], w_mask_all, Mux(merge_en[i], merged.all(),
                                                              full[i])))]
        with m.If(~w_new[i] & (remain[i] != 0)):
            m.d.sync += remain[i].eq(remain[i] - 1)
        with m.If(victims[i]):
            m.d.sync += pressure[i].eq(1)
        ev_l = pending[i]   # leaves OPEN with the cause decided last cycle
        with m.If(ev_l):
            for k, why in enumerate(FLUSH_CAUSES):
                with (m.If if k == 0 else m.Elif)(dec[i][k]):
                    m.d.sync += cause[i].eq(why)
        with m.If(strict_error[i]):
            m.d.sync += error[i].eq(1)
        done_i = Cat(*[p.valid & (p.index == i) for p in wb.done]).any()
        with m.If(done_i):
            m.d.sync += error[i].eq(Cat(*[p.valid & (p.index == i) & p.error
                                          for p in wb.done]).any())
        with m.If(pop & (cur == i) & last):
            m.d.sync += drained[i].eq(1)
        ev_f = wb.launched.valid & (wb.launched.index == i)
        with m.If(ev_f):
            m.d.sync += drained[i].eq(0)
        # exclusive events, AND-OR next state (part C, (i))
        ev_o = w_new[i]
        ev_q = Cat(*[enq_fire[c] & (enq_index[c] == i) for c in range(cfg.channels)]).any()
        ev_p = Cat(*[p.valid & (p.index == i) for p in wb.issue]).any()
        ev_r = done_i | strict_error[i]
        hold = named(m, ~(ev_o | ev_l | ev_q | ev_p | ev_r | ev_f), f"state_hold{i}")
        sv = state[i].as_value()
        # FREE 0, OPEN 1, FLUSH 2, QUEUED 3, PROGRAM 4, RETURN 5
        m.d.sync += sv.eq(Cat(ev_o | ev_q | ev_r | (hold & sv[0]),
                              ev_l | ev_q | (hold & sv[1]),
                              ev_p | ev_r | (hold & sv[2])))
        events = Cat(ev_o, ev_l, ev_q, ev_p, ev_r, ev_f)
        invariant(m, checks, (events & (events - 1)) == 0,
                  f"write-buffer entry {i}: two state events in one cycle")

    count_flushes(m, leaving, wb.flushes, checks)

    if checks:
        _add_checks(wb, m, state, page, head, tail, used, used_e, w_alloc, w_new, merge_en,
                    fire, pop, cur, regs, serialized, cov, full, leaving, stalled,
                    strict_error, mshr_wait, drained, allocate, blocker_live, older_live,
                    older, eligible, elig_q, cand, held, dec, is_open, any_free, free_index,
                    free_count, probe_used)
    return m


def _add_checks(wb, m, state, page, head, tail, used, used_e, w_alloc, w_new, merge_en, fire,
                pop, cur, regs, serialized, cov, full, leaving, stalled, strict_error,
                mshr_wait, drained, allocate, blocker_live, older_live, older, eligible,
                elig_q, cand, held, dec, is_open, any_free, free_index, free_count, probe_used):
    """``WriteBuffer._add_checks`` with W (waiters counted when W writes, the lookup vectors
    checked against W's entry too) and the cursor, plus the deep structures' properties: a
    decision only for an OPEN entry, a candidate stays eligible, the offer register holds a
    FLUSH entry, the free list holds exactly the FREE entries W does not write."""
    cfg, checks = wb._cfg, wb._checks
    n = cfg.write_buffer_entries
    strict = cfg.write_timeout_policy == "strict"
    d = wb.disp.payload
    protocol(m, checks, ~wb.disp.valid | ((d.bytes >= 1) & (d.offset + d.bytes <= PAGE_BYTES)),
             "write dispatched with a byte range outside its page")
    check_waiters(m, checks, cfg.admission, fire, d.slot, pop, wb.ret,
                  Cat(*[s == WbState.FREE for s in state]).all() & ~w_alloc, "write buffer")
    for why in FLUSH_CAUSES:
        cover(m, checks, Cat(*leaving[why]).any(), f"an entry flushes with cause {why.name}")
    cover(m, checks, stalled, "a write stalls: no OPEN entry of its page, none FREE")
    cover(m, checks, Cat(*strict_error).any() if strict else Const(0),
          "strict policy: an incomplete entry answers with error")
    cover(m, checks, Cat(*[(state[i] == WbState.FLUSH) & ~serialized[i]
                           for i in range(n)]).any(),
          "a FLUSH entry waits for an older entry of its page (W4)")
    cover(m, checks, Cat(*mshr_wait).any(), "a FLUSH entry waits for an MSHR entry")
    cover(m, checks, Cat(*[(state[i] == WbState.FLUSH) & merge_en[i] for i in range(n)]).any(),
          "a merge decided in the cycle after a flush decision lands in FLUSH (DP5)")
    for i in range(n):
        wb._coverage_checks(m, i, state, cov, full)
        invariant(m, checks, full[i] == cov[i].all(),
                  f"write-buffer entry {i}: the full flag differs from the coverage (part C, j)")
    waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
    locked, lock_index, lk_head = regs["locked"], regs["lock_index"], regs["lk_head"]
    firsts = []
    for i in range(n):
        with m.If(w_new[i]):
            m.d.sync += waiters[i].eq(1)
        with m.Else():
            m.d.sync += waiters[i].eq(waiters[i] + merge_en[i] - (pop & (cur == i)))
        # DP7: the cursor holds the next waiter of the entry it drains
        firsts.append(Mux(locked & (lock_index == i), lk_head, head[i]))
    for i in range(n):
        wb._entry_invariants(m, i, state, page, firsts, tail, waiters, serialized, drained[i])
    wb._media_protocols(m, state)
    ev = wb.launched
    protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
             "launched names a write-buffer entry with waiters left to take")
    # v2 §18 step 4: the recorded sets equal v1's comparisons, and start from exact vectors
    tags_e = [wb.tags[j] for j in range(n)]
    fresh_used = Cat(*[used_e[j] & (tags_e[j] == d.page) for j in range(n)])
    fresh_pend = Cat(*[wb.mshr_pending[k] & (wb.mshr_tags[k] == d.page)
                       for k in range(cfg.mshr_entries)])
    protocol(m, checks, ~allocate | ((probe_used & Cat(*used_e)) == fresh_used),
             "probe_used differs from the in-use entries of the page of a write that "
             "allocates (v2 §4.2)")
    protocol(m, checks, ~allocate | ((wb.disp_pend & Cat(*wb.mshr_pending)) == fresh_pend),
             "disp_pend differs from the pending MSHR entries of the page of a write that "
             "allocates (v2 §4.4)")
    for i in range(n):
        v1_older = Cat(*[older[i][j] & used[j] & (page[j] == page[i]) for j in range(n)])
        v1_busy = Cat(*[wb.mshr_pending[k] & (wb.mshr_tags[k] == page[i])
                        for k in range(cfg.mshr_entries)])
        invariant(m, checks, ~used[i] | (older_live[i] == v1_older),
                  f"write-buffer entry {i}: the recorded older set differs from the page "
                  "comparisons (v2 §4.4)")
        invariant(m, checks, ~used[i] | (blocker_live[i] == v1_busy),
                  f"write-buffer entry {i}: the recorded blocker set differs from the MSHR "
                  "page comparisons (v2 §4.4)")
        # DP5: a decision is taken for an OPEN entry and leaves it OPEN for one cycle
        invariant(m, checks, ~dec[i].any() | is_open[i],
                  f"write-buffer entry {i}: a flush decision pending outside OPEN (DP5)")
        # DP3: eligibility, once reached, lasts until the entry is enqueued
        invariant(m, checks, ~cand[i] | eligible[i],
                  f"write-buffer entry {i}: a candidate is no longer eligible (DP3)")
    states = Array(state)
    for c, (hv, hi) in enumerate(held):
        invariant(m, checks, ~hv | (states[hi] == WbState.FLUSH),
                  f"channel {c}: the write buffer's offer register holds a non-FLUSH entry "
                  "(DP3)")
    free_now = [(state[i] == WbState.FREE) & ~w_new[i] for i in range(n)]
    invariant(m, checks, free_count == tree_sum(free_now),
              "the write buffer's free list count differs from the FREE entries (DP4)")
    invariant(m, checks, ~any_free | Array(free_now)[free_index],
              "the write buffer's free list head is not a FREE entry (DP4)")
