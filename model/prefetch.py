"""SRAM prefetch: an asynchronous queue of copies from HBF planes into the base-die SRAM
(FlashAccel paper, storage-layer section: "SramPrefetch / SramRelease for explicit SRAM
staging. Prefetches are pulled out of the compute graph into a queue and run
asynchronously. Page-table entries start on HBF and flip to SRAM when the copy finishes";
docs/flashaccel.md).

Plain Python, times in seconds. A prefetch names logical HBF pages (``PlaneMap`` gives each
its plane and channel). Its copy moves every page in two steps: the plane reads it into its
own SRAM (``t_read_us``, one page at a time per plane, FlashAccel's 32 KB per plane), and
the channel carries it to the base die (``PAGE_BYTES / channel_bw``, one page at a time per
channel), where it stays until released. The two capacities of the stack are enforced:

* **base-die SRAM** (``base_die_sram_bytes`` per stack): a prefetch starts only when every
  stack it touches has room for all of its pages there; until then it waits, and so does
  every prefetch behind it (the queue is FIFO: a later small prefetch does not overtake a
  waiting large one). Room is freed by :meth:`PrefetchQueue.release` (SramRelease). A
  prefetch larger than a stack's whole base-die SRAM can never start and is refused.
* **per-plane SRAM** (``plane_sram_bytes``): a plane holds at most ``plane_sram_bytes /
  PAGE_BYTES`` pages read but not yet carried to the base die; it does not start the next
  read while full (it waits for the channel). A configuration without per-plane SRAM (0)
  refuses prefetches.

A page-table entry reads ``"hbf"`` until its prefetch's last page reaches the base die and
``"sram"`` from then until its release; kernels keep the same virtual address (the entry is
all that changes). Hyperpage commands (timing contract v2) are not assumed: a plane reads
pages one at a time, as the golden model's media does.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.layout import PlaneMap

__all__ = ["Prefetch", "PrefetchError", "PrefetchQueue"]


class PrefetchError(ValueError):
    """A prefetch or release that cannot be done (the message names it)."""


@dataclass
class Prefetch:
    """One SramPrefetch: its pages and, once scheduled, when its copy ran.

    Members
    -------
    name : str
    pages : list of int
    issued : float
        When it entered the queue.
    start, done : float or None
        When its copy started (room in the base-die SRAM) and when its last page arrived;
        None while it waits.
    released : float or None
        When SramRelease freed its SRAM.
    bytes_per_stack : dict
        Stack -> base-die SRAM bytes it occupies.
    copies : list of [plane, read start, read end, transfer end]
        Every page's copy, in the order reads started (for checks).
    """

    name: str
    pages: list
    issued: float
    start: float | None = None
    done: float | None = None
    released: float | None = None
    bytes_per_stack: dict = field(default_factory=dict)
    copies: list = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.pages) * PAGE_BYTES


class PrefetchQueue:
    """The prefetch queue of one HBF system and the page table it flips.

    Parameters
    ----------
    cfg : HbfConfig
        Gives the planes, ``t_read_us``, ``channel_bw_gbps``, ``plane_sram_bytes`` and
        ``base_die_sram_bytes``.

    Raises
    ------
    PrefetchError
        When the configuration has no per-plane or no base-die SRAM.
    """

    def __init__(self, cfg: HbfConfig):
        for key in ("plane_sram_bytes", "base_die_sram_bytes"):
            if getattr(cfg, key) < PAGE_BYTES:
                raise PrefetchError(f"{key} is {getattr(cfg, key)}: a prefetch needs at least "
                                    f"one page ({PAGE_BYTES} B) of it (profile flashaccel "
                                    f"sets both)")
        self.cfg = cfg
        self.planes = PlaneMap(cfg)
        self.t_read = cfg.t_read_us * 1e-6
        self.t_xfer = PAGE_BYTES / (cfg.channel_bw_gbps * 1e9)
        self.plane_slots = cfg.plane_sram_bytes // PAGE_BYTES
        self.sram = cfg.base_die_sram_bytes
        self.free = {st: self.sram for st in range(cfg.stacks)}
        self._plane_free: dict[int, float] = {}
        # per plane: transfer ends of its last plane_slots pages (None: not carried yet)
        self._hist: dict[int, deque] = {}
        self._chan_free: dict[int, float] = {}
        self._waiting: deque[Prefetch] = deque()
        self._live: dict[str, Prefetch] = {}
        self._entry: dict[int, Prefetch] = {}
        self.done: list[Prefetch] = []

    # ------------------------------------------------------------------ SramPrefetch
    def prefetch(self, name: str, pages, t: float = 0.0) -> Prefetch:
        """Queue a copy of ``pages`` into the base-die SRAM at time ``t`` (SramPrefetch).

        Raises
        ------
        PrefetchError
            For a name already live, an empty page list, or a prefetch larger than a
            stack's base-die SRAM (it could never start).
        """
        if name in self._live:
            raise PrefetchError(f"prefetch {name!r} is already queued or resident")
        pages = list(dict.fromkeys(pages))
        if not pages:
            raise PrefetchError(f"prefetch {name!r} names no pages")
        per = {}
        sps = self.cfg.subarrays_per_stack
        for p in pages:
            if p in self._entry:
                raise PrefetchError(f"page {p} of {name!r} is already in prefetch "
                                    f"{self._entry[p].name!r}")
            st = self.planes.plane_of(p) // sps
            per[st] = per.get(st, 0) + PAGE_BYTES
        big = {st: b for st, b in per.items() if b > self.sram}
        if big:
            st, b = next(iter(big.items()))
            raise PrefetchError(f"prefetch {name!r} needs {b:,} B of stack {st}'s base-die "
                                f"SRAM, more than base_die_sram_bytes {self.sram:,}: "
                                f"refused (split it)")
        pf = Prefetch(name, pages, t, bytes_per_stack=per)
        self._live[name] = pf
        for p in pages:
            self._entry[p] = pf
        self._waiting.append(pf)
        self._schedule(t)
        return pf

    # ------------------------------------------------------------------ SramRelease
    def release(self, name: str, t: float) -> Prefetch:
        """Free the SRAM of prefetch ``name`` at time ``t`` (SramRelease); its entries go
        back to HBF and waiting prefetches that now fit start.

        Raises
        ------
        PrefetchError
            For an unknown name, or a release before the copy is done (or started).
        """
        pf = self._live.get(name)
        if pf is None:
            raise PrefetchError(f"release of {name!r}: no such prefetch is queued or resident")
        if pf.done is None or t < pf.done:
            when = "waits for SRAM" if pf.done is None else f"completes at {pf.done:.9g} s"
            raise PrefetchError(f"release of {name!r} at {t:.9g} s: its copy {when}")
        pf.released = t
        for st, b in pf.bytes_per_stack.items():
            self.free[st] += b
        for p in pf.pages:
            del self._entry[p]
        del self._live[name]
        self._schedule(t)
        return pf

    # ------------------------------------------------------------------ the page table
    def entry(self, page: int, t: float) -> str:
        """``"sram"`` when ``page``'s prefetch has completed by ``t`` and is not released,
        else ``"hbf"``."""
        pf = self._entry.get(page)
        return "sram" if pf is not None and pf.done is not None and pf.done <= t else "hbf"

    def waiting(self) -> list[str]:
        """Names of the prefetches waiting for base-die SRAM, in queue order."""
        return [p.name for p in self._waiting]

    # ------------------------------------------------------------------ the copy engine
    def _schedule(self, t: float) -> None:
        while self._waiting:
            pf = self._waiting[0]
            if any(self.free[st] < b for st, b in pf.bytes_per_stack.items()):
                return                                          # FIFO: the head waits
            self._waiting.popleft()
            start = max(t, pf.issued)
            for st, b in pf.bytes_per_stack.items():
                self.free[st] -= b
            pf.start = start
            pf.done = self._copy(pf.pages, start, pf.copies)
            self.done.append(pf)

    def _copy(self, pages: list[int], start: float, log: list) -> float:
        """Time the last of ``pages`` reaches the base die: an event simulation of the
        module docstring's rule (one read per plane at a time; one transfer per channel at
        a time, in the order reads finish; a plane with ``plane_slots`` pages not yet
        carried waits for its oldest). Earlier copies' plane, channel and SRAM state
        carries over."""
        sub = self.cfg.subarrays_per_channel
        todo: dict[int, int] = {}
        for p in pages:
            q = self.planes.plane_of(p)
            todo[q] = todo.get(q, 0) + 1
        seq = itertools.count()
        ev: list = []
        chq: dict[int, list] = {}
        reading, active = set(), set()
        last = start

        def try_read(q, now):
            if not todo[q] or q in reading:
                return
            held = self._hist.setdefault(q, deque(maxlen=self.plane_slots))
            t0 = max(now, start, self._plane_free.get(q, 0.0))
            if len(held) == self.plane_slots:
                if held[0] is None:        # its SRAM is full of pages still to carry
                    return
                t0 = max(t0, held[0])
            todo[q] -= 1
            reading.add(q)
            held.append(None)              # read, not yet carried (the oldest drops out)
            self._plane_free[q] = t0 + self.t_read
            log.append([q, t0, t0 + self.t_read, None])
            heapq.heappush(ev, (t0 + self.t_read, next(seq), "read", (q, len(log) - 1)))

        def try_xfer(ch, now):
            if ch in active or not chq.get(ch):
                return
            ready, _, item = heapq.heappop(chq[ch])
            t1 = max(now, ready, self._chan_free.get(ch, 0.0)) + self.t_xfer
            active.add(ch)
            heapq.heappush(ev, (t1, next(seq), "xfer", item))

        for q in list(todo):
            try_read(q, start)
        while ev:
            t, _, kind, item = heapq.heappop(ev)
            q = item[0]
            ch = q // sub
            if kind == "read":
                reading.discard(q)
                heapq.heappush(chq.setdefault(ch, []), (t, next(seq), item))
            else:
                active.discard(ch)
                self._chan_free[ch] = t
                log[item[1]][3] = t
                held = self._hist[q]
                held[held.index(None)] = t  # a plane's pages are carried in read order
                last = max(last, t)
            try_xfer(ch, t)
            try_read(q, t)
        return last
