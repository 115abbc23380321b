"""Address mapper: stack-local page -> channel, channel-local page, subarray.

Implements docs/history.md §3 (sources.md A3, A4; source §4.1.2) bit for bit as
:meth:`hbfsim.model.mapping.Mapper.channel_of`: combinational, no cycle.
"""

from __future__ import annotations

__all__ = ["Mapper"]

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hbfsim.config import HbfConfig
from hbfsim.rtl.layouts import Widths, target_layout
from hbfsim.rtl.logic import divmod_const


class Mapper(wiring.Component):
    """Map a stack-local page onto its channel, channel-local page and subarray.

    Placement (contract §3): ``interleave``, ``grouped``, ``contiguous`` (the last region
    absorbs the remainder when the page count does not split evenly, as in the golden model)
    or ``explicit`` (a constant table of page ranges, priority as a sorted-range lookup:
    the range with the greatest first page at or below ``q`` decides; pages it does not hold
    fall back to ``q mod C``). Under a ``partition-xRyW`` scheduler reads map over the first
    ``R`` channels and writes over the rest, selected by ``write``.

    Parameters
    ----------
    cfg : HbfConfig
        Stack configuration; ``placement``, ``group_pages``, ``explicit_map``, ``channels``,
        ``subarrays_per_channel`` and ``scheduler`` are used.

    Members
    -------
    page : ``In(Widths.page)``
        Stack-local page ``q = addr div 4096``.
    write : ``In(1)``
        The request is a write (matters only under a partition scheduler).
    target : ``Out(target_layout)``
        ``channel``, ``local`` (channel-local page) and ``subarray``.
    """

    def __init__(self, cfg: HbfConfig):
        self._cfg = cfg
        self._w = Widths.of(cfg)
        super().__init__({
            "page": In(self._w.page),
            "write": In(1),
            "target": Out(target_layout(self._w)),
        })

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    def _place(self, m: Module, q: Value, n: int, offset: int) -> tuple[Value, Value]:
        """Channel (with ``offset`` added) and channel-local page of ``q`` over ``n`` channels."""
        cfg = self._cfg
        if cfg.placement == "interleave":
            local, ch = divmod_const(q, n)
        elif cfg.placement == "grouped":
            g = cfg.group_pages
            groups, within = divmod_const(q, g)
            _, ch = divmod_const(groups, n)
            rows, _ = divmod_const(q, g * n)
            local = rows * g + within
        elif cfg.placement == "contiguous":
            region = cfg.pages_per_stack // n
            # The last channel takes the pages beyond n * region (model: min(q // region, n-1)).
            raw, _ = divmod_const(q, region)
            ch = Mux(raw > n - 1, n - 1, raw)
            local = q - ch * region
        else:  # explicit: a constant range table; the local index is q itself (sources.md A4)
            ch = Signal(self._w.channel, name="explicit_channel")
            fallback = divmod_const(q, n)[1]
            m.d.comb += ch.eq(fallback)
            for first, last, channel in sorted(cfg.explicit_map):
                # Later (greater first page) ranges override earlier ones, as bisect_right does.
                with m.If(q >= first):
                    m.d.comb += ch.eq(Mux(q <= last, channel, fallback))
            local = q
        return ch + offset, local

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        q = self.page
        if cfg.scheduler.startswith("partition-"):
            r = cfg.read_channels
            rd_ch, rd_local = self._place(m, q, r, 0)
            wr_ch, wr_local = self._place(m, q, cfg.channels - r, r)
            ch = Mux(self.write, wr_ch, rd_ch)
            local = Mux(self.write, wr_local, rd_local)
        else:
            ch, local = self._place(m, q, cfg.channels, 0)
        local_sig = Signal(self._w.page)
        m.d.comb += local_sig.eq(local)
        m.d.comb += [
            self.target.channel.eq(ch),
            self.target.local.eq(local_sig),
            self.target.subarray.eq(divmod_const(local_sig, cfg.subarrays_per_channel)[1]),
        ]
        return m
