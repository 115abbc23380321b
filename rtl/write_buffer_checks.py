"""The write buffer's properties (docs/formal.md, docs/rtl.md "Checks"): the lookup protocol
M promises the table (DP1), coverage, the per-entry invariants, the media protocols and the
table-wide checks (one allocation per entry per cycle, at most one pressure victim, DP4, DP5).

They are statements about :class:`hbfsim.rtl.write_buffer.WriteBuffer`'s signals, added by
its ``elaborate`` when ``checks`` is on; kept apart from the datapath so that each file is
one concern (the emitted Verilog is the same as with the methods in one class).
"""

from __future__ import annotations

__all__ = ["WriteBufferChecks"]

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.checks import cover, invariant, lemma, protocol
from hbfsim.rtl.entry_table import check_waiters, pool_lemmas, stage_lemmas
from hbfsim.rtl.layouts import FLUSH_CAUSES, WbState
from hbfsim.rtl.logic import tree_sum


class WriteBufferChecks:
    """The property methods of :class:`~hbfsim.rtl.write_buffer.WriteBuffer` (a mixin)."""

    def _lookup_protocol(self, m, disps, probes, disp_open, probe_used, open_any, used_any,
                         w_match, w_alloc, w_new_p, w_d, w_blk, is_open, used, page):
        """What the controller's M promises the table (DP1; the controller asserts the same
        of its vectors against a fresh lookup): the flag ``w_match`` only with W's
        allocation, M's vectors without W's entry, and for the request on ``disp`` or
        ``probe`` the vector (over the OPEN or in-use entries) and the flag equal to a fresh
        lookup of its page."""
        checks, n = self._checks, self._cfg.write_buffer_entries
        for p, (d, pr) in enumerate(zip(disps, probes)):
            protocol(m, checks, ~w_match[p] | w_alloc[p],
                     f"port {p}: w_match without W's allocation (DP1)")
            w_oh = Cat(*w_new_p[p])
            protocol(m, checks, ((disp_open[p] & w_oh) == 0) & ((probe_used[p] & w_oh) == 0),
                     f"port {p}: M's write-buffer vectors hold W's entry (DP1)")
            # with registered hits: qualified with ``is_open_next`` / ``in_use_next`` of the
            # cycle before, the flags their ORs (registered with them)
            for vec, anyf, nxt, what in (((disp_open[p], open_any[p], self.is_open_next, "open"),
                                          (probe_used[p], used_any[p], self.in_use_next, "used"))
                                         if open_any is not None else ()):
                nxt_q = Signal.like(nxt, name=f"chk_{what}_next_q{p}")
                m.d.sync += nxt_q.eq(nxt)
                # with a pool per channel the OPEN flag is the OR of the port's pool's part
                # (§4.5: a write merges only there; under a partition scheduler a read port's
                # vector holds the write ports' entries of its page); the RAW block (in use)
                # reads the whole vector
                mine = vec
                if what == "open" and len(disps) > 1 and self._cfg.pools == "channel":
                    k = n // len(disps)
                    mine = vec & Const(((1 << k) - 1) << (p * k), n)
                protocol(m, checks, ((vec & ~nxt_q) == 0) & (anyf == mine.any()),
                         f"port {p}: M's {what} vector holds an entry that was not "
                         f"{what}_next, or its flag is not its OR (DP1)")
            for valid, pg, vec, live, what in (
                    (d.valid, d.payload.page, disp_open[p], is_open, "OPEN"),
                    (pr.valid, pr.page, probe_used[p], used, "in-use")):
                fresh = Cat(*[live[i] & (page[i] == pg) for i in range(n)])
                protocol(m, checks, ~valid | (((Cat(*live) & vec) == fresh)
                                              & (w_match[p] == (w_alloc[p]
                                                                & (w_d[p].page == pg)))),
                         f"port {p}: M's {what} vector differs from a fresh lookup of its page "
                         "(DP1)")
        # the MSHR's promise (§4.2 read step 1: a read of a page with a write-buffer entry in
        # use stalls): a pending MSHR entry keeps its page, and none becomes pending for the
        # page of an entry in use, or of one being written unless it is among that entry's
        # blockers (a read of the page dispatched in the write's cycle on another port,
        # §4.2.4)
        k_n = self._cfg.mshr_entries
        pend_prev = Signal(k_n, name="chk_mshr_pending_prev")
        tags_prev = [Signal.like(self.mshr_tags[k], name=f"chk_mshr_tag_prev{k}")
                     for k in range(k_n)]
        m.d.sync += [pend_prev.eq(self.mshr_pending)] + \
            [tags_prev[k].eq(self.mshr_tags[k]) for k in range(k_n)]
        for k in range(k_n):
            pend = self.mshr_pending[k]
            protocol(m, checks, ~(pend & pend_prev[k]) | (self.mshr_tags[k] == tags_prev[k]),
                     f"MSHR entry {k} changed its page while pending")
            rising = pend & ~pend_prev[k]
            for i in range(n):
                new = Cat(*[w_new_p[p][i] & ~w_blk[p][k] for p in range(len(w_new_p))]).any()
                protocol(m, checks, ~(rising & (used[i] | new)
                                      & (self.mshr_tags[k] == self.tags[i])),
                         f"MSHR entry {k} became pending for the page of write-buffer entry {i}")

    def _coverage_checks(self, m, i, state, cov, full):
        """W1 (coverage never shrinks while OPEN) and W3 (no strict PROGRAM of an incomplete
        page) for entry ``i``; both shapes."""
        checks = self._checks
        was_open = Signal(name=f"chk_was_open{i}")
        cov_before = Signal(len(cov[i]), name=f"chk_cov_before{i}")
        is_open = state[i] == WbState.OPEN
        m.d.sync += [was_open.eq(is_open), cov_before.eq(cov[i])]
        invariant(m, checks, ~(was_open & is_open) | ((cov_before & ~cov[i]) == 0),
                  f"write-buffer entry {i}: coverage shrank while OPEN (W1)")
        if self._cfg.write_timeout_policy == "strict":
            for c in range(len(self.issue)):
                ev = self.issue[c]
                invariant(m, checks, ~(ev.valid & (ev.index == i)) | full[i],
                          f"write-buffer entry {i}: PROGRAM of an incomplete page under "
                          "the strict policy (W3)")

    def _entry_invariants(self, m, i, state, page, head, tail, waiters, serialized, drained):
        """Entry ``i``'s waiter-list and page invariants against the check's own waiter
        count; ``drained`` (all waiters taken, the last not yet launched) counts as FREE
        (§8)."""
        checks, n = self._checks, self._cfg.write_buffer_entries
        free = state[i] == WbState.FREE
        if drained is not None:
            free = free | drained
            invariant(m, checks, ~drained | (state[i] == WbState.RETURN),
                      f"write-buffer entry {i}: drained outside RETURN")
        programming = (state[i] == WbState.QUEUED) | (state[i] == WbState.PROGRAM)
        invariant(m, checks, ~programming | serialized[i],
                  f"write-buffer entry {i} programs while an older entry of its page is "
                  "in use (W4)")
        invariant(m, checks, free == (waiters[i] == 0),
                  f"write-buffer entry {i}: FREE exactly when its waiter list is empty")
        invariant(m, checks, free | ((head[i] == tail[i]) == (waiters[i] == 1)),
                  f"write-buffer entry {i}: head == tail exactly when one waiter is left")
        for j in range(i + 1, n):
            invariant(m, checks, ~((state[i] == WbState.OPEN) & (state[j] == WbState.OPEN)
                                   & (page[i] == page[j])),
                      f"write-buffer entries {i} and {j} are both OPEN for one page")

    def _media_protocols(self, m, state, issue_q):
        """The media side's promises: ``issue`` names a QUEUED entry, ``done`` a PROGRAM one
        whose issue has applied (``tc = ti + tPROG >= td + 2``, §7: tPROG is at least a
        tick, so a completion never meets its issue's flip-flop)."""
        checks, n = self._checks, self._cfg.write_buffer_entries
        states, issued = Array(state), Array(issue_q)
        for c in range(len(self.issue)):
            ev, done = self.issue[c], self.done[c]
            protocol(m, checks,
                     ~ev.valid | ((ev.index < n) & (states[ev.index] == WbState.QUEUED)),
                     f"issue[{c}] names a write-buffer entry that is not QUEUED")
            protocol(m, checks,
                     ~done.valid | ((done.index < n) & (states[done.index] == WbState.PROGRAM)
                                    & ~issued[done.index]),
                     f"done[{c}] names a write-buffer entry that is not PROGRAM")

    def _add_checks(self, m, state, page, head, tail, used, used_e, w_alloc, w_new, merge_en,
                    fires,
                    pops, curs, regss, serialized, cov, full, leaving, stalled, strict_error,
                    mshr_wait, drained, allocates, blocker_live, older_live, older, eligible,
                    elig_q, cand, held, dec, is_open, any_free, free_index, free_count,
                    probe_useds, disps, victims, issue_q):
        """``WriteBuffer._add_checks`` with W (waiters counted when W writes, the lookup vectors
        checked against W's entry too) and the cursor, plus the deep structures' properties: a
        decision only for an OPEN entry, a candidate stays eligible, the offer register holds a
        FLUSH entry, the free list holds exactly the FREE entries no W writes, at most one
        pressure victim per cycle. Lists hold one item per port."""
        cfg, checks = self._cfg, self._checks
        n, P = cfg.write_buffer_entries, len(fires)
        strict = cfg.write_timeout_policy == "strict"
        for d in disps:
            dp = d.payload
            protocol(m, checks, ~d.valid | ((dp.bytes >= 1) & (dp.offset + dp.bytes <= PAGE_BYTES)),
                     "write dispatched with a byte range outside its page")
        all_free = Cat(*[s == WbState.FREE for s in state]).all() & (
            ~w_alloc[0] if P == 1 else ~Cat(*w_alloc).any())
        if P == 1:
            inside = check_waiters(m, checks, cfg.admission, fires[0], disps[0].payload.slot,
                                   pops[0], self.ret, all_free, "write buffer")
        else:
            inside = check_waiters(m, checks, cfg.admission, fires,
                                   [d.payload.slot for d in disps], pops, list(self.ret),
                                   all_free, "write buffer")
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
            self._coverage_checks(m, i, state, cov, full)
            invariant(m, checks, full[i] == cov[i].all(),
                      f"write-buffer entry {i}: the full flag differs from the coverage "
                      "(part C, j)")
        waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
        firsts = []
        for i in range(n):
            gone = pops[0] & (curs[0] == i) if P == 1 else \
                tree_sum([pops[p] & (curs[p] == i) for p in range(P)])
            with m.If(w_new[i]):
                m.d.sync += waiters[i].eq(1)
            with m.Else():
                m.d.sync += waiters[i].eq(waiters[i] + merge_en[i] - gone)
            # DP7: the cursor holds the next waiter of the entry it drains
            first = head[i]
            for regs in regss:
                first = Mux(regs["locked"] & (regs["lock_index"] == i), regs["lk_head"], first)
            firsts.append(first)
        for i in range(n):
            self._entry_invariants(m, i, state, page, firsts, tail, waiters, serialized, drained[i])
        self._media_protocols(m, state, issue_q)
        for ev in ([self.launched] if P == 1 else list(self.launched)):
            protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                     "launched names a write-buffer entry with waiters left to take")
        # §13 (cross-table sets recorded at allocation): the recorded sets equal the per-cycle
        # page comparisons, and start from exact vectors
        tags_e = [self.tags[j] for j in range(n)]
        for p, d in enumerate(disps):
            dp = d.payload
            pend_in = self.disp_pend if P == 1 else self.disp_pend[p]
            fresh_used = Cat(*[used_e[j] & (tags_e[j] == dp.page) for j in range(n)])
            fresh_pend = Cat(*[self.mshr_pending[k] & (self.mshr_tags[k] == dp.page)
                               for k in range(cfg.mshr_entries)])
            protocol(m, checks, ~allocates[p] | ((probe_useds[p] & Cat(*used_e)) == fresh_used),
                     "probe_used differs from the in-use entries of the page of a write that "
                     "allocates (§4.2)")
            protocol(m, checks, ~allocates[p] | ((pend_in & Cat(*self.mshr_pending)) == fresh_pend),
                     "disp_pend differs from the pending MSHR entries of the page of a write that "
                     "allocates (§4.4)")
        for i in range(n):
            v1_older = Cat(*[older[i][j] & used[j] & (page[j] == page[i]) for j in range(n)])
            v1_busy = Cat(*[self.mshr_pending[k] & (self.mshr_tags[k] == page[i])
                            for k in range(cfg.mshr_entries)])
            invariant(m, checks, ~used[i] | (older_live[i] == v1_older),
                      f"write-buffer entry {i}: the recorded older set differs from the page "
                      "comparisons (§4.4)")
            invariant(m, checks, ~used[i] | (blocker_live[i] == v1_busy),
                      f"write-buffer entry {i}: the recorded blocker set differs from the MSHR "
                      "page comparisons (§4.4)")
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
        if P == 1:
            invariant(m, checks, ~any_free | Array(free_now)[free_index],
                      "the write buffer's free list head is not a FREE entry (DP4)")
        else:
            for p in range(P):
                invariant(m, checks, ~allocates[p] | Array(free_now)[self.disp_index[p]],
                          f"port {p}: the write buffer's free list head is not a FREE entry (DP4)")
                for q in range(p):
                    invariant(m, checks, ~(allocates[p] & allocates[q])
                              | (self.disp_index[p] != self.disp_index[q]),
                              f"ports {q} and {p} allocated one write-buffer entry (DP4)")
            k = n // P if cfg.pools == "channel" else n        # entries per pool (§4.5)
            for b in range(0, n, k):
                invariant(m, checks, (tree_sum(victims[b:b + k]) <= 1),
                          "more than one pressure victim in one cycle (DP5)" if k == n else
                          f"more than one pressure victim of pool {b // k} in one cycle (B3)")
            cover(m, checks, Cat(*allocates).all(),
                  "every port allocates a write-buffer entry in one cycle (DP4)")
        return inside, waiters

    def _add_lemmas(self, m, state, head, tail, target, error, drained, regss, inside,
                    waiters, next_slot, w_alloc, w_merge, w_oh, w_d, w_tail, pops, held,
                    eligible, full):
        """What makes the table's properties inductive (docs/formal.md "Induction"), stated
        only in a proof of this block: DP7's stages and the waiter lists as the MSHR's
        (``stage_lemmas``, ``waiter_list_lemmas``, one port). A write merges into an entry
        before its PROGRAM completes (OPEN, or FLUSH from a decision of its lookup cycle,
        DP5), so every state but FREE and RETURN counts as not yet read by a response
        stage. The offer registers hold eligible entries (DP3: eligibility lasts until the
        entry is enqueued); under the strict policy a QUEUED or PROGRAM entry's coverage is
        complete (it was when eligible, and nothing merges after)."""
        checks = self._checks
        self._pools_listed = None   # each pool's listed slots (one list per pool)
        for c, (hv, hi) in enumerate(held):
            lemma(m, checks, ~hv | (Array(eligible)[hi]
                                    & (Array([t.channel for t in target])[hi] == c)),
                  f"channel {c}: the write buffer's offer register holds an entry not "
                  "eligible, or of another channel")
        if self._cfg.write_timeout_policy == "strict":
            for i, s in enumerate(state):
                lemma(m, checks, ~((s == WbState.QUEUED) | (s == WbState.PROGRAM)) | full[i],
                      f"write-buffer entry {i}: QUEUED or PROGRAM with incomplete coverage "
                      "under the strict policy")
        in_return = [(s == WbState.RETURN) & ~drained[i] for i, s in enumerate(state)]
        channel = [t.channel for t in target]
        P = len(regss)
        # shared pools (§4.2.3): a port's lists are its channel's entries (§1, §8)
        owned = ([[ch == p for ch in channel] for p in range(P)]
                 if P > 1 and self._cfg.pools != "channel" else None)
        stage_lemmas(m, checks, regss, in_return, dict(
            h2=head, t2=tail, ch2=channel, bh2=None, er2=error,
            lk_tail=tail, lk_ch=channel, lk_bh=None, lk_er=error), "write-buffer",
            pools=P > 1 and self._cfg.pools == "channel", owned=owned)
        busy = [(s != WbState.FREE) & ~drained[i] for i, s in enumerate(state)]
        before_return = [(s != WbState.FREE) & (s != WbState.RETURN) for s in state]
        rets = [self.ret] if P == 1 else list(self.ret)
        _, self._pools_listed = pool_lemmas(
            m, checks, self._cfg.admission, busy, before_return, in_return, head, tail, regss,
            inside, waiters, next_slot, w_alloc, w_merge, w_oh, [d.slot for d in w_d], w_tail,
            pops, [r.payload.slot for r in rets], "write-buffer", owned=owned)
