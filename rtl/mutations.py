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
    """

    name: str
    block: str
    kind: str
    what: str
    caught_by: str


MUTATIONS = {mu.name: mu for mu in (
    Mutation("queue-busy-ignored", "channel_queue", "missing condition",
             "a queued operation is a candidate even when its subarray is busy", "formal"),
    Mutation("queue-full-off-by-one", "channel_queue", "off-by-one",
             "enq.ready while count <= queue_depth (one operation too many)", "formal"),
    Mutation("queue-active-off-by-one", "channel_queue", "off-by-one",
             "room while active <= active_per_channel (one command too many)", "formal"),
    Mutation("queue-program-first", "channel_queue", "wrong priority",
             "read-priority issues the oldest PROGRAM before any READ", "formal"),
    Mutation("scheduler-wb-first", "scheduler", "wrong priority",
             "the enqueue arbiter takes the write buffer's offer before the MSHR's", "formal"),
    Mutation("mshr-dropped-waiter", "mshr", "dropped waiter",
             "a merge does not link the new waiter behind the old tail", "formal"),
    Mutation("mshr-merge-return", "mshr", "wrong state set",
             "an entry in RETURN still accepts merges", "formal"),
    Mutation("wb-coverage-overwrite", "write_buffer", "lost update",
             "a merge replaces the coverage bitmap instead of OR-ing into it", "formal"),
    Mutation("wb-strict-partial", "write_buffer", "missing condition",
             "under the strict policy an incomplete FLUSH entry is still programmed", "formal"),
    Mutation("wb-w4-ignored", "write_buffer", "missing condition",
             "a FLUSH entry programs although an older entry of its page is in use (W4)",
             "formal"),
    Mutation("admission-slot-reuse", "admission", "lost update",
             "taking a slot does not mark it used, so the next request gets it again",
             "formal"),
    Mutation("credit-off-by-one", "response", "off-by-one",
             "a response goes out with one credit unit less than its cost", "formal"),
    Mutation("credit-stale", "response", "stale credit",
             "the credit check reads last cycle's credit, before the last charge", "formal"),
    Mutation("response-wb-first", "response", "wrong priority",
             "the response arbiter prefers the write buffer's offer to the MSHR's", "cosim"),
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
