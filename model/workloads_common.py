"""Building blocks every workload shares: :class:`DeviceStream`, parameter checks and the
warp layouts.

A workload returns either a :class:`~hbfsim.model.gpu.GpuProgram` (closed loop) or a
:class:`DeviceStream` (requests with fixed arrival ticks, no GPU). The helpers check a
workload's parameters with the one-line :class:`~hbfsim.model.gpu.GpuError` messages all
workloads use and lay accesses out over warps (one warp per access, or round-robin over a
fixed number of warps). Separate so that each family of workloads
(:mod:`.workloads_micro`, :mod:`.workloads_llm`, :mod:`.workloads_layout`) depends on it
and not on another family. :class:`DeviceStream` is re-exported by
:mod:`hbfsim.model.workloads`.
"""

from __future__ import annotations

from typing import Callable, Iterator

from hbfsim.config import PAGE_BYTES, HbfConfig, load_config
from hbfsim.model.controller import Request
from hbfsim.model.gpu_config import GpuError
from hbfsim.model.gpu_program import Producer

__all__ = ["SECTOR", "DeviceStream"]

SECTOR = 32


class DeviceStream:
    """A pure device request stream: requests with fixed arrival ticks (open loop).

    Iterating yields fresh :class:`Request` objects in arrival order, lazily, so the same
    stream can be run more than once.

    Members
    -------
    name, params, config, expected
        As for :class:`~hbfsim.model.gpu.GpuProgram`.
    """

    def __init__(self, factory: Callable[[], Iterator[Request]], name: str,
                 config: dict | None = None, expected: dict | None = None,
                 params: dict | None = None):
        self._factory = factory
        self.name = name
        self.config = dict(config or {})
        self.expected = dict(expected or {})
        self.params = dict(params or {})
        self.gpu = None

    def __iter__(self) -> Iterator[Request]:
        return iter(self._factory())

    def accesses(self) -> Iterator[tuple]:
        """Every request as ``(op, addr, nbytes)``, lazily (as :meth:`GpuProgram.accesses`)."""
        return ((r.op, r.addr, r.nbytes) for r in self)

    def __repr__(self):
        return f"DeviceStream({self.name!r}, params={self.params!r})"


def _cfg(cfg: HbfConfig | None) -> HbfConfig:
    return cfg if cfg is not None else load_config()


def _positive(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise GpuError(f"{name} must be a positive integer, not {v!r}")
    return v


def _nonneg(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise GpuError(f"{name} must be a non-negative integer, not {v!r}")
    return v


def _entry_bytes(name: str, v) -> int:
    if v not in (32, 64, 128):
        raise GpuError(f"{name} must be 32, 64 or 128 (a sector or a line), not {v!r}")
    return v


def _page_addr(cfg: HbfConfig, page: int) -> int:
    return cfg.base_address + page * PAGE_BYTES


def _one_access_warps(accesses, sms: int, bound: int = 1, start: int = 0) -> list[Producer]:
    """One warp per access (warp w on SM w mod sms), all launched together."""
    return [Producer([a], bound=bound, start=start, sm=w % sms) for w, a in enumerate(accesses)]


def _spread(accesses: list, warps: int, sms: int, bound: int, start: int = 0):
    """Deal ``accesses`` round-robin over ``warps`` warps (access i -> warp i mod warps)."""
    if warps <= 0 or warps >= len(accesses):
        return _one_access_warps(accesses, sms, bound, start)
    return [Producer(accesses[w::warps], bound=bound, start=start, sm=w % sms)
            for w in range(warps)]
