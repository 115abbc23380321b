"""The two parts the MSHR table and the write buffer share: offering ready entries to the
channel queues, and draining one entry's waiter list to the response port.

Implements the table side of docs/timing-contract-v1.md §6 (per channel, the lowest-index
ready entry is offered) and §8 (the chosen entry keeps the response port until its waiter
list is empty; otherwise the lowest-index entry in RETURN).
"""

from __future__ import annotations

__all__ = ["check_waiters", "drain_waiters", "grant_free", "offer_enqueues",
           "offer_enqueues_onehot"]

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from hbfsim.rtl.checks import invariant, protocol
from hbfsim.rtl.logic import (lowest_onehot, lowest_set, named, onehot_index,
                              onehot_select, select, tree_sum)


def grant_free(m, free, want, name):
    """Allocation from a shared pool by several ports (docs/timing-contract.md §4.2.3).

    The ports that want an entry are ranked from the pool's round-robin pointer ``ap``
    (``p = ap, ap + 1, ... mod P``), the FREE entries by a prefix count of the free bits;
    entry ``i`` goes to the port whose rank equals its own, so each grant is one-hot. After
    a cycle with a grant ``ap`` moves to the last granted port + 1.

    Parameters
    ----------
    free : list of 1-bit values, one per entry (FREE at the start of the cycle)
    want : list of 1-bit values, one per port (its M allocates from this pool)
    name : str
        Prefix of the signals made here.

    Returns
    -------
    (grants, granted, index) : per entry a ``P``-bit one-hot (or zero) grant vector; per
    port whether it got an entry, and the entry's index (0 when not granted)
    """
    n, P = len(free), len(want)
    ap = Signal(range(P), name=f"{name}_ap")
    ranks = []
    for p in range(P):
        opts = []
        for a in range(P):
            before = [(a + k) % P for k in range((p - a) % P)]
            opts.append(tree_sum([want[q] for q in before]) if before else Const(0, 1))
        rank = Signal(range(P), name=f"{name}_rank{p}")
        pick = opts[0]
        for a in range(1, P):     # a chain, not an index (no case gaps when P is not 2**k)
            pick = Mux(ap == a, opts[a], pick)
        m.d.comb += rank.eq(pick)
        ranks.append(rank)
    grants = []
    below = Const(0, 1)
    for i in range(n):
        # free entries below i, saturated at P (no port has a rank of P or more)
        fr = Signal(range(P + 1), name=f"{name}_free_rank{i}")
        m.d.comb += fr.eq(below)
        below = Mux(fr == P, P, fr + free[i])
        g = Signal(P, name=f"{name}_grant{i}")
        m.d.comb += g.eq(Cat(*[free[i] & want[p] & (fr == ranks[p]) for p in range(P)]))
        grants.append(g)
    granted, index = [], []
    for p in range(P):
        got, idx = lowest_set(m, [g[p] for g in grants], f"{name}_index{p}")
        granted.append(named(m, got, f"{name}_granted{p}"))
        index.append(idx)
    total = tree_sum(granted)
    nxt = Const(0, 1)
    for p in range(P):
        nxt = nxt | Mux(granted[p] & (ranks[p] + 1 == total), (p + 1) % P, 0)
    with m.If(Cat(*granted).any()):
        m.d.sync += ap.eq(nxt)
    return grants, granted, index


def offer_enqueues(m, enq_ports, ready, target, kind):
    """Drive each channel's ``enq`` port with the lowest-index ready entry of that channel.

    Parameters
    ----------
    enq_ports : list of stream interfaces (``queue_op_layout`` payload), one per channel
    ready : list of 1-bit values, one per entry
    target : list of ``target_layout`` signals, one per entry
    kind : EntryKind of the table (the command tag's kind)

    Returns
    -------
    (enq_fire, enq_index) : lists per channel of the handshake and the offered entry index
    """
    enq_fire, enq_index = [], []
    for c, port in enumerate(enq_ports):
        valid, index = lowest_set(m, [ready[i] & (target[i].channel == c)
                                      for i in range(len(ready))], f"enq_index{c}")
        offered = select(m, target, index, f"enq_target{c}")
        m.d.comb += [
            port.valid.eq(valid),
            port.payload.tag.kind.eq(kind),
            port.payload.tag.index.eq(index),
            port.payload.subarray.eq(offered.subarray),
            port.payload.page.eq(offered.local),
        ]
        enq_fire.append(named(m, port.valid & port.ready, f"enq_fire{c}"))
        enq_index.append(index)
    return enq_fire, enq_index


def offer_enqueues_onehot(m, enq_ports, ready, target, kind, checks=False):
    """:func:`offer_enqueues` with one-hot grants (timing contract v2 §16, S1).

    Each channel's grant is the one-hot lowest ready entry of that channel
    (:func:`~hbfsim.rtl.logic.lowest_onehot`), the offered operation an AND-OR select of the
    entries' targets by that grant, so the payload is a few levels behind ``ready`` instead
    of behind a priority encoder's last index bit and a multiplexer tree; the binary index
    (the command tag) is the grant's encoding, off the payload's path. Same offers, same
    cycles as :func:`offer_enqueues`; with ``checks`` an ``Assert`` compares the two every
    cycle.

    Parameters
    ----------
    enq_ports, ready, target, kind
        As :func:`offer_enqueues`.
    checks : bool or "formal"
        The equivalence with :func:`offer_enqueues`'s priority encoder and multiplexer
        (:func:`~hbfsim.rtl.checks.invariant`).

    Returns
    -------
    (enq_fire, enq_index, enq_grant) : lists per channel of the handshake, the offered entry
    index and the grant (a list of one bit per entry: enable entry ``i`` with
    ``enq_fire[c] & enq_grant[c][i]`` instead of comparing ``enq_index[c]`` with ``i``)
    """
    enq_fire, enq_index, enq_grant = [], [], []
    for c, port in enumerate(enq_ports):
        cand = [named(m, ready[i] & (target[i].channel == c), f"enq_ready{c}_{i}")
                for i in range(len(ready))]
        valid, grant = lowest_onehot(m, cand, f"enq_grant{c}_")
        offered = onehot_select(m, target, grant, f"enq_target{c}")
        index = onehot_index(m, grant, f"enq_index{c}")
        m.d.comb += [
            port.valid.eq(valid),
            port.payload.tag.kind.eq(kind),
            port.payload.tag.index.eq(index),
            port.payload.subarray.eq(offered.subarray),
            port.payload.page.eq(offered.local),
        ]
        if checks:
            # the binary reference (offer_enqueues): same valid, index and payload
            ref_valid, ref_index = lowest_set(m, cand, f"chk_enq_index{c}")
            ref = select(m, target, ref_index, f"chk_enq_target{c}")
            invariant(m, checks, (valid == ref_valid) & (~valid | (
                (index == ref_index) & (offered.subarray == ref.subarray)
                & (offered.local == ref.local))),
                f"channel {c}: the one-hot offer differs from the lowest ready entry (v2 §16)")
        enq_fire.append(named(m, port.valid & port.ready, f"enq_fire{c}"))
        enq_index.append(index)
        enq_grant.append(grant)
    return enq_fire, enq_index, enq_grant


def drain_waiters(m, ret, ret_sel, ret_locked, in_return, head, tail, target, error,
                  link_rd, buffer_hit=None, taken=False, prefix=""):
    """Offer the head waiter of the entry being drained on ``ret`` (§8).

    ``buffer_hit`` is a list of per-entry flags, or None for a table whose responses never
    carry it (the write buffer). Returns ``(pop, cur, last, locked)``: the handshake, the
    entry drained, whether this is its last waiter, and the lock register.

    With ``taken`` (contract 2, v2 §8) the handshake is R taking the waiter: the lock is
    taken and released by that alone ("until its last waiter has been taken into R"), and
    ``in_return`` must leave out the entries whose waiters have all been taken. ``prefix``
    names the signals of one response port of several (the channel shape).
    """
    n = len(in_return)
    locked = Signal(name=f"{prefix}locked" if prefix else None)
    lock_index = Signal(range(max(2, n)), name=f"{prefix}lock_index" if prefix else None)
    any_return, low_return = lowest_set(m, in_return, f"{prefix}return_index")
    cur = Signal(range(max(2, n)), name=f"{prefix}cur" if prefix else None)
    m.d.comb += cur.eq(Mux(locked, lock_index, low_return))
    cur_head = select(m, head, cur, f"{prefix}cur_head")
    last = named(m, cur_head == select(m, tail, cur, f"{prefix}cur_tail"), f"{prefix}last")
    m.d.comb += [
        ret.valid.eq(locked | any_return),
        ret.payload.index.eq(cur),
        ret.payload.slot.eq(cur_head),
        ret.payload.channel.eq(select(m, target, cur, f"{prefix}cur_target").channel),
        ret.payload.last.eq(last),
        ret.payload.buffer_hit.eq(0 if buffer_hit is None else Array(buffer_hit)[cur]),
        ret.payload.error.eq(Array(error)[cur]),
        link_rd.addr.eq(cur_head),
        ret_locked.eq(locked),
    ]
    pop = named(m, ret.valid & ret.ready, f"{prefix}pop")
    if taken:
        with m.If(pop):
            m.d.sync += [locked.eq(~last), lock_index.eq(cur)]
    else:
        with m.If(ret_sel & ret.valid):
            m.d.sync += [locked.eq(~(pop & last)), lock_index.eq(cur)]
    return pop, cur, last, locked


def check_waiters(m, checks, slots: int, fire, slot, pop, ret, all_free, table: str) -> None:
    """Properties of a table's waiter lists seen from its ports (issue 12: no lost or
    duplicated waiter, one response per request slot).

    Keeps the set of request slots inside the table (a dispatch ``fire`` adds ``slot``, a
    response ``pop`` removes ``ret.payload.slot``). A dispatch of a slot already inside breaks
    the neighbours' protocol; a response for a slot not inside is a duplicated (or invented)
    waiter; a slot still inside when ``all_free`` (every entry FREE) is a lost waiter.
    """
    inside = Signal(slots, name="chk_inside")
    add = Signal(slots, name="chk_add")
    drop = Signal(slots, name="chk_drop")
    if isinstance(fire, list):   # several ports (the channel shape): one of each per port
        m.d.comb += [add.eq(_or([Mux(f, 1 << s, 0) for f, s in zip(fire, slot)])),
                     drop.eq(_or([Mux(o, 1 << r.payload.slot, 0) for o, r in zip(pop, ret)]))]
        m.d.sync += inside.eq((inside & ~drop) | add)
        for f, s in zip(fire, slot):
            protocol(m, checks, ~f | ~(inside >> s)[0],
                     f"request dispatched to the {table} for a slot already inside it")
        for r in ret:
            invariant(m, checks, ~r.valid | (inside >> r.payload.slot)[0],
                      f"{table} response for a request slot that is not waiting (duplicated "
                      "waiter)")
        invariant(m, checks, ~all_free | (inside == 0),
                  f"every {table} entry is FREE but a request is still waiting (lost waiter)")
        return
    m.d.comb += [add.eq(Mux(fire, 1 << slot, 0)), drop.eq(Mux(pop, 1 << ret.payload.slot, 0))]
    m.d.sync += inside.eq((inside & ~drop) | add)
    protocol(m, checks, ~fire | ~(inside >> slot)[0],
             f"request dispatched to the {table} for a slot already inside it")
    invariant(m, checks, ~ret.valid | (inside >> ret.payload.slot)[0],
              f"{table} response for a request slot that is not waiting (duplicated waiter)")
    invariant(m, checks, ~all_free | (inside == 0),
              f"every {table} entry is FREE but a request is still waiting (lost waiter)")


def _or(values):
    """The OR of a non-empty list of values."""
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out
