"""The parts the MSHR table and the write buffer share: offering entries to the channel
queues, draining one entry's waiter list to the response port, and the size at which a
table registers its lookup (the free lists are :mod:`hbfsim.rtl.free_list`).

Implements the table side of docs/timing-contract.md DP2 (offers in allocation order), DP3
(a registered offer per channel) and DP7 (the response choice C1 / C2 / cursor), and the
checks of the waiter lists.
"""

from __future__ import annotations

__all__ = ["REGISTERED_LOOKUP_ABOVE", "check_waiters", "drain_cursor", "offer_fifo",
           "offer_registered", "pool_lemmas", "registered_lookup", "response_stages",
           "sliced_pools", "stage_lemmas", "waiter_list_lemmas"]

from amaranth.hdl import Array, Const, Mux, Signal
from amaranth.lib import data, memory

from hbfsim.rtl.checks import invariant, lemma, protocol, proving
from hbfsim.rtl.free_list import ring_lemmas, ring_next
from hbfsim.rtl.logic import lowest_set, named, select, tree_sum


#: Tables of more entries than this register their lookup's hit flags and keep their
#: multi-port free list's heads in registers (:func:`registered_lookup`).
REGISTERED_LOOKUP_ABOVE = 8


def registered_lookup(entries: int) -> bool:
    """Whether a table of ``entries`` entries (MSHR table, write buffer) takes the registered
    structures of its lookup and allocation (§13: the same cycles, other registers).

    * **Registered hits**: M qualifies its match vector for the table, when it registers
      it, with the entries' states of the next cycle (the table's ``*_next`` outputs) and
      registers the vector's OR beside it; the table's hit (and the write buffer's RAW
      block) is that flip-flop ORed with W's flag, not an AND-OR over every entry's state.
    * **Registered free-list heads** (several ports): :func:`free_list_heads` with
      ``registered=True``.

    Both pay where the table is wide: at 4 channels x 32 MSHR entries they took the
    controller from 50.66 to 63.78 MHz (ECP5-85k, seed 1), while at the base point (8 MSHR
    entries, 4 write-buffer entries) they cost it 3 % (mean of seeds 1-3, below 100 MHz):
    there the state-to-hit tree was never critical and the added registers cost placement
    (docs/rtl.md "Issue 23: the 4 x 32 point"). Tables of at most
    :data:`REGISTERED_LOOKUP_ABOVE` entries keep the plain structures.
    """
    return entries > REGISTERED_LOOKUP_ABOVE


def response_stages(m, ret, ret_locked, is_return, drained, head, tail, target, error,
                    link_rds, *, ports: int, pool_k: int, per_channel: bool, buffer_hit=None):
    """A table's DP7 stages (:func:`drain_cursor`) for each of its ``ports`` response ports:
    in the stack shape over every entry; with shared pools port ``p``'s over the entries of
    its channel; with a pool per channel (§4.5) over its own pool's ``pool_k`` entries,
    sliced to them above eight (:func:`sliced_pools`), else the other pools' terms constant.

    ``ret`` / ``ret_locked`` are the table's ports (arrays of ``ports`` when several);
    ``is_return(i)`` builds entry ``i``'s "in RETURN" (a new expression per call); the lists
    are the table's per entry. Returns the lists ``(pops, curs, lasts, regss)`` per port.
    """
    n = len(drained)
    sliced = per_channel and sliced_pools(pool_k)
    out = ([], [], [], [])
    for p in range(ports):
        if sliced:
            # §4.5: response port p answers its own pool's entries, the channel's
            mine = slice(p * pool_k, (p + 1) * pool_k)
            got = drain_cursor(
                m, ret[p], ret_locked[p],
                [is_return(i) & ~drained[i] for i in range(n) if i // pool_k == p],
                head[mine], tail[mine], target[mine], error[mine], link_rds[p],
                buffer_hit=None if buffer_hit is None else buffer_hit[mine],
                prefix=f"p{p}_", base=p * pool_k)
        else:
            got = drain_cursor(
                m, ret if ports == 1 else ret[p], ret_locked if ports == 1 else ret_locked[p],
                [is_return(i) & ~drained[i] if ports == 1 else
                 is_return(i) & ~drained[i] & (target[i].channel == p) if not per_channel else
                 # §4.5: the pool's entries are the channel's
                 is_return(i) & ~drained[i] if i // pool_k == p else Const(0, 1)
                 for i in range(n)],
                head, tail, target, error, link_rds[p], buffer_hit=buffer_hit,
                prefix="" if ports == 1 else f"p{p}_")
        for lst, v in zip(out, got):
            lst.append(v)
    return out


def sliced_pools(pool_entries: int) -> bool:
    """Whether a table with a pool per channel (docs/timing-contract.md §4.5) of
    ``pool_entries`` entries per pool builds each response port's DP7 stages over its own
    pool's entries only (:func:`drain_cursor`'s ``base``), instead of over the whole table
    with the other pools' terms constant (§13: logically the same; synthesis folds the
    constants, Amaranth's lowering, Yosys and Verilator do not). Pools of at most
    :data:`REGISTERED_LOOKUP_ABOVE` entries (both of issue 23's timing points) keep the
    unsliced form: the sliced netlist placed one channel-queue path late at the base point
    (docs/rtl.md "Issue 23: pools per channel"); at ``ocp-grade3`` (64 entries per pool) the
    unsliced stages are ``16 x 1,024`` per table."""
    return pool_entries > REGISTERED_LOOKUP_ABOVE


def offer_fifo(m, port, push, push_index, push_target, kind, n: int, name: str,
               checks=False, member=None):
    """One channel's MSHR offers in allocation order (docs/timing-contract.md DP2).

    A FIFO (LUT-RAM, ``n`` words of entry index, subarray and channel-local page) written
    by ``push`` (the W register's allocation of an entry of this channel, so the entry is
    offered from the cycle after W's write) and read at a registered pointer: the head is
    the offer, no priority encoder. The handshake on ``port`` pops it.

    Returns
    -------
    (fire, index, count) : the handshake, the offered entry, the occupancy register
    """
    layout = data.StructLayout({"index": range(max(2, n)),
                                "subarray": push_target.subarray.shape(),
                                "local": push_target.local.shape()})
    fifo = memory.Memory(shape=layout, depth=n, init=[])
    m.submodules[name] = fifo
    wp, rp = fifo.write_port(), fifo.read_port(domain="comb")
    ib = range(max(2, n))
    wr = Signal(ib, name=f"{name}_wr")
    rd = Signal(ib, name=f"{name}_rd")
    count = Signal(range(n + 1), name=f"{name}_count")
    nonempty = Signal(name=f"{name}_nonempty")
    fire = Signal(name=f"{name}_fire")
    m.d.comb += [
        wp.addr.eq(wr), wp.en.eq(push), wp.data.index.eq(push_index),
        wp.data.subarray.eq(push_target.subarray), wp.data.local.eq(push_target.local),
        rp.addr.eq(rd),
        fire.eq(nonempty & port.ready),
        port.valid.eq(nonempty),
        port.payload.tag.kind.eq(kind),
        port.payload.tag.index.eq(rp.data.index),
        port.payload.subarray.eq(rp.data.subarray),
        port.payload.page.eq(rp.data.local),
    ]
    nxt = Signal(range(n + 2), name=f"{name}_next")
    m.d.comb += nxt.eq(count + push - fire)
    m.d.sync += [count.eq(nxt), nonempty.eq(nxt != 0)]
    with m.If(push):
        m.d.sync += wr.eq(ring_next(wr, n))
    with m.If(fire):
        m.d.sync += rd.eq(ring_next(rd, n))
    if proving(checks) and member is not None:
        lemma(m, checks, nonempty == (count != 0), f"{name}: nonempty differs from the count")
        ring_lemmas(m, checks, fifo, rd, wr, count, n, lambda d: d.index, member, name)
    return fire, rp.data.index, count


def offer_registered(m, enq_ports, cand, target, kind):
    """Per channel an offer register ``O_c`` (docs/timing-contract.md DP3).

    In a cycle in which ``O_c`` is empty or the arbiter takes its entry, ``O_c`` takes the
    lowest-index candidate of channel ``c`` other than the entry it holds (or becomes
    empty); the entry is offered from the next cycle, so the arbiter and the channel queue
    read registers only.

    Returns
    -------
    (enq_fire, enq_index, held) : per channel the handshake, the offered entry and the
    register's (valid, index) pair
    """
    n = len(cand)
    enq_fire, enq_index, held = [], [], []
    for c, port in enumerate(enq_ports):
        hv = Signal(name=f"offer_valid{c}")
        hi = Signal(range(max(2, n)), name=f"offer_index{c}")
        ht = Signal(target[0].shape(), name=f"offer_target{c}")
        pick = [named(m, cand[i] & (target[i].channel == c) & ~(hv & (hi == i)),
                      f"offer_cand{c}_{i}") for i in range(n)]
        valid, index = lowest_set(m, pick, f"offer_next{c}")
        fire = named(m, hv & port.ready, f"enq_fire{c}")
        with m.If(~hv | fire):
            m.d.sync += [hv.eq(valid), hi.eq(index),
                         ht.eq(select(m, target, index, f"offer_next_target{c}"))]
        m.d.comb += [
            port.valid.eq(hv),
            port.payload.tag.kind.eq(kind),
            port.payload.tag.index.eq(hi),
            port.payload.subarray.eq(ht.subarray),
            port.payload.page.eq(ht.local),
        ]
        enq_fire.append(fire)
        enq_index.append(hi)
        held.append((hv, hi))
    return enq_fire, enq_index, held


def drain_cursor(m, ret, ret_locked, in_return, head, tail, target, error, link_rd,
                 buffer_hit=None, prefix="", base=0):
    """The response choice of one table in registered stages (docs/timing-contract.md
    DP7): ``C1`` chooses, ``C2`` reads the entry, a cursor drains its further waiters.

    ``C1`` takes, when empty or when its entry moves on, the lowest-index entry of
    ``in_return`` (RETURN with a waiter not yet taken) not held in ``C1``, ``C2`` or the
    cursor, and holds it until ``C2`` takes it (the amendment's first difference from the
    what-if, whose ``C1`` chose again every cycle). ``C2`` takes ``C1``'s entry when empty
    or when its first waiter is taken, reading head, tail and flags. The offer is the
    cursor's next waiter while the cursor holds an entry, else ``C2``'s first waiter; after
    ``C2``'s first waiter is taken an entry with more waiters moves into the cursor, which
    follows the successor memory (``link_rd``) one waiter per cycle. Nothing on the offer's
    path reads the table's ``head`` (the entry's ``head`` stays its first waiter).

    ``prefix`` names the registers of one response port of several (the channel shape,
    where response port ``p`` has its own ``C1``, ``C2`` and cursor per table, DP7).
    ``base``: the lists hold the table's entries ``base, base + 1, ...`` only (a pool per
    channel, docs/timing-contract.md §4.5: a response port answers its own pool's entries);
    the stages hold indices within them, and the entry offered and the returned indices are
    the table's.

    Returns
    -------
    (pop, cur, last, regs) : the handshake, the entry offered, whether it is its last
    waiter, and a dict of the stage registers (``v1``, ``i1``, ``v2``, ``i2`` and C2's copies
    ``h2``, ``t2``, ``ch2``, ``bh2``, ``er2``; ``locked``, ``lock_index``, ``lk_head`` and the
    cursor's copies ``lk_tail``, ``lk_ch``, ``lk_bh``, ``lk_er``) for checks
    """
    n = len(in_return)
    ib = range(max(2, n))
    v1, i1 = Signal(name=f"{prefix}c1_valid"), Signal(ib, name=f"{prefix}c1_index")
    v2, i2 = Signal(name=f"{prefix}c2_valid"), Signal(ib, name=f"{prefix}c2_index")
    h2 = Signal.like(head[0], name=f"{prefix}c2_head")
    t2 = Signal.like(tail[0], name=f"{prefix}c2_tail")
    ch2 = Signal.like(target[0].channel, name=f"{prefix}c2_channel")
    bh2, er2 = Signal(name=f"{prefix}c2_buffer_hit"), Signal(name=f"{prefix}c2_error")
    locked = Signal(name=f"{prefix}cursor_valid")
    lock_index = Signal(ib, name=f"{prefix}cursor_index")
    lk_head = Signal.like(head[0], name=f"{prefix}cursor_head")
    lk_tail = Signal.like(tail[0], name=f"{prefix}cursor_tail")
    lk_ch = Signal.like(target[0].channel, name=f"{prefix}cursor_channel")
    lk_bh = Signal(name=f"{prefix}cursor_buffer_hit")
    lk_er = Signal(name=f"{prefix}cursor_error")

    pick = [named(m, in_return[i] & ~(v1 & (i1 == i)) & ~(v2 & (i2 == i))
                  & ~(locked & (lock_index == i)), f"{prefix}c1_cand{i}") for i in range(n)]
    nv, ni = lowest_set(m, pick, f"{prefix}c1_next")
    cur = named(m, Mux(locked, lock_index, i2), f"{prefix}cur")
    cur_head = named(m, Mux(locked, lk_head, h2), f"{prefix}cur_head")
    last = named(m, Mux(locked, lk_head == lk_tail, h2 == t2), f"{prefix}last")
    m.d.comb += [
        ret.valid.eq(locked | v2),
        ret.payload.index.eq(cur + base if base else cur),
        ret.payload.slot.eq(cur_head),
        ret.payload.channel.eq(Mux(locked, lk_ch, ch2)),
        ret.payload.last.eq(last),
        ret.payload.buffer_hit.eq(Mux(locked, lk_bh, bh2) if buffer_hit is not None else 0),
        ret.payload.error.eq(Mux(locked, lk_er, er2)),
        link_rd.addr.eq(cur_head),
        ret_locked.eq(locked),
    ]
    pop = named(m, ret.valid & ret.ready, f"{prefix}pop")
    # C2 is free when empty or when its first waiter is taken (the cursor is empty then)
    c2_free = named(m, ~v2 | (pop & ~locked), f"{prefix}c2_free")
    def at(values, name):   # the value of C1's entry (a pool of one entry: that entry's)
        if n == 1:
            return values[0]
        return select(m, values, i1, name) if name else Array(values)[i1]

    with m.If(c2_free):
        m.d.sync += [v2.eq(v1), i2.eq(i1),
                     h2.eq(at(head, f"{prefix}c1_head")),
                     t2.eq(at(tail, f"{prefix}c1_tail")),
                     ch2.eq(at(target, f"{prefix}c1_target").channel),
                     bh2.eq(at(buffer_hit, None) if buffer_hit is not None else 0),
                     er2.eq(at(error, None))]
    with m.If(~v1 | c2_free):
        m.d.sync += [v1.eq(nv), i1.eq(ni)]
    with m.If(pop):
        m.d.sync += [locked.eq(~last), lock_index.eq(cur), lk_head.eq(link_rd.data)]
        with m.If(~locked):
            m.d.sync += [lk_tail.eq(t2), lk_ch.eq(ch2), lk_bh.eq(bh2), lk_er.eq(er2)]
    regs = dict(v1=v1, i1=i1, v2=v2, i2=i2, locked=locked, lock_index=lock_index,
                lk_head=lk_head, h2=h2, t2=t2, ch2=ch2, bh2=bh2, er2=er2, lk_tail=lk_tail,
                lk_ch=lk_ch, lk_bh=lk_bh, lk_er=lk_er)
    if base:   # the table's indices
        cur = named(m, cur + base, f"{prefix}cur_entry")
        regs.update(i1=i1 + base, i2=i2 + base, lock_index=lock_index + base)
    return pop, cur, last, regs


def check_waiters(m, checks, slots: int, fire, slot, pop, ret, all_free, table: str) -> None:
    """Properties of a table's waiter lists seen from its ports (issue 12: no lost or
    duplicated waiter, one response per request slot).

    Keeps the set of request slots inside the table (a dispatch ``fire`` adds ``slot``, a
    response ``pop`` removes ``ret.payload.slot``). A dispatch of a slot already inside breaks
    the neighbours' protocol; a response for a slot not inside is a duplicated (or invented)
    waiter; a slot still inside when ``all_free`` (every entry FREE) is a lost waiter.
    Returns the set (a register of ``slots`` bits), for a proof's lemmas.
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
        return inside
    m.d.comb += [add.eq(Mux(fire, 1 << slot, 0)), drop.eq(Mux(pop, 1 << ret.payload.slot, 0))]
    m.d.sync += inside.eq((inside & ~drop) | add)
    protocol(m, checks, ~fire | ~(inside >> slot)[0],
             f"request dispatched to the {table} for a slot already inside it")
    invariant(m, checks, ~ret.valid | (inside >> ret.payload.slot)[0],
              f"{table} response for a request slot that is not waiting (duplicated waiter)")
    invariant(m, checks, ~all_free | (inside == 0),
              f"every {table} entry is FREE but a request is still waiting (lost waiter)")
    return inside


def _or(values):
    """The OR of a non-empty list of values."""
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out


def stage_lemmas(m, checks, regss, in_return, copies: dict, table: str,
                 pools: bool = False, owned=None) -> None:
    """A proof's lemmas of DP7's stages (:func:`drain_cursor`; docs/formal.md "Induction"):
    per response port, C1, C2 and the cursor hold entries of ``in_return`` (RETURN with
    waiters left), no entry in two stages, and each copy a stage keeps equals the entry's
    (``copies``: a stage register's key -> the per-entry values it copies, None for a copy
    the table does not keep; an entry's head, tail and flags do not change in RETURN).
    With a pool per port (``pools``, §4.5) a port's stages hold its own pool's entries; with
    shared pools (``owned``, per port and entry) its own channel's."""
    if not proving(checks):
        return
    n, P = len(in_return), len(regss)
    for p, r in enumerate(regss):
        for i in range(n):
            held = [r["v1"] & (r["i1"] == i), r["v2"] & (r["i2"] == i),
                    r["locked"] & (r["lock_index"] == i)]
            if pools and not (p * (n // P) <= i < (p + 1) * (n // P)):
                lemma(m, checks, ~(held[0] | held[1] | held[2]),
                      f"port {p}: a response stage holds {table} entry {i} of another pool")
            if owned is not None:   # shared pools: the entries of the port's channel
                lemma(m, checks, ~(held[0] | held[1] | held[2]) | owned[p][i],
                      f"port {p}: a response stage holds {table} entry {i} of another channel")
            lemma(m, checks, ~(held[0] | held[1] | held[2]) | in_return[i],
                  f"port {p}: a response stage holds {table} entry {i} outside RETURN")
            lemma(m, checks, ~(held[0] & held[1]) & ~(held[0] & held[2]) & ~(held[1] & held[2]),
                  f"port {p}: two response stages hold {table} entry {i}")
            for key, values in copies.items():
                if values is None:
                    continue
                stage = held[1] if key.endswith("2") else held[2]
                lemma(m, checks, ~stage | (r[key] == values[i]),
                      f"port {p}: the stage copy {key} of {table} entry {i} differs from it")


def waiter_list_lemmas(m, checks, slots: int, busy, joinable, in_return, head, tail, regs,
                       inside, waiters, next_slot, w_alloc, w_merge, w_oh, w_slot, w_tail,
                       pop, ret_slot, table: str, base: int = 0, owned=None):
    """A proof's lemmas of a table's waiter lists (one port; docs/formal.md "Induction").

    Ghost registers follow every request slot in a list: ``own`` (the slot is in an entry's
    list), ``owner`` (which entry's) and ``seq`` (its position from the list's first waiter
    at allocation: 0 for the allocating request, the tail's + 1 for a merge). Stated: the
    slots inside the table (``inside``, :func:`check_waiters`' set) are the listed ones and
    W's; an entry with waiters (``busy``) lists ``waiters`` slots, its first waiter (the
    cursor's next one while the cursor drains it) and its tail among them, with consecutive
    positions; every listed slot but a tail has as successor (``next_slot``, one read port
    per slot) the slot of the next position of its list; W's merge names its entry's tail
    and an entry no response stage has read (``joinable``, or ``in_return`` and in neither
    C2 nor the cursor: a completion in the merge's lookup cycle), whose first waiter is at
    position 0. Returns that per-entry condition ("no response stage has read it") and the
    listed slots with W's.

    With a pool per port (§4.5) it is stated per pool: the lists are the pool's entries
    (``busy`` to ``waiters`` their slices, ``w_oh`` over the whole table, ``base`` the pool's
    first entry, which the response stages' registers name), ``inside`` None (the caller
    compares the pools' listed slots with the table's set). With pools shared by the ports
    it is stated per port over the whole table, ``owned`` naming the entries whose lists
    are the port's (those of its channel's pages): the others list none of its slots.
    """
    n = len(busy)
    an = "an" if table == "MSHR" else "a"
    owned = [Const(1, 1)] * n if owned is None else owned
    own = Signal(slots, name="lemma_own")
    owner = [Signal(range(max(2, n)), name=f"lemma_owner{s}") for s in range(slots)]
    seq = [Signal(range(slots), name=f"lemma_seq{s}") for s in range(slots)]
    seqs = Array(seq)
    w_pend = w_alloc | w_merge
    w_index = Signal(range(max(2, n)), name="lemma_w_index")
    w_oh = w_oh[base:base + n]
    for i in range(n):
        with m.If(w_oh[i]):
            m.d.comb += w_index.eq(i)
    for s in range(slots):
        with m.If(w_pend & (w_slot == s)):
            m.d.sync += [own[s].eq(1), owner[s].eq(w_index),
                         seq[s].eq(Mux(w_alloc, 0, seqs[Array(tail)[w_index]] + 1))]
        with m.Elif(pop & (ret_slot == s)):
            m.d.sync += own[s].eq(0)
    undrawn = []
    for i in range(n):
        read = ((regs["v2"] & (regs["i2"] == base + i))
                | (regs["locked"] & (regs["lock_index"] == base + i)))
        undrawn.append(named(m, joinable[i] | (in_return[i] & ~read), f"lemma_undrawn{i}"))
    lemma(m, checks, ~w_pend | ((w_oh != 0) & ((w_oh & (w_oh - 1)) == 0)),
          f"W names one {table} entry")
    lemma(m, checks, ~w_merge | (Array(undrawn)[w_index] & Array(owned)[w_index]
                                 & (w_tail == Array(tail)[w_index])),
          f"W's merge names {an} {table} entry no response stage has read, and its tail")
    listed = own | Mux(w_pend, 1 << w_slot, 0)
    if inside is not None:
        lemma(m, checks, inside == listed,
              f"the {table}'s waiting slots are its listed slots and W's")
    lemma(m, checks, ~w_pend | ~(own >> w_slot)[0], "W's slot is already listed")
    for i in range(n):
        first = Mux(regs["locked"] & (regs["lock_index"] == base + i), regs["lk_head"],
                    head[i])
        mine = [own[s] & (owner[s] == i) for s in range(slots)]
        lemma(m, checks, tree_sum(mine) == Mux(owned[i], waiters[i], 0),
              f"{table} entry {i}: its listed slots are not its waiters")
        lemma(m, checks, ~(owned[i] & undrawn[i]) | (seqs[head[i]] == 0),
              f"{table} entry {i}: its first waiter's position is not 0 before a response")
        lemma(m, checks, ~(owned[i] & busy[i]) | (Array(mine)[first] & Array(mine)[tail[i]]
                                     & (seqs[tail[i]] - seqs[first] + 1 == waiters[i])),
              f"{table} entry {i}: first waiter or tail not listed, or positions not "
              "consecutive")
    for s in range(slots):
        rp = next_slot.read_port(domain="comb")
        m.d.comb += rp.addr.eq(s)
        nxt, o = rp.data, owner[s]
        lemma(m, checks, ~own[s] | (Array(busy)[o] & Array(owned)[o]),
              f"slot {s} listed by {an} {table} entry without waiters")
        lemma(m, checks, ~own[s] | (Array(tail)[o] == s)
              | ((own >> nxt)[0] & (Array(owner)[nxt] == o) & (seqs[nxt] == seq[s] + 1)),
              f"slot {s}: its successor is not the next waiter of its list")
        first_o = Mux(regs["locked"] & (regs["lock_index"] == base + o), regs["lk_head"],
                      Array(head)[o])
        lemma(m, checks, ~own[s] | ((seq[s] >= seqs[first_o]) & (seq[s] <= seqs[Array(tail)[o]])),
              f"slot {s}: its position lies outside its list's")
        for t in range(s + 1, slots):
            lemma(m, checks, ~(own[s] & own[t] & (owner[s] == owner[t])) | (seq[s] != seq[t]),
                  f"slots {s} and {t}: one position in one list")
    return [u & o for u, o in zip(undrawn, owned)], listed


def pool_lemmas(m, checks, slots: int, busy, joinable, in_return, head, tail, regss, inside,
                waiters, next_slot, w_alloc, w_merge, w_oh, w_slot, w_tail, pops, ret_slot,
                table: str, owned=None):
    """:func:`waiter_list_lemmas` per pool: one pool of the whole table with one port, else
    a pool per port (§4.5; every per-port argument a list), each port's W writing and its
    response stages reading its own pool's entries only; the pools' listed slots are apart
    and together the table's ``inside``. Returns the per-entry "no response stage has read
    it" condition over the whole table and each pool's listed slots (with its W's). With
    pools shared by the ports, ``owned`` (per port, per entry) names each port's lists."""
    P, n = len(regss), len(busy)
    k = n // P if owned is None else n
    undrawn, listed = [Const(0, 1)] * n if owned is not None else [], []
    for p in range(P):
        part = slice(p * k, (p + 1) * k) if owned is None else slice(0, n)
        u, mine = waiter_list_lemmas(
            m, checks, slots, busy[part], joinable[part], in_return[part], head[part],
            tail[part], regss[p], inside if P == 1 else None, waiters[part], next_slot,
            w_alloc[p], w_merge[p], w_oh[p], w_slot[p], w_tail[p], pops[p], ret_slot[p], table,
            base=p * k if owned is None else 0, owned=None if owned is None else owned[p])
        undrawn = undrawn + u if owned is None else [a | b for a, b in zip(undrawn, u)]
        for q, other in enumerate(listed):
            lemma(m, checks, (mine & other) == 0,
                  f"the {table}'s pools {q} and {p} list one slot")
        listed.append(mine)
    if P > 1:
        lemma(m, checks, inside == _or(listed),
              f"the {table}'s waiting slots are its pools' listed slots and their Ws'")
    return undrawn, listed
