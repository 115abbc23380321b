"""The contract-1 reference run loop: every phase of every evaluated cycle through the stack
controllers' methods, in the order (a)-(g) of docs/history.md §2, and a cycle that
changed nothing followed by the next tick at which something can (C3).

:meth:`hbfsim.model.system.HbfSystem.run` calls :func:`run_reference` for several stacks, for
``engine = "reference"`` and when a consumer drives ``resp.ready``; the fused loop
(:mod:`hbfsim.model.loop_fused`) must match it event for event.
"""

from __future__ import annotations

__all__ = ["run_reference"]


def run_reference(system, until: int | None) -> int:
    """Advance ``system`` phase by phase through tick ``until`` (or to completion); return
    the tick it stopped at (docs/history.md §2, §8; C3 cycle skipping)."""
    stacks = system.stacks
    single = stacks[0] if len(stacks) == 1 else None
    ingress = system.ingress
    t = system.t
    while True:
        if until is not None and t > until:
            break
        system.steps += 1
        busy = False
        # (a) responses: one per stack candidate, one per system (§2, §8)
        if single is not None and system.resp_ready is None:
            if (single.cur is not None or single.ret_r or single.ret_w) \
                    and single.respond_one(t):
                busy = True
        else:
            busy |= system._return_arbiter(t)
        # (b)(c) issue, enqueue
        for s in stacks:
            if s.issue(t):
                busy = True
            if s.enqueue(t):
                busy = True
        drain = system.drain_at is not None and t >= system.drain_at
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
        if system.inputs_done and system.drain_at is None and not ingress \
                and all(s.m is None for s in stacks):
            system.drain_at = t + 1
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
        nxt = system._next_tick(t)
        if nxt is None:
            break
        if until is not None and nxt > until:
            t = until + 1
            break
        t = nxt
    system.t = t
    return t

