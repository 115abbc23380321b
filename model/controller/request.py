"""A request, a table entry and their states (docs/timing-contract.md §1 payloads, §4b
states, §4.3 MSHR entries, §4.4 write-buffer entries, §5 flush causes; C2)."""

from __future__ import annotations

from hbfsim.config import PAGE_BYTES

__all__ = ["CAUSES", "FLUSH", "FREE", "FULL_MASK", "ISSUED", "OPEN", "QUEUED", "RETURN",
           "W_DELAY", "WAIT", "Entry", "Request"]

#: Entry states: MSHR entries FREE -> WAIT -> QUEUED -> ISSUED -> RETURN (§4.3), write-buffer
#: entries FREE -> OPEN -> FLUSH -> QUEUED -> ISSUED (PROGRAM) -> RETURN (§4.4).
FREE, WAIT, QUEUED, ISSUED, RETURN, OPEN, FLUSH = range(7)
#: A write-buffer entry's coverage when every byte of its page is written (one bit a byte).
FULL_MASK = (1 << PAGE_BYTES) - 1
#: Flush causes in §4.4's priority order (§5).
CAUSES = ("full", "raw", "pressure", "deadline", "drain")
#: Cycles from M's decision in ``tm`` to the cycle every rule but M sees it (DP1: W writes
#: the entry at the end of ``tm + 1``).
W_DELAY = 2


class Request:
    """One GPU sector/line request and what happened to it (C2).

    Members
    -------
    id, op, addr, nbytes, source, arrival : int, str, int, int, int, int
        As given by the request source; ``op`` is ``"R"`` or ``"W"``.
    data : bytes or None
        Write data (``nbytes`` long); for reads, filled at the response.
    stack, q, ch, sub, local, off : int
        The mapping (§2, §3), set by the system at submission: stack, stack-local page,
        channel, subarray, channel-local page and the offset in the page.
    t_accept, t_map, t_done : int
        Accept, last dispatch attempt from M, and response handshake cycles; -1 until then.
    mshr_hit, buffer_hit, cache_hit, error : bool
        Response flags (§1).
    entry_info : tuple or None
        ``(tq, ti, tc, depth)`` of the entry that answered it.
    depth : int
        Requests in flight at its accept (then its channel queue's occupancy, kept by the
        entry).
    """

    __slots__ = ("id", "op", "addr", "nbytes", "source", "arrival", "data", "stack", "q",
                 "ch", "sub", "local", "off", "t_accept", "t_map", "t_done", "mshr_hit",
                 "buffer_hit", "cache_hit", "error", "entry_info", "depth", "tag")

    def __init__(self, id, op, addr, nbytes, source=0, arrival=0, data=None):
        self.id = id
        self.op = op
        self.addr = addr
        self.nbytes = nbytes
        self.source = source
        self.arrival = arrival
        self.data = data
        self.t_accept = self.t_done = -1
        self.mshr_hit = self.buffer_hit = self.cache_hit = self.error = False
        self.entry_info = None
        self.depth = 0
        self.tag = None

    def __repr__(self):
        return (f"Request(id={self.id}, op={self.op!r}, addr={self.addr:#x}, "
                f"nbytes={self.nbytes}, arrival={self.arrival}, done={self.t_done})")


class Entry:
    """One MSHR entry (``kind`` 0) or write-buffer entry (``kind`` 1).

    Members
    -------
    idx, state : int
        Index in its table and state (FREE ... RETURN).
    q, ch, sub, local : int
        Page, channel, subarray and channel-local page.
    waiters : list of Request
        The waiter list in arrival order.
    bytes, cov, data : int, int, bytearray
        MSHR: bytes requested (DP2a). Write buffer: coverage bit mask and page data.
    alloc, ready_at, deadline, full_at : int
        Allocation cycle (M's decision), DP2/DP2a's first ready cycle, the write deadline,
        and the cycle a merge that completed the coverage is seen (DP5 ``full``).
    cause, pressure : str or None, bool
        The decided flush cause (pending from its decision) and whether the entry is the
        pressure victim.
    w_merge, te : int
        Write buffer: the cycle of its last merge (in W during ``w_merge + 1``) and its
        first eligible cycle (-1: not yet; DP3, DP5).
    tq, ti, tc, flags, snap, cache, depth : int, int, int, int, bytes, bool, int
        Enqueue, command and completion cycles, the completion's flags, the page data read
        (MSHR), whether the page cache served it, and the queue occupancy at its enqueue.
    """

    __slots__ = ("kind", "idx", "state", "q", "ch", "sub", "local", "waiters", "bytes",
                 "alloc", "ready_at", "deadline", "cov", "data", "cause", "tq", "ti", "tc",
                 "flags", "snap", "full_at", "depth", "pressure", "cache", "w_merge", "te")

    def __init__(self, kind, idx):
        self.kind = kind
        self.idx = idx
        self.state = FREE
