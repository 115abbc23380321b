"""LLM tensor shapes shared by the device workloads and the serving level.

A :class:`ModelShape` describes a decoder-only transformer by the sizes that decide what it
costs to run: dense or Mixture-of-Experts MLPs (routed, active and shared experts, leading
dense layers), grouped-query attention (GQA) or DeepSeek's multi-head latent attention (MLA,
with an optional DeepSeek-Sparse-Attention indexer), weight and KV-cache dtypes. From those it
derives weight bytes, parameter counts, KV bytes per token, FLOPs and the expected weight bytes
a forward pass over a batch reads. ``model/workloads_llm.py`` (the device-level ``llm_decode``
workload) and ``serve/`` (the serving level of issue 9 and the serving paper) share it.

Plain Python: this module imports no simulator. docs/models.md gives every equation and the
source of every preset.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields, replace
from functools import cached_property
from pathlib import Path

__all__ = [
    "DTYPE_BYTES",
    "MODEL_PRESETS",
    "ModelShape",
    "ShapeError",
    "mean_causal_context",
    "model_shape",
]


class ShapeError(ValueError):
    """A malformed model shape or model config; the message names the field or key and value."""


# Bytes per element of a Hugging Face ``torch_dtype`` / ``dtype`` string.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1}


def _check_int(name: str, v, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ShapeError(f"{name} must be {kind}, not {v!r}")
    return v


def mean_causal_context(cached_tokens: float, new_tokens: float) -> float:
    """Mean number of tokens each of ``new_tokens`` causal queries attends.

    New token ``i`` (0-based) of a chunk that follows ``cached_tokens`` cached ones attends
    ``cached_tokens + i + 1`` tokens (itself included), so the mean is
    ``cached_tokens + (new_tokens + 1) / 2``. Pass it as ``context_tokens`` to
    :meth:`ModelShape.attention_flops` and :meth:`ModelShape.softmax_exps`.
    """
    if cached_tokens < 0 or new_tokens < 1:
        raise ShapeError(f"cached_tokens must be >= 0 and new_tokens >= 1, not "
                         f"{cached_tokens!r} and {new_tokens!r}")
    return cached_tokens + (new_tokens + 1) / 2


@dataclass(frozen=True)
class ModelShape:
    """The tensor shape of a decoder-only transformer (Llama, Qwen, DeepSeek and GLM families).

    Every layer has the same attention; its MLP is dense (``intermediate`` wide) or, in an
    MoE model, routed experts (``experts`` of them, ``active_experts`` chosen per token by a
    router, each ``moe_intermediate`` wide) plus ``shared_experts`` always-on experts of the
    same width. Gated (SwiGLU) MLPs throughout: gate, up and down matrices. Attention is GQA
    unless ``kv_lora_rank > 0`` (MLA). Multi-token-prediction layers are not modelled.

    Members
    -------
    name : str
    layers, hidden, q_heads, kv_heads, head_dim, intermediate, vocab : int
        Decoder layers, hidden size, query heads, KV heads (GQA), query/key head width,
        dense-MLP width, vocabulary. Under MLA ``head_dim`` is informational
        (``qk_nope_head_dim + qk_rope_head_dim`` in the presets) and ``kv_heads`` unused.
    tied_embeddings : bool
        The LM head reuses the embedding matrix.
    dtype_bytes : int
        Bytes per weight (2 for BF16/FP16, 1 for FP8).
    qk_norm : bool
        Per-head RMSNorm of queries and keys (Qwen3, GLM-4.5), GQA only.
    attention_bias : bool
        q/k/v projections have biases (Qwen2, GLM-4.5), GQA only.
    experts : int
        Routed experts per MoE layer; 0 = a dense model.
    active_experts : int
        Routed experts chosen per token (top-k).
    shared_experts : int
        Experts every token goes through in each MoE layer (DeepSeek, GLM), each
        ``moe_intermediate`` wide.
    moe_intermediate : int
        FFN width of one expert.
    dense_layers : int
        Layers of an MoE model whose MLP is dense (DeepSeek's ``first_k_dense_replace``: the
        leading ones; Qwen3-MoE's ``mlp_only_layers``). Where they sit changes nothing here.
        0 for dense models, whose every layer is dense.
    kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim : int
        MLA (DeepSeek-V2/V3): the compressed KV width, the compressed query width (0 = the
        query is projected directly from the hidden state), the RoPE and non-RoPE parts of a
        query/key head and the value head width. All 0 for GQA.
    index_heads, index_head_dim, index_topk : int
        DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's heads and head width
        (one key of ``index_head_dim`` per token per layer is cached) and the number of
        context tokens each query attends (``index_n_heads``, ``index_head_dim``,
        ``index_topk``). All 0 = dense attention.
    kv_dtype_bytes : int
        Bytes per cached KV element; 0 (the default) means ``dtype_bytes``, resolved when
        the shape is built (so :func:`dataclasses.replace` of ``dtype_bytes`` alone keeps it).
    approximation : str
        One line: where a preset departs from the real model ("" = exact).

    Raises
    ------
    ShapeError
        A field out of range or inconsistent with another (the message names it).
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = True
    dtype_bytes: int = 2
    qk_norm: bool = True
    attention_bias: bool = False
    experts: int = 0
    active_experts: int = 0
    shared_experts: int = 0
    moe_intermediate: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    kv_dtype_bytes: int = 0
    approximation: str = ""

    def __post_init__(self):
        for f in ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "intermediate",
                  "vocab", "dtype_bytes"):
            _check_int(f, getattr(self, f), 1)
        for f in ("experts", "active_experts", "shared_experts", "moe_intermediate",
                  "dense_layers", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                  "qk_nope_head_dim", "v_head_dim", "index_heads", "index_head_dim",
                  "index_topk", "kv_dtype_bytes"):
            _check_int(f, getattr(self, f), 0)
        for f in ("tied_embeddings", "qk_norm", "attention_bias"):
            if not isinstance(getattr(self, f), bool):
                raise ShapeError(f"{f} must be True or False, not {getattr(self, f)!r}")
        if not isinstance(self.approximation, str) or "\n" in self.approximation:
            raise ShapeError(f"approximation must be one line of text, not "
                             f"{self.approximation!r}")
        if self.kv_dtype_bytes == 0:
            object.__setattr__(self, "kv_dtype_bytes", self.dtype_bytes)
        if self.experts:
            if not 1 <= self.active_experts <= self.experts:
                raise ShapeError(f"active_experts must be 1..experts ({self.experts}), "
                                 f"not {self.active_experts!r}")
            if self.moe_intermediate < 1:
                raise ShapeError(f"moe_intermediate must be positive in an MoE model, not "
                                 f"{self.moe_intermediate!r}")
            if self.dense_layers >= self.layers:
                raise ShapeError(f"dense_layers must be below layers ({self.layers}) in an "
                                 f"MoE model, not {self.dense_layers!r}")
        else:
            for f in ("active_experts", "shared_experts", "moe_intermediate", "dense_layers"):
                if getattr(self, f):
                    raise ShapeError(f"{f} must be 0 in a dense model (experts = 0), not "
                                     f"{getattr(self, f)!r}")
        mla = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        if self.kv_lora_rank:
            for f in mla:
                if not getattr(self, f):
                    raise ShapeError(f"{f} must be positive under MLA (kv_lora_rank > 0), "
                                     f"not {getattr(self, f)!r}")
            for f in ("qk_norm", "attention_bias"):
                if getattr(self, f):
                    raise ShapeError(f"{f} must be False under MLA (kv_lora_rank > 0), not "
                                     f"{getattr(self, f)!r}")
        else:
            for f in ("q_lora_rank",) + mla:
                if getattr(self, f):
                    raise ShapeError(f"{f} must be 0 without MLA (kv_lora_rank = 0), not "
                                     f"{getattr(self, f)!r}")
        if not self.kv_lora_rank:
            # GQA: each KV head serves a whole group of query heads (MLA has no KV heads)
            if self.kv_heads > self.q_heads or self.q_heads % self.kv_heads:
                raise ShapeError(f"kv_heads ({self.kv_heads}) must divide q_heads "
                                 f"({self.q_heads}): each KV head serves a whole group of "
                                 f"query heads (GQA)")
        dsa = [getattr(self, f) for f in ("index_heads", "index_head_dim", "index_topk")]
        if any(dsa) and not all(dsa):
            raise ShapeError(f"index_heads, index_head_dim and index_topk must be all positive "
                             f"or all 0, not {dsa!r}")

    # ------------------------------------------------------------------ kind
    @property
    def is_moe(self) -> bool:
        """The MLPs (past ``dense_layers``) are routed experts."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Attention is multi-head latent attention (a compressed KV cache)."""
        return self.kv_lora_rank > 0

    @property
    def is_sparse_attention(self) -> bool:
        """Attention is DeepSeek Sparse Attention: each query attends ``index_topk`` tokens."""
        return self.index_topk > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed experts (``layers - dense_layers``; 0 if dense)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def dense_mlp_layers(self) -> int:
        """Layers whose MLP is dense (all of them in a dense model)."""
        return self.layers - self.moe_layers

    # ------------------------------------------------------------------ parameters per part
    def _attn_macs(self) -> int:
        """Multiply-accumulates per token of one layer's attention projections."""
        h = self.hidden
        if self.is_mla:
            H, r, rope = self.q_heads, self.kv_lora_rank, self.qk_rope_head_dim
            qk = self.qk_nope_head_dim + rope
            q = h * self.q_lora_rank + self.q_lora_rank * H * qk if self.q_lora_rank \
                else h * H * qk                       # q_a_proj + q_b_proj, or q_proj
            kv = h * (r + rope) + r * H * (self.qk_nope_head_dim + self.v_head_dim)
            macs = q + kv + H * self.v_head_dim * h   # kv_a_proj_with_mqa, kv_b_proj, o_proj
        else:
            qd, kvd = self.q_heads * self.head_dim, self.kv_heads * self.head_dim
            macs = 2 * qd * h + 2 * kvd * h           # q, o; k, v
        if self.index_heads:
            # DSA indexer (transformers GlmMoeDsaIndexer): wq_b from the compressed query,
            # wk and weights_proj from the hidden state.
            src = self.q_lora_rank or h
            macs += src * self.index_heads * self.index_head_dim + h * self.index_head_dim \
                + h * self.index_heads
        return macs

    def _attn_params(self) -> int:
        p = self._attn_macs() + 2 * self.hidden   # + input and post-attention RMSNorms
        if self.is_mla:
            p += self.q_lora_rank + self.kv_lora_rank      # q_a_layernorm, kv_a_layernorm
        else:
            if self.attention_bias:
                p += (self.q_heads + 2 * self.kv_heads) * self.head_dim
            if self.qk_norm:
                p += 2 * self.head_dim
        if self.index_heads:
            p += 2 * self.index_head_dim                    # indexer k_norm (LayerNorm)
        return p

    # ------------------------------------------------------------------ bytes
    @property
    def attn_bytes_per_layer(self) -> int:
        """Bytes of one layer's attention: q/k/v/o projections (biases, QK-norms), the two
        layer norms, MLA's down/up projections and norms, the DSA indexer."""
        return self._attn_params() * self.dtype_bytes

    @property
    def dense_mlp_bytes_per_layer(self) -> int:
        """Bytes of one dense MLP (gate, up, down: ``3 x hidden x intermediate``)."""
        return 3 * self.hidden * self.intermediate * self.dtype_bytes

    @property
    def expert_bytes(self) -> int:
        """Bytes of one routed expert of one layer (``3 x hidden x moe_intermediate``)."""
        return 3 * self.hidden * self.moe_intermediate * self.dtype_bytes

    @property
    def shared_expert_bytes_per_layer(self) -> int:
        """Bytes of one MoE layer's shared experts (``shared_experts x expert_bytes``)."""
        return self.shared_experts * self.expert_bytes

    @property
    def router_bytes_per_layer(self) -> int:
        """Bytes of one MoE layer's router (``experts x hidden``; 0 if dense)."""
        return self.experts * self.hidden * self.dtype_bytes

    @property
    def embed_bytes(self) -> int:
        """Bytes of the embedding matrix (``vocab x hidden``)."""
        return self.vocab * self.hidden * self.dtype_bytes

    @property
    def lm_head_bytes(self) -> int:
        """Bytes the LM head reads per forward pass (``vocab x hidden``; the embedding
        matrix itself when tied)."""
        return self.vocab * self.hidden * self.dtype_bytes

    @property
    def final_norm_bytes(self) -> int:
        """Bytes of the final RMSNorm (``hidden``)."""
        return self.hidden * self.dtype_bytes

    @property
    def moe_layer_bytes(self) -> int:
        """Bytes of one MoE layer's MLP: all routed experts, shared experts, router."""
        if not self.is_moe:
            return 0
        return (self.experts * self.expert_bytes + self.shared_expert_bytes_per_layer
                + self.router_bytes_per_layer)

    @cached_property
    def weight_bytes(self) -> int:
        """Bytes of every stored weight (tied embeddings counted once)."""
        return (self.embed_bytes + (0 if self.tied_embeddings else self.lm_head_bytes)
                + self.layers * self.attn_bytes_per_layer
                + self.dense_mlp_layers * self.dense_mlp_bytes_per_layer
                + self.moe_layers * self.moe_layer_bytes + self.final_norm_bytes)

    @cached_property
    def param_count(self) -> int:
        """Parameters stored (``weight_bytes / dtype_bytes``: one dtype for all weights)."""
        return self.weight_bytes // self.dtype_bytes

    @cached_property
    def active_param_count(self) -> int:
        """Parameters one token goes through: every layer's attention and norms, dense MLPs,
        per MoE layer the router, the shared and ``active_experts`` routed experts, the LM
        head and the final norm. The embedding lookup counts its one row (``hidden``), not
        the table (the usual "active parameters" convention; see docs/models.md)."""
        h = self.hidden
        moe = (self.active_experts + self.shared_experts) * 3 * h * self.moe_intermediate \
            + self.experts * h
        return (self.layers * self._attn_params() + self.dense_mlp_layers * 3 * h
                * self.intermediate + self.moe_layers * moe + self.vocab * h + h + h)

    @cached_property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token adds, over all layers.

        GQA: ``2 x kv_heads x head_dim`` elements per layer (K and V). MLA: the compressed
        latent plus the decoupled RoPE key, ``kv_lora_rank + qk_rope_head_dim`` elements per
        layer (DeepSeek-V2 §2.1.2). DSA adds the indexer's key, ``index_head_dim`` per layer.
        Elements are ``kv_dtype_bytes`` each.
        """
        if self.is_mla:
            per = self.kv_lora_rank + self.qk_rope_head_dim
        else:
            per = 2 * self.kv_heads * self.head_dim
        return self.layers * (per + self.index_head_dim) * self.kv_dtype_bytes

    # ------------------------------------------------------------------ FLOPs
    @cached_property
    def _linear_flops(self) -> int:
        h = self.hidden
        moe = (self.active_experts + self.shared_experts) * 3 * h * self.moe_intermediate \
            + self.experts * h
        return 2 * (self.layers * self._attn_macs()
                    + self.dense_mlp_layers * 3 * h * self.intermediate
                    + self.moe_layers * moe + self.vocab * h)

    def linear_flops_per_token(self) -> int:
        """FLOPs of every weight matmul one token goes through (2 per multiply-accumulate).

        Attention projections (MLA: q down/up, kv down, kv up as the absorbed W_UK / W_UV of
        the same size, o; DSA: the indexer's projections), dense MLPs, per MoE layer the
        router and the ``active_experts + shared_experts`` experts, the LM head. Norms,
        biases, activations and the attention itself (:meth:`attention_flops`) are not
        matmuls over weights and are left out.
        """
        return self._linear_flops

    def _effective_context(self, context_tokens: float) -> float:
        if self.is_sparse_attention:
            return min(context_tokens, self.index_topk)
        return context_tokens

    def _check_tokens(self, query_tokens, context_tokens):
        if isinstance(query_tokens, bool) or not isinstance(query_tokens, (int, float)) \
                or query_tokens < 0:
            raise ShapeError(f"query_tokens must be a non-negative number, not "
                             f"{query_tokens!r}")
        if isinstance(context_tokens, bool) or not isinstance(context_tokens, (int, float)) \
                or context_tokens < 0:
            raise ShapeError(f"context_tokens must be a non-negative number, not "
                             f"{context_tokens!r}")

    def attention_flops(self, query_tokens: float, context_tokens: float) -> float:
        """FLOPs of QK^T and AV over all layers for ``query_tokens`` new tokens, each
        attending ``context_tokens`` tokens.

        Parameters
        ----------
        query_tokens : number
            New tokens (1 per sequence in decode, the chunk length in prefill), summed over
            the batch when every sequence attends the same context.
        context_tokens : number
            Tokens each query attends, itself included. Attention is causal: for a prefill
            chunk pass the *mean* context, :func:`mean_causal_context` (``cached + (n+1)/2``);
            for a batch of sequences of different lengths, call once per sequence or pass
            the mean (the cost is linear in it).

        Per layer, GQA: ``2 x q x c x q_heads x head_dim`` for QK^T plus the same for AV
        (each query head reads its group's K/V). MLA is counted in its *absorbed* form
        (DeepSeek-V2 §2.1.2; vLLM's and SGLang's MLA decode): W_UK is folded into the query
        and W_UV into the output (their cost is in :meth:`linear_flops_per_token`), so each
        head scores the cached latent directly, ``2 x q x c x q_heads x (kv_lora_rank +
        qk_rope_head_dim)`` for QK^T and ``2 x q x c x q_heads x kv_lora_rank`` for AV. That
        is the form that reads only the compressed cache :attr:`kv_bytes_per_token` counts;
        the expanded form (fewer FLOPs when q is large, as in long prefills) would first
        up-project every cached latent. Under DSA each query attends ``min(c, index_topk)``
        tokens and the indexer scores all ``c``: ``2 x q x c x index_heads x index_head_dim``
        more (``min`` of the mean context: exact for decode, an approximation for a chunk
        straddling ``index_topk``).
        """
        self._check_tokens(query_tokens, context_tokens)
        c = self._effective_context(context_tokens)
        H = self.q_heads
        if self.is_mla:
            per = 2 * H * (2 * self.kv_lora_rank + self.qk_rope_head_dim) * c
        else:
            per = 4 * H * self.head_dim * c
        if self.is_sparse_attention:
            per += 2 * self.index_heads * self.index_head_dim * context_tokens
        return self.layers * query_tokens * per

    def softmax_exps(self, query_tokens: float, context_tokens: float) -> float:
        """Exponentiations of the attention softmax: one per query head, query and attended
        token, over all layers (``layers x q_heads x q x c``; ``c`` capped at ``index_topk``
        under DSA, whose indexer uses ReLU, not exp). For the energy model's pJ per FP32
        exponentiation (serving paper Table 2). Arguments as for :meth:`attention_flops`."""
        self._check_tokens(query_tokens, context_tokens)
        return self.layers * self.q_heads * query_tokens * self._effective_context(context_tokens)

    # ------------------------------------------------------------------ bytes per pass
    def expected_experts(self, tokens: int) -> float:
        """Expected number of distinct routed experts ``tokens`` tokens touch in one MoE
        layer: ``E x (1 - (1 - k/E)^tokens)`` under uniform, independent routing (each token
        picks ``k`` of ``E``, so a given expert escapes one token with probability
        ``1 - k/E``). ``k`` at ``tokens = 1``, ``E`` as ``tokens`` grows. 0 if dense."""
        _check_int("tokens", tokens, 1)
        if not self.is_moe:
            return 0.0
        E, k = self.experts, self.active_experts
        return E * (1.0 - (1.0 - k / E) ** tokens)

    def active_weight_bytes(self, tokens: int) -> float:
        """Expected weight bytes one forward pass over a batch of ``tokens`` tokens reads.

        Every weight once except two: an untied embedding table is read only at the
        batch's rows (at most ``min(tokens, vocab)`` distinct rows, the bound taken here;
        the LM head reads its full matrix), and each MoE layer reads
        :meth:`expected_experts` of its routed experts (uniform independent routing: real
        routers are skewed, so this is an upper bound on distinct experts for a given load
        balance; ``k`` experts per layer at ``tokens = 1``, all ``E`` as tokens grow).
        Non-expert weights (attention, norms, dense MLPs, routers, shared experts, LM head)
        are always read in full.
        """
        _check_int("tokens", tokens, 1)
        b = float(self.weight_bytes) - self.moe_layers * self.experts * self.expert_bytes
        if not self.tied_embeddings:
            b -= self.embed_bytes - min(tokens, self.vocab) * self.hidden * self.dtype_bytes
        return b + self.moe_layers * self.expected_experts(tokens) * self.expert_bytes

    # ------------------------------------------------------------------ scaling
    def scaled(self, scale: int) -> "ModelShape":
        """Divide the widths by ``scale`` so tests can run a small version of the model.

        hidden, intermediate, moe_intermediate, vocab, kv_lora_rank and q_lora_rank are
        divided (kept multiples of 16 elements, at least 16); query, KV and indexer head
        counts are divided (at least 1). Layers, per-head widths (head_dim, the MLA head
        dims, index_head_dim), the expert counts (so routing statistics stay the model's),
        dense_layers and index_topk are kept. ``scale = 1`` is the model.
        """
        _check_int("scale", scale, 1)
        if scale == 1:
            return self

        def div(v, m=16):
            return max(m, -(-(v // scale) // m) * m) if v else 0

        q_heads = max(1, self.q_heads // scale)
        kv_heads = max(1, self.kv_heads // scale)
        if not self.kv_lora_rank and q_heads % kv_heads:
            kv_heads = math.gcd(q_heads, kv_heads)     # whole groups (GQA) in the small model
        return replace(self, name=f"{self.name}/{scale}", hidden=div(self.hidden),
                       intermediate=div(self.intermediate), vocab=div(self.vocab),
                       moe_intermediate=div(self.moe_intermediate),
                       kv_lora_rank=div(self.kv_lora_rank), q_lora_rank=div(self.q_lora_rank),
                       q_heads=q_heads, kv_heads=kv_heads,
                       index_heads=max(1, self.index_heads // scale) if self.index_heads else 0)


# ============================================================================ presets
# Each preset is its model's Hugging Face config.json (the repository named in the comment),
# read by hand; tests/test_shapes.py checks the parameter counts against the published ones.
_PRESETS = [
    # Qwen/Qwen3-1.7B (HBF-Sim paper §5.5): BF16, tied embeddings, QK-norm.
    ModelShape("qwen3-1.7b", layers=28, hidden=2048, q_heads=16, kv_heads=8, head_dim=128,
               intermediate=6144, vocab=151936, tied_embeddings=True, qk_norm=True),
    # Qwen/Qwen3-32B (serving paper Table 3): 32.8 B parameters.
    ModelShape("qwen3-32b", layers=64, hidden=5120, q_heads=64, kv_heads=8, head_dim=128,
               intermediate=25600, vocab=151936, tied_embeddings=False, qk_norm=True),
    # meta-llama/Llama-3.1-8B, -70B, -405B (serving paper Table 3 uses 405B): head_dim =
    # hidden / heads = 128, no QK-norm, untied.
    ModelShape("llama-3.1-8b", layers=32, hidden=4096, q_heads=32, kv_heads=8, head_dim=128,
               intermediate=14336, vocab=128256, tied_embeddings=False, qk_norm=False),
    ModelShape("llama-3.1-70b", layers=80, hidden=8192, q_heads=64, kv_heads=8, head_dim=128,
               intermediate=28672, vocab=128256, tied_embeddings=False, qk_norm=False),
    ModelShape("llama-3.1-405b", layers=126, hidden=16384, q_heads=128, kv_heads=8,
               head_dim=128, intermediate=53248, vocab=128256, tied_embeddings=False,
               qk_norm=False),
    # Qwen/Qwen3-235B-A22B (source 003): 128 experts, top 8, every layer MoE
    # (decoder_sparse_step 1, mlp_only_layers []); intermediate_size 12288 is unused.
    ModelShape("qwen3-235b-a22b", layers=94, hidden=4096, q_heads=64, kv_heads=4,
               head_dim=128, intermediate=12288, vocab=151936, tied_embeddings=False,
               qk_norm=True, experts=128, active_experts=8, moe_intermediate=1536),
    # Qwen/Qwen3-Coder-480B-A35B-Instruct (source 003): 160 experts, top 8, all layers MoE.
    ModelShape("qwen3-coder-480b-a35b", layers=62, hidden=6144, q_heads=96, kv_heads=8,
               head_dim=128, intermediate=8192, vocab=151936, tied_embeddings=False,
               qk_norm=True, experts=160, active_experts=8, moe_intermediate=2560),
    # deepseek-ai/DeepSeek-V3 (source 003): MLA, 256 routed + 1 shared experts, top 8,
    # first_k_dense_replace 3; released as FP8 e4m3 weights (quantization_config), BF16 KV.
    ModelShape("deepseek-v3", layers=61, hidden=7168, q_heads=128, kv_heads=128,
               head_dim=192, intermediate=18432, vocab=129280, tied_embeddings=False,
               dtype_bytes=1, kv_dtype_bytes=2, qk_norm=False, experts=256, active_experts=8,
               shared_experts=1, moe_intermediate=2048, dense_layers=3, kv_lora_rank=512,
               q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
               approximation="all weights FP8 (the checkpoint keeps embeddings, LM head and "
                             "norms in BF16, +0.3% bytes); the MTP layer is left out"),
    # zai-org/GLM-4.5: 160 routed + 1 shared experts, top 8, first_k_dense_replace 3,
    # use_qk_norm, attention_bias (q/k/v), partial RoPE (no effect on sizes).
    ModelShape("glm-4.5", layers=92, hidden=5120, q_heads=96, kv_heads=8, head_dim=128,
               intermediate=12288, vocab=151552, tied_embeddings=False, qk_norm=True,
               attention_bias=True, experts=160, active_experts=8, shared_experts=1,
               moe_intermediate=1536, dense_layers=3,
               approximation="the MTP layer (num_nextn_predict_layers 1) is left out"),
    # zai-org/GLM-5 as transformers' GlmMoeDsaConfig defaults describe it (model_type
    # glm_moe_dsa): MLA, DSA indexer (32 heads x 128, top 2048 tokens), 256 routed + 1 shared
    # experts, top 8, 3 dense layers. Stands in for the source's GLM-5.2 (serving paper Table 3).
    ModelShape("glm-5", layers=78, hidden=6144, q_heads=64, kv_heads=64, head_dim=256,
               intermediate=12288, vocab=154880, tied_embeddings=False, qk_norm=False,
               experts=256, active_experts=8, shared_experts=1, moe_intermediate=2048,
               dense_layers=3, kv_lora_rank=512, q_lora_rank=2048, qk_rope_head_dim=64,
               qk_nope_head_dim=192, v_head_dim=256, index_heads=32, index_head_dim=128,
               index_topk=2048,
               approximation="002's GLM-5.2 is not public in detail: GLM-5's architecture "
                             "assumed (744B, 40B active); MTP layer left out; indexer keys "
                             "cached at kv_dtype_bytes (FP8 in DeepSeek's reference)"),
]
MODEL_PRESETS: dict[str, ModelShape] = {s.name: s for s in _PRESETS}


def model_shape(spec) -> ModelShape:
    """A :class:`ModelShape` from a preset name, a dict, a config.json path or a shape.

    Parameters
    ----------
    spec : ModelShape, str, os.PathLike or dict
        A shape (returned as is); a preset name (:data:`MODEL_PRESETS`, case-insensitive);
        the path of a Hugging Face ``config.json`` or of the directory holding one (the
        shape is named after the directory); or a dict of :class:`ModelShape` field names
        (every field without a default present) or of config.json keys.

    Notes
    -----
    config.json keys read, every ``model_type``: ``num_hidden_layers``, ``hidden_size``,
    ``num_attention_heads``, ``num_key_value_heads`` (default: the head count),
    ``head_dim`` (default ``hidden_size / num_attention_heads``), ``intermediate_size``,
    ``vocab_size``, ``tie_word_embeddings`` (default false), ``torch_dtype`` or ``dtype``
    (default bfloat16), ``quantization_config`` (fp8: 1-byte weights, KV in torch_dtype),
    ``attention_bias``, ``qk_norm`` / ``use_qk_norm`` (default: true for qwen3 and
    qwen3_moe). Dense: qwen3, qwen2, llama, mistral. MoE: qwen3_moe (``num_experts``,
    ``num_experts_per_tok``, ``moe_intermediate_size``, ``decoder_sparse_step``,
    ``mlp_only_layers``); mixtral (``num_local_experts``, ``num_experts_per_tok``;
    ``intermediate_size`` is the expert width); deepseek_v2, deepseek_v3, glm4_moe and
    glm_moe_dsa (``n_routed_experts``, ``n_shared_experts``, ``num_experts_per_tok``,
    ``moe_intermediate_size``, ``first_k_dense_replace`` with ``moe_layer_freq``, or
    ``mlp_layer_types``). MLA, for deepseek_v2, deepseek_v3 and glm_moe_dsa:
    ``kv_lora_rank``, ``q_lora_rank`` (null = none), ``qk_rope_head_dim``,
    ``qk_nope_head_dim``, ``v_head_dim``; glm_moe_dsa adds ``index_n_heads``,
    ``index_head_dim``, ``index_topk``. Any other ``model_type`` is read as a generic dense
    decoder, unless it carries MoE or MLA keys (then it is rejected).

    Raises
    ------
    ShapeError
        Unknown preset, unreadable file, missing or invalid key: one line naming the file
        (or "model config" for a dict) and the key.
    """
    if isinstance(spec, ModelShape):
        return spec
    if isinstance(spec, Path):
        spec = str(spec)
    if isinstance(spec, str):
        key = spec.lower()
        if key in MODEL_PRESETS:
            return MODEL_PRESETS[key]
        p = Path(spec)
        if p.is_dir() and (p / "config.json").is_file():
            p = p / "config.json"
        if not p.is_file():
            raise ShapeError(f"model must be one of {', '.join(MODEL_PRESETS)} or a config.json "
                             f"path, not {spec!r}")
        from hbfsim.model_config import read_model_file

        spec = read_model_file(p)
        spec.setdefault("name", p.parent.name or p.stem)
        src = f"model config {str(p)!r}"
    elif isinstance(spec, dict):
        src = "model config"
    else:
        raise ShapeError(f"model must be a preset name, dict or path, not "
                         f"{type(spec).__name__}")
    names = {f.name for f in fields(ModelShape)}
    required = {f.name for f in fields(ModelShape)
                if f.default is MISSING and f.name != "name"}
    if required <= spec.keys():
        return ModelShape(**{"name": "model", **{k: v for k, v in spec.items() if k in names}})
    from hbfsim.model_config import from_hf

    return from_hf(spec, src)
