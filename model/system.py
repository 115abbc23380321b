"""The logical HBF system: stack routing, one request port, fair return arbitration, and the
choice of run loop (docs/history.md §2; source §4.5).

Request sources plug in through :meth:`HbfSystem.submit` and :meth:`HbfSystem.close_input`;
completions leave through the ``on_response(req, tick)`` callback, so an open-loop CSV driver
and the closed-loop GPU model use the same controller unchanged (source §3.1).

The run loop lives beside it: :func:`hbfsim.model.loop.run_cycles` steps the stack
controllers' phases in docs/timing-contract.md §16's order.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request, StackController
from hbfsim.model.loop import run_cycles
from hbfsim.model.mapping import Mapper

__all__ = ["DeadlockError", "HbfSystem"]


class DeadlockError(RuntimeError):
    """The controller holds work that no future event can release (a model bug)."""


class HbfSystem:
    """One logical HBF system of ``cfg.stacks`` stack controllers.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration.
    on_response : callable, optional
        ``f(req, tick)`` called for every response, in response order.
    trace : TraceWriter, optional
        hbf-trace-v1 writer; rows are written when a request completes.
    keep : bool
        Keep completed requests in :attr:`completed` (default True).
    """

    def __init__(self, cfg: HbfConfig, on_response=None, trace=None, keep: bool = True):
        self.cfg = cfg
        self.mapper = Mapper(cfg)
        self.stats = Counter()
        # the channel shape: S * C system ports k = stack * C + channel (§2)
        self.ports = cfg.host_ports == "channel"
        # the one timing contract, the registered pipeline (docs/timing-contract.md), in
        # both shapes and every mode
        self.stacks = [StackController(cfg, s, self.mapper, self.stats)
                       for s in range(cfg.stacks)]
        for s in self.stacks:
            s.on_response = self._responded
        self.ingress: deque[Request] = deque()
        self.route: deque[Request] = deque()    # S >= 2: the route stage (§2)
        # the channel shape's per-port ingress (the requests presented on req[k], in order)
        self.port_in: list[deque[Request]] = \
            [deque() for _ in range(cfg.stacks * cfg.channels)] if self.ports else []
        self._span = cfg.capacity_bytes
        self._map_key = None
        self._map_val = None
        self.t = 0
        self.rr = 0
        self.inputs_done = False
        self.drain_at: int | None = None
        self.last_arrival = 0
        self.user_cb = on_response
        self.trace = trace
        self.keep = keep
        self.completed: list[Request] = []
        self.submitted = 0
        self.n_done = 0
        # latencies in ticks, 8 bytes each (a 100 M-request run must fit in memory)
        self.lat = {"R": array("q"), "W": array("q")}
        self.lat_first = array("q")      # reads that allocated their MSHR entry
        self.first_arrival: int | None = None
        self.last_completion = 0
        self.requested = {"R": 0, "W": 0}
        self.n_req = {"R": 0, "W": 0}
        self.errors = 0
        self.steps = 0          # cycles actually evaluated (the rest were skipped, C3)
        # after run(until) stopped in a skip: the next tick that can change
        # state (the ticks from t to it are no-ops, C3); None when t is that tick
        self.t_resume: int | None = None
        self.resp_ready = None  # f(tick) -> bool: the consumer's resp.ready (default: high)

    # ------------------------------------------------------------------ request side
    def submit(self, req: Request, port: int | None = None) -> None:
        """Queue a request for ingress (arrival order; arrivals may not go backwards).

        In the channel shape (``host_ports = "channel"``) the request is presented on
        system port ``stack * C + channel`` of its mapping (§1, §2); a
        ``port`` given is checked against it. Elsewhere there is one port and ``port`` must
        be None or 0.

        Raises
        ------
        AddressError
            The address or size is outside the HBF range or crosses a page.
        ValueError
            The arrival tick is earlier than the previous request's, or ``port`` is not the
            port the request's page maps to.
        """
        op = req.op
        if op != "R" and op != "W":
            raise ValueError(f"op must be R or W, not {op!r}")
        base = self.cfg.base_address
        rel = req.addr - base
        page, off = divmod(rel, PAGE_BYTES)
        if not (0 <= rel < self._span and 1 <= req.nbytes <= PAGE_BYTES - off):
            self.mapper.check(req.addr, req.nbytes)  # raises with the precise reason
        if req.arrival < self.last_arrival:
            raise ValueError(f"request {req.id}: arrival tick {req.arrival} is earlier than "
                             f"the previous request's {self.last_arrival}")
        if self.inputs_done:
            raise ValueError("submit() after close_input()")
        if op == "W" and req.data is not None and len(req.data) != req.nbytes:
            raise ValueError(f"request {req.id}: {len(req.data)} data bytes for a "
                             f"{req.nbytes}-byte write")
        req.off = off
        # Consecutive requests usually share a page (sectors of one line, lines of one
        # page): remember the last page's mapping.
        key = (page, op)
        if key == self._map_key:
            req.stack, req.q, req.ch, req.local, req.sub = self._map_val
        else:
            stack, q = self.mapper.stack_of(page)
            ch, local, sub = self.mapper.channel_of(q, op == "W")
            req.stack, req.q, req.ch, req.local, req.sub = val = (stack, q, ch, local, sub)
            self._map_key, self._map_val = key, val
        if self.ports:
            k = req.stack * self.cfg.channels + req.ch
            if port is not None and port != k:
                raise ValueError(f"request {req.id}: presented on port {port}, but its page "
                                 f"maps to port {k} (stack {req.stack}, channel {req.ch})")
        elif port:
            raise ValueError(f"request {req.id}: presented on port {port} of a system with "
                             f"one request port")
        self.last_arrival = req.arrival
        if self.first_arrival is None:
            self.first_arrival = req.arrival
        self.requested[op] += req.nbytes
        self.n_req[op] += 1
        self.stacks[req.stack].ch_requests[req.ch] += 1
        self.submitted += 1
        if self.ports:
            self.port_in[k].append(req)
        else:
            self.ingress.append(req)

    def close_input(self) -> None:
        """No more requests will come: assert ``drain`` after the last accept (§1, W2)."""
        self.inputs_done = True

    # ------------------------------------------------------------------ response side
    def _responded(self, req: Request, t: int) -> None:
        self.n_done += 1
        lat = t - req.arrival
        self.lat[req.op].append(lat)
        if req.op == "R" and not req.mshr_hit:
            self.lat_first.append(lat)
        if t > self.last_completion:
            self.last_completion = t
        if req.error:
            self.errors += 1
        if self.trace is not None:
            self.trace.request(req, self.cfg)
        if self.keep:
            self.completed.append(req)
        if self.user_cb is not None:
            self.user_cb(req, t)

    # ------------------------------------------------------------------ the run loop
    def run(self, until: int | None = None) -> int:
        """Advance until every submitted request has completed (or ``until``).

        Returns the tick the simulation stopped at: the reference loop
        :func:`~hbfsim.model.loop.run_cycles`, which steps the controllers' phases cycle by
        cycle and skips the cycles in which nothing can change (C3).
        """
        return run_cycles(self, until)

    def _next_tick(self, t: int) -> int | None:
        """After a cycle that changed nothing: the next tick at which something can (C3).

        Returns None when nothing is left to do; raises :class:`DeadlockError` when work is
        left that no event can release."""
        nxt = None
        for s in self.stacks:
            n = s.next_timer(t)
            if n is not None and (nxt is None or n < nxt):
                nxt = n
        ingress = self.ingress
        if ingress and ingress[0].arrival > t and (nxt is None or ingress[0].arrival < nxt):
            nxt = ingress[0].arrival
        C = self.cfg.channels
        for k, q in enumerate(self.port_in):
            if not q:
                continue
            # a head that has arrived waits for its port's admission term (§4.1)
            a = q[0].arrival if q[0].arrival > t else self.stacks[k // C].rank_tick(t, k % C)
            if a is not None and (nxt is None or a < nxt):
                nxt = a
        if self.drain_at is not None and self.drain_at > t and (nxt is None
                                                                or self.drain_at < nxt):
            nxt = self.drain_at
        if nxt is None and (ingress or self.n_done < self.submitted
                            or any(self.port_in)):
            raise DeadlockError(self._describe(t))
        return nxt

    def _describe(self, t: int) -> str:
        parts = [f"deadlock at tick {t}: {self.submitted - self.n_done} requests open"]
        for s in self.stacks:
            ms = [port.m for port in s.ports]
            parts.append(f"stack {s.stack}: M={ms!r} inflight={s.inflight} "
                         f"wb_used={s.wb_used} mshr_free={sum(map(len, s.mshr_free))}")
        return "; ".join(parts)

    # ------------------------------------------------------------------ convenience
    def run_requests(self, requests) -> int:
        """Open-loop: submit every request, close the input, run to completion."""
        for r in requests:
            self.submit(r)
        self.close_input()
        return self.run()

