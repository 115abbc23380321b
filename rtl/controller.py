"""The stack controller: the blocks of one HBF stack behind the contract's interfaces.

Implements docs/timing-contract.md §1 (ports ``req[p]``, ``resp[p]``, ``cmd[c]``, ``cpl[c]``,
``drain``), §4.1 and §4a (per port the two-entry ingress queue Q as a ring, the lookup L and
mapping X of its head, the map register M dispatching from ``ta + 2``) and §4.2 (dispatch
from M, DP1: M decides with its own previous decision applied, the tables holding that
decision in their W registers and the controller forwarding W's entry into M's match
vectors) by composing :mod:`.admission`, :mod:`.mapper`, :mod:`.mshr`, :mod:`.write_buffer`,
:mod:`.scheduler` and :mod:`.response`. The port count ``P`` (1 in the stack shape,
``channels`` in the channel shape, §1, §14) is a parameter. Also the structures of
docs/rtl.md "Issue 12, part C" that change no cycle: the ingress queue as a ring (k), the
slot's ``mshr_hit`` recorded a cycle after the merge (m).
"""

from __future__ import annotations

__all__ = ["Controller", "check_supported"]

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.admission import Admission
from hbfsim.rtl.checks import check_mode, inner, protocol
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
    the ``ssd`` media mode. It implements docs/timing-contract.md in both host-port shapes
    (``host_ports = "stack"`` or ``"channel"``) and every mode: demand and aggregation
    reads, ``mshr_merge`` on and off, ``multiplane`` off / page / megaplane, every scheduler,
    both write policies. Any number of stacks is supported: one stack is a
    :class:`Controller`, several are a :class:`hbfsim.rtl.system.System` (§2).
    ``planes_per_die``, ``megaplane_planes`` and the SRAM sizes are accepted: they name
    groups of subarrays and capacities that nothing uses while ``multiplane = "off"``.
    """
    if cfg.host_ports not in ("stack", "channel"):
        raise ValueError(f"host_ports = {cfg.host_ports!r}: the RTL needs host_ports = "
                         "'stack' or 'channel'")
    if cfg.page_cache_pages > 0:
        raise ValueError(f"page_cache_pages = {cfg.page_cache_pages}: the logic-die page cache "
                         "is model-only; the RTL needs page_cache_pages = 0")
    if cfg.media_mode != "hbf":
        raise ValueError(f"media_mode = {cfg.media_mode!r}: the RTL implements only "
                         "media_mode = 'hbf'")


class Controller(wiring.Component):
    """One HBF stack controller built from an :class:`HbfConfig`
    (docs/timing-contract.md, the registered pipeline).

    Per port ``p``: ``req[p].ready`` is the ingress queue Q's room and the admission room,
    both flip-flops (§4.1; in the channel shape every port while ``admission - inflight >=
    P``); Q's head is looked up (L: one page compare per table entry, the entries the tables'
    W registers write in this cycle included) and mapped (X), and both results move into M
    with it, so M dispatches from ``ta + 2`` (§4a) by §4.2's rules, from match vectors kept
    by qualification while it waits and completed by W's forwarded entry (DP1). The tables
    see the issue decision a cycle later (DP6), and responses leave through R / K / E
    (§8, DP7, :class:`~hbfsim.rtl.response.ResponseArbiter`; in the channel shape one per
    port, each with its channel's link credit).

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
        (§1).
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
        Some port's Q or M holds a request (observability: the co-simulation raises
        ``drain`` from the cycle after the last request left M, as the golden run does).
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

        def per_port(member):   # the channel shape: req[p], resp[p] (§1)
            return member if self.ports == 1 else member.array(self.ports)

        super().__init__({
            "req": per_port(In(stream.Signature(req_layout(w)))),
            "resp": per_port(Out(stream.Signature(resp_layout(w)))),
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
        """Request (and response) ports ``P``: ``channels`` in the channel shape (§1), else
        1. The channel shape with one channel is the stack shape."""
        cfg = self._cfg
        return cfg.channels if cfg.host_ports == "channel" else 1

    def elaborate(self, platform):
        """Per port ``p`` of ``P = ports``: A, Q (a ring), L + X, M, W in the tables, R / K /
        E with every waiter passing through R (DP7) and, in the channel shape, the port's
        channel's link credit.

        Forwarding (DP1): L compares Q's head with the tables' pages, in which the entries
        the Ws write in this cycle already count (the tables export them); M's own decision
        of this cycle is not forwarded into L but, when Q's head has M's page, a flag
        registered with the head makes W's entry of the next cycle count in M's vectors (a
        page compare of two registers). In the channel shape a page's reads and writes
        enter one port (its channel's) except under a ``partition-*`` scheduler, where they
        enter two (§4.2.4): then a flag per pair of ports of the two directions, registered
        the same way (``w_xfwd<s>_<p>``), ORs the other port's W entry into M's vectors (a
        write's entry into a read's in-use vector, a read's MSHR entry into a write's
        blocker vector), and a read of a write's page dispatched in the same cycle puts its
        MSHR entry into the write's blocker set at once (``WriteBuffer.disp_fwd``, reads
        before writes).
        """
        m = Module()
        cfg, w = self._cfg, self._w
        P = self.ports
        ids = dict(id_bits=w.id, source_bits=w.source)
        opts = dict(checks=inner(self._checks), mutations=self._mutations)
        shape = {} if P == 1 else dict(ports=P)
        m.submodules.admission = adm = Admission(cfg, **ids, **opts, **shape)
        mappers = []
        if P == 1:
            m.submodules.mapper = mapper = Mapper(cfg)
            mappers.append(mapper)
        m.submodules.mshr = mshr = Mshr(cfg, **opts, **shape)
        m.submodules.write_buffer = wb = WriteBuffer(cfg, sector_bytes=self._sector,
                                                     sectors_in=True, **opts, **shape)
        m.submodules.scheduler = sched = Scheduler(cfg, **opts)
        arbs = []
        # the blocks, for the controller's proof (rtl/controller_lemmas.py)
        self.blocks = dict(admission=adm, mshr=mshr, write_buffer=wb, scheduler=sched,
                           response=arbs, ingress=[], dispatch=[])
        if P == 1:
            m.submodules.response = arb = ResponseArbiter(cfg, **ids, **opts)
            arbs.append(arb)
        offset_bits = ceil_log2(PAGE_BYTES)
        q_layout = data.StructLayout({
            "slot": unsigned(w.slot), "op": ReqOp, "page": unsigned(w.page),
            "offset": unsigned(offset_bits), "bytes": unsigned(w.bytes)})

        def sx(p):   # a per-port name's suffix: none in the stack shape (its Verilog unchanged)
            return "" if P == 1 else f"{p}"

        def per_port(x):
            return [x] if P == 1 else [x[p] for p in range(P)]

        reqs = [self.req] if P == 1 else [self.req[p] for p in range(P)]
        alloc_ready, alloc_slot = per_port(adm.alloc_ready), per_port(adm.alloc_slot)
        adm_alloc, adm_data = per_port(adm.alloc), per_port(adm.alloc_data)
        adm_hit = per_port(adm.hit)
        mdisp, wdisp, probe = per_port(mshr.disp), per_port(wb.disp), per_port(wb.probe)
        disp_match, disp_hit = per_port(mshr.disp_match), per_port(mshr.disp_hit)
        # tables of more than eight entries take M's hit flags registered with its vectors,
        # which M qualifies with their next-cycle states (entry_table.registered_lookup)
        mshr_reg, wb_reg = mshr.registered, wb.registered
        disp_any = per_port(mshr.disp_any) if mshr_reg else None
        open_any, used_any = ((per_port(wb.disp_open_any), per_port(wb.probe_used_any))
                              if wb_reg else (None, None))
        # L's qualification: the entries' states now, or with registered hits those of the
        # next cycle (M registers L's vectors)
        mshr_pending = mshr.pending_next if mshr_reg else mshr.pending
        wb_in_use = wb.in_use_next if wb_reg else wb.in_use
        wb_is_open = wb.is_open_next if wb_reg else wb.is_open
        mshr_w_match, wb_w_match = per_port(mshr.w_match), per_port(wb.w_match)
        mshr_w_entry, wb_w_entry = per_port(mshr.w_entry), per_port(wb.w_entry)
        disp_open, probe_used = per_port(wb.disp_open), per_port(wb.probe_used)
        disp_pend, disp_sectors = per_port(wb.disp_pend), per_port(wb.disp_sectors)
        probe_block, disp_merge = per_port(wb.probe_block), per_port(wb.disp_merge)
        n_mshr, n_wb = cfg.mshr_entries, cfg.write_buffer_entries
        # §4.2.4, §14: under a partition scheduler a page's reads enter one of the first R
        # ports and its writes one of the others, so the W of a port of the other direction can
        # hold an entry of a page in M (a write's entry for a read's RAW probe, a read's MSHR
        # entry for a write's blocker set): a flag per such pair of ports (DP1)
        partition = P > 1 and cfg.scheduler.startswith("partition-")
        R = cfg.read_channels if partition else P

        def others(p):
            return [s for s in range(P) if (s < R) != (p < R)] if partition else []

        # §4.5: with a pool per channel port p's reads and writes hold entries of its own
        # pools only, so its hits read only those; without a partition scheduler a page's
        # requests enter one port (§1), so no other pool can hold its page and L compares
        # the port's page with its own pools' entries only (``local``)
        per_channel = P > 1 and cfg.pools == "channel"
        local = per_channel and not partition
        k_mshr = n_mshr // P if per_channel else n_mshr
        k_wb = n_wb // P if per_channel else n_wb

        def own(p, n, k):   # port p's pool as a mask over a table's n entries
            return Const(((1 << k) - 1) << (p * k), n)

        xflag = {(s, p): Signal(name=f"w_xfwd{s}_{p}") for p in range(P) for s in others(p)}
        qs, m_valids, ports = [], [], []
        for p in range(P):
            # the ingress queue as a ring: a pop moves no item (part C, (k))
            q = StageQueue(q_layout, checks=inner(self._checks), ring=True)
            m.submodules[f"ingress{sx(p)}"] = q
            qs.append(q)
            self.blocks["ingress"].append(q)
            if P > 1:
                mp = Mapper(cfg)
                m.submodules[f"mapper{p}"] = mp
                mappers.append(mp)

            # ---- A: accept into Q; ready from Q's occupancy and the admission count (§4.1;
            # in the channel shape the port's rank, a register) ----
            req = reqs[p]
            m.d.comb += [
                req.ready.eq(q.inp.ready & alloc_ready[p]),
                q.inp.valid.eq(req.valid & alloc_ready[p]),
                q.inp.payload.slot.eq(alloc_slot[p]),
                q.inp.payload.op.eq(req.payload.op),
                q.inp.payload.page.eq(req.payload.addr[offset_bits:]),
                q.inp.payload.offset.eq(req.payload.addr[:offset_bits]),
                q.inp.payload.bytes.eq(req.payload.bytes),
                adm_alloc[p].eq(req.valid & req.ready),
                adm_data[p].id.eq(req.payload.id),
                adm_data[p].op.eq(req.payload.op),
                adm_data[p].source.eq(req.payload.source),
                adm_data[p].bytes.eq(req.payload.bytes),
            ]

            # ---- X: the head of Q is mapped, and registered into M with it (§3) ----
            head = q.out.payload
            mapper = mappers[p]
            m.d.comb += [mapper.page.eq(head.page), mapper.write.eq(head.op == ReqOp.WRITE)]
            if P > 1:   # §1: a request enters the port of the channel its page maps to
                protocol(m, self._checks, ~q.out.valid | (mapper.target.channel == p),
                         f"req[{p}]: a request whose page maps to another channel's port (§1)")

            # ---- M: dispatch (§4.2's rules, with the port's last decision applied, DP1) ----
            m_valid = Signal(name=f"m_valid{sx(p)}")
            m_valids.append(m_valid)
            # M's request, target and sectors are the value loaded with Q's head, held while M
            # waits. The dispatch decision that lets Q's head in (``load``) is the latest
            # signal of the cycle, so it drives no wide enable: two register sets without one,
            # the head of every cycle (``m_*_new``) and M's value of every cycle (``m_*_old``),
            # and a flip-flop ``m_took`` (M loaded at the end of the last cycle) choosing
            # between them; M's op, which starts M's own decision, is a register of its own
            x_first, x_end = sector_range(m, head.offset, head.bytes, self._sector,
                                          f"x_sectors{sx(p)}")
            m_took = Signal(name=f"m_took{sx(p)}")
            m_op = Signal(ReqOp, name=f"m_op{sx(p)}", reset_less=True)
            m_req = Signal(q_layout, name=f"m_req{sx(p)}")
            m_target = Signal(target_layout(w), name=f"m_target{sx(p)}")
            m_sectors = Signal(sectors_layout(self._sector), name=f"m_sectors{sx(p)}")
            x_sectors = Signal(sectors_layout(self._sector), name=f"x_sectors{sx(p)}")
            m.d.comb += [x_sectors.first.eq(x_first), x_sectors.end.eq(x_end)]
            loads = [(m_req, head, "m_req"), (m_target, mapper.target, "m_target"),
                     (m_sectors, x_sectors, "m_sectors")]
            for held, loaded, what in loads:
                new = Signal.like(held, name=f"{what}{sx(p)}_new", reset_less=True)
                old = Signal.like(held, name=f"{what}{sx(p)}_old", reset_less=True)
                m.d.sync += [new.eq(loaded), old.eq(held)]
                m.d.comb += held.eq(Mux(m_took, new, old))
            m.d.comb += disp_sectors[p].eq(m_sectors)
            self.blocks["dispatch"].append(dict(valid=m_valid, req=m_req, target=m_target))
            is_read = m_valid & (m_op == ReqOp.READ)
            is_write = m_valid & (m_op == ReqOp.WRITE)
            m_mshr = Signal(n_mshr, name=f"m_match_mshr{sx(p)}")
            m_used = Signal(n_wb, name=f"m_match_used{sx(p)}")
            m_open = Signal(n_wb, name=f"m_match_open{sx(p)}")
            # DP1: W's entry (M's decision of the last cycle) counts in M's vectors when it was
            # allocated for M's page; the flags were registered with M's load
            fwd_mshr = Signal(name=f"w_fwd_mshr{sx(p)}")
            fwd_wb = Signal(name=f"w_fwd_wb{sx(p)}")
            wf_mshr = named(m, Mux(fwd_mshr, mshr_w_entry[p], 0), f"m_wfwd_mshr{sx(p)}")
            wf_wb = named(m, Mux(fwd_wb, wb_w_entry[p], 0), f"m_wfwd_wb{sx(p)}")
            # the other direction's Ws (partition schedulers): a read port's MSHR entries into
            # a write port's vector (its blocker set), a write port's entries into a read
            # port's in-use vector (its RAW probe)
            xf_mshr, xf_wb = Const(0, n_mshr), Const(0, n_wb)
            for s in others(p):
                if p >= R:
                    xf_mshr = xf_mshr | Mux(xflag[s, p], mshr_w_entry[s], 0)
                else:
                    xf_wb = xf_wb | Mux(xflag[s, p], wb_w_entry[s], 0)
            if others(p):
                v_mshr = named(m, m_mshr | wf_mshr | xf_mshr, f"m_vec_mshr{sx(p)}")
                v_used = named(m, m_used | wf_wb | xf_wb, f"m_vec_used{sx(p)}")
                v_open = named(m, m_open | wf_wb | xf_wb, f"m_vec_open{sx(p)}")
                m.d.comb += wb.probe_xfwd[p].eq(xf_wb)
            else:
                v_mshr = named(m, m_mshr | wf_mshr, f"m_vec_mshr{sx(p)}")
                v_used = named(m, m_used | wf_wb, f"m_vec_used{sx(p)}")
                v_open = named(m, m_open | wf_wb, f"m_vec_open{sx(p)}")
            # the tables get M's registered vectors and the flags (W's entry is added there, and
            # its term of the hit ORed after the entries' trees: registers only on the hit's
            # path)
            m.d.comb += [disp_match[p].eq(m_mshr), mshr_w_match[p].eq(fwd_mshr),
                         disp_open[p].eq(m_open), probe_used[p].eq(m_used),
                         wb_w_match[p].eq(fwd_wb), disp_pend[p].eq(v_mshr)]
            if P == 1:
                m.d.comb += [
                    self.m_valid.eq(m_valid | q.out.valid),
                    self.flushes.eq(wb.flushes),
                ]
            m.d.comb += [
                probe[p].valid.eq(is_read),
                probe[p].page.eq(m_req.page),
                mdisp[p].valid.eq(is_read & ~probe_block[p]),
                mdisp[p].payload.page.eq(m_req.page),
                mdisp[p].payload.target.eq(m_target),
                mdisp[p].payload.bytes.eq(m_req.bytes),
                mdisp[p].payload.slot.eq(m_req.slot),
                wdisp[p].valid.eq(is_write),
                wdisp[p].payload.page.eq(m_req.page),
                wdisp[p].payload.target.eq(m_target),
                wdisp[p].payload.offset.eq(m_req.offset),
                wdisp[p].payload.bytes.eq(m_req.bytes),
                wdisp[p].payload.slot.eq(m_req.slot),
            ]
            read_fire = mdisp[p].valid & mdisp[p].ready
            dispatch = read_fire | (wdisp[p].valid & wdisp[p].ready)
            # the slot's mshr_hit flag recorded a cycle after the merge: it is read at the
            # response, cycles later (part C, (m); no cycle changes)
            hit_q = Signal(name=f"adm_hit_q{sx(p)}")
            hit_slot_q = Signal.like(m_req.slot, name=f"adm_hit_slot_q{sx(p)}")
            m.d.sync += [hit_q.eq(read_fire & disp_hit[p]), hit_slot_q.eq(m_req.slot)]
            m.d.comb += [adm_hit[p].valid.eq(hit_q), adm_hit[p].slot.eq(hit_slot_q)]
            ports.append(dict(q=q, head=head, mapper=mapper, m_valid=m_valid, m_took=m_took,
                              m_op=m_op, m_req=m_req,
                              m_target=m_target, m_sectors=m_sectors, x_first=x_first,
                              x_end=x_end, m_mshr=m_mshr, m_used=m_used, m_open=m_open,
                              fwd_mshr=fwd_mshr, fwd_wb=fwd_wb, v_mshr=v_mshr, v_used=v_used,
                              v_open=v_open, dispatch=dispatch, read_fire=read_fire,
                              is_read=is_read, is_write=is_write))

        # §4.2.4: a read of a write's page dispatched in the same cycle on another port counts
        # as earlier: its MSHR entry (merged into or allocated) joins the blocker set of the
        # entry the write allocates
        for p in range(P):
            if others(p) and p >= R:
                fwd = Const(0, n_mshr)
                for s in others(p):
                    o = ports[s]
                    same = named(m, o["is_read"] & ports[p]["is_write"]
                                 & (o["m_req"].page == ports[p]["m_req"].page),
                                 f"m_same_page{s}_{p}")
                    fwd = fwd | Cat(*[same & o["read_fire"] & (mshr.disp_index[s] == i)
                                      for i in range(n_mshr)])
                m.d.comb += wb.disp_fwd[p].eq(fwd)

        for p in range(P):
            (q, head, mapper, m_valid, m_req, m_target, m_sectors, x_first, x_end, m_mshr,
             m_used, m_open, fwd_mshr, fwd_wb, v_mshr, v_used, v_open, dispatch) = (
                ports[p][k] for k in ("q", "head", "mapper", "m_valid", "m_req", "m_target",
                                      "m_sectors", "x_first", "x_end", "m_mshr", "m_used",
                                      "m_open", "fwd_mshr", "fwd_wb", "v_mshr", "v_used",
                                      "v_open", "dispatch"))

            # ---- L: the head of Q compares its page once with every entry (§4.2, §14); the
            # tables' exports include the Ws' entries, M's own decision reaches M through W
            # (above) ----
            same_page = named(m, m_valid & (m_req.page == head.page), f"l_same_page{sx(p)}")
            mshr_alloc = mdisp[p].valid & mdisp[p].ready & ~disp_hit[p]
            wb_alloc = wdisp[p].valid & wdisp[p].ready & ~disp_merge[p]
            l_mshr = Signal(n_mshr, name=f"l_match_mshr{sx(p)}")
            l_used = Signal(n_wb, name=f"l_match_used{sx(p)}")
            l_open = Signal(n_wb, name=f"l_match_open{sx(p)}")
            # the page compared with the entries' page registers and with the Ws' pages apart,
            # W's result chosen after the compares (the tables' ``tags``, whose multiplexers
            # read W's one-hot, are not on L's path)
            sfx = '' if P == 1 else '_' + str(p)
            mshr_w_eq = [named(m, head.page == wp, f"l_mshr_w_eq{s}{sfx}")
                         for s, wp in enumerate(per_port(mshr.w_page))]
            wb_w_eq = [named(m, head.page == wp, f"l_wb_w_eq{s}{sfx}")
                       for s, wp in enumerate(per_port(wb.w_page))]
            for i in range(n_mshr):
                if local and i // k_mshr != p:
                    continue                # another pool's: never this port's page
                eq = self._l_page_eq(m, head.page, mshr.stored_tags[i], mshr_w_eq,
                                     per_port(mshr.w_entry), i, f"l_mshr_eq{i}{sfx}")
                m.d.comb += l_mshr[i].eq(mshr_pending[i] & eq)
            for j in range(n_wb):
                if local and j // k_wb != p:
                    continue
                page_eq = self._l_page_eq(m, head.page, wb.stored_tags[j], wb_w_eq,
                                          per_port(wb.w_entry), j, f"l_page_eq{j}{sfx}")
                m.d.comb += [l_used[j].eq(wb_in_use[j] & page_eq),
                             l_open[j].eq(wb_is_open[j] & page_eq)]

            # Q's head moves into M when M is empty at the start of the cycle or dispatches
            m.d.comb += q.out.ready.eq(~m_valid | dispatch)
            load = q.out.valid & q.out.ready
            m.d.sync += [fwd_mshr.eq(load & same_page & mshr_alloc),
                         fwd_wb.eq(load & same_page & wb_alloc)]
            for s in others(p):   # the other direction's allocation of the page of M's request
                o = ports[s]
                page_s = o["m_req"].page
                same = Mux(load, head.page == page_s, m_valid & (m_req.page == page_s))
                alloc_s = (o["read_fire"] & ~disp_hit[s]) if s < R else \
                    (wdisp[s].valid & wdisp[s].ready & ~disp_merge[s])
                m.d.sync += xflag[s, p].eq(o["m_valid"] & same & alloc_s)
            m_took, m_op = ports[p]["m_took"], ports[p]["m_op"]
            m.d.sync += m_took.eq(load)
            with m.If(load):
                m.d.sync += [m_valid.eq(1), m_op.eq(head.op)]
            with m.Elif(dispatch):
                m.d.sync += m_valid.eq(0)
            # M's match vectors as M's request (above): the lookup of Q's head (``_new``) and
            # the qualification of M's vectors (``_old``: W's forwarded entry included, a bit
            # stays only while its entry is still mergeable / in use / OPEN, as the tables
            # export them) are registered in every cycle, and ``m_took`` chooses, so that the
            # dispatch decision (``load``) reaches no vector register
            # With registered hits (tables of more than eight entries) the vectors are
            # qualified with the entries' states of the next cycle (the tables' ``*_next``: the
            # entries that do not leave the state in this cycle, and the Ws'), and their ORs
            # registered with them: the tables' hits and RAW block then read flip-flops only,
            # not the entries' states (issue 23; §13: the same values in other registers)
            # the entries a vector can hold (every entry, or with ``local`` the port's pool)
            # and those its hit flag reads (with a pool per channel the port's pool for the
            # MSHR hit and the write buffer's OPEN hit; the RAW block as the vector)
            mask_mshr = own(p, n_mshr, k_mshr) if per_channel else None
            mask_wb = own(p, n_wb, k_wb) if per_channel else None
            vectors = [(m_mshr, l_mshr, v_mshr & mshr_pending,
                        disp_any[p] if mshr_reg else None, "m_match_mshr",
                        mask_mshr if local else None, mask_mshr),
                       (m_used, l_used, v_used & wb_in_use,
                        used_any[p] if wb_reg else None, "m_match_used",
                        mask_wb if local else None, mask_wb if local else None),
                       (m_open, l_open, v_open & wb_is_open,
                        open_any[p] if wb_reg else None, "m_match_open",
                        mask_wb if local else None, mask_wb)]
            for vec, looked_up, qualified, anyf, what, held_mask, hit_mask in vectors:
                new = Signal.like(vec, name=f"{what}{sx(p)}_new")
                old = Signal.like(vec, name=f"{what}{sx(p)}_old")
                m.d.sync += [new.eq(looked_up), old.eq(qualified)]
                chosen = Mux(m_took, new, old)
                m.d.comb += vec.eq(chosen if held_mask is None else chosen & held_mask)
                if anyf is not None:
                    any_new = Signal(name=f"{what}{sx(p)}_any_new")
                    any_old = Signal(name=f"{what}{sx(p)}_any_old")
                    if hit_mask is not None:
                        looked_up, qualified = looked_up & hit_mask, qualified & hit_mask
                    m.d.sync += [any_new.eq(looked_up.any()), any_old.eq(qualified.any())]
                    m.d.comb += anyf.eq(Mux(m_took, any_new, any_old))
            if self._checks:
                # the vectors M uses equal a fresh lookup of the state the tables export (the
                # Ws' entries included, DP1)
                fresh_mshr = Cat(*[mshr.pending[i] & (mshr.tags[i] == m_req.page)
                                   for i in range(n_mshr)])
                fresh_used = Cat(*[wb.in_use[j] & (wb.tags[j] == m_req.page)
                                   for j in range(n_wb)])
                fresh_open = Cat(*[wb.is_open[j] & (wb.tags[j] == m_req.page)
                                   for j in range(n_wb)])
                m.d.sync += [
                    Assert(~m_valid | (m_op == m_req.op),
                           f"M{sx(p)}'s op register differs from its request's op"),
                    Assert(~m_valid | ((v_mshr & mshr.pending) == fresh_mshr),
                           f"M{sx(p)}'s MSHR match vector differs from a fresh lookup (DP1)"),
                    Assert(~m_valid | ((v_used & wb.in_use) == fresh_used),
                           f"M{sx(p)}'s in-use match vector differs from a fresh lookup (DP1)"),
                    Assert(~m_valid | ((v_open & wb.is_open) == fresh_open),
                           f"M{sx(p)}'s OPEN match vector differs from a fresh lookup (DP1)"),
                ]
        if P > 1:
            m.d.comb += [
                self.m_valid.eq(Cat(*[m_valids[p] | qs[p].out.valid for p in range(P)]).any()),
                self.flushes.eq(wb.flushes),
            ]

        # ---- tables, scheduler and media ports (§6, §7) ----
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
            # multi-plane commands (§7a): the scheduler's lanes name the entries of a group,
            # one per plane; each entry then follows DP6 (MSHR) or §4.4 (write buffer)
            if w.planes:
                self._wire_multiplane(m, c, sched, mshr, wb)
            else:
                self._wire_channel(m, c, sched.dec[c], sched, mshr, wb)

        # ---- responses: R, K, E per port (§8, DP7); in the channel shape each with the
        # credit of its channel ----
        for p in range(P):
            if P > 1:
                arb = ResponseArbiter(cfg, **ids, **opts, own_credit=True)
                m.submodules[f"response{p}"] = arb
                arbs.append(arb)
            arb = arbs[p]
            wiring.connect(m, mshr.ret if P == 1 else mshr.ret[p], arb.mshr_ret)
            wiring.connect(m, wb.ret if P == 1 else wb.ret[p], arb.wb_ret)
            wiring.connect(m, arb.resp, wiring.flipped(self.resp if P == 1 else self.resp[p]))
            m.d.comb += [
                per_port(mshr.ret_sel)[p].eq(arb.mshr_sel),
                per_port(wb.ret_sel)[p].eq(arb.wb_sel),
                arb.mshr_locked.eq(per_port(mshr.ret_locked)[p]),
                arb.wb_locked.eq(per_port(wb.ret_locked)[p]),
                per_port(mshr.launched)[p].eq(arb.mshr_launched),
                per_port(wb.launched)[p].eq(arb.wb_launched),
                per_port(adm.rd_slot)[p].eq(arb.slot_next),
                *([adm.rd_used[p].eq(arb.slot_next_used)] if P > 1 else []),
                arb.slot_data.eq(per_port(adm.rd_data)[p]),
                arb.slot_hit.eq(per_port(adm.rd_hit)[p]),
                per_port(adm.release)[p].eq(arb.release),
            ]
        return m

    @staticmethod
    def _l_page_eq(m, page, stored, w_eqs, w_entries, i, name):
        """``page == tags[i]`` for a table whose ``tags[i]`` is W's page where a W writes
        entry ``i`` (``w_entries[p][i]``), else the entry's page register ``stored``: one
        compare per register (``w_eqs[p]``: ``page`` equals W ``p``'s page), W's one-hot
        choosing among the results (L, DP1)."""
        eq = page == stored
        for w_eq, we in zip(reversed(w_eqs), reversed(w_entries)):
            eq = Mux(we[i], w_eq, eq)
        return named(m, eq, name)

    def _wire_channel(self, m, c, issue, sched, mshr, wb) -> None:
        """Wire channel ``c``'s command and completion ports and route ``issue`` (the
        issue decision, §7) and the completion
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
