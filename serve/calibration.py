"""The calibrated cost model: its parameters, where each comes from, the fitted values.

``calibrated_params(gpu, dtype)`` is what ``hbfsim serve`` costs iterations with (unless
``--cost-model roofline``). A few global parameters are fitted on the calibration points of
``serve/data/validation.toml`` (published H100 / H200 measurements; the held-out points are
never seen by the fit) by ``bench/validate_serving.py --fit``, which writes
``serve/data/calibration.toml``; every other parameter is a published figure or a stated
assumption. :data:`COST_SOURCES` names the source of each (``hbfsim serve
--cost-provenance`` prints them; docs/validation-serving.md discusses them).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from importlib import resources

from hbfsim.serve.cost import CostParams
from hbfsim.serve.gemm import GemmTiles

__all__ = ["COST_MODELS", "COST_SOURCES", "FITTED", "calibrated_params", "cost_params",
           "fitted_values", "format_cost_provenance"]

#: ``--cost-model`` choices.
COST_MODELS = ("calibrated", "roofline")

#: Names of the fitted parameters (keys of serve/data/calibration.toml's [params]).
FITTED = ("fp8_compute_efficiency", "h100_mem_efficiency", "h200_mem_efficiency",
          "overlap_loss", "step_overhead_s", "link_latency_s", "moe_efficiency")

FIT = "fitted"
ASSUMPTION = "assumption"

#: parameter -> (source, note). ``fitted`` values come from serve/data/calibration.toml.
COST_SOURCES = {
    "compute_efficiency (fp8)": (FIT, "large-GEMM ceiling of the FP8 weight GEMMs, fitted on "
                                      "the calibration points (all FP8)"),
    "compute_efficiency (bf16)": (ASSUMPTION, "0.70 of the 989.4 TFLOP/s dense BF16 peak for a "
                                              "well-shaped GEMM; no BF16 point in the "
                                              "validation set constrains it"),
    "gemm_tiles": (ASSUMPTION, "128 x 128 output tiles, 128-byte K steps, stream-K over the "
                               "132 SMs: the CUTLASS Hopper warp-specialized defaults; tile "
                               "height the power of two at or above M, at least 16 rows "
                               "(vLLM fused MoE's small-M blocks, get_default_config)"),
    "attn_efficiency": (ASSUMPTION, "0.60 of the BF16 peak: below FlashAttention-3's 75 % "
                                    "best case (its paper), for the short and ragged "
                                    "sequences of serving"),
    "mem_efficiency": (FIT, "achieved / nominal bandwidth of the GPU's stacks (HBM and HBF "
                            "alike), one value per GPU (H100 SXM 3.35 TB/s, H200 SXM 4.8 "
                            "TB/s of HBM), fitted"),
    "overlap_loss": (FIT, "share of the shorter of compute and memory time not hidden under "
                          "the longer, fitted"),
    "step_overhead_s": (FIT, "fixed time per iteration (scheduler, sampling, graph launch), "
                             "fitted"),
    "link_latency_s": (FIT, "startup of one NCCL ring step over NVLink, fitted (TP / EP "
                            "points only constrain it)"),
    "moe_efficiency": (FIT, "grouped expert GEMMs' ceiling over the dense GEMMs' (routing, "
                            "token permutation, block-scaled FP8 expert kernels), fitted on "
                            "the MoE calibration points"),
    "link_efficiency": (ASSUMPTION, "0.80 of NVLink 4's 450 GB/s per direction for large "
                                    "collectives (ring bus bandwidth below the link rate)"),
    "activation_bytes": (ASSUMPTION, "2: collectives move BF16 activations, FP8 models "
                                     "included, as the engines' FP8 recipes quantize weights "
                                     "and KV, not the all-reduce (issue 25)"),
    "imbalance_spread": (ASSUMPTION, "1.0: uniform independent routing and sequence placement "
                                     "(serve/imbalance.py); real routers are more skewed"),
}


def fitted_values() -> dict:
    """The [params] of serve/data/calibration.toml (the fitted globals)."""
    text = resources.files("hbfsim.serve").joinpath("data", "calibration.toml").read_text()
    params = tomllib.loads(text)["params"]
    missing = [k for k in FITTED if k not in params]
    if missing:
        raise ValueError(f"serve/data/calibration.toml: [params] lacks {missing[0]!r}")
    return {k: float(params[k]) for k in FITTED}


def calibrated_params(gpu: str, dtype: str = "bf16", values: dict | None = None,
                      **overrides) -> CostParams:
    """The calibrated :class:`CostParams` for GPU preset ``gpu`` and weight-GEMM ``dtype``.

    ``values`` replaces the fitted globals (the fit itself calls this with trial values);
    ``overrides`` set any other field (``split_hbm_expert_fraction``, ...).
    """
    v = fitted_values() if values is None else values
    key = f"{gpu}_mem_efficiency"
    if key not in v:
        raise ValueError(f"no calibrated HBM efficiency for gpu {gpu!r}")
    eta = v["fp8_compute_efficiency"] if dtype == "fp8" else 0.70
    p = CostParams(dtype=dtype, compute_efficiency=eta, gemm_tiles=GemmTiles(),
                   attn_efficiency=0.60, mem_efficiency=v[key], overlap_loss=v["overlap_loss"],
                   step_overhead_s=v["step_overhead_s"], link_latency_s=v["link_latency_s"],
                   link_efficiency=0.80, activation_bytes=2, imbalance_spread=1.0,
                   moe_efficiency=v["moe_efficiency"])
    return replace(p, **overrides) if overrides else p


def cost_params(model: str, gpu: str, dtype: str, compute_efficiency=None,
                split_fraction: float = 0.5, values: dict | None = None) -> CostParams:
    """The :class:`CostParams` of ``--cost-model`` ``model``; ``compute_efficiency`` (when
    given) replaces the GEMM ceiling of either."""
    if model not in COST_MODELS:
        raise ValueError(f"cost model must be one of {', '.join(COST_MODELS)}, not {model!r}")
    kw = {"split_hbm_expert_fraction": split_fraction}
    if compute_efficiency is not None:
        kw["compute_efficiency"] = compute_efficiency
    if model == "roofline":
        return CostParams(dtype=dtype, **kw)
    return calibrated_params(gpu, dtype, values, **kw)


def format_cost_provenance(gpu: str, dtype: str) -> str:
    """The calibrated parameters for ``gpu`` / ``dtype``, one a line, each with its source."""
    p = calibrated_params(gpu, dtype)
    ceil_key = f"compute_efficiency ({'fp8' if dtype == 'fp8' else 'bf16'})"
    rows = [(ceil_key, p.compute_efficiency),
            ("gemm_tiles", f"{p.gemm_tiles.m} x {p.gemm_tiles.n} x {p.gemm_tiles.k_bytes} B, "
                           f"height >= {p.gemm_tiles.m_min}"),
            ("attn_efficiency", p.attn_efficiency), ("mem_efficiency", p.mem_efficiency),
            ("overlap_loss", p.overlap_loss), ("step_overhead_s", p.step_overhead_s),
            ("link_latency_s", p.link_latency_s), ("link_efficiency", p.link_efficiency),
            ("activation_bytes", p.activation_bytes),
            ("imbalance_spread", p.imbalance_spread), ("moe_efficiency", p.moe_efficiency)]
    out = [f"# calibrated cost model, gpu {gpu}, dtype {dtype}: each value with its source "
           "(docs/validation-serving.md)"]
    for k, v in rows:
        src, note = COST_SOURCES[k]
        shown = f"{v:.6g}" if isinstance(v, float) else str(v)
        out.append(f"{k + ' = ' + shown:<40} # {src}: {note}")
    return "\n".join(out)
