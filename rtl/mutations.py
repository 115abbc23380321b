"""Deliberately broken variants of the controller RTL, to show that the checks catch bugs.

Issue 12 item 5: a block built with ``mutations={"name", ...}`` elaborates with those faults
injected; the default (no mutation) elaborates exactly the correct design. Each kind names
the block it breaks and the check expected to catch it (``tests/rtl/test_rtl_mutations.py``
shows that it does): ``formal`` (a bounded proof of the block, :mod:`hbfsim.rtl.formal`) or
``cosim`` (the RTL against the golden model).
"""

from __future__ import annotations

__all__ = ["MUTATIONS", "Mutation", "check_mutations"]

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """One kind of injected fault.

    Members
    -------
    name : str
    block : str
        The block (file in ``rtl/``) it changes.
    kind : str
        The class of bug: off-by-one, wrong priority, dropped waiter, stale credit, ...
    what : str
        What the broken RTL does.
    caught_by : str
        ``formal`` or ``cosim``: where the test expects it to be caught.
    check : str
        What catches it: (part of) the failing property's message, or ``scoreboard`` (the
        co-simulation's comparison with the golden model).
    depth : int
        For ``formal``: the BMC depth that catches it, when deeper than the block's CI
        depth (0: the CI depth); such a kind is checked only in the full formal run
        (``HBFSIM_FORMAL_FULL=1``), for its minutes.
    """

    name: str
    block: str
    kind: str
    what: str
    caught_by: str
    check: str
    depth: int = 0


MUTATIONS = {mu.name: mu for mu in (
    Mutation("queue-busy-ignored", "channel_queue", "missing condition",
             "a queued operation is a candidate even when its subarray is busy", "formal",
             "command issued to a busy subarray"),
    Mutation("queue-full-off-by-one", "channel_queue", "off-by-one",
             "enq.ready while count <= queue_depth (one operation too many)", "formal",
             "queue count exceeds queue_depth"),
    Mutation("queue-active-off-by-one", "channel_queue", "off-by-one",
             "room while active <= active_per_channel (one command too many)", "formal",
             "active count exceeds active_per_channel"),
    Mutation("queue-program-first", "channel_queue", "wrong priority",
             "read-priority issues the oldest PROGRAM before any READ", "formal",
             "a PROGRAM issued while a READ was a candidate"),
    Mutation("scheduler-wb-first", "scheduler", "wrong priority",
             "the enqueue arbiter takes the write buffer's offer before the MSHR's", "formal",
             "the write buffer's offer taken over the MSHR's"),
    # the registered MSHR answers from tc + 2 through C1 / C2 / cursor (DP6, DP7); the
    # proof's lemmas (rtl/mshr.py) see both faults before a response shows them: a dropped
    # link breaks the waiter list's shape in the cycle after the merge (5 steps; the
    # duplicated response at 11), a merge into an entry C2 has read is W's (10 steps; the
    # lost waiter at 11)
    Mutation("mshr-dropped-waiter", "mshr", "dropped waiter",
             "a merge does not link the new waiter behind the old tail", "formal",
             "its successor is not the next waiter of its list", 5),
    Mutation("mshr-merge-return", "mshr", "wrong state set",
             "an entry in RETURN still accepts merges (a waiter joins a drained entry)",
             "formal", "W's merge names an MSHR entry no response stage has read", 10),
    Mutation("wb-coverage-overwrite", "write_buffer", "lost update",
             "a merge replaces the coverage bitmap instead of OR-ing into it", "formal",
             "coverage shrank while OPEN"),
    # registered flush decisions and offers (DP3, DP5): the PROGRAM lies 10 steps deep
    Mutation("wb-strict-partial", "write_buffer", "missing condition",
             "under the strict policy an incomplete FLUSH entry is programmed (no error "
             "response)", "formal", "PROGRAM of an incomplete page under the strict policy",
             10),
    Mutation("wb-w4-ignored", "write_buffer", "missing condition",
             "a FLUSH entry programs although an older entry of its page is in use (W4)",
             "formal", "eligible while an older entry of its page is in use", 10),
    Mutation("admission-slot-reuse", "admission", "lost update",
             "taking a slot does not mark it used, so the next request gets it again",
             "formal", "the registered admission count differs from the used slots"),
    Mutation("credit-off-by-one", "link_credit", "off-by-one",
             "a launch charges the link credit one byte less than the response's size",
             "formal", "the credit's next state differs from min(γ, x - cost + γ)"),
    Mutation("credit-stale", "response", "stale credit",
             "K's launch test reads last cycle's positive credit, before the last charge",
             "formal", "a response launched without positive link credit"),
    Mutation("response-wb-first", "response", "wrong priority",
             "R takes the write buffer's offer before the MSHR's", "cosim", "scoreboard"),
)}


def check_mutations(mutations) -> frozenset:
    """Return ``mutations`` as a frozenset of known names.

    Raises
    ------
    ValueError
        Naming the first unknown mutation.
    """
    names = frozenset(mutations or ())
    for name in sorted(names):
        if name not in MUTATIONS:
            raise ValueError(f"unknown mutation {name!r}; known: {', '.join(MUTATIONS)}")
    return names
