"""A pool's free list (docs/timing-contract.md DP4): with one port, with several ports
ranked from the pool's pointer (§4.2.3, stack-wide pools) and as one one-port list per pool
(§4.5, a pool per channel); and the ring FIFO helpers the offer FIFOs share
(:mod:`hbfsim.rtl.entry_table`).
"""

from __future__ import annotations

__all__ = ["free_list", "free_list_heads", "free_list_pools", "port_pools", "ring_lemmas",
           "ring_next"]

from amaranth.hdl import Array, Cat, Const, Mux, Signal, Value
from amaranth.lib import memory

from hbfsim.rtl.checks import lemma, proving
from hbfsim.rtl.logic import named, tree_sum


def ring_next(ptr, n: int):
    """``ptr + 1`` modulo ``n`` (a ring pointer of a FIFO of ``n`` words)."""
    return Mux(ptr == n - 1, 0, ptr + 1)


def _wrap(v, n: int):
    """``v`` modulo ``n`` for ``0 <= v < 2n``."""
    return Mux(v >= n, v - n, v)


def ring_lemmas(m, checks, fifo, rd, wr, ram_count, n: int, index_of, member, name: str,
                ahead=()):
    """A proof's lemmas of a FIFO of entry indices in a ring of ``n`` words (docs/formal.md
    "Induction"): the write pointer is ``ram_count`` words past the read pointer, and the
    entries it holds (``ahead``: (valid, index) pairs logically before the ring's, then the
    ring's ``ram_count`` words from ``rd``) are pairwise distinct and each ``member``
    (a list of ``n`` 1-bit values: the entries the FIFO may hold)."""
    if not proving(checks):
        return
    lemma(m, checks, (ram_count <= n) & (rd < n) & (wr == _wrap(rd + ram_count, n)),
          f"{name}: the write pointer is not the read pointer plus the count")
    items = list(ahead)
    for k in range(n):
        rp = fifo.read_port(domain="comb")
        m.d.comb += rp.addr.eq(_wrap(rd + k, n))
        items.append((ram_count > k, index_of(rp.data)))
    members = Array(member)
    for k, (v, e) in enumerate(items):
        lemma(m, checks, ~v | ((e < n) & members[e]),
              f"{name}: position {k} holds an entry it may not hold")
        for v2, e2 in items[k + 1:]:
            lemma(m, checks, ~(v & v2) | (e != e2), f"{name}: an entry twice")


def free_list(m, n: int, push, push_index, name: str, checks=False, member=None):
    """A pool's free list (docs/timing-contract.md DP4): a FIFO of free entry indices.

    ``0, 1, ..., n - 1`` at reset; ``push`` appends ``push_index`` at the end of the cycle
    (the launch that frees an entry, allocatable from the next cycle); an allocation takes
    the head. The FIFO is a LUT-RAM of ``n`` words read at a registered pointer, and
    "not empty" is a flip-flop computed from the next count, so ``disp.ready`` comes from
    a register (the amendment's second difference from the what-if).

    Returns
    -------
    (any_free, index, onehot, pop, count) : the registered flag, the head entry (binary and
    one-hot), a function ``pop(allocate)`` to call once with the allocation, and the count
    register (for checks)
    """
    # A reset does not reach a RAM's words, so the FIFO at reset is not "0 .. n - 1 in a
    # memory": the entries never allocated since reset come from a counter (``fresh``, in
    # index order), and the RAM holds only the entries freed since. The logical FIFO is
    # ``fresh .. n - 1`` followed by the RAM's queue, so the head is the counter while it
    # has entries left: exactly DP4's FIFO of ``0 .. n - 1`` at every reset, not only at
    # power-on (a co-simulation runs many scenarios with a reset between them).
    ib = range(max(2, n))
    fifo = memory.Memory(shape=ib, depth=n, init=[])
    m.submodules[name] = fifo
    wp, rp = fifo.write_port(), fifo.read_port(domain="comb")
    wr = Signal(ib, name=f"{name}_wr")
    rd = Signal(ib, name=f"{name}_rd")
    fresh = Signal(ib, name=f"{name}_fresh")
    fresh_left = Signal(init=1, name=f"{name}_fresh_left")
    count = Signal(range(n + 1), init=n, name=f"{name}_count")
    nonempty = Signal(init=1, name=f"{name}_nonempty")
    m.d.comb += [wp.addr.eq(wr), wp.data.eq(push_index), wp.en.eq(push), rp.addr.eq(rd)]
    with m.If(push):
        m.d.sync += wr.eq(ring_next(wr, n))
    index = named(m, Mux(fresh_left, fresh, rp.data), f"{name}_head")
    onehot = [named(m, index == i, f"{name}_head{i}") for i in range(n)]

    def pop(allocate):
        nxt = Signal(range(n + 2), name=f"{name}_next")
        m.d.comb += nxt.eq(count + push - allocate)
        m.d.sync += [count.eq(nxt), nonempty.eq(nxt != 0)]
        with m.If(allocate):
            with m.If(fresh_left):
                m.d.sync += [fresh.eq(fresh + 1), fresh_left.eq(fresh != n - 1)]
            with m.Else():
                m.d.sync += rd.eq(ring_next(rd, n))
    if proving(checks) and member is not None:
        # the counter's entries ``fresh .. n - 1`` come first, then the ring's
        fresh_part = Mux(fresh_left, n - fresh, 0)
        lemma(m, checks, nonempty == (count != 0), f"{name}: nonempty differs from the count")
        lemma(m, checks, (count >= fresh_part) & (count <= n),
              f"{name}: the count is below the counter's entries")
        lemma(m, checks, ~fresh_left | (fresh < n), f"{name}: the counter is past the entries")
        ring_lemmas(m, checks, fifo, rd, wr, count - fresh_part, n, lambda d: d, member,
                     name, ahead=[(fresh_left & (fresh <= j), Const(j, ib)) for j in range(n)])
    return nonempty, index, onehot, pop, count


def free_list_pools(m, n: int, pushes, push_indexes, want, name: str, checks=False,
                    member=None):
    """The free lists of ``P`` pools of ``n / P`` entries, one per port
    (docs/timing-contract.md §4.5, ``pools = "channel"``): port ``p`` allocates only from
    pool ``p`` (entries ``p*k .. p*k + k - 1``), and only response port ``p`` frees them (an
    entry's channel is its pool's), so each pool is the one-port :func:`free_list` over its
    own entries: one head, no pointer, no grant ranked across ports.

    Parameters are those of :func:`free_list_heads`; ``member`` (formal lemmas) lists per
    entry whether it belongs in the free list.

    Returns
    -------
    (granted, index, onehot, pops, count) : per port whether its pool has an entry and that
    entry (stack-wide index, binary and one-hot over all ``n`` entries), per port a function
    ``pop(allocate)`` to call once, and the count over the pools (for checks)
    """
    P = len(want)
    k = n // P
    granted, indexes, onehots, pops, counts = [], [], [], [], []
    for p in range(P):
        base = p * k
        local = Signal(range(max(2, k)), name=f"{name}{p}_push_local")
        m.d.comb += local.eq(push_indexes[p] - base)
        own = None if member is None else member[base:base + k]
        nonempty, head, head_oh, pop, count = free_list(
            m, k, pushes[p], local, f"{name}{p}", checks=checks, member=own)
        index = named(m, head + base, f"{name}_head_p{p}")
        granted.append(named(m, want[p] & nonempty, f"{name}_granted_p{p}"))
        indexes.append(index)
        onehots.append([Const(0, 1)] * base + head_oh + [Const(0, 1)] * (n - base - k))
        pops.append(pop)
        counts.append(count)
    return granted, indexes, onehots, pops, tree_sum(counts)


def port_pools(m, n: int, disps, hits, launched, member, checks=False):
    """A table's allocation with a pool per channel (docs/timing-contract.md §4.5): per
    port ``want`` (its M's request valid and not a hit) and :func:`free_list_pools` over the
    ``launched`` events; the MSHR table and the write buffer build it alike."""
    want = [named(m, d.valid & ~hits[p], f"want_p{p}") for p, d in enumerate(disps)]
    return free_list_pools(m, n, [ev.valid for ev in launched], [ev.index for ev in launched],
                           want, "free_list", checks=checks, member=member)


def _rank_from_pointer(m, want, ap, name):
    """Per port ``p`` the number of wanting ports before it in the order ``ap, ap + 1, ...
    mod P`` (docs/timing-contract.md §4.2.3): a chain over the pointer's values, not an
    index (no case gaps when ``P`` is not a power of two)."""
    P = len(want)
    ranks = []
    for p in range(P):
        opts = []
        for a in range(P):
            before = [(a + k) % P for k in range((p - a) % P)]
            opts.append(tree_sum([want[q] for q in before]) if before else Const(0, 1))
        rank = Signal(range(P), name=f"{name}_rank{p}")
        pick = opts[0]
        for a in range(1, P):
            pick = Mux(ap == a, opts[a], pick)
        m.d.comb += rank.eq(pick)
        ranks.append(rank)
    return ranks


def free_list_heads(m, n: int, pushes, push_indexes, want, name: str, *,
                    registered: bool = False, checks=False, member=None):
    """A pool's free list read by several ports (docs/timing-contract.md DP4, §4.2.3).

    The ports that ``want`` an entry are ranked from the pool's allocation pointer ``ap``
    (``ap, ap + 1, ... mod P``) and the k-th of them takes the k-th entry from the head of
    the list (``0 .. n - 1`` at every reset); ports beyond the entries in the list stall.
    After a cycle with an allocation ``ap`` moves to the last allocating port (in that order)
    + 1. The entries of ``pushes`` (one per response port: the launch that frees an entry)
    join the tail at the end of the cycle in ascending port order.

    Two structures of the same list (§13, no cycle changes), chosen by ``registered``
    (:func:`registered_lookup` of the table's size):

    * read from the RAM (``registered=False``): a counter for the entries never allocated
      since reset, then a LUT-RAM of the entries freed since; the k-th head is a RAM word
      (or the counter's) read at ``rd + k - fresh_left``;
    * heads in registers (``registered=True``): the first ``H = min(P, n)`` entries are
      flip-flops, shifted by the cycle's allocations and refilled from the RAM (read at
      registered addresses) and the cycle's frees; the grant's entry is a register chosen by
      its rank, and the RAM's bookkeeping is thermometers over registers. Fewer logic levels
      behind the grant, more registers and placement (docs/rtl.md "Issue 23: the 4 x 32
      point").

    "The list holds more than k entries" (``more``, k < P) and ``safe`` are flip-flops
    computed from the next count.

    Parameters
    ----------
    n : int
        Entries of the pool.
    pushes, push_indexes : lists of ``P`` values
        Per response port: an entry is freed, and which.
    want : list of ``P`` 1-bit values
        Per request port: its M allocates from this pool in this cycle.
    name : str
        Prefix of the signals and of the memory.
    registered : bool
        The heads in registers (see above).
    checks, member
        A proof's lemmas (:func:`ring_lemmas`; the RAM form only): ``member`` lists per
        entry whether the list may hold it (a free entry).

    Returns
    -------
    (granted, index, count, ap, ranks) : per port whether it got an entry and the entry
    (binary; the head of its rank when not granted), the count register and the pointer (for
    checks), and per port its rank among the wanting ports (the allocation order of the
    cycle's entries: the k-th head is allocated before the k+1-th)
    """
    if registered:
        return _heads_in_registers(m, n, pushes, push_indexes, want, name)
    return _heads_from_ram(m, n, pushes, push_indexes, want, name, checks, member)


def _heads_from_ram(m, n: int, pushes, push_indexes, want, name: str, checks=False,
                    member=None):
    """:func:`free_list_heads` with its heads read from the RAM (``registered=False``)."""
    P = len(want)
    ib = range(max(2, n))
    fifo = memory.Memory(shape=ib, depth=n, init=[])
    m.submodules[name] = fifo
    wps = [fifo.write_port() for _ in range(P)]
    rps = [fifo.read_port(domain="comb") for _ in range(P)]
    wr = Signal(ib, name=f"{name}_wr")
    rd = Signal(ib, name=f"{name}_rd")
    # the entries never allocated since reset: ``n - fresh_n .. n - 1``, ahead of the RAM's
    fresh_n = Signal(range(n + 1), init=n, name=f"{name}_fresh_left")
    count = Signal(range(n + 1), init=n, name=f"{name}_count")
    more = Signal(P, init=sum(1 << k for k in range(P) if k < n), name=f"{name}_more")
    ap = Signal(range(P), name=f"{name}_ap")

    def wrap(v):   # v < 2n
        return Mux(v >= n, v - n, v)

    # the k-th entry from the head, k < P
    heads = []
    for k in range(P):
        j = Signal(range(-n, P + 1), name=f"{name}_ram_k{k}")
        m.d.comb += j.eq(k - fresh_n)
        m.d.comb += rps[k].addr.eq(wrap(rd + j.as_unsigned()[:len(rd) + 1]))
        h = Signal(ib, name=f"{name}_head_k{k}")
        m.d.comb += h.eq(Mux(k < fresh_n, (n + k - fresh_n)[:len(h)], rps[k].data))
        heads.append(h)
    ranks = _rank_from_pointer(m, want, ap, name)
    # ``safe`` bit p: the list holds an entry for port p even if every port before it (from
    # ap) allocates (more[(p - ap) mod P]), a flip-flop from the next count and pointer. The
    # grant is the same (safe implies more[rank_p]), but with two ports it is
    # ``want_p & (safe_p | more[0] & ~want_other)``: the other port's want enters at the last
    # gate (when ap names the other port first, rank_p = want_other; otherwise safe_p =
    # more[0]), not through the rank and the pointer
    safe = Signal(P, init=sum(1 << p for p in range(P) if p < n), name=f"{name}_safe")
    granted, index = [], []
    for p in range(P):
        got = Const(0, 1)
        idx = heads[0]
        for k in range(P):
            got = Mux(ranks[p] == k, more[k], got)
            if k:
                idx = Mux(ranks[p] == k, heads[k], idx)
        if P == 2:   # rank_p is the other port's want or 0, and safe covers the latter
            got = more[0] & ~want[1 - p]
        granted.append(named(m, want[p] & (safe[p] | got), f"{name}_granted{p}"))
        ix = Signal(ib, name=f"{name}_index{p}")
        m.d.comb += ix.eq(idx)
        index.append(ix)
    allocs = Signal(range(P + 1), name=f"{name}_allocs")
    m.d.comb += allocs.eq(tree_sum(granted))
    nxt = Const(0, 1)
    for p in range(P):
        nxt = nxt | Mux(granted[p] & (ranks[p] + 1 == allocs), (p + 1) % P, 0)
    ap_next = Signal(range(P), name=f"{name}_ap_next")
    m.d.comb += ap_next.eq(Mux(allocs != 0, nxt, ap))
    m.d.sync += ap.eq(ap_next)
    # the RAM's part of the allocations: those beyond the fresh entries
    from_ram = Signal(range(P + 1), name=f"{name}_from_ram")
    m.d.comb += from_ram.eq(Mux(allocs > fresh_n, allocs - fresh_n, 0))
    m.d.sync += [fresh_n.eq(Mux(allocs > fresh_n, 0, fresh_n - allocs)),
                 rd.eq(wrap(rd + from_ram))]
    # frees join the tail in ascending response port order
    before = Const(0, 1)
    for p in range(P):
        m.d.comb += [wps[p].addr.eq(wrap(wr + before)), wps[p].data.eq(push_indexes[p]),
                     wps[p].en.eq(pushes[p])]
        before = before + pushes[p]
    pushed = Signal(range(P + 1), name=f"{name}_pushed")
    m.d.comb += pushed.eq(tree_sum(pushes))
    m.d.sync += wr.eq(wrap(wr + pushed))
    after = Signal(range(n + P + 1), name=f"{name}_next")
    m.d.comb += after.eq(count + pushed - allocs)
    m.d.sync += [count.eq(after), more.eq(Cat(*[after > k for k in range(P)]))]
    for p in range(P):   # (p - a) mod P ports come before p when the pointer is a
        pick = after > p
        for a in range(1, P):
            pick = Mux(ap_next == a, after > (p - a) % P, pick)
        m.d.sync += safe[p].eq(pick)
    if proving(checks) and member is not None:
        # the counter's entries ``n - fresh_n .. n - 1`` come first, then the ring's; the
        # flags ``more`` and ``safe`` are the count's and the pointer's
        lemma(m, checks, (fresh_n <= count) & (count <= n) & (ap < P),
              f"{name}: the count is below the counter's entries, or the pointer past the "
              "ports")
        lemma(m, checks, more == Cat(*[count > k for k in range(P)]),
              f"{name}: the flags 'more' differ from the count")
        for p in range(P):
            pick = count > p
            for a in range(1, P):
                pick = Mux(ap == a, count > (p - a) % P, pick)
            lemma(m, checks, safe[p] == pick, f"{name}: the flag 'safe' of port {p} differs "
                  "from the count and the pointer")
        ring_lemmas(m, checks, fifo, rd, wr, count - fresh_n, n, lambda d: d, member, name,
                    ahead=[(fresh_n >= n - j, Const(j, ib)) for j in range(n)])
    return granted, index, count, ap, ranks


def _heads_in_registers(m, n: int, pushes, push_indexes, want, name: str):
    """:func:`free_list_heads` with its first ``min(P, n)`` entries in registers
    (``registered=True``): at the end of a cycle the heads shift down by the cycle's
    allocations and refill from the backing part's first entries (read at registered
    addresses) and then from the cycle's frees, each next head a multiplexer over the number
    of allocations whose inputs are all registers or RAM words read at registered addresses.
    Every free is written into the ring; those that went straight into the heads are skipped
    by the read pointer. ``deep`` (the list holds more than k entries, k < 2H: the heads'
    refill) is a flip-flop too."""
    P = len(want)
    H = min(P, n)
    ib = range(max(2, n))
    fifo = memory.Memory(shape=ib, depth=max(2, n), init=[])
    m.submodules[name] = fifo
    wps = [fifo.write_port() for _ in range(P)]
    rps = [fifo.read_port(domain="comb") for _ in range(H)]
    wr = Signal(ib, name=f"{name}_wr")
    rd = Signal(ib, name=f"{name}_rd")
    heads = [Signal(ib, init=k, name=f"{name}_head_k{k}") for k in range(H)]
    # the backing part's entries never allocated since reset: ``fresh .. n - 1``
    fresh = Signal(range(n + 1), init=H, name=f"{name}_fresh")
    fresh_n = Signal(range(n + 1), init=n - H, name=f"{name}_fresh_left")
    count = Signal(range(n + 1), init=n, name=f"{name}_count")
    more = Signal(P, init=sum(1 << k for k in range(P) if k < n), name=f"{name}_more")
    deep = Signal(2 * H, init=sum(1 << k for k in range(2 * H) if k < n), name=f"{name}_deep")
    ap = Signal(range(P), name=f"{name}_ap")
    N = max(2, n)

    def wrap(v, times=3):   # v mod N for v < times * N (a power of two: the low bits)
        if N & (N - 1) == 0:
            return Value.cast(v)[:len(wr)]
        for t in reversed(range(1, times)):
            v = Mux(v >= t * N, v - t * N, v)
        return v

    ranks = _rank_from_pointer(m, want, ap, name)
    # ``safe`` bit p: the list holds an entry for port p even if every port before it (from
    # ap) allocates (more[(p - ap) mod P]), a flip-flop from the next count and pointer. The
    # grant is the same (safe implies more[rank_p]), but with two ports it is
    # ``want_p & (safe_p | more[0] & ~want_other)``: the other port's want enters at the last
    # gate (when ap names the other port first, rank_p = want_other; otherwise safe_p =
    # more[0]), not through the rank and the pointer
    safe = Signal(P, init=sum(1 << p for p in range(P) if p < n), name=f"{name}_safe")
    granted, index = [], []
    for p in range(P):
        got = Const(0, 1)
        idx = heads[0]
        for k in range(P):
            got = Mux(ranks[p] == k, more[k], got)
            if 0 < k < H:
                idx = Mux(ranks[p] == k, heads[k], idx)
        if P == 2:   # rank_p is the other port's want or 0, and safe covers the latter
            got = more[0] & ~want[1 - p]
        granted.append(named(m, want[p] & (safe[p] | got), f"{name}_granted{p}"))
        ix = Signal(ib, name=f"{name}_index{p}")
        m.d.comb += ix.eq(idx)
        index.append(ix)
    # the cycle's allocations: the first min(wanting ports, entries) of the ranked ports; as a
    # thermometer ``a > k`` (k < H) from the wants and ``more`` alone
    nwant = Signal(range(P + 1), name=f"{name}_nwant")
    m.d.comb += nwant.eq(tree_sum(want))
    a_gt = [named(m, (nwant > k) & more[k], f"{name}_allocs_gt{k}") for k in range(H)]
    allocs = Signal(range(P + 1), name=f"{name}_allocs")
    m.d.comb += allocs.eq(tree_sum(a_gt))
    nxt = Const(0, 1)
    for p in range(P):
        nxt = nxt | Mux(granted[p] & (ranks[p] + 1 == allocs), (p + 1) % P, 0)
    ap_next = Signal(range(P), name=f"{name}_ap_next")
    m.d.comb += ap_next.eq(Mux(allocs != 0, nxt, ap))
    m.d.sync += ap.eq(ap_next)

    # frees: every one written into the ring at the tail, in ascending response port order;
    # ``push_m[j]`` is the j-th free of the cycle in that order
    before = Const(0, 1)
    order = []
    for p in range(P):
        m.d.comb += [wps[p].addr.eq(wrap(wr + before, 2)), wps[p].data.eq(push_indexes[p]),
                     wps[p].en.eq(pushes[p])]
        order.append(before)
        before = before + pushes[p]
    pushed = Signal(range(P + 1), name=f"{name}_pushed")
    m.d.comb += pushed.eq(tree_sum(pushes))
    m.d.sync += wr.eq(wrap(wr + pushed, 2))
    push_m = []
    for j in range(H):
        pj = Const(0, len(heads[0]))
        for p in range(P):
            pj = pj | Mux(pushes[p] & (order[p] == j), push_indexes[p], 0)
        push_m.append(named(m, pj, f"{name}_push{j}"))

    # the backing part's first H entries: the counter's, then the ring's from ``rd``.
    # ``rd_f`` is ``rd - fresh_n`` mod N and ``fresh_gt`` the thermometer ``fresh_n > x``
    # (x < H), both registers, so the ring's addresses are a register plus a constant
    rd_f = Signal(ib, init=(-(n - H)) % N, name=f"{name}_rd_f")
    fresh_gt = Signal(H, init=sum(1 << x for x in range(H) if x < n - H),
                      name=f"{name}_fresh_gt")
    backing = []
    for x in range(H):
        m.d.comb += rps[x].addr.eq(wrap(rd_f + x, 2))
        b = Signal(ib, name=f"{name}_backing{x}")
        m.d.comb += b.eq(Mux(fresh_gt[x], (fresh + x)[:len(b)], rps[x].data))
        backing.append(b)

    # the next heads: the list after the allocations (its position ``a + k``), then the
    # frees: position ``j < H`` a head, ``j < count`` the backing part's ``j - H``, else the
    # free ``j - count``; one multiplexer over ``a`` per head
    for k in range(H):
        cands = []
        for a in range(H + 1):
            j = a + k
            if j < H:
                kept = heads[j]
            elif j - H < H:
                kept = backing[j - H]
            else:
                kept = Const(0, len(heads[0]))
            from_push = Const(0, len(heads[0]))
            for c in range(j + 1):   # count == c <= j: the free j - c
                from_push = Mux(count == c, push_m[j - c] if j - c < H else 0, from_push)
            cands.append(Mux(deep[j] if j < 2 * H else 1, kept, from_push))
        value = cands[0]
        for a in range(1, H + 1):
            value = Mux(a_gt[a - 1], cands[a], value)
        m.d.sync += heads[k].eq(value)

    # the backing part gives min(max(count - H, 0), a) entries to the heads, the counter's
    # first; the frees that went straight into the heads (``min(pushed, max(H - count + a,
    # 0))``) are skipped in the ring
    # As thermometers over the registers: position H + t of the list is the backing part's
    # t-th entry (``deep[H + t]``), from the counter while ``fresh_gt[t]``; head position t is
    # free after a allocations when ``~deep[t + a]``; ``pushed > s`` is ``push_gt[s]``.
    push_gt = [named(m, pushed > s, f"{name}_pushed_gt{s}") for s in range(H)]
    rd_c, fresh_c, fresh_n_c, rd_f_c, fresh_gt_c = [], [], [], [], []
    for a in range(H + 1):
        from_fresh = tree_sum([deep[H + t] & fresh_gt[t] for t in range(a)])
        from_ram = tree_sum([deep[H + t] & ~fresh_gt[t] for t in range(a)])
        skip = tree_sum([push_gt[s] & ~deep[a + H - 1 - s] for s in range(H)])
        rd_c.append(wrap(rd + from_ram + skip, 3))
        fresh_c.append(fresh + from_fresh)
        fn = Signal(range(n + 1), name=f"{name}_fresh_left_a{a}")
        m.d.comb += fn.eq(fresh_n - from_fresh)
        fresh_n_c.append(fn)
        fresh_gt_c.append(Cat(*[fn > x for x in range(H)]))
        rd_f_c.append(wrap(rd + from_ram + skip + N - fn, 4))
    rd_n, fr_n, frn_n, rdf_n, fgt_n = rd_c[0], fresh_c[0], fresh_n_c[0], rd_f_c[0], fresh_gt_c[0]
    for a in range(1, H + 1):
        rd_n = Mux(a_gt[a - 1], rd_c[a], rd_n)
        fr_n = Mux(a_gt[a - 1], fresh_c[a], fr_n)
        frn_n = Mux(a_gt[a - 1], fresh_n_c[a], frn_n)
        rdf_n = Mux(a_gt[a - 1], rd_f_c[a], rdf_n)
        fgt_n = Mux(a_gt[a - 1], fresh_gt_c[a], fgt_n)
    m.d.sync += [rd.eq(rd_n), fresh.eq(fr_n), fresh_n.eq(frn_n), rd_f.eq(rdf_n),
                 fresh_gt.eq(fgt_n)]

    after = Signal(range(n + P + 1), name=f"{name}_next")
    m.d.comb += after.eq(count + pushed - allocs)
    m.d.sync += [count.eq(after), more.eq(Cat(*[after > k for k in range(P)])),
                 deep.eq(Cat(*[after > k for k in range(2 * H)]))]
    for p in range(P):   # (p - a) mod P ports come before p when the pointer is a
        pick = after > p
        for a in range(1, P):
            pick = Mux(ap_next == a, after > (p - a) % P, pick)
        m.d.sync += safe[p].eq(pick)
    return granted, index, count, ap, ranks
