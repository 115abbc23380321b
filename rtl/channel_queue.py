"""One channel's queue of page operations, subarray busy bits and issue choice.

Implements docs/timing-contract.md §6 (one queue of ``queue_depth`` operations per channel, at
most one enqueue per cycle, enqueue age) and §7 (issue: one command per channel per cycle,
subarray and active-slot checks, the scheduler policies); sources.md M2, L2.
"""

from __future__ import annotations

__all__ = ["ChannelQueue"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, lemma, protocol, proving
from hbfsim.rtl.layouts import (CmdOp, EntryKind, Widths, cmd_layout, cpl_layout,
                                lane_done_layout, lane_layout, queue_op_layout, tag_layout)
from hbfsim.rtl.logic import (divmod_const, lowest_onehot, lowest_set, named,
                              onehot_select, prefix_or, select, tree_sum)
from hbfsim.rtl.mutations import check_mutations


class ChannelQueue(wiring.Component):
    """Queue, subarray busy bits and active-slot count of one channel.

    The queue is a collapsing queue: slot 0 holds the oldest operation and an issued
    operation's younger neighbours move down by one, so slot order *is* enqueue order (the
    age of §6) and "the oldest candidate" is the lowest candidate slot. An operation enqueued
    in cycle t sits in the queue from t+1. In each cycle the candidates are the operations
    whose subarray is not busy, if the active count is below ``active_per_channel`` (and,
    with ``active_total > 0``, while ``total_room``: the stack-wide cap, §7); the policy
    picks one (§7):

    * ``fcfs``: the oldest candidate;
    * ``read-priority`` and ``partition-*``: the oldest READ, else the oldest PROGRAM;
    * ``write-drain``: as read-priority, but the oldest PROGRAM first while ``drain_window``.

    Issuing in t takes the subarray and an active slot; the completion on ``cpl`` in tc
    releases both, free again from tc+1.

    The choice above is the *issue decision* of ``td`` (docs/timing-contract.md §7), offered
    on ``dec``, and the command register puts it on ``cmd`` in ``td + 1``; the completion on
    ``cpl`` in ``td`` is forwarded into the decision (its subarray and active slot count as
    free), so a freed subarray still has its next command on ``cmd`` in ``tc + 1``. The
    choice is made as one-hot grants (§16 S1): the decided operation is an AND-OR
    select of the slots and the shift enables a prefix OR of the grant; with checks on, every
    cycle asserts it equal to the priority encoders' choice.

    Parameters
    ----------
    cfg : HbfConfig
        ``queue_depth``, ``subarrays_per_channel``, ``active_per_channel`` and ``scheduler``.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): no command to a busy subarray, the policy's
        choice, the queue and active counters within their bounds; completions only for
        busy subarrays (the media's protocol).
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.

    Members
    -------
    enq : ``In(stream.Signature(queue_op_layout))``
        Operation to enqueue; ``ready`` while the occupancy at the start of the cycle is
        below ``queue_depth``.
    cmd : ``Out(cmd_layout)``
        The command issued in this cycle (valid only; the media never refuses, §1): the
        command register, the decision of the previous cycle.
    dec : ``Out(cmd_layout)``
        The issue decision of this cycle (§7; the tables' QUEUED ->
        ISSUED / PROGRAM event).
    cpl : ``In(cpl_layout)``
        The channel's completion of this cycle (valid only).
    drain_window : ``In(1)``
        The stack's write-drain window is open (``write-drain`` only).
    total_room : ``In(1)``
        Only with ``active_total > 0``: the stack has a free active slot for this channel in
        this cycle (its start-of-cycle active count plus the lower channels' issues is below
        ``active_total``; :class:`~hbfsim.rtl.scheduler.Scheduler` computes it).
    count : ``Out(range(queue_depth + 1))``
        Queued operations.
    has_program : ``Out(1)``
        A PROGRAM is queued.
    active : ``Out(range(active_per_channel + 1))``
        Issued operations whose completion has not been delivered before this cycle, with
        this cycle's completion already released (§7).

    Multi-plane commands (``multiplane`` not ``off``, docs/timing-contract.md §7a):
    the busy bits are one per megaplane (MP1); ``cmd``, ``dec`` and ``cpl`` carry a
    megaplane, a planes mask and a row instead of a subarray, a page and a tag (MP2), and
    the tags live here, in one group register per megaplane. These ports change or are
    added:

    dec_ops : ``Out(lane_layout).array(megaplane_planes)``
        The operations of this cycle's decision, lane ``p`` for plane ``p`` of its
        megaplane (the tables' QUEUED -> ISSUED / PROGRAM events, several in one cycle).
    cpl_ops : ``Out(lane_done_layout).array(megaplane_planes)``
        The completion fan-out (MP7): lane ``p`` names the entry the completed megaplane's
        group register holds for plane ``p``, with that plane's flags.
    issued : ``Out(range(megaplane_planes + 1))``
        Operations the decision of this cycle takes (``popcount(planes)``, MP5).
    total_free : ``In(range(active_total + 1))``
        Only with ``active_total > 0`` (replaces ``total_room``): the stack's free active
        slots left to this channel in this cycle (MP5).
    drain : ``In(1)``
        Only under ``multiplane = "megaplane"``: the stack's ``drain`` input, which ends
        every gather window (MP4).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=()):
        self._cfg = cfg
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._w = w = Widths.of(cfg)
        mp = w.planes > 0
        ports = {
            "enq": In(stream.Signature(queue_op_layout(w))),
            "cmd": Out(cmd_layout(w)),
            "cpl": In(cpl_layout(w)),
            "drain_window": In(1),
            "count": Out(range(cfg.queue_depth + 1)),
            "has_program": Out(1),
            "active": Out(range(cfg.active_per_channel + 1)),
        }
        if cfg.active_total:
            if mp:
                ports["total_free"] = In(range(cfg.active_total + 1))
            else:
                ports["total_room"] = In(1)
        ports["dec"] = Out(cmd_layout(w))
        if mp:
            ports["dec_ops"] = Out(lane_layout(w)).array(w.planes)
            ports["cpl_ops"] = Out(lane_done_layout(w)).array(w.planes)
            ports["issued"] = Out(range(w.planes + 1))
            if cfg.multiplane == "megaplane":
                ports["drain"] = In(1)
        super().__init__(ports)

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def elaborate(self, platform):
        if self._w.planes:
            return self._elaborate_multiplane()
        m = Module()
        cfg, w = self._cfg, self._w
        depth = cfg.queue_depth
        mut, checks = self._mutations, self._checks

        slots = [Signal(queue_op_layout(w), name=f"op{k}") for k in range(depth)]
        count = Signal(range(depth + 1))
        busy_reg = Signal(cfg.subarrays_per_channel, name="busy")
        active_reg = Signal(range(cfg.active_per_channel + 1), name="active")
        done = self.cpl.valid
        one = Const(1, len(busy_reg))
        clear_mask = Mux(done, (one << self.cpl.subarray)[:len(busy_reg)], 0)
        # §7: the completion delivered in td is released for the decision of td
        busy = named(m, busy_reg & ~clear_mask, "busy_now")
        active = Signal.like(active_reg, name="active_now")
        m.d.comb += active.eq(active_reg - done)
        m.d.comb += [self.count.eq(count), self.active.eq(active)]

        valid = [named(m, count > k, f"valid{k}") for k in range(depth)]
        is_program = [named(m, slots[k].tag.kind == EntryKind.WBUF, f"program{k}")
                      for k in range(depth)]
        m.d.comb += self.has_program.eq(Cat(*[valid[k] & is_program[k]
                                              for k in range(depth)]).any())

        # ---- issue choice (§7) ----
        # ``active_now < active_per_channel`` from two flip-flops of the next count (``active``
        # below the cap, and at most the cap, which is the room when this cycle's completion
        # releases a slot: a completion names a busy subarray, so ``active >= 1`` then), not
        # through the subtraction
        cap = cfg.active_per_channel
        below = Signal(init=cap > 0, name="active_below")
        at_most = Signal(init=1, name="active_at_most")
        room = Mux(done, at_most, below)
        invariant(m, checks, room == (active < cap),
                  "the registered active room differs from active_now < active_per_channel")
        if "queue-active-off-by-one" in mut:
            room = active <= cfg.active_per_channel
        if cfg.active_total:
            room = room & self.total_room
        room = named(m, room, "room")
        free_sub = [~busy.bit_select(slots[k].subarray, 1) for k in range(depth)]
        if "queue-busy-ignored" in mut:
            free_sub = [Const(1)] * depth
        cand = [named(m, valid[k] & free_sub[k] & room, f"cand{k}") for k in range(depth)]
        issue, grant = self._choose_onehot(m, cand, is_program)
        op = onehot_select(m, slots, grant, "picked")
        # slot k takes its upper neighbour when the issued slot is at or below k
        removed = prefix_or(m, grant, "removed")
        decision = self.dec
        m.d.comb += [
            decision.valid.eq(issue),
            decision.op.eq(Mux(op.tag.kind == EntryKind.WBUF, CmdOp.PROGRAM, CmdOp.READ)),
            decision.subarray.eq(op.subarray),
            decision.page.eq(op.page),
            decision.tag.eq(op.tag),
        ]
        # §7: the command register; the decision of td is on cmd in td + 1
        cmd_reg = Signal(cmd_layout(w), name="cmd_reg")
        m.d.sync += cmd_reg.eq(self.dec)
        m.d.comb += self.cmd.eq(cmd_reg)

        # ---- busy subarrays and active slots: taken at issue, released at completion ----
        set_mask = Mux(issue, (one << op.subarray)[:len(busy_reg)], 0)
        active_next = named(m, active + issue, "active_next")
        m.d.sync += [busy_reg.eq(busy | set_mask), active_reg.eq(active_next),
                     below.eq(active_next < cap), at_most.eq(active_next <= cap)]
        invariant(m, checks, ~issue | ~busy.bit_select(op.subarray, 1),
                  "command issued to a busy subarray (§7)")
        protocol(m, checks, ~done | busy_reg.bit_select(self.cpl.subarray, 1),
                 "completion for a subarray that is not busy")

        # ---- collapsing queue: remove the issued slot, append the enqueued op ----
        if "queue-full-off-by-one" in mut:
            m.d.comb += self.enq.ready.eq(count <= depth)
        else:
            m.d.comb += self.enq.ready.eq(count < depth)
        push = named(m, self.enq.valid & self.enq.ready, "push")
        write_pos = named(m, count - issue, "write_pos")
        m.d.sync += count.eq(count + push - issue)
        for k in range(depth):
            shifted = slots[k + 1] if k + 1 < depth else slots[k]
            with m.If(push & (write_pos == k)):
                m.d.sync += slots[k].eq(self.enq.payload)
            with m.Elif(removed[k]):
                m.d.sync += slots[k].eq(shifted)
        if checks:
            self._add_checks(m, busy_reg, count, active_reg, valid, is_program, cand, op, issue,
                             push)
            # the one-hot choice equals the priority encoders' choice (§7)
            ref_issue, ref_pick = self._choose_binary(m, cand, is_program, "chk_")
            ref_op = select(m, slots, ref_pick, "chk_picked")
            for k in range(depth):
                invariant(m, checks, grant[k] == (ref_issue & (ref_pick == k)),
                          f"slot {k}: the one-hot issue grant differs from the policy's "
                          "choice (§7, §13)")
            invariant(m, checks, (issue == ref_issue) & (~issue | (
                op.as_value() == ref_op.as_value())),
                "the one-hot issue decision differs from the policy's choice (§7, §13)")
        if proving(checks):   # for the controller's proof (rtl/controller_lemmas.py)
            self.proof = dict(busy=busy_reg, held=[(count > k, slots[k]) for k in range(depth)])
        return m

    def _choose_binary(self, m, cand, is_program, prefix=""):
        """The policy's choice (§7) as priority encoders: ``(issue, pick)``, ``pick`` the
        binary slot index (the reference of the
        one-hot choice's check)."""
        depth, policy, mut = self._cfg.queue_depth, self._cfg.scheduler, self._mutations
        any_cand, oldest = lowest_set(m, cand, f"{prefix}oldest")
        pick = Signal(range(max(2, depth)), name=f"{prefix}pick")
        if policy == "fcfs":
            m.d.comb += pick.eq(oldest)
        else:
            any_read, oldest_read = lowest_set(
                m, [cand[k] & ~is_program[k] for k in range(depth)], f"{prefix}oldest_read")
            any_prog, oldest_prog = lowest_set(
                m, [cand[k] & is_program[k] for k in range(depth)], f"{prefix}oldest_program")
            if "queue-program-first" in mut:
                m.d.comb += pick.eq(Mux(any_prog, oldest_prog, oldest))
            else:
                m.d.comb += pick.eq(Mux(any_read, oldest_read, oldest))
            if policy == "write-drain":
                with m.If(self.drain_window & any_prog):
                    m.d.comb += pick.eq(oldest_prog)
        return any_cand, pick

    def _choose_onehot(self, m, cand, is_program):
        """The policy's choice (§7) as a one-hot grant over the slots (§13, one-hot grants): ``(issue,
        grant)``. Each "oldest" is :func:`~hbfsim.rtl.logic.lowest_onehot` of its candidates
        and the policy selects among the grants bit by bit, so the decision's payload is an
        AND-OR of the slots and the queue's shift enables are a prefix OR of the grant, with
        no binary index in between."""
        depth, policy, mut = self._cfg.queue_depth, self._cfg.scheduler, self._mutations
        any_cand, oldest = lowest_onehot(m, cand, "oldest")
        if policy == "fcfs":
            return any_cand, oldest
        any_read, oldest_read = lowest_onehot(
            m, [cand[k] & ~is_program[k] for k in range(depth)], "oldest_read")
        any_prog, oldest_prog = lowest_onehot(
            m, [cand[k] & is_program[k] for k in range(depth)], "oldest_program")
        if "queue-program-first" in mut:
            first, chosen, other = any_prog, oldest_prog, oldest
        else:
            first, chosen, other = any_read, oldest_read, oldest
        if policy == "write-drain":
            # the drain window's PROGRAM first, else the read-priority choice
            drain = named(m, self.drain_window & any_prog, "drain_first")
            grant = [named(m, Mux(drain, oldest_prog[k], Mux(first, chosen[k], other[k])),
                           f"grant{k}") for k in range(depth)]
        else:
            grant = [named(m, Mux(first, chosen[k], other[k]), f"grant{k}")
                     for k in range(depth)]
        return any_cand, grant

    def _add_checks(self, m, busy, count, active, valid, is_program, cand, op, issue, push):
        cfg, checks = self._cfg, self._checks
        depth, policy = cfg.queue_depth, cfg.scheduler
        subarrays = cfg.subarrays_per_channel
        if subarrays & (subarrays - 1):
            protocol(m, checks, ~self.enq.valid | (self.enq.payload.subarray < subarrays),
                     "enqueued operation names a subarray beyond subarrays_per_channel")
        invariant(m, checks, count <= depth, "queue count exceeds queue_depth")
        invariant(m, checks, active <= cfg.active_per_channel,
                  "active count exceeds active_per_channel")
        # Helper invariant (k-induction): one active slot per busy subarray.
        invariant(m, checks, active == sum(busy[s] for s in range(subarrays)),
                  "active count differs from the number of busy subarrays")
        program_out = issue & (op.tag.kind == EntryKind.WBUF)
        read_cand = Cat(*[cand[k] & ~is_program[k] for k in range(depth)]).any()
        prog_cand = Cat(*[cand[k] & is_program[k] for k in range(depth)]).any()
        window = self.drain_window if policy == "write-drain" else Const(0)
        if policy != "fcfs":
            invariant(m, checks, ~program_out | ~read_cand | window,
                      "a PROGRAM issued while a READ was a candidate (§7 read priority)")
        if policy == "write-drain":
            invariant(m, checks, ~(window & prog_cand) | program_out,
                      "a READ issued while the drain window was open and a PROGRAM was a "
                      "candidate (§7 write-drain)")
        cover(m, checks, issue & ~program_out & prog_cand & valid[0] & is_program[0],
              "a READ overtakes an older PROGRAM (read priority)")
        cover(m, checks, program_out & read_cand,
              "a PROGRAM overtakes a READ (drain window)")
        cover(m, checks, issue & valid[0] & ~cand[0], "head of line blocked, a younger op issues")
        cover(m, checks, valid[0] & ~issue & (active == cfg.active_per_channel),
              "issue held by the active cap")
        cover(m, checks, self.enq.valid & ~self.enq.ready, "enqueue refused: queue full")
        cover(m, checks, push & issue, "enqueue and issue in one cycle")
        cover(m, checks, issue & self.cpl.valid, "issue and completion in one cycle")

    # ==================================================== docs/timing-contract.md §7a
    def _elaborate_multiplane(self):
        """Multi-plane commands (MP1-MP9): the choice of §7 over candidates
        whose megaplane is free and (``megaplane``) whose megapage is full or has waited the
        window; the decision takes the chosen operation's group."""
        m = Module()
        cfg, w = self._cfg, self._w
        depth, policy = cfg.queue_depth, cfg.scheduler
        M, S = w.planes, cfg.subarrays_per_channel
        G = S // M
        gather = cfg.multiplane == "megaplane"
        window = cfg.hyperpage_window if gather else 0
        cap = cfg.active_per_channel
        checks = self._checks

        slots = [Signal(queue_op_layout(w), name=f"op{k}") for k in range(depth)]
        # MP4: cycles since enqueue, saturating at the window (td - te >= window)
        age = [Signal(range(window + 1), name=f"age{k}") for k in range(depth)] \
            if window else []
        count = Signal(range(depth + 1))
        busy_reg = Signal(G, name="busy")                 # MP1: one bit per megaplane
        active_reg = Signal(range(cap + 1), name="active")
        # MP2: the group register of each megaplane, the tag of each plane's operation
        group = [[Signal(tag_layout(w), name=f"group{g}_plane{p}") for p in range(M)]
                 for g in range(G)]

        # ---- §7 forwarding with MP1 / MP5: the completion releases its megaplane and
        # popcount(planes) active slots for the decision of the same cycle ----
        cpl = self.cpl
        done = cpl.valid
        released = named(m, Mux(done, tree_sum([cpl.planes[p] for p in range(M)]), 0),
                         "released")
        one = Const(1, G)
        clear_mask = Mux(done, (one << cpl.megaplane)[:G], 0)
        busy = named(m, busy_reg & ~clear_mask, "busy_now")
        active = Signal.like(active_reg, name="active_now")
        m.d.comb += [active.eq(active_reg - released), self.count.eq(count),
                     self.active.eq(active)]

        valid = [named(m, count > k, f"valid{k}") for k in range(depth)]
        is_program = [named(m, slots[k].tag.kind == EntryKind.WBUF, f"program{k}")
                      for k in range(depth)]
        m.d.comb += self.has_program.eq(Cat(*[valid[k] & is_program[k]
                                              for k in range(depth)]).any())
        # megaplane, plane and row of every slot (MP2: row = local page div S)
        mega, plane, row = [], [], []
        for k in range(depth):
            g, p = divmod_const(slots[k].subarray, M)
            r, _ = divmod_const(slots[k].page, S)
            mega.append(named(m, g[:w.megaplane], f"megaplane{k}"))
            plane.append(named(m, p, f"plane{k}"))
            row.append(named(m, r[:w.row], f"row{k}"))

        # ---- MP5: the free active slots of this channel (and of the stack) ----
        free = named(m, cap - active, "free_slots")
        if cfg.active_total:
            slots_free = named(m, Mux(self.total_free < free, self.total_free, free),
                               "slots_free")
        else:
            slots_free = free
        room = named(m, slots_free != 0, "room")

        # ---- MP4: the megapage count of every slot, kept in a register per slot: the
        # planes its (op, megaplane, row) holds in the queue (a window of 0 issues what is
        # queued, so it needs none) ----
        if window:
            held = [Signal(M, name=f"megapage{k}") for k in range(depth)]
            ready = [named(m, held[k].all() | self.drain | (age[k] == window),
                           f"gathered{k}") for k in range(depth)]
        else:
            held = []
            ready = [Const(1)] * depth
        cand = [named(m, valid[k] & ~busy.bit_select(mega[k], 1) & room & ready[k],
                      f"cand{k}") for k in range(depth)]

        # ---- the policy's choice (§7, unchanged) ----
        any_cand, oldest = lowest_set(m, cand, "oldest")
        pick = Signal(range(max(2, depth)))
        if policy == "fcfs":
            m.d.comb += pick.eq(oldest)
        else:
            any_read, oldest_read = lowest_set(
                m, [cand[k] & ~is_program[k] for k in range(depth)], "oldest_read")
            any_prog, oldest_prog = lowest_set(
                m, [cand[k] & is_program[k] for k in range(depth)], "oldest_program")
            m.d.comb += pick.eq(Mux(any_read, oldest_read, oldest))
            if policy == "write-drain":
                with m.If(self.drain_window & any_prog):
                    m.d.comb += pick.eq(oldest_prog)
        issue = any_cand
        op = select(m, slots, pick, "picked")
        pick_mega = select(m, mega, pick, "picked_megaplane")
        pick_row = select(m, row, pick, "picked_row")

        # ---- MP3, MP5: the group, oldest first, one operation per plane, cut to the slots
        chosen = [named(m, issue & (pick == k), f"chosen{k}") for k in range(depth)]
        if gather:
            match = [named(m, chosen[k] | (issue & valid[k] & (is_program[k] ==
                                                              (op.tag.kind == EntryKind.WBUF))
                                           & (mega[k] == pick_mega) & (row[k] == pick_row)),
                           f"match{k}") for k in range(depth)]
            if not cfg.mshr_merge:
                # two READs of one page on one plane (MP3): the oldest only
                first = [named(m, match[k] & ~Cat(*[match[j] & (plane[j] == plane[k])
                                                    for j in range(k)]).any()
                               if k else match[k], f"first{k}") for k in range(depth)]
            else:
                first = match
            taken, ahead = [], Const(0, 1)
            for k in range(depth):
                taken.append(named(m, first[k] & (ahead < slots_free), f"grouped{k}"))
                ahead = named(m, ahead + first[k], f"ahead{k + 1}")
        else:
            taken = chosen     # page: every command uses one plane
        n_taken = named(m, tree_sum(taken), "group_size")
        lane_sel = [[taken[k] & (plane[k] == p) for k in range(depth)] for p in range(M)]
        lane_tag = []
        for p in range(M):
            t = Signal(tag_layout(w), name=f"lane_tag{p}")
            acc = Const(0, len(t.as_value()))
            for k in range(depth):
                acc = acc | Mux(lane_sel[p][k], slots[k].tag.as_value(), 0)
            m.d.comb += t.eq(acc)
            lane_tag.append(t)
        planes = named(m, Cat(*[Cat(*lane_sel[p]).any() for p in range(M)]), "group_planes")

        dec = self.dec
        m.d.comb += [
            dec.valid.eq(issue),
            dec.op.eq(Mux(op.tag.kind == EntryKind.WBUF, CmdOp.PROGRAM, CmdOp.READ)),
            dec.megaplane.eq(pick_mega),
            dec.planes.eq(planes),
            dec.row.eq(pick_row),
            self.issued.eq(n_taken),
        ]
        for p in range(M):
            m.d.comb += [self.dec_ops[p].valid.eq(planes[p]),
                         self.dec_ops[p].tag.eq(lane_tag[p])]
        # §7: the command register; the decision of td is on cmd in td + 1
        cmd_reg = Signal(cmd_layout(w), name="cmd_reg")
        m.d.sync += cmd_reg.eq(dec)
        m.d.comb += self.cmd.eq(cmd_reg)

        # ---- MP2, MP7: the group registers and the completion fan-out ----
        for g in range(G):
            with m.If(issue & (pick_mega == g)):
                m.d.sync += [group[g][p].eq(lane_tag[p]) for p in range(M)]
        for p in range(M):
            # (one megaplane: no index, a one-entry case statement would not lint)
            held_tag = Array([group[g][p] for g in range(G)])[cpl.megaplane] if G > 1 \
                else group[0][p]
            m.d.comb += [
                self.cpl_ops[p].valid.eq(done & cpl.planes[p]),
                self.cpl_ops[p].tag.eq(held_tag),
                self.cpl_ops[p].buffer_hit.eq(cpl.buffer_hit[p]),
                self.cpl_ops[p].error.eq(cpl.error[p]),
            ]

        # ---- MP1, MP5: the megaplane and popcount(planes) slots, taken at the decision ----
        set_mask = Mux(issue, (one << pick_mega)[:G], 0)
        m.d.sync += [busy_reg.eq(busy | set_mask), active_reg.eq(active + n_taken)]

        # ---- collapsing queue: remove the group's slots, append the enqueued op ----
        m.d.comb += self.enq.ready.eq(count < depth)
        push = named(m, self.enq.valid & self.enq.ready, "push")
        write_pos = named(m, count - n_taken, "write_pos")
        m.d.sync += count.eq(count + push - n_taken)
        # slot j moves down by the number of grouped slots below it
        below, acc = [], Const(0, 1)
        for j in range(depth):
            below.append(named(m, acc, f"removed_below{j}"))
            acc = acc + taken[j]

        def older(a):
            return Mux(a == window, window, a + 1)

        if window:
            # the megapage registers' next state: the group leaves (its megapage keeps the
            # planes of the operations that stay: cut off, or a second read of a plane),
            # then the enqueued operation joins its megapage
            onehot = [(Const(1, M) << plane[k])[:M] for k in range(depth)]
            rest = Const(0, M)
            for k in range(depth):
                rest = rest | Mux(match[k] & ~taken[k], onehot[k], 0)
            rest = named(m, rest, "megapage_rest")
            x = self.enq.payload
            x_mega, x_plane = divmod_const(x.subarray, M)
            x_row, _ = divmod_const(x.page, S)
            x_prog = x.tag.kind == EntryKind.WBUF
            x_bit = named(m, (Const(1, M) << x_plane)[:M], "enq_plane")
            joins = [named(m, push & valid[k] & ~taken[k] & (is_program[k] == x_prog)
                           & (mega[k] == x_mega[:w.megaplane]) & (row[k] == x_row[:w.row]),
                           f"joins{k}") for k in range(depth)]
            stay = [named(m, Mux(match[k], rest, held[k]) | Mux(joins[k], x_bit, 0),
                          f"megapage_next{k}") for k in range(depth)]
            new_held = x_bit
            for k in range(depth):
                new_held = new_held | Mux(joins[k], onehot[k], 0)
            new_held = named(m, new_held, "megapage_enq")

        for k in range(depth):
            with m.If(push & (write_pos == k)):
                m.d.sync += slots[k].eq(self.enq.payload)
                if window:
                    m.d.sync += [age[k].eq(min(1, window)), held[k].eq(new_held)]
            with m.Elif(issue):
                for d in range(min(M, depth - 1 - k) + 1):
                    j = k + d
                    with m.If(~taken[j] & (below[j] == d)):
                        m.d.sync += slots[k].eq(slots[j])
                        if window:
                            m.d.sync += [age[k].eq(older(age[j])), held[k].eq(stay[j])]
            with m.Else():
                if window:
                    m.d.sync += [age[k].eq(older(age[k])), held[k].eq(stay[k])]
        if checks:
            self._add_multiplane_checks(m, busy_reg, busy, active_reg, count, valid, taken,
                                        chosen, issue, pick_mega, pick_row, planes, n_taken,
                                        slots_free, mega, row, is_program, op, lane_sel, push,
                                        ready, slots, first if gather else taken, held, plane)
        return m

    def _add_multiplane_checks(self, m, busy_reg, busy, active_reg, count, valid, taken, chosen,
                               issue, pick_mega, pick_row, planes, n_taken, slots_free, mega,
                               row, is_program, op, lane_sel, push, ready, slots, first,
                               megapage, plane):
        """docs/timing-contract.md §7a, "What each implementation changes": a
        megaplane holds at most one command; a command's operations share op, row and
        megaplane; active counts equal the held commands' popcounts."""
        cfg, checks, w = self._cfg, self._checks, self._w
        depth, M = cfg.queue_depth, w.planes
        G = cfg.subarrays_per_channel // M
        cpl = self.cpl
        # the planes mask each megaplane's command holds (bookkeeping for the properties)
        held = [Signal(M, name=f"chk_held{g}") for g in range(G)]
        for g in range(G):
            with m.If(issue & (pick_mega == g)):
                m.d.sync += held[g].eq(planes)
            with m.Elif(cpl.valid & (cpl.megaplane == g)):
                m.d.sync += held[g].eq(0)
        invariant(m, checks, count <= depth, "queue count exceeds queue_depth")
        invariant(m, checks, active_reg <= cfg.active_per_channel,
                  "active count exceeds active_per_channel")
        invariant(m, checks, ~issue | ~busy.bit_select(pick_mega, 1),
                  "command issued to a megaplane that holds one (MP1)")
        protocol(m, checks, ~cpl.valid | busy_reg.bit_select(cpl.megaplane, 1),
                 "completion for a megaplane that holds no command")
        held_now = Array(held)[cpl.megaplane] if G > 1 else held[0]
        protocol(m, checks, ~cpl.valid | (cpl.planes == held_now),
                 "completion's planes differ from its command's (MP7)")
        for g in range(G):
            invariant(m, checks, busy_reg[g] == held[g].any(),
                      f"megaplane {g}: busy exactly while it holds a command (MP1)")
        invariant(m, checks, active_reg == tree_sum([held[g][p] for g in range(G)
                                                     for p in range(M)]),
                  "active count differs from the held commands' popcounts (MP5)")
        invariant(m, checks, ~issue | Cat(*[chosen[k] & taken[k] for k in range(depth)]).any(),
                  "the chosen operation is not in its command's group (MP3)")
        invariant(m, checks, n_taken <= slots_free, "a group larger than the free slots (MP5)")
        kind = op.tag.kind == EntryKind.WBUF
        for k in range(depth):
            invariant(m, checks, ~taken[k] | (valid[k] & (is_program[k] == kind)
                                             & (mega[k] == pick_mega)
                                             & (row[k] == pick_row)),
                      f"slot {k}: grouped with another op, row or megaplane (MP3)")
        for p in range(M):
            # one operation per plane: its lane names it alone (none is lost or merged)
            invariant(m, checks, tree_sum(lane_sel[p]) <= 1,
                      f"plane {p}: two operations of one command (MP3)")
        # the neighbours' promises: the mapper's subarray is the local page mod S (§3), and
        # with merging on no two queued operations of one kind share a page (MP3: one
        # mergeable MSHR entry per page, W4 for the write buffer)
        d = self.enq.payload
        _, sub = divmod_const(d.page, cfg.subarrays_per_channel)
        protocol(m, checks, ~self.enq.valid | (sub == d.subarray),
                 "enqueued operation's subarray is not its page mod subarrays_per_channel")
        if cfg.mshr_merge:
            kind_in = d.tag.kind == EntryKind.WBUF
            for k in range(depth):
                protocol(m, checks, ~(push & valid[k] & (is_program[k] == kind_in)
                                      & (slots[k].page == d.page)),
                         f"enqueued operation's page is queued already (slot {k}, MP3)")
        # a proof's lemmas: the queued operations keep those promises
        for k in range(depth):
            _, sub_k = divmod_const(slots[k].page, cfg.subarrays_per_channel)
            lemma(m, checks, ~valid[k] | (sub_k == slots[k].subarray),
                  f"slot {k}: its subarray is not its page mod subarrays_per_channel")
            for j in range(k) if cfg.mshr_merge else ():
                lemma(m, checks, ~(valid[j] & valid[k] & (is_program[j] == is_program[k])
                                   & (slots[j].page == slots[k].page)),
                      f"slots {j} and {k}: one page queued twice (MP3)")
        if megapage:
            # the megapage registers equal one scan of the queue (model/megaplane.py's count)
            for k in range(depth):
                scan = Const(0, M)
                for j in range(depth):
                    same = valid[j] & (is_program[j] == is_program[k]) & (mega[j] == mega[k]) \
                        & (row[j] == row[k])
                    scan = scan | Mux(same, (Const(1, M) << plane[j])[:M], 0)
                invariant(m, checks, ~valid[k] | (megapage[k] == scan),
                          f"slot {k}: its megapage register differs from a scan of the queue "
                          "(MP4)")
        two = tree_sum([planes[p] for p in range(M)]) >= 2
        cover(m, checks, issue & two, "a command of several planes")
        cover(m, checks, issue & (tree_sum(first) > n_taken),
              "a group cut to the free active slots (MP5)")
        cover(m, checks, issue & cpl.valid & (cpl.megaplane == pick_mega),
              "a megaplane released and claimed in one cycle (§7 forwarding)")
        cover(m, checks, Cat(*[valid[k] & ~ready[k] for k in range(depth)]).any()
              & ~issue & (active_reg == 0), "an operation waits for its megapage (MP4)")
