"""The FlashAccel decode-step model and its device-derived HBF bandwidth
(serve/flashaccel/step.py, efficiency.py)."""

from __future__ import annotations

import pytest

from hbfsim.serve.flashaccel.efficiency import kv_balance, stack_timing, weight_balance
from hbfsim.serve.flashaccel.node import GPUS
from hbfsim.serve.flashaccel.step import Features, HbfTier, StepModel
from hbfsim.serve.models import model_costs

MODEL = "qwen3-235b-a22b"


@pytest.fixture(scope="module")
def tier():
    t, cfg = stack_timing()
    return HbfTier(t.read_bw, t.read_latency_s, t.kv_read_bw, 40e9, 20e9,
                   float(cfg.capacity_bytes), staging_bytes=768 * 256 * 4096.0)


def _model(g, tier, feat=Features()):
    return StepModel(model_costs(MODEL), GPUS[g], tier, feat,
                     lambda on, b: weight_balance(MODEL, on, b), lambda: kv_balance(MODEL))


def test_the_layout_balance_comes_from_the_plane_loads():
    on, off = weight_balance(MODEL, True, 16), weight_balance(MODEL, False, 16)
    assert 0 < off < on <= 1          # execution order + replication keeps more planes busy
    assert 0 < kv_balance(MODEL) <= 1


def test_each_mechanism_off_makes_the_step_no_faster(tier):
    full = _model("csi", tier).step(256, 9000, 10640)
    for feat in (Features(prefetch=False), Features(weight_layout=False),
                 Features(kv_layout=False), Features(False, False, False)):
        assert _model("csi", tier, feat).step(256, 9000, 10640)["seconds"] >= full["seconds"]
    assert full["hbf_read"] > 0 and 0 < full["hbm_fraction"] < 1
    assert full["hbf_read_bw"] <= 6 * tier.stream_bw


def test_the_best_batch_meets_slo_and_capacity_and_one_more_does_not(tier):
    for g in ("baseline", "csi", "cli"):
        sm = _model(g, tier)
        b, st = sm.best_batch(0.1, 9000, 10640)
        assert b > 0 and st["seconds"] <= 0.1 and sm.fits(b, 10640)
        nxt = sm.step(b + 1, 9000, 10640)["seconds"] > 0.1 or not sm.fits(b + 1, 10640)
        assert nxt
    base = _model("baseline", tier)
    assert base.fits(1, 10640) and not base.fits(10_000, 10640)


def test_a_gpu_with_hbf_needs_its_tier():
    with pytest.raises(ValueError, match="csi has HBF stacks and needs an HbfTier"):
        StepModel(model_costs(MODEL), GPUS["csi"], None, Features(), None, None)
