"""Planes busy over time: which NAND planes a closed-loop run kept busy, and when.

An instrument, not a mechanism: it records every media command as the controller issues it
(stack, channel, subarray, issue tick, service ticks; the media promise of
docs/history.md §1) and changes no timing. The FlashAccel layouts
(model/layout.py, docs/flashaccel.md) are judged by it: the fraction of planes busy over a
kernel's span, the planes it used at all, and the span itself.
"""

from __future__ import annotations

from hbfsim.config import HbfConfig
from hbfsim.model.gpu import ClosedLoop, GpuResult

__all__ = ["PlaneActivity", "run_with_planes"]


class PlaneActivity:
    """Media commands of one run, by plane.

    Members
    -------
    cfg : HbfConfig
    planes : int
        Planes (subarrays) of the system: stacks x channels x subarrays_per_channel.
    ops : list of (tick, plane, service ticks)
        Every media command in issue order; plane = ``(stack * channels + channel) *
        subarrays_per_channel + subarray``.
    """

    def __init__(self, cfg: HbfConfig):
        self.cfg = cfg
        self.planes = cfg.stacks * cfg.subarrays_per_stack
        self.ops: list[tuple[int, int, int]] = []
        self.commands = 0

    def attach(self, system) -> None:
        """Record the media commands of every stack of ``system`` (before it runs)."""
        for st in system.stacks:
            st.media.issue = self._recorder(st.media.issue, st.stack)
            st.media.issue_group = self._group_recorder(st.media.issue_group, st.stack)

    def _recorder(self, issue, stack):
        base = stack * self.cfg.subarrays_per_stack
        sub = self.cfg.subarrays_per_channel
        ops = self.ops

        def recorded(t, ch, s, op, local, tag):
            lat = issue(t, ch, s, op, local, tag)
            ops.append((t, base + ch * sub + s, lat))
            self.commands += 1
            return lat

        return recorded

    def _group_recorder(self, issue_group, stack):
        """A multi-plane command is one record per used plane, each with its own service
        ticks (docs/timing-contract.md §7a MP6: a plane that finishes before the
        slowest is idle, though its megaplane is held; unused planes draw nothing, MP5)."""
        base = stack * self.cfg.subarrays_per_stack
        sub = self.cfg.subarrays_per_channel
        ops = self.ops

        def recorded(t, ch, g, group):
            lats = issue_group(t, ch, g, group)
            for (s, _op, _local, _tag), lat in zip(group, lats):
                ops.append((t, base + ch * sub + s, lat))
            self.commands += 1
            return lats

        return recorded

    def window(self, start: int, end: int) -> dict:
        """Figures of the commands issued in ticks ``[start, end]``.

        Returns ``span_ticks`` (``end - start + 1``), ``ops``, ``planes_used`` (distinct
        planes with a command), ``busy_fraction`` (service ticks inside the window / (planes
        x span): the mean fraction of planes busy) and ``max_plane_ops`` (the most commands
        one plane served: the straggler).
        """
        span = end - start + 1
        busy, used = 0, {}
        for t, plane, lat in self.ops:
            if start <= t <= end:
                busy += min(lat, end + 1 - t)
                used[plane] = used.get(plane, 0) + 1
        return {"span_ticks": span, "span_us": self.cfg.ticks_to_us(span),
                "ops": sum(used.values()), "planes_used": len(used),
                "busy_fraction": busy / (self.planes * span),
                "max_plane_ops": max(used.values(), default=0)}

    def busy_over_time(self, start: int, end: int, bin_ticks: int) -> list[float]:
        """Mean number of busy planes in each ``bin_ticks`` bin of ``[start, end]``."""
        n = -(-(end - start + 1) // bin_ticks)
        acc = [0] * n
        for t, _, lat in self.ops:
            a, b = max(t, start), min(t + lat, end + 1)
            while a < b:
                i = (a - start) // bin_ticks
                edge = min(b, start + (i + 1) * bin_ticks)
                acc[i] += edge - a
                a = edge
        return [v / bin_ticks for v in acc]


def run_with_planes(cfg: HbfConfig, program) -> tuple[GpuResult, PlaneActivity]:
    """Run ``program`` closed loop (:class:`~hbfsim.model.gpu.ClosedLoop`) and record its
    planes. Per kernel: ``activity.window(k["launch"], k["end"])`` for ``k`` in
    ``result.kernels``."""
    loop = ClosedLoop(cfg, program)
    activity = PlaneActivity(cfg)
    activity.attach(loop.system)
    return loop.run(), activity
