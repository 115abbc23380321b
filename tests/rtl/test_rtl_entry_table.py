"""rtl/entry_table.py: the one-hot enqueue offer against the priority-encoder offer."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream
from rtl_helpers import simulate, small_config

from hbfsim.rtl.entry_table import offer_enqueues, offer_enqueues_onehot
from hbfsim.rtl.layouts import EntryKind, Widths, queue_op_layout, target_layout


def _offers(entries: int, channels: int, seed: int, cycles: int = 200) -> tuple[list, list]:
    """Drive random ready bits, targets and port ``ready`` into both offers; return what each
    put on its ports (valid, tag index, subarray, page, fire, grant or index per channel)."""
    cfg = small_config(channels=channels, mshr_entries=entries)
    w = Widths.of(cfg)
    m = Module()
    ready = [Signal(name=f"ready{i}") for i in range(entries)]
    target = [Signal(target_layout(w), name=f"target{i}") for i in range(entries)]
    sig = stream.Signature(queue_op_layout(w))
    ports_a = [sig.create(path=(f"a{c}",)) for c in range(channels)]
    ports_b = [sig.create(path=(f"b{c}",)) for c in range(channels)]
    take = [Signal(name=f"take{c}") for c in range(channels)]
    for c in range(channels):
        m.d.comb += [ports_a[c].ready.eq(take[c]), ports_b[c].ready.eq(take[c])]
    fire_a, index_a = offer_enqueues(m, ports_a, ready, target, EntryKind.MSHR)
    fire_b, index_b, grant_b = offer_enqueues_onehot(m, ports_b, ready, target, EntryKind.MSHR,
                                                    checks=True)
    rng = random.Random(seed)
    got_a, got_b = [], []

    async def tb(ctx):
        for _ in range(cycles):
            p = rng.choice((0.1, 0.5, 0.9))
            for i in range(entries):
                ctx.set(ready[i], rng.random() < p)
                ctx.set(target[i].channel, rng.randrange(channels))
                ctx.set(target[i].subarray, rng.randrange(cfg.subarrays_per_channel))
                ctx.set(target[i].local, rng.randrange(1 << len(target[i].local)))
            for c in range(channels):
                ctx.set(take[c], rng.random() < 0.7)
            for ports, fire, index, out in ((ports_a, fire_a, index_a, got_a),
                                            (ports_b, fire_b, index_b, got_b)):
                for c in range(channels):
                    valid = ctx.get(ports[c].valid)
                    out.append((c, valid, ctx.get(fire[c]), ctx.get(index[c]),
                                ctx.get(ports[c].payload.tag.index) if valid else None,
                                ctx.get(ports[c].payload.subarray) if valid else None,
                                ctx.get(ports[c].payload.page) if valid else None))
            for c in range(channels):
                # the grant is the index's one-hot form (the per-entry enable it replaces)
                idx = ctx.get(index_b[c])
                valid = ctx.get(ports_b[c].valid)
                assert [ctx.get(g) for g in grant_b[c]] == [
                    int(valid and i == idx) for i in range(entries)]
            await ctx.tick()   # the equivalence Assert of offer_enqueues_onehot runs here

    simulate(m, tb)
    return got_a, got_b


@pytest.mark.parametrize("entries,channels", [(1, 1), (3, 2), (8, 2), (32, 4)])
@pytest.mark.parametrize("seed", [1, 2])
def test_onehot_offer_equals_priority_encoder_offer(entries, channels, seed):
    a, b = _offers(entries, channels, seed)
    assert a == b
    assert any(row[1] for row in a) and not all(row[1] for row in a)
