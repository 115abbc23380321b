"""Write coverage buffer: per-page entries with a coverage bitmap, flush causes and waiters.

Implements docs/history.md §4.2 (write dispatch, and read dispatch step 1: the
read-after-write probe), §4.4 (write-buffer entries), §5 (flush causes), the write-buffer side
of §6 (enqueue candidates) and of §8 (responses); sources.md W1-W4, W6.
"""

from __future__ import annotations

__all__ = ["FlushCause", "WbState", "WriteBuffer", "sector_range", "sectors_layout",
           "wdisp_layout"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, cover, invariant, protocol
from hbfsim.rtl.layouts import (EntryKind, Widths, done_layout, event_layout, queue_op_layout,
                                ret_layout, target_layout)
from hbfsim.rtl.entry_table import check_waiters, drain_waiters, offer_enqueues
from hbfsim.rtl.logic import at_least, lowest_set, named, select, tree_sum
from hbfsim.rtl.mutations import check_mutations


class WbState(enum.Enum, shape=3):
    """State of one write-buffer entry (contract §4.4)."""

    FREE = 0
    OPEN = 1
    FLUSH = 2
    QUEUED = 3
    PROGRAM = 4
    RETURN = 5


class FlushCause(enum.Enum, shape=3):
    """Why an entry left OPEN (contract §5), in priority order; NONE while OPEN."""

    NONE = 0
    FULL = 1
    RAW = 2
    PRESSURE = 3
    DEADLINE = 4
    DRAIN = 5


#: The flush causes in priority order, as counted by ``WriteBuffer.flushes``.
FLUSH_CAUSES = (FlushCause.FULL, FlushCause.RAW, FlushCause.PRESSURE, FlushCause.DEADLINE,
                FlushCause.DRAIN)


def flushes_layout() -> data.ArrayLayout:
    """Flush counters (§5 statistics): one 32-bit count per cause of :data:`FLUSH_CAUSES`."""
    return data.ArrayLayout(unsigned(32), len(FLUSH_CAUSES))


def count_flushes(m, leaving: dict, flushes, checks=False) -> None:
    """Drive ``flushes`` (per cause of :data:`FLUSH_CAUSES`, the entries that left OPEN
    before this cycle, §5) from ``leaving[cause]``, this cycle's per-entry flags.

    Each 32-bit count is a low byte and a high part with the low byte's carry held one
    cycle: the register update is an 8-bit add behind the flush decision instead of a
    32-bit one, and the port adds the held carry (``count = low + 256 * (high + carry)``,
    exact in every cycle, so an entry flushed in cycle t is still counted from t + 1).
    """
    for k, why in enumerate(FLUSH_CAUSES):
        name = f"flushes_{why.name.lower()}"
        low = Signal(9, name=f"{name}_low")         # bit 8: the carry into the high part
        high = Signal(24, name=f"{name}_high")
        m.d.sync += [low.eq(low[:8] + tree_sum(leaving[why])), high.eq(high + low[8])]
        m.d.comb += flushes[k].eq(Cat(low[:8], high + low[8]))
        if checks:   # the split counter against a plain 32-bit one
            ref = Signal(32, name=f"chk_{name}")
            m.d.sync += ref.eq(ref + tree_sum(leaving[why]))
            invariant(m, checks, flushes[k] == ref,
                      f"flush counter {why.name} differs from the plain count")


def _or_fields(onehot, values):
    """``values[p]`` for the set bit ``p`` of a one-hot (or zero) vector, as an AND-OR."""
    out = Const(0, 1)
    for p, v in enumerate(values):
        out = out | Mux(onehot[p], v, 0)
    return out


def sectors_layout(sector_bytes: int) -> data.StructLayout:
    """The sectors ``[first, end)`` a write covers, in units of ``sector_bytes``."""
    sectors = PAGE_BYTES // sector_bytes
    return data.StructLayout({"first": range(sectors), "end": range(sectors + 1)})


def sector_range(m, offset, nbytes, sector_bytes: int, name: str):
    """``(first, end)``: the sectors of the byte range ``[offset, offset + nbytes)``
    (``nbytes >= 1``; a partly written sector counts, §5). One adder."""
    sectors = PAGE_BYTES // sector_bytes
    shift = sector_bytes.bit_length() - 1
    end = Signal(range(sectors + 1), name=f"{name}_end")
    m.d.comb += end.eq(((offset + nbytes - 1) >> shift) + 1)
    return offset >> shift, end


def wdisp_layout(w: Widths) -> data.StructLayout:
    """A write dispatched from the map register M (contract §4.2)."""
    return data.StructLayout({
        "page": unsigned(w.page),
        "target": target_layout(w),
        "offset": unsigned(ceil_log2(PAGE_BYTES)),
        "bytes": unsigned(w.bytes),
        "slot": unsigned(w.slot),
    })


class WriteBuffer(wiring.Component):
    """Write coverage buffer of ``write_buffer_entries`` page entries.

    A write on ``disp`` merges into the OPEN entry of its page (coverage ``|=`` its range,
    waiter appended) or allocates the lowest FREE entry as OPEN with a deadline of
    ``write_deadline_ticks``. With neither, ``disp.ready`` is low (the write stalls) and,
    unless an entry chosen for pressure is still not FREE, the oldest OPEN entry is flushed
    with cause ``pressure``.

    In each cycle an OPEN entry goes to FLUSH on the first of ``full`` (coverage complete at
    the start of the cycle), ``raw`` (``probe`` names its page), ``pressure``, ``deadline``
    and ``drain``. A FLUSH entry with incomplete coverage under the ``strict`` policy goes
    to RETURN with ``error`` on every response (W3); otherwise it is offered on ``enq[c]``
    once no older entry of its page is in use (W4) and no MSHR entry of its page is
    mergeable. ``issue[c]`` moves it to PROGRAM, ``done[c]`` to RETURN; ``ret`` then answers
    its waiters in arrival order, as in :class:`~hbfsim.rtl.mshr.Mshr`.

    Under contract 2 (v2 §4.4, §8) a handshake on ``ret`` is the response stage R taking the
    waiter; an entry whose waiters have all been taken stays in RETURN (still in use for the
    read-after-write probe and W4) until ``launched`` names it: FREE from the cycle after its
    last waiter's launch.

    Age order between entries is an age matrix: ``older[i]`` has bit ``j`` set when entry
    ``j`` was allocated before entry ``i`` (and bit ``j`` is cleared when ``j`` is
    allocated again), so "smaller alloc" costs no timestamp and never wraps.

    Parameters
    ----------
    cfg : HbfConfig
        ``write_buffer_entries``, ``write_deadline_ticks``, ``write_timeout_policy``,
        ``channels``, ``admission`` and ``mshr_entries`` are used.
    sector_bytes : int
        Coverage granularity: one bitmap bit per ``sector_bytes`` bytes (a power of two,
        1..4096). 1 (default) tracks bytes exactly as the golden model does (W1); 32 costs
        32 times fewer flip-flops and is exact when every write is 32-byte aligned; a
        partially written sector counts as covered.
    checks : bool or "formal"
        Properties (:mod:`hbfsim.rtl.checks`): one OPEN entry per page, coverage never
        shrinks while OPEN, no strict-policy PROGRAM of an incomplete page, W4, no lost or
        duplicated waiter; events name entries in the right state; covers of every flush
        cause.
    mutations : set of str
        Injected faults (:mod:`hbfsim.rtl.mutations`); empty for the real design.
    ports : int
        1, or ``P = channels`` in the channel shape of contract 2 (v2 §4.2.3, §4.2.4, §8):
        then ``disp``, ``disp_index``, ``probe``, ``disp_open``, ``probe_used``,
        ``disp_pend``, ``ret`` and ``launched`` are arrays of ``P`` and ``disp_merge``,
        ``probe_block``, ``ret_sel``, ``ret_locked`` ``P``-bit vectors; ``disp_fwd`` (per
        port) names the MSHR entry a read of the same page merged into or allocated in this
        cycle on another port (§4.2.4: it joins the blocker set of an entry the write
        allocates). Allocation by :func:`~hbfsim.rtl.entry_table.grant_free`, at most one
        pressure victim per cycle, response port ``p`` for the entries of channel ``p``.
    sectors_in : bool
        The write's sectors come decoded on ``disp_sectors`` (the controller decodes them in
        X and holds them in M, issue 12 part B: no adder between M's dispatch and the
        coverage registers) instead of being computed here from ``offset`` and ``bytes``.

    Members
    -------
    disp : ``In(stream.Signature(wdisp_layout))``
        Write dispatch from M: page, mapping, byte range, admission slot.
    disp_sectors : ``In(sectors_layout(sector_bytes))``
        With ``sectors_in`` (an array of ``P`` in the channel shape): the sectors ``[first,
        end)`` of the write on ``disp``; with checks, a protocol assert compares them with
        the byte range's.
    disp_merge : ``Out(1)``
        The write on ``disp`` merges into an OPEN entry.
    disp_index : ``Out(range(write_buffer_entries))``
        The entry it merges into or allocates.
    probe : ``In(data.StructLayout({"valid": 1, "page": page}))``
        The read waiting in M, if any (its page).
    probe_block : ``Out(1)``
        Some entry of the probed page is not FREE: the read must stall (§4.2 read step 1).
    drain : ``In(1)``
        Flush every OPEN entry (idle tail drain, W2).
    mshr_tags : ``In(ArrayLayout(page, mshr_entries))``, ``mshr_pending`` : ``In(mshr_entries)``
        The MSHR entries' pages and which are in WAIT, QUEUED or ISSUED, for the flush rule
        "no MSHR entry for the page in WAIT, QUEUED or ISSUED" (§4.4).
    enq, issue, done, ret, ret_sel, ret_locked
        As in :class:`~hbfsim.rtl.mshr.Mshr`; commands are PROGRAMs (``EntryKind.WBUF``).
    occupied : ``Out(range(write_buffer_entries + 1))``
        Non-FREE entries (write-drain trigger, §7).
    programs_queued : ``Out(1)``
        Some entry is QUEUED, i.e. a PROGRAM waits in a channel queue (§7).
    cause : ``Out(ArrayLayout(FlushCause, write_buffer_entries))``
        The flush cause each entry recorded (statistics, §5).
    flushes : ``Out(ArrayLayout(unsigned(32), 5))``
        Statistics (§5): entries that left OPEN so far, per cause ``FULL``, ``RAW``,
        ``PRESSURE``, ``DEADLINE``, ``DRAIN`` (index = cause - 1); 32-bit, wrapping. The
        golden model's ``flush_<cause>`` counters.
    launched : ``In(event_layout)``
        Contract 2 only: the last waiter of the named entry was launched (v2 §8).
    disp_open, probe_used : ``In(write_buffer_entries)``
        Contract 2 only: M's registered match vectors (v2 §4.2, the lookup L) for the write on
        ``disp`` (entries OPEN for its page) and the read on ``probe`` (entries in use for
        its page); the table qualifies them by the entries' states instead of comparing
        pages.
    tags : ``Out(ArrayLayout(page, write_buffer_entries))``, ``in_use``, ``is_open`` : ``Out``
        Contract 2 only: every entry's page, and which are in use / OPEN, for the lookup L.
    w_entry : ``Out(write_buffer_entries)``
        ``pipeline = "deep"`` only (docs/timing-contract.md DP1): the entry the W
        register writes in this cycle (one-hot), for the controller's forwarding into M's
        vectors; ``tags``, ``in_use`` and ``is_open`` include it. Under deep the flush
        decisions are registered (DP5), offers come from a register per channel (DP3), free
        entries from a free list (DP4) and ``ret`` from C1 / C2 / a cursor (DP7):
        :mod:`hbfsim.rtl.write_buffer_deep`.
    w_match : ``In(1)``
        ``pipeline = "deep"`` only: W's entry was allocated for the page of the request on
        ``disp`` / ``probe`` (the controller's flag, registered with M's load). Under deep
        ``disp_open`` and ``probe_used`` are M's registered vectors without W's entry; the
        table adds W's entry itself, and its hit and ``probe_block`` are ``w_match`` ORed
        after the entries' trees (from registers only).
        In the channel shape (``ports = P``) under deep, ``w_entry`` is an array of ``P``
        and ``w_match`` a ``P``-bit vector (one per port); ``probe_xfwd[p]`` (partition
        schedulers) names the entries the Ws of the write ports allocate in this cycle for
        the page of read port ``p``'s request (M's flags ``w_xfwd``, DP1), added to its
        in-use vector as ``w_match`` adds the port's own W; and
        :mod:`hbfsim.rtl.write_buffer_deep` elaborates the table with ``P`` W registers and
        RAW probes, a free list with ``P`` heads, one pressure victim per cycle and ``C1`` /
        ``C2`` / a cursor per response port.

    Raises
    ------
    ValueError
        If ``sector_bytes`` is not a power of two between 1 and 4096.
    """

    def __new__(cls, cfg: HbfConfig, *args, sector_bytes: int = 1, **kwargs):
        # Validate before the object exists (no unused-elaboratable warning on refusal).
        if not (isinstance(sector_bytes, int) and 1 <= sector_bytes <= PAGE_BYTES
                and sector_bytes & (sector_bytes - 1) == 0):
            raise ValueError(f"sector_bytes must be a power of two in 1..{PAGE_BYTES}, "
                             f"not {sector_bytes!r}")
        return super().__new__(cls, cfg, *args, sector_bytes=sector_bytes, **kwargs)

    def __init__(self, cfg: HbfConfig, *, sector_bytes: int = 1, checks: bool | str = True,
                 mutations=(), ports: int = 1, sectors_in: bool = False):
        self._cfg = cfg
        self._w = w = Widths.of(cfg)
        self._sector = sector_bytes
        self._sectors_in = sectors_in
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._ports = P = ports
        m, c, n = cfg.write_buffer_entries, cfg.channels, cfg.mshr_entries
        if P > 1:   # the channel shape (v2 §4.2.3, §4.2.4, §8): one of each per port
            deep = ({"w_entry": Out(m).array(P), "w_match": In(P),
                     "probe_xfwd": In(m).array(P)}
                    if getattr(cfg, "pipeline", "standard") == "deep" else {})
            super().__init__(deep | {
                "launched": In(event_layout(w.wb_index)).array(P),
                "disp_open": In(m).array(P),
                "probe_used": In(m).array(P),
                "disp_pend": In(n).array(P),
                "disp_fwd": In(n).array(P),
                **({"disp_sectors": In(sectors_layout(sector_bytes)).array(P)}
                   if sectors_in else {}),
                "tags": Out(data.ArrayLayout(unsigned(w.page), m)),
                "in_use": Out(m),
                "is_open": Out(m),
                "disp": In(stream.Signature(wdisp_layout(w))).array(P),
                "disp_merge": Out(P),
                "disp_index": Out(range(max(2, m))).array(P),
                "probe": In(data.StructLayout({"valid": 1, "page": unsigned(w.page)})).array(P),
                "probe_block": Out(P),
                "drain": In(1),
                "mshr_tags": In(data.ArrayLayout(unsigned(w.page), n)),
                "mshr_pending": In(n),
                "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
                "issue": In(event_layout(w.wb_index)).array(c * max(1, w.planes)),
                "done": In(done_layout(w.wb_index)).array(c * max(1, w.planes)),
                "ret": Out(stream.Signature(ret_layout(w, w.wb_index))).array(P),
                "ret_sel": In(P),
                "ret_locked": Out(P),
                "occupied": Out(range(m + 1)),
                "programs_queued": Out(1),
                "cause": Out(data.ArrayLayout(FlushCause, m)),
                "flushes": Out(flushes_layout()),
            })
            return
        v2 = {"launched": In(event_layout(w.wb_index)), "disp_open": In(m), "probe_used": In(m),
              "disp_pend": In(n),
              "tags": Out(data.ArrayLayout(unsigned(w.page), m)), "in_use": Out(m),
              "is_open": Out(m)} if cfg.contract == 2 else {}
        if self._sectors_in:   # the byte range's sectors, decoded by the neighbour
            v2["disp_sectors"] = In(sectors_layout(sector_bytes))
        if getattr(cfg, "pipeline", "standard") == "deep":   # DP1: W's allocation, for M
            v2["w_entry"] = Out(m)
            v2["w_match"] = In(1)
        super().__init__(v2 | {
            "disp": In(stream.Signature(wdisp_layout(w))),
            "disp_merge": Out(1),
            "disp_index": Out(range(max(2, m))),
            "probe": In(data.StructLayout({"valid": 1, "page": unsigned(w.page)})),
            "probe_block": Out(1),
            "drain": In(1),
            "mshr_tags": In(data.ArrayLayout(unsigned(w.page), n)),
            "mshr_pending": In(n),
            "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
            "issue": In(event_layout(w.wb_index)).array(c * max(1, w.planes)),
            "done": In(done_layout(w.wb_index)).array(c * max(1, w.planes)),
            "ret": Out(stream.Signature(ret_layout(w, w.wb_index))),
            "ret_sel": In(1),
            "ret_locked": Out(1),
            "occupied": Out(range(m + 1)),
            "programs_queued": Out(1),
            "cause": Out(data.ArrayLayout(FlushCause, m)),
            "flushes": Out(flushes_layout()),
        })

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    @property
    def sector_bytes(self) -> int:
        return self._sector

    def elaborate(self, platform):
        if getattr(self._cfg, "pipeline", "standard") == "deep":
            from hbfsim.rtl.write_buffer_deep import elaborate_deep

            return elaborate_deep(self)
        if self._ports > 1:
            from hbfsim.rtl.write_buffer_ports import elaborate_ports

            return elaborate_ports(self)
        m = Module()
        cfg, w = self._cfg, self._w
        n = cfg.write_buffer_entries
        strict = cfg.write_timeout_policy == "strict"
        sectors = PAGE_BYTES // self._sector
        deadline = cfg.write_deadline_ticks
        mut = self._mutations

        state = [Signal(WbState, name=f"state{i}") for i in range(n)]
        page = [Signal(w.page, name=f"page{i}") for i in range(n)]
        target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
        cov = [Signal(sectors, name=f"cov{i}") for i in range(n)]
        # Cycles left to the deadline: 0 from cycle alloc + write_deadline_ticks on (§4.4).
        remain = [Signal(range(max(2, deadline)), name=f"remain{i}") for i in range(n)]
        cause = [Signal(FlushCause, name=f"cause{i}") for i in range(n)]
        pressure = [Signal(name=f"pressure{i}") for i in range(n)]
        older = [Signal(n, name=f"older{i}") for i in range(n)]
        head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
        tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
        error = [Signal(name=f"error{i}") for i in range(n)]

        m.submodules.next_slot = next_slot = memory.Memory(
            shape=unsigned(w.slot), depth=cfg.admission, init=[])
        link_wr = next_slot.write_port()
        link_rd = next_slot.read_port(domain="comb")

        used = [named(m, s != WbState.FREE, f"used{i}") for i, s in enumerate(state)]
        is_open = [named(m, s == WbState.OPEN, f"open{i}") for i, s in enumerate(state)]
        full = [named(m, c.all(), f"full{i}") for i, c in enumerate(cov)]

        # ---- dispatch of a write: merge into the OPEN entry or allocate (§4.2) ----
        d = self.disp.payload
        if cfg.contract == 2:
            # v2 §4.2: the lookup register, qualified by the entry's state (no page compare)
            match = [is_open[i] & self.disp_open[i] for i in range(n)]
            m.d.comb += [self.tags[i].eq(page[i]) for i in range(n)]
            m.d.comb += [self.in_use.eq(Cat(*used)), self.is_open.eq(Cat(*is_open))]
        else:
            match = [is_open[i] & (page[i] == d.page) for i in range(n)]
        hit, hit_index = lowest_set(m, match, "hit_index")
        any_free, free_index = lowest_set(m, [~u for u in used], "free_index")
        m.d.comb += [
            self.disp.ready.eq(hit | any_free),
            self.disp_merge.eq(hit),
            self.disp_index.eq(Mux(hit, hit_index, free_index)),
        ]
        fire = named(m, self.disp.valid & self.disp.ready, "fire")
        merge = named(m, fire & hit, "merge")
        allocate = named(m, fire & ~hit, "allocate")
        stalled = named(m, self.disp.valid & ~hit & ~any_free, "stalled")
        # Sectors [lo, hi] of the byte range [offset, offset + bytes).
        if self._sectors_in:
            # decoded by the controller as the write moved into M (its X stage): the
            # adder is off the path from M's dispatch to the coverage registers
            lo, hi_plus_1 = self.disp_sectors.first, self.disp_sectors.end
            if self._checks:
                ref_lo, ref_end = sector_range(m, d.offset, d.bytes, self._sector,
                                               "chk_sectors")
                protocol(m, self._checks, ~self.disp.valid | ((lo == ref_lo)
                                                              & (hi_plus_1 == ref_end)),
                         "disp_sectors differs from the sectors of the write's byte range")
        else:
            lo, hi_plus_1 = sector_range(m, d.offset, d.bytes, self._sector, "sectors")
        mask = Signal(sectors)
        m.d.comb += mask.eq(at_least(m, lo, sectors, "from_lo")
                            & ~at_least(m, hi_plus_1, sectors, "from_hi"))
        m.d.comb += [
            link_wr.addr.eq(select(m, tail, hit_index, "hit_tail")),
            link_wr.data.eq(d.slot),
            link_wr.en.eq(merge),
        ]

        # ---- flush triggers (§4.4 first bullet) ----
        if cfg.contract == 2:
            probe_match = [named(m, used[i] & self.probe_used[i], f"probe_match{i}")
                           for i in range(n)]
        else:
            probe_match = [named(m, used[i] & (page[i] == self.probe.page), f"probe_match{i}")
                           for i in range(n)]
        m.d.comb += self.probe_block.eq(Cat(*probe_match).any())
        pressure_live = named(m, Cat(*[used[i] & pressure[i] for i in range(n)]).any(),
                              "pressure_live")
        oldest_open = [is_open[i] & ~(older[i] & Cat(*is_open)).any() for i in range(n)]
        remain_zero = [r == 0 for r in remain]
        triggers = []
        for i in range(n):
            raw = self.probe.valid & probe_match[i] & is_open[i]
            victim = named(m, stalled & ~pressure_live & oldest_open[i], f"victim{i}")
            triggers.append((victim, [(full[i], FlushCause.FULL), (raw, FlushCause.RAW),
                                      (victim, FlushCause.PRESSURE),
                                      (remain_zero[i], FlushCause.DEADLINE),
                                      (self.drain, FlushCause.DRAIN)]))

        # ---- FLUSH: strict errors and enqueue eligibility (§4.4 second and third bullets) ----
        eligible = []
        mshr_wait = []
        strict_error = []
        serialized = []
        if cfg.contract == 2:
            # v2 §4.4, §16 (S2, S3): the blocker set (pending MSHR entries of the page) and the
            # older set (older write-buffer entries of the page in use), recorded at allocation
            # from M's match vectors; a bit stays only while its entry is still pending / in
            # use (no entry of the page becomes either while this one is in use: a read of
            # the page stalls in M on the RAW probe, a newer write entry is not older)
            blockers = [Signal(cfg.mshr_entries, name=f"blockers{i}") for i in range(n)]
            older_page = [Signal(n, name=f"older_page{i}") for i in range(n)]
            pend_now, used_now = Cat(*self.mshr_pending), Cat(*used)
            blocker_live = [named(m, blockers[i] & pend_now, f"blocker_live{i}")
                            for i in range(n)]
            older_live = [named(m, older_page[i] & used_now, f"older_live{i}") for i in range(n)]
            for i in range(n):
                with m.If(allocate & (free_index == i)):
                    m.d.sync += [blockers[i].eq(self.disp_pend & pend_now),
                                 older_page[i].eq(self.probe_used & used_now)]
                with m.Else():
                    m.d.sync += [blockers[i].eq(blocker_live[i]),
                                 older_page[i].eq(older_live[i])]
        for i in range(n):
            in_flush = state[i] == WbState.FLUSH
            if cfg.contract == 2:
                same_page_older = older_live[i].any()
                mshr_busy = blocker_live[i].any()
                if self._checks:   # v2 §18 step 4: the recorded sets equal v1's comparisons
                    v1_older = Cat(*[older[i][j] & used[j] & (page[j] == page[i])
                                     for j in range(n)])
                    v1_busy = Cat(*[self.mshr_pending[k] & (self.mshr_tags[k] == page[i])
                                    for k in range(cfg.mshr_entries)])
                    if i == 0:   # the recorded sets start from M's vectors: exact inputs
                        fresh_used = Cat(*[used[j] & (page[j] == d.page) for j in range(n)])
                        fresh_pend = Cat(*[self.mshr_pending[k] & (self.mshr_tags[k] == d.page)
                                           for k in range(cfg.mshr_entries)])
                        protocol(m, self._checks, ~allocate
                                 | ((self.probe_used & used_now) == fresh_used),
                                 "probe_used differs from the in-use entries of the page of a "
                                 "write that allocates (v2 §4.2)")
                        protocol(m, self._checks, ~allocate
                                 | ((self.disp_pend & pend_now) == fresh_pend),
                                 "disp_pend differs from the pending MSHR entries of the page "
                                 "of a write that allocates (v2 §4.4)")
                    invariant(m, self._checks, ~used[i] | (older_live[i] == v1_older),
                              f"write-buffer entry {i}: the recorded older set differs from "
                              "the page comparisons (v2 §4.4)")
                    invariant(m, self._checks, ~used[i] | (blocker_live[i] == v1_busy),
                              f"write-buffer entry {i}: the recorded blocker set differs from "
                              "the MSHR page comparisons (v2 §4.4)")
            else:
                same_page_older = Cat(*[older[i][j] & used[j] & (page[j] == page[i])
                                        for j in range(n)]).any()
                mshr_busy = Cat(*[self.mshr_pending[k] & (self.mshr_tags[k] == page[i])
                                  for k in range(cfg.mshr_entries)]).any()
            complete = full[i] if strict and "wb-strict-partial" not in mut else 1
            serialized.append(named(m, ~same_page_older, f"serialized{i}"))
            order_ok = 1 if "wb-w4-ignored" in mut else serialized[i]
            eligible.append(named(m, in_flush & complete & order_ok & ~mshr_busy,
                                  f"eligible{i}"))
            mshr_wait.append(in_flush & mshr_busy)
            strict_error.append(in_flush & ~full[i] if strict else Const(0))
        enq_fire, enq_index = offer_enqueues(m, self.enq, eligible, target, EntryKind.WBUF)

        # ---- responses: drain one entry's waiter list in order (§8) ----
        v2 = cfg.contract == 2
        # v2 §8: every waiter of the entry has been taken into R; FREE after the last launch
        drained = [Signal(name=f"drained{i}") for i in range(n)] if v2 else [Const(0)] * n
        pop, cur, last, locked = drain_waiters(
            m, self.ret, self.ret_sel, self.ret_locked,
            [(s == WbState.RETURN) & ~drained[i] for i, s in enumerate(state)]
            if v2 else [s == WbState.RETURN for s in state],
            head, tail, target, error, link_rd, taken=v2)

        m.d.comb += [
            self.occupied.eq(tree_sum(used)),
            self.programs_queued.eq(Cat(*[s == WbState.QUEUED for s in state]).any()),
        ]
        for i in range(n):
            m.d.comb += self.cause[i].eq(cause[i])

        # ---- per-entry next state ----
        leaving = {why: [] for why in FLUSH_CAUSES}
        alloc_onehot = Cat(*[free_index == j for j in range(n)])
        for i in range(n):
            allocated_here = allocate & (free_index == i)
            with m.If(allocated_here):
                m.d.sync += [
                    state[i].eq(WbState.OPEN),
                    page[i].eq(d.page),
                    target[i].eq(d.target),
                    cov[i].eq(mask),
                    remain[i].eq(deadline - 1),
                    cause[i].eq(FlushCause.NONE),
                    pressure[i].eq(0),
                    older[i].eq(Cat(*used)),
                    head[i].eq(d.slot),
                    tail[i].eq(d.slot),
                    error[i].eq(0),
                ]
            with m.Elif(allocate):
                m.d.sync += older[i].eq(older[i] & ~alloc_onehot)
            with m.If(merge & (hit_index == i)):
                merged = mask if "wb-coverage-overwrite" in mut else cov[i] | mask
                m.d.sync += [cov[i].eq(merged), tail[i].eq(d.slot)]
            with m.If(~allocated_here & (remain[i] != 0)):
                m.d.sync += remain[i].eq(remain[i] - 1)

            victim, causes = triggers[i]
            with m.If(victim):
                m.d.sync += pressure[i].eq(1)
            earlier = Const(0)
            for cond, why in causes:   # the cause this entry leaves OPEN with, if any
                leaving[why].append(is_open[i] & cond & ~earlier)
                earlier = earlier | cond
            with m.If(is_open[i]):
                for k, (cond, why) in enumerate(causes):
                    with (m.If if k == 0 else m.Elif)(cond):
                        m.d.sync += [state[i].eq(WbState.FLUSH), cause[i].eq(why)]
            with m.If(strict_error[i]):
                m.d.sync += [state[i].eq(WbState.RETURN), error[i].eq(1)]
            # one issue and one done port per channel, or per plane of its megaplane (MP9)
            lanes = len(self.issue) // cfg.channels
            for c in range(cfg.channels):
                with m.If(enq_fire[c] & (enq_index[c] == i)):
                    m.d.sync += state[i].eq(WbState.QUEUED)
                for k in range(c * lanes, (c + 1) * lanes):
                    with m.If(self.issue[k].valid & (self.issue[k].index == i)):
                        m.d.sync += state[i].eq(WbState.PROGRAM)
                    with m.If(self.done[k].valid & (self.done[k].index == i)):
                        m.d.sync += [state[i].eq(WbState.RETURN),
                                     error[i].eq(self.done[k].error)]
            with m.If(pop & (cur == i)):
                with m.If(last):
                    m.d.sync += drained[i].eq(1) if v2 else state[i].eq(WbState.FREE)
                with m.Else():
                    m.d.sync += head[i].eq(link_rd.data)
            if v2:
                with m.If(self.launched.valid & (self.launched.index == i)):
                    m.d.sync += [state[i].eq(WbState.FREE), drained[i].eq(0)]

        # ---- statistics (§5): per cause, the entries leaving OPEN in this cycle ----
        count_flushes(m, leaving, self.flushes, self._checks)

        if self._checks:
            self._add_checks(m, state, page, head, tail, allocate, merge, hit_index, free_index,
                             pop, cur, locked, serialized, cov, full, fire, leaving, stalled,
                             strict_error, mshr_wait, drained)
        return m

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
        count; ``drained`` (contract 2, or None) counts as FREE (v2 §8)."""
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

    def _media_protocols(self, m, state):
        """The media side's promises: ``issue`` names a QUEUED entry, ``done`` a PROGRAM one."""
        checks, n = self._checks, self._cfg.write_buffer_entries
        states = Array(state)
        for c in range(len(self.issue)):
            ev, done = self.issue[c], self.done[c]
            protocol(m, checks,
                     ~ev.valid | ((ev.index < n) & (states[ev.index] == WbState.QUEUED)),
                     f"issue[{c}] names a write-buffer entry that is not QUEUED")
            protocol(m, checks,
                     ~done.valid | ((done.index < n) & (states[done.index] == WbState.PROGRAM)),
                     f"done[{c}] names a write-buffer entry that is not PROGRAM")

    def _add_checks(self, m, state, page, head, tail, allocate, merge, hit_index, free_index,
                    pop, cur, locked, serialized, cov, full, fire, leaving, stalled,
                    strict_error, mshr_wait, drained):
        cfg, checks = self._cfg, self._checks
        v2 = cfg.contract == 2
        n = cfg.write_buffer_entries
        strict = cfg.write_timeout_policy == "strict"
        d = self.disp.payload
        protocol(m, checks, ~self.disp.valid | ((d.bytes >= 1) & (d.offset + d.bytes
                                                                  <= PAGE_BYTES)),
                 "write dispatched with a byte range outside its page")
        check_waiters(m, checks, cfg.admission, fire, d.slot, pop, self.ret,
                      Cat(*[s == WbState.FREE for s in state]).all(), "write buffer")
        for why in FLUSH_CAUSES:
            cover(m, checks, Cat(*leaving[why]).any(), f"an entry flushes with cause {why.name}")
        cover(m, checks, stalled, "a write stalls: no OPEN entry of its page, none FREE")
        cover(m, checks, Cat(*strict_error).any() if strict else Const(0),
              "strict policy: an incomplete entry answers with error")
        cover(m, checks, Cat(*[(state[i] == WbState.FLUSH) & ~serialized[i]
                               for i in range(n)]).any(),
              "a FLUSH entry waits for an older entry of its page (W4)")
        cover(m, checks, Cat(*mshr_wait).any(), "a FLUSH entry waits for an MSHR entry")
        for i in range(n):
            self._coverage_checks(m, i, state, cov, full)
        waiters = [Signal(range(cfg.admission + 1), name=f"waiters{i}") for i in range(n)]
        for i in range(n):
            with m.If(allocate & (free_index == i)):
                m.d.sync += waiters[i].eq(1)
            with m.If(merge & (hit_index == i)):
                m.d.sync += waiters[i].eq(waiters[i] + 1)
            with m.If(pop & (cur == i)):
                m.d.sync += waiters[i].eq(waiters[i] - 1)
            # v2 §8: all waiters taken into R, the last not yet launched, counts as FREE
            self._entry_invariants(m, i, state, page, head, tail, waiters, serialized,
                                   drained[i] if v2 else None)
        self._media_protocols(m, state)
        if v2:
            ev = self.launched
            protocol(m, checks, ~ev.valid | ((ev.index < n) & Array(drained)[ev.index]),
                     "launched names a write-buffer entry with waiters left to take")
        else:
            protocol(m, checks, ~locked | self.ret_sel,
                     "ret_sel dropped while a write-buffer entry was being drained")
