"""``hbfsim serve``: serve a workload on an HBM-HBF-host node and print the run's figures.

    hbfsim serve [--model M] [--gpu h100|h200] [--gpus N] [--hbm N] [--hbf N]
                 [--packaging shared|h3] [--tp N] [--ep N] [--dpa] [--weights hbm|hbf|split]
                 [--scheduler fcfs|cache-aware|buffered] [--headroom F]
                 [--hbf-model constant|device] [--hbf-config F.toml] [--hbf-profile P]
                 [--no-cache] [--workload SPEC] [--format F] [...]
                 [--json S.json] [--csv S.csv] [--no-progress]

With no arguments it serves the embedded default (``DEFAULT_WORKLOAD``: 4 % of the seeded
Qwen3-32B agentic preset, 1,000 turns, on one H100-class GPU with 4 HBM + 4 HBF stacks on
shared sites) in seconds. Bad options:
one line on stderr naming the option and value, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["register", "run_cli"]

DEFAULT_MODEL = "qwen3-32b"
DEFAULT_WORKLOAD = "agentic-qwen32b:scale=0.04"
#: HbfConfig profile characterized for --hbf-model device when none is given.
DEVICE_PROFILE = "hbf-serving"


def _int_arg(s):
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None


def _float_arg(s):
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


def register(subparsers):
    """Add ``serve`` to an argparse sub-parser collection (``func`` = :func:`run_cli`).

    Bad input raises ValueError naming the option and value (the caller prints one line
    and exits 2)."""
    from hbfsim.serve.cost import WEIGHT_PLACEMENTS
    from hbfsim.serve.hardware import GPU_PRESETS, PACKAGINGS
    from hbfsim.serve.scheduler import SCHEDULERS

    p = subparsers.add_parser(
        "serve", help="simulate LLM serving on an HBM-HBF-host node (the serving paper)",
        description="Serve a workload with continuous batching on a node whose HBF timing "
                    "comes from the device model (or Table 1 constants) and print "
                    "completion time, throughput, TTFT/TPOT, energy, KV writes, hit rates "
                    "and HBF lifetime. See docs/serving.md.")
    g = p.add_argument_group("model and hardware")
    g.add_argument("--model", default=DEFAULT_MODEL, metavar="M",
                   help=f"model preset or Hugging Face config.json (default {DEFAULT_MODEL})")
    g.add_argument("--gpu", default="h100", choices=sorted(GPU_PRESETS),
                   help="GPU compute preset (default h100)")
    g.add_argument("--gpus", type=_int_arg, default=1, metavar="N",
                   help="GPUs in the node (default 1)")
    g.add_argument("--hbm", type=_int_arg, default=4, metavar="N",
                   help="HBM stacks per GPU (default 4)")
    g.add_argument("--hbf", type=_int_arg, default=4, metavar="N",
                   help="HBF stacks per GPU (default 4; 0 = HBM only)")
    g.add_argument("--packaging", default="shared", choices=PACKAGINGS,
                   help="shared: HBM+HBF divide 8 sites; h3: HBF behind HBM (default shared)")
    g.add_argument("--tp", type=_int_arg, default=None, metavar="N",
                   help="tensor-parallel degree of one replica (default: all GPUs)")
    g.add_argument("--ep", type=_int_arg, default=None, metavar="N",
                   help="expert-parallel degree, MoE only (default: tp)")
    g.add_argument("--dpa", action="store_true",
                   help="data-parallel attention: attention weights replicated, KV divided "
                        "by sequence over the TP group (the serving paper's Table 3)")
    g.add_argument("--weights", default="hbm", choices=WEIGHT_PLACEMENTS,
                   help="weight placement (default hbm; split: selected experts in HBM)")
    g.add_argument("--dtype", default="bf16", choices=("bf16", "fp8"),
                   help="arithmetic dtype whose peak applies (default bf16)")
    g.add_argument("--dram-gb", type=_float_arg, default=250.0, metavar="GB",
                   help="host DRAM for KV per GPU, GB (default 250)")
    g.add_argument("--ssd-tb", type=_float_arg, default=3.84, metavar="TB",
                   help="host SSD for KV per GPU, TB (default 3.84)")
    h = p.add_argument_group("HBF timing")
    h.add_argument("--hbf-model", default="device", choices=("device", "constant"),
                   help="device: the HBF stack's timing measured on the golden model for the "
                        "HbfConfig (once, then cached by its hash; docs/serving-hbf-tier.md);"
                        " constant: the serving paper's Table 1 figures (default device)")
    h.add_argument("--hbf-config", metavar="F.toml", help="HbfConfig TOML for --hbf-model "
                   "device")
    h.add_argument("--hbf-profile", metavar="P", help="HbfConfig profile for --hbf-model "
                   f"device (default {DEVICE_PROFILE})")
    h.add_argument("--no-cache", action="store_true", help="recompute the characterization")
    s = p.add_argument_group("scheduling")
    s.add_argument("--scheduler", default="buffered", choices=SCHEDULERS,
                   help="fcfs, cache-aware or buffered cache-aware (default buffered)")
    s.add_argument("--headroom", type=_float_arg, default=0.10, metavar="F",
                   help="admission headroom of the buffered scheduler (default 0.10)")
    s.add_argument("--max-batch", type=_int_arg, default=256, metavar="N",
                   help="running sequences at most (default 256)")
    s.add_argument("--max-tokens", type=_int_arg, default=8192, metavar="N",
                   help="query tokens per iteration (default 8192)")
    s.add_argument("--page-tokens", type=_int_arg, default=16, metavar="N",
                   help="tokens per KV page (default 16)")
    s.add_argument("--compute-efficiency", type=_float_arg, default=0.7, metavar="F",
                   help="achieved fraction of the GPU peak (default 0.7)")
    w = p.add_argument_group("workload")
    w.add_argument("--workload", default=DEFAULT_WORKLOAD, metavar="SPEC",
                   help="a trace file (Mooncake JSONL, Azure or BurstGPT CSV), sample-mooncake"
                        " / sample-azure / sample-burstgpt, or a generator preset "
                        "PRESET[:key=value,...] (agentic-qwen32b, agentic-100k, agentic-500k;"
                        f" docs/serving-workloads.md); default {DEFAULT_WORKLOAD}")
    w.add_argument("--format", choices=("mooncake", "azure", "burstgpt"),
                   help="trace format of a --workload file (default: sniffed)")
    o = p.add_argument_group("outputs")
    o.add_argument("--json", metavar="S.json", help="write the summary as JSON")
    o.add_argument("--csv", metavar="S.csv", help="write the summary as one CSV row")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _validate(a):
    _check(a.gpus >= 1, f"--gpus must be a positive integer, not {a.gpus}")
    _check(a.hbm >= 1, f"--hbm must be at least 1 (activations live in HBM), not {a.hbm}")
    _check(a.hbf >= 0, f"--hbf must be >= 0, not {a.hbf}")
    if a.tp is not None:
        _check(1 <= a.tp <= a.gpus and a.gpus % a.tp == 0,
               f"--tp must divide --gpus {a.gpus}, not {a.tp}")
    if a.ep is not None:
        tp = a.tp or a.gpus
        _check(1 <= a.ep <= tp and tp % a.ep == 0, f"--ep must divide --tp {tp}, not {a.ep}")
    _check(0 <= a.headroom < 1, f"--headroom must be in [0, 1), not {a.headroom}")
    for k in ("max_batch", "max_tokens", "page_tokens"):
        v = getattr(a, k)
        _check(v >= 1, f"--{k.replace('_', '-')} must be a positive integer, not {v}")
    _check(0 < a.compute_efficiency <= 1,
           f"--compute-efficiency must be in (0, 1], not {a.compute_efficiency}")
    _check(0 <= a.dram_gb < 1e6, f"--dram-gb must be in [0, 1e6), not {a.dram_gb}")
    _check(0 <= a.ssd_tb < 1e4, f"--ssd-tb must be in [0, 1e4), not {a.ssd_tb}")
    if a.hbf_model == "constant":
        _check(a.hbf_config is None and a.hbf_profile is None,
               "--hbf-config / --hbf-profile apply to --hbf-model device, not constant")
    from hbfsim.outputs import resolve_outputs

    # The output-safety rule (docs/outputs.md): every output checked before any work, none
    # may be an input (model config, HBF config, trace) or another output.
    inputs = {k: v for k, v in (("--hbf-config", a.hbf_config), ("--model", a.model),
                                ("--workload", a.workload)) if v and Path(v).is_file()}
    return resolve_outputs({"--json": a.json, "--csv": a.csv}, inputs)


def hbf_timing(mode: str, config=None, profile=None, cache=True, progress=False):
    """The HBF tier's :class:`TierTiming` for ``--hbf-model`` (constant or device)."""
    from hbfsim.serve.tier_timing import TABLE1_HBF

    if mode == "constant":
        return TABLE1_HBF
    from hbfsim.config import ConfigError, load_config
    from hbfsim.serve.characterize import cache_path, characterize

    try:
        cfg = load_config(config, profile or (None if config else DEVICE_PROFILE))
    except ConfigError as e:
        opt = "--hbf-config" if config else "--hbf-profile"
        raise ValueError(f"{opt}: {e}") from None
    if progress and (not cache or not cache_path(cfg).exists()):
        print(f"hbfsim serve: characterizing the HBF stack of profile {cfg.profile!r} on the "
              f"golden model (once; cached by configuration hash) ...", file=sys.stderr)
    return characterize(cfg, cache=cache)


def run_cli(a) -> int:
    """Run ``hbfsim serve`` from parsed arguments; return the exit code."""
    from hbfsim.serve.cost import CostModel, CostParams
    from hbfsim.serve.engine import EngineConfig, simulate
    from hbfsim.serve.hardware import make_node
    from hbfsim.serve.models import model_costs, serving_shape
    from hbfsim.serve.report import format_summary, summarize, to_csv, to_json
    from hbfsim.serve.scheduler import Scheduler
    from hbfsim.serve.traces import load_workload

    outs = _validate(a)
    try:
        shape = serving_shape(a.model)
    except ValueError as e:
        raise ValueError(f"--model: {e}") from None
    mc = model_costs(shape)
    _check(a.weights != "split" or mc.is_moe,
           f"--weights split places routed experts; model {mc.name!r} is dense")
    _check(a.weights == "hbm" or a.hbf > 0, f"--weights {a.weights} needs HBF stacks (--hbf 0)")
    _check(a.ep is None or mc.is_moe, f"--ep applies to MoE models; model {mc.name!r} is dense")
    show = not a.no_progress
    timing = hbf_timing(a.hbf_model, a.hbf_config, a.hbf_profile, cache=not a.no_cache,
                        progress=show) if a.hbf else None
    try:
        node = make_node(a.gpu, a.gpus, a.hbm, a.hbf, a.packaging,
                         **({"hbf_timing": timing} if timing else {}),
                         dram_bytes_per_gpu=a.dram_gb * 1e9, ssd_bytes_per_gpu=a.ssd_tb * 1e12)
    except ValueError as e:
        raise ValueError(f"--hbm {a.hbm} --hbf {a.hbf} --packaging {a.packaging}: {e}") from None
    tp = a.tp or a.gpus
    params = CostParams(dtype=a.dtype, compute_efficiency=a.compute_efficiency)
    cost = CostModel(node, mc, tp=tp, ep=a.ep, weights=a.weights, params=params, dpa=a.dpa)
    cfg = EngineConfig(max_batch=a.max_batch, max_tokens=a.max_tokens,
                       page_tokens=a.page_tokens)
    sched = Scheduler(a.scheduler, a.headroom)
    try:
        wl = load_workload(a.workload, format=a.format)
    except ValueError as e:
        raise ValueError(f"--workload: {e}") from None
    if wl.block_tokens % a.page_tokens:
        raise ValueError(f"--page-tokens {a.page_tokens} must divide the workload's "
                         f"{wl.block_tokens}-token hash blocks")
    from tqdm import tqdm

    t0 = time.perf_counter()
    with tqdm(total=len(wl.turns), desc="serve", unit="turn", disable=None if show else True,
              file=sys.stderr, leave=False) as bar:
        run = simulate(wl, node, mc, sched, tp=tp, ep=a.ep, weights=a.weights, params=params,
                       config=cfg, dpa=a.dpa, progress=bar.update)
    host = time.perf_counter() - t0
    s = summarize(run, node, cost, sched, wl, timing, {"host_seconds": host})
    print(format_summary(s))
    if outs["--json"]:
        outs["--json"].write_text(to_json(s))
    if outs["--csv"]:
        outs["--csv"].write_text(to_csv([s]))
    return 0
