"""The controller of one HBF stack: its state, the composition of its pipeline stages, the
end of a cycle and the wake bookkeeping for skipped cycles (docs/timing-contract.md, the
registered pipeline, in both host-port shapes and every mode; §16 the phase order; DP4's
frees at the end of a cycle; C3).

The stages are one class each, one file each, in the pipeline's order (§4a):

=================  ==============================================================
``ingress``        §4.1: ``req[p].ready`` (the admission term), accept, Q -> M
``dispatch``       §4.2, DP1, DP4: M's decisions from M's view, W, allocation, merges
``write_buffer``   DP5: flush decisions, the pressure victim; §7's write-drain window
``enqueue``        DP2, DP2a, DP3, §6: the offers and the enqueue arbiter
``issue``          §7, §7a: media completions release, issue decisions
``completion``     DP6, §4.4, MP7: completions into RETURN
``response``       DP7, §8: C1, C2, cursor, R, K with the link credit, E
=================  ==============================================================

:func:`hbfsim.model.loop.run_cycles` calls them in §16's phase order: E handshakes
(:meth:`handshake`); K, R, C2, C1 (:meth:`respond_stages`); media completions
(:meth:`release_media`); issue decisions (:meth:`issue`); enqueue (:meth:`enqueue`);
dispatch (:meth:`dispatch`); accepts and Q -> M (:meth:`accept`, :meth:`advance`); flush
decisions (:meth:`wb_triggers`); completions into RETURN (:meth:`complete_entries`); end of
cycle (:meth:`end_cycle`).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque

from hbfsim.config import HbfConfig
from hbfsim.model.controller.completion import Completion
from hbfsim.model.controller.dispatch import Dispatch
from hbfsim.model.controller.enqueue import Enqueue
from hbfsim.model.controller.ingress import Ingress
from hbfsim.model.controller.issue import Issue
from hbfsim.model.controller.ports import Port
from hbfsim.model.controller.request import FREE, Entry
from hbfsim.model.controller.response import Response
from hbfsim.model.controller.write_buffer import WriteBuffer
from hbfsim.model.link import DeficitCredit
from hbfsim.model.media import Media
from hbfsim.model.megaplane import Megaplanes

__all__ = ["StackController"]


class StackController(Ingress, Dispatch, WriteBuffer, Enqueue, Issue, Completion, Response):
    """The controller of one HBF stack with ``P`` request and response ports.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (every host-port shape, read mode, merge setting, scheduler,
        write policy and multi-plane mode).
    stack : int
        Index of this stack.
    mapper : Mapper
        The system's address mapper.
    stats : dict
        Counter dictionary shared with the system (see :mod:`hbfsim.model.stats`).

    Members
    -------
    P : int
        Request and response ports: 1 in the stack shape, ``channels`` in the channel shape.
    ports : list of Port
        Per port: Q, M and the response stages (port ``c`` serves the entries of channel
        ``c`` in the channel shape; port 0 serves every entry in the stack shape).
    egress : deque of Request
        Port 0's E (the stack shape's one response port, read by the system's round robin).
    inflight : int
        Admission slots in use (§4.1).
    mshr, wb : list of Entry
        The MSHR pool and the write buffer.
    pools : int
        Pools of each kind: 1 (``pools = "stack"``), or ``C`` (``pools = "channel"``, §4.5:
        channel ``c``'s entries ``c*k .. c*k + k - 1``); an entry of channel ``c`` is in pool
        ``c mod pools``.
    mshr_free, wb_free : list of deque of int
        DP4's free lists, one per pool, the pool's indices in order at reset; with one pool
        the k-th allocating port from the pool's pointer takes the k-th head (§4.2.3), with
        a pool per channel its port takes the head (§4.5 B2); an entry freed in ``t`` joins
        its pool's tail at the end of ``t``, entries freed in one cycle in ascending
        response port.
    ap_r, ap_w : int
        The allocation pointers of the stack-wide MSHR pool and write buffer (§4.2.3).
    offer_q : list of deque
        DP2 (demand reads): per channel the MSHR entries in WAIT in allocation order; the
        head is the channel's MSHR candidate from its ``alloc + 2``.
    offer_r : list
        DP2a's offer registers ``OR_c`` (aggregation reads): an entry or None.
    offer_wb : list
        DP3's offer registers ``O_c`` (an entry or None).
    queue : list of list of Entry
        The channel queues (§6).
    link : DeficitCredit
        The channels' link credits (§8).
    mp : Megaplanes or None
        The multi-plane command state (§7a), None under ``multiplane = "off"``.
    drain_in : bool
        The ``drain`` input's level in the current cycle (§1), set by the run loop before
        the issue phase; it ends a multi-plane gather window (MP4).
    data : dict
        Functional data: stack-local page -> programmed bytes (docs/model.md).

    Notes
    -----
    Readings of the contract where its text leaves a choice (each the one a registered
    RTL implements with the fewest extra terms):

    1. DP5 ``raw``: a read stalls on an OPEN entry of its page in M's view (§4.2 read
       step 1); the decision ``raw`` is taken only in a cycle in which that entry is OPEN
       for the flush decisions (``alloc <= t - 2``) with no decision pending. A read that
       stalls on an entry still in W waits a cycle without a decision. ``raw_events``
       counts each entry once, in the cycle of that decision, whatever cause wins.
    2. DP5 ``deadline`` with ``write_deadline_ticks = 1``: decided at ``alloc + 2``,
       the first cycle the entry is OPEN for the decision.
    3. DP5 pressure: the oldest OPEN entry at the start of ``tm`` is the first of M's
       OPEN entries if its ``alloc <= tm - 2``; if M's oldest OPEN entry is still in W no
       victim is chosen in ``tm`` (the write retries in ``tm + 1``). A pending victim
       (decision already pending) is marked as the victim (``pressure_live``) until FREE.
       With a pool per channel (§4.5 B3) all of this holds per pool: the oldest OPEN entry
       of the write's pool, one pending victim per pool.
    4. DP5 / §4.4 strict errors: an entry with a merge in W in ``t`` is not errored in
       ``t`` (only possible in its first FLUSH cycle); it is errored in the first later
       cycle, as §4.4 (RETURN from the cycle after).
    5. DP5 flush counters count an entry when it enters FLUSH (``t + 2``), with the cause
       decided in ``t``.
    6. DP6's QUEUED -> ISSUED from ``td + 2`` has no observable effect in the model (no
       rule tells QUEUED from ISSUED: both are mergeable and block a write of the page),
       so the entry's state is set at the decision.
    7. Model-only page cache (R4): a hit is a completion at ``tc = tm + cache_hit_ticks``
       and, like every MSHR completion, RETURN from ``tc + 2`` (DP6); it joins no offer.
    8. DP7's ``C1`` takes entries in RETURN that no ``C1`` took yet; such an entry has all
       its waiters untaken and is in none of ``C1``, ``C2``, cursor, so the rule's
       exclusions hold by construction.
    9. ``agg_wait`` (R2's ticks beyond demand) counts from demand's earliest enqueue,
       ``alloc + 2``, so demand reads add 0.
    10. §7's write-drain window counts occupied write-buffer entries with DP1's
        visibility: entries allocated in ``tm`` count from ``tm + 2`` (they leave the
        count, FREE, from the cycle after their last launch).
    11. DP2a: an entry's first ready cycle is ``ready_at = min(alloc + max(window, 2),
        tm + 2)`` over the dispatches ``tm`` (its allocation included) that bring its byte
        count to the threshold; it is a candidate from ``ready_at + 1``.
    12. Multi-plane commands (§7a, MP7): a group's write-buffer entries RETURN from
        ``tc + 1``, its MSHR entries from ``tc + 2`` (DP6), as if each entry's own
        completion had been delivered in ``tc``.
    """

    def __init__(self, cfg: HbfConfig, stack: int, mapper, stats):
        self.cfg = cfg
        self.stack = stack
        self.mapper = mapper
        self.st = stats
        self.media = Media(cfg)
        C = cfg.channels
        self.C = C
        # §4.1 ingress and admission; the ports (§14)
        self.P = C if cfg.host_ports == "channel" else 1
        self.ports = [Port() for _ in range(self.P)]
        self.egress = self.ports[0].egress
        self.admission = cfg.admission
        self.inflight = 0
        self._released = 0
        # §4.2 dispatch, §4.3 MSHR entries; DP4 free lists and allocation pointers
        self.mshr = [Entry(0, i) for i in range(cfg.mshr_entries)]
        self.pools = C if cfg.pools == "channel" else 1        # §4.5 B1
        self.mshr_k = cfg.mshr_entries // self.pools            # entries per pool
        self.wb_k = cfg.write_buffer_entries // self.pools
        self.mshr_free = [deque(range(c * self.mshr_k, (c + 1) * self.mshr_k))
                          for c in range(self.pools)]
        self.mshr_open: dict[int, Entry] = {}       # page -> mergeable entry
        self.mshr_pend: dict[int, int] = {}         # page -> entries before completion
        self.merge = cfg.mshr_merge
        self.ap_r = self.ap_w = 0
        self.demand = cfg.read_mode == "demand"
        self.agg_window = cfg.read_agg_window_ticks
        self.agg_thr = cfg.read_agg_threshold_bytes
        # §4.4 write buffer
        self.wb = [Entry(1, i) for i in range(cfg.write_buffer_entries)]
        self.wb_free = [deque(range(c * self.wb_k, (c + 1) * self.wb_k))
                        for c in range(self.pools)]
        self.wb_open: OrderedDict[int, Entry] = OrderedDict()  # page -> OPEN entry, by age
        self.wb_page: dict[int, list[Entry]] = {}   # page -> non-FREE entries by age
        self.wb_used = 0
        self.wb_deadlines: list[tuple[int, int, int]] = []  # (deadline, alloc, idx)
        self.wb_flush: list[Entry] = []              # entries in FLUSH
        self.full_pending: list[Entry] = []
        # DP5's pressure victims of this cycle, and per pool whether one is pending (B3)
        self.pressure_now: list[Entry] = []
        self.pressure_live = [False] * self.pools
        self.strict = cfg.write_timeout_policy == "strict"
        # DP5: reads' raw decisions of this cycle; decisions of the previous cycle
        self._raw: list = []
        self._decided: list = []
        # write-buffer allocations of the last cycle that allocated (DP1, reading 10)
        self._wb_alloc_t = -1
        self._wb_alloc_k = 0
        # DP2, DP2a, DP3: the enqueue arbiter's per-channel offers
        self.offer_q: list[deque] = [deque() for _ in range(C)]
        self.offer_r: list = [None] * C
        self.offer_wb: list = [None] * C
        # the channels whose offers hold or may take something (the arbiter skips the rest)
        self._busy_ch: set[int] = set()
        # DP2a: (ready_at, idx, alloc) of WAIT entries not yet candidates; per channel the
        # candidates' indices
        self._agg_timer: list[tuple[int, int, int]] = []
        self._agg_cand: list[list[int]] = [[] for _ in range(C)]
        # §6 channel queues, §7 issue: subarrays, active slots, the write-drain window
        self.queue: list[list[Entry]] = [[] for _ in range(C)]
        self.busy: list[set[int]] = [set() for _ in range(C)]
        self.active = [0] * C
        self.active_cap = cfg.active_per_channel
        self.total_cap = cfg.active_total or 1 << 30
        self.active_sum = 0
        self.qdepth = cfg.queue_depth
        self.issue_check: set[int] = set()
        self.cmd_delay = 1                           # decided in td, on cmd[c] in td + 1
        self.issued_at = [-1] * C                    # cycle of each channel's last issue
        # operations that issue took from the queue (1; a multi-plane command's group size,
        # §7a MP3): the enqueue arbiter's start-of-cycle count
        self.issued_k = [1] * C
        self.queued_programs = 0
        self.policy = cfg.scheduler
        self.drain_open = False
        self.drain_start = 0
        self.drain_cooldown = 0
        self.drain_hw = cfg.write_drain_high_water
        self.drain_window = cfg.write_drain_window_ticks
        self.drain_in = False
        self.mp = Megaplanes(self) if cfg.multiplane != "off" else None
        # completions: released this cycle (§7's forwarding); DP6's MSHR completions of
        # earlier cycles, (apply tick, entry, tc, flags)
        self._delivered: list = []
        self._late: deque = deque()
        # DP7 responses and §8 link credits; the response ports whose stages hold or may
        # take something (the rest are skipped)
        self.ret_r: list[int] = []
        self.ret_w: list[int] = []
        self._resp_live: set[int] = set()
        self.link = DeficitCredit(cfg)
        self.credit_wait = None
        # model-only logic-die page cache (R4)
        self.pc_size = cfg.page_cache_pages
        self.page_cache: OrderedDict[int, None] = OrderedDict()
        self.cache_due: list[tuple[int, int]] = []
        self.cache_ticks = cfg.cache_hit_ticks
        # functional data: stack-local page -> programmed bytes (docs/model.md)
        self.data: dict[int, bytes] = {}
        # DP4: frees of this cycle, applied by end_cycle
        self._free_r: list[int] = []
        self._free_w: list[Entry] = []
        self.on_response = None     # set by the system: f(req, t)
        # statistics
        self.mshr_hits = 0
        self.agg_wait = 0          # ticks read entries waited beyond demand (R2)
        self.ch_requests = [0] * C
        self.ch_ops = [0] * C
        self.ch_link_stall = [0] * C
        # ticks at which a delayed effect lands (C3: nothing may be skipped past them)
        self._wake: list[int] = []

    def _wake_at(self, tick: int) -> None:
        """Record that a delayed effect (DP1-DP6) lands at ``tick``: the loop may not skip
        past it (C3)."""
        heapq.heappush(self._wake, tick)

    def end_cycle(self) -> None:
        """Admission releases and frees of this cycle; a freed entry joins its pool's free
        list at the tail (DP4), allocatable from the next cycle; entries freed in one cycle
        join in ascending response port, the order in which the ports launched."""
        if not (self._released or self._free_r or self._free_w):
            return
        if self._released:
            self.inflight -= self._released
            self._released = 0
        for idx in self._free_r:
            self.mshr[idx].state = FREE
            self.mshr[idx].waiters = None
            self.mshr_free[idx // self.mshr_k].append(idx)
        self._free_r.clear()
        for e in self._free_w:
            e.state = FREE
            lst = self.wb_page[e.q]
            lst.remove(e)
            if not lst:
                del self.wb_page[e.q]
            if e.pressure:
                self.pressure_live[e.idx // self.wb_k] = False
            e.waiters = None
            e.data = None
            self.wb_used -= 1
            self.wb_free[e.idx // self.wb_k].append(e.idx)
        self._free_w.clear()

    def next_timer(self, t: int) -> int | None:
        """The earliest tick after ``t`` at which a time-driven condition can change state
        (C3): a media completion, a write deadline, a page-cache hit, the link credit, the
        write-drain window, a multi-plane gather window (MP4) or a delayed effect of DP1-DP6;
        None when there is none."""
        cands = []
        d = self.media.next_due()
        if d is not None:
            cands.append(d)
        if self.wb_deadlines:
            cands.append(self.wb_deadlines[0][0])
        if self.cache_due:
            cands.append(self.cache_due[0][0])
        if self.credit_wait is not None:
            cands.append(self.credit_wait)
        if self.policy == "write-drain":
            if self.drain_open and self.queued_programs:
                cands.append(self.drain_start + self.drain_window)
            elif not self.drain_open and self.wb_used >= self.drain_hw \
                    and self.queued_programs:
                cands.append(self.drain_cooldown)
        n = max(min(cands), t + 1) if cands else None
        if self.mp is not None:
            w = self.mp.next_wake()
            if w is not None:
                w = max(w, t + 1)
                if n is None or w < n:
                    n = w
        w = self._wake
        while w and w[0] <= t:
            heapq.heappop(w)
        if w and (n is None or w[0] < n):
            n = w[0]
        return n
