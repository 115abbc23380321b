"""One decode step of an 8-GPU FlashAccel node, and the largest batch that meets an SLO and
the capacity (docs/flashaccel.md, "The study: the decode-step model").

Per GPU of a tensor-parallel group of ``gpus`` (MoE experts expert-parallel over the same
GPUs; MLA models run data-parallel attention, as their KV is not divided by TP), each
operator of each layer costs a roofline as serve/cost.py's, with the bytes split between
HBM and HBF:

    prefetch on:   t_op = max( F / (P eta),  L_h + f B / BW_h,  (1 - f) B / BW_f )
    prefetch off:  t_op = L_f + (1 - f) B / BW_f + max( F / (P eta),  L_h + f B / BW_h )

``f`` is the fraction of every tensor (weights and KV alike) placed in HBM: the bandwidth
share ``BW_h / (BW_h + BW_f)`` unless HBM's free capacity caps it. With the prefetch queue
(model/prefetch.py) HBF reads run ahead of compute, one startup latency per step; without
it each operator first copies its HBF bytes and then computes (the prefetch is in the
compute graph). ``BW_f`` is the stack's characterized streaming bandwidth x stacks x the
weight layout's balance for weights, and for KV the streaming bandwidth x the KV layout's
balance (KV layout on) or the characterized scattered-block bandwidth (off)
(serve/flashaccel/efficiency.py). New KV bound for HBF programs in megablock sets while
the step runs (at the measured set bandwidth; scattered blocks without the KV layout): the
step lasts at least as long as that program. Collectives as serve/cost.py (ring all-reduce
after attention and dense MLPs, two all-to-alls per MoE layer; NVLink 450 GB/s).

The operator costs are serve/cost.py's, from the same :class:`~hbfsim.serve.cost.CostParams`
(issue 25): ``F / (P eta)`` is the GEMM time of serve/gemm.py (tile and wave quantization;
grouped expert GEMMs at ``moe_efficiency``), attention at ``attn_efficiency``, every
bandwidth at ``mem_efficiency``, the shorter of compute and memory adds ``overlap_loss`` of
itself, collectives are serve/collectives.py's with BF16 activations, the expert-parallel
and data-parallel-attention imbalance of serve/imbalance.py scales the busiest rank's
operators, and every step pays ``step_overhead_s``. ``hbfsim study flashaccel`` passes the
calibrated H200 parameters; without ``params`` the step is the roofline of
``CostParams(compute_efficiency=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hbfsim.serve.collectives import allreduce_seconds, alltoall_seconds
from hbfsim.serve.cost import CostParams
from hbfsim.serve.flashaccel.node import (HBF_PJ_PER_BIT, HBM_LATENCY_S, HBM_PJ_PER_BIT,
                                          GpuMemory)
from hbfsim.serve.gemm import gemm_seconds
from hbfsim.serve.hardware import GPU_PRESETS, Interconnect
from hbfsim.serve.imbalance import max_load_factor
from hbfsim.serve.models import ModelCosts

__all__ = ["Features", "HbfTier", "StepModel", "FEATURES_FULL", "ACTIVATION_RESERVE"]

#: Per-GPU HBM kept for activations (serve/engine.py's activation reserve).
ACTIVATION_RESERVE = 4e9
#: The serving paper's Table 2 MAC energy, pJ (serve/energy.py).
MAC_PJ = 0.38


@dataclass(frozen=True)
class Features:
    """The three FlashAccel mechanisms a run has (the ablations switch them off)."""

    prefetch: bool = True
    weight_layout: bool = True
    kv_layout: bool = True


FEATURES_FULL = Features()


@dataclass(frozen=True)
class HbfTier:
    """One FlashAccel stack as the device model gives it (per stack).

    Members
    -------
    stream_bw, latency_s, kv_scattered_bw : float
        Characterized streaming read bandwidth and startup latency, scattered-block read
        bandwidth.
    set_write_bw, scattered_write_bw : float
        Programs in megablock-set order and as scattered blocks (measured).
    stack_bytes : float
    """

    stream_bw: float
    latency_s: float
    kv_scattered_bw: float
    set_write_bw: float
    scattered_write_bw: float
    stack_bytes: float
    staging_bytes: float = 0.0


class StepModel:
    """Decode steps of one model on one node configuration.

    Parameters
    ----------
    model : ModelCosts
    mem : GpuMemory
    hbf : HbfTier or None
        Needed when ``mem`` has FlashAccel stacks.
    features : Features
    weight_balance, kv_balance : callable
        ``weight_balance(layout_on, batch)`` and ``kv_balance()`` -> fraction (efficiency.py).
    gpus : int
    compute_efficiency : float
        The roofline's efficiency when ``params`` is None.
    params : CostParams or None
        The operator costs (serve/cost.py); the study passes the calibrated H200 ones.
    """

    def __init__(self, model: ModelCosts, mem: GpuMemory, hbf: HbfTier | None,
                 features: Features, weight_balance, kv_balance, gpus: int = 8,
                 compute_efficiency: float = 0.7, params: CostParams | None = None):
        if mem.hbf_stacks and hbf is None:
            raise ValueError(f"{mem.name} has HBF stacks and needs an HbfTier")
        self.m, self.mem, self.hbf, self.ft = model, mem, hbf, features
        self.gpus = gpus
        self.wbal, self.kbal = weight_balance, kv_balance
        self.p = params or CostParams(compute_efficiency=compute_efficiency)
        gpu = GPU_PRESETS["h200"]
        self.peak, self.sms = gpu.peak(self.p.dtype), gpu.sms
        self.attn_flops = gpu.peak("bf16") * (self.p.attn_efficiency
                                              or self.p.compute_efficiency)
        self.link = Interconnect()
        self.link_lat = self.link.latency_s if self.p.link_latency_s is None \
            else self.p.link_latency_s
        m, p = model, gpus
        self.dpa = not model.kv_shardable          # MLA: data-parallel attention
        self.ep = p if model.is_moe else 1
        shards = p if self.dpa else max(1, min(p, m.kv_heads))
        self.kv_layer = m.kv_bytes_per_token / m.layers / shards
        self.kv_token = m.kv_bytes_per_token / shards
        self.attn_w = m.attn_bytes / (1 if self.dpa else p)
        fixed = m.weight_bytes - m.moe_layers * m.experts * m.expert_bytes
        if self.dpa:
            fixed += (p - 1) * m.layers * m.attn_bytes
        self.weights = fixed / p + m.moe_layers * m.experts * m.expert_bytes / self.ep
        hb = self.hbf
        self.hbf_bytes = mem.hbf_stacks * hb.stack_bytes if mem.hbf_stacks else 0.0
        self.staging = hb.staging_bytes * mem.hbf_stacks if (mem.hbf_stacks and
                                                             features.kv_layout) else 0.0

    # ------------------------------------------------------------------ capacity
    def resident(self, batch: int, reserve_tokens: int) -> float:
        """Bytes one GPU stores: weights + KV of ``batch`` requests of ``reserve_tokens``."""
        return self.weights + batch * reserve_tokens * self.kv_token

    def hbm_free(self) -> float:
        return self.mem.hbm_bytes - ACTIVATION_RESERVE - self.staging

    def fits(self, batch: int, reserve_tokens: int) -> bool:
        return self.resident(batch, reserve_tokens) <= self.hbm_free() + self.hbf_bytes

    def weight_read(self, tokens: int) -> float:
        """Weight bytes one GPU reads in a step of ``tokens`` (MoE: the touched experts)."""
        m, p = self.m, self.gpus
        b = m.layers * self.attn_w + m.dense_layers * m.mlp_bytes / p + m.lm_head_bytes / p
        if m.moe_layers:
            b += m.moe_layers * (m.experts_touched(tokens) * m.expert_bytes / self.ep
                                 + m.moe_fixed_bytes / p)
        return b

    # ------------------------------------------------------------------ one step
    def step(self, batch: int, context: float, reserve_tokens: int) -> dict:
        """One decode step of ``batch`` sequences at mean ``context`` tokens: seconds,
        bytes read per tier, write figures and energy (per GPU)."""
        m, p, ft, mem = self.m, self.gpus, self.ft, self.mem
        T = batch
        pairs = T * (context + 1)
        has_f = mem.hbf_stacks > 0
        bw_h = mem.hbm_bw
        if has_f:
            h = self.hbf
            bw_w = h.stream_bw * mem.hbf_stacks * self.wbal(ft.weight_layout, batch)
            bw_k = (h.stream_bw * self.kbal() if ft.kv_layout else h.kv_scattered_bw) \
                * mem.hbf_stacks
            # HBF's bandwidth for this step's mix of weight and KV bytes (byte-weighted)
            kb = m.layers * pairs * self.kv_layer
            wb = self.weight_read(T)
            bw_f = (wb + kb) / (wb / bw_w + kb / bw_k)
            share = bw_h / (bw_h + bw_f)
            cap = max(0.0, self.hbm_free()) / self.resident(batch, reserve_tokens)
            f = min(share, cap, 1.0)
        else:
            bw_w = bw_k = 1.0
            f = 1.0
        lat_f = self.hbf.latency_s if has_f else 0.0
        read = {"hbm": 0.0, "hbf": 0.0}

        cp = self.p
        mu, lam = cp.mem_efficiency, cp.overlap_loss

        def op(t_c, nbytes, bw_f, n=1):
            """One operator's seconds from its compute time ``t_c``; its bytes count ``n``
            times (once per layer)."""
            bh, bf = f * nbytes, (1 - f) * nbytes
            read["hbm"] += n * bh
            read["hbf"] += n * bf
            t_h = (bh > 0) * HBM_LATENCY_S + bh / (bw_h * mu)
            t_f = bf / (bw_f * mu) if bf > 0 else 0.0
            if ft.prefetch or bf == 0:
                t_m = max(t_h, t_f)
                return max(t_c, t_m) + lam * min(t_c, t_m)
            return lat_f + t_f + max(t_c, t_h) + lam * min(t_c, t_h)

        def gemm(tokens, n, groups=1.0, eta_scale=1.0):
            """GEMM seconds of ``tokens`` x ``n`` columns, K = hidden (serve/gemm.py)."""
            return float(gemm_seconds(tokens, n, m.hidden, self.peak,
                                      cp.compute_efficiency * eta_scale, self.sms,
                                      cp.gemm_tiles, m.dtype_bytes, groups))

        ln = self.link
        act = m.hidden * cp.activation_bytes
        ar = float(allreduce_seconds(T * act, p, ln.bw, self.link_lat, cp.link_efficiency))
        L, d, h = m.layers, m.dtype_bytes, m.hidden
        t_att_rank = T / p if self.dpa else T
        t_proj = op(gemm(t_att_rank, m.attn_bytes / d / h / (1 if self.dpa else p)),
                    self.attn_w, bw_w, L)
        t_attn = op(pairs * m.pair_flops / p / self.attn_flops, pairs * self.kv_layer, bw_k, L)
        if self.dpa:
            f_dpa = float(max_load_factor(T, p, cp.imbalance_spread))
            t_proj, t_attn = t_proj * f_dpa, t_attn * f_dpa
        total = L * (t_proj + t_attn + (0.0 if self.dpa else ar))
        if m.dense_layers:
            total += m.dense_layers * (op(gemm(T, m.mlp_bytes / d / h / p), m.mlp_bytes / p,
                                          bw_w, m.dense_layers) + ar)
        if m.moe_layers:
            touched = m.experts_touched(T)
            eb = touched * m.expert_bytes / self.ep + m.moe_fixed_bytes / p
            e = self.ep
            c_moe = gemm(T * m.active_experts / max(touched, 1e-9), m.expert_bytes / d / h,
                         touched / e, cp.moe_efficiency) \
                + gemm(T, m.moe_fixed_bytes / d / h / p)
            t_moe = op(c_moe, eb, bw_w, m.moe_layers)
            if e > 1:
                t_moe *= float(max_load_factor(T * m.active_experts, e, cp.imbalance_spread))
            a2a = 2 * float(alltoall_seconds(T * m.active_experts * act / p, e, ln.bw,
                                             self.link_lat, cp.link_efficiency))
            total += m.moe_layers * (t_moe + a2a)
        total += op(gemm(T, m.lm_head_bytes / d / h / p), m.lm_head_bytes / p, bw_w)
        if has_f and ft.prefetch:
            total += lat_f                       # the first prefetch of the step
        total += cp.step_overhead_s
        new_kv = T * self.kv_token
        wbw = 0.0
        new_f = 0.0
        if has_f:
            new_f = (1 - f) * new_kv
            wbw = (self.hbf.set_write_bw if ft.kv_layout else self.hbf.scattered_write_bw) \
                * mem.hbf_stacks
            total = max(total, new_f / wbw)
        flops = T * (m.layers * m.attn_flops_per_token + m.dense_layers * m.mlp_flops_per_token
                     + m.moe_layers * m.moe_flops_per_token) / p + pairs * m.pair_flops \
            * m.layers / p
        energy = mem.tdp_w * total + 8e-12 * (read["hbm"] * HBM_PJ_PER_BIT + read["hbf"]
                                              * HBF_PJ_PER_BIT + new_f * HBF_PJ_PER_BIT) \
            + flops / 2 * MAC_PJ * 1e-12
        return {"seconds": total, "hbm_fraction": f, "hbm_read": read["hbm"],
                "hbf_read": read["hbf"], "hbf_read_bw": read["hbf"] / total,
                "hbf_write_bytes": new_f, "hbf_write_bw": wbw, "energy_j": energy,
                "tokens_per_s": T / total / p, "tokens_per_j": T / p / energy}

    # ------------------------------------------------------------------ the bar
    def best_batch(self, slo_s: float, context: float, reserve_tokens: int,
                   limit: int = 4096) -> tuple[int, dict | None]:
        """The largest batch meeting ``slo_s`` and the capacity (0 and None if none)."""
        def ok(b):
            return self.fits(b, reserve_tokens) and \
                self.step(b, context, reserve_tokens)["seconds"] <= slo_s
        if not ok(1):
            return 0, None
        lo, hi = 1, limit
        if ok(hi):
            return hi, self.step(hi, context, reserve_tokens)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo, self.step(lo, context, reserve_tokens)
