"""NAND media of one stack: subarray timing, page buffers, block allocation, erase and GC.

The media side of the controller's four interfaces (docs/history.md §1, "Media
promise"): it accepts a command in the cycle it is issued, computes its service latency and
delivers at most one completion per channel per cycle. It is used unchanged by the golden
run and by the co-simulation (docs/model.md, structure).

Semantics (M1, R3, W5 of docs/sources.md; source §2.1, §4.2):

* READ costs tR, or ``buffer_hit_ticks`` when the page is in one of the subarray's
  ``page_buffers`` NAND page buffers (LRU). A PROGRAM of a page drops it from the buffers,
  so a buffer hit never returns data older than the last program ("when ordering permits").
* PROGRAM goes to the next page of the subarray's active block: pages in a block are
  programmed sequentially from page 0. A block whose pages are all invalid returns to the
  free pool and is erased (tBERS) before it is written again: erase before write. Blocks
  never used are factory-erased. ``hbf`` mode has no garbage collection (wear is the host's
  business; per-zone P/E counts are reported); running out of blocks is a capacity error.
  ``ssd`` mode runs greedy GC as a comparison baseline: when the free pool falls to the
  over-provisioning reserve it relocates the valid pages of the block with the fewest of
  them (each costs tR + tPROG on that subarray) and erases it, all charged to the PROGRAM
  that needed the space.
* Nothing is allocated for a subarray until it is first used (C3).
"""

from __future__ import annotations

import heapq
from collections import deque

from hbfsim.config import HbfConfig

__all__ = ["READ", "PROGRAM", "Media"]

READ = 0
PROGRAM = 1

#: Completion flags (contract §1, cpl payload).
FLAG_BUFFER_HIT = 1
FLAG_ERROR = 2


class _Subarray:
    """Block allocation state of one subarray, created on first use."""

    __slots__ = ("buffers", "map", "valid", "pec", "active", "wp", "fresh", "free", "full")

    def __init__(self):
        self.buffers: list[int] = []          # channel-local pages, LRU order (oldest first)
        self.map: dict[int, tuple[int, int]] = {}  # local page -> (block, page-in-block)
        self.valid: dict[int, int] = {}       # block -> valid pages
        self.pec: dict[int, int] = {}         # block -> program/erase cycles
        self.active = -1                      # block being programmed
        self.wp = 0                           # next page in the active block
        self.fresh = 0                        # next never-used block
        self.free: deque[int] = deque()       # fully invalid blocks, erased on reuse
        self.full: set[int] = set()           # closed blocks holding valid data (GC victims)


class Media:
    """The NAND side of one stack.

    Parameters
    ----------
    cfg : HbfConfig
        System configuration (timings, geometry, media mode).

    Members
    -------
    page_reads, buffer_hits, page_programs, block_erases, gc_relocations, capacity_errors : int
        Counters for statistics (docs/sources.md, statistics).
    busy_ticks : int
        Sum of service latencies of all commands (for media utilization).
    """

    def __init__(self, cfg: HbfConfig):
        self.cfg = cfg
        self.t_read = cfg.t_read_ticks
        self.t_prog = cfg.t_prog_ticks
        self.t_erase = cfg.t_erase_ticks
        self.t_hit = cfg.buffer_hit_ticks
        self.nbuf = cfg.page_buffers
        self.ppb = cfg.pages_per_block
        self.blocks = cfg.pages_per_stack // (cfg.subarrays_per_stack * cfg.pages_per_block)
        self.ssd = cfg.media_mode == "ssd"
        self.reserve = max(1, int(self.blocks * cfg.overprovisioning)) if self.ssd else 0
        self.S = cfg.subarrays_per_channel
        self._subs: dict[tuple[int, int], _Subarray] = {}
        self._due: list[tuple[int, int, int, int, int]] = []  # (due, ch, sub, tag, flags)
        self.page_reads = self.buffer_hits = self.page_programs = 0
        self.block_erases = self.gc_relocations = self.capacity_errors = 0
        self.busy_ticks = 0

    # ---- the command interface --------------------------------------------------------
    def issue(self, t: int, ch: int, sub: int, op: int, local: int, tag: int) -> int:
        """Accept a command issued in cycle ``t``; return its service latency in ticks."""
        lat, flags = self._serve(ch, sub, op, local)
        heapq.heappush(self._due, (t + lat, ch, sub, tag, flags))
        return lat

    def issue_group(self, t: int, ch: int, megaplane: int, ops) -> list[int]:
        """Accept a multi-plane command on megaplane ``megaplane`` of channel ``ch`` in
        cycle ``t`` (docs/timing-contract.md §7a MP2); return each plane's latency.

        ``ops`` lists ``(subarray, op, local, tag)`` per used plane. Each plane is served as
        a command of its own would be (page buffers, block allocation, erase: MP8); the
        command is due at ``t`` plus the slowest plane's latency (MP6) and completes as one
        (MP7): :meth:`deliver` returns it as ``(channel, megaplane, tags, flags)`` with one
        tag and one flag word per used plane, in the order of ``ops``. A megaplane holds one
        command at a time (MP1), so ``(due, channel, megaplane)`` orders the due heap: ties
        by lowest megaplane."""
        lats, tags, flags = [], [], []
        for sub, op, local, tag in ops:
            lat, f = self._serve(ch, sub, op, local)
            lats.append(lat)
            tags.append(tag)
            flags.append(f)
        heapq.heappush(self._due, (t + max(lats), ch, megaplane, tuple(tags), tuple(flags)))
        return lats

    def _serve(self, ch: int, sub: int, op: int, local: int) -> tuple[int, int]:
        """One plane's service of one page: its latency (R3, W5) and completion flags."""
        s = self._subs.get((ch, sub))
        if s is None:
            s = self._subs[(ch, sub)] = _Subarray()
        flags = 0
        if op == READ:
            bufs = s.buffers
            if local in bufs:
                bufs.remove(local)
                bufs.append(local)
                lat = self.t_hit
                flags = FLAG_BUFFER_HIT
                self.buffer_hits += 1
            else:
                lat = self.t_read
                self.page_reads += 1
                if self.nbuf:
                    bufs.append(local)
                    if len(bufs) > self.nbuf:
                        del bufs[0]
        else:
            lat, ok = self._program(s, local)
            if not ok:
                flags = FLAG_ERROR
        self.busy_ticks += lat
        return lat, flags

    def next_due(self) -> int | None:
        """Earliest due tick of an undelivered completion, or None."""
        return self._due[0][0] if self._due else None

    def deliver(self, t: int) -> list[tuple[int, int, int, int]]:
        """Completions delivered in cycle ``t``: at most one per channel, as
        ``(channel, subarray, tag, flags)``, earliest due first, ties by lowest subarray (a
        multi-plane command's: ``(channel, megaplane, tags, flags)``, :meth:`issue_group`)."""
        due = self._due
        if not due or due[0][0] > t:
            return []
        out = []
        seen = set()
        later = []
        while due and due[0][0] <= t:
            d, ch, sub, tag, flags = heapq.heappop(due)
            if ch in seen:
                later.append((d, ch, sub, tag, flags))
            else:
                seen.add(ch)
                out.append((ch, sub, tag, flags))
        for item in later:
            heapq.heappush(due, item)
        return out

    def backlog(self, t: int) -> bool:
        """True when completions due by ``t`` are still undelivered."""
        return bool(self._due) and self._due[0][0] <= t

    # ---- programs, erase-before-write, GC ------------------------------------------------
    def _program(self, s: _Subarray, local: int) -> tuple[int, bool]:
        if local in s.buffers:
            s.buffers.remove(local)
        lat = self.t_prog
        old = s.map.pop(local, None)
        if old is not None:
            self._invalidate(s, old[0])
        if s.active < 0 or s.wp == self.ppb:
            extra = self._open_block(s)
            if extra is None:
                self.capacity_errors += 1
                return lat, False
            lat += extra
        s.map[local] = (s.active, s.wp)
        s.valid[s.active] = s.valid.get(s.active, 0) + 1
        s.wp += 1
        self.page_programs += 1
        return lat, True

    def _invalidate(self, s: _Subarray, block: int) -> None:
        v = s.valid[block] - 1
        s.valid[block] = v
        if v == 0 and block != s.active:
            s.full.discard(block)
            s.free.append(block)

    def _open_block(self, s: _Subarray) -> int | None:
        """Close the active block and open the next one; return the extra latency."""
        if s.active >= 0:
            if s.valid.get(s.active, 0) == 0:
                s.free.append(s.active)
            else:
                s.full.add(s.active)
        extra = 0
        if self.ssd and len(s.free) + (self.blocks - s.fresh) <= self.reserve and s.full:
            extra += self._gc(s)
            if s.wp < self.ppb:  # the compacted victim was reopened as the active block
                return extra
        if s.free:
            blk = s.free.popleft()
            s.pec[blk] = s.pec.get(blk, 0) + 1
            self.block_erases += 1
            extra += self.t_erase
        elif s.fresh < self.blocks:
            blk = s.fresh
            s.fresh += 1
        else:
            s.active = -1
            return None
        s.active, s.wp = blk, 0
        return extra

    def _gc(self, s: _Subarray) -> int:
        """Greedy GC (ssd mode): relocate the least-valid closed block, then free it."""
        victim = min(s.full, key=lambda b: (s.valid.get(b, 0), b))
        s.full.discard(victim)
        movers = [lp for lp, (b, _) in s.map.items() if b == victim]
        # Relocation needs a destination block: erase the victim after staging its pages in
        # the page register, then rewrite them at its start (a model of in-place compaction).
        s.pec[victim] = s.pec.get(victim, 0) + 1
        self.block_erases += 1
        self.gc_relocations += len(movers)
        for i, lp in enumerate(sorted(movers)):
            s.map[lp] = (victim, i)
        s.valid[victim] = len(movers)
        cost = len(movers) * (self.t_read + self.t_prog) + self.t_erase
        if len(movers) < self.ppb:
            # The compacted victim becomes the active block, continuing after the movers.
            s.active, s.wp = victim, len(movers)
        else:
            s.full.add(victim)
        return cost

    # ---- statistics ---------------------------------------------------------------------
    def zone_pec(self) -> dict[tuple[int, int, int], int]:
        """Program/erase cycles summed per zone ``(channel, subarray, zone)``."""
        out: dict[tuple[int, int, int], int] = {}
        bpz = self.cfg.blocks_per_zone
        for (ch, sub), s in self._subs.items():
            for blk, n in s.pec.items():
                key = (ch, sub, blk // bpz)
                out[key] = out.get(key, 0) + n
        return out

    def valid_pages(self) -> int:
        return sum(len(s.map) for s in self._subs.values())
