"""The closed-loop GPU stepped one tick at a time (:class:`GpuPort`) for any controller,
and :func:`run_stepped`, its reference run against an :class:`HbfSystem`.

:class:`~hbfsim.model.gpu.ClosedLoop` advances the golden model in chunks and so needs to
own it; :class:`GpuPort` owns no controller: the caller presents each granted request to
its own controller and reports every response back. The co-simulation drives it against
the RTL (docs/cosim.md), so that the GPU's next requests depend on the RTL's own
responses; :func:`run_stepped` drives it against an :class:`HbfSystem` with no horizon and
no lookahead, the reference ClosedLoop's chunked driver must equal (tests/model/test_gpu.py;
the channel shape's G5' grants: tests/model/test_gpu_ports.py). Re-exported by
:mod:`hbfsim.model.gpu`.
"""

from __future__ import annotations

import heapq

from hbfsim.config import HbfConfig
from hbfsim.model.gpu_config import GpuConfig, GpuError
from hbfsim.model.gpu_issue import _LAUNCH, GpuRequest, GpuResult, _GpuCore
from hbfsim.model.system import HbfSystem

__all__ = ["GpuPort", "run_stepped"]


class GpuPort(_GpuCore):
    """The closed-loop GPU model stepped one tick at a time, for any controller.

    The controller is the caller's. For every tick the port must act in (:meth:`next_tick`)
    the caller calls :meth:`grants` (or, with one request port, :meth:`tick`), which handles
    that tick's GPU events (launches, accesses released by earlier completions) and the port
    arbiter's grants; the caller presents each granted request to its controller on the
    request port named with it (``arrival`` = the grant tick; it waits in that port's
    ingress FIFO while the port's ``req.ready`` is low, as ``HbfSystem.submit`` does) and
    reports every response handshake with :meth:`respond`, after filling in the request's
    ``t_accept`` and response flags. Within a tick the order is: the grants, then the
    controller, then :meth:`respond` for the tick's responses; a response in tick ``t``
    releases accesses from tick ``t + 1 + return`` on.

    The grants are :class:`ClosedLoop`'s: G5 (one per tick, round-robin over the partition
    FIFOs) with one request port per stack, G5' (at most one per system port per tick,
    ``_GpuCore._grant_ports``, the code ClosedLoop runs) in the channel shape
    (docs/gpu.md; timing-contract.md §14). Driven so, the port sees exactly what
    :class:`ClosedLoop` sees from an :class:`HbfSystem`: :func:`run_stepped` drives it
    against one (the reference for ClosedLoop's chunked driver, tests/model/test_gpu.py,
    tests/model/test_gpu_ports.py), and the co-simulation drives it against the RTL, so
    that the GPU's next requests depend on the RTL's own responses (docs/cosim.md).

    Parameters
    ----------
    cfg, program, gpu, record
        As :class:`ClosedLoop`.
    start : int
        The tick of the first kernel launch.
    """

    def __init__(self, cfg: HbfConfig, program, gpu: GpuConfig | None = None,
                 record: bool = False, start: int = 0):
        super().__init__(cfg, program, gpu, record)
        self.start_tick = start
        self.t = start - 1                 # the last tick handled
        self.kernel_iter = iter(self.program)
        self.next_kernel = next(self.kernel_iter, None)
        if self.next_kernel is None:
            self.closed = True
        else:
            heapq.heappush(self.heap, (start, self.seq, _LAUNCH, None))
            self.seq += 1

    @property
    def exhausted(self) -> bool:
        """No request will be granted again: the controller's input may close (G6, W2)."""
        return self.closed

    @property
    def finished(self) -> bool:
        """Every kernel has ended (its last request completed)."""
        k = self.cur
        return (self.closed and not self.heap and self.next_kernel is None
                and (k is None or k.live == 0))

    def next_tick(self) -> int | None:
        """The next tick :meth:`grants` must handle, or None while the port waits only for
        responses (or has finished): the next tick while a partition FIFO holds a request
        (every tick with one grants at least one, G5 / G5'), else the earliest pending
        launch or release."""
        if self.queued:
            return self.t + 1
        return self.heap[0][0] if self.heap else None

    def grants(self, t: int) -> list[tuple[int, GpuRequest]]:
        """Handle GPU tick ``t``; return the requests the port arbiter grants in it.

        Returns
        -------
        list of (int, GpuRequest)
            ``(port, request)``: in the channel shape at most one per system port
            ``stack * channels + channel``, in ascending port order (G5'); otherwise at
            most one, on port 0 (G5).

        Raises
        ------
        GpuError
            ``t`` is not after the last tick handled, or a tick that needed handling was
            skipped (a caller bug: the timing would be wrong).
        """
        nxt = self.next_tick()
        if t <= self.t or (nxt is not None and nxt < t):
            raise GpuError(f"internal: GPU port stepped to tick {t} after tick {self.t} "
                           f"with tick {nxt} pending")
        self.t = t
        heap = self.heap
        while heap and heap[0][0] <= t:
            _, _, kind, p = heapq.heappop(heap)
            if kind == _LAUNCH:
                self._launch(t)
            else:
                self._issue(p, kind, t)
        out = []
        if self.queued and self.channel_shape:
            out = self._grant_ports(t)
        elif self.queued:
            # G5: one grant per tick, round-robin over the partitions (as ClosedLoop.run)
            parts = self.parts
            n = self.nparts
            i = self.rr
            while not parts[i]:
                i = i + 1 if i + 1 < n else 0
            r = parts[i].popleft()
            self.queued -= 1
            self.rr = i + 1 if i + 1 < n else 0
            r.arrival = self.last_grant = t
            w = t - r.created
            self.pw_sum += w
            if w > self.pw_max:
                self.pw_max = w
            out = [(0, r)]
        if not self.closed and self._inputs_exhausted():
            self.closed = True
        return out

    def tick(self, t: int) -> GpuRequest | None:
        """:meth:`grants` for one request port per stack (G5): the one request granted in
        tick ``t``, if any.

        Raises
        ------
        GpuError
            In the channel shape (several grants per tick: use :meth:`grants`), or as
            :meth:`grants`.
        """
        if self.channel_shape:
            raise GpuError("host_ports must be stack for GpuPort.tick (one grant per tick), "
                           "not 'channel': use GpuPort.grants")
        g = self.grants(t)
        return g[0][1] if g else None

    def respond(self, req: GpuRequest, t: int) -> None:
        """The controller answered ``req`` in tick ``t`` (its ``t_accept`` and flags set)."""
        if t < self.t:
            raise GpuError(f"internal: a response of tick {t} reported after GPU tick "
                           f"{self.t} was handled")
        self._on_response(req, t)

    def result(self) -> GpuResult:
        """The run's :class:`GpuResult` (``system`` is None unless the caller set it)."""
        return self._result(self.start_tick)


def run_stepped(cfg: HbfConfig, program, gpu: GpuConfig | None = None, keep: bool = False,
                record: bool = False, trace=None, resp_ready=None) -> GpuResult:
    """Run ``program`` through a :class:`GpuPort` against a fresh :class:`HbfSystem`, one
    tick at a time (no horizon, no lookahead): the reference :class:`ClosedLoop` must equal.

    ``resp_ready`` is the consumer's ``resp.ready`` per tick (``HbfSystem.resp_ready``).
    """
    port = GpuPort(cfg, program, gpu, record)
    system = port.system = HbfSystem(cfg, on_response=port.respond, keep=keep, trace=trace)
    system.resp_ready = resp_ready
    t = port.start_tick
    while True:
        for k, r in port.grants(t):
            system.submit(r, k if port.channel_shape else None)
        system.t = t
        if port.exhausted:
            system.close_input()
            system.run()
            break
        system.run(until=t)
        if port.next_tick() is None and system.n_done == system.submitted:
            raise GpuError(port._describe(t))
        t += 1
    return port.result()
