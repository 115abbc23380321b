"""The logical HBF system: stack routing, one request port, fair return arbitration, and the
event-skipping run loop (docs/timing-contract.md §2; source §4.5).

Request sources plug in through :meth:`HbfSystem.submit` and :meth:`HbfSystem.close_input`;
completions leave through the ``on_response(req, tick)`` callback, so an open-loop CSV driver
and the closed-loop GPU model use the same controller unchanged (source §3.1).
"""

from __future__ import annotations

from collections import Counter, deque

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request, StackController
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
        self.stacks = [StackController(cfg, s, self.mapper, self.stats)
                       for s in range(cfg.stacks)]
        for s in self.stacks:
            s.on_response = self._responded
        self.ingress: deque[Request] = deque()
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
        self.lat = {"R": [], "W": []}
        self.first_arrival: int | None = None
        self.last_completion = 0
        self.requested = {"R": 0, "W": 0}
        self.n_req = {"R": 0, "W": 0}
        self.errors = 0
        self.steps = 0          # cycles actually evaluated (the rest were skipped, C3)

    # ------------------------------------------------------------------ request side
    def submit(self, req: Request) -> None:
        """Queue a request for ingress (arrival order; arrivals may not go backwards).

        Raises
        ------
        AddressError
            The address or size is outside the HBF range or crosses a page.
        ValueError
            The arrival tick is earlier than the previous request's.
        """
        if req.op not in ("R", "W"):
            raise ValueError(f"op must be R or W, not {req.op!r}")
        self.mapper.check(req.addr, req.nbytes)
        if req.arrival < self.last_arrival:
            raise ValueError(f"request {req.id}: arrival tick {req.arrival} is earlier than "
                             f"the previous request's {self.last_arrival}")
        if self.inputs_done:
            raise ValueError("submit() after close_input()")
        if req.op == "W" and req.data is not None and len(req.data) != req.nbytes:
            raise ValueError(f"request {req.id}: {len(req.data)} data bytes for a "
                             f"{req.nbytes}-byte write")
        self.last_arrival = req.arrival
        page = (req.addr - self.cfg.base_address) // PAGE_BYTES
        req.off = (req.addr - self.cfg.base_address) % PAGE_BYTES
        req.stack, req.q = self.mapper.stack_of(page)
        req.ch, req.local, req.sub = self.mapper.channel_of(req.q, req.op == "W")
        if self.first_arrival is None:
            self.first_arrival = req.arrival
        self.requested[req.op] += req.nbytes
        self.n_req[req.op] += 1
        self.stacks[req.stack].ch_requests[req.ch] += 1
        self.submitted += 1
        self.ingress.append(req)

    def close_input(self) -> None:
        """No more requests will come: assert ``drain`` after the last accept (§1, W2)."""
        self.inputs_done = True

    # ------------------------------------------------------------------ response side
    def _responded(self, req: Request, t: int) -> None:
        self.n_done += 1
        lat = t - req.arrival
        self.lat[req.op].append(lat)
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

        Returns the tick the simulation stopped at.
        """
        stacks = self.stacks
        single = stacks[0] if len(stacks) == 1 else None
        ingress = self.ingress
        t = self.t
        while True:
            if until is not None and t > until:
                break
            self.steps += 1
            busy = False
            # (a) responses: one per stack candidate, one per system (§2, §8)
            if single is not None:
                if (single.cur is not None or single.ret_r or single.ret_w) \
                        and single.respond_one(t):
                    busy = True
            else:
                busy |= self._return_arbiter(t)
            # (b)(c) issue, enqueue
            for s in stacks:
                if s.issue(t):
                    busy = True
                if s.enqueue(t):
                    busy = True
            drain = self.drain_at is not None and t >= self.drain_at
            # (d) dispatch from M
            for s in stacks:
                if s.dispatch(t, drain):
                    busy = True
            # (e) ingress (§4.1)
            if ingress and ingress[0].arrival <= t:
                req = ingress[0]
                st = stacks[req.stack]
                if st.ready():
                    ingress.popleft()
                    st.accept(req, t)
                    busy = True
            # drain is asserted from the cycle after the last request left M (W2, §1)
            if self.inputs_done and self.drain_at is None and not ingress \
                    and all(s.m is None for s in stacks):
                self.drain_at = t + 1
            # (f)(g) write-buffer triggers, media completions, end of cycle
            for s in stacks:
                if s.wb_triggers(t, drain):
                    busy = True
                if s.complete(t):
                    busy = True
                s.end_cycle()
            if busy:
                t += 1
                continue
            nxt = None
            for s in stacks:
                n = s.next_timer(t)
                if n is not None and (nxt is None or n < nxt):
                    nxt = n
            if ingress and ingress[0].arrival > t and (nxt is None or ingress[0].arrival < nxt):
                nxt = ingress[0].arrival
            if self.drain_at is not None and self.drain_at > t and (nxt is None
                                                                    or self.drain_at < nxt):
                nxt = self.drain_at
            if nxt is None:
                if ingress or self.n_done < self.submitted - len(ingress):
                    raise DeadlockError(self._describe(t))
                break
            t = nxt
        self.t = t
        return t

    def _return_arbiter(self, t: int) -> bool:
        n = len(self.stacks)
        cands = [s.response_candidate(t) for s in self.stacks]
        for k in range(n):
            i = (self.rr + k) % n
            if cands[i] is not None:
                self.stacks[i].respond(cands[i], t)
                self.rr = (i + 1) % n
                return True
        return False

    def _describe(self, t: int) -> str:
        parts = [f"deadlock at tick {t}: {self.submitted - self.n_done} requests open"]
        for s in self.stacks:
            parts.append(f"stack {s.stack}: M={s.m!r} inflight={s.inflight} "
                         f"wb_used={s.wb_used} mshr_free={len(s.mshr_free)}")
        return "; ".join(parts)

    # ------------------------------------------------------------------ convenience
    def run_requests(self, requests) -> int:
        """Open-loop: submit every request, close the input, run to completion."""
        for r in requests:
            self.submit(r)
        self.close_input()
        return self.run()

