"""FlashAccel layouts (model/layout.py) and their effect in device runs (docs/flashaccel.md)."""

from __future__ import annotations

import dataclasses

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.layout import (KvLayout, LayoutError, PlaneMap, decode_phases,
                                 touched_experts, weight_layout, weight_tensors)
from hbfsim.model.planes import run_with_planes
from hbfsim.model.workloads import LAYOUT_GEOMETRY, layout_decode
from hbfsim.model.workloads_llm import _tensors
from hbfsim.shapes import model_shape

SMALL = dict(channels=2, subarrays_per_channel=6, planes_per_die=6, megaplane_planes=3,
             pages_per_block=4)
MOE = dataclasses.replace(model_shape("qwen3-235b-a22b").scaled(8), layers=1)


@pytest.mark.parametrize("kw", [{}, dict(placement="grouped"), dict(placement="contiguous"),
                                dict(stacks=2), dict(stacks=2, stack_select="contiguous")])
def test_megapages_are_one_page_per_plane_of_a_megaplane_through_the_mapper(kw):
    cfg = load_config(**(SMALL | kw))
    pm = PlaneMap(cfg)
    assert pm.planes == cfg.stacks * 12 and pm.megaplanes == cfg.stacks * 4
    for row in range(3):  # a hyperpage: K consecutive megapages cover every plane once
        planes = []
        for j in range(row * pm.megaplanes, (row + 1) * pm.megaplanes):
            pages = pm.megapage(j)
            mp = {pm.megaplane_of(p) for p in pages}
            assert len(mp) == 1 and len({pm.plane_of(p) for p in pages}) == pm.m
            planes += [pm.plane_of(p) for p in pages]
        assert sorted(planes) == list(range(pm.planes))
    # consecutive megapages go to different channels (links) first
    st0, ch0, _ = pm.order[0]
    st1, ch1, _ = pm.order[1]
    assert (st0, ch0) != (st1, ch1)


def test_a_layout_refuses_a_mapping_it_cannot_invert():
    with pytest.raises(LayoutError, match="placement must be interleave, grouped or "
                                          "contiguous for a layout, not 'explicit'"):
        PlaneMap(load_config(placement="explicit", explicit_map=[[0, 3, 1]]))
    with pytest.raises(LayoutError, match="partition-2r2w"):
        PlaneMap(load_config(channels=4, scheduler="partition-2r2w"))


def test_dense_orders_are_the_forward_pass_and_moe_orders_differ_in_the_experts():
    dense = model_shape("qwen3-1.7b").scaled(32)
    assert weight_tensors(dense, "declaration") == weight_tensors(dense, "execution") \
        == _tensors(dense)
    decl, exe = weight_tensors(MOE, "declaration"), weight_tensors(MOE, "execution")
    assert sorted(decl) == sorted(exe) and decl != exe
    names = [n for n, _ in exe]
    first_down = names.index("model.layers.0.mlp.experts.0.down_proj.weight")
    assert names.index("model.layers.0.mlp.experts.127.up_proj.weight") < first_down
    dn = [n for n, _ in decl]
    assert dn.index("model.layers.0.mlp.experts.0.down_proj.weight") < \
        dn.index("model.layers.0.mlp.experts.1.gate_proj.weight")


@pytest.mark.parametrize("layout", ["declaration", "execution"])
def test_layouts_place_every_byte_once(layout):
    cfg = load_config(**SMALL)
    shape = dataclasses.replace(model_shape("qwen3-1.7b").scaled(32), layers=1)
    lay = weight_layout(cfg, shape, layout)
    pages = [lay.page(k) for k in range(-(-lay.stream_bytes // PAGE_BYTES))]
    assert len(set(pages)) == len(pages)  # stream pages are distinct logical pages
    if layout == "declaration":
        assert pages == list(range(len(pages)))
    else:  # every hyperpage row is full before the next starts
        pm = lay.planes
        for r in range(len(pages) // pm.planes):
            row = pages[r * pm.planes:(r + 1) * pm.planes]
            assert sorted(pm.plane_of(p) for p in row) == list(range(pm.planes))


def test_a_layout_larger_than_the_capacity_is_refused():
    cfg = load_config(**SMALL, capacity_bytes=12 * 4 * PAGE_BYTES)
    with pytest.raises(LayoutError, match="beyond the 48 pages of capacity_bytes 196608"):
        weight_layout(cfg, MOE, "execution")
    with pytest.raises(LayoutError, match="beyond the 48 pages"):
        weight_layout(cfg, MOE, "declaration")


def test_touched_experts_and_phases():
    t = touched_experts(MOE, batch=1, seed=3)
    assert list(t) == [0] and len(t[0]) == MOE.active_experts
    assert touched_experts(MOE, batch=16, seed=3) == touched_experts(MOE, batch=16, seed=3)
    names = [k for k, _ in decode_phases(MOE, t)]
    assert names.index("model.layers.0.mlp.experts.gate_up") + 1 == \
        names.index("model.layers.0.mlp.experts.down")
    assert names[0] == "embed" and names[-1] == "lm_head"


def test_hyperpage_issue_order_fires_one_plane_per_megaplane_in_turn():
    cfg = load_config(**SMALL)
    lay = weight_layout(cfg, MOE, "execution")
    pm = lay.planes
    rows = 3
    pages = sorted((lay.page(k) for k in range(rows * pm.planes)), key=pm.hyperpage_key)
    for k in range(0, len(pages), pm.megaplanes):
        group = pages[k:k + pm.megaplanes]  # the i-th plane of every megaplane of a row
        assert len({pm.megaplane_of(p) for p in group}) == pm.megaplanes
        assert len({pm.plane_of(p) % pm.m for p in group}) == 1


# ---------------------------------------------------------------- KV
def test_kv_slices_start_megapages_and_requests_own_their_blocks():
    cfg = load_config(**SMALL)
    shape = dataclasses.replace(model_shape("qwen3-1.7b").scaled(8), layers=2)
    kv = KvLayout(cfg, shape, slice_tokens=16, max_tokens=64, first_row=8)
    token = kv.token_bytes
    assert 16 * token <= kv.megapage_bytes
    owned = [kv.blocks(r) for r in range(5)]
    for a in range(5):
        for b in range(a + 1, 5):
            assert not owned[a] & owned[b]  # eviction of one request erases only its blocks
    pm, ppb = kv.planes, cfg.pages_per_block
    for r in range(5):
        for layer in range(2):
            for tok in range(0, 64, 16):
                pages = kv.slice_pages(r, layer, tok)
                # a slice starts at the first page of a megapage: M planes of one megaplane
                assert len({pm.megaplane_of(p) for p in pages}) == 1
                a = kv.address(r, layer, tok)
                assert (a - cfg.base_address) // PAGE_BYTES == pages[0]
                assert (a - cfg.base_address) % PAGE_BYTES == 0
                row = pm.mapper.channel_of(pm.mapper.stack_of(pages[0])[1])[1] \
                    // cfg.subarrays_per_channel
                for p in pages:
                    assert (pm.plane_of(p), row // ppb) in owned[r]
    with pytest.raises(LayoutError, match="slice_tokens 4096 .* exceeds a megapage"):
        KvLayout(cfg, shape, slice_tokens=4096, max_tokens=4096)
    with pytest.raises(LayoutError, match="first_row must be a multiple of pages_per_block"):
        KvLayout(cfg, shape, slice_tokens=16, max_tokens=64, first_row=3)


# ---------------------------------------------------------------- device runs
@pytest.fixture(scope="module")
def runs():
    """One decode step of Qwen3-235B-A22B / 8 (one layer, 16 routed tokens) under both
    layouts on the scaled FlashAccel geometry (72 planes, megaplanes of 12)."""
    cfg = load_config(base=LAYOUT_GEOMETRY)
    out = {}
    for layout in ("declaration", "execution"):
        prog = layout_decode(cfg, layout=layout)
        res, act = run_with_planes(cfg, prog)
        kernels = {k["name"]: act.window(k["launch"], k["end"]) | e
                   for k, e in zip(res.kernels, prog.expected["kernels"])}
        out[layout] = (res, act.window(res.start_tick, res.end_tick), kernels, act)
    return cfg, out


def test_execution_order_keeps_more_planes_busy_and_the_step_shorter(runs):
    cfg, out = runs
    (rd, d, _, _), (re_, e, _, _) = out["declaration"], out["execution"]
    assert rd.requests == d["ops"] and re_.requests == e["ops"]  # one NAND read per page
    assert e["busy_fraction"] > d["busy_fraction"] + 0.1
    assert re_.span_ticks < 0.9 * rd.span_ticks


def test_the_straggler_is_the_most_loaded_plane(runs):
    """Each expert kernel lasts as long as its most loaded plane needs: span = max pages on
    one plane x tR (+ the port and link overheads, under 1 %)."""
    cfg, out = runs
    for layout in ("declaration", "execution"):
        k = out[layout][2]
        for name in ("model.layers.0.mlp.experts.gate_up", "model.layers.0.mlp.experts.down"):
            w = k[name]
            assert w["max_plane_ops"] == w["max_plane_pages"]
            assert w["max_plane_pages"] * cfg.t_read_ticks <= w["span_ticks"] \
                < 1.01 * w["max_plane_pages"] * cfg.t_read_ticks + 2000
    # declaration order: the down projections never reach a third of the planes (2/3 of
    # an expert's 3 x 48 pages repeat on the same 72 planes); execution order: all planes
    dk, ek = out["declaration"][2], out["execution"][2]
    down = "model.layers.0.mlp.experts.down"
    assert dk[down]["planes_used"] < 0.75 * cfg.subarrays_per_stack
    assert ek[down]["planes_used"] == cfg.subarrays_per_stack
    assert ek[down]["span_ticks"] < dk[down]["span_ticks"]


def test_busy_over_time_adds_up_to_the_busy_fraction(runs):
    cfg, out = runs
    res, whole, _, act = out["execution"]
    bins = act.busy_over_time(res.start_tick, res.end_tick, cfg.t_read_ticks)
    mean = sum(bins) * cfg.t_read_ticks / (res.end_tick - res.start_tick + 1)
    assert mean / act.planes == pytest.approx(whole["busy_fraction"], rel=1e-9)
    assert max(bins) <= act.planes
