"""Time of one serving iteration: every operator of every layer, per GPU of a replica.

One iteration (vLLM continuous batching) runs the model once over ``T`` query tokens: the
decode tokens of running sequences plus prefill chunks. Per layer and per GPU of a replica
(docs/serving.md, "Cost model", gives the equations):

    t_op = max( C_op, M_op ) + overlap_loss x min( C_op, M_op )
    C_op  = GEMM time of serve/gemm.py (tile and wave quantization under a ceiling ``eta``),
            or attention FLOPs at ``attn_efficiency`` of the BF16 peak
    M_op (shared sites) = max over tiers x of ( [B_x > 0] L_x + B_x / (mu BW_x) + W_x / (mu WBW_x) )
    M_op (h3)           = max( [B > 0] L_hbm + (B_hbm + B_hbf + W) / (mu BW_hbm),  t_hbf )

for the operators attention projections, attention over the KV cache, MLP (dense) or routed
experts (MoE; a grouped GEMM at ``moe_efficiency``, the busiest EP rank's load), plus the LM
head once per iteration, TP all-reduces and EP all-to-alls of BF16 activations over the
interconnect (serve/collectives.py), and a fixed per-iteration cost. New KV written to HBF is
programmed in the background: the iteration lasts ``max(sum of the above, L_w + W_hbf /
WBW_hbf)``. ``B_x`` are bytes read from tier ``x`` (weights from their placement, KV from
where each sequence's blocks live), ``W_x`` bytes written to HBM (new KV), ``L_x`` the
tier's startup latency, ``BW_x`` its aggregate bandwidth over the GPU's stacks, ``mu`` the
achieved fraction of it. :class:`CostParams`' defaults are the plain roofline (flat ``eta``,
``mu = 1``, perfect overlap, nothing fixed); serve/calibration.py gives the calibrated
parameters. All inputs may be numpy arrays (one element per iteration), so a run of
identical decode iterations is costed in one call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hbfsim.serve.collectives import allreduce_seconds, alltoall_seconds
from hbfsim.serve.gemm import GemmTiles, gemm_seconds
from hbfsim.serve.hardware import Node
from hbfsim.serve.imbalance import max_load_factor
from hbfsim.serve.models import ModelCosts

__all__ = ["CostParams", "CostModel", "WEIGHT_PLACEMENTS"]

#: Where weights live: all in HBM, all in HBF, or ``split`` (the serving paper's Table 6:
#: selected routed experts in HBM, remaining experts in HBF, every other weight in HBM).
WEIGHT_PLACEMENTS = ("hbm", "hbf", "split")


@dataclass(frozen=True)
class CostParams:
    """Named constants of the cost model (docs/serving.md lists each with its source).

    The defaults are the plain roofline (every GEMM at ``compute_efficiency`` of the peak,
    memory at its nominal bandwidth, perfect overlap, no fixed cost, ideal balance): what the
    engine's closed-form tests check. :func:`hbfsim.serve.calibration.calibrated_params`
    gives the parameters fitted to published H100 / H200 measurements, which ``hbfsim
    serve`` uses unless ``--cost-model roofline``.

    Members
    -------
    dtype : str
        Arithmetic dtype of the weight GEMMs (``"bf16"`` or ``"fp8"``); attention runs in
        BF16.
    compute_efficiency : float
        Fraction of the dense peak the best-shaped GEMM achieves (``eta``).
    gemm_tiles : GemmTiles or None
        Tile shape for tile/wave quantization (serve/gemm.py); ``None``: a flat
        ``compute_efficiency`` whatever the shape.
    attn_efficiency : float or None
        Fraction of the BF16 peak attention kernels achieve (``None``: ``compute_efficiency``).
    mem_efficiency : float
        Achieved fraction of the nominal bandwidth of the GPU's stacks, reads and writes,
        HBM and HBF alike (a property of the GPU's memory system, fitted per GPU on HBM-only
        measurements; applied to HBF too so that it does not favour either tier).
    overlap_loss : float
        Fraction of the shorter of an operator's compute and memory time that is not hidden
        under the longer one: ``t = max(c, m) + overlap_loss x min(c, m)``.
    step_overhead_s : float
        Fixed time per iteration (scheduling, sampling, kernel launches / graph replay).
    link_latency_s : float or None
        Startup of one collective step (``None``: the node's ``Interconnect.latency_s``).
    link_efficiency : float
        Achieved fraction of the link bandwidth by large collectives.
    activation_bytes : int
        Bytes per element of the activations collectives move (2: engines keep BF16
        activations for all-reduce and all-to-all, FP8 models included).
    moe_efficiency : float
        Grouped expert GEMMs reach this fraction of the dense GEMMs' ceiling (routing,
        permutation and per-expert scaling kernels around them included).
    imbalance_spread : float
        Spread ``s`` of the expert-parallel and data-parallel-attention load imbalance
        (serve/imbalance.py); 0 = ideal balance.
    split_hbm_expert_fraction : float
        ``split`` placement: fraction of each layer's routed experts kept in HBM.
    """

    dtype: str = "bf16"
    compute_efficiency: float = 0.7
    gemm_tiles: GemmTiles | None = None
    attn_efficiency: float | None = None
    mem_efficiency: float = 1.0
    overlap_loss: float = 0.0
    step_overhead_s: float = 0.0
    link_latency_s: float | None = None
    link_efficiency: float = 1.0
    activation_bytes: int = 2
    imbalance_spread: float = 0.0
    moe_efficiency: float = 1.0
    split_hbm_expert_fraction: float = 0.5

    def __post_init__(self):
        def frac(name, v, low_open=True):
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
                and (0 < v <= 1 if low_open else 0 <= v <= 1)
            if not ok:
                rng = "(0, 1]" if low_open else "[0, 1]"
                raise ValueError(f"{name} must be in {rng}, not {v!r}")

        frac("compute_efficiency", self.compute_efficiency)
        if self.attn_efficiency is not None:
            frac("attn_efficiency", self.attn_efficiency)
        frac("mem_efficiency", self.mem_efficiency)
        frac("link_efficiency", self.link_efficiency)
        frac("moe_efficiency", self.moe_efficiency)
        frac("overlap_loss", self.overlap_loss, low_open=False)
        frac("split_hbm_expert_fraction", self.split_hbm_expert_fraction, low_open=False)
        for name in ("step_overhead_s", "imbalance_spread") + \
                (("link_latency_s",) if self.link_latency_s is not None else ()):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {v!r}")
        if self.activation_bytes not in (1, 2, 4):
            raise ValueError(f"activation_bytes must be 1, 2 or 4, not "
                             f"{self.activation_bytes!r}")
        if self.gemm_tiles is not None and not isinstance(self.gemm_tiles, GemmTiles):
            raise ValueError(f"gemm_tiles must be a GemmTiles or None, not {self.gemm_tiles!r}")


class CostModel:
    """Iteration time and per-iteration byte / operation counts for one replica.

    Parameters
    ----------
    node : Node
    model : ModelCosts
    tp : int
        Tensor-parallel degree (GPUs of one replica); weights and attention heads divide by
        ``tp``, KV heads by ``min(tp, kv_heads)`` (replicated beyond).
    ep : int
        Expert-parallel degree for MoE layers, a divisor of ``tp``: ``ep`` ranks hold
        ``1/ep`` of the experts each, every expert sharded by TP over a rank's ``tp / ep``
        GPUs, which all-reduce after the experts (``1``: every GPU reads its ``1/tp`` share
        of every touched expert, as vLLM runs Mixtral at TP2; defaults to ``tp``).
    weights : str
        One of :data:`WEIGHT_PLACEMENTS`.
    params : CostParams
    dpa : bool
        Data-parallel attention (the serving paper's Table 3, "DPA"): each GPU of the group
        runs attention for its own share of the sequences, so attention weights are
        replicated on every GPU and KV divides over the ``tp`` GPUs by sequence (ideal
        balance; MLA included), with no all-reduce after attention. MLPs stay TP (dense)
        or EP (experts).
    """

    def __init__(self, node: Node, model: ModelCosts, tp: int = 1, ep: int | None = None,
                 weights: str = "hbm", params: CostParams | None = None, dpa: bool = False):
        if weights not in WEIGHT_PLACEMENTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_PLACEMENTS)}, "
                             f"not {weights!r}")
        if tp < 1 or tp > node.gpus:
            raise ValueError(f"tp must be in 1..{node.gpus} (the node's GPUs), not {tp!r}")
        if node.gpus % tp:
            raise ValueError(f"tp must divide the node's {node.gpus} GPUs, not {tp!r}")
        ep = (tp if model.is_moe else 1) if ep is None else ep
        if ep < 1 or ep > tp or tp % ep:
            raise ValueError(f"ep must divide tp = {tp}, not {ep!r}")
        if weights != "hbm" and node.hbf.stacks == 0:
            raise ValueError(f"weights {weights!r} need HBF stacks; the node has none")
        if weights == "split" and not model.is_moe:
            raise ValueError("weights 'split' places routed experts; the model is dense")
        self.node, self.model, self.tp, self.ep, self.weights = node, model, tp, ep, weights
        self.dpa = bool(dpa)
        self.params = p = params or CostParams()
        self.peak = node.gpu.peak(p.dtype)
        self.flops = self.peak * p.compute_efficiency
        self.attn_flops = node.gpu.peak("bf16") * (p.attn_efficiency or p.compute_efficiency)
        h, f = node.hbm, node.hbf
        self.h3 = node.packaging == "h3"
        eh = p.mem_efficiency
        self.bw_h, self.wbw_h = h.read_bw * eh, h.write_bw * eh
        self.lat_h = h.timing.read_latency_s
        self.wlat_h = h.timing.write_latency_s
        self.has_hbf = f.stacks > 0
        if self.has_hbf:
            self.bw_f, self.lat_f = f.read_bw * eh, f.timing.read_latency_s
            self.kbw_f, self.klat_f = f.kv_read_bw * eh, f.kv_read_latency_s
            self.wbw_f, self.wlat_f = f.write_bw * eh, f.timing.write_latency_s
        else:
            self.bw_f = self.kbw_f = self.wbw_f = 1.0
            self.lat_f = self.klat_f = self.wlat_f = 0.0
        m = model
        # GQA: KV heads divide over TP (replicated beyond kv_heads); MLA's latent does not;
        # under DPA every sequence's KV lives on one GPU, so the group divides it by tp.
        if self.dpa:
            self.kv_shards = tp
        else:
            self.kv_shards = max(1, min(tp, m.kv_heads)) if m.kv_shardable else 1
        #: KV bytes of one token of one layer on one GPU.
        self.kv_layer_gpu = m.kv_bytes_per_token / m.layers / self.kv_shards
        self.kv_token_gpu = m.kv_bytes_per_token / self.kv_shards
        # Weight bytes per GPU by tier (index 0 HBM, 1 HBF).
        wt = 1 if weights == "hbf" else 0
        self.attn_w = self._split(m.attn_bytes / (1 if self.dpa else tp), wt)
        self.mlp_w = self._split(m.mlp_bytes / tp, wt)
        self.lm_w = self._split(m.lm_head_bytes / tp, wt)
        self.moe_fixed_w = self._split(m.moe_fixed_bytes / tp, wt)
        if weights == "split":
            fh = p.split_hbm_expert_fraction
            self.expert_frac = (fh, 1.0 - fh)
        else:
            self.expert_frac = (1.0, 0.0) if wt == 0 else (0.0, 1.0)
        # Experts: ``ep`` ranks hold ``1/ep`` of them each, and TP shards every expert over
        # its rank's ``tp / ep`` GPUs (vLLM's Mixtral at TP2 is ``ep = 1``): one GPU holds
        # ``1/tp`` of the experts' bytes and reads, on average, ``1/tp`` of a touched
        # expert's bytes (touched experts spread evenly over the ranks).
        self.ep_group = tp // ep
        self.expert_gpu = m.expert_bytes / tp
        #: One token's activation vector as collectives move it (BF16 for FP8 models too).
        self.act_bytes = m.hidden * p.activation_bytes
        # GEMM shapes per GPU (K = hidden; N = the output columns of an equivalent GEMM
        # holding the block's parameters: attention, dense MLP, one expert, shared experts
        # and router, LM head).
        d, hid = m.dtype_bytes, m.hidden
        self.n_attn = m.attn_bytes / d / hid / (1 if self.dpa else tp)
        self.n_mlp = m.mlp_bytes / d / hid / tp
        self.n_expert = m.expert_bytes / d / hid / self.ep_group
        self.n_moe_fixed = m.moe_fixed_bytes / d / hid / tp
        self.n_lm = m.lm_head_bytes / d / hid / tp
        self.link_lat = node.link.latency_s if p.link_latency_s is None else p.link_latency_s

    @staticmethod
    def _split(b, tier):
        return (b, 0.0) if tier == 0 else (0.0, b)

    # ------------------------------------------------------------------ memory terms
    def _mem(self, bh, bf, wh=0.0, wf=0.0, kv=False, hide_hbf_latency=False):
        """Memory time of one operator; arrays or floats (docstring of the module)."""
        lat_f = self.klat_f if kv else self.lat_f
        bw_f = self.kbw_f if kv else self.bw_f
        if hide_hbf_latency:
            lat_f = 0.0
        t_f = (bf > 0) * lat_f + bf / bw_f + (wf > 0) * self.wlat_f + wf / self.wbw_f
        if self.h3:
            link = ((bh + bf + wh + wf) > 0) * self.lat_h + (bh + bf) / self.bw_h \
                + (wh + wf) / self.wbw_h
            return np.maximum(link, t_f)
        t_h = (bh > 0) * self.lat_h + bh / self.bw_h + (wh > 0) * self.wlat_h + wh / self.wbw_h
        return np.maximum(t_h, t_f)

    def allreduce_seconds(self, nbytes):
        """Ring all-reduce of ``nbytes`` per GPU over ``tp`` GPUs (serve/collectives.py)."""
        ln, p = self.node.link, self.params
        return allreduce_seconds(nbytes, self.tp, ln.bw, self.link_lat, p.link_efficiency)

    def alltoall_seconds(self, nbytes):
        """One all-to-all of ``nbytes`` per GPU over ``ep`` GPUs (serve/collectives.py)."""
        ln, p = self.node.link, self.params
        return alltoall_seconds(nbytes, self.ep, ln.bw, self.link_lat, p.link_efficiency)

    def expert_allreduce_seconds(self, tokens):
        """All-reduce after the experts within an EP rank's ``tp / ep`` GPUs (0 when
        ``ep == tp``): the hidden rows of the tokens that visit the rank, ``T min(k, ep) /
        ep`` of them (one all-reduce of all ``T`` rows when ``ep = 1``, as for a dense MLP)."""
        m, ln, p = self.model, self.node.link, self.params
        rows = tokens * min(m.active_experts, self.ep) / self.ep
        return allreduce_seconds(rows * self.act_bytes, self.ep_group, ln.bw, self.link_lat,
                                 p.link_efficiency)

    def gemm_seconds(self, m, n, groups=1, eta_scale=1.0):
        """Compute seconds of a weight GEMM of ``m`` tokens, ``n`` columns, K = hidden
        (``eta_scale`` scales the efficiency ceiling: grouped expert GEMMs)."""
        p = self.params
        return gemm_seconds(m, n, self.model.hidden, self.peak,
                            p.compute_efficiency * eta_scale, self.node.gpu.sms,
                            p.gemm_tiles, self.model.dtype_bytes, groups)

    def _op(self, c, mem):
        """An operator of compute time ``c`` and memory time ``mem``: the longer, plus the
        part of the shorter that does not overlap (``overlap_loss``)."""
        return np.maximum(c, mem) + self.params.overlap_loss * np.minimum(c, mem)

    # ------------------------------------------------------------------ iteration
    def iteration_seconds(self, tokens, pairs, kv_h, kv_f, new_h, new_f, logits):
        """Seconds of iterations (all arguments broadcast together).

        Parameters
        ----------
        tokens : query tokens of the iteration (decode tokens + prefill chunk tokens).
        pairs : attention (query, context) pairs summed over sequences.
        kv_h, kv_f : context tokens whose KV is read from HBM / HBF.
        new_h, new_f : new tokens whose KV is written to HBM / HBF.
        logits : tokens that go through the LM head (one per sequence that samples).
        """
        m, tp, p = self.model, self.tp, self.params
        kvl = self.kv_layer_gpu
        hide = self.h3  # the H3 buffer hides HBF streaming startup after the first transfer
        tokens = np.asarray(tokens, dtype=float)
        # Under DPA every GPU runs attention for its own sequences: T / tp tokens each, and the
        # busiest rank (imbalance.py) sets the pace; under TP every GPU sees all T tokens.
        t_rank = tokens / tp if self.dpa else tokens
        c_proj = self.gemm_seconds(t_rank, self.n_attn)
        t_proj = self._op(c_proj, self._mem(*self.attn_w, hide_hbf_latency=hide))
        t_att = self._op(pairs * m.pair_flops / tp / self.attn_flops,
                         self._mem(kv_h * kvl, kv_f * kvl, new_h * kvl, kv=True))
        if self.dpa:
            f_dpa = max_load_factor(np.maximum(logits, 1), tp, p.imbalance_spread)
            t_proj, t_att = t_proj * f_dpa, t_att * f_dpa
        # One all-reduce of the activations after attention (none under DPA) and one after a
        # dense MLP; MoE layers exchange tokens by all-to-all instead.
        ar = self.allreduce_seconds(tokens * self.act_bytes)
        total = m.layers * (t_proj + t_att + (0.0 if self.dpa else ar))
        if m.dense_layers:
            t_mlp = self._op(self.gemm_seconds(tokens, self.n_mlp),
                             self._mem(*self.mlp_w, hide_hbf_latency=hide))
            total = total + m.dense_layers * (t_mlp + ar)
        if m.moe_layers:
            touched = m.experts_touched(tokens)
            eb = touched * self.expert_gpu
            fh, ff = self.expert_frac
            # Grouped expert GEMM: the touched experts of this GPU, each over its tokens
            # (T k / touched on average), plus the shared experts and router over all T.
            per_expert = tokens * m.active_experts / np.maximum(touched, 1e-9)
            c_moe = self.gemm_seconds(per_expert, self.n_expert, groups=touched / self.ep,
                                      eta_scale=p.moe_efficiency) \
                + self.gemm_seconds(tokens, self.n_moe_fixed)
            t_moe = self._op(c_moe, self._mem(self.moe_fixed_w[0] + fh * eb,
                                              self.moe_fixed_w[1] + ff * eb,
                                              hide_hbf_latency=hide))
            if self.ep > 1:
                t_moe = t_moe * max_load_factor(np.maximum(tokens * m.active_experts, 1),
                                                self.ep, p.imbalance_spread)
            # Dispatch and combine: each token's activation to its k experts and back.
            a2a = 2 * self.alltoall_seconds(tokens * m.active_experts * self.act_bytes / tp)
            # Experts sharded by TP (``ep < tp``): each rank's ``tp / ep`` GPUs all-reduce
            # the rows of the tokens that visit the rank (``min(k, ep) / ep`` of them).
            ar_moe = self.expert_allreduce_seconds(tokens)
            total = total + m.moe_layers * (t_moe + a2a + ar_moe)
        t_lm = self._op(self.gemm_seconds(logits, self.n_lm),
                        self._mem(*self.lm_w, hide_hbf_latency=hide))
        total = total + t_lm
        if hide and self.has_hbf:
            # The first streaming HBF transfer of the iteration is not hidden.
            any_hbf_stream = (self.attn_w[1] + self.mlp_w[1] + self.lm_w[1]
                              + self.moe_fixed_w[1] + self.expert_frac[1]) > 0
            total = total + any_hbf_stream * self.lat_f
        if self.has_hbf:
            # New KV bound for HBF is staged on the HBM side and programmed while the
            # iteration runs (writes are not on any operator's critical path); the iteration
            # lasts at least as long as the program: L_w + W_hbf / WBW_hbf.
            prog = (new_f > 0) * self.wlat_f + new_f * self.kv_token_gpu / self.wbw_f
            total = np.maximum(total, prog)
        return total + self.params.step_overhead_s

    def weight_read_bytes(self, tokens):
        """Weight bytes one GPU reads per iteration as ``(hbm, hbf)`` (MoE: touched experts)."""
        m = self.model
        bh = m.layers * self.attn_w[0] + m.dense_layers * self.mlp_w[0] + self.lm_w[0]
        bf = m.layers * self.attn_w[1] + m.dense_layers * self.mlp_w[1] + self.lm_w[1]
        if m.moe_layers:
            eb = m.experts_touched(tokens) * self.expert_gpu
            bh = bh + m.moe_layers * (self.moe_fixed_w[0] + self.expert_frac[0] * eb)
            bf = bf + m.moe_layers * (self.moe_fixed_w[1] + self.expert_frac[1] * eb)
        return bh, bf

    def weights_resident(self):
        """Weight bytes stored per GPU as ``(hbm, hbf)``."""
        m, tp = self.model, self.tp
        fixed = m.weight_bytes - m.moe_layers * m.experts * m.expert_bytes
        experts = m.moe_layers * m.experts * m.expert_bytes / tp
        if self.dpa:  # attention weights are replicated: count them tp times
            fixed += (tp - 1) * m.layers * m.attn_bytes
        if self.weights == "hbm":
            return fixed / tp + experts, 0.0
        if self.weights == "hbf":
            return 0.0, fixed / tp + experts
        fh = self.params.split_hbm_expert_fraction
        return fixed / tp + fh * experts, (1 - fh) * experts

    def link_bytes_per_token(self):
        """Bytes one query token sends over the interconnect, summed over the group's GPUs:
        a ring all-reduce sends 2 (p-1)/p of the vector from each of p GPUs."""
        m, p = self.model, self.tp
        reduces = m.dense_layers + (0 if self.dpa else m.layers)
        a2a = 2 * (self.ep - 1) / self.ep * m.active_experts * self.act_bytes \
            if self.ep > 1 else 0.0
        # ``ep`` rank groups of ``g = tp / ep`` GPUs all-reduce ``min(k, ep) / ep`` rows each.
        g = self.ep_group
        ar_moe = 2 * (g - 1) * min(m.active_experts, self.ep) * self.act_bytes
        return reduces * 2 * (p - 1) * self.act_bytes + m.moe_layers * (a2a + ar_moe)

    def linear_flops(self, tokens):
        """Linear-layer FLOPs of the whole replica for ``tokens`` query tokens (no LM head)."""
        m = self.model
        return tokens * (m.layers * m.attn_flops_per_token + m.dense_layers
                         * m.mlp_flops_per_token + m.moe_layers * m.moe_flops_per_token)

    def lm_head_flops(self, logits):
        return logits * 2.0 * self.model.lm_head_bytes / self.model.dtype_bytes
