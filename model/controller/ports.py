"""The per-port state of a stack controller: the request side ``Q`` and ``M`` and the
response side ``C1``, ``C2`` and the drain cursor per table, ``R``, ``K`` and ``E``
(docs/timing-contract.md §4a, §4.1, §8 DP7, §14).

A stack has ``P`` ports: 1 in the stack shape, one per channel in the channel shape (§1).
Port ``p``'s request side holds what entered ``req[p]``; its response side serves every
entry in the stack shape and the entries of channel ``p`` in the channel shape.
"""

from __future__ import annotations

from collections import deque

from hbfsim.model.controller.request import Request

__all__ = ["EGRESS_DEPTH", "INGRESS_DEPTH", "MSHR_T", "WB_T", "Port"]

#: Entries of a port's ingress queue Q (§4.1) and of its egress queue E (§8).
INGRESS_DEPTH = 2
EGRESS_DEPTH = 2
#: The two tables of DP7, in R's priority order (§8: MSHR entries before write-buffer ones).
MSHR_T, WB_T = 0, 1


class Port:
    """One request port and its response port (§14).

    Members
    -------
    qin : deque of (Request, int)
        Q: accepted requests with their accept cycle.
    m : Request or None
        The dispatch register M.
    ret : (list, list)
        Heaps of the indices of the MSHR and write-buffer entries in RETURN that this port
        serves and that its ``C1`` has not taken yet.
    c1, c2, cursor : list
        DP7's registers per table (``[MSHR, write buffer]``): an entry, or for the cursor
        ``(entry, next waiter index)``, or None.
    r_hold, k_hold : (entry, int) or None
        The waiter in R and in K.
    egress : deque of Request
        E: launched responses in launch order.
    hs_t, blocked : int
        The cycle of the last handshake (E's start-of-cycle count) and the start of a credit
        stall (-1: none).
    """

    __slots__ = ("qin", "m", "ret", "c1", "c2", "cursor", "r_hold", "k_hold", "egress",
                 "hs_t", "blocked")

    def __init__(self):
        self.qin: deque[tuple[Request, int]] = deque()
        self.m: Request | None = None
        self.ret: tuple[list[int], list[int]] = ([], [])
        self.c1 = [None, None]
        self.c2 = [None, None]
        self.cursor = [None, None]
        self.r_hold = None
        self.k_hold = None
        self.egress: deque[Request] = deque()
        self.hs_t = -1
        self.blocked = -1

    def idle(self) -> bool:
        """Whether the choice registers hold nothing and no entry waits for ``C1`` (R and K
        are tested by the caller)."""
        c1, c2, cur, ret = self.c1, self.c2, self.cursor, self.ret
        return (c1[0] is None and c1[1] is None and c2[0] is None and c2[1] is None
                and cur[0] is None and cur[1] is None and not ret[0] and not ret[1])
