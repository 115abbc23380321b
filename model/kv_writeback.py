"""KV write-back in megablock sets (FlashAccel paper, KV layout section: "Newly written KV
sits in HBM until K megablocks are ready (K is the megaplane count), then all megaplanes
program in parallel at hyperpage granularity"; docs/flashaccel.md).

Plain Python. A request owns whole megablocks (:class:`hbfsim.model.layout.KvLayout`: one
megablock = ``pages_per_block`` rows of one megaplane, one erase block of each of its M
planes). New KV of a request fills its open megablock in HBM; a full megablock is *ready*.
When K megablocks are ready (any requests), they form a set: megablock ``j`` of the set goes
to megaplane ``order[j]`` of :class:`~hbfsim.model.layout.PlaneMap`, and the set programs
row by row, one hyperpage per row (every plane of the system once), so every plane is
programmed ``pages_per_block`` times back to back and no erase block mixes two requests.
:func:`set_pages` gives the set's logical pages in that order; the serving level measures
how fast the golden model programs them (serve/flashaccel/writeback.py).

What stays in HBM: every open (partial) megablock and every ready megablock waiting for its
set (``hbm_bytes``, and its peak). A request that ends before its megablock fills is
dropped from HBM without a program (``drop``): its KV never reaches the flash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.layout import PlaneMap

__all__ = ["KvWriteback", "MegablockSet", "set_pages"]


def set_pages(planes: PlaneMap, first_row: int = 0) -> list[int]:
    """Logical pages of one megablock set from hyperpage row ``first_row``: row by row
    (``pages_per_block`` rows), each row all megaplanes in round-robin order, each
    megaplane its M planes: the order a set's hyperpage programs fire."""
    ppb = planes.cfg.pages_per_block
    if first_row % ppb:
        raise ValueError(f"first_row must be a multiple of pages_per_block ({ppb}), "
                         f"not {first_row!r}")
    K = planes.megaplanes
    return [p for r in range(first_row, first_row + ppb)
            for j in range(r * K, (r + 1) * K) for p in planes.megapage(j)]


@dataclass
class MegablockSet:
    """One programmed set: megablock ``j`` (a ``(request, index)``) on megaplane ``j``."""

    index: int
    megablocks: list = field(default_factory=list)


class KvWriteback:
    """New KV held in HBM until a full set of K megablocks can program.

    Parameters
    ----------
    cfg : HbfConfig
        Gives K (megaplanes of the system), M and ``pages_per_block``.

    Members
    -------
    megablock_bytes : int
        ``M x pages_per_block x PAGE_BYTES``.
    set_bytes : int
        ``K x megablock_bytes``: one set, every plane's erase block once.
    sets : list of MegablockSet
    hbm_bytes, peak_hbm_bytes : int
        KV bytes staged in HBM now and at most.
    written_bytes, dropped_bytes : int
        Bytes programmed to flash; bytes dropped from HBM unwritten.
    """

    def __init__(self, cfg: HbfConfig):
        self.planes = PlaneMap(cfg)
        self.K = self.planes.megaplanes
        self.megablock_bytes = self.planes.m * cfg.pages_per_block * PAGE_BYTES
        self.set_bytes = self.K * self.megablock_bytes
        self._open: dict = {}         # request -> (megablock index, bytes in it)
        self._ready: list = []        # (request, megablock index), in the order they filled
        self.sets: list[MegablockSet] = []
        self.hbm_bytes = self.peak_hbm_bytes = 0
        self.written_bytes = self.dropped_bytes = 0

    def append(self, request, nbytes: int) -> list[MegablockSet]:
        """Add ``nbytes`` of new KV of ``request``; return the sets this programs."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative integer, not {nbytes!r}")
        k, have = self._open.get(request, (0, 0))
        self.hbm_bytes += nbytes
        have += nbytes
        while have >= self.megablock_bytes:
            self._ready.append((request, k))
            k, have = k + 1, have - self.megablock_bytes
        self._open[request] = (k, have)
        self.peak_hbm_bytes = max(self.peak_hbm_bytes, self.hbm_bytes)
        out = []
        while len(self._ready) >= self.K:
            s = MegablockSet(len(self.sets), self._ready[:self.K])
            del self._ready[:self.K]
            self.sets.append(s)
            self.hbm_bytes -= self.set_bytes
            self.written_bytes += self.set_bytes
            out.append(s)
        return out

    def drop(self, request) -> int:
        """Forget ``request``'s open megablock (it ended or was evicted before it filled);
        return the bytes dropped. Its ready megablocks still program with their set."""
        _, have = self._open.pop(request, (0, 0))
        self.hbm_bytes -= have
        self.dropped_bytes += have
        return have

    def ready(self) -> int:
        """Megablocks full and waiting for their set."""
        return len(self._ready)
