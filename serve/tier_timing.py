"""How long a memory tier takes to move bytes: the interface between device and serving level.

The serving cost model (docs/serving.md) charges a transfer of ``B`` bytes on one stack
``t(B) = latency + B / bandwidth``, with the pair chosen by the access pattern. A
:class:`TierTiming` is either the source's Table 1 constants (serving paper, Table 1) or the result
of characterizing an ``HbfConfig`` on the device model (``serve/characterize.py``, on either
engine: the same figures; ``source`` names the one that ran). A
characterized tier also carries the measured transfer times (a curve per pattern), which
:meth:`TierTiming.read_seconds` interpolates below the largest measured size, where the
line does not hold (a transfer smaller than the media's parallelism costs about one tR
whatever its size: docs/serving-hbf-tier.md).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

__all__ = ["TierTiming", "PATTERNS", "TABLE1_HBM", "TABLE1_HBF"]

#: Access patterns the serving level distinguishes: ``stream`` (weights: long sequential
#: runs read once per step) and ``kv`` (KV-cache blocks: scattered runs of one block each).
PATTERNS = ("stream", "kv")


@dataclass(frozen=True)
class TierTiming:
    """Per-stack timing of one memory tier.

    Members
    -------
    name : str
        What the figures describe (``"hbf-table1"``, ``"hbf-device:<hash>"``, ...).
    read_bw, write_bw : float
        Achieved bandwidth in bytes per second per stack (streaming reads; writes with
        full-page programs).
    read_latency_s, write_latency_s : float
        Startup latency of one transfer, seconds.
    kv_read_bw, kv_read_latency_s : float or None
        The same for the ``kv`` pattern; ``None`` means the streaming figures.
    write_amplification : float
        Media bytes programmed per byte the host writes (>= 1: padding of partial pages,
        erase-before-write); what the HBF lifetime estimate multiplies by.
    source : str
        Where the figures come from, one line (shown in summaries): a characterized tier's
        names the engine that ran (``device model, compiled engine: 16 ch x ...``).
    points : tuple
        The measurements behind the figures (rows of dicts), empty for constants.
    read_curve, kv_read_curve, write_curve : tuple of (bytes, seconds)
        Measured transfer times, bytes strictly increasing; empty means the line alone.
        Within the curve the time is interpolated linearly between measured sizes (a size
        below the first point costs the first point's time: a transfer smaller than one
        request still reads a page); beyond the last point it grows at the line's
        bandwidth from the last point.
    """

    name: str
    read_bw: float
    read_latency_s: float
    write_bw: float
    write_latency_s: float
    kv_read_bw: float | None = None
    kv_read_latency_s: float | None = None
    write_amplification: float = 1.0
    source: str = ""
    points: tuple = field(default=(), compare=False, repr=False)
    read_curve: tuple = field(default=(), repr=False)
    kv_read_curve: tuple = field(default=(), repr=False)
    write_curve: tuple = field(default=(), repr=False)

    def __post_init__(self):
        for k in ("read_bw", "write_bw", "read_latency_s", "write_latency_s",
                  "kv_read_bw", "kv_read_latency_s", "write_amplification"):
            v = getattr(self, k)
            if v is None and k.startswith("kv_"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{self.name}: {k} must be a finite number, not {v!r}")
            if k.endswith("_bw") and v <= 0:
                raise ValueError(f"{self.name}: {k} must be positive, not {v!r}")
            if v < 0:
                raise ValueError(f"{self.name}: {k} must not be negative, not {v!r}")
        if self.write_amplification < 1:
            raise ValueError(f"{self.name}: write_amplification must be >= 1, "
                             f"not {self.write_amplification!r}")
        for k in ("read_curve", "kv_read_curve", "write_curve"):
            curve = tuple((float(b), float(t)) for b, t in getattr(self, k))
            for i, (b, t) in enumerate(curve):
                if not (math.isfinite(b) and math.isfinite(t) and b > 0 and t > 0):
                    raise ValueError(f"{self.name}: {k}[{i}] must be positive (bytes, "
                                     f"seconds), not {(b, t)!r}")
                if i and b <= curve[i - 1][0]:
                    raise ValueError(f"{self.name}: {k} bytes must increase, not {b!r} "
                                     f"after {curve[i - 1][0]!r}")
            object.__setattr__(self, k, curve)

    def read_seconds(self, nbytes: float, pattern: str = "stream") -> float:
        """Seconds to read ``nbytes`` from one stack as one transfer of ``pattern``."""
        if pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
        if nbytes <= 0:
            return 0.0
        if pattern == "kv" and self.kv_read_bw is not None:
            lat = self.read_latency_s if self.kv_read_latency_s is None else \
                self.kv_read_latency_s
            return _curve_or_line(self.kv_read_curve, nbytes, lat, self.kv_read_bw)
        return _curve_or_line(self.read_curve, nbytes, self.read_latency_s, self.read_bw)

    def write_seconds(self, nbytes: float) -> float:
        """Seconds to write ``nbytes`` to one stack as one transfer."""
        if nbytes <= 0:
            return 0.0
        return _curve_or_line(self.write_curve, nbytes, self.write_latency_s, self.write_bw)


def _curve_or_line(curve: tuple, nbytes: float, latency: float, bw: float) -> float:
    """``latency + nbytes / bw``, or the measured ``curve`` where it reaches (see Members)."""
    if not curve:
        return latency + nbytes / bw
    b0, t0 = curve[0]
    if nbytes <= b0:
        return t0
    b1, t1 = curve[-1]
    if nbytes >= b1:
        return t1 + (nbytes - b1) / bw
    i = bisect.bisect_left(curve, (nbytes,))
    (ba, ta), (bb, tb) = curve[i - 1], curve[i]
    return ta + (tb - ta) * (nbytes - ba) / (bb - ba)


# serving paper Table 1 (per stack; decimal GB): HBM 1,000 GB/s read and write, 0.1 us startup.
TABLE1_HBM = TierTiming("hbm-table1", read_bw=1000e9, read_latency_s=0.1e-6,
                        write_bw=1000e9, write_latency_s=0.1e-6,
                        source="serving paper Table 1 (HBM: 1,000 GB/s, 0.1 us)")
# serving paper Table 1: HBF 1,000 GB/s read, 8 GB/s write ("typical SSD write parameters"),
# 20 us read / 250 us write startup.
TABLE1_HBF = TierTiming("hbf-table1", read_bw=1000e9, read_latency_s=20e-6,
                        write_bw=8e9, write_latency_s=250e-6,
                        source="serving paper Table 1 (HBF: 1,000 / 8 GB/s, 20 / 250 us), constant")
