"""The LLM shapes of hbfsim/shapes.py: closed forms, config.json parsing, presets, errors."""

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import hbfsim.model.workloads as workloads
from hbfsim.model.workloads_llm import _tensors
from hbfsim.shapes import (MODEL_PRESETS, ModelShape, ShapeError, mean_causal_context,
                           model_shape)

MODELS = Path(__file__).parent / "data" / "models"

# Small hand-made shapes whose numbers are worked out by hand below.
GQA = ModelShape("gqa", layers=2, hidden=64, q_heads=4, kv_heads=2, head_dim=16,
                 intermediate=96, vocab=100, tied_embeddings=False, qk_norm=True,
                 attention_bias=True)
MOE = ModelShape("moe", layers=4, hidden=32, q_heads=2, kv_heads=1, head_dim=16,
                 intermediate=64, vocab=50, tied_embeddings=False, qk_norm=False, experts=8,
                 active_experts=2, shared_experts=1, moe_intermediate=16, dense_layers=1)
MLA = ModelShape("mla", layers=2, hidden=64, q_heads=4, kv_heads=4, head_dim=24,
                 intermediate=96, vocab=100, tied_embeddings=False, qk_norm=False,
                 kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16,
                 v_head_dim=16)
DSA = dataclasses.replace(MLA, name="dsa", index_heads=2, index_head_dim=8, index_topk=50)


# --------------------------------------------------------------------------- the module
def test_shapes_import_no_simulator():
    code = ("import sys, hbfsim.shapes; bad = [m for m in sys.modules if m.startswith("
            "('hbfsim.model', 'hbfsim.serve', 'amaranth', 'cocotb', 'numpy'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_workloads_reexport_the_shared_shapes():
    assert workloads.ModelShape is ModelShape and workloads.MODEL_PRESETS is MODEL_PRESETS
    assert issubclass(ShapeError, ValueError)
    with pytest.raises(workloads.GpuError, match="model must be one of"):
        workloads.model_shape("gpt-17")
    with pytest.raises(workloads.GpuError, match="dense GQA"):
        workloads.llm_decode(model="qwen3-235b-a22b", scale=64, layers=1)


# --------------------------------------------------------------------------- dense GQA
def test_gqa_closed_forms():
    s = GQA
    attn = (64 * 64 + 2 * 64 * 32 + 64 * 64          # q, k, v, o
            + 64 + 2 * 32                           # q/k/v biases
            + 2 * 16 + 2 * 64)                      # q/k norms, the two layer norms
    assert s.attn_bytes_per_layer == 2 * attn
    assert s.dense_mlp_bytes_per_layer == 2 * 3 * 64 * 96
    assert s.embed_bytes == s.lm_head_bytes == 2 * 100 * 64
    assert s.weight_bytes == 2 * (2 * 100 * 64 + 2 * (attn + 3 * 64 * 96) + 64)
    assert s.param_count == s.weight_bytes // 2
    assert s.kv_bytes_per_token == 2 * (2 * 2 * 16) * 2            # layers x K,V x kv x hd
    macs = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 96) + 100 * 64
    assert s.linear_flops_per_token() == 2 * macs
    assert s.active_param_count == s.param_count - 100 * 64 + 64  # one embedding row
    assert s.attention_flops(3, 10) == 2 * 3 * 10 * 4 * 16 * 4     # QK^T + AV
    assert s.softmax_exps(3, 10) == 2 * 4 * 3 * 10
    assert not s.is_moe and not s.is_mla and s.moe_layers == 0 and s.expert_bytes == 0
    # untied: a forward reads the batch's embedding rows, the LM head its whole matrix
    assert s.active_weight_bytes(1) == s.weight_bytes - s.embed_bytes + 2 * 64
    assert s.active_weight_bytes(1000) == s.weight_bytes
    tied = dataclasses.replace(s, tied_embeddings=True)
    assert tied.weight_bytes == s.weight_bytes - s.lm_head_bytes
    assert tied.active_weight_bytes(1) == tied.weight_bytes


@pytest.mark.parametrize("shape", [GQA, "qwen3-1.7b", "qwen3-32b", "llama-3.1-8b"])
def test_weight_bytes_equal_the_device_layout(shape):
    """The serving level and the decode workload's tensor list count the same bytes."""
    s = model_shape(shape)
    assert s.weight_bytes == sum(nb for _, nb in _tensors(s))


def test_qwen3_1_7b_matches_the_reference_decode_bytes():
    assert MODEL_PRESETS["qwen3-1.7b"].weight_bytes == 3_441_149_952      # sources.md §figures
    assert MODEL_PRESETS["qwen3-1.7b"].kv_bytes_per_token == 28 * 4096


def test_causal_mean_context_sums_the_per_token_attention():
    s = GQA
    cached, n = 7, 5
    one_by_one = sum(s.attention_flops(1, cached + i + 1) for i in range(n))
    assert s.attention_flops(n, mean_causal_context(cached, n)) == one_by_one
    assert mean_causal_context(0, 1) == 1
    with pytest.raises(ShapeError, match="new_tokens"):
        mean_causal_context(3, 0)


# --------------------------------------------------------------------------- MoE
def test_moe_closed_forms():
    s = MOE
    expert = 3 * 32 * 16
    assert s.is_moe and s.moe_layers == 3 and s.dense_mlp_layers == 1
    assert s.expert_bytes == 2 * expert and s.shared_expert_bytes_per_layer == 2 * expert
    assert s.router_bytes_per_layer == 2 * 8 * 32
    attn = 32 * 32 + 2 * 32 * 16 + 32 * 32 + 2 * 32
    assert s.attn_bytes_per_layer == 2 * attn
    moe_layer = 8 * expert + expert + 8 * 32
    assert s.weight_bytes == 2 * (2 * 50 * 32 + 4 * attn + 3 * 32 * 64 + 3 * moe_layer + 32)
    active_moe = (2 + 1) * expert + 8 * 32
    assert s.active_param_count == 4 * attn + 3 * 32 * 64 + 3 * active_moe + 50 * 32 + 32 + 32
    macs = 4 * (attn - 2 * 32) + 3 * 32 * 64 + 3 * active_moe + 50 * 32
    assert s.linear_flops_per_token() == 2 * macs


def test_expected_experts_limits_and_formula():
    s = MOE
    assert s.expected_experts(1) == 2                          # k at one token
    assert s.expected_experts(2) == pytest.approx(8 * (1 - 0.75 ** 2))
    assert s.expected_experts(10_000) == pytest.approx(8)      # all E as tokens grow
    row = 2 * 32
    non_expert = s.weight_bytes - 3 * 8 * s.expert_bytes - s.embed_bytes
    assert s.active_weight_bytes(1) == non_expert + row + 3 * 2 * s.expert_bytes
    assert s.active_weight_bytes(10_000) == pytest.approx(s.weight_bytes, rel=1e-12)
    grows = [s.active_weight_bytes(t) for t in (1, 2, 4, 8, 16, 64)]
    assert grows == sorted(grows) and len(set(grows)) == len(grows)
    assert ModelShape("d", 1, 16, 1, 1, 16, 16, 16).expected_experts(5) == 0


def test_expected_experts_is_the_uniform_routing_mean():
    """A seeded Monte Carlo of top-k uniform routing agrees with E(1 - (1 - k/E)^t)."""
    s = MODEL_PRESETS["deepseek-v3"]
    rng = random.Random(9)
    for tokens in (1, 4, 32, 256):
        trials = [len({e for _ in range(tokens) for e in rng.sample(range(s.experts),
                                                                    s.active_experts)})
                  for _ in range(300)]
        assert sum(trials) / len(trials) == pytest.approx(s.expected_experts(tokens), rel=0.02)


# --------------------------------------------------------------------------- MLA and DSA
def test_mla_closed_forms():
    s = MLA
    H, r, rope, nope, v = 4, 32, 8, 16, 16
    macs = (64 * 48 + 48 * H * (nope + rope)      # q_a_proj, q_b_proj
            + 64 * (r + rope) + r * H * (nope + v)  # kv_a_proj_with_mqa, kv_b_proj
            + H * v * 64)                         # o_proj
    assert s.attn_bytes_per_layer == 2 * (macs + 48 + r + 2 * 64)
    assert s.kv_bytes_per_token == 2 * (r + rope) * 2             # the compressed cache
    assert s.attention_flops(1, 100) == 2 * 2 * H * (2 * r + rope) * 100   # absorbed
    assert s.softmax_exps(1, 100) == 2 * H * 100
    assert s.linear_flops_per_token() == 2 * (2 * macs + 2 * 3 * 64 * 96 + 100 * 64)
    direct = dataclasses.replace(s, q_lora_rank=0)
    assert direct.attn_bytes_per_layer == s.attn_bytes_per_layer - 2 * (
        64 * 48 + 48 * H * 24 + 48) + 2 * 64 * H * 24


def test_sparse_attention_caps_the_context():
    s = DSA
    idx = 48 * 2 * 8 + 64 * 8 + 64 * 2 + 2 * 8       # wq_b, wk, weights_proj, k_norm
    assert s.attn_bytes_per_layer == MLA.attn_bytes_per_layer + 2 * idx
    assert s.kv_bytes_per_token == MLA.kv_bytes_per_token + 2 * 8 * 2
    assert s.attention_flops(1, 20) == MLA.attention_flops(1, 20) + 2 * 2 * 2 * 8 * 20
    assert s.attention_flops(1, 100) == MLA.attention_flops(1, 50) + 2 * 2 * 2 * 8 * 100
    assert s.softmax_exps(1, 100) == MLA.softmax_exps(1, 50)


# --------------------------------------------------------------------------- scaled
def test_scaled_keeps_routing_and_head_widths():
    s = MODEL_PRESETS["deepseek-v3"].scaled(8)
    assert (s.experts, s.active_experts, s.shared_experts, s.dense_layers) == (256, 8, 1, 3)
    assert s.hidden == 896 and s.moe_intermediate == 256 and s.kv_lora_rank == 64
    assert s.q_lora_rank == 192 and s.q_heads == 16 and s.qk_rope_head_dim == 64
    assert s.name == "deepseek-v3/8" and s.approximation
    g = MODEL_PRESETS["glm-5"].scaled(64)
    assert g.index_heads == 1 and g.index_topk == 2048 and g.moe_intermediate == 32
    assert MODEL_PRESETS["qwen3-32b"].scaled(1) is MODEL_PRESETS["qwen3-32b"]
    with pytest.raises(ShapeError, match="scale must be a positive integer, not 0"):
        MOE.scaled(0)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("change,match", [
    (dict(active_experts=9), "active_experts must be 1..experts"),
    (dict(dense_layers=4), "dense_layers must be below layers"),
    (dict(moe_intermediate=0), "moe_intermediate must be positive"),
    (dict(experts=0), "active_experts must be 0 in a dense model"),
    (dict(layers=0), "layers must be a positive integer, not 0"),
    (dict(shared_experts=-1), "shared_experts must be a non-negative integer, not -1"),
    (dict(approximation="two\nlines"), "approximation must be one line"),
    (dict(tied_embeddings="no"), "tied_embeddings must be True or False, not 'no'"),
])
def test_bad_moe_shapes(change, match):
    with pytest.raises(ShapeError, match=match):
        dataclasses.replace(MOE, **change)


@pytest.mark.parametrize("shape,change,match", [
    (MLA, dict(qk_rope_head_dim=0), "qk_rope_head_dim must be positive under MLA"),
    (MLA, dict(qk_norm=True), "qk_norm must be False under MLA"),
    (GQA, dict(v_head_dim=128), "v_head_dim must be 0 without MLA"),
    (MLA, dict(index_heads=2), "all positive or all 0"),
])
def test_bad_attention_shapes(shape, change, match):
    with pytest.raises(ShapeError, match=match):
        dataclasses.replace(shape, **change)


def test_kv_dtype_defaults_to_the_weight_dtype():
    assert GQA.kv_dtype_bytes == 2
    fp8_kv = dataclasses.replace(GQA, kv_dtype_bytes=1)
    assert fp8_kv.kv_bytes_per_token == GQA.kv_bytes_per_token // 2
    assert fp8_kv.weight_bytes == GQA.weight_bytes


# --------------------------------------------------------------------------- presets
# Published parameter counts (total, active) from each model card; tolerance 3%: the
# presets leave out multi-token-prediction layers, and "active" conventions differ in
# whether embeddings count (ours: the LM head yes, the embedding table no).
PUBLISHED = [
    ("qwen3-1.7b", 1.7e9, None),
    ("qwen3-32b", 32.8e9, None),
    ("llama-3.1-8b", 8.03e9, None),
    ("llama-3.1-70b", 70.6e9, None),
    ("llama-3.1-405b", 405e9, None),
    ("qwen3-235b-a22b", 235e9, 22e9),
    ("qwen3-coder-480b-a35b", 480e9, 35e9),
    ("deepseek-v3", 671e9, 37e9),
    ("glm-4.5", 355e9, 32e9),
    ("glm-5", 744e9, 40e9),
]


@pytest.mark.parametrize("name,total,active", PUBLISHED)
def test_preset_parameter_counts_match_the_published_ones(name, total, active):
    s = MODEL_PRESETS[name]
    assert s.param_count == pytest.approx(total, rel=0.03)
    assert s.weight_bytes == s.param_count * s.dtype_bytes
    if active is None:
        assert not s.is_moe
    else:
        assert s.is_moe and s.active_param_count == pytest.approx(active, rel=0.03)


def test_every_preset_is_listed_and_approximations_are_stated():
    assert {n for n, _, _ in PUBLISHED} == set(MODEL_PRESETS)
    assert all(n == s.name for n, s in MODEL_PRESETS.items())
    assert "GLM-5.2" in MODEL_PRESETS["glm-5"].approximation
    assert MODEL_PRESETS["deepseek-v3"].is_mla and MODEL_PRESETS["glm-5"].is_sparse_attention
    assert MODEL_PRESETS["deepseek-v3"].kv_bytes_per_token == 61 * 576 * 2


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.iterdir() if p.is_dir()))
def test_config_fixture_parses_to_its_preset(name):
    for spec in (MODELS / name / "config.json", MODELS / name, str(MODELS / name)):
        s = model_shape(spec)
        assert dataclasses.replace(s, approximation=MODEL_PRESETS[name].approximation) \
            == MODEL_PRESETS[name]


# --------------------------------------------------------------------------- config.json
BASE = {"model_type": "qwen3", "num_hidden_layers": 6, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 96, "vocab_size": 100, "tie_word_embeddings": False}
QWEN_MOE = dict(BASE, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2,
                moe_intermediate_size=16)
DEEPSEEK = dict(BASE, model_type="deepseek_v3", n_routed_experts=8, n_shared_experts=1,
                num_experts_per_tok=2, moe_intermediate_size=16, first_k_dense_replace=1,
                kv_lora_rank=32, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16,
                v_head_dim=16)


@pytest.mark.parametrize("spec,want", [
    (BASE, dict(qk_norm=True, experts=0, head_dim=16)),
    (dict(BASE, model_type="llama", head_dim=None), dict(qk_norm=False, head_dim=16)),
    (dict(BASE, model_type="qwen2", attention_bias=True), dict(attention_bias=True)),
    (QWEN_MOE, dict(experts=8, active_experts=2, dense_layers=0, qk_norm=True)),
    (dict(QWEN_MOE, decoder_sparse_step=2, mlp_only_layers=[1]),   # MoE at layers 3, 5
     dict(dense_layers=4)),
    (dict(BASE, model_type="mixtral", num_local_experts=8, num_experts_per_tok=2),
     dict(experts=8, moe_intermediate=96, shared_experts=0)),
    (DEEPSEEK, dict(kv_lora_rank=32, q_lora_rank=0, dense_layers=1, shared_experts=1,
                    head_dim=24, qk_norm=False)),
    (dict(DEEPSEEK, first_k_dense_replace=1, moe_layer_freq=2),     # MoE at layers 2, 4
     dict(dense_layers=4)),
    (dict(DEEPSEEK, model_type="glm_moe_dsa", mlp_layer_types=["dense"] * 2 + ["sparse"] * 4,
          index_n_heads=2, index_head_dim=8, index_topk=50),
     dict(dense_layers=2, index_topk=50)),
    (dict(QWEN_MOE, model_type="glm4_moe", n_routed_experts=8, n_shared_experts=1,
          first_k_dense_replace=2, use_qk_norm=True, attention_bias=True),
     dict(dense_layers=2, shared_experts=1, qk_norm=True, attention_bias=True)),
    (dict(BASE, model_type="phi3"), dict(qk_norm=False, experts=0)),   # generic dense
    (dict(BASE, dtype="float16", quantization_config={"quant_method": "fp8"}),
     dict(dtype_bytes=1, kv_dtype_bytes=2)),
])
def test_hugging_face_model_types(spec, want):
    s = model_shape(spec)
    assert {k: getattr(s, k) for k in want} == want
    assert s.layers == 6 and s.vocab == 100


@pytest.mark.parametrize("spec,match", [
    ({k: v for k, v in QWEN_MOE.items() if k != "num_experts"},
     "model config lacks key 'num_experts'$"),
    (dict(QWEN_MOE, num_experts_per_tok=9), "num_experts_per_tok must be at most the 8"),
    (dict(QWEN_MOE, mlp_only_layers=[6]), "mlp_only_layers must be a list of layer indices"),
    (dict(QWEN_MOE, mlp_only_layers=list(range(6))), "leave no MoE layer of 6"),
    ({k: v for k, v in DEEPSEEK.items() if k != "qk_rope_head_dim"},
     "lacks key 'qk_rope_head_dim'"),
    (dict(DEEPSEEK, mlp_layer_types=["dense"]), "mlp_layer_types must list"),
    (dict(BASE, num_hidden_layers=0), "num_hidden_layers must be a positive integer, not 0"),
    (dict(BASE, hidden_size="64"), "hidden_size must be a positive integer, not '64'"),
    (dict(BASE, torch_dtype="float64"), "torch_dtype must be one of"),
    (dict(BASE, tie_word_embeddings="yes"), "tie_word_embeddings must be true or false"),
    (dict(BASE, quantization_config={"quant_method": "awq"}), "quant_method must be fp8"),
    ({k: v for k, v in BASE.items() if k != "head_dim"} | {"hidden_size": 66},
     "lacks key 'head_dim'"),
    ({k: v for k, v in dict(BASE, model_type="phi3").items() if k != "vocab_size"},
     "lacks key 'vocab_size' \\(model_type 'phi3' is not one of .*generic dense decoder\\)"),
    (dict(BASE, model_type="phi3", num_local_experts=8), "its key 'num_local_experts' marks"),
    (dict(BASE, model_type=3), "model_type must be a string, not 3"),
])
def test_bad_configs_are_rejected_in_one_line_naming_the_key(spec, match):
    with pytest.raises(ShapeError, match=match) as e:
        model_shape(spec)
    assert "\n" not in str(e.value)


def test_bad_config_files_name_the_file(tmp_path):
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps({k: v for k, v in BASE.items() if k != "vocab_size"}))
    with pytest.raises(ShapeError, match=f"model config '{p}' lacks key 'vocab_size'"):
        model_shape(str(p))
    p.write_text('{"model_type": "qwen3",\n "hidden_size": }')
    with pytest.raises(ShapeError, match="cannot read model config") as e:
        model_shape(p.parent)
    assert "\n" not in str(e.value)
    p.write_text("[1, 2]")
    with pytest.raises(ShapeError, match="must hold a JSON object, not list"):
        model_shape(str(p))
    with pytest.raises(ShapeError, match="model must be a preset name, dict or path, not int"):
        model_shape(3)


def test_a_dict_of_field_names_builds_the_shape():
    d = {f.name: getattr(MOE, f.name) for f in dataclasses.fields(MOE)}
    assert model_shape(d) == MOE
    assert model_shape("QWEN3-32B") is MODEL_PRESETS["qwen3-32b"]


@pytest.mark.parametrize("shape", [GQA, MOE, MLA, DSA])
def test_bad_token_counts(shape):
    with pytest.raises(ShapeError, match="tokens must be a positive integer, not 0"):
        shape.active_weight_bytes(0)
    with pytest.raises(ShapeError, match="context_tokens must be a non-negative number"):
        shape.attention_flops(1, -1)
    with pytest.raises(ShapeError, match="query_tokens must be a non-negative number"):
        shape.softmax_exps(True, 3)
