"""The system layer and run loop under timing contract 2 (docs/timing-contract.md §2, §16;
implementation plan §18 steps 1 and 5).

Stack shape: the route stage in front of several stacks and the round robin over their egress
queues. Channel shape: ``S * C`` request and response ports, ``k = stack * C + channel``,
wired straight to the stacks' ports (no routing, no arbitration, no cycle).

:meth:`hbfsim.model.system.HbfSystem.run` calls :func:`run_pipelined` when ``cfg.contract ==
2`` and ``engine = "reference"`` or ``multiplane`` is not ``off``. It is a reference loop:
every phase of every evaluated cycle runs through the stack controllers' methods, and a
cycle in which no phase changed state is followed by the next tick at which one can (C3),
as in contract 1's ``loop_reference.run_reference``. The fused version,
:func:`hbfsim.model.loop_fused_v2.run_fused_v2` (``run()``'s default for ``multiplane =
"off"``), must equal it event for event (tests/model/test_engines_v2.py).
"""

from __future__ import annotations

from hbfsim.model.controller_v2 import INGRESS_DEPTH

__all__ = ["ROUTE_DEPTH", "run_pipelined"]

#: Entries of the system's ingress queue in front of the route stage (v2 §2, ``S >= 2``).
ROUTE_DEPTH = 2


def run_pipelined(system, until: int | None) -> int:
    """Advance ``system`` (an :class:`~hbfsim.model.system.HbfSystem` of
    :class:`~hbfsim.model.controller_v2.PipelinedStackController`) until every submitted
    request has completed (or through tick ``until``); return the tick it stopped at."""
    stacks = system.stacks
    t = system.t
    system.t_resume = None
    while True:
        if until is not None and t > until:
            break
        system.steps += 1
        # (a) E handshakes, one per system response port (v2 §2, §8)
        busy = _egress(system, t)
        # the drain input of this cycle (v2 §1): raised at the end of an earlier cycle
        drain = system.drain_at is not None and t >= system.drain_at
        for s in stacks:
            # (b) K launches then R choices; (c) completions free their subarrays for
            # (d) the issue decisions of this cycle (v2 §7; drain ends a multi-plane gather
            # window, docs/timing-contract.md §7a MP4); (e) enqueue (v1 §6)
            s.drain_in = drain
            busy |= s.respond_stages(t)
            busy |= s.release_media(t)
            busy |= s.issue(t)
            busy |= s.enqueue(t)
        # (f) dispatch from M (v1 §4.2 rules, from the start-of-cycle state)
        for s in stacks:
            busy |= s.dispatch(t, drain)
        # (g) accepts from start-of-cycle occupancy, then queue heads into M (v2 §4.1)
        busy |= _ingress(system, t)
        for s in stacks:
            busy |= s.advance(t)
        # drain from the cycle after the last request left M with every ingress queue
        # empty and nothing left to present (v2 §1)
        if system.inputs_done and system.drain_at is None and not system.ingress \
                and not system.route and not any(system.port_in) \
                and not any(s.holds_requests() for s in stacks):
            system.drain_at = t + 1
        # (h) write-buffer triggers, (i) completions into RETURN, (j) end of cycle
        for s in stacks:
            busy |= s.wb_triggers(t, drain)
            busy |= s.complete_entries(t)
            s.end_cycle()
        if busy:
            t += 1
            continue
        nxt = system._next_tick(t)
        if nxt is None:
            break
        if until is not None and nxt > until:
            # the cycles until + 1 .. nxt - 1 are no-ops (C3): the closed-loop driver
            # resumes at nxt unless a GPU event comes first (docs/gpu.md §2)
            t = until + 1
            system.t_resume = nxt
            break
        t = nxt
    system.t = t
    return t


def _ingress(system, t: int) -> bool:
    """The request side of the system in cycle ``t`` (v2 §2, §4.1).

    One stack: the system port is the stack's port (a wire). Several stacks: the system's
    2-entry ingress queue; its head, accepted in ``ts``, is presented to its stack from
    ``ts + 1`` (the route stage) and waits there in order until that stack accepts it."""
    if system.ports:
        return _ingress_ports(system, t)
    ingress = system.ingress
    stacks = system.stacks
    if len(stacks) == 1:
        if ingress and ingress[0].arrival <= t and stacks[0].ready():
            req = ingress.popleft()
            req.t_accept = t
            stacks[0].accept(req, t)
            return True
        return False
    route = system.route
    changed = False
    ready = len(route) < ROUTE_DEPTH        # occupancy at the start of the cycle
    if route:
        s = stacks[route[0].stack]
        if s.ready():
            s.accept(route.popleft(), t)
            changed = True
    if ready and ingress and ingress[0].arrival <= t:
        req = ingress.popleft()
        req.t_accept = t
        route.append(req)
        changed = True
    return changed


def _egress(system, t: int) -> bool:
    """The response side of the system in cycle ``t``: the head of an egress queue E
    handshakes while ``resp.ready`` is high; with several stacks, the round robin of v1 §2
    over the stacks whose E is not empty (zero cycles: it selects among registers)."""
    if system.ports:
        return _egress_ports(system, t)
    stacks = system.stacks
    n = len(stacks)
    if n == 1:
        if not stacks[0].egress:
            return False
        if system.resp_ready is not None and not system.resp_ready(t):
            return True     # held by the consumer: look again in the next cycle
        stacks[0].handshake(t)
        return True
    if not any(s.egress for s in stacks):
        return False
    if system.resp_ready is not None and not system.resp_ready(t):
        return True
    for k in range(n):
        i = (system.rr + k) % n
        if stacks[i].egress:
            stacks[i].handshake(t)
            system.rr = (i + 1) % n
            return True
    return False


def _ingress_ports(system, t: int) -> bool:
    """The channel shape's request side in cycle ``t``: system port ``k = stack * C + p`` is
    port ``p`` of its stack (v2 §2); each accepts its head if it has arrived and the port's
    ``ready``, taken from start-of-cycle state for all ports of the stack, is high (§4.1)."""
    C = system.cfg.channels
    port_in = system.port_in
    changed = False
    for s in system.stacks:
        base = s.stack * C
        free = None
        for p in range(C):
            q = port_in[base + p]
            if not q or q[0].arrival > t:
                continue
            if free is None:
                # s.ready_ports(t) for this port: its Q's occupancy is the start-of-cycle
                # one (only its own accept, after this test, changes it); the free slots
                # are taken before the first accept of the cycle
                free = s.admission - s.inflight
                inp = s.inp
            if len(inp[p].qin) < INGRESS_DEPTH and s.room(p, t, free):
                req = q.popleft()
                req.t_accept = t
                s.accept(req, t, p)
                changed = True
    return changed


def _egress_ports(system, t: int) -> bool:
    """The channel shape's response side in cycle ``t``: every port whose E holds a response
    handshakes it while ``resp.ready`` is high (one response per port per cycle, v2 §12)."""
    changed = False
    held = None
    for s in system.stacks:
        for p in s.egress_heads():
            if held is None:
                held = system.resp_ready is not None and not system.resp_ready(t)
            if not held:
                s.handshake(t, p)
            changed = True      # a held response is looked at again in the next cycle
    return changed
