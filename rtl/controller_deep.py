"""The stack controller under Amendment A (``pipeline = "deep"``, stack shape).

Implements docs/timing-contract.md DP1 on the controller's side: M decides by §4.2's
rules with its own previous decision applied, the tables holding that decision in their W
registers (:mod:`.mshr_deep`, :mod:`.write_buffer_deep`) and the controller forwarding W's
entry into M's match vectors instead of forwarding M's decision into L. Also the
structures of docs/rtl.md "Issue 12, part C" that change no cycle: the ingress queue as a
ring (k), the slot's ``mshr_hit`` recorded a cycle after the merge (m).
:meth:`hbfsim.rtl.controller.Controller.elaborate` calls :func:`elaborate_deep` when
``cfg.pipeline == "deep"`` (stack shape only).
"""

from __future__ import annotations

__all__ = ["elaborate_deep"]

from amaranth.hdl import Assert, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.admission import Admission
from hbfsim.rtl.layouts import ReqOp, target_layout
from hbfsim.rtl.logic import named
from hbfsim.rtl.mapper import Mapper
from hbfsim.rtl.mshr import Mshr
from hbfsim.rtl.response import ResponseArbiter
from hbfsim.rtl.scheduler import Scheduler
from hbfsim.rtl.stage_queue import StageQueue
from hbfsim.rtl.write_buffer import WriteBuffer, sector_range, sectors_layout


def elaborate_deep(ctrl) -> Module:
    """Build the stack shape of :class:`~hbfsim.rtl.controller.Controller` ``ctrl`` under
    ``pipeline = "deep"``: A, Q (a ring), L + X, M as in contract 2; W in the tables; R / K /
    E with every waiter passing through R (DP7).

    Forwarding (DP1): L compares Q's head with the tables' pages, in which the entry W
    writes in this cycle already counts (the tables export it); M's own decision of this
    cycle is not forwarded into L but, when Q's head has M's page, a flag registered with
    the head makes W's entry of the next cycle count in M's vectors (a page compare of two
    registers, as the what-if's (g2)).

    Parameters
    ----------
    ctrl : Controller
        The block (stack shape, contract 2, ``pipeline = "deep"``).

    Returns
    -------
    Module
    """
    m = Module()
    cfg, w = ctrl._cfg, ctrl._w
    assert cfg.mshr_merge, "pipeline = 'deep' needs mshr_merge (docs/timing-contract.md)"
    ids = dict(id_bits=w.id, source_bits=w.source)
    opts = dict(checks=bool(ctrl._checks), mutations=ctrl._mutations)
    m.submodules.admission = adm = Admission(cfg, **ids, **opts)
    m.submodules.mapper = mapper = Mapper(cfg)
    m.submodules.mshr = mshr = Mshr(cfg, **opts)
    m.submodules.write_buffer = wb = WriteBuffer(cfg, sector_bytes=ctrl._sector,
                                                 sectors_in=True, **opts)
    m.submodules.scheduler = sched = Scheduler(cfg, **opts)
    m.submodules.response = arb = ResponseArbiter(cfg, **ids, **opts)
    offset_bits = ceil_log2(PAGE_BYTES)
    q_layout = data.StructLayout({
        "slot": unsigned(w.slot), "op": ReqOp, "page": unsigned(w.page),
        "offset": unsigned(offset_bits), "bytes": unsigned(w.bytes)})
    # the ingress queue as a ring: a pop moves no item (part C, (k))
    m.submodules.ingress = q = StageQueue(q_layout, checks=bool(ctrl._checks), ring=True)

    # ---- A: accept into Q; ready from Q's occupancy and the admission count (v2 §4.1) ----
    req = ctrl.req
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

    # ---- M: dispatch (§4.2's rules, with M's own last decision applied, DP1) ----
    m_valid = Signal()
    m_req = Signal(q_layout, name="m_req", reset_less=True)
    m_target = Signal(target_layout(w), name="m_target", reset_less=True)
    m_sectors = Signal(sectors_layout(ctrl._sector), name="m_sectors", reset_less=True)
    x_first, x_end = sector_range(m, head.offset, head.bytes, ctrl._sector, "x_sectors")
    m.d.comb += wb.disp_sectors.eq(m_sectors)
    is_read = m_valid & (m_req.op == ReqOp.READ)
    is_write = m_valid & (m_req.op == ReqOp.WRITE)
    n_mshr, n_wb = cfg.mshr_entries, cfg.write_buffer_entries
    m_mshr = Signal(n_mshr, name="m_match_mshr")
    m_used = Signal(n_wb, name="m_match_used")
    m_open = Signal(n_wb, name="m_match_open")
    # DP1: W's entry (M's decision of the last cycle) counts in M's vectors when it was
    # allocated for M's page; the flags were registered with M's load
    fwd_mshr, fwd_wb = Signal(name="w_fwd_mshr"), Signal(name="w_fwd_wb")
    wf_mshr = named(m, Mux(fwd_mshr, mshr.w_entry, 0), "m_wfwd_mshr")
    wf_wb = named(m, Mux(fwd_wb, wb.w_entry, 0), "m_wfwd_wb")
    v_mshr = named(m, m_mshr | wf_mshr, "m_vec_mshr")
    v_used = named(m, m_used | wf_wb, "m_vec_used")
    v_open = named(m, m_open | wf_wb, "m_vec_open")
    # the tables get M's registered vectors and the flags (W's entry is added there, and
    # its term of the hit ORed after the entries' trees: registers only on the hit's path)
    m.d.comb += [mshr.disp_match.eq(m_mshr), mshr.w_match.eq(fwd_mshr),
                 wb.disp_open.eq(m_open), wb.probe_used.eq(m_used), wb.w_match.eq(fwd_wb),
                 wb.disp_pend.eq(v_mshr)]
    m.d.comb += [
        ctrl.m_valid.eq(m_valid | q.out.valid),
        ctrl.flushes.eq(wb.flushes),
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
    # the slot's mshr_hit flag recorded a cycle after the merge: it is read at the
    # response, cycles later (part C, (m); no cycle changes)
    hit_q = Signal(name="adm_hit_q")
    hit_slot_q = Signal.like(m_req.slot, name="adm_hit_slot_q")
    m.d.sync += [hit_q.eq(read_fire & mshr.disp_hit), hit_slot_q.eq(m_req.slot)]
    m.d.comb += [adm.hit.valid.eq(hit_q), adm.hit.slot.eq(hit_slot_q)]

    # ---- L: the head of Q compares its page once with every entry (v2 §4.2, §14); the
    # tables' exports include W's entry, M's own decision reaches M through W (above) ----
    same_page = named(m, m_valid & (m_req.page == head.page), "l_same_page")
    mshr_alloc = mshr.disp.valid & mshr.disp.ready & ~mshr.disp_hit
    wb_alloc = wb.disp.valid & wb.disp.ready & ~wb.disp_merge
    l_mshr = Signal(n_mshr, name="l_match_mshr")
    l_used = Signal(n_wb, name="l_match_used")
    l_open = Signal(n_wb, name="l_match_open")
    for i in range(n_mshr):
        m.d.comb += l_mshr[i].eq(mshr.pending[i] & (mshr.tags[i] == head.page))
    for j in range(n_wb):
        page_eq = named(m, wb.tags[j] == head.page, f"l_page_eq{j}")
        m.d.comb += [l_used[j].eq(wb.in_use[j] & page_eq), l_open[j].eq(wb.is_open[j] & page_eq)]

    # Q's head moves into M when M is empty at the start of the cycle or dispatches
    m.d.comb += q.out.ready.eq(~m_valid | dispatch)
    load = q.out.valid & q.out.ready
    m.d.sync += [fwd_mshr.eq(load & same_page & mshr_alloc),
                 fwd_wb.eq(load & same_page & wb_alloc)]
    with m.If(load):
        m.d.sync += [m_valid.eq(1), m_req.eq(head), m_target.eq(mapper.target),
                     m_sectors.first.eq(x_first), m_sectors.end.eq(x_end),
                     m_mshr.eq(l_mshr), m_used.eq(l_used), m_open.eq(l_open)]
    with m.Else():
        with m.If(dispatch):
            m.d.sync += m_valid.eq(0)
        # qualification (v2 §4.2), W's forwarded entry included: a bit stays only while
        # its entry is still mergeable / in use / OPEN (as the tables export them)
        m.d.sync += [m_mshr.eq(v_mshr & mshr.pending), m_used.eq(v_used & wb.in_use),
                     m_open.eq(v_open & wb.is_open)]
    if ctrl._checks:
        # the vectors M uses equal a fresh lookup of the state the tables export (W's
        # entry included, DP1)
        fresh_mshr = Cat(*[mshr.pending[i] & (mshr.tags[i] == m_req.page)
                           for i in range(n_mshr)])
        fresh_used = Cat(*[wb.in_use[j] & (wb.tags[j] == m_req.page) for j in range(n_wb)])
        fresh_open = Cat(*[wb.is_open[j] & (wb.tags[j] == m_req.page) for j in range(n_wb)])
        m.d.sync += [
            Assert(~m_valid | ((v_mshr & mshr.pending) == fresh_mshr),
                   "M's MSHR match vector differs from a fresh lookup (DP1)"),
            Assert(~m_valid | ((v_used & wb.in_use) == fresh_used),
                   "M's in-use match vector differs from a fresh lookup (DP1)"),
            Assert(~m_valid | ((v_open & wb.is_open) == fresh_open),
                   "M's OPEN match vector differs from a fresh lookup (DP1)"),
        ]

    # ---- tables, scheduler and media ports (§6, v2 §7) ----
    m.d.comb += [
        wb.mshr_tags.eq(mshr.tags),
        wb.mshr_pending.eq(mshr.pending),
        wb.drain.eq(ctrl.drain),
        sched.wb_occupied.eq(wb.occupied),
    ]
    for c in range(cfg.channels):
        wiring.connect(m, mshr.enq[c], sched.mshr_enq[c])
        wiring.connect(m, wb.enq[c], sched.wb_enq[c])
        ctrl._wire_channel(m, c, sched.dec[c], sched, mshr, wb)

    # ---- responses: R, K, E (v2 §8, DP7) ----
    wiring.connect(m, mshr.ret, arb.mshr_ret)
    wiring.connect(m, wb.ret, arb.wb_ret)
    wiring.connect(m, arb.resp, wiring.flipped(ctrl.resp))
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
