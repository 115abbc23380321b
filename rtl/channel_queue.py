"""One channel's queue of page operations, subarray busy bits and issue choice.

Implements docs/timing-contract.md §6 (one queue of ``queue_depth`` operations per channel, at
most one enqueue per cycle, enqueue age) and §7 (issue: one command per channel per cycle,
subarray and active-slot checks, the scheduler policies); sources.md M2, L2.
"""

from __future__ import annotations

__all__ = ["ChannelQueue"]

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol
from hbfsim.rtl.layouts import (CmdOp, EntryKind, Widths, cmd_layout, cpl_layout,
                                queue_op_layout)
from hbfsim.rtl.logic import lowest_set, named, select
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

    Under contract 2 (``cfg.contract == 2``, docs/timing-contract-v2.md §7) the choice above
    is the *issue decision* of ``td``, offered on ``dec``, and the command register puts it
    on ``cmd`` in ``td + 1``; the completion on ``cpl`` in ``td`` is forwarded into the
    decision (its subarray and active slot count as free), so a freed subarray still has its
    next command on ``cmd`` in ``tc + 1``.

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
        The command issued in this cycle (valid only; the media never refuses, §1). Under
        contract 2 a register: the decision of the previous cycle.
    dec : ``Out(cmd_layout)``
        Contract 2 only: the issue decision of this cycle (v2 §7; the tables' QUEUED ->
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
        Issued operations whose completion has not been delivered (contract 2: before this
        cycle, with this cycle's completion already released, v2 §7).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=()):
        self._cfg = cfg
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._w = w = Widths.of(cfg)
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
            ports["total_room"] = In(1)
        if cfg.contract == 2:
            ports["dec"] = Out(cmd_layout(w))
        super().__init__(ports)

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg, w = self._cfg, self._w
        depth = cfg.queue_depth
        policy = cfg.scheduler
        mut, checks = self._mutations, self._checks

        slots = [Signal(queue_op_layout(w), name=f"op{k}") for k in range(depth)]
        count = Signal(range(depth + 1))
        busy_reg = Signal(cfg.subarrays_per_channel, name="busy")
        active_reg = Signal(range(cfg.active_per_channel + 1), name="active")
        v2 = cfg.contract == 2
        done = self.cpl.valid
        one = Const(1, len(busy_reg))
        clear_mask = Mux(done, (one << self.cpl.subarray)[:len(busy_reg)], 0)
        if v2:
            # v2 §7: the completion delivered in td is released for the decision of td
            busy = named(m, busy_reg & ~clear_mask, "busy_now")
            active = Signal.like(active_reg, name="active_now")
            m.d.comb += active.eq(active_reg - done)
        else:
            busy, active = busy_reg, active_reg
        m.d.comb += [self.count.eq(count), self.active.eq(active)]

        valid = [named(m, count > k, f"valid{k}") for k in range(depth)]
        is_program = [named(m, slots[k].tag.kind == EntryKind.WBUF, f"program{k}")
                      for k in range(depth)]
        m.d.comb += self.has_program.eq(Cat(*[valid[k] & is_program[k]
                                              for k in range(depth)]).any())

        # ---- issue choice (§7) ----
        room = active < cfg.active_per_channel
        if "queue-active-off-by-one" in mut:
            room = active <= cfg.active_per_channel
        if cfg.active_total:
            room = room & self.total_room
        room = named(m, room, "room")
        free_sub = [~busy.bit_select(slots[k].subarray, 1) for k in range(depth)]
        if "queue-busy-ignored" in mut:
            free_sub = [Const(1)] * depth
        cand = [named(m, valid[k] & free_sub[k] & room, f"cand{k}") for k in range(depth)]
        any_cand, oldest = lowest_set(m, cand, "oldest")
        pick = Signal(range(max(2, depth)))
        if policy == "fcfs":
            m.d.comb += pick.eq(oldest)
        else:
            any_read, oldest_read = lowest_set(
                m, [cand[k] & ~is_program[k] for k in range(depth)], "oldest_read")
            any_prog, oldest_prog = lowest_set(
                m, [cand[k] & is_program[k] for k in range(depth)], "oldest_program")
            if "queue-program-first" in mut:
                m.d.comb += pick.eq(Mux(any_prog, oldest_prog, oldest))
            else:
                m.d.comb += pick.eq(Mux(any_read, oldest_read, oldest))
            if policy == "write-drain":
                with m.If(self.drain_window & any_prog):
                    m.d.comb += pick.eq(oldest_prog)
        issue = any_cand
        op = select(m, slots, pick, "picked")
        decision = self.dec if v2 else self.cmd
        m.d.comb += [
            decision.valid.eq(issue),
            decision.op.eq(Mux(op.tag.kind == EntryKind.WBUF, CmdOp.PROGRAM, CmdOp.READ)),
            decision.subarray.eq(op.subarray),
            decision.page.eq(op.page),
            decision.tag.eq(op.tag),
        ]
        if v2:
            # v2 §7: the command register; the decision of td is on cmd in td + 1
            cmd_reg = Signal(cmd_layout(w), name="cmd_reg")
            m.d.sync += cmd_reg.eq(self.dec)
            m.d.comb += self.cmd.eq(cmd_reg)

        # ---- busy subarrays and active slots: taken at issue, released at completion ----
        set_mask = Mux(issue, (one << op.subarray)[:len(busy_reg)], 0)
        if v2:
            m.d.sync += [busy_reg.eq(busy | set_mask), active_reg.eq(active + issue)]
        else:
            m.d.sync += [
                busy_reg.eq((busy_reg | set_mask) & ~clear_mask),
                active_reg.eq(active_reg + issue - done),
            ]
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
            with m.Elif(issue & (pick <= k)):
                m.d.sync += slots[k].eq(shifted)
        if checks:
            self._add_checks(m, busy_reg, count, active_reg, valid, is_program, cand, op, issue,
                             push)
        return m

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
