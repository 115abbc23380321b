"""The system layer: several stack controllers behind one request and one response port
(or, in the channel shape, behind their own ports).

Implements docs/timing-contract.md §2 and the system-wide parts of §1 (media ports of every
stack, one ``drain``, ``m_valid``). With ``stacks = 1`` the system layer is a wire and
:class:`~hbfsim.rtl.controller.Controller` itself is the top. In the stack shape the
routing is a registered route stage (a two-entry system ingress queue,
:mod:`.stage_queue`, stack selection A2) and a round robin selects among the stacks'
egress heads in zero cycles. In the channel shape the system layer is wiring: ``S * C``
request and response ports, each its stack's own.
"""

from __future__ import annotations

__all__ = ["System", "stack_config", "top"]

from amaranth.hdl import Array, Assert, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.controller import Controller, check_supported
from hbfsim.rtl.layouts import (Widths, cmd_layout, cpl_layout, req_layout, resp_layout,
                                system_req_layout)
from hbfsim.rtl.logic import divmod_const, lowest_set, named, select
from hbfsim.rtl.stage_queue import StageQueue
from hbfsim.rtl.write_buffer import flushes_layout


def stack_config(cfg: HbfConfig) -> HbfConfig:
    """Return the configuration one stack controller of ``cfg`` is built from.

    A stack sees only stack-local addresses (§2), so its controller is the one-stack system
    of the same keys with ``capacity_bytes / stacks``: ``pages_per_stack`` (the only quantity
    of the RTL that depends on ``stacks``), and with it every width and the contiguous and
    explicit placements, stay those of the golden model's stack controllers. Every stack gets
    the same configuration.
    """
    if cfg.stacks == 1:
        return cfg
    return cfg.replace(stacks=1, capacity_bytes=cfg.capacity_bytes // cfg.stacks)


def top(cfg: HbfConfig, **options) -> wiring.Component:
    """Return the top block for ``cfg``: :class:`Controller` for one stack, else :class:`System`.

    ``options`` are those of :class:`Controller` (``id_bits``, ``source_bits``,
    ``sector_bytes``, ``checks``).
    """
    if cfg.stacks == 1:
        return Controller(cfg, **options)
    return System(cfg, **options)


class System(wiring.Component):
    """``cfg.stacks`` stack controllers behind one system request and response port.

    Stack shape (docs/timing-contract.md §2): ``req`` enters a two-entry system ingress
    queue (``ready`` = its occupancy at the start of the cycle below 2, a register). The
    system address is relative to ``base_address``; its logical page ``p`` goes to stack
    ``p mod S`` with stack-local page ``p div S`` under ``stack_select = interleave``, to
    stack ``p div P`` with page ``p mod P`` under ``contiguous`` (``P`` = pages per stack),
    both computed on the way in. The head, accepted in ``ts``, is presented to its stack
    from ``ts + 1`` (the route stage) and waits there, in order, until that stack accepts
    it. ``m_valid`` also covers the route stage.

    Return (§2): round robin over the stacks whose ``resp.valid`` (their egress heads,
    registers) is high; the grant goes to the first such stack at or after the pointer, and
    a handshake moves the pointer to the granted stack + 1 (mod S). A stack that is not
    granted sees ``resp.ready`` low and keeps its response in its egress queue.

    Channel shape (``host_ports = "channel"``, §2): no route stage and no
    round robin; ``req`` and ``resp`` are arrays of ``stacks * channels`` ports, port ``k =
    stack * channels + channel`` wired to that stack's port, with the stack-local
    ``req_layout`` (the requester maps the address, §1); no ``rr``, ``offers`` or ``routed``.

    Media ports are numbered globally, ``stack * channels + channel`` (as the model's trace);
    ``drain`` goes to every stack (the golden model's rule is system-wide: raised from the
    cycle after the last request left every stack's M); ``m_valid`` is high while any
    stack's M holds a request.

    Parameters
    ----------
    cfg : HbfConfig
        The system configuration, ``stacks >= 2``; each stack controller is built from
        :func:`stack_config` ``(cfg)``.
    id_bits, source_bits, sector_bytes, checks, mutations
        As for :class:`Controller`; ``checks`` also asserts that a presented request's
        address lies inside the system.

    Members
    -------
    req : ``In(stream.Signature(system_req_layout))``
        Host requests, address relative to ``base_address``.
    resp : ``Out(stream.Signature(resp_layout))``
        Host responses.
    cmd : ``Out(cmd_layout).array(stacks * channels)``
        Media commands of every stack, valid only; stack-local channel-local pages.
    cpl : ``In(cpl_layout).array(stacks * channels)``
        Media completions of every stack, valid only.
    drain : ``In(1)``
        End of workload, to every stack (W2).
    m_valid : ``Out(1)``
        Some stack's M holds a request.
    rr : ``Out(range(stacks))``
        The round-robin pointer (observability).
    offers : ``Out(stacks)``
        Bit ``s``: stack ``s`` offers a response in this cycle (observability: the stacks
        compete for the port when more than one bit is set).
    flushes : ``Out(ArrayLayout(unsigned(32), 5))``
        Statistics (§5): the stacks' write-buffer flush counters summed per cause, as the
        golden model's system-wide ``flush_<cause>`` counters.
    routed : ``Out(stacks)``
        Observability: bit ``s``, stack ``s`` accepts the route stage's
        head in this cycle (its Ingress depth is counted then, as the golden model does).

    Raises
    ------
    ValueError
        For ``stacks = 1`` (use :class:`Controller`) or a configuration the RTL does not
        implement (:func:`~hbfsim.rtl.controller.check_supported`), naming the key.
    """

    def __new__(cls, cfg: HbfConfig, *args, **kwargs):
        # As Controller: refuse before the object exists (no unused-elaboratable warning).
        check_supported(cfg)
        if cfg.stacks < 2:
            raise ValueError(f"stacks = {cfg.stacks}: with one stack the system layer is a "
                             "wire (contract §2); build Controller(cfg)")
        return super().__new__(cls, cfg, *args, **kwargs)

    def __init__(self, cfg: HbfConfig, *, id_bits: int = 32, source_bits: int = 8,
                 sector_bytes: int = 1, checks: bool = True, mutations=()):
        self._cfg = cfg
        self._stack_cfg = stack_config(cfg)
        self._w = w = Widths.of(self._stack_cfg, id_bits=id_bits, source_bits=source_bits)
        self._options = dict(id_bits=id_bits, source_bits=source_bits,
                             sector_bytes=sector_bytes, checks=checks, mutations=mutations)
        self._checks = checks
        n = cfg.stacks * cfg.channels
        if self.channel_shape:
            # §2: S * C request and response ports, k = stack * C + channel, each the
            # port of its stack (stack-local addresses: the requester maps, §1)
            super().__init__({
                "req": In(stream.Signature(req_layout(w))).array(n),
                "resp": Out(stream.Signature(resp_layout(w))).array(n),
                "cmd": Out(cmd_layout(w)).array(n),
                "cpl": In(cpl_layout(w)).array(n),
                "drain": In(1),
                "m_valid": Out(1),
                "flushes": Out(flushes_layout()),
            })
            return
        super().__init__({
            "req": In(stream.Signature(system_req_layout(w, cfg.pages))),
            "resp": Out(stream.Signature(resp_layout(w))),
            "cmd": Out(cmd_layout(w)).array(n),
            "cpl": In(cpl_layout(w)).array(n),
            "drain": In(1),
            "m_valid": Out(1),
            "rr": Out(range(cfg.stacks)),
            "offers": Out(cfg.stacks),
            "flushes": Out(flushes_layout()),
            "routed": Out(cfg.stacks),
        })

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    @property
    def stack_cfg(self) -> HbfConfig:
        return self._stack_cfg

    @property
    def channel_shape(self) -> bool:
        """The channel shape (docs/timing-contract.md §2): the system layer is wiring."""
        return self._cfg.host_ports == "channel"

    @property
    def widths(self) -> Widths:
        """Field widths of each stack controller (the system address is wider)."""
        return self._w

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        n_stacks, chans = cfg.stacks, cfg.channels
        stacks = []
        for s in range(n_stacks):
            ctl = Controller(self._stack_cfg, **self._options)
            m.submodules[f"stack{s}"] = ctl
            stacks.append(ctl)

        if self.channel_shape:
            # §2: no routing, no arbitration, no cycle; system port k = stack * C + port
            k = 0
            for ctl in stacks:
                for req, resp in self._stack_ports(ctl):
                    wiring.connect(m, wiring.flipped(self.req[k]), req)
                    wiring.connect(m, resp, wiring.flipped(self.resp[k]))
                    k += 1
            route_valid = 0
        else:
            route_valid = self._route(m, stacks)
            self._return(m, stacks)

        # ---- media ports, drain, m_valid (§1, per stack; numbered globally) ----
        for s, ctl in enumerate(stacks):
            for c in range(chans):
                m.d.comb += [self.cmd[s * chans + c].eq(ctl.cmd[c]),
                             ctl.cpl[c].eq(self.cpl[s * chans + c])]
            m.d.comb += ctl.drain.eq(self.drain)
        m_any = route_valid
        for ctl in stacks:
            m_any = m_any | ctl.m_valid
        m.d.comb += self.m_valid.eq(m_any)
        for k in range(len(self.flushes)):
            m.d.comb += self.flushes[k].eq(sum(ctl.flushes[k] for ctl in stacks))
        return m

    @staticmethod
    def _stack_ports(ctl: Controller) -> list:
        """``(req, resp)`` per port of a stack controller in the channel shape: one per
        channel, or its one port with one channel (that shape is the stack shape, §14)."""
        if ctl.ports == 1:
            return [(ctl.req, ctl.resp)]
        return list(zip(ctl.req, ctl.resp))

    def _route(self, m, stacks):
        """The route stage (docs/timing-contract.md §2, stack shape); returns its valid
        bit."""
        cfg, w = self._cfg, self._w
        n_stacks = cfg.stacks
        offset_bits = ceil_log2(PAGE_BYTES)
        req = self.req
        page = req.payload.addr[offset_bits:]
        if cfg.stack_select == "interleave":
            local, stack = divmod_const(page, n_stacks)
        else:  # contiguous
            stack, local = divmod_const(page, cfg.pages_per_stack)
        inside = named(m, page < cfg.pages, "req_inside") if cfg.pages < 1 << len(page) else 1
        layout = data.StructLayout({"stack": range(n_stacks), "req": stacks[0].req.payload.shape()})
        m.submodules.route = route = StageQueue(layout, checks=bool(self._checks))
        into = route.inp.payload
        m.d.comb += [
            # a page beyond the system is never taken (it stalls; the checks flag it)
            route.inp.valid.eq(req.valid & inside),
            req.ready.eq(route.inp.ready & inside),
            into.stack.eq(stack),
            into.req.id.eq(req.payload.id),
            into.req.op.eq(req.payload.op),
            into.req.addr.eq(Value.cast(local)[:w.page] << offset_bits
                             | req.payload.addr[:offset_bits]),
            into.req.bytes.eq(req.payload.bytes),
            into.req.source.eq(req.payload.source),
        ]
        head = route.out.payload
        for s, ctl in enumerate(stacks):
            m.d.comb += [ctl.req.valid.eq(route.out.valid & (head.stack == s)),
                         ctl.req.payload.eq(head.req)]
        m.d.comb += route.out.ready.eq(Array(_pad([ctl.req.ready for ctl in stacks]))[head.stack])
        m.d.comb += [self.routed[s].eq(ctl.req.valid & ctl.req.ready)
                     for s, ctl in enumerate(stacks)]
        if self._checks:
            m.d.sync += Assert(~req.valid | inside, "request address outside the system (A1)")
        return route.out.valid

    def _return(self, m, stacks):
        """Fair return arbitration (§2): round robin among the stacks' egress heads, zero
        cycles."""
        n_stacks = self._cfg.stacks
        # ---- fair return arbitration (§2): round robin, zero cycles ----
        rr = Signal(range(n_stacks))
        valid = [ctl.resp.valid for ctl in stacks]
        any_valid, first = lowest_set(m, valid, "resp_first")
        any_after, first_after = lowest_set(
            m, [named(m, v & (rr <= s), f"resp_after{s}") for s, v in enumerate(valid)],
            "resp_first_after")
        grant = named(m, Mux(any_after, first_after, first), "resp_grant")
        resp = self.resp
        payload = select(m, _pad([Value.cast(ctl.resp.payload) for ctl in stacks]), grant,
                         "resp_payload")
        m.d.comb += [
            resp.valid.eq(any_valid),
            resp.payload.eq(payload),
            self.rr.eq(rr),
        ]
        m.d.comb += [self.offers[s].eq(v) for s, v in enumerate(valid)]
        for s, ctl in enumerate(stacks):
            # a stack not granted sees ready low; its chosen entry stays chosen (§8)
            m.d.comb += ctl.resp.ready.eq(resp.ready & any_valid & (grant == s))
        with m.If(resp.valid & resp.ready):
            m.d.sync += rr.eq(Mux(grant == n_stacks - 1, 0, grant + 1))


def _pad(items: list) -> list:
    """Repeat the last item up to a power-of-two count: a multiplexer indexed by a full
    binary index then covers every index value (Verilator's CASEINCOMPLETE with 3 stacks)."""
    return items + items[-1:] * ((1 << ceil_log2(len(items))) - len(items))

