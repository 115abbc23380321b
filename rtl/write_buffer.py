"""Write coverage buffer: per-page entries with a coverage bitmap, flush causes and waiters.

Implements docs/timing-contract.md §4.2 (write dispatch, and read dispatch step 1: the
read-after-write probe), §4.4 (write-buffer entries), §5 (flush causes), the write-buffer side
of §6 (enqueue offers) and of §8 (responses) under the registered pipeline: DP1 (the
dispatch written a cycle later from the register W), DP3 (registered offers), DP4 (the free
list), DP5 (registered flush decisions) and the write buffer's side of DP7 (C1 / C2 /
cursor); with the structures of docs/rtl.md "Issue 12, part C" that change no cycle (the
state as an AND-OR of its events, "coverage complete" a flip-flop). The port count ``P`` is
a parameter (1 in the stack shape, ``channels`` in the channel shape). sources.md W1-W4, W6.
"""

from __future__ import annotations

__all__ = ["FLUSH_CAUSES", "FlushCause", "WbState", "WriteBuffer", "sector_range", "sectors_layout",
           "wdisp_layout"]

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.rtl.checks import check_mode, invariant, protocol, proving
from hbfsim.rtl.layouts import (FLUSH_CAUSES, EntryKind, FlushCause, WbState, Widths,
                                done_layout, event_layout, queue_op_layout, ret_layout,
                                target_layout)
from hbfsim.rtl.entry_table import offer_registered, registered_lookup, response_stages
from hbfsim.rtl.free_list import free_list, free_list_heads, port_pools
from hbfsim.rtl.logic import at_least, named, onehot_index, onehot_select, tree_sum
from hbfsim.rtl.mutations import check_mutations
from hbfsim.rtl.write_buffer_checks import WriteBufferChecks


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


class WriteBuffer(WriteBufferChecks, wiring.Component):
    """Write coverage buffer of ``write_buffer_entries`` page entries.

    A write on ``disp`` merges into the OPEN entry of its page (coverage ``|=`` its range,
    waiter appended) or allocates the entry at the head of the free list (DP4) as OPEN with
    a deadline of ``write_deadline_ticks``; the decision is written a cycle later from the
    port's register W (DP1). With neither, ``disp.ready`` is low (the write stalls) and,
    unless an entry chosen for pressure is still not FREE, the oldest OPEN entry is flushed
    with cause ``pressure`` (one victim per cycle however many ports stall).

    An OPEN entry goes to FLUSH on the first of ``full`` (coverage complete), ``raw``
    (``probe`` names its page), ``pressure``, ``deadline`` and ``drain``, decided from the
    state at the start of a cycle and taking effect a cycle later (DP5). A FLUSH entry with
    incomplete coverage under the ``strict`` policy goes to RETURN with ``error`` on every
    response (W3); otherwise it becomes a candidate once no older entry of its page is in
    use (W4) and no MSHR entry of its page is mergeable, and a registered offer per channel
    takes the lowest-index candidate (DP3). ``issue[c]`` moves it to PROGRAM, ``done[c]`` to
    RETURN; ``ret`` then answers its waiters in arrival order through C1 / C2 / a cursor
    (DP7), as in :class:`~hbfsim.rtl.mshr.Mshr`: a handshake on ``ret`` is R taking the
    waiter, and an entry whose waiters have all been taken stays in RETURN (still in use for
    the read-after-write probe and W4) until ``launched`` names it.

    Age order between entries is an age matrix: ``older[i]`` has bit ``j`` set when entry
    ``j`` was allocated before entry ``i`` (and bit ``j`` is cleared when ``j`` is
    allocated again; of the entries allocated in one cycle, those of lower rank are older),
    so "smaller alloc" costs no timestamp and never wraps.

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
        The port count ``P``: 1 in the stack shape, ``channels`` in the channel shape
        (§4.2.3, §4.2.4, §8). With ``P > 1`` the per-port members below are arrays of ``P``
        (the one-bit ones ``P``-bit vectors); response port ``p`` drains the entries of
        channel ``p``.
    registered : bool or None
        The registered lookup structures (:func:`~hbfsim.rtl.entry_table.registered_lookup`:
        M's hit flags registered with its vectors, which arrive qualified by the entries'
        next-cycle states; with several ports, the free list's heads in registers). None
        (default): chosen by the table's size, ``write_buffer_entries > 8``. The same
        cycles either way (§13); the formal set checks both.
    sectors_in : bool
        The write's sectors come decoded on ``disp_sectors`` (the controller decodes them in
        X and holds them in M, issue 12 part B: no adder between M's dispatch and the
        coverage registers) instead of being computed here from ``offset`` and ``bytes``.

    Members
    -------
    disp : ``In(stream.Signature(wdisp_layout))``, per port
        Write dispatch from M: page, mapping, byte range, admission slot.
    disp_sectors : ``In(sectors_layout(sector_bytes))``, per port
        With ``sectors_in``: the sectors ``[first, end)`` of the write on ``disp``; with
        checks, a protocol assert compares them with the byte range's.
    disp_open, probe_used : ``In(write_buffer_entries)``, per port
        M's registered match vectors (§4.2, the lookup L), without W's entry, for the write
        on ``disp`` (entries OPEN for its page) and the read on ``probe`` (entries in use
        for its page); the table qualifies them by the entries' states instead of
        comparing pages (with ``registered`` they come qualified: ``disp_open_any``).
    disp_open_any, probe_used_any : ``In(1)``, per port
        Only with ``registered``: the OR of ``disp_open`` / ``probe_used``, registered with
        them, which M qualified when it registered them by the entries' states of this
        cycle (``is_open_next``, ``in_use_next`` of the cycle before): the hit and
        ``probe_block`` read flip-flops only.
    disp_pend : ``In(mshr_entries)``, per port
        M's pending-MSHR vector for the write's page: its blocker set (§4.4).
    w_match : ``In(1)``, per port
        W's entry was allocated for the page of the request on ``disp`` / ``probe`` (the
        controller's flag, registered with M's load): the table adds W's entry to the
        vectors, and its hit and ``probe_block`` are ``w_match`` ORed after the entries'
        trees (from registers only).
    w_entry : ``Out(write_buffer_entries)``, per port
        The entry W writes in this cycle (one-hot), for the controller's forwarding into
        M's vectors.
    probe_xfwd : ``In(write_buffer_entries)``, per port, ``P > 1`` only
        Under a partition scheduler, the entries the Ws of the write ports allocate in this
        cycle for the page of read port ``p``'s request (M's flags ``w_xfwd``, DP1).
    disp_fwd : ``In(mshr_entries)``, per port, ``P > 1`` only
        The MSHR entry a read of the same page merged into or allocated in this cycle on
        another port (§4.2.4: it joins the blocker set of an entry the write allocates).
    disp_merge : ``Out(1)``, per port
        The write on ``disp`` merges into an OPEN entry.
    disp_index : ``Out(range(write_buffer_entries))``, per port
        The entry it merges into or allocates.
    probe : ``In(data.StructLayout({"valid": 1, "page": page}))``, per port
        The read waiting in M, if any (its page).
    probe_block : ``Out(1)``, per port
        Some entry of the probed page is not FREE: the read must stall (§4.2 read step 1).
    drain : ``In(1)``
        Flush every OPEN entry (idle tail drain, W2).
    mshr_tags : ``In(ArrayLayout(page, mshr_entries))``, ``mshr_pending`` : ``In(mshr_entries)``
        The MSHR entries' pages and which are in WAIT, QUEUED or ISSUED, for the flush rule
        "no MSHR entry for the page in WAIT, QUEUED or ISSUED" (§4.4).
    enq, issue, done, ret, ret_sel, ret_locked, launched
        As in :class:`~hbfsim.rtl.mshr.Mshr`; commands are PROGRAMs (``EntryKind.WBUF``).
    tags : ``Out(ArrayLayout(page, write_buffer_entries))``, ``in_use``, ``is_open`` : ``Out``
        Every entry's page, and which are in use / OPEN (W's entries included), for L.
    in_use_next, is_open_next : ``Out(write_buffer_entries)``
        Only with ``registered``: which entries are in use / OPEN in the next cycle (W's
        entries, and the others that do not leave that state in this cycle), for the
        qualification of M's vectors.
    stored_tags, w_page : ``Out``
        As in :class:`~hbfsim.rtl.mshr.Mshr`: the page registers and W's page apart.
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
                 mutations=(), ports: int = 1, sectors_in: bool = False,
                 registered: bool | None = None):
        self._cfg = cfg
        self._w = w = Widths.of(cfg)
        self._sector = sector_bytes
        self._sectors_in = sectors_in
        self._checks = check_mode(checks)
        self._mutations = check_mutations(mutations)
        self._ports = P = ports
        m, c, n = cfg.write_buffer_entries, cfg.channels, cfg.mshr_entries
        # M's hit flags registered with its vectors, the free list's heads in registers
        # (entry_table.registered_lookup: tables of more than eight entries)
        self._registered = registered = (registered_lookup(m) if registered is None
                                         else bool(registered))

        def per_port(member):
            return member if P == 1 else member.array(P)

        members = {
            "launched": per_port(In(event_layout(w.wb_index))),
            "disp_open": per_port(In(m)),
            "probe_used": per_port(In(m)),
            "disp_pend": per_port(In(n)),
            "tags": Out(data.ArrayLayout(unsigned(w.page), m)),
            "in_use": Out(m),
            "is_open": Out(m),
            "stored_tags": Out(data.ArrayLayout(unsigned(w.page), m)),
            "w_page": per_port(Out(unsigned(w.page))),
        }
        if registered:
            members |= {"disp_open_any": In(P), "probe_used_any": In(P),
                        "in_use_next": Out(m), "is_open_next": Out(m)}
        if sectors_in:   # the byte range's sectors, decoded by the neighbour
            members["disp_sectors"] = per_port(In(sectors_layout(sector_bytes)))
        members["w_entry"] = per_port(Out(m))
        members["w_match"] = In(P)
        if P > 1:   # §4.2.4: the other direction's W entries and same-cycle reads
            members["probe_xfwd"] = In(m).array(P)
            members["disp_fwd"] = In(n).array(P)
        super().__init__(members | {
            "disp": per_port(In(stream.Signature(wdisp_layout(w)))),
            "disp_merge": Out(P),
            "disp_index": per_port(Out(range(max(2, m)))),
            "probe": per_port(In(data.StructLayout({"valid": 1, "page": unsigned(w.page)}))),
            "probe_block": Out(P),
            "drain": In(1),
            "mshr_tags": In(data.ArrayLayout(unsigned(w.page), n)),
            "mshr_pending": In(n),
            "enq": Out(stream.Signature(queue_op_layout(w))).array(c),
            "issue": In(event_layout(w.wb_index)).array(c * max(1, w.planes)),
            "done": In(done_layout(w.wb_index)).array(c * max(1, w.planes)),
            "ret": per_port(Out(stream.Signature(ret_layout(w, w.wb_index)))),
            "ret_sel": In(P),
            "ret_locked": Out(P),
            "occupied": Out(range(m + 1)),
            "programs_queued": Out(1),
            "cause": Out(data.ArrayLayout(FlushCause, m)),
            "flushes": Out(flushes_layout()),
        })

    @property
    def registered(self) -> bool:
        """Whether this table takes the registered lookup structures (``registered``)."""
        return self._registered

    @property
    def cfg(self) -> HbfConfig:
        return self._cfg

    @property
    def sector_bytes(self) -> int:
        return self._sector

    def elaborate(self, platform):
        """Per port a W register, a merge, a RAW probe and a head of the free list (DP4),
        one pressure victim per cycle (DP5), per response port ``C1``, ``C2`` and a cursor
        over the entries of its channel (DP7)."""
        m = Module()
        cfg, w, checks = self._cfg, self._w, self._checks
        n = cfg.write_buffer_entries
        strict = cfg.write_timeout_policy == "strict"
        sectors = PAGE_BYTES // self._sector
        deadline = cfg.write_deadline_ticks
        mut = self._mutations
        P = self._ports
        per_channel = P > 1 and cfg.pools == "channel"     # §4.5: a pool per channel
        pool_k = n // P if per_channel else n               # entries per pool

        # per entry the ports whose W can write it: every port, or its pool's (§4.5 B2)
        writers = [[i // pool_k] if per_channel else list(range(P)) for i in range(n)]
        # per entry the channels whose queue, command and completion ports can name it: its
        # pool's, or every channel (``lanes`` event ports per channel, channel-major)
        lanes = len(self.issue) // cfg.channels
        chans = [[i // pool_k] if per_channel else list(range(cfg.channels)) for i in range(n)]
        lanes_of = [[c * lanes + k for c in chans[i] for k in range(lanes)] for i in range(n)]

        def own(i):   # entry i's pool as a mask over the entries
            b = i - i % pool_k
            return Const(((1 << pool_k) - 1) << b, n)

        def sx(p):   # a per-port name's suffix: none in the stack shape (its Verilog unchanged)
            return "" if P == 1 else f"_p{p}"

        def per_port(x):
            return [x] if P == 1 else list(x)

        disps, probes, launched = per_port(self.disp), per_port(self.probe), per_port(self.launched)
        disp_open_in, probe_used_in = per_port(self.disp_open), per_port(self.probe_used)
        disp_pend = per_port(self.disp_pend)
        w_match = [self.w_match] if P == 1 else [self.w_match[p] for p in range(P)]
        registered = self._registered
        if registered:
            open_any = per_port(self.disp_open_any) if P > 1 else [self.disp_open_any]
            used_any = per_port(self.probe_used_any) if P > 1 else [self.probe_used_any]
        else:
            open_any = used_any = None

        state = [Signal(WbState, name=f"state{i}") for i in range(n)]
        # QUEUED -> PROGRAM at the issue decision (§4.4): the decision of td is decoded per
        # entry into a flip-flop, and the entry is PROGRAM from td + 1 as ``state_now`` (the
        # register, QUEUED in td + 1 with the flag set, moves to PROGRAM at the end of td + 1),
        # so the issue decision is not on the state's path. Only "QUEUED" and "PROGRAM" tell
        # the two apart: FREE, OPEN, FLUSH and RETURN read the register.
        issue_q = [Signal(name=f"issue_q{i}") for i in range(n)]
        state_now = [Signal(WbState, name=f"state_now{i}") for i in range(n)]
        for i in range(n):
            m.d.comb += state_now[i].eq(Mux(issue_q[i], WbState.PROGRAM, state[i]))
        page = [Signal(w.page, name=f"page{i}") for i in range(n)]
        target = [Signal(target_layout(w), name=f"target{i}") for i in range(n)]
        cov = [Signal(sectors, name=f"cov{i}") for i in range(n)]
        # Cycles left to the deadline: 0 from cycle alloc + write_deadline_ticks on (§4.4)
        remain = [Signal(range(max(2, deadline)), name=f"remain{i}") for i in range(n)]
        cause = [Signal(FlushCause, name=f"cause{i}") for i in range(n)]
        pressure = [Signal(name=f"pressure{i}") for i in range(n)]
        older = [Signal(n, name=f"older{i}") for i in range(n)]
        head = [Signal(w.slot, name=f"head{i}") for i in range(n)]
        tail = [Signal(w.slot, name=f"tail{i}") for i in range(n)]
        error = [Signal(name=f"error{i}") for i in range(n)]
        drained = [Signal(name=f"drained{i}") for i in range(n)]
        # "coverage complete" as flip-flops from the coverage's next value (part C, (j)): one
        # per group of up to 32 sectors, ANDed where it is read, so that the next value's AND
        # tree behind W's mask is one level shorter (docs/rtl.md "Issue 23 step 3")
        groups = [(lo, min(lo + 32, sectors)) for lo in range(0, sectors, 32)]
        full_g = [[Signal(name=f"full{i}_g{g}") for g in range(len(groups))] for i in range(n)]
        full = [named(m, Cat(*full_g[i]).all(), f"full{i}") for i in range(n)]
        m.submodules.next_slot = next_slot = memory.Memory(
            shape=unsigned(w.slot), depth=cfg.admission, init=[])
        if P == 1:   # (the ports' names come from these variables)
            link_wr = next_slot.write_port()
            link_rd = next_slot.read_port(domain="comb")
            link_wrs, link_rds = [link_wr], [link_rd]
        else:
            link_wrs = [next_slot.write_port() for _ in range(P)]
            link_rds = [next_slot.read_port(domain="comb") for _ in range(P)]

        used = [named(m, s != WbState.FREE, f"used{i}") for i, s in enumerate(state)]
        is_open = [named(m, s == WbState.OPEN, f"open{i}") for i, s in enumerate(state)]

        # ---- DP1: per port a W holds M's decision of the previous cycle and writes it into
        # its entry ----
        w_alloc = [Signal(name=f"w_alloc{sx(p)}") for p in range(P)]
        w_merge = [Signal(name=f"w_merge{sx(p)}") for p in range(P)]
        w_oh = [Signal(n, name=f"w_onehot{sx(p)}") for p in range(P)]
        w_d = [Signal(wdisp_layout(w), name=f"w_payload{sx(p)}", reset_less=True)
               for p in range(P)]
        w_mask = [Signal(sectors, name=f"w_mask{sx(p)}", reset_less=True) for p in range(P)]
        w_tail = [Signal(w.slot, name=f"w_tail{sx(p)}", reset_less=True) for p in range(P)]
        w_blk = [Signal(cfg.mshr_entries, name=f"w_blockers{sx(p)}", reset_less=True)
                 for p in range(P)]
        w_old = [Signal(n, name=f"w_older_page{sx(p)}", reset_less=True) for p in range(P)]
        if P == 1:
            w_new_p = [[named(m, w_alloc[0] & w_oh[0][i], f"w_new{i}") for i in range(n)]]
            w_new = w_new_p[0]
            m.d.comb += self.w_entry.eq(Cat(*w_new))
        else:
            w_new_p = [[named(m, w_alloc[p] & w_oh[p][i], f"w_new{i}{sx(p)}")
                        if p in writers[i] else Const(0, 1) for i in range(n)]
                       for p in range(P)]
            w_new = [named(m, Cat(*[w_new_p[p][i] for p in writers[i]]).any(), f"w_new{i}")
                     for i in range(n)]
            for p in range(P):
                m.d.comb += self.w_entry[p].eq(Cat(*w_new_p[p]))
        # for M and L the entries the Ws allocate are in use and OPEN, with their pages (DP1)
        used_e = [named(m, used[i] | w_new[i], f"used_e{i}") for i in range(n)]
        open_e = [named(m, is_open[i] | w_new[i], f"open_e{i}") for i in range(n)]
        for i in range(n):
            tag = page[i]
            for p in reversed(writers[i]):
                tag = Mux(w_new_p[p][i], w_d[p].page, tag)
            m.d.comb += [self.tags[i].eq(tag), self.stored_tags[i].eq(page[i])]
        for p in range(P):
            m.d.comb += (self.w_page if P == 1 else self.w_page[p]).eq(w_d[p].page)
        m.d.comb += [self.in_use.eq(Cat(*used_e)), self.is_open.eq(Cat(*open_e))]
        fires, allocates, stalls, matches, probe_useds, masks = [], [], [], [], [], []
        hits, hit_indexes = [], []
        for p in range(P):
            # M's vectors (registered) plus W's entry when the controller's flag ``w_match``
            # says W allocated it for M's page (DP1; a page's writes and reads enter one port)
            w_fwd = [named(m, w_match[p] & w_new_p[p][i], f"w_fwd{i}{sx(p)}") for i in range(n)]
            disp_open = Cat(*[disp_open_in[p][i] | w_fwd[i] for i in range(n)])
            probe_used = Cat(*[probe_used_in[p][i] | w_fwd[i] for i in range(n)])
            if P > 1:   # the write ports' Ws, for a read port (partition schedulers, §4.2.4)
                probe_used = probe_used | self.probe_xfwd[p]
            probe_useds.append(probe_used)
            # one OPEN entry per page: the hit is an OR, its index an OR encoding. W's term of
            # the hit is the flag alone, ORed after the entries' tree (W's entry is FREE and off
            # M's registered vectors; the flag implies W's allocation), so the hit reads
            # registers only (issue 12); an invariant compares it with the OR of ``match``.
            # With ``registered`` (more than eight entries) M's vector holds only entries OPEN
            # in this cycle (qualified when registered, with its OR: ``disp_open_any``), so the
            # hit reads flip-flops only, not the entries' states (issue 23).
            match = [named(m, open_e[i] & disp_open[i], f"match{i}{sx(p)}")
                     if p in writers[i] else Const(0, 1) for i in range(n)]
            matches.append(match)
            if registered:
                entries_hit = open_any[p]
            else:
                entries_hit = Cat(*[is_open[i] & disp_open_in[p][i] for i in range(n)]).any()
            hit = named(m, entries_hit | w_match[p], f"hit{sx(p)}")
            hit_index = onehot_index(m, match, f"hit_index{sx(p)}")
            same = hit == Cat(*match).any()
            if per_channel:
                # only a write's: a read's M compares too, and under a partition scheduler
                # its page's write entry is another channel's pool (§4.5)
                same = same | ~disps[p].valid
            invariant(m, checks, same,
                      f"the write buffer's hit{sx(p)} differs from the OR of its match vector "
                      "(DP1, W's flag)")
            hits.append(hit)
            hit_indexes.append(hit_index)
        if checks:
            self._lookup_protocol(m, disps, probes, disp_open_in, probe_used_in, open_any,
                                  used_any, w_match, w_alloc, w_new_p, w_d, w_blk, is_open,
                                  used, page)
        # DP4: allocation from the free list; with several ports, a head per port
        if P == 1:
            any_free, free_index, free_oh, free_pop, free_count = free_list(
                m, n, self.launched.valid, self.launched.index, "free_list", checks=checks,
                member=[(state[i] == WbState.FREE) & ~w_new[i] for i in range(n)])
        elif per_channel:
            # §4.5: a pool per channel, each the one-port free list over its own entries; the
            # entries allocated in one cycle are of different pools, so their order is unused
            granted, free_indexes, free_ohs, pool_pops, free_count = port_pools(
                m, n, disps, hits, launched, checks=checks,
                member=[(state[i] == WbState.FREE) & ~w_new[i] for i in range(n)])
            ranks = [Const(0, range(P))] * P
            any_free, free_index = Cat(*granted).any(), free_indexes[0]
        else:
            want = [named(m, d.valid & ~hits[p], f"want{sx(p)}") for p, d in enumerate(disps)]
            granted, free_indexes, free_count, _ap, ranks = free_list_heads(
                m, n, [ev.valid for ev in launched], [ev.index for ev in launched], want,
                "free_list", registered=registered, checks=checks,
                member=[(state[i] == WbState.FREE) & ~w_new[i] for i in range(n)])
            free_ohs = [[named(m, free_indexes[p] == i, f"free_list_head{i}{sx(p)}")
                         for i in range(n)] for p in range(P)]
            any_free, free_index = Cat(*granted).any(), free_indexes[0]
        for p, d in enumerate(disps):
            hit, hit_index, match = hits[p], hit_indexes[p], matches[p]
            got = any_free if P == 1 else granted[p]
            if P == 1:
                m.d.comb += [
                    d.ready.eq(hit | any_free),
                    self.disp_merge.eq(hit),
                    self.disp_index.eq(Mux(hit, hit_index, free_index)),
                ]
            else:
                m.d.comb += [
                    d.ready.eq(hit | got),
                    self.disp_merge[p].eq(hit),
                    self.disp_index[p].eq(Mux(hit, hit_index, free_indexes[p])),
                ]
            fire = named(m, d.valid & d.ready, f"fire{sx(p)}")
            merge = named(m, fire & hit, f"merge{sx(p)}")
            allocate = named(m, fire & ~hit, f"allocate{sx(p)}")
            stalls.append(named(m, d.valid & ~hit & ~got, f"stalled{sx(p)}"))
            fires.append(fire)
            allocates.append(allocate)
            if P == 1:
                free_pop(allocate)
            elif per_channel:
                pool_pops[p](allocate)
            dp = d.payload
            if self._sectors_in:
                sec = self.disp_sectors if P == 1 else self.disp_sectors[p]
                lo, hi_plus_1 = sec.first, sec.end
                if checks:
                    ref_lo, ref_end = sector_range(m, dp.offset, dp.bytes, self._sector,
                                                   f"chk_sectors{sx(p)}")
                    protocol(m, checks, ~d.valid | ((lo == ref_lo) & (hi_plus_1 == ref_end)),
                             "disp_sectors differs from the sectors of the write's byte range")
            else:
                lo, hi_plus_1 = sector_range(m, dp.offset, dp.bytes, self._sector,
                                             f"sectors{sx(p)}")
            mask = Signal(sectors, name=f"mask{sx(p)}" if P > 1 else None)
            m.d.comb += mask.eq(at_least(m, lo, sectors, f"from_lo{sx(p)}")
                                & ~at_least(m, hi_plus_1, sectors, f"from_hi{sx(p)}"))
            masks.append(mask)
            # a merge behind the entry W is writing appends to W's waiter (its tail is not
            # written)
            same_w = named(m, (w_alloc[p] | w_merge[p]) & (w_oh[p] & Cat(*match)).any(),
                           f"w_same{sx(p)}")
            hit_tail = Mux(same_w, w_d[p].slot, onehot_select(m, tail, match, f"hit_tail{sx(p)}"))
            m.d.sync += [w_alloc[p].eq(allocate), w_merge[p].eq(merge),
                         w_oh[p].eq(Mux(allocate, Cat(*(free_oh if P == 1 else free_ohs[p])),
                                        Cat(*match))),
                         w_d[p].eq(dp), w_mask[p].eq(mask), w_tail[p].eq(hit_tail),
                         # the blocker and older sets (§13, cross-table sets) from M's vectors
                         w_blk[p].eq(disp_pend[p] & Cat(*self.mshr_pending) if P == 1 else
                                     # §4.2.4: a read's entry of the same cycle, another port
                                     (disp_pend[p] & Cat(*self.mshr_pending)) | self.disp_fwd[p]),
                         w_old[p].eq(probe_useds[p] & Cat(*used_e))]
            m.d.comb += [link_wrs[p].addr.eq(w_tail[p]), link_wrs[p].data.eq(w_d[p].slot),
                         link_wrs[p].en.eq(w_merge[p])]
        stalled = stalls[0] if P == 1 else named(m, Cat(*stalls).any(), "stalled")
        # per entry: its pool's write stalled (§4.5 B3: a victim per pool)
        stalled_for = [stalls[i // pool_k] if per_channel else stalled for i in range(n)]
        if P > 1:
            # the order of the cycle's allocations (the k-th head before the k+1-th, §4.2.3),
            # held with W: of the entries allocated in one cycle, those of lower rank are older
            # (the pressure victim's "smallest alloc", DP5)
            w_rank = [Signal(range(P), name=f"w_rank{sx(p)}", reset_less=True) for p in range(P)]
            m.d.sync += [w_rank[p].eq(ranks[p]) for p in range(P)]
        allocate = allocates[0] if P == 1 else Cat(*allocates).any()
        merge_en_p = [[named(m, w_merge[p] & w_oh[p][i], f"w_merge{i}{sx(p)}")
                       if p in writers[i] else Const(0, 1) for i in range(n)]
                      for p in range(P)]
        merge_en = merge_en_p[0] if P == 1 else [
            named(m, Cat(*[merge_en_p[p][i] for p in writers[i]]).any(), f"w_merge{i}")
            for i in range(n)]

        # ---- DP5: flush decisions, from the state at the start of the cycle ----
        probe_match = [[named(m, used_e[i] & probe_useds[p][i], f"probe_match{i}{sx(p)}")
                        for i in range(n)] for p in range(P)]
        # as the hit: W's term is the flag, after the entries' tree (with ``registered``, M's
        # vector qualified when registered and its OR a flip-flop)
        for p in range(P):
            if registered:
                entries_block = used_any[p]
            else:
                entries_block = Cat(*[used[i] & probe_used_in[p][i] for i in range(n)]).any()
            block = entries_block | w_match[p]
            if P > 1:
                block = block | self.probe_xfwd[p].any()
            if P == 1:
                m.d.comb += self.probe_block.eq(block)
            else:
                m.d.comb += self.probe_block[p].eq(block)
            invariant(m, checks, (self.probe_block if P == 1 else self.probe_block[p])
                      == Cat(*probe_match[p]).any(),
                      f"probe_block{sx(p)} differs from the OR of the in-use match vector "
                      "(DP1, W's flag)")
        # per pool (one with stack-wide pools): a victim pending, the oldest entry OPEN at
        # the start of the cycle (W's entries are not yet); one victim per pool and cycle
        # however many ports stall (§4.5 B3)
        pools = range(0, n, pool_k)
        pool_live = [named(m, Cat(*[used[i] & pressure[i] for i in range(b, b + pool_k)]).any(),
                           "pressure_live" if pool_k == n else f"pressure_live_p{b // pool_k}")
                     for b in pools]
        pressure_live = [pool_live[i // pool_k] for i in range(n)]
        if pool_k == n:
            oldest_open = [is_open[i] & ~(older[i] & Cat(*is_open)).any() for i in range(n)]
        else:
            oldest_open = [is_open[i] & ~(older[i] & own(i) & Cat(*is_open)).any()
                           for i in range(n)]
        # a decision pending (taken last cycle): the entry is still OPEN, FLUSH from next cycle
        dec = [Signal(len(FLUSH_CAUSES), name=f"flush_dec{i}") for i in range(n)]
        pending = [named(m, dec[i].any(), f"flush_pending{i}") for i in range(n)]
        victims, leaving = [], {why: [] for why in FLUSH_CAUSES}
        for i in range(n):
            if P == 1:
                raw = probes[0].valid & probe_match[0][i] & is_open[i]
            else:
                raw = Cat(*[probes[p].valid & probe_match[p][i] for p in range(P)]).any() \
                    & is_open[i]
            victim = named(m, stalled_for[i] & ~pressure_live[i] & oldest_open[i], f"victim{i}")
            victims.append(victim)
            conds = [full[i], raw, victim, remain[i] == 0, self.drain]
            flags, earlier = [], Const(0)
            for cond in conds:   # by §4.4's priority, among OPEN entries with none pending
                flags.append(is_open[i] & ~pending[i] & cond & ~earlier)
                earlier = earlier | cond
            m.d.sync += dec[i].eq(Cat(*flags))
            # counted as it leaves OPEN (the flush counters show it from t + 2, DP5)
            for k, why in enumerate(FLUSH_CAUSES):
                leaving[why].append(dec[i][k])

        # ---- FLUSH: strict errors and enqueue eligibility (§4.4, DP3) ----
        blockers = [Signal(cfg.mshr_entries, name=f"blockers{i}") for i in range(n)]
        older_page = [Signal(n, name=f"older_page{i}") for i in range(n)]
        pend_now, used_now = Cat(*self.mshr_pending), Cat(*used)
        blocker_live = [named(m, blockers[i] & pend_now, f"blocker_live{i}") for i in range(n)]
        older_live = [named(m, older_page[i] & used_now, f"older_live{i}") for i in range(n)]
        eligible, serialized, strict_error, mshr_wait, cand, elig_q = [], [], [], [], [], []
        for i in range(n):
            for k, p in enumerate(writers[i]):
                with (m.If if k == 0 else m.Elif)(w_new_p[p][i]):
                    m.d.sync += [blockers[i].eq(w_blk[p] & pend_now),
                                 older_page[i].eq(w_old[p] & used_now)]
            with m.Else():
                m.d.sync += [blockers[i].eq(blocker_live[i]), older_page[i].eq(older_live[i])]
            in_flush = state[i] == WbState.FLUSH
            mshr_busy = blocker_live[i].any()
            complete = full[i] if strict and "wb-strict-partial" not in mut else 1
            serialized.append(named(m, ~older_live[i].any(), f"serialized{i}"))
            order_ok = 1 if "wb-w4-ignored" in mut else serialized[i]
            # DP5: a merge still in W completes its coverage before the entry is offered or
            # errors (the merge of the cycle after the decision lands in FLUSH)
            eligible.append(named(m, in_flush & complete & order_ok & ~mshr_busy & ~merge_en[i],
                                  f"eligible{i}"))
            invariant(m, checks, ~eligible[i] | serialized[i],
                      f"write-buffer entry {i} eligible while an older entry of its page is in "
                      "use (W4)")
            mshr_wait.append(in_flush & mshr_busy)
            # (the mutation "wb-strict-partial" also drops the error path, which would
            # otherwise answer the incomplete entry before its offer: an equivalent mutant)
            strict_error.append(named(m, in_flush & ~full[i] & ~merge_en[i], f"strict_error{i}")
                                if strict and "wb-strict-partial" not in mut else Const(0))
            # DP3: a candidate from the cycle after it is first eligible until it is enqueued
            q = Signal(name=f"eligible_q{i}")
            m.d.sync += q.eq(eligible[i])
            elig_q.append(q)
            cand.append(named(m, q & in_flush, f"candidate{i}"))
        enq_fire, enq_index, held = offer_registered(m, self.enq, cand, target, EntryKind.WBUF)

        # ---- DP7: the response choice C1 / C2 / cursor, per response port over the entries of
        # its channel ----
        pops, curs, lasts, regss = response_stages(
            m, self.ret, self.ret_locked, lambda i: state[i] == WbState.RETURN, drained, head,
            tail, target, error, link_rds, ports=P, pool_k=pool_k, per_channel=per_channel)

        m.d.comb += [
            self.occupied.eq(tree_sum(used)),
            self.programs_queued.eq(Cat(*[s == WbState.QUEUED for s in state_now]).any()),
        ]
        for i in range(n):
            m.d.comb += self.cause[i].eq(cause[i])

        # ---- per-entry next state ----
        if P == 1:
            w_oh_now = Cat(*[w_oh[0][j] for j in range(n)])
            any_w_alloc = w_alloc[0]
        else:   # the entries the Ws allocate in this cycle
            w_oh_now = Cat(*w_new)
            any_w_alloc = Cat(*w_alloc).any()
        w_mask_all = [named(m, Cat(*[w_mask[p][lo:hi].all() for lo, hi in groups]),
                            f"w_mask_all{sx(p)}") for p in range(P)]
        for i in range(n):
            for k, p in enumerate(writers[i]):
                with (m.If if k == 0 else m.Elif)(w_new_p[p][i]):
                    m.d.sync += [
                        page[i].eq(w_d[p].page),
                        target[i].eq(w_d[p].target),
                        # DP1: deadline = tm + write_deadline_ticks; W writes in tm + 1
                        remain[i].eq(max(0, deadline - 2)),
                        cause[i].eq(FlushCause.NONE),
                        pressure[i].eq(0),
                        # the entries in use are older; of those allocated in the same cycle,
                        # those of the ports of lower rank (allocated first, §4.2.3)
                        older[i].eq(Cat(*used) if P == 1 else
                                    # a pool per channel: only its own pool's order is read
                                    Cat(*used) & own(i) if per_channel else
                                    Cat(*used) | Cat(*[
                                        Cat(*[w_new_p[q][j] & (w_rank[q] < w_rank[p])
                                              for q in range(P) if q != p]).any()
                                        for j in range(n)])),
                        head[i].eq(w_d[p].slot),
                        tail[i].eq(w_d[p].slot),
                        error[i].eq(0),
                    ]
            with m.Elif(any_w_alloc):
                m.d.sync += older[i].eq(older[i] & ~w_oh_now)
            for p in writers[i]:
                with m.If(merge_en_p[p][i]):
                    m.d.sync += tail[i].eq(w_d[p].slot)
            cov_next = Signal(sectors, name=f"cov_next{i}")
            full_next = [full_g[i][g] for g in range(len(groups))]
            cov_val = cov[i]
            for p in reversed(writers[i]):
                # named: the groups' AND trees below read it once each (an unnamed
                # expression is rebuilt at every use: 128 copies at byte coverage)
                merged = named(m, w_mask[p] if "wb-coverage-overwrite" in mut
                               else cov[i] | w_mask[p], f"cov_merged{i}{sx(p)}")
                cov_val = Mux(merge_en_p[p][i], merged, cov_val)
                full_next = [Mux(merge_en_p[p][i], merged[lo:hi].all(), f)
                             for (lo, hi), f in zip(groups, full_next)]
            for p in reversed(writers[i]):
                cov_val = Mux(w_new_p[p][i], w_mask[p], cov_val)
                full_next = [Mux(w_new_p[p][i], w_mask_all[p][g], f)
                             for g, f in enumerate(full_next)]
            m.d.comb += cov_next.eq(cov_val)
            # ``full`` = ``cov_next.all()``, with W's one-hot after the AND trees (which read
            # registers only) instead of in front of them (issue 12: seed 3's path at 105.7 MHz)
            m.d.sync += [cov[i].eq(cov_next)]
            m.d.sync += [full_g[i][g].eq(f) for g, f in enumerate(full_next)]
            with m.If(~w_new[i] & (remain[i] != 0)):
                m.d.sync += remain[i].eq(remain[i] - 1)
            with m.If(victims[i]):
                m.d.sync += pressure[i].eq(1)
            ev_l = pending[i]   # leaves OPEN with the cause decided last cycle
            # OPEN / in use in the next cycle (M's vectors are qualified with these): W's entry,
            # or an entry that stays (OPEN is left only by a decision of the last cycle, in use
            # only by the launch of the last waiter)
            if registered:
                ev_f_i = (launched[0].valid & (launched[0].index == i) if P == 1 else
                          Cat(*[ev.valid & (ev.index == i) for ev in launched]).any())
                m.d.comb += [self.is_open_next[i].eq((is_open[i] & ~ev_l) | w_new[i]),
                             self.in_use_next[i].eq((used[i] & ~ev_f_i) | w_new[i])]
            with m.If(ev_l):
                for k, why in enumerate(FLUSH_CAUSES):
                    with (m.If if k == 0 else m.Elif)(dec[i][k]):
                        m.d.sync += cause[i].eq(why)
            with m.If(strict_error[i]):
                m.d.sync += error[i].eq(1)
            dones = [self.done[j] for j in lanes_of[i]]
            done_i = Cat(*[e.valid & (e.index == i) for e in dones]).any()
            with m.If(done_i):
                m.d.sync += error[i].eq(Cat(*[e.valid & (e.index == i) & e.error
                                              for e in dones]).any())
            for p in writers[i]:
                with m.If(pops[p] & (curs[p] == i) & lasts[p]):
                    m.d.sync += drained[i].eq(1)
            ev_f = (launched[0].valid & (launched[0].index == i) if P == 1 else
                    Cat(*[launched[p].valid & (launched[p].index == i)
                          for p in writers[i]]).any())
            with m.If(ev_f):
                m.d.sync += drained[i].eq(0)
            # exclusive events, AND-OR next state (part C, (i))
            ev_o = w_new[i]
            ev_q = Cat(*[enq_fire[c] & (enq_index[c] == i) for c in chans[i]]).any()
            m.d.sync += issue_q[i].eq(Cat(*[self.issue[j].valid & (self.issue[j].index == i)
                                            for j in lanes_of[i]]).any())
            ev_p = issue_q[i]
            ev_r = done_i | strict_error[i]
            hold = named(m, ~(ev_o | ev_l | ev_q | ev_p | ev_r | ev_f), f"state_hold{i}")
            sv = state[i].as_value()
            # FREE 0, OPEN 1, FLUSH 2, QUEUED 3, PROGRAM 4, RETURN 5
            m.d.sync += sv.eq(Cat(ev_o | ev_q | ev_r | (hold & sv[0]),
                                  ev_l | ev_q | (hold & sv[1]),
                                  ev_p | ev_r | (hold & sv[2])))
            events = Cat(ev_o, ev_l, ev_q, ev_p, ev_r, ev_f)
            invariant(m, checks, (events & (events - 1)) == 0,
                      f"write-buffer entry {i}: two state events in one cycle")

        count_flushes(m, leaving, self.flushes, checks)

        if checks:
            inside, waiters = self._add_checks(
                m, state_now, page, head, tail, used, used_e, w_alloc, w_new, merge_en, fires,
                pops, curs, regss, serialized, cov, full, leaving, stalled, strict_error,
                mshr_wait, drained, allocates, blocker_live, older_live, older, eligible,
                elig_q, cand, held, dec, is_open, any_free, free_index, free_count, probe_useds,
                disps, victims, issue_q)
        if proving(checks):
            self._add_lemmas(m, state_now, head, tail, target, error, drained, regss, inside,
                             waiters, next_slot, w_alloc, w_merge, w_oh, w_d, w_tail, pops,
                             held, eligible, full)
            # what the controller's proof states about this table (rtl/controller_lemmas.py)
            self.proof = dict(state=state, issue_q=issue_q, inside=inside, drained=drained,
                              target=target, page=page, pools=self._pools_listed,
                              w_alloc=w_alloc, w_merge=w_merge, w_payload=w_d,
                              w_new=w_new_p)
        return m
