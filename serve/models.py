"""The model as the serving cost model sees it: bytes and operations per layer and per token.

Shapes come from ``hbfsim.shapes`` (dense GQA, MoE, MLA, DSA; docs/models.md), shared with
the device level. :class:`ModelCosts` reduces a shape to the figures the roofline needs
(docs/serving.md, "Cost model"). Where the reduction approximates, ``approximation`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from hbfsim.shapes import ModelShape, model_shape

__all__ = ["ModelCosts", "model_costs", "serving_shape"]


def serving_shape(spec) -> ModelShape:
    """A model shape from a preset name, a ``config.json`` path, a dict or a shape.

    Raises
    ------
    ValueError
        ``ShapeError`` for an unknown preset or an unreadable / incomplete config (the
        message names it).
    """
    return model_shape(spec)


@dataclass(frozen=True)
class ModelCosts:
    """Per-layer and per-token figures of one model (whole model, before any parallelism).

    Members
    -------
    name : str
    layers, dense_layers, moe_layers : int
    hidden, vocab, q_heads, kv_heads, dtype_bytes : int
    attn_bytes : float
        Attention weights of one layer (projections, norms, MLA/DSA parts), bytes.
    mlp_bytes : float
        Dense MLP weights of one dense layer, bytes.
    experts, active_experts : int
        Routed experts per MoE layer and experts each token selects (0 for dense).
    expert_bytes : float
        One routed expert of one layer, bytes.
    moe_fixed_bytes : float
        Shared experts + router of one MoE layer, bytes (always read).
    lm_head_bytes : float
        The output projection (tied models read the embedding matrix), bytes.
    weight_bytes : float
        All weights as stored, bytes.
    kv_bytes_per_token : float
        KV bytes of one token over all layers.
    attn_flops_per_token, mlp_flops_per_token, moe_flops_per_token : float
        Weight-matmul FLOPs per token of one layer (2 per multiply-accumulate; MoE: active
        and shared experts + router).
    pair_flops : float
        Attention FLOPs of one (query token, context token) pair in one layer.
    pair_exps : float
        Softmax exponentials per pair in one layer (one per query head).
    kv_shardable : bool
        KV heads divide over tensor parallelism (GQA); MLA's latent is one per token and is
        replicated on every GPU of a TP group.
    approximation : str
        Where the figures are approximate ("" when exact).
    """

    name: str
    layers: int
    dense_layers: int
    moe_layers: int
    hidden: int
    vocab: int
    q_heads: int
    kv_heads: int
    dtype_bytes: int
    attn_bytes: float
    mlp_bytes: float
    experts: int
    active_experts: int
    expert_bytes: float
    moe_fixed_bytes: float
    lm_head_bytes: float
    weight_bytes: float
    kv_bytes_per_token: float
    attn_flops_per_token: float
    mlp_flops_per_token: float
    moe_flops_per_token: float
    pair_flops: float
    pair_exps: float
    kv_shardable: bool = True
    approximation: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0 and self.moe_layers > 0

    def experts_touched(self, tokens):
        """Expected distinct routed experts one MoE layer reads for ``tokens`` tokens.

        E (1 - (1 - k/E)^T): uniform independent routing, as ``ModelShape.expected_experts``
        (ideal balance, as the source assumes for its split placement); accepts arrays."""
        if not self.is_moe:
            return 0.0 * tokens
        e, k = self.experts, self.active_experts
        return e * (1.0 - (1.0 - k / e) ** tokens)


def model_costs(shape) -> ModelCosts:
    """Reduce a :class:`hbfsim.shapes.ModelShape` (or a spec for one) to :class:`ModelCosts`."""
    s = shape if isinstance(shape, ModelShape) else serving_shape(shape)
    d = s.dtype_bytes
    h = s.hidden
    layers = s.layers
    notes = [s.approximation] if s.approximation else []
    # Attention FLOPs per (query, context) pair in one layer: exact below DSA's index_topk
    # (every query attends all of its context); beyond it DSA attends only index_topk tokens,
    # so this over-counts (stated).
    pair = s.attention_flops(1, 1) / layers
    exps = s.softmax_exps(1, 1) / layers
    if s.is_sparse_attention:
        notes.append(f"DSA costed as dense attention over the whole context (exact up to "
                     f"{s.index_topk} tokens, an upper bound beyond)")
    if s.is_moe:
        moe_flops = 2.0 * ((s.active_experts + s.shared_experts) * 3 * h * s.moe_intermediate
                           + s.experts * h)
        fixed = float(s.shared_expert_bytes_per_layer + s.router_bytes_per_layer)
    else:
        moe_flops, fixed = 0.0, 0.0
    return ModelCosts(
        name=s.name, layers=layers, dense_layers=s.dense_mlp_layers, moe_layers=s.moe_layers,
        hidden=h, vocab=s.vocab, q_heads=s.q_heads, kv_heads=s.kv_heads, dtype_bytes=d,
        attn_bytes=float(s.attn_bytes_per_layer), mlp_bytes=float(s.dense_mlp_bytes_per_layer),
        experts=s.experts, active_experts=s.active_experts,
        expert_bytes=float(s.expert_bytes), moe_fixed_bytes=fixed,
        lm_head_bytes=float(s.lm_head_bytes), weight_bytes=float(s.weight_bytes),
        kv_bytes_per_token=float(s.kv_bytes_per_token),
        attn_flops_per_token=2.0 * s.attn_bytes_per_layer / d,
        mlp_flops_per_token=2.0 * 3 * h * s.intermediate, moe_flops_per_token=moe_flops,
        pair_flops=pair, pair_exps=exps, kv_shardable=not s.is_mla,
        approximation="; ".join(notes))
