"""The workload registry (model/workloads.py; source §5.1-§5.5, §6; sources.md §figures)."""

import dataclasses
import itertools
import json
import tracemalloc
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.gpu import GpuError, GpuProgram, run_closed_loop
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem
from hbfsim.model.workloads import (MODEL_PRESETS, WORKLOADS, DeviceStream, burst_page_service,
                                    decode_counts, decode_layout, get_workload, llm_decode,
                                    model_shape, mshr_grid, placement, placement_map,
                                    rw_isolation, shared_staging, workload_names)

QWEN3_CONFIG_JSON = {   # Qwen/Qwen3-1.7B config.json (the keys the loader reads)
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2048,
    "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "attention_bias": False,
}


def run(w, cfg):
    """Run a workload on ``cfg``: closed loop for programs, open loop for device streams."""
    if isinstance(w, DeviceStream):
        system = HbfSystem(cfg, keep=False)
        system.run_requests(iter(w))
        return collect_stats(system), None
    res = run_closed_loop(cfg, w, gpu=w.gpu)
    return collect_stats(res.system), res


# --------------------------------------------------------------------------- registry
def test_registry_names_and_errors():
    assert workload_names() == list(WORKLOADS)
    assert {"conservation", "shared_staging", "burst_page_service", "media_saturation",
            "mshr_grid", "placement", "rw_isolation", "llm_decode"} <= set(WORKLOADS)
    for name in workload_names():
        w = get_workload(name)
        assert w.name.startswith(name) and isinstance(w.config, dict)
        assert w.expected["requests"] > 0
    with pytest.raises(GpuError, match="workload must be one of"):
        get_workload("nope")
    with pytest.raises(GpuError, match="mshr_grid"):
        get_workload("mshr_grid", colour=3)
    with pytest.raises(GpuError, match="order must be"):
        mshr_grid(order="random")
    with pytest.raises(GpuError, match="requests x nbytes must fit one page"):
        shared_staging(requests=64)


@pytest.mark.parametrize("name", ["conservation", "shared_staging", "burst_page_service",
                                  "media_saturation", "mshr_grid", "placement",
                                  "rw_isolation"])
def test_microbenchmarks_generate_their_expected_requests(name):
    w = get_workload(name)
    acc = list(w.accesses())
    assert len(acc) == w.expected["requests"]
    for op, addr, nb in acc:
        assert op in ("R", "W") and nb in (32, 64, 128)
        assert (addr % PAGE_BYTES) + nb <= PAGE_BYTES and addr % nb == 0
    assert list(get_workload(name).accesses()) == acc      # deterministic


# --------------------------------------------------------------------------- §5.1
def test_shared_staging_one_page_read_31_merges():
    cfg = load_config()
    s, _ = run(shared_staging(cfg), cfg)
    assert (s["completions"], s["page_reads"], s["mshr_hits"]) == (32, 1, 31)


# --------------------------------------------------------------------------- §5.3
@pytest.mark.parametrize("channels", [1, 4])
def test_burst_page_service_grows_by_pages_times_dtr_over_channels(channels):
    windows = {}
    for tr in (15.0, 1.0):
        cfg = load_config(**burst_page_service().config, channels=channels, t_read_us=tr)
        w = burst_page_service(cfg)
        s, _ = run(w, cfg)
        assert (s["completions"], s["page_reads"], s["mshr_hits"]) == (2048, 64, 64 * 31)
        windows[tr] = s["window_ticks"]
    assert windows[15.0] - windows[1.0] == 64 * (12750 - 850) // channels
    assert windows[15.0] == pytest.approx(64 * 12750 / channels, rel=0.002)


def test_burst_isolated_arrivals_span_63_gaps_plus_one_read():
    cfg = load_config(**burst_page_service().config, channels=1)
    w = burst_page_service(cfg, gap_us=50)
    arrivals = sorted({r.arrival for r in w})
    assert arrivals[:3] == [0, 42500, 85000] and len(arrivals) == 64
    s, _ = run(w, cfg)
    extra = s["window_ticks"] - 63 * 42500 - cfg.t_read_ticks
    assert 0 < extra < 100
    assert [r.id for r in w] == list(range(2048))            # re-iterable


# --------------------------------------------------------------------------- §5.2
@pytest.mark.parametrize("order", ["page-major", "entry-major"])
def test_mshr_grid_orders_and_warps(order):
    B = load_config().base_address
    pages = [(a - B) // PAGE_BYTES for _, a, _ in mshr_grid(order=order).accesses()]
    assert Counter(pages) == {p: 32 for p in range(16)}
    assert pages[:3] == ([0, 0, 0] if order == "page-major" else [0, 1, 2])
    kernel, = list(mshr_grid(order=order, warps=16, bound=2))
    assert len(kernel.producers) == 16 and {p.bound for p in kernel.producers} == {2}
    assert [len(p.accesses) for p in kernel.producers] == [32] * 16
    assert mshr_grid(entries=1).expected["requests"] == 16


# --------------------------------------------------------------------------- §6.1
def test_placement_maps():
    pages = [i * 32 for i in range(8)]
    assert placement_map(pages, "striping", 4)["explicit_map"][:3] == \
        ((0, 0, 0), (32, 32, 1), (64, 64, 2))
    assert {r[2] for r in placement_map(pages, "modulo", 4)["explicit_map"]} == {0}
    assert placement_map(pages, "grouped", 4) == {"placement": "grouped"}
    with pytest.raises(GpuError, match="mapping must be"):
        placement_map(pages, "hash", 4)


@pytest.mark.parametrize("stride,striping_faster", [(32, True), (4, False)])
def test_active_page_striping_shape(stride, striping_faster):
    """Source §6.1: striping spreads stride-32 pages over 4 subarrays instead of 1 (faster),
    but uses 4 instead of 8 at stride 4 (slower)."""
    spans, subs = {}, {}
    for mapping in ("interleave", "striping"):
        w = placement(pages=64, stride=stride, mapping=mapping)
        cfg = load_config(**w.config)
        res = run_closed_loop(cfg, w, keep=True)
        assert collect_stats(res.system)["page_reads"] == 64
        spans[mapping] = res.span_ticks
        subs[mapping] = len({(r.ch, r.sub) for r in res.system.completed})
    assert subs["striping"] == 4
    assert subs["interleave"] == (1 if stride == 32 else 8)
    assert (spans["striping"] < spans["interleave"]) == striping_faster


# --------------------------------------------------------------------------- §6.2
def test_rw_isolation_reads_start_late_and_writes_program_full_pages():
    w = rw_isolation(read_delay_us=20.0, write_pages=4)
    cfg = load_config(**w.config)
    res = run_closed_loop(cfg, w, gpu=w.gpu, record=True)
    s = collect_stats(res.system)
    assert (res.reads, res.writes) == (512, 512)
    assert s["page_programs"] == 4 and s["strict_errors"] == 0 and s["errors"] == 0
    start = -(-w.expected["read_start_gpu_cycles"] * 850 // 1132)
    assert min(r.created for r in res.records if r.op == "R") == start
    assert all(r.created == 0 for r in res.records if r.op == "W")
    read_pages = {(r.addr - cfg.base_address) // PAGE_BYTES for r in res.records if r.op == "R"}
    write_pages = {(r.addr - cfg.base_address) // PAGE_BYTES for r in res.records
                   if r.op == "W"}
    assert not read_pages & write_pages


# --------------------------------------------------------------------------- §5.5 LLM
def test_qwen3_decode_step_sector_count_matches_the_reference():
    n = decode_counts("qwen3-1.7b")
    assert n["requests"] == n["reads"] == 107_540_992           # sources.md §figures
    assert n["weights"] == 3_441_149_952 // 32                  # every weight byte once
    assert n["embed_row"] == 128 and n["norm_rereads"] == 28 * (15 + 7) * 8
    assert n["reads"] * 32 == 3_441_311_744                     # bytes returned (§2c)
    assert decode_counts("qwen3-1.7b", norm_per_head=False)["reads"] == 107_536_064


def test_model_shape_from_hugging_face_config(tmp_path):
    assert model_shape(QWEN3_CONFIG_JSON) == dataclasses.replace(MODEL_PRESETS["qwen3-1.7b"],
                                                                 name="qwen3")
    p = tmp_path / "Qwen3-1.7B" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(QWEN3_CONFIG_JSON))
    shape = model_shape(str(p))
    assert shape.layers == 28 and shape.kv_heads == 8 and shape.tied_embeddings
    assert decode_counts(shape)["reads"] == 107_540_992
    llama = dict(QWEN3_CONFIG_JSON, model_type="llama", tie_word_embeddings=False)
    s2 = model_shape(llama)
    assert not s2.qk_norm and not s2.tied_embeddings
    n = decode_counts(s2)
    # untied: the LM head reads lm_head.weight (same size) instead of the embedding matrix
    assert n["norm_rereads"] == 0 and n["weights"] == (3_441_149_952 - 28 * 2 * 256) // 32
    with pytest.raises(GpuError, match="lacks key 'vocab_size'"):
        model_shape({k: v for k, v in QWEN3_CONFIG_JSON.items() if k != "vocab_size"})
    with pytest.raises(GpuError, match="model must be one of"):
        model_shape("gpt-17")


def test_decode_program_is_lazy():
    """The full 107.5 M-request step is generated on demand: a few MB, not gigabytes."""
    tracemalloc.start()
    try:
        w = llm_decode()
        head = list(itertools.islice(w.accesses(), 5000))
        kernels = list(itertools.islice(iter(w), 40))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20
    assert kernels[0].name == "embed" and kernels[-1].name.endswith("k_norm")
    assert w.expected["requests"] == 107_540_992
    assert all(op == "R" and nb == 32 for op, _, nb in head)
    assert isinstance(w, GpuProgram)


@pytest.mark.parametrize("kw", [{}, {"kv_append": True}, {"request_bytes": 128},
                                {"kv_in_hbf": True, "batch": 3, "prefix_tokens": 16},
                                {"rag_vectors": 40, "rag_vector_bytes": 512, "seed": 3}])
def test_small_decode_generates_its_closed_form_count(kw):
    w = llm_decode(scale=32, layers=2, **kw)
    ops = Counter(op for op, _, _ in w.accesses())
    assert ops["R"] == w.expected["reads"] and ops["W"] == w.expected["writes"]
    shape = dataclasses.replace(model_shape("qwen3-1.7b").scaled(32), layers=2)
    counts = decode_counts(shape, **{k: v for k, v in kw.items() if k != "seed"})
    assert sum(ops.values()) == w.expected["requests"] == counts["requests"]


def test_decode_layout_places_tensors_aligned_and_disjoint():
    lay = decode_layout("qwen3-1.7b")
    spans = sorted(lay["tensors"].values())
    assert all(off % 256 == 0 for off, _ in spans)
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:]))
    assert lay["kv_token_bytes"] == 4096 and lay["kv_base"] % PAGE_BYTES == 0


def test_shared_prefix_kv_and_rag_reads():
    w = llm_decode(scale=32, layers=1, kv_in_hbf=True, batch=4, prefix_tokens=24,
                   context_tokens=29)
    kernel = next(k for k in w if k.name.endswith("attention_kv"))
    addrs = Counter(a for p in kernel.producers for _, a, _ in p.accesses)
    kvt = decode_layout(model_shape("qwen3-1.7b").scaled(32))["kv_token_bytes"]
    assert max(addrs.values()) == 4            # shared prefix read by all four sequences
    assert sum(1 for c in addrs.values() if c == 4) == 24 * kvt // 32
    assert sum(1 for c in addrs.values() if c == 1) == 4 * 5 * kvt // 32
    rag = [llm_decode(scale=32, layers=1, rag_vectors=8, seed=s) for s in (1, 1, 2)]
    first = [list(next(iter(r)).producers[0].accesses) for r in rag]
    assert first[0] == first[1] != first[2]


TINY = {"name": "tiny", "layers": 2, "hidden": 256, "q_heads": 8, "kv_heads": 8,
        "head_dim": 128, "intermediate": 512, "vocab": 1024}   # one K/V page per token


def test_small_decode_runs_closed_loop():
    w = llm_decode(model=TINY, kv_append=True, sms=4, warps_per_sm=8)
    cfg = load_config(channels=16, admission=4096, mshr_entries=1024)
    s, res = run(w, cfg)
    assert s["completions"] == w.expected["requests"]
    assert s["errors"] == 0 and s["page_programs"] == 2     # one K/V page per layer
    assert len(res.kernels) == 1 + 2 * 12 + 2
    assert res.kernels[-1]["name"] == "lm_head"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from((32, 64, 128)), st.sampled_from((32, 64, 128)),
       st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 3000)), max_size=4),
       st.integers(1, 8), st.integers(0, 9), st.sampled_from("RW"))
def test_line_walk_arrays_are_its_accesses(lb, rb, ranges, stride, w, op):
    # the compiled engine's program reads arrays(); the golden model iterates
    from hbfsim.model.workloads_llm import LineWalk

    rb = min(rb, lb)
    walk = LineWalk(op, ranges, w, stride, lb, rb)
    got_op, addr, nbytes = walk.arrays()
    assert list(walk) == [(got_op, a, n) for a, n in zip(addr.tolist(), nbytes.tolist())]
    assert got_op == op
