import numpy as np
import pytest

from hbfsim.serve.cost import CostModel, CostParams
from hbfsim.serve.engine import simulate
from hbfsim.serve.hardware import make_node
from hbfsim.serve.models import model_costs, serving_shape
from hbfsim.serve.scheduler import Scheduler
from hbfsim.serve.workload import Turn, Workload

from .conftest import NO_RESERVE, exact_node

HBM_BW, HBM_LAT = 1000e9, 0.1e-6


def hbm_only_step(mc, stacks, ctx, new):
    """Closed form of one memory-bound iteration on an HBM-only node (docs/serving.md):
    weight bytes / bandwidth + KV read / bandwidth + KV write / bandwidth, plus one HBM
    startup latency per transfer: projections, MLP, KV read (when there is context), KV
    write, per layer, and the LM head."""
    bw = stacks * HBM_BW
    w = mc.layers * (mc.attn_bytes + mc.mlp_bytes) + mc.lm_head_bytes
    transfers = mc.layers * (2 + (ctx > 0) + 1) + 1
    return (w + ctx * mc.kv_bytes_per_token + new * mc.kv_bytes_per_token) / bw \
        + transfers * HBM_LAT


@pytest.mark.parametrize("ctx", [1, 1000, 30000])
def test_decode_step_is_weight_bytes_over_hbm_bandwidth(qwen32, ctx):
    cm = CostModel(make_node(hbm_stacks=8), qwen32)
    t = float(cm.iteration_seconds(1, ctx + 1, ctx, 0, 1, 0, 1))
    assert t == pytest.approx(hbm_only_step(qwen32, 8, ctx, 1), rel=1e-12)
    # 65.5 GB of BF16 weights at 8 TB/s: about 8.2 ms
    assert 8.0e-3 < t < 8.5e-3 + ctx * 262144 / 8e12


def test_one_request_alone_matches_closed_form(qwen32):
    node = exact_node(qwen32, hbm_pages=1000)
    n_in, n_out = 64, 6
    wl = Workload("one", 16, (Turn(0, 0, n_in, n_out, tuple(range(4)), 0.0),))
    run = simulate(wl, node, qwen32, Scheduler("fcfs"), config=NO_RESERVE, check=True)
    prefill = hbm_only_step(qwen32, 8, 0, n_in)
    decode = [hbm_only_step(qwen32, 8, n_in + i, 1) for i in range(n_out - 1)]
    rep = run.replicas[0]
    assert rep.first[0] == pytest.approx(prefill, rel=1e-12)
    assert run.clock_s == pytest.approx(prefill + sum(decode), rel=1e-12)
    assert rep.decode_tokens == n_out - 1 and rep.prefill_tokens == n_in


def test_vectorized_iterations_equal_scalar_calls(qwen32):
    node = make_node(hbm_stacks=4, hbf_stacks=4)
    cm = CostModel(node, qwen32)
    n = 7
    kv = np.arange(10) * 1000.0 + 500
    kvf = kv * 0.3
    vec = cm.iteration_seconds(n, kv + n, kv - kvf, kvf, n * 0.5, n * 0.5, n)
    one = [float(cm.iteration_seconds(n, a + n, a - b, b, n * 0.5, n * 0.5, n))
           for a, b in zip(kv, kvf)]
    assert np.allclose(vec, one, rtol=1e-14, atol=0)


def test_h3_buffer_hides_hbf_streaming_latency_once_per_iteration(qwen32):
    """HBF weights behind HBM (H3): every streaming transfer pays the HBM link startup,
    only the first pays HBF's 20 us; on shared sites every weight transfer pays 20 us."""
    shared = CostModel(make_node(hbm_stacks=4, hbf_stacks=4), qwen32, weights="hbf")
    h3 = CostModel(make_node(hbm_stacks=4, hbf_stacks=4, packaging="h3"), qwen32,
                   weights="hbf")
    args = (1, 1, 0, 0, 1, 0, 1)  # one token, no context: KV write only
    w = qwen32.layers * (qwen32.attn_bytes + qwen32.mlp_bytes) + qwen32.lm_head_bytes
    bw = 4 * HBM_BW
    weight_transfers = 2 * qwen32.layers + 1
    kv_write = qwen32.layers * (HBM_LAT + qwen32.kv_bytes_per_token / qwen32.layers / bw)
    expect_h3 = w / bw + weight_transfers * HBM_LAT + 20e-6 + kv_write
    expect_shared = w / bw + weight_transfers * 20e-6 + kv_write
    assert float(h3.iteration_seconds(*args)) == pytest.approx(expect_h3, rel=1e-12)
    assert float(shared.iteration_seconds(*args)) == pytest.approx(expect_shared, rel=1e-12)


def test_tensor_parallel_all_reduce(qwen32):
    node = make_node(gpus=4, hbm_stacks=8)
    cm = CostModel(node, qwen32, tp=4)
    b = 1e6
    assert cm.allreduce_seconds(b) == pytest.approx(2 * 3 / 4 * b / 450e9 + 2 * 3 * 2e-6)
    assert CostModel(node, qwen32, tp=1).allreduce_seconds(b) == 0.0
    # TP4 divides the weights: a decode step reads a quarter of them per GPU.
    assert cm.weight_read_bytes(1)[0] * 4 == pytest.approx(
        CostModel(node, qwen32).weight_read_bytes(1)[0])


def test_moe_expected_experts_touched():
    shape = serving_shape("qwen3-235b-a22b")
    mc = model_costs(shape)
    for t in (1, 2, 7, 300):
        assert mc.experts_touched(t) == pytest.approx(shape.expected_experts(t))
    assert mc.experts_touched(1) == pytest.approx(8)
    assert mc.experts_touched(100_000) == pytest.approx(128)
    assert mc.weight_bytes == shape.weight_bytes


def test_moe_decode_reads_only_touched_experts():
    mc = model_costs(serving_shape("qwen3-235b-a22b"))
    node = make_node(gpus=8, hbm_stacks=8)
    cm = CostModel(node, mc, tp=8)
    one = cm.weight_read_bytes(1)[0] * 8
    many = cm.weight_read_bytes(4096)[0] * 8
    routed = mc.moe_layers * mc.expert_bytes
    assert many - one == pytest.approx(routed * (mc.experts_touched(4096) - 8))
    # Expert-parallel MoE: an all-to-all per MoE layer adds link time.
    assert cm.alltoall_seconds(1e6) == pytest.approx(7 / 8 * 1e6 / 450e9 + 7 * 2e-6)


def test_mla_kv_is_not_divided_by_tp():
    mc = model_costs(serving_shape("deepseek-v3"))
    node = make_node(gpus=8, hbm_stacks=8)
    assert CostModel(node, mc, tp=8).kv_token_gpu == mc.kv_bytes_per_token
    q = model_costs(serving_shape("llama-3.1-405b"))
    assert CostModel(node, q, tp=8).kv_token_gpu == q.kv_bytes_per_token / 8


@pytest.mark.parametrize("kw,word", [(dict(weights="ssd"), "weights"), (dict(tp=3), "tp"),
                                     (dict(weights="hbf"), "HBF")])
def test_bad_cost_options(qwen32, kw, word):
    with pytest.raises(ValueError, match=word):
        CostModel(make_node(hbm_stacks=8), qwen32, **kw)


def test_bad_params():
    with pytest.raises(ValueError, match="compute_efficiency"):
        CostParams(compute_efficiency=0)


def test_data_parallel_attention_divides_kv_and_replicates_attention():
    mc = model_costs(serving_shape("glm-5"))
    node = make_node(gpus=8, hbm_stacks=8, hbf_stacks=8, packaging="h3")
    tp, dpa = CostModel(node, mc, tp=8), CostModel(node, mc, tp=8, dpa=True)
    assert tp.kv_token_gpu == mc.kv_bytes_per_token           # MLA: replicated under TP
    assert dpa.kv_token_gpu == mc.kv_bytes_per_token / 8      # DPA: divided by sequence
    extra = dpa.weights_resident()[0] - tp.weights_resident()[0]
    assert extra == pytest.approx(7 / 8 * mc.layers * mc.attn_bytes)
    act = mc.hidden * mc.dtype_bytes
    assert tp.link_bytes_per_token() - dpa.link_bytes_per_token() == pytest.approx(
        mc.layers * 2 * 7 * act)                              # no all-reduce after attention


def test_dense_tp_all_reduces_twice_per_layer(qwen32):
    cm = CostModel(make_node(gpus=4, hbm_stacks=8), qwen32, tp=4)
    assert cm.link_bytes_per_token() == pytest.approx(
        qwen32.layers * 2 * 2 * 3 * qwen32.hidden * qwen32.dtype_bytes)
    one = float(cm.iteration_seconds(1, 1, 0, 0, 1, 0, 1))
    no_link = float(CostModel(make_node(gpus=4, hbm_stacks=8), qwen32, tp=1)
                    .iteration_seconds(1, 1, 0, 0, 1, 0, 1))
    assert one < no_link  # a quarter of the weights per GPU beats the all-reduces


def test_experts_sharded_by_tp_below_ep():
    """``ep < tp`` (vLLM runs Mixtral at TP2 with ``ep = 1``): each GPU holds and reads
    ``1/tp`` of the experts' bytes, runs ``1/(tp/ep)`` of each touched expert's columns and
    all-reduces after the experts within its rank; ``ep = tp`` has no such all-reduce."""
    mc = model_costs(serving_shape("qwen3-235b-a22b"))
    node = make_node(gpus=8, hbm_stacks=8)
    one = CostModel(node, mc, tp=1, ep=1)
    cm = {ep: CostModel(node, mc, tp=8, ep=ep) for ep in (1, 2, 8)}
    for ep, c in cm.items():
        assert c.weights_resident()[0] * 8 == pytest.approx(one.weights_resident()[0])
        for t in (1, 64, 4096):
            assert c.weight_read_bytes(t)[0] * 8 == pytest.approx(one.weight_read_bytes(t)[0])
        assert c.n_expert * 8 / ep == pytest.approx(one.n_expert)
    act = cm[1].act_bytes
    assert cm[8].expert_allreduce_seconds(64) == 0.0
    # ep = 1: one all-reduce of every token's row over the 8 GPUs, as after a dense MLP.
    assert cm[1].expert_allreduce_seconds(64) == pytest.approx(cm[1].allreduce_seconds(64 * act))
    # ep = 2: every token (k = 8 experts) visits both ranks; each rank's 4 GPUs reduce it.
    ln = node.link
    four = 2 * 3 * cm[2].link_lat + 2 * 3 / 4 * 64 * act / (ln.bw * cm[2].params.link_efficiency)
    assert cm[2].expert_allreduce_seconds(64) == pytest.approx(four)
    # ep = 1: no all-to-all; an all-reduce after attention and one after the experts.
    assert cm[1].link_bytes_per_token() == pytest.approx(2 * mc.layers * 2 * 7 * act)
    # The iteration pays it once per MoE layer.
    t1 = float(cm[1].iteration_seconds(8, 8, 0, 0, 8, 0, 8))
    ar = cm[1].expert_allreduce_seconds(8.0)
    cm[1].expert_allreduce_seconds = lambda tokens: 0.0 * tokens
    t0 = float(cm[1].iteration_seconds(8, 8, 0, 0, 8, 0, 8))
    assert t1 - t0 == pytest.approx(mc.moe_layers * ar)
