"""Address mapping: HBF address -> stack, channel, channel-local page, subarray.

Implements A1-A4 (docs/sources.md) and docs/history.md §2-§3 (source §4.1.1-§4.1.2).
Pure integer functions, shared by the controller, the media model and the RTL tests.
"""

from __future__ import annotations

from bisect import bisect_right

from hbfsim.config import PAGE_BYTES, HbfConfig

__all__ = ["AddressError", "Mapper"]


class AddressError(ValueError):
    """An address or size outside the HBF range or across a page boundary."""


class Mapper:
    """Map logical pages of one HBF system onto stacks, channels and subarrays.

    Parameters
    ----------
    cfg : HbfConfig
        The system configuration.
    """

    def __init__(self, cfg: HbfConfig):
        self.cfg = cfg
        self.base = cfg.base_address
        self.limit = cfg.base_address + cfg.capacity_bytes
        self.stacks = cfg.stacks
        self.pages_per_stack = cfg.pages_per_stack
        self.sub = cfg.subarrays_per_channel
        self.placement = cfg.placement
        self.group = cfg.group_pages
        self.read_channels = cfg.read_channels
        self.partitioned = cfg.scheduler.startswith("partition-")
        ranges = sorted(cfg.explicit_map)
        self._ex_first = [r[0] for r in ranges]
        self._ex = ranges

    def check(self, addr: int, nbytes: int) -> None:
        """Raise :class:`AddressError` unless ``[addr, addr+nbytes)`` is one HBF page."""
        if not self.base <= addr < self.limit:
            raise AddressError(f"address {addr:#x} is outside the HBF range "
                               f"[{self.base:#x}, {self.limit:#x})")
        if not 1 <= nbytes <= PAGE_BYTES:
            raise AddressError(f"bytes must be 1..{PAGE_BYTES}, not {nbytes}")
        if (addr - self.base) % PAGE_BYTES + nbytes > PAGE_BYTES:
            raise AddressError(f"request at {addr:#x} of {nbytes} bytes crosses a 4 KiB page")

    def page(self, addr: int) -> int:
        """Logical page ``(a - B) // P`` (A1)."""
        return (addr - self.base) // PAGE_BYTES

    def stack_of(self, page: int) -> tuple[int, int]:
        """Return ``(stack, stack-local page)`` for a logical page (A2)."""
        if self.stacks == 1:
            return 0, page
        if self.cfg.stack_select == "interleave":
            return page % self.stacks, page // self.stacks
        return page // self.pages_per_stack, page % self.pages_per_stack

    def channel_of(self, q: int, write: bool = False) -> tuple[int, int, int]:
        """Return ``(channel, channel-local page, subarray)`` for a stack-local page (A4)."""
        if self.partitioned:
            if write:
                n, off = self.cfg.channels - self.read_channels, self.read_channels
            else:
                n, off = self.read_channels, 0
        else:
            n, off = self.cfg.channels, 0
        pl = self.placement
        if pl == "interleave":
            ch, local = q % n, q // n
        elif pl == "grouped":
            g = self.group
            ch, local = (q // g) % n, (q // (g * n)) * g + q % g
        elif pl == "contiguous":
            region = self.pages_per_stack // n
            ch, local = min(q // region, n - 1), q - min(q // region, n - 1) * region
        else:  # explicit: the map names the channel, the local index is q itself (§6.1)
            i = bisect_right(self._ex_first, q) - 1
            if i >= 0 and q <= self._ex[i][1]:
                ch = self._ex[i][2]
            else:
                ch = q % n
            local = q
        return ch + off, local, local % self.sub
