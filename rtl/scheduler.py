"""Stack scheduler: the channel queues, the enqueue arbiter and the write-drain window.

Implements docs/timing-contract.md §6 (enqueue arbiter: per channel the MSHR's offer before
the write buffer's) and §7 (issue per channel through :class:`ChannelQueue`, and the
stack's write-drain window); sources.md M2.
"""

from __future__ import annotations

__all__ = ["Scheduler"]

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.channel_queue import ChannelQueue
from hbfsim.rtl.checks import check_mode, cover, invariant
from hbfsim.rtl.layouts import (Widths, cmd_layout, cpl_layout, lane_done_layout, lane_layout,
                                queue_op_layout)
from hbfsim.rtl.mutations import check_mutations


class Scheduler(wiring.Component):
    """The ``channels`` channel queues of one stack, fed by the MSHR and the write buffer.

    Enqueue arbiter (§6): per channel at most one enqueue per cycle; the MSHR's offer (its
    lowest ready entry of that channel) wins over the write buffer's, and either is taken only
    while the queue's occupancy at the start of the cycle is below ``queue_depth``.

    Write-drain window (§7, ``scheduler = write-drain`` only), a function of start-of-cycle
    state: closed -> open when ``wb_occupied >= write_drain_high_water``, a PROGRAM is queued
    in the stack and the cooldown has passed; open -> closed when no PROGRAM is queued or the
    window has been open ``write_drain_window_ticks`` cycles, and the cooldown then lasts
    ``write_drain_window_ticks`` cycles. Counters stand in for the contract's absolute
    ``start`` and ``cooldown`` ticks.

    Stack-wide active cap (§7, ``active_total > 0``): channel ``c`` may issue in t only while
    the stack's active count at the start of t plus the commands channels ``0..c-1`` issue in
    t is below ``active_total``, so channels take the stack's slots in ascending order (a
    ripple of adders over the channels' ``active`` registers and this cycle's issues): the
    sum is over the decisions of ``td`` and the active counts with the completions of ``td``
    released (§7), and ``cmd[c]`` is each queue's command register.

    Parameters
    ----------
    cfg : HbfConfig
        ``channels``, ``scheduler``, ``write_drain_high_water``, ``write_drain_window_ticks``,
        ``write_buffer_entries``, ``active_total`` and the :class:`ChannelQueue` keys.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`), passed on to the queues: the arbiter's
        priority and the window counter's bound; covers of every window transition.
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`), passed on to the queues.

    Members
    -------
    mshr_enq, wb_enq : ``In(stream.Signature(queue_op_layout)).array(channels)``
        Per-channel offers of the MSHR and of the write buffer.
    cmd : ``Out(cmd_layout).array(channels)``
        Commands issued in this cycle (decided in the previous cycle, §7).
    dec : ``Out(cmd_layout).array(channels)``
        The issue decisions of this cycle (§7), with the completions of
        this cycle forwarded into them.
    cpl : ``In(cpl_layout).array(channels)``
        Completions delivered in this cycle.
    wb_occupied : ``In(range(write_buffer_entries + 1))``
        Non-FREE write-buffer entries.
    drain_open : ``Out(1)``
        The write-drain window is open in this cycle.
    dec_ops, cpl_ops : ``Out(lane_layout).array(n)``, ``Out(lane_done_layout).array(n)``
        Multi-plane commands only (docs/timing-contract.md §7a), ``n = channels *
        megaplane_planes``: the operations of each channel's decision and completion, lane
        ``c * megaplane_planes + p`` for plane ``p`` of channel ``c``'s megaplane
        (:class:`ChannelQueue`). The stack-wide cap then counts each channel's group size,
        ``popcount(planes)`` (MP5).
    drain : ``In(1)``
        Only under ``multiplane = "megaplane"``: ``drain`` ends every gather window (MP4).
    """

    def __init__(self, cfg: HbfConfig, *, checks: bool | str = True, mutations=()):
        self._cfg = cfg
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._w = w = Widths.of(cfg)
        c = cfg.channels
        ports = {
            "mshr_enq": In(stream.Signature(queue_op_layout(w))).array(c),
            "wb_enq": In(stream.Signature(queue_op_layout(w))).array(c),
            "cmd": Out(cmd_layout(w)).array(c),
            "cpl": In(cpl_layout(w)).array(c),
            "wb_occupied": In(range(cfg.write_buffer_entries + 1)),
            "drain_open": Out(1),
        }
        ports["dec"] = Out(cmd_layout(w)).array(c)
        if w.planes:
            ports["dec_ops"] = Out(lane_layout(w)).array(c * w.planes)
            ports["cpl_ops"] = Out(lane_done_layout(w)).array(c * w.planes)
            if cfg.multiplane == "megaplane":
                ports["drain"] = In(1)
        super().__init__(ports)

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg, checks = self._cfg, self._checks
        queues = self.queues = []   # (the list for the controller's proof, controller_lemmas.py)
        for c in range(cfg.channels):
            q = ChannelQueue(cfg, checks=checks, mutations=self._mutations)
            m.submodules[f"queue{c}"] = q
            queues.append(q)
            mshr, wb = self.mshr_enq[c], self.wb_enq[c]
            # §6: the MSHR's offer first ("scheduler-wb-first" swaps the two, a mutation).
            first, second = (wb, mshr) if "scheduler-wb-first" in self._mutations else (mshr, wb)
            m.d.comb += [
                q.enq.valid.eq(mshr.valid | wb.valid),
                q.enq.payload.eq(Mux(first.valid, first.payload, second.payload)),
                first.ready.eq(q.enq.ready),
                second.ready.eq(q.enq.ready & ~first.valid),
                self.cmd[c].eq(q.cmd),
                q.cpl.eq(self.cpl[c]),
                q.drain_window.eq(self.drain_open),
            ]
            m.d.comb += self.dec[c].eq(q.dec)
            planes = self._w.planes
            for p in range(planes):
                m.d.comb += [self.dec_ops[c * planes + p].eq(q.dec_ops[p]),
                             self.cpl_ops[c * planes + p].eq(q.cpl_ops[p])]
            if cfg.multiplane == "megaplane":
                m.d.comb += q.drain.eq(self.drain)
            invariant(m, checks, ~(wb.valid & wb.ready & mshr.valid),
                      f"channel {c}: the write buffer's offer taken over the MSHR's (§6)")
            cover(m, checks, mshr.valid & wb.valid & q.enq.ready,
                  f"channel {c}: both tables offer, the MSHR wins")

        if cfg.active_total and self._w.planes:
            # MP5: each channel may take the stack's slots left after the lower channels'
            # groups (popcount(planes) each)
            used = sum((q.active for q in queues[1:]), queues[0].active)
            for q in queues:
                m.d.comb += q.total_free.eq(Mux(used < cfg.active_total,
                                                cfg.active_total - used, 0))
                used = used + q.issued
        elif cfg.active_total:
            # start-of-cycle stack count, then each channel's issue in ascending order
            used = sum((q.active for q in queues[1:]), queues[0].active)
            for q in queues:
                m.d.comb += q.total_room.eq(used < cfg.active_total)
                used = used + q.dec.valid

        if cfg.scheduler == "write-drain":
            window = cfg.write_drain_window_ticks
            was_open = Signal()
            elapsed = Signal(range(window + 1))   # t - start while open
            cooling = Signal(range(max(2, window)))  # cooldown - t while positive
            programs = Cat(*[q.has_program for q in queues]).any()
            with m.If(was_open):
                m.d.comb += self.drain_open.eq(programs & (elapsed < window))
            with m.Else():
                m.d.comb += self.drain_open.eq((self.wb_occupied >= cfg.write_drain_high_water)
                                               & programs & (cooling == 0))
            m.d.sync += was_open.eq(self.drain_open)
            with m.If(self.drain_open):
                m.d.sync += elapsed.eq(Mux(was_open, Mux(elapsed == window, window, elapsed + 1),
                                           1))
            with m.If(was_open & ~self.drain_open):
                m.d.sync += cooling.eq(window - 1)
            with m.Elif(cooling != 0):
                m.d.sync += cooling.eq(cooling - 1)
            invariant(m, checks, elapsed <= window, "drain window counter beyond the window")
            cover(m, checks, ~was_open & self.drain_open, "drain window opens")
            cover(m, checks, was_open & ~self.drain_open & programs,
                  "drain window closes after write_drain_window_ticks")
            cover(m, checks, was_open & ~self.drain_open & ~programs,
                  "drain window closes: no PROGRAM queued")
            cover(m, checks, ~was_open & (cooling != 0) & programs
                  & (self.wb_occupied >= cfg.write_drain_high_water),
                  "drain window held closed by the cooldown")
        return m
