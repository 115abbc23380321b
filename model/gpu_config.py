"""The GPU's shape and clocks: :class:`GpuConfig`, the partition interleave and the clock
conversions.

Everything the GPU side of the closed loop knows about the hardware before a program runs:
how many SMs and memory sub-partitions it has, how addresses interleave over the
partitions (:func:`partition_of`), the return and launch delays, and the conversion between
GPU core cycles and controller ticks. It is separate from the program
(:mod:`.gpu_program`) and the issue machinery (:mod:`.gpu_issue`) because all of them, and
the workloads, depend on it and on nothing else; :class:`GpuError` lives here for the same
reason. The public names are re-exported by :mod:`hbfsim.model.gpu`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from hbfsim.config import PAGE_BYTES, HbfConfig

__all__ = ["GpuConfig", "GpuError", "gpu_cycles_to_ticks", "partition_of", "us_to_gpu_cycles"]


class GpuError(ValueError):
    """A malformed GPU program or GPU configuration; the message names field and value."""


# ----------------------------------------------------------------------------- clocks
def gpu_cycles_to_ticks(cycles: int, cfg: HbfConfig) -> int:
    """Convert a GPU-core-cycle delay to controller ticks, rounding up.

    ``ticks = ceil(cycles * memory_clock_khz / gpu_clock_khz)`` in integer arithmetic: a GPU
    delay is never shortened, a positive delay costs at least one tick and zero stays zero.
    It is the inverse direction of contract §9 (ticks -> GPU cycles, also rounded up).
    """
    if cycles <= 0:
        return 0
    return -(-cycles * cfg.memory_clock_khz // cfg.gpu_clock_khz)


def us_to_gpu_cycles(us: float, cfg: HbfConfig) -> int:
    """Microseconds to GPU core cycles: round half up of ``us * gpu_clock_mhz`` (exact)."""
    v = Decimal(repr(us)) * Decimal(repr(cfg.gpu_clock_mhz))
    return int(v.quantize(Decimal(1), rounding=ROUND_HALF_UP))


# ----------------------------------------------------------------------------- config
@dataclass(frozen=True)
class GpuConfig:
    """GPU-side parameters (the HBF side is :class:`hbfsim.config.HbfConfig`).

    Members
    -------
    sms : int
        Streaming multiprocessors. Producers name their SM; it groups them for statistics
        (the HBF port, one request per tick, is tighter than any SM issue rate).
    partitions : int
        Memory sub-partitions, each with one FIFO in front of the HBF port.
    partition_bytes : int
        Address interleave of the partitions (a power of two, at least 32).
    return_cycles : int
        GPU cycles from an HBF response to the warp seeing it (interconnect and fill path);
        added to every completion-triggered delay. It is also the lookahead the driver may
        use, so a larger value runs faster.
    launch_cycles : int
        GPU cycles from a kernel's barrier to the next kernel's launch.
    """

    sms: int = 8
    partitions: int = 8
    partition_bytes: int = 256
    return_cycles: int = 0
    launch_cycles: int = 0

    def __post_init__(self):
        for name in ("sms", "partitions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GpuError(f"{name} must be a positive integer, not {v!r}")
        for name in ("return_cycles", "launch_cycles"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise GpuError(f"{name} must be a non-negative integer, not {v!r}")
        pb = self.partition_bytes
        if isinstance(pb, bool) or not isinstance(pb, int) or pb < 32 or pb & (pb - 1):
            raise GpuError(f"partition_bytes must be a power of two >= 32, not {pb!r}")


def partition_of(addr: int, cfg: HbfConfig, gpu: GpuConfig) -> int:
    """Memory sub-partition of a byte address (rotated interleave).

    ``chunk = (a - B) // partition_bytes``, ``page = (a - B) // 4096``,
    ``partition = (chunk + page) mod partitions``: consecutive chunks rotate over the
    partitions and every page starts one partition later, so page-strided streams do not
    all land in one partition.
    """
    rel = addr - cfg.base_address
    return (rel // gpu.partition_bytes + rel // PAGE_BYTES) % gpu.partitions
