"""The calibrated cost model's parts (issue 25): GEMM tile/wave quantization, collectives with a
latency term, BF16 activations of FP8 models, load imbalance, the parameters' provenance, and
the validation page against the data file (docs/validation-serving.md)."""

import dataclasses
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from hbfsim.serve.calibration import (COST_SOURCES, FITTED, calibrated_params, cost_params,
                                      fitted_values, format_cost_provenance)
from hbfsim.serve.collectives import allreduce_seconds, alltoall_seconds, bus_bandwidth
from hbfsim.serve.cost import CostModel, CostParams
from hbfsim.serve.gemm import GemmTiles, gemm_efficiency, gemm_seconds
from hbfsim.serve.hardware import make_node
from hbfsim.serve.imbalance import max_load_factor
from hbfsim.serve.models import model_costs, serving_shape
from hbfsim.shapes import model_shape

PEAK, ETA, SMS, TILES = 1978.9e12, 0.6, 132, GemmTiles()
DIMS = (1, 7, 64, 127, 128, 129, 1000, 4096, 8192)


def test_gemm_time_is_monotone_and_efficiency_bounded():
    for m, n, k in itertools.product(DIMS, DIMS[2:], (128, 1000, 8192)):
        t = gemm_seconds(m, n, k, PEAK, ETA, SMS, TILES, 1)
        assert t >= gemm_seconds(max(m - 1, 1), n, k, PEAK, ETA, SMS, TILES, 1)
        assert t <= gemm_seconds(m + 1, n, k, PEAK, ETA, SMS, TILES, 1)
        assert t <= gemm_seconds(m, n + 1, k, PEAK, ETA, SMS, TILES, 1)
        assert t <= gemm_seconds(m, n, k + 1, PEAK, ETA, SMS, TILES, 1)
        e = gemm_efficiency(m, n, k, PEAK, ETA, SMS, TILES, 1)
        assert 0 < e <= ETA * (1 + 1e-12)


def test_gemm_reaches_the_ceiling_only_on_whole_tiles_and_waves():
    # 132 x 128 tiles of 128 x 128, K a multiple of the 128-element FP8 step: whole waves.
    full = gemm_efficiency(128 * 12, 128 * 11, 128 * 32, PEAK, ETA, SMS, TILES, 1)
    assert full == pytest.approx(ETA, rel=1e-12)
    # One decode token fills 1/16 of the smallest tile's rows; 100 tokens 100/128 of a
    # full tile (the height follows M: 16, 32, 64, 128 rows).
    assert gemm_efficiency(1, 4096, 4096, PEAK, ETA, SMS, TILES, 1) == pytest.approx(
        ETA / 16, rel=0.05)
    assert gemm_efficiency(100, 4096, 4096, PEAK, ETA, SMS, TILES, 1) == pytest.approx(
        ETA * 100 / 128, rel=0.05)
    assert [float(TILES.height(m)) for m in (1, 16, 17, 33, 64, 65, 128, 129, 5000)] == \
        [16, 16, 32, 64, 64, 128, 128, 128, 128]
    with pytest.raises(ValueError, match="m_min"):
        GemmTiles(m=64, m_min=128)
    # Without tiles, the flat roofline.
    assert gemm_seconds(3, 5, 7, PEAK, ETA, SMS, None) == pytest.approx(2 * 3 * 5 * 7
                                                                       / (PEAK * ETA))


def test_collectives_have_a_latency_term_and_size_dependent_bus_bandwidth():
    bw, lat = 450e9, 5e-6
    assert allreduce_seconds(1.0, 8, bw, lat) == pytest.approx(2 * 7 * lat, rel=1e-6)
    assert alltoall_seconds(1.0, 8, bw, lat) == pytest.approx(7 * lat, rel=1e-6)
    assert allreduce_seconds(1e6, 1, bw, lat) == 0.0
    sizes = [1e3, 1e5, 1e7, 1e10]
    bus = [bus_bandwidth(b, 8, bw, lat, 0.8) for b in sizes]
    assert bus == sorted(bus) and bus[0] < 0.01 * bw and bus[-1] == pytest.approx(
        0.8 * bw, rel=0.01)


def test_fp8_models_all_reduce_bf16_activations():
    bf16 = model_shape("llama-3.1-70b")
    fp8 = model_costs(dataclasses.replace(bf16, name="fp8", dtype_bytes=1, kv_dtype_bytes=1))
    node = make_node(gpus=8, hbm_stacks=6, hbm_stack="hbm3e", gpu="h200")
    for params in (CostParams(dtype="fp8"), calibrated_params("h200", "fp8")):
        a, b = CostModel(node, fp8, tp=8, params=params), CostModel(node, model_costs(bf16),
                                                                    tp=8, params=params)
        assert a.act_bytes == bf16.hidden * 2
        assert a.link_bytes_per_token() == b.link_bytes_per_token()
        t = 512.0
        assert a.allreduce_seconds(t * a.act_bytes) == b.allreduce_seconds(t * b.act_bytes)


def test_imbalance_factor_bounds():
    for p in (1, 2, 8, 16):
        for n in (1, 3, 64, 10_000):
            f = float(max_load_factor(n, p))
            assert 1.0 <= f <= p
            assert float(max_load_factor(n, p, 0.0)) == 1.0
            if p > 1:
                assert float(max_load_factor(n * 4, p)) < f or f == p
    with pytest.raises(ValueError, match="spread"):
        max_load_factor(10, 8, -1)


def test_imbalance_slows_expert_parallel_and_dpa_iterations():
    mc = model_costs(serving_shape("qwen3-235b-a22b"))
    node = make_node(gpus=8, hbm_stacks=6, hbm_stack="hbm3e", gpu="h200")
    base = calibrated_params("h200", "fp8")
    args = (64, 64 * 1000, 64 * 1000, 0, 64, 0, 64)
    for dpa in (False, True):
        balanced = CostModel(node, mc, tp=8, dpa=dpa,
                             params=dataclasses.replace(base, imbalance_spread=0.0))
        skewed = CostModel(node, mc, tp=8, dpa=dpa, params=base)
        assert float(skewed.iteration_seconds(*args)) > float(
            balanced.iteration_seconds(*args))


def test_calibrated_model_terms():
    """Each calibrated term moves a decode step the way its equation says."""
    mc = model_costs(serving_shape("llama-3.1-8b"))
    node = make_node(hbm_stacks=5, hbm_stack="hbm3")
    ideal = CostParams(dtype="fp8", compute_efficiency=0.5)
    step = (1, 1001, 1000, 0, 1, 0, 1)
    t0 = float(CostModel(node, mc, params=ideal).iteration_seconds(*step))
    half_bw = dataclasses.replace(ideal, mem_efficiency=0.5)
    t_bw = float(CostModel(node, mc, params=half_bw).iteration_seconds(*step))
    assert 1.9 * t0 < t_bw < 2.01 * t0     # memory-bound: bytes at half the bandwidth
    ovh = dataclasses.replace(ideal, step_overhead_s=1e-3)
    assert float(CostModel(node, mc, params=ovh).iteration_seconds(*step)) == \
        pytest.approx(t0 + 1e-3, rel=1e-12)
    lossy = dataclasses.replace(ideal, overlap_loss=1.0)
    assert float(CostModel(node, mc, params=lossy).iteration_seconds(*step)) > t0


def test_bad_params_name_the_field():
    for kw, word in ((dict(mem_efficiency=0), "mem_efficiency"),
                     (dict(overlap_loss=1.5), "overlap_loss"),
                     (dict(step_overhead_s=-1), "step_overhead_s"),
                     (dict(activation_bytes=3), "activation_bytes"),
                     (dict(moe_efficiency=2), "moe_efficiency"),
                     (dict(link_latency_s=math.inf), "link_latency_s")):
        with pytest.raises(ValueError, match=word):
            CostParams(**kw)
    with pytest.raises(ValueError, match="cost model"):
        cost_params("magic", "h100", "bf16")


def test_every_parameter_has_a_source():
    v = fitted_values()
    assert set(v) == set(FITTED)
    from hbfsim.serve.validate import BOUNDS
    for k, x in v.items():
        lo, hi = BOUNDS[k]
        assert lo <= x <= hi, k
    for gpu, dtype in (("h100", "fp8"), ("h200", "bf16")):
        text = format_cost_provenance(gpu, dtype)
        lines = text.splitlines()[1:]
        assert len(lines) == len(COST_SOURCES) - 1      # one compute_efficiency line
        for line in lines:
            key = line.split(" = ")[0]
            assert key in COST_SOURCES and line.split("# ")[1].startswith(COST_SOURCES[key][0])


# ------------------------------------------------------------------ the validation page
DOC = Path(__file__).resolve().parents[2] / "docs" / "validation-serving.md"


def _doc_rows():
    from hbfsim.serve.validate import SETS

    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[1] in SETS:
            rows[cells[0]] = cells
    return rows


def test_validation_page_lists_every_point_of_the_data_file():
    from hbfsim.serve.validate import load_points

    data = load_points()
    rows = _doc_rows()
    assert set(rows) == {p["id"] for p in data["points"]}
    for p in data["points"]:
        r = rows[p["id"]]
        assert r[1] == p["set"]
        assert float(r[5].replace(",", "")) == p["measured"]
        assert f"ISL/OSL {p['isl']}/{p['osl']}" in r[3]
    assert sum(p["set"] == "held-out" for p in data["points"]) >= 8


@pytest.mark.parametrize("pid", ["l2-7b-h100-tp1-ttft-128", "l2-70b-h100-tp4-ttft-2048",
                                 "vllm-l8b-h100-tp1-b8-32-128",
                                 "nim-l70b-h100-tp2-c1-500-2000-itl"])
def test_validation_page_is_reproduced_by_the_script(tmp_path, pid):
    """The page's simulated figure and ratio of a point are what the script computes now
    (small points: one request or a batch of 8; the whole table takes about a minute)."""
    from hbfsim.serve.validate import load_points, prepare, simulate_point

    data = load_points()
    pt = next(p for p in data["points"] if p["id"] == pid)
    settings, cmd = prepare(data, pt, tmp_path)
    sim = simulate_point(data, pt, settings)
    r = _doc_rows()[pid]
    assert r[6] == f"{sim:,.1f}" and r[7] == f"{sim / pt['measured']:.3f}"
    assert re.match(r"hbfsim serve --model \S+ --gpu h100", cmd)


def test_reserve_output_admits_only_what_can_finish(tiny):
    """--reserve-output (TensorRT-LLM's GUARANTEED_NO_EVICT): no preemption, every turn done;
    vLLM's admission by prompt pages preempts on the same device."""
    from hbfsim.serve.engine import simulate
    from hbfsim.serve.scheduler import Scheduler
    from hbfsim.serve.workload import Turn, Workload

    from .conftest import NO_RESERVE, exact_node

    node = exact_node(tiny, hbm_pages=40)
    turns = tuple(Turn(i, 0, 32, 120, (i,), 0.0) for i in range(12))   # 10 pages each at the end
    wl = Workload("grow", 32, turns)
    runs = {}
    for reserve in (False, True):
        cfg = dataclasses.replace(NO_RESERVE, reserve_output=reserve)
        runs[reserve] = simulate(wl, node, tiny, Scheduler("fcfs"), config=cfg, check=True)
    assert runs[False].replicas[0].preemptions > 0
    assert runs[True].replicas[0].preemptions == 0
    assert runs[True].replicas[0].max_running <= 4
    for r in runs.values():
        assert np.isfinite(r.replicas[0].done).all()


def test_serve_help_documents_the_new_knobs(capsys):
    from hbfsim.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for knob in ("--cost-model {calibrated,roofline}", "--cost-provenance", "--reserve-output",
                 "--compute-efficiency", "hbm3 (an H100 SXM5's"):
        assert knob in text, knob


def test_cost_provenance_prints_and_runs_nothing(capsys):
    from hbfsim.cli import main

    assert main(["serve", "--cost-provenance", "--gpu", "h200", "--dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "mem_efficiency = " in out and "# fitted" in out and "# assumption" in out
