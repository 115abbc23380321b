"""The stack controller in the channel shape of contract 2: per-port ingress and dispatch
over the stack-wide tables, and a response port per host channel.

Implements docs/timing-contract.md §1 (``req[p]``, ``resp[p]``, ``P = channels``), §4.1
(per-port A and Q, the shared admission count with the rotating rank), §4.2 (per-port L, X
and M with their match vectors), §4.2.3 (allocation from the shared pools, in
:class:`~hbfsim.rtl.mshr.Mshr` and :class:`~hbfsim.rtl.write_buffer.WriteBuffer`), §4.2.4
(a page held by a read M and a write M in one cycle under a partition scheduler), §8 (R, K
and E per port, each with its channel's own link credit) and §14 (which structures are per
port and which shared). :meth:`hbfsim.rtl.controller.Controller.elaborate` calls
:func:`elaborate_channel_shape` when ``host_ports = "channel"`` and ``channels > 1``.
"""

from __future__ import annotations

__all__ = ["elaborate_channel_shape"]

from amaranth.hdl import Assert, Cat, Const, Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.admission import Admission
from hbfsim.rtl.checks import protocol
from hbfsim.rtl.layouts import ReqOp, target_layout
from hbfsim.rtl.logic import named
from hbfsim.rtl.mapper import Mapper
from hbfsim.rtl.mshr import Mshr
from hbfsim.rtl.response import ResponseArbiter
from hbfsim.rtl.scheduler import Scheduler
from hbfsim.rtl.stage_queue import StageQueue
from hbfsim.rtl.write_buffer import WriteBuffer, sector_range, sectors_layout


def _or(values):
    """The OR of ``values`` (0 for none)."""
    out = Const(0, 1)
    for v in values:
        out = out | v
    return out


def elaborate_channel_shape(ctrl) -> Module:
    """Build the channel shape of :class:`~hbfsim.rtl.controller.Controller` ``ctrl``.

    Per port ``p``: A (``req[p]``, admission rank), Q (``StageQueue``), L + X on Q's head,
    M with its match vectors; per channel the scheduler as in the stack shape; per port R /
    K / E (``ResponseArbiter`` with its own ``LinkCredit``). Shared: admission count, MSHR
    pool, write buffer (their multi-port forms).

    Forwarding into the match vectors (v2 §4.2): an entry allocated in a cycle for the page
    of a Q head or of a waiting M matches from the next cycle. In the channel shape a page's
    reads and writes enter one port unless a partition scheduler sends them to two (§1,
    §4.2.4), so only then does another port's allocation forward, from the ports of the
    other direction: a write-buffer entry into the read ports' in-use vectors (the RAW
    probe), an MSHR entry into the write ports' pending vectors (the blocker set), and an
    MSHR entry a read takes in the cycle a write of its page allocates goes into that
    write's blocker set at once (``WriteBuffer.disp_fwd``).

    Parameters
    ----------
    ctrl : Controller
        The controller being elaborated (its configuration, widths, ports ``req[p]``,
        ``resp[p]``, ``cmd[c]``, ``cpl[c]``, ``drain``, ``m_valid``, ``flushes``, and its
        ``checks``, ``mutations`` and ``sector_bytes`` options).

    Returns
    -------
    Module
        The controller's module.
    """
    m = Module()
    cfg, w = ctrl.cfg, ctrl.widths
    P = cfg.channels
    ids = dict(id_bits=w.id, source_bits=w.source)
    checks = ctrl._checks
    opts = dict(checks=bool(checks), mutations=ctrl._mutations)
    m.submodules.admission = adm = Admission(cfg, **ids, **opts, ports=P)
    m.submodules.mshr = mshr = Mshr(cfg, **opts, ports=P)
    m.submodules.write_buffer = wb = WriteBuffer(cfg, sector_bytes=ctrl._sector, **opts,
                                                 ports=P, sectors_in=True)
    m.submodules.scheduler = sched = Scheduler(cfg, **opts)
    offset_bits = ceil_log2(PAGE_BYTES)
    q_layout = data.StructLayout({
        "slot": unsigned(w.slot), "op": ReqOp, "page": unsigned(w.page),
        "offset": unsigned(offset_bits), "bytes": unsigned(w.bytes)})
    n_mshr, n_wb = cfg.mshr_entries, cfg.write_buffer_entries
    partition = cfg.scheduler.startswith("partition-")
    merge_on = cfg.mshr_merge

    qs, heads, mappers = [], [], []
    mv, mreq, mtarget, is_read, is_write = [], [], [], [], []
    msectors, xsectors = [], []
    m_mshr, m_used, m_open, m_pend = [], [], [], []
    for p in range(P):
        # ---- A: accept into Q_p; ready from Q_p's room and the admission rank (v2 §4.1) ----
        q = StageQueue(q_layout, checks=bool(checks))
        m.submodules[f"ingress{p}"] = q
        qs.append(q)
        req = ctrl.req[p]
        room = adm.alloc_ready[p]
        m.d.comb += [
            req.ready.eq(q.inp.ready & room),
            q.inp.valid.eq(req.valid & room),
            q.inp.payload.slot.eq(adm.alloc_slot[p]),
            q.inp.payload.op.eq(req.payload.op),
            q.inp.payload.page.eq(req.payload.addr[offset_bits:]),
            q.inp.payload.offset.eq(req.payload.addr[:offset_bits]),
            q.inp.payload.bytes.eq(req.payload.bytes),
            adm.alloc[p].eq(req.valid & req.ready),
            adm.alloc_data[p].id.eq(req.payload.id),
            adm.alloc_data[p].op.eq(req.payload.op),
            adm.alloc_data[p].source.eq(req.payload.source),
            adm.alloc_data[p].bytes.eq(req.payload.bytes),
        ]
        # ---- X: Q_p's head is mapped (v2 §3); it must map to this port (v2 §1) ----
        head = q.out.payload
        heads.append(head)
        mp = Mapper(cfg)
        m.submodules[f"mapper{p}"] = mp
        mappers.append(mp)
        m.d.comb += [mp.page.eq(head.page), mp.write.eq(head.op == ReqOp.WRITE)]
        protocol(m, checks, ~q.out.valid | (mp.target.channel == p),
                 f"req[{p}]: a request whose page maps to another channel's port (v2 §1)")
        # ---- M_p ----
        mv.append(Signal(name=f"m_valid{p}"))
        mreq.append(Signal(q_layout, name=f"m_req{p}", reset_less=True))
        mtarget.append(Signal(target_layout(w), name=f"m_target{p}", reset_less=True))
        # the write's sectors, decoded in X_p and held in M_p (as the stack shape's)
        msectors.append(Signal(sectors_layout(ctrl._sector), name=f"m_sectors{p}",
                               reset_less=True))
        xsectors.append(sector_range(m, head.offset, head.bytes, ctrl._sector,
                                     f"x_sectors{p}"))
        m.d.comb += wb.disp_sectors[p].eq(msectors[p])
        is_read.append(named(m, mv[p] & (mreq[p].op == ReqOp.READ), f"is_read{p}"))
        is_write.append(named(m, mv[p] & (mreq[p].op == ReqOp.WRITE), f"is_write{p}"))
        m_mshr.append(Signal(n_mshr, name=f"m_match_mshr{p}"))
        m_used.append(Signal(n_wb, name=f"m_match_used{p}"))
        m_open.append(Signal(n_wb, name=f"m_match_open{p}"))
        m_pend.append(m_mshr[p] if merge_on else Signal(n_mshr, name=f"m_match_pend{p}"))

    # ---- M: dispatch, every port from the start-of-cycle state (v2 §4.2) ----
    read_fire, mshr_alloc, wb_alloc, dispatch = [], [], [], []
    for p in range(P):
        r = mreq[p]
        md, wd = mshr.disp[p], wb.disp[p]
        m.d.comb += [
            mshr.disp_match[p].eq(m_mshr[p]),
            wb.disp_open[p].eq(m_open[p]),
            wb.probe_used[p].eq(m_used[p]),
            wb.disp_pend[p].eq(m_pend[p]),
            wb.probe[p].valid.eq(is_read[p]),
            wb.probe[p].page.eq(r.page),
            md.valid.eq(is_read[p] & ~wb.probe_block[p]),
            md.payload.page.eq(r.page),
            md.payload.target.eq(mtarget[p]),
            md.payload.bytes.eq(r.bytes),
            md.payload.slot.eq(r.slot),
            wd.valid.eq(is_write[p]),
            wd.payload.page.eq(r.page),
            wd.payload.target.eq(mtarget[p]),
            wd.payload.offset.eq(r.offset),
            wd.payload.bytes.eq(r.bytes),
            wd.payload.slot.eq(r.slot),
        ]
        rf = named(m, md.valid & md.ready, f"read_fire{p}")
        read_fire.append(rf)
        mshr_alloc.append(named(m, rf & ~mshr.disp_hit[p], f"mshr_alloc{p}"))
        wb_alloc.append(named(m, wd.valid & wd.ready & ~wb.disp_merge[p], f"wb_alloc{p}"))
        dispatch.append(named(m, rf | (wd.valid & wd.ready), f"dispatch{p}"))
        m.d.comb += [adm.hit[p].valid.eq(rf & mshr.disp_hit[p]), adm.hit[p].slot.eq(r.slot)]

    # which ports' allocations can forward into port p's vectors: its own (into L only),
    # and under a partition scheduler the ports of the other direction (a page's reads
    # enter one of the first R ports, its writes one of the others, §3, §4.2.4)
    R = cfg.read_channels if partition else P

    def others(p):
        return [s for s in range(P) if (s < R) != (p < R)] if partition else []

    def sources(p):
        return [p] + others(p)

    def onehot(index, n):
        return Cat(*[index == i for i in range(n)])

    # §4.2.4: a read of a write's page dispatched in this cycle on another port counts as
    # earlier: its MSHR entry goes into the blocker set of the entry the write allocates
    for p in range(P):
        fwd = []
        if partition and p >= R:    # a write port: the read ports' same-cycle entries
            for s in others(p):
                same = named(m, is_read[s] & is_write[p] & (mreq[s].page == mreq[p].page),
                             f"m_same_page{s}_{p}")
                fwd.append(Cat(*[same & read_fire[s] & (mshr.disp_index[s] == i)
                                 for i in range(n_mshr)]))
        m.d.comb += wb.disp_fwd[p].eq(_or(fwd) if fwd else 0)

    for p in range(P):
        head, q = heads[p], qs[p]
        # ---- L: Q_p's head compares its page once with every entry (v2 §4.2, §14) ----
        mshr_fwd, wb_fwd = Const(0, n_mshr), Const(0, n_wb)
        for s in sources(p):
            same = named(m, mv[s] & (mreq[s].page == head.page), f"l_same_page{s}_{p}")
            mshr_fwd = mshr_fwd | Cat(*[same & mshr_alloc[s] & (mshr.disp_index[s] == i)
                                        for i in range(n_mshr)])
            wb_fwd = wb_fwd | Cat(*[same & wb_alloc[s] & (wb.disp_index[s] == j)
                                    for j in range(n_wb)])
        mshr_fwd = named(m, mshr_fwd, f"l_fwd_mshr{p}")
        wb_fwd = named(m, wb_fwd, f"l_fwd_wb{p}")
        hit_mshr = Cat(*[mshr.pending[i] & (mshr.tags[i] == head.page) for i in range(n_mshr)])
        l_mshr = Signal(n_mshr, name=f"l_match_mshr{p}")
        m.d.comb += l_mshr.eq(hit_mshr | mshr_fwd if merge_on else 0)
        if not merge_on:
            l_pend = Signal(n_mshr, name=f"l_match_pend{p}")
            m.d.comb += l_pend.eq(hit_mshr | mshr_fwd)
        page_eq = Cat(*[wb.tags[j] == head.page for j in range(n_wb)])
        l_used = Signal(n_wb, name=f"l_match_used{p}")
        l_open = Signal(n_wb, name=f"l_match_open{p}")
        m.d.comb += [l_used.eq((wb.in_use & page_eq) | wb_fwd),
                     l_open.eq((wb.is_open & page_eq) | wb_fwd)]

        # forwarding into a waiting M_p from another port's allocation of its page
        # (partition schedulers only; its own port allocates only when M_p leaves)
        m_mshr_fwd, m_wb_fwd = Const(0, n_mshr), Const(0, n_wb)
        if partition:
            for s in others(p):
                same = named(m, mv[s] & mv[p] & (mreq[s].page == mreq[p].page),
                             f"m_fwd_page{s}_{p}")
                m_mshr_fwd = m_mshr_fwd | Cat(*[same & mshr_alloc[s] & (mshr.disp_index[s] == i)
                                                for i in range(n_mshr)])
                m_wb_fwd = m_wb_fwd | Cat(*[same & wb_alloc[s] & (wb.disp_index[s] == j)
                                            for j in range(n_wb)])

        # Q_p's head moves into M_p when M_p is empty at the start of the cycle or dispatches
        m.d.comb += q.out.ready.eq(~mv[p] | dispatch[p])
        with m.If(q.out.valid & q.out.ready):
            m.d.sync += [mv[p].eq(1), mreq[p].eq(head), mtarget[p].eq(mappers[p].target),
                         msectors[p].first.eq(xsectors[p][0]),
                         msectors[p].end.eq(xsectors[p][1]),
                         m_mshr[p].eq(l_mshr), m_used[p].eq(l_used), m_open[p].eq(l_open)]
            if not merge_on:
                m.d.sync += m_pend[p].eq(l_pend)
        with m.Else():
            with m.If(dispatch[p]):
                m.d.sync += mv[p].eq(0)
            # qualification (v2 §4.2), and forwarding from the other direction's port
            m.d.sync += [m_mshr[p].eq((m_mshr[p] & mshr.pending)
                                      | (m_mshr_fwd if merge_on else 0)),
                         m_used[p].eq((m_used[p] & wb.in_use) | m_wb_fwd),
                         m_open[p].eq((m_open[p] & wb.is_open) | m_wb_fwd)]
            if not merge_on:
                m.d.sync += m_pend[p].eq((m_pend[p] & mshr.pending) | m_mshr_fwd)
        if checks:
            # v2 §4.2: the maintained vectors equal a fresh lookup of the current state
            r = mreq[p]
            fresh_mshr = Cat(*[mshr.pending[i] & (mshr.tags[i] == r.page) if merge_on else 0
                               for i in range(n_mshr)])
            fresh_used = Cat(*[wb.in_use[j] & (wb.tags[j] == r.page) for j in range(n_wb)])
            fresh_open = Cat(*[wb.is_open[j] & (wb.tags[j] == r.page) for j in range(n_wb)])
            if not merge_on:
                fresh_pend = Cat(*[mshr.pending[i] & (mshr.tags[i] == r.page)
                                   for i in range(n_mshr)])
                m.d.sync += Assert(~mv[p] | ((m_pend[p] & mshr.pending) == fresh_pend),
                                   f"M{p}'s pending-MSHR vector differs from a fresh lookup "
                                   "(v2 §4.4)")
            m.d.sync += [
                Assert(~mv[p] | ((m_mshr[p] & mshr.pending) == fresh_mshr),
                       f"M{p}'s MSHR match vector differs from a fresh lookup (v2 §4.2)"),
                Assert(~mv[p] | ((m_used[p] & wb.in_use) == fresh_used),
                       f"M{p}'s in-use match vector differs from a fresh lookup (v2 §4.2)"),
                Assert(~mv[p] | ((m_open[p] & wb.is_open) == fresh_open),
                       f"M{p}'s OPEN match vector differs from a fresh lookup (v2 §4.2)"),
            ]

    m.d.comb += [
        ctrl.m_valid.eq(_or([mv[p] | qs[p].out.valid for p in range(P)])),
        ctrl.flushes.eq(wb.flushes),
    ]

    # ---- tables, scheduler and media ports (§6, v2 §7), as in the stack shape ----
    m.d.comb += [
        wb.mshr_tags.eq(mshr.tags),
        wb.mshr_pending.eq(mshr.pending),
        wb.drain.eq(ctrl.drain),
        sched.wb_occupied.eq(wb.occupied),
    ]
    if cfg.multiplane == "megaplane":
        m.d.comb += sched.drain.eq(ctrl.drain)   # MP4: drain ends the gather windows
    for c in range(cfg.channels):
        wiring.connect(m, mshr.enq[c], sched.mshr_enq[c])
        wiring.connect(m, wb.enq[c], sched.wb_enq[c])
        # multi-plane commands (docs/timing-contract.md §7a): per channel as in the
        # stack shape; the tables' ports forms have the per-plane issue and done lanes
        if w.planes:
            ctrl._wire_multiplane(m, c, sched, mshr, wb)
        else:
            ctrl._wire_channel(m, c, sched.dec[c], sched, mshr, wb)

    # ---- responses: R, K, E per port, each with its channel's credit (v2 §8) ----
    for p in range(P):
        arb = ResponseArbiter(cfg, **ids, **opts, own_credit=True)
        m.submodules[f"response{p}"] = arb
        wiring.connect(m, mshr.ret[p], arb.mshr_ret)
        wiring.connect(m, wb.ret[p], arb.wb_ret)
        wiring.connect(m, arb.resp, wiring.flipped(ctrl.resp[p]))
        m.d.comb += [
            mshr.ret_sel[p].eq(arb.mshr_sel),
            wb.ret_sel[p].eq(arb.wb_sel),
            arb.mshr_locked.eq(mshr.ret_locked[p]),
            arb.wb_locked.eq(wb.ret_locked[p]),
            mshr.launched[p].eq(arb.mshr_launched),
            wb.launched[p].eq(arb.wb_launched),
            adm.rd_slot[p].eq(arb.slot_next),
            arb.slot_data.eq(adm.rd_data[p]),
            arb.slot_hit.eq(adm.rd_hit[p]),
            adm.release[p].eq(arb.release),
        ]
    return m
