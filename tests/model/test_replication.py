"""Straggler replication (model/replication.py): plans, and its effect in device runs of
``layout-decode`` (docs/flashaccel.md)."""

from __future__ import annotations

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.gpu import GpuProgram, Kernel, Producer
from hbfsim.model.layout import PlaneMap
from hbfsim.model.planes import run_with_planes
from hbfsim.model.replication import megapage_of, plan_kernel, replicate_program
from hbfsim.model.workloads import LAYOUT_GEOMETRY, layout_decode

SMALL = dict(channels=2, subarrays_per_channel=6, planes_per_die=6, megaplane_planes=3,
             pages_per_block=4)
EXPERTS = ("model.layers.0.mlp.experts.gate_up", "model.layers.0.mlp.experts.down")


def _skewed(pm: PlaneMap, heavy: int, rows: int) -> list[int]:
    """Every page of megaplane ``heavy`` for ``rows`` rows, one megapage of each other."""
    pages = []
    for j in range(rows * pm.megaplanes):
        mp = pm.megapage(j)
        if pm.megaplane_of(mp[0]) == heavy or j < pm.megaplanes:
            pages += mp
    return pages


@pytest.mark.parametrize("heavy,rows", [(0, 5), (2, 8), (3, 2)])
def test_a_plan_keeps_every_megaplane_at_the_average_load(heavy, rows):
    pm = PlaneMap(load_config(**SMALL))
    pages = _skewed(pm, heavy, rows)
    plan = plan_kernel(pm, pages)
    megapages = {megapage_of(pm, p) for p in pages}
    assert plan.megapages == len(megapages)
    assert plan.target == -(-len(megapages) // pm.megaplanes)
    assert plan.max_before == rows
    assert sorted(plan.hbf_pages + plan.hbm_pages) == sorted(pages)
    load = {}
    for p in plan.hbf_pages:
        load.setdefault(pm.megaplane_of(p), set()).add(megapage_of(pm, p))
    assert max(len(v) for v in load.values()) == min(plan.target, rows)
    assert plan.max_plane_after == min(plan.target, rows) < plan.max_plane_before or \
        rows <= plan.target
    # the excess megapages are whole: every page of a redirected megapage goes to HBM
    gone = {megapage_of(pm, p) for p in plan.hbm_pages}
    assert len(plan.hbm_pages) == pm.m * len(gone)
    assert plan.copied_bytes == PAGE_BYTES * len(plan.hbm_pages)
    off = plan_kernel(pm, pages, enabled=False)
    assert off.hbf_pages == pages and not off.hbm_pages and off.target == plan.target


def test_a_balanced_kernel_copies_nothing():
    pm = PlaneMap(load_config(**SMALL))
    pages = [p for j in range(3 * pm.megaplanes) for p in pm.megapage(j)]
    plan = plan_kernel(pm, pages)
    assert not plan.hbm_pages and plan.max_plane_after == plan.max_plane_before == 3


def test_replication_refuses_an_access_that_is_not_a_page_read():
    cfg = load_config(**SMALL)
    prog = GpuProgram([Kernel("k", [Producer([("R", cfg.base_address, 128)])])])
    with pytest.raises(ValueError, match="replication needs one-page reads"):
        replicate_program(cfg, prog)


# ---------------------------------------------------------------- device runs
@pytest.fixture(scope="module")
def runs():
    """``layout-decode`` (Qwen3-235B-A22B / 8, one layer, batch 16) on the scaled geometry,
    both layouts, with and without replication."""
    cfg = load_config(base=LAYOUT_GEOMETRY)
    out = {}
    for layout in ("declaration", "execution"):
        for on in (False, True):
            prog = replicate_program(cfg, layout_decode(cfg, layout=layout), on)
            res, act = run_with_planes(cfg, prog)
            kernels = {k["name"]: act.window(k["launch"], k["end"]) | p
                       for k, p in zip(res.kernels, prog.expected["replication"])}
            out[layout, on] = (res, act.window(res.start_tick, res.end_tick), kernels,
                               prog.expected)
    return cfg, out


@pytest.mark.parametrize("layout", ["declaration", "execution"])
def test_replication_removes_the_stragglers_tail(runs, layout):
    cfg, out = runs
    r0, w0, k0, e0 = out[layout, False]
    r1, w1, k1, e1 = out[layout, True]
    assert r1.requests == w1["ops"] == e1["requests"]  # only the kept pages reach HBF
    assert r0.requests - r1.requests == e1["hbm_bytes"] // PAGE_BYTES > 0
    assert e0["hbm_bytes"] == 0
    tr = cfg.t_read_ticks
    cut = 0
    for name in EXPERTS:
        a, b = k0[name], k1[name]
        # the run's most loaded plane is the plan's; after, at most the average load
        assert a["max_plane_ops"] == a["max_plane_pages_before"]
        assert b["max_plane_ops"] == b["max_plane_pages_after"] <= b["target"]
        # each kernel lasts its most loaded plane's pages x tR (within 1 %)
        assert b["span_ticks"] < 1.01 * b["max_plane_ops"] * tr + 2000
        if b["hbm_pages"]:
            cut += 1
            assert b["span_ticks"] < a["span_ticks"]
            assert b["busy_fraction"] > a["busy_fraction"]
    assert cut >= 1
    assert r1.span_ticks < r0.span_ticks
    assert w1["busy_fraction"] > w0["busy_fraction"]
