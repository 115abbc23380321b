"""The read MSHR table under Amendment A (``pipeline = "deep"``, stack shape).

Implements docs/timing-contract.md DP1 (the dispatch written a cycle later from the
register W), DP2 (offers in allocation order), DP4 (the free list), DP6 (issue and
completion applied a cycle later) and the MSHR side of DP7 (C1 / C2 / cursor) for
:class:`~hbfsim.rtl.mshr.Mshr`, whose :meth:`~hbfsim.rtl.mshr.Mshr.elaborate` calls
:func:`elaborate_deep` when ``cfg.pipeline == "deep"``; with the structures of
docs/rtl.md "Issue 12, part C" that change no cycle (the state as an AND-OR of its events).
Everything else (the entry fields, the waiter lists, the per-page merge) is contract 2's.
"""

from __future__ import annotations

__all__ = ["elaborate_deep"]

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import memory

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.checks import cover, invariant, protocol
from hbfsim.rtl.entry_table import check_waiters, drain_cursor, free_list, offer_fifo
from hbfsim.rtl.layouts import EntryKind, target_layout
from hbfsim.rtl.logic import named, onehot_index, onehot_select, tree_sum


def elaborate_deep(mshr) -> Module:
    """``Mshr.elaborate`` under ``pipeline = "deep"`` (demand reads, merging on).

    Parameters
    ----------
    mshr : Mshr
        The block (one port, contract 2, ``pipeline = "deep"``).

    Returns
    -------
    Module
    """
    from hbfsim.rtl.mshr import MshrState, disp_layout

    m = Module()
    cfg, w, checks = mshr._cfg, mshr._w, mshr._checks
    assert cfg.mshr_merge and cfg.read_mode == "demand", "deep: demand reads, merging on"
    n, channels = cfg.mshr_entries, cfg.channels
    mut = mshr._mutations

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
    link_wr = next_slot.write_port()
    link_rd = next_slot.read_port(domain="comb")

    mergeable = [named(m, (s == MshrState.WAIT) | (s == MshrState.QUEUED)
                       | (s == MshrState.ISSUED), f"mergeable{i}") for i, s in enumerate(state)]
    joinable = mergeable
    if "mshr-merge-return" in mut:
        joinable = [mergeable[i] | (state[i] == MshrState.RETURN) for i in range(n)]

    # ---- DP1: W holds M's decision of the previous cycle and writes it into its entry ----
    w_alloc, w_merge = Signal(name="w_alloc"), Signal(name="w_merge")
    w_oh = Signal(n, name="w_onehot")
    w_d = Signal(disp_layout(w), name="w_payload", reset_less=True)
    w_tail = Signal(w.slot, name="w_tail", reset_less=True)
    w_new = [named(m, w_alloc & w_oh[i], f"w_new{i}") for i in range(n)]
    m.d.comb += mshr.w_entry.eq(Cat(*w_new))
    # the entry W allocates counts as mergeable for M (DP1: M sees its own last decision):
    # M's vector (``disp_match``, registered) plus W's entry when the controller's flag
    # ``w_match`` says W allocated it for M's page
    vec = [named(m, mshr.disp_match[i] | (mshr.w_match & w_new[i]), f"disp_vec{i}")
           for i in range(n)]
    match = [named(m, (joinable[i] | w_new[i]) & vec[i], f"match{i}") for i in range(n)]
    # at most one mergeable entry per page: the hit is an OR, its index an OR encoding.
    # W's term of the hit is the flag alone, ORed after the entries' tree: W's entry is
    # FREE (not joinable) and off M's registered vector (it left the free list, which
    # holds no pending entry, in the cycle M's vector was last loaded or qualified), and
    # the flag implies W's allocation; so the hit reads registers only and W's one-hot is
    # not on its path (issue 12, seed 3's path). An invariant compares it with the OR of
    # ``match``.
    hit = named(m, Cat(*[joinable[i] & mshr.disp_match[i] for i in range(n)]).any()
                | mshr.w_match, "hit")
    hit_index = onehot_index(m, match, "hit_index")
    invariant(m, checks, hit == Cat(*match).any(),
              "the MSHR hit differs from the OR of its match vector (DP1, W's flag)")

    # ---- DP4: allocation from the free list; an entry joins it when its last waiter is
    # launched (FREE from the next cycle, v2 §8) ----
    any_free, free_index, free_oh, free_pop, free_count = free_list(
        m, n, mshr.launched.valid, mshr.launched.index, "free_list")
    m.d.comb += [
        mshr.disp.ready.eq(hit | any_free),
        mshr.disp_hit.eq(hit),
        mshr.disp_index.eq(Mux(hit, hit_index, free_index)),
    ]
    fire = named(m, mshr.disp.valid & mshr.disp.ready, "fire")
    merge = named(m, fire & hit, "merge")
    allocate = named(m, fire & ~hit, "allocate")
    free_pop(allocate)
    # a merge behind the entry W is writing appends to W's waiter (its tail is not written)
    same_w = named(m, (w_alloc | w_merge) & (w_oh & Cat(*match)).any(), "w_same")
    hit_tail = Mux(same_w, w_d.slot, onehot_select(m, tail, match, "hit_tail"))
    m.d.sync += [w_alloc.eq(allocate), w_merge.eq(merge),
                 w_oh.eq(Mux(allocate, Cat(*free_oh), Cat(*match))),
                 w_d.eq(mshr.disp.payload), w_tail.eq(hit_tail)]
    m.d.comb += [
        link_wr.addr.eq(w_tail),
        link_wr.data.eq(w_d.slot),
        link_wr.en.eq(0 if "mshr-dropped-waiter" in mut else w_merge),
    ]
    # L and the write buffer see W's entry as pending, with its page (DP1)
    for i in range(n):
        m.d.comb += [mshr.tags[i].eq(Mux(w_new[i], w_d.page, page[i])),
                     mshr.pending[i].eq(mergeable[i] | w_new[i])]
    merge_en = [named(m, w_merge & w_oh[i], f"w_merge{i}") for i in range(n)]

    # ---- DP2: per channel, the WAIT entries in allocation order ----
    w_index = onehot_index(m, [w_oh[i] for i in range(n)], "w_index")
    enq_fire, enq_index, fifo_count = [], [], []
    for c, port in enumerate(mshr.enq):
        fire_c, index_c, count_c = offer_fifo(
            m, port, named(m, w_alloc & (w_d.target.channel == c), f"offer_push{c}"),
            w_index, w_d.target, EntryKind.MSHR, n, f"offer_fifo{c}")
        enq_fire.append(fire_c)
        enq_index.append(index_c)
        fifo_count.append(count_c)

    # ---- DP7: the response choice C1 / C2 / cursor ----
    pop, cur, last, regs = drain_cursor(
        m, mshr.ret, mshr.ret_locked,
        [(s == MshrState.RETURN) & ~drained[i] for i, s in enumerate(state)],
        head, tail, target, error, link_rd, buffer_hit=buffer_hit)

    # ---- per-entry next state ----
    issue_qs = []
    for i in range(n):
        with m.If(w_new[i]):
            m.d.sync += [page[i].eq(w_d.page), target[i].eq(w_d.target),
                         nbytes[i].eq(w_d.bytes), head[i].eq(w_d.slot),
                         tail[i].eq(w_d.slot), buffer_hit[i].eq(0), error[i].eq(0)]
        with m.If(merge_en[i]):
            m.d.sync += [nbytes[i].eq(nbytes[i] + w_d.bytes), tail[i].eq(w_d.slot)]
        # DP6: the issue and completion events decoded per entry into flip-flops and
        # applied a cycle later (ISSUED from td + 2, RETURN with its flags from tc + 2)
        issue_i = Cat(*[p.valid & (p.index == i) for p in mshr.issue]).any()
        done_i = Cat(*[p.valid & (p.index == i) for p in mshr.done]).any()
        issue_q, done_q = Signal(name=f"issue_q{i}"), Signal(name=f"done_q{i}")
        done_bh, done_err = Signal(name=f"done_bh_q{i}"), Signal(name=f"done_err_q{i}")
        m.d.sync += [issue_q.eq(issue_i), done_q.eq(done_i)]
        with m.If(done_i):
            m.d.sync += [
                done_bh.eq(Cat(*[p.valid & (p.index == i) & p.buffer_hit
                                 for p in mshr.done]).any()),
                done_err.eq(Cat(*[p.valid & (p.index == i) & p.error
                                  for p in mshr.done]).any())]
        with m.If(done_q):
            m.d.sync += [buffer_hit[i].eq(done_bh), error[i].eq(done_err)]
        with m.If(pop & (cur == i) & last):
            m.d.sync += drained[i].eq(1)
        ev_f = mshr.launched.valid & (mshr.launched.index == i)
        with m.If(ev_f):
            m.d.sync += drained[i].eq(0)
        # The state's events exclude each other (each needs a different state), so the next
        # state is an AND-OR of the events, not a priority chain (docs/rtl.md part C, (i)).
        ev_w = w_new[i]
        ev_q = Cat(*[enq_fire[c] & (enq_index[c] == i) for c in range(channels)]).any()
        ev_s, ev_r = issue_q, done_q
        hold = named(m, ~(ev_w | ev_q | ev_s | ev_r | ev_f), f"state_hold{i}")
        sv = state[i].as_value()
        # FREE 0, WAIT 1, QUEUED 2, ISSUED 3, RETURN 4
        m.d.sync += sv.eq(Cat(ev_w | ev_s | (hold & sv[0]), ev_q | ev_s | (hold & sv[1]),
                              ev_r | (hold & sv[2])))
        issue_qs.append(issue_q)
        events = Cat(ev_w, ev_q, ev_s, ev_r, ev_f)
        invariant(m, checks, (events & (events - 1)) == 0,
                  f"MSHR entry {i}: two state events in one cycle (DP6)")

    if checks:
        _add_checks(mshr, m, state, page, mergeable, head, tail, w_alloc, w_new, merge_en,
                    w_d, fire, pop, cur, regs, nbytes, drained, any_free, free_index,
                    free_count, fifo_count, enq_index, issue_qs)
    return m


def _add_checks(mshr, m, state, page, mergeable, head, tail, w_alloc, w_new, merge_en, w_d,
                fire, pop, cur, regs, nbytes, drained, any_free, free_index, free_count,
                fifo_count, enq_index, issue_qs):
    """The properties of ``Mshr._add_checks`` with W (waiters counted when W writes) and
    the cursor (the next waiter in the cursor, not in ``head``), plus the deep structures':
    the free list holds exactly the FREE entries W does not write, each offer FIFO exactly
    its channel's WAIT entries, its head a WAIT entry."""
    from hbfsim.rtl.mshr import MshrState

    cfg, checks = mshr._cfg, mshr._checks
    n = cfg.mshr_entries
    d = mshr.disp.payload
    protocol(m, checks, ~mshr.disp.valid | ((d.bytes >= 1) & (d.bytes <= PAGE_BYTES)),
             "read dispatched with a size outside 1..4096 bytes")
    # a slot is inside the table from its dispatch; an entry W still writes is not FREE
    check_waiters(m, checks, cfg.admission, fire, d.slot, pop, mshr.ret,
                  Cat(*[s == MshrState.FREE for s in state]).all() & ~w_alloc, "MSHR")
    waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
    locked, lock_index, lk_head = regs["locked"], regs["lock_index"], regs["lk_head"]
    for i in range(n):
        gone = pop & (cur == i)
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
        first = Mux(locked & (lock_index == i), lk_head, head[i])
        invariant(m, checks, free | ((first == tail[i]) == (waiters[i] == 1)),
                  f"MSHR entry {i}: next waiter == tail exactly when one waiter is left")
        for j in range(i + 1, n):
            invariant(m, checks, ~(mergeable[i] & mergeable[j] & (page[i] == page[j])),
                      f"MSHR entries {i} and {j} are both mergeable for one page")
    states = Array(state)
    issue_q = Array(issue_qs)
    for c in range(len(mshr.issue)):
        ev, done = mshr.issue[c], mshr.done[c]
        protocol(m, checks,
                 ~ev.valid | ((ev.index < n) & (states[ev.index] == MshrState.QUEUED)),
                 f"issue[{c}] names an MSHR entry that is not QUEUED")
        # DP6: ISSUED from td + 2; a completion in td + 1 would find its issue pending
        protocol(m, checks,
                 ~done.valid | ((done.index < n) & ((states[done.index] == MshrState.ISSUED)
                                                    | issue_q[done.index])),
                 f"done[{c}] names an MSHR entry that is not ISSUED")
    ev = mshr.launched
    protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
             "launched names an MSHR entry with waiters left to take")
    cap = cfg.admission * PAGE_BYTES
    for i in range(n):
        invariant(m, checks, ~merge_en[i] | (nbytes[i] + w_d.bytes <= cap),
                  f"MSHR entry {i}: byte count overflows")
    # DP4: the free list holds the FREE entries that W is not writing
    free_now = [(state[i] == MshrState.FREE) & ~w_new[i] for i in range(n)]
    invariant(m, checks, free_count == tree_sum(free_now),
              "the MSHR free list's count differs from the FREE entries (DP4)")
    invariant(m, checks, ~any_free | Array(free_now)[free_index],
              "the MSHR free list's head is not a FREE entry (DP4)")
    # DP2: each channel's offer FIFO holds its WAIT entries; the head is one of them
    for c, count in enumerate(fifo_count):
        invariant(m, checks, (count == 0) | (states[enq_index[c]] == MshrState.WAIT),
                  f"channel {c}: the MSHR offer FIFO's head is not a WAIT entry (DP2)")
    invariant(m, checks, tree_sum(fifo_count) == tree_sum([s == MshrState.WAIT
                                                           for s in state]),
              "the MSHR offer FIFOs hold other than the WAIT entries (DP2)")
    cover(m, checks, Cat(*merge_en).any(), "a read merges (MSHR hit)")
    cover(m, checks, mshr.disp.valid & ~mshr.disp.ready, "a read stalls: no free entry")
    for st in (MshrState.QUEUED, MshrState.ISSUED, MshrState.RETURN):
        cover(m, checks, Cat(*[s == st for s in state]).any(), f"an entry in {st.name}")
    cover(m, checks, locked & ~pop, "the cursor keeps its entry without a handshake")
    cover(m, checks, pop & ~mshr.ret.payload.last, "a merged waiter is answered")
    cover(m, checks, regs["v1"] & regs["v2"], "C1 holds an entry while C2 holds another")
