"""The controller proof's lemmas across its blocks (docs/formal.md "Induction").

A block's own lemmas (:func:`hbfsim.rtl.checks.lemma`) make its properties inductive when it
is proved alone, with its neighbours' promises assumed. Inside the controller those promises
are the neighbours' behaviour, asserted; for the controller's induction step they need what
ties the blocks' states together, stated here over the registers each block exposes in a
proof (``block.proof``, built only when ``checks`` is ``"formal"`` or ``"proof"``):

* **media**: the commands outstanding on the media (the proof harness's record, one per busy
  subarray, and the command register of each channel) are the channel queues' busy
  subarrays, each names an entry of that channel whose issue has applied (MSHR ISSUED,
  write buffer PROGRAM) or, in the command register, one whose issue is registered, no two
  name one entry, and every such entry is outstanding;
* **channel queues**: every operation a channel queue holds names a QUEUED entry of that
  channel whose issue is not registered, no two name one entry, and every such entry is
  held; with a pool per channel (§4.5) a pool's entries hold its channel's pages;
* **request slots**: every slot in use is held by exactly one place of the pipeline: an
  ingress queue Q, a dispatch register M, a table's waiting slots (its waiter lists and its
  W; per pool with a pool per channel), a response port's R or K, or its egress E; no place
  holds a free slot; in the channel shape a port's places hold the port's own slots;
* **responses**: an entry is drained (its last waiter taken, not yet launched) exactly when
  a response port's R or K holds its last waiter; with a pool per channel a port's R and K
  hold its own pool's entries;
* **requests**: Q's and M's byte ranges lie in their pages, M's target and every table
  entry's target is its page's mapping (a :class:`~hbfsim.rtl.mapper.Mapper` of the proof's
  own), and in the channel shape M holds a request of its own channel;
* **shared pools** (the channel shape with ``pools = "stack"``, §4.2.3), besides: each W's
  payload keeps M's promises (a byte range in its page, a target that is its page's mapping
  and of the W's own channel), a W allocates a FREE entry and no two Ws one entry, a port's
  R and K hold waiters of its own channel's entries in RETURN, and R holds the waiter after
  K's (K's is not the last of R's entry).

True of every reachable state (the BMC checks them from reset); they are ``Assert`` in the
proof only, never in the design.
"""

from __future__ import annotations

__all__ = ["controller_lemmas"]

from amaranth.hdl import Assert, Array, Cat, Const, Mux, Value

from hbfsim.config import PAGE_BYTES
from hbfsim.rtl.layouts import EntryKind, ReqOp, WbState
from hbfsim.rtl.mapper import Mapper
from hbfsim.rtl.mshr import MshrState


def controller_lemmas(m, dut, media) -> None:
    """Add the lemmas of ``dut`` (an elaborated :class:`~hbfsim.rtl.controller.Controller`
    with ``checks="formal"``) to ``m``; ``media`` is the harness's record per channel
    (busy subarrays, their tags)."""
    _media_lemmas(m, dut, media)
    _queue_lemmas(m, dut)
    _slot_lemmas(m, dut)
    _response_lemmas(m, dut)
    _request_lemmas(m, dut)


def _lemma(m, cond, msg):
    m.d.sync += Assert(cond, msg, src_loc_at=1)


class _Entries:
    """The two tables' entries as a command tag (kind, index) names them."""

    def __init__(self, dut):
        self.mshr = dut.blocks["mshr"].proof
        self.wb = dut.blocks["write_buffer"].proof

    def where(self, tag, mshr, wb):
        """The condition ``mshr(i)`` or ``wb(i)`` of the entry ``tag`` names (false for an
        index beyond its table)."""
        tag = Value.cast(tag)
        kind, index = tag[0], tag[1:]
        conds = []
        for table, cond in ((self.mshr, mshr), (self.wb, wb)):
            n = len(table["state"])
            conds.append((index < n) & Array([cond(i) for i in range(n)])[index])
        return Mux(kind == EntryKind.WBUF.value, conds[1], conds[0])

    def channel_is(self, tag, c):
        return self.where(tag, lambda i: self.mshr["target"][i].channel == c,
                          lambda i: self.wb["target"][i].channel == c)

    def queued(self, tag, registered):
        """QUEUED, with its issue registered (the command register's cycle) or not (in a
        channel queue)."""
        def flag(q):
            return q if registered else ~q
        return self.where(
            tag, lambda i: (self.mshr["state"][i] == MshrState.QUEUED)
            & flag(self.mshr["issue_q"][i]),
            lambda i: (self.wb["state"][i] == WbState.QUEUED) & flag(self.wb["issue_q"][i]))

    def applied(self, tag):
        """Its issue applied and its completion not yet registered (MSHR ISSUED, write buffer
        PROGRAM)."""
        mshr, wb = self.mshr, self.wb
        return self.where(
            tag, lambda i: (mshr["state"][i] == MshrState.ISSUED) & ~mshr["issue_q"][i]
            & ~mshr["done_q"][i],
            lambda i: (wb["state"][i] == WbState.PROGRAM) & ~wb["issue_q"][i])


def _tag(kind, i):
    return kind.value | (i << 1)


def _apart(m, items, msg):
    """No two valid items of ``items`` ((valid, tag) pairs) name one entry."""
    for a in range(len(items)):
        for b in range(a):
            (va, ta), (vb, tb) = items[a], items[b]
            _lemma(m, ~(va & vb) | (ta != tb), msg)


def _named(items, kind, i):
    return Cat(*[v & (t == _tag(kind, i)) for v, t in items]).any()


def _media_lemmas(m, dut, media) -> None:
    entries = _Entries(dut)
    mshr, wb = entries.mshr, entries.wb
    queues = dut.blocks["scheduler"].queues
    outstanding = []   # (valid, tag) of every command on the media or in a command register
    for c, (busy, tags) in enumerate(media):
        cmd, qbusy = dut.cmd[c], queues[c].proof["busy"]
        width = len(qbusy)
        in_reg = Mux(cmd.valid, Const(1, width) << cmd.subarray, 0)[:width]
        _lemma(m, qbusy == (busy | in_reg),
               f"channel {c}: the queue's busy subarrays differ from the media's commands")
        _lemma(m, ~cmd.valid | ~busy.bit_select(cmd.subarray, 1),
               f"channel {c}: the command register names a subarray the media holds busy")
        tag = cmd.tag.as_value()
        _lemma(m, ~cmd.valid | (entries.queued(tag, registered=True)
                                & entries.channel_is(tag, c)),
               f"channel {c}: the command register names an entry whose issue is not "
               "registered, or of another channel")
        outstanding.append((cmd.valid, tag))
        for s, t in enumerate(tags):
            _lemma(m, ~busy[s] | (entries.applied(t) & entries.channel_is(t, c)),
                   f"channel {c} subarray {s}: the media's command names an entry not issued, "
                   "or of another channel")
            outstanding.append((busy[s], t))
    _apart(m, outstanding, "two commands outstanding name one entry")
    for i, st in enumerate(mshr["state"]):
        live = ((st == MshrState.ISSUED) & ~mshr["done_q"][i]) | mshr["issue_q"][i]
        _lemma(m, ~live | _named(outstanding, EntryKind.MSHR, i),
               f"MSHR entry {i}: issued, and no command outstanding names it")
    for i, st in enumerate(wb["state"]):
        live = (st == WbState.PROGRAM) | wb["issue_q"][i]
        _lemma(m, ~live | _named(outstanding, EntryKind.WBUF, i),
               f"write-buffer entry {i}: programming, and no command outstanding names it")


def _queue_lemmas(m, dut) -> None:
    entries = _Entries(dut)
    mshr, wb = entries.mshr, entries.wb
    ops = []
    for c, q in enumerate(dut.blocks["scheduler"].queues):
        for k, (valid, op) in enumerate(q.proof["held"]):
            tag = op.tag.as_value()
            _lemma(m, ~valid | (entries.queued(tag, registered=False)
                                & entries.channel_is(tag, c)),
                   f"channel {c} queue slot {k}: names an entry not QUEUED, or of another "
                   "channel")
            ops.append((valid, tag))
    _apart(m, ops, "two queued operations name one entry")
    for t, kind, name in ((mshr, EntryKind.MSHR, "MSHR"), (wb, EntryKind.WBUF, "write-buffer")):
        state = MshrState.QUEUED if kind == EntryKind.MSHR else WbState.QUEUED
        for i, st in enumerate(t["state"]):
            _lemma(m, ~((st == state) & ~t["issue_q"][i]) | _named(ops, kind, i),
                   f"{name} entry {i}: QUEUED and in no channel queue")


def _slot_lemmas(m, dut) -> None:
    blocks = dut.blocks
    used = blocks["admission"].proof["used"]
    n = len(used)

    def one_hot(valid, slot):   # (a slot number beyond the slots is held by nobody: stated)
        _lemma(m, ~valid | (slot < n), "request slots: a slot number beyond the slots held")
        return Mux(valid, Const(1, n) << slot, 0)[:n]

    holders = []   # (name, port or None, a vector over the slots)
    for p, q in enumerate(blocks["ingress"]):
        for j, (valid, item) in enumerate(q.proof["held"]):
            holders.append((f"Q{p} item {j}", p, one_hot(valid, item.slot)))
    for p, d in enumerate(blocks["dispatch"]):
        holders.append((f"M{p}", p, one_hot(d["valid"], d["req"].slot)))
    for table, name in (("mshr", "the MSHR"), ("write_buffer", "the write buffer")):
        pools = blocks[table].proof["pools"]
        if pools is not None and len(pools) > 1:   # a pool per port (§4.5)
            holders += [(f"{name}'s pool {p}", p, vec) for p, vec in enumerate(pools)]
        else:
            holders.append((name, None, blocks[table].proof["inside"]))
    for p, arb in enumerate(blocks["response"]):
        for stage in ("r", "k"):
            valid, waiter = arb.proof[stage]
            holders.append((f"{stage.upper()}{p}", p, one_hot(valid, waiter.slot)))
        for j, (valid, item) in enumerate(arb.proof["egress"].proof["held"]):
            holders.append((f"E{p} item {j}", p, one_hot(valid, item.slot)))
    held = Cat(*used)
    owner = blocks["admission"].proof.get("owner")
    everyone = 0
    for name, p, vec in holders:
        _lemma(m, (vec & ~held) == 0, f"request slots: {name} holds a free slot")
        _lemma(m, (vec & everyone) == 0, f"request slots: {name} holds a slot held elsewhere")
        everyone = everyone | vec
        if owner is not None and p is not None:   # the channel shape: a port's own slots
            mine = Cat(*[u & (o == p) for u, o in zip(used, owner)])
            _lemma(m, (vec & ~mine) == 0, f"request slots: {name} holds another port's slot")
    _lemma(m, everyone == held, "request slots: a slot in use is held nowhere")


def _shared_pools(dut) -> bool:
    """The channel shape with its pools shared by the ports (§4.2.3). Its step needs the
    lemmas stated under this condition (docs/formal.md "The shared pools"); the other
    configurations' steps go through without them, and each lemma costs solver time."""
    return len(dut.blocks["response"]) > 1 and dut.cfg.pools != "channel"


def _response_lemmas(m, dut) -> None:
    blocks = dut.blocks
    tables = ((EntryKind.MSHR, "MSHR", blocks["mshr"].proof["drained"]),
              (EntryKind.WBUF, "write-buffer", blocks["write_buffer"].proof["drained"]))
    named_tables = ((EntryKind.MSHR, "MSHR", "mshr", MshrState.RETURN),
                    (EntryKind.WBUF, "write-buffer", "write_buffer", WbState.RETURN))
    lasts = []   # (holds a last waiter, kind, index) of every R and K
    P = len(blocks["response"])
    shared = _shared_pools(dut)
    for p, arb in enumerate(blocks["response"]):
        (rv, rw), (kv, kw) = arb.proof["r"], arb.proof["k"]
        if shared:   # R holds the waiter after K's (DP7)
            _lemma(m, ~(rv & kv & (rw.kind == kw.kind) & (rw.index == kw.index)) | ~kw.last,
                   f"K{p} holds the last waiter of the entry whose next waiter R{p} holds")
        for stage in ("r", "k"):
            valid, w = arb.proof[stage]
            lasts.append((valid & w.last, w.kind, w.index))
            for kind, name, drained in tables if P > 1 and dut.cfg.pools == "channel" else ():
                k = len(drained) // P   # §4.5: a port answers its own pool's entries
                _lemma(m, ~(valid & (w.kind == kind))
                       | ((w.index >= p * k) & (w.index < (p + 1) * k)),
                       f"{stage.upper()}{p} holds a waiter of another pool's {name} entry")
            for kind, name, table, _ in named_tables if shared else ():
                # a port answers its own channel's entries (§8)
                channel = Array([t.channel for t in blocks[table].proof["target"]])
                n = len(blocks[table].proof["target"])
                _lemma(m, ~(valid & (w.kind == kind)) | ((w.index < n) & (channel[w.index] == p)),
                       f"{stage.upper()}{p} holds a waiter of another channel's {name} entry")
            for kind, name, table, ret in named_tables if shared else ():
                # R and K read entries in RETURN (DP7)
                state = blocks[table].proof["state"]
                _lemma(m, ~(valid & (w.kind == kind))
                       | ((w.index < len(state)) & (Array(state)[w.index] == ret)),
                       f"{stage.upper()}{p} holds a waiter of {name} entry not in RETURN")
            for kind, name, drained in tables:
                _lemma(m, ~(valid & w.last & (w.kind == kind))
                       | ((w.index < len(drained)) & Array(drained)[w.index]),
                       f"{stage.upper()}{p} holds the last waiter of {name} entry not drained")
    for kind, name, drained in tables:
        for i, d in enumerate(drained):
            held = Cat(*[v & (k == kind) & (x == i) for v, k, x in lasts])
            _lemma(m, d == held.any(), f"{name} entry {i}: drained, and no R or K holds its "
                   "last waiter, or both do")
            _lemma(m, (held & (held - 1)) == 0,
                   f"{name} entry {i}: its last waiter held twice")


def _request_lemmas(m, dut) -> None:
    """Q's and M's requests keep the host's promise (a byte range inside its page); M's
    target, and every table entry's, is its page's mapping (§3: X maps Q's head as M loads
    it, W writes M's target with M's page)."""

    def inside_page(req):
        return (req.bytes >= 1) & (req.offset + req.bytes <= PAGE_BYTES)

    for p, q in enumerate(dut.blocks["ingress"]):
        for j, (valid, item) in enumerate(q.proof["held"]):
            _lemma(m, ~valid | inside_page(item),
                   f"Q{p} item {j}: a byte range outside its page")
    for p, d in enumerate(dut.blocks["dispatch"]):
        _lemma(m, ~d["valid"] | inside_page(d["req"]), f"M{p}: a byte range outside its page")
        mapper = Mapper(dut.cfg)
        m.submodules[f"lemma_mapper{p}"] = mapper
        req = d["req"]
        m.d.comb += [mapper.page.eq(req.page), mapper.write.eq(req.op == ReqOp.WRITE)]
        _lemma(m, ~d["valid"] | (d["target"].as_value() == mapper.target.as_value()),
               f"M{p}'s target is not its page's mapping")
        if len(dut.blocks["dispatch"]) > 1:   # §1: a request enters its channel's port
            _lemma(m, ~d["valid"] | (d["target"].channel == p),
                   f"M{p} holds a request of another channel")
    shared = _shared_pools(dut)
    for table, free, write in (("mshr", MshrState.FREE, 0), ("write_buffer", WbState.FREE, 1)):
        t = dut.blocks[table].proof
        # shared pools: W's allocation writes its payload's page and target into the entry
        # (DP1), from M's; its merge or allocation adds the payload's bytes, M's byte range
        ws = zip(t["w_alloc"], t["w_merge"], t["w_payload"]) if shared else ()
        for p, (alloc, merge, d) in enumerate(ws):
            end = d.offset + d.bytes if write else d.bytes
            _lemma(m, ~(alloc | merge) | ((d.bytes >= 1) & (end <= PAGE_BYTES)),
                   f"{table}: W{p}'s byte range lies outside its page")
            mapper = Mapper(dut.cfg)
            m.submodules[f"lemma_mapper_{table}_w{p}"] = mapper
            m.d.comb += [mapper.page.eq(d.page), mapper.write.eq(write)]
            _lemma(m, ~alloc | (d.target.as_value() == mapper.target.as_value()),
                   f"{table}: W{p}'s allocation's target is not its page's mapping")
            _lemma(m, ~alloc | (d.target.channel == p),
                   f"{table}: W{p} allocates for a page of another channel")
        # and takes a FREE entry, one no other port's W takes (DP4: M took it off the free
        # list)
        for i, st in enumerate(t["state"] if shared else ()):
            news = [w[i] for w in t["w_new"]]
            _lemma(m, ~Cat(*news).any() | (st == free),
                   f"{table} entry {i}: a W allocates it, not FREE")
            for p in range(len(news)):
                for q in range(p):
                    _lemma(m, ~(news[p] & news[q]), f"{table} entry {i}: W{q} and W{p} "
                           "allocate it")
        for i, (st, pg, tg) in enumerate(zip(t["state"], t["page"], t["target"])):
            mapper = Mapper(dut.cfg)
            m.submodules[f"lemma_mapper_{table}{i}"] = mapper
            m.d.comb += [mapper.page.eq(pg), mapper.write.eq(write)]
            _lemma(m, (st == free) | (tg.as_value() == mapper.target.as_value()),
                   f"{table} entry {i}: its target is not its page's mapping")
    P = len(dut.blocks["response"])
    if P > 1 and dut.cfg.pools == "channel":   # §4.5: a pool's entries hold its channel's pages
        for table, free in (("mshr", MshrState.FREE), ("write_buffer", WbState.FREE)):
            t = dut.blocks[table].proof
            k = len(t["state"]) // P
            for i, (st, tg) in enumerate(zip(t["state"], t["target"])):
                _lemma(m, (st == free) | (tg.channel == i // k),
                       f"{table} entry {i} of pool {i // k} holds a page of another channel")
