"""The model as the serving cost model sees it: bytes and operations per layer and per token.

:func:`serving_shape` resolves a model name or ``config.json`` through ``hbfsim.shapes``
when that module exists (dense, MoE, MLA), else through the dense ``ModelShape`` of
``model/workloads.py`` plus the dense presets below. :class:`ModelCosts` reduces a shape to
the figures the roofline needs (docs/serving.md, "Cost model").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelCosts", "model_costs", "serving_shape", "DENSE_PRESETS"]

# Dense presets the serving study needs, used only while hbfsim.shapes is absent. Figures are
# the Hugging Face config.json files of the named models.
DENSE_PRESETS = {
    # Qwen/Qwen3-32B: 64 layers, hidden 5120, 64 q / 8 kv heads of 128, MLP 25600, untied.
    "qwen3-32b": dict(layers=64, hidden=5120, q_heads=64, kv_heads=8, head_dim=128,
                      intermediate=25600, vocab=151936, tied_embeddings=False),
    # meta-llama/Llama-3.1-405B: 126 layers, hidden 16384, 128 q / 8 kv heads, MLP 53248.
    "llama-3.1-405b": dict(layers=126, hidden=16384, q_heads=128, kv_heads=8, head_dim=128,
                           intermediate=53248, vocab=128256, tied_embeddings=False,
                           qk_norm=False),
}


def serving_shape(spec):
    """A model shape from a preset name, a ``config.json`` path or a shape object.

    Raises
    ------
    ValueError
        For an unknown preset or an unreadable / incomplete config (the message names it).
    """
    try:
        from hbfsim.shapes import model_shape  # the shared, MoE- and MLA-aware shapes
        return model_shape(spec)
    except ImportError:
        pass
    from hbfsim.model.workloads import ModelShape, model_shape
    if isinstance(spec, str) and spec.lower() in DENSE_PRESETS:
        return ModelShape(spec.lower(), **DENSE_PRESETS[spec.lower()])
    try:
        return model_shape(spec)
    except Exception as e:  # GpuError: the message already names the value
        raise ValueError(str(e).replace("model must be one of",
                                        "model must be one of "
                                        + ", ".join(DENSE_PRESETS) + ",")) from None


@dataclass(frozen=True)
class ModelCosts:
    """Per-layer and per-token figures of one model (whole model, before any parallelism).

    Members
    -------
    name : str
    layers, dense_layers, moe_layers : int
    hidden, vocab, q_heads, kv_heads, dtype_bytes : int
    attn_bytes : float
        Attention projection weights of one layer, bytes.
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
        Linear-layer FLOPs per token of one layer (2 per multiply-accumulate; MoE: the
        active experts + shared experts + router).
    pair_flops : float
        Attention FLOPs of one (query token, context token) pair in one layer.
    pair_exps : float
        Softmax exponentials per pair in one layer (one per query head).
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
    approximation: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0 and self.moe_layers > 0

    def experts_touched(self, tokens) -> float:
        """Expected distinct routed experts one MoE layer reads for ``tokens`` tokens.

        Each token picks ``active_experts`` of ``experts`` uniformly (ideal balance, as the
        source assumes for its split placement): E (1 - (1 - k/E)^T)."""
        if not self.is_moe:
            return 0.0
        e, k = self.experts, self.active_experts
        return e * (1.0 - (1.0 - k / e) ** tokens)


def model_costs(shape) -> ModelCosts:
    """Reduce a shape (``hbfsim.shapes.ModelShape`` or the dense one) to :class:`ModelCosts`."""
    s = shape
    d = s.dtype_bytes
    g = lambda k, default=0: getattr(s, k, default) or default  # noqa: E731
    hd = s.head_dim
    is_mla = bool(getattr(s, "is_mla", False))
    if hasattr(s, "attn_bytes_per_layer"):
        attn = float(s.attn_bytes_per_layer)
    else:
        attn = float((2 * s.hidden * s.q_heads * hd + 2 * s.hidden * s.kv_heads * hd) * d)
    if hasattr(s, "dense_mlp_bytes_per_layer"):
        mlp = float(s.dense_mlp_bytes_per_layer)
    else:
        mlp = float(3 * s.hidden * s.intermediate * d)
    is_moe = bool(getattr(s, "is_moe", False))
    layers = s.layers
    if is_moe:
        moe_layers = int(s.moe_layers) if not callable(s.moe_layers) else int(s.moe_layers())
        dense_layers = layers - moe_layers
        experts, active = int(s.experts), int(s.active_experts)
        expert_b = float(s.expert_bytes)
        fixed = float(g("shared_expert_bytes_per_layer") + g("router_bytes_per_layer"))
    else:
        moe_layers, dense_layers, experts, active, expert_b, fixed = 0, layers, 0, 0, 0.0, 0.0
    lm_head = float(getattr(s, "lm_head_bytes", s.vocab * s.hidden * d))
    if hasattr(s, "weight_bytes"):
        weight = float(s.weight_bytes)
    else:
        weight = layers * (attn + mlp) + s.vocab * s.hidden * d * (1 if s.tied_embeddings else 2)
    if hasattr(s, "kv_bytes_per_token"):
        kvt = float(s.kv_bytes_per_token)
    else:
        kvt = float(2 * layers * s.kv_heads * hd * d)
    if hasattr(s, "attention_flops"):
        pair = float(s.attention_flops(1, 1)) / layers
        pair = pair if pair > 0 else 4.0 * s.q_heads * hd
    else:
        pair = 4.0 * s.q_heads * hd  # QK^T and PV: 2 MACs per head-dim element per pair
    if hasattr(s, "softmax_exps"):
        exps = float(s.softmax_exps(1, 1)) / layers or float(s.q_heads)
    else:
        exps = float(s.q_heads)
    approx = str(getattr(s, "approximation", "") or "")
    if is_mla and not approx:
        approx = "MLA attention FLOPs and KV bytes from hbfsim.shapes"
    return ModelCosts(
        name=s.name, layers=layers, dense_layers=dense_layers, moe_layers=moe_layers,
        hidden=s.hidden, vocab=s.vocab, q_heads=s.q_heads, kv_heads=s.kv_heads,
        dtype_bytes=d, attn_bytes=attn, mlp_bytes=mlp, experts=experts,
        active_experts=active, expert_bytes=expert_b, moe_fixed_bytes=fixed,
        lm_head_bytes=lm_head, weight_bytes=float(weight), kv_bytes_per_token=kvt,
        attn_flops_per_token=2.0 * attn / d, mlp_flops_per_token=2.0 * mlp / d,
        moe_flops_per_token=2.0 * (active * expert_b + fixed) / d, pair_flops=pair,
        pair_exps=exps, approximation=approx)
