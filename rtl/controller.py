"""The stack controller: the blocks of one HBF stack behind the contract's four interfaces.

Implements docs/history.md §1 (ports ``req``, ``resp``, ``cmd[c]``, ``cpl[c]``,
``drain``), §4.1 (ingress, admission and the map register M) and §4.2 (dispatch from M) by
composing :mod:`.admission`, :mod:`.mapper`, :mod:`.mshr`, :mod:`.write_buffer`,
:mod:`.scheduler` and :mod:`.response`. Under ``contract = 2`` (stack shape) it implements
docs/timing-contract.md §4.1 and §4a instead: the two-entry ingress queue Q
(:mod:`.stage_queue`) whose head is mapped (stage X) and moves into M, M dispatching from
``ta + 2``.
"""

from __future__ import annotations

__all__ = ["Controller", "check_supported"]

from amaranth.hdl import Assert, Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.admission import Admission
from hbfsim.rtl.checks import check_mode
from hbfsim.rtl.controller_ports import elaborate_channel_shape
from hbfsim.rtl.layouts import (EntryKind, ReqOp, Widths, cmd_layout, cpl_layout, req_layout,
                                resp_layout, target_layout)
from hbfsim.rtl.logic import named
from hbfsim.rtl.mapper import Mapper
from hbfsim.rtl.mshr import Mshr
from hbfsim.rtl.mutations import check_mutations
from hbfsim.rtl.response import ResponseArbiter
from hbfsim.rtl.scheduler import Scheduler
from hbfsim.rtl.stage_queue import StageQueue
from hbfsim.rtl.write_buffer import (WriteBuffer, flushes_layout, sector_range,
                                     sectors_layout)


def check_supported(cfg: HbfConfig) -> None:
    """Raise :class:`ValueError` naming the first key the RTL does not implement.

    The RTL leaves out two model-only features (docs/rtl.md): the logic-die page cache and
    the ``ssd`` media mode. Any number of stacks is supported: one stack is a
    :class:`Controller`, several are a :class:`hbfsim.rtl.system.System` (contract §2).
    ``planes_per_die``, ``megaplane_planes`` and the SRAM sizes are accepted: they name
    groups of subarrays and capacities that nothing uses while ``multiplane = "off"``, so
    they change nothing here. Contract 2 is implemented in the stack shape (step 3 of
    timing-contract.md §18) and in the channel shape (step 6,
    :mod:`hbfsim.rtl.controller_ports`; several stacks: :class:`~hbfsim.rtl.system.System`
    as wiring of ``S * C`` ports, v2 §2). Multi-plane commands (``multiplane = "page"``
    or ``"megaplane"``, docs/timing-contract.md §7a) are implemented in both shapes
    (the configuration already refuses them under contract 1). Amendment A
    (``pipeline = "deep"``, docs/timing-contract.md) is implemented in both shapes and
    every mode (:mod:`hbfsim.rtl.controller_deep`, parameterized by the port count).
    """
    pipeline = getattr(cfg, "pipeline", "standard")
    if pipeline not in ("standard", "deep"):
        raise ValueError(f"pipeline must be standard or deep, not {pipeline!r}")
    if pipeline == "deep":
        host_ports = getattr(cfg, "host_ports", "stack")
        for ok, key, value, want in (
                (cfg.contract == 2, "contract", cfg.contract, "contract = 2"),
                (host_ports in ("stack", "channel"), "host_ports", host_ports,
                 "host_ports = 'stack' or 'channel'")):
            if not ok:
                raise ValueError(f"pipeline = 'deep' with {key} = {value!r}: the "
                                 f"registered pipeline needs {want} "
                                 "(docs/timing-contract.md)")
    if getattr(cfg, "multiplane", "off") != "off" and cfg.contract != 2:
        raise ValueError(f"multiplane = {cfg.multiplane!r}: multi-plane commands extend "
                         "contract 2 (docs/timing-contract.md §7a); the RTL needs "
                         "contract = 2 or multiplane = 'off'")
    if cfg.page_cache_pages > 0:
        raise ValueError(f"page_cache_pages = {cfg.page_cache_pages}: the logic-die page cache "
                         "is model-only; the RTL needs page_cache_pages = 0")
    if cfg.media_mode != "hbf":
        raise ValueError(f"media_mode = {cfg.media_mode!r}: the RTL implements only "
                         "media_mode = 'hbf'")


class Controller(wiring.Component):
    """One HBF stack controller built from an :class:`HbfConfig`.

    Ingress (§4.1): ``req.ready`` is high while a request slot is free and the map register
    M is empty at the start of the cycle or dispatches in it. The accepted request sits in M
    from the next cycle; M dispatches it (§4.2) when its table takes it: a read goes to the
    MSHR unless a write-buffer entry of its page is in use (read-after-write stall, which
    also flushes an OPEN entry with cause ``raw``), a write goes to the write buffer. Mapping
    is combinational from M (§3).

    Under ``contract = 2`` (stack shape, docs/timing-contract.md §4a): ``req.ready`` is
    the ingress queue Q's room and the admission room, both flip-flops (v2 §4.1); Q's head
    is looked up (L: one page compare per table entry, plus forwarding of M's allocation in
    the same cycle) and mapped (X), and both results move into M with it, so M dispatches
    from ``ta + 2`` by the same rules, from match vectors kept by qualification while it
    waits (v2 §4.2); the tables see the issue decision (v2 §7), and responses leave through
    R / K / E (v2 §8, :class:`~hbfsim.rtl.response.ResponseArbiter`).

    Parameters
    ----------
    cfg : HbfConfig
        The configuration of one stack (``stacks = 1``; a stack of a larger system is built
        from :func:`hbfsim.rtl.system.stack_config`); see :func:`check_supported` for what
        is rejected.
    id_bits, source_bits : int
        Widths of the request id and source fields.
    sector_bytes : int
        Coverage granularity of the write buffer (:class:`WriteBuffer`); 1 is exact.
    checks : bool or "formal"
        Add the blocks' properties (:mod:`hbfsim.rtl.checks`). Inside the controller every
        block's port protocol is an invariant of its neighbours, so ``"formal"`` (the
        controller as the top of a proof) gives the blocks ``True``.
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`), passed to every block; empty for the
        real design.

    Members
    -------
    req : ``In(stream.Signature(req_layout))``
        Host requests (stack-local address); in the channel shape (:attr:`ports` > 1) an
        array of one per host channel, a request entering the port of its mapped channel
        (v2 §1).
    resp : ``Out(stream.Signature(resp_layout))``
        Host responses; in the channel shape one per host channel, a response leaving on
        the port its request entered.
    cmd : ``Out(cmd_layout).array(channels)``
        Media commands, valid only.
    cpl : ``In(cpl_layout).array(channels)``
        Media completions, valid only.
    drain : ``In(1)``
        End of workload: flush every OPEN write-buffer entry (W2).
    m_valid : ``Out(1)``
        M holds a request (observability: the co-simulation raises ``drain`` from the cycle
        after the last request left M, as the golden run does); under contract 2, Q or M
        holds one (v2 §1).
    flushes : ``Out(ArrayLayout(unsigned(32), 5))``
        Statistics (§5): write-buffer entries flushed so far per cause (full, raw, pressure,
        deadline, drain), :attr:`WriteBuffer.flushes <hbfsim.rtl.write_buffer.WriteBuffer>`.

    Raises
    ------
    ValueError
        For a configuration the RTL does not implement, naming the key.
    """

    def __new__(cls, cfg: HbfConfig, *args, **kwargs):
        # Reject before the object exists: a refused configuration leaves no unused
        # elaboratable behind (Amaranth warns about those when they are collected).
        check_supported(cfg)
        if cfg.stacks != 1:
            raise ValueError(f"stacks = {cfg.stacks}: a Controller is one stack; build "
                             "hbfsim.rtl.system.System(cfg), whose stacks are built from "
                             "stack_config(cfg)")
        return super().__new__(cls, cfg, *args, **kwargs)

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8,
                 sector_bytes: int = 1, checks: bool | str = True, mutations=()):
        self._cfg = cfg
        self._w = w = Widths.of(cfg, id_bits=id_bits, source_bits=source_bits)
        self._sector = sector_bytes
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        c = cfg.channels
        if self.ports > 1:   # the channel shape: req[p], resp[p] (v2 §1)
            super().__init__({
                "req": In(stream.Signature(req_layout(w))).array(c),
                "resp": Out(stream.Signature(resp_layout(w))).array(c),
                "cmd": Out(cmd_layout(w)).array(c),
                "cpl": In(cpl_layout(w)).array(c),
                "drain": In(1),
                "m_valid": Out(1),
                "flushes": Out(flushes_layout()),
            })
            return
        super().__init__({
            "req": In(stream.Signature(req_layout(w))),
            "resp": Out(stream.Signature(resp_layout(w))),
            "cmd": Out(cmd_layout(w)).array(c),
            "cpl": In(cpl_layout(w)).array(c),
            "drain": In(1),
            "m_valid": Out(1),
            "flushes": Out(flushes_layout()),
        })

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    @property
    def widths(self) -> Widths:
        return self._w

    @property
    def ports(self) -> int:
        """Request (and response) ports: ``channels`` in the channel shape of contract 2
        (v2 §1), else 1. The channel shape with one channel is the stack shape."""
        cfg = self._cfg
        if cfg.contract == 2 and getattr(cfg, "host_ports", "stack") == "channel":
            return cfg.channels
        return 1

    def elaborate(self, platform):
        if getattr(self._cfg, "pipeline", "standard") == "deep":
            from hbfsim.rtl.controller_deep import elaborate_deep

            return elaborate_deep(self)
        if self.ports > 1:
            return elaborate_channel_shape(self)
        if self._cfg.contract == 2:
            return self._elaborate_v2()
        m = Module()
        cfg, w = self._cfg, self._w
        ids = dict(id_bits=w.id, source_bits=w.source)
        opts = dict(checks=bool(self._checks), mutations=self._mutations)
        m.submodules.admission = adm = Admission(cfg, **ids, **opts)
        m.submodules.mapper = mapper = Mapper(cfg)
        m.submodules.mshr = mshr = Mshr(cfg, **opts)
        m.submodules.write_buffer = wb = WriteBuffer(cfg, sector_bytes=self._sector, **opts)
        m.submodules.scheduler = sched = Scheduler(cfg, **opts)
        m.submodules.response = arb = ResponseArbiter(cfg, **ids, **opts)

        # ---- the map register M (§4.1, §4.2) ----
        offset_bits = ceil_log2(PAGE_BYTES)
        m_valid = Signal()
        m_slot = Signal(w.slot)
        m_op = Signal(ReqOp)
        m_page = Signal(w.page)
        m_offset = Signal(offset_bits)
        m_bytes = Signal(w.bytes)
        m.d.comb += [self.m_valid.eq(m_valid), mapper.page.eq(m_page),
                     mapper.write.eq(m_op == ReqOp.WRITE)]
        is_read = m_valid & (m_op == ReqOp.READ)
        is_write = m_valid & (m_op == ReqOp.WRITE)

        m.d.comb += [
            self.flushes.eq(wb.flushes),
            wb.probe.valid.eq(is_read),
            wb.probe.page.eq(m_page),
            mshr.disp.valid.eq(is_read & ~wb.probe_block),
            mshr.disp.payload.page.eq(m_page),
            mshr.disp.payload.target.eq(mapper.target),
            mshr.disp.payload.bytes.eq(m_bytes),
            mshr.disp.payload.slot.eq(m_slot),
            wb.disp.valid.eq(is_write),
            wb.disp.payload.page.eq(m_page),
            wb.disp.payload.target.eq(mapper.target),
            wb.disp.payload.offset.eq(m_offset),
            wb.disp.payload.bytes.eq(m_bytes),
            wb.disp.payload.slot.eq(m_slot),
        ]
        read_fire = mshr.disp.valid & mshr.disp.ready
        dispatch = read_fire | (wb.disp.valid & wb.disp.ready)
        m.d.comb += [adm.hit.valid.eq(read_fire & mshr.disp_hit), adm.hit.slot.eq(m_slot)]

        # ---- ingress and admission (§4.1) ----
        req = self.req
        m.d.comb += req.ready.eq(adm.alloc_ready & (~m_valid | dispatch))
        accept = req.valid & req.ready
        m.d.comb += [
            adm.alloc.eq(accept),
            adm.alloc_data.id.eq(req.payload.id),
            adm.alloc_data.op.eq(req.payload.op),
            adm.alloc_data.source.eq(req.payload.source),
            adm.alloc_data.bytes.eq(req.payload.bytes),
        ]
        with m.If(accept):
            m.d.sync += [
                m_valid.eq(1),
                m_slot.eq(adm.alloc_slot),
                m_op.eq(req.payload.op),
                m_page.eq(req.payload.addr[offset_bits:]),
                m_offset.eq(req.payload.addr[:offset_bits]),
                m_bytes.eq(req.payload.bytes),
            ]
        with m.Elif(dispatch):
            m.d.sync += m_valid.eq(0)

        # ---- tables, scheduler and media ports (§6, §7) ----
        m.d.comb += [
            wb.mshr_tags.eq(mshr.tags),
            wb.mshr_pending.eq(mshr.pending),
            wb.drain.eq(self.drain),
            sched.wb_occupied.eq(wb.occupied),
        ]
        for c in range(cfg.channels):
            wiring.connect(m, mshr.enq[c], sched.mshr_enq[c])
            wiring.connect(m, wb.enq[c], sched.wb_enq[c])
            self._wire_channel(m, c, sched.cmd[c], sched, mshr, wb)

        # ---- responses (§8) ----
        wiring.connect(m, mshr.ret, arb.mshr_ret)
        wiring.connect(m, wb.ret, arb.wb_ret)
        wiring.connect(m, arb.resp, wiring.flipped(self.resp))
        m.d.comb += [
            mshr.ret_sel.eq(arb.mshr_sel),
            wb.ret_sel.eq(arb.wb_sel),
            arb.mshr_locked.eq(mshr.ret_locked),
            arb.wb_locked.eq(wb.ret_locked),
            adm.rd_slot.eq(arb.slot),
            arb.slot_data.eq(adm.rd_data),
            arb.slot_hit.eq(adm.rd_hit),
            adm.release.valid.eq(self.resp.valid & self.resp.ready),
            adm.release.slot.eq(arb.slot),
        ]
        return m

    def _elaborate_v2(self):
        """Contract 2, stack shape: Q, X and M (v2 §3, §4.1, §4a), the command register
        (v2 §7, in the scheduler) and R / K / E (v2 §8, in the response arbiter)."""
        m = Module()
        cfg, w = self._cfg, self._w
        ids = dict(id_bits=w.id, source_bits=w.source)
        opts = dict(checks=bool(self._checks), mutations=self._mutations)
        m.submodules.admission = adm = Admission(cfg, **ids, **opts)
        m.submodules.mapper = mapper = Mapper(cfg)
        m.submodules.mshr = mshr = Mshr(cfg, **opts)
        m.submodules.write_buffer = wb = WriteBuffer(cfg, sector_bytes=self._sector,
                                                     sectors_in=True, **opts)
        m.submodules.scheduler = sched = Scheduler(cfg, **opts)
        m.submodules.response = arb = ResponseArbiter(cfg, **ids, **opts)
        offset_bits = ceil_log2(PAGE_BYTES)
        q_layout = data.StructLayout({
            "slot": unsigned(w.slot), "op": ReqOp, "page": unsigned(w.page),
            "offset": unsigned(offset_bits), "bytes": unsigned(w.bytes)})
        m.submodules.ingress = q = StageQueue(q_layout, checks=bool(self._checks))

        # ---- A: accept into Q; ready from Q's occupancy and the admission count (v2 §4.1) --
        req = self.req
        m.d.comb += [
            req.ready.eq(q.inp.ready & adm.alloc_ready),
            q.inp.valid.eq(req.valid & adm.alloc_ready),
            q.inp.payload.slot.eq(adm.alloc_slot),
            q.inp.payload.op.eq(req.payload.op),
            q.inp.payload.page.eq(req.payload.addr[offset_bits:]),
            q.inp.payload.offset.eq(req.payload.addr[:offset_bits]),
            q.inp.payload.bytes.eq(req.payload.bytes),
            adm.alloc.eq(req.valid & req.ready),
            adm.alloc_data.id.eq(req.payload.id),
            adm.alloc_data.op.eq(req.payload.op),
            adm.alloc_data.source.eq(req.payload.source),
            adm.alloc_data.bytes.eq(req.payload.bytes),
        ]

        # ---- X: the head of Q is mapped, and registered into M with it (v2 §3) ----
        head = q.out.payload
        m.d.comb += [mapper.page.eq(head.page), mapper.write.eq(head.op == ReqOp.WRITE)]

        # ---- M: dispatch (v1 §4.2 rules, from the start-of-cycle state) ----
        m_valid = Signal()
        m_req = Signal(q_layout, name="m_req", reset_less=True)
        m_target = Signal(target_layout(w), name="m_target", reset_less=True)
        # the write's sectors, decoded in X beside the mapper (no cycle: M holds them with
        # the request), so the write buffer's coverage update starts from registers
        m_sectors = Signal(sectors_layout(self._sector), name="m_sectors", reset_less=True)
        x_first, x_end = sector_range(m, head.offset, head.bytes, self._sector, "x_sectors")
        m.d.comb += wb.disp_sectors.eq(m_sectors)
        is_read = m_valid & (m_req.op == ReqOp.READ)
        is_write = m_valid & (m_req.op == ReqOp.WRITE)
        n_mshr, n_wb = cfg.mshr_entries, cfg.write_buffer_entries
        # M's match vectors (v2 §4.2): mergeable MSHR entries, write-buffer entries in use
        # and OPEN ones, for M's page; registered from L, then maintained (qualification
        # here, forwarding below)
        m_mshr = Signal(n_mshr, name="m_match_mshr")
        m_used = Signal(n_wb, name="m_match_used")
        m_open = Signal(n_wb, name="m_match_open")
        m.d.comb += [mshr.disp_match.eq(m_mshr), wb.disp_open.eq(m_open),
                     wb.probe_used.eq(m_used)]
        # the pending MSHR entries of M's page, for the write buffer's blocker set (v2 §4.4):
        # M's MSHR match vector when merging is on; its own vector when it is off
        m_pend = m_mshr if cfg.mshr_merge else Signal(n_mshr, name="m_match_pend")
        m.d.comb += wb.disp_pend.eq(m_pend)
        m.d.comb += [
            self.m_valid.eq(m_valid | q.out.valid),
            self.flushes.eq(wb.flushes),
            wb.probe.valid.eq(is_read),
            wb.probe.page.eq(m_req.page),
            mshr.disp.valid.eq(is_read & ~wb.probe_block),
            mshr.disp.payload.page.eq(m_req.page),
            mshr.disp.payload.target.eq(m_target),
            mshr.disp.payload.bytes.eq(m_req.bytes),
            mshr.disp.payload.slot.eq(m_req.slot),
            wb.disp.valid.eq(is_write),
            wb.disp.payload.page.eq(m_req.page),
            wb.disp.payload.target.eq(m_target),
            wb.disp.payload.offset.eq(m_req.offset),
            wb.disp.payload.bytes.eq(m_req.bytes),
            wb.disp.payload.slot.eq(m_req.slot),
        ]
        read_fire = mshr.disp.valid & mshr.disp.ready
        dispatch = read_fire | (wb.disp.valid & wb.disp.ready)
        m.d.comb += [adm.hit.valid.eq(read_fire & mshr.disp_hit), adm.hit.slot.eq(m_req.slot)]
        # ---- L: the head of Q compares its page once with every entry (v2 §4.2, §14) ----
        # Forwarding: an entry M allocates in this cycle for the head's page matches from the
        # next cycle (entries become mergeable, in use or OPEN only by allocation).
        same_page = named(m, m_valid & (m_req.page == head.page), "l_same_page")
        mshr_alloc = mshr.disp.valid & mshr.disp.ready & ~mshr.disp_hit
        wb_alloc = wb.disp.valid & wb.disp.ready & ~wb.disp_merge
        l_mshr = Signal(n_mshr, name="l_match_mshr")
        l_used = Signal(n_wb, name="l_match_used")
        l_open = Signal(n_wb, name="l_match_open")
        for i in range(n_mshr):
            hit = mshr.pending[i] & (mshr.tags[i] == head.page) if cfg.mshr_merge else 0
            fwd = same_page & mshr_alloc & (mshr.disp_index == i) if cfg.mshr_merge else 0
            m.d.comb += l_mshr[i].eq(hit | fwd)
        if not cfg.mshr_merge:
            l_pend = Signal(n_mshr, name="l_match_pend")
            for i in range(n_mshr):
                m.d.comb += l_pend[i].eq((mshr.pending[i] & (mshr.tags[i] == head.page))
                                         | (same_page & mshr_alloc & (mshr.disp_index == i)))
        for j in range(n_wb):
            page_eq = named(m, wb.tags[j] == head.page, f"l_page_eq{j}")
            fwd = named(m, same_page & wb_alloc & (wb.disp_index == j), f"l_fwd_wb{j}")
            m.d.comb += [l_used[j].eq((wb.in_use[j] & page_eq) | fwd),
                         l_open[j].eq((wb.is_open[j] & page_eq) | fwd)]

        # Q's head moves into M when M is empty at the start of the cycle or dispatches
        m.d.comb += q.out.ready.eq(~m_valid | dispatch)
        with m.If(q.out.valid & q.out.ready):
            m.d.sync += [m_valid.eq(1), m_req.eq(head), m_target.eq(mapper.target),
                         m_sectors.first.eq(x_first), m_sectors.end.eq(x_end),
                         m_mshr.eq(l_mshr), m_used.eq(l_used), m_open.eq(l_open)]
            if not cfg.mshr_merge:
                m.d.sync += m_pend.eq(l_pend)
        with m.Else():
            with m.If(dispatch):
                m.d.sync += m_valid.eq(0)
            # qualification: a bit is kept only while its entry is still mergeable / in use /
            # OPEN; one that left drops out for good (v2 §4.2)
            m.d.sync += [m_mshr.eq(m_mshr & mshr.pending), m_used.eq(m_used & wb.in_use),
                         m_open.eq(m_open & wb.is_open)]
            if not cfg.mshr_merge:
                m.d.sync += m_pend.eq(m_pend & mshr.pending)
        if self._checks:
            # v2 §4.2: the maintained vectors equal a fresh lookup of the current state
            fresh_mshr = Cat(*[mshr.pending[i] & (mshr.tags[i] == m_req.page)
                               if cfg.mshr_merge else 0 for i in range(n_mshr)])
            fresh_used = Cat(*[wb.in_use[j] & (wb.tags[j] == m_req.page) for j in range(n_wb)])
            fresh_open = Cat(*[wb.is_open[j] & (wb.tags[j] == m_req.page)
                               for j in range(n_wb)])
            if not cfg.mshr_merge:
                fresh_pend = Cat(*[mshr.pending[i] & (mshr.tags[i] == m_req.page)
                                   for i in range(n_mshr)])
                m.d.sync += Assert(~m_valid | ((m_pend & mshr.pending) == fresh_pend),
                                   "M's pending-MSHR vector differs from a fresh lookup "
                                   "(v2 §4.4)")
            m.d.sync += [
                Assert(~m_valid | ((m_mshr & mshr.pending) == fresh_mshr),
                       "M's MSHR match vector differs from a fresh lookup (v2 §4.2)"),
                Assert(~m_valid | ((m_used & wb.in_use) == fresh_used),
                       "M's in-use match vector differs from a fresh lookup (v2 §4.2)"),
                Assert(~m_valid | ((m_open & wb.is_open) == fresh_open),
                       "M's OPEN match vector differs from a fresh lookup (v2 §4.2)"),
            ]

        # ---- tables, scheduler and media ports (§6, v2 §7) ----
        m.d.comb += [
            wb.mshr_tags.eq(mshr.tags),
            wb.mshr_pending.eq(mshr.pending),
            wb.drain.eq(self.drain),
            sched.wb_occupied.eq(wb.occupied),
        ]
        if cfg.multiplane == "megaplane":
            m.d.comb += sched.drain.eq(self.drain)   # MP4: drain ends the gather windows
        for c in range(cfg.channels):
            wiring.connect(m, mshr.enq[c], sched.mshr_enq[c])
            wiring.connect(m, wb.enq[c], sched.wb_enq[c])
            # v2 §4.3, §4.4: QUEUED -> ISSUED / PROGRAM in the decision cycle
            if self._w.planes:
                self._wire_multiplane(m, c, sched, mshr, wb)
            else:
                self._wire_channel(m, c, sched.dec[c], sched, mshr, wb)

        # ---- responses: R, K, E (v2 §8) ----
        wiring.connect(m, mshr.ret, arb.mshr_ret)
        wiring.connect(m, wb.ret, arb.wb_ret)
        wiring.connect(m, arb.resp, wiring.flipped(self.resp))
        m.d.comb += [
            mshr.ret_sel.eq(arb.mshr_sel),
            wb.ret_sel.eq(arb.wb_sel),
            arb.mshr_locked.eq(mshr.ret_locked),
            arb.wb_locked.eq(wb.ret_locked),
            mshr.launched.eq(arb.mshr_launched),
            wb.launched.eq(arb.wb_launched),
            adm.rd_slot.eq(arb.slot_next),
            arb.slot_data.eq(adm.rd_data),
            arb.slot_hit.eq(adm.rd_hit),
            adm.release.eq(arb.release),
        ]
        return m

    def _wire_channel(self, m, c, issue, sched, mshr, wb) -> None:
        """Wire channel ``c``'s command and completion ports and route ``issue`` (the
        command under contract 1, the issue decision under contract 2) and the completion
        to the MSHR or the write buffer by the tag's entry kind."""
        cpl = self.cpl[c]
        to_mshr = issue.tag.kind == EntryKind.MSHR
        done_mshr = cpl.tag.kind == EntryKind.MSHR
        m.d.comb += [
            self.cmd[c].eq(sched.cmd[c]),
            sched.cpl[c].eq(cpl),
            mshr.issue[c].valid.eq(issue.valid & to_mshr),
            mshr.issue[c].index.eq(issue.tag.index),
            wb.issue[c].valid.eq(issue.valid & ~to_mshr),
            wb.issue[c].index.eq(issue.tag.index),
            mshr.done[c].valid.eq(cpl.valid & done_mshr),
            mshr.done[c].index.eq(cpl.tag.index),
            mshr.done[c].buffer_hit.eq(cpl.buffer_hit),
            mshr.done[c].error.eq(cpl.error),
            wb.done[c].valid.eq(cpl.valid & ~done_mshr),
            wb.done[c].index.eq(cpl.tag.index),
            wb.done[c].buffer_hit.eq(cpl.buffer_hit),
            wb.done[c].error.eq(cpl.error),
        ]

    def _wire_multiplane(self, m, c, sched, mshr, wb) -> None:
        """Multi-plane commands (docs/timing-contract.md §7a MP2, MP7): channel
        ``c``'s command and completion ports carry no tag; the scheduler's lanes name the
        entries of each decision and completion, one per plane, routed to the MSHR or the
        write buffer by the tag's entry kind."""
        m.d.comb += [self.cmd[c].eq(sched.cmd[c]), sched.cpl[c].eq(self.cpl[c])]
        lanes = self._w.planes
        for k in range(c * lanes, (c + 1) * lanes):
            issue, done = sched.dec_ops[k], sched.cpl_ops[k]
            to_mshr = issue.tag.kind == EntryKind.MSHR
            done_mshr = done.tag.kind == EntryKind.MSHR
            m.d.comb += [
                mshr.issue[k].valid.eq(issue.valid & to_mshr),
                mshr.issue[k].index.eq(issue.tag.index),
                wb.issue[k].valid.eq(issue.valid & ~to_mshr),
                wb.issue[k].index.eq(issue.tag.index),
                mshr.done[k].valid.eq(done.valid & done_mshr),
                mshr.done[k].index.eq(done.tag.index),
                mshr.done[k].buffer_hit.eq(done.buffer_hit),
                mshr.done[k].error.eq(done.error),
                wb.done[k].valid.eq(done.valid & ~done_mshr),
                wb.done[k].index.eq(done.tag.index),
                wb.done[k].buffer_hit.eq(done.buffer_hit),
                wb.done[k].error.eq(done.error),
            ]
