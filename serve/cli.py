"""``hbfsim serve``: serve a workload on an HBM-HBF-host node and print the run's figures.

    hbfsim serve [--model M] [--gpu h100|h200] [--gpus N] [--hbm N] [--hbf N]
                 [--packaging shared|beside|h3] [--hbm-stack table1|hbm3|hbm3e]
                 [--tp N] [--ep N] [--dpa] [--weights hbm|hbf|split]
                 [--scheduler fcfs|cache-aware|buffered] [--headroom F]
                 [--hbf-model constant|device] [--hbf-config F.toml] [--hbf-profile P]
                 [--no-cache] [--engine compiled|reference] [--cost-model calibrated|roofline] [--cost-provenance]
                 [--workload SPEC] [--format F] [...]
                 [--json S.json] [--csv S.csv] [--no-progress]

With no arguments it serves the embedded default (``DEFAULT_WORKLOAD``: 4 % of the seeded
Qwen3-32B agentic preset, 1,000 turns, on one H100-class GPU with 4 HBM + 4 HBF stacks on
shared sites) in seconds. Bad options:
one line on stderr naming the option and value, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register", "run_cli"]

from hbfsim.config import ENGINES
from hbfsim.serve.run import DEFAULT_WORKLOAD, DEFAULTS, DEVICE_PROFILE

DEFAULT_MODEL = DEFAULTS["model"]


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
    from hbfsim.serve.hardware import GPU_PRESETS, HBM_STACKS, PACKAGINGS
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
                   help="shared: HBM+HBF divide 8 sites; beside: a site per stack, up to 16 "
                        "(FlashAccel's CSI); h3: HBF behind HBM (default shared)")
    g.add_argument("--hbm-stack", default="table1", choices=sorted(HBM_STACKS),
                   help="HBM stack preset: table1 (24 GB, 1 TB/s, 3.4 pJ/bit; the serving "
                        "paper), hbm3 (an H100 SXM5's: 16 GB, 0.67 TB/s; --hbm 5 is the "
                        "real H100) or hbm3e (an H200's: 23.5 GB, 0.8 TB/s, 2.99 pJ/bit; "
                        "--hbm 6 is the real H200) (default table1)")
    g.add_argument("--tp", type=_int_arg, default=None, metavar="N",
                   help="tensor-parallel degree of one replica (default: all GPUs)")
    g.add_argument("--ep", type=_int_arg, default=None, metavar="N",
                   help="expert-parallel degree, MoE only, a divisor of tp (default: tp): "
                        "ep ranks hold 1/ep of the experts each, TP shards every expert "
                        "over a rank's tp/ep GPUs (1: experts sharded by TP, as vLLM "
                        "runs Mixtral)")
    g.add_argument("--dpa", action="store_true",
                   help="data-parallel attention: attention weights replicated, KV divided "
                        "by sequence over the TP group (the serving paper's Table 3)")
    g.add_argument("--weights", default="hbm", choices=WEIGHT_PLACEMENTS,
                   help="weight placement (default hbm; split: selected experts in HBM)")
    g.add_argument("--split-fraction", type=_float_arg, default=0.5, metavar="F",
                   help="--weights split: fraction of each layer's routed experts in HBM "
                        "(default 0.5)")
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
    h.add_argument("--engine", choices=ENGINES, default=None,
                   help="engine of the --hbf-model device characterization (default the HBF "
                        "configuration's engine key); a cached characterization is used only "
                        "if made on it")
    s = p.add_argument_group("scheduling")
    s.add_argument("--scheduler", default="buffered", choices=SCHEDULERS,
                   help="fcfs, cache-aware or buffered cache-aware (default buffered)")
    s.add_argument("--headroom", type=_float_arg, default=0.10, metavar="F",
                   help="admission headroom of the buffered scheduler (default 0.10)")
    s.add_argument("--max-batch", type=_int_arg, default=256, metavar="N",
                   help="running sequences at most, per attention rank under --dpa "
                        "(default 256)")
    s.add_argument("--max-tokens", type=_int_arg, default=8192, metavar="N",
                   help="query tokens per iteration, per attention rank under --dpa "
                        "(default 8192)")
    s.add_argument("--reserve-output", action="store_true",
                   help="admit a request only if the device also holds the KV of all the "
                        "output tokens it and the running requests may still generate (no "
                        "preemption; TensorRT-LLM's GUARANTEED_NO_EVICT); default: vLLM's "
                        "admission by prompt pages with recompute preemption")
    s.add_argument("--page-tokens", type=_int_arg, default=16, metavar="N",
                   help="tokens per KV page (default 16)")
    c = p.add_argument_group("cost model (docs/serving.md, docs/validation-serving.md)")
    c.add_argument("--cost-model", default="calibrated", choices=("calibrated", "roofline"),
                   help="calibrated: GEMM tile/wave quantization, achieved HBM bandwidth per "
                        "GPU, attention efficiency, imperfect compute/memory overlap, NCCL "
                        "ring collectives with a latency term, a per-iteration fixed cost, "
                        "BF16 activations in collectives, EP and DPA load imbalance, fitted "
                        "to published H100/H200 measurements; roofline: max(compute at a "
                        "flat efficiency, memory at nominal bandwidth) per operator "
                        "(default calibrated)")
    c.add_argument("--compute-efficiency", type=_float_arg, default=None, metavar="F",
                   help="GEMM efficiency ceiling, fraction of the dense peak (default: the "
                        "cost model's: calibrated 0.70 BF16 / fitted FP8; roofline 0.7)")
    c.add_argument("--cost-provenance", action="store_true",
                   help="print the calibrated cost model's parameters for --gpu and --dtype, "
                        "each with its source, and exit")
    w = p.add_argument_group("workload")
    w.add_argument("--workload", default=DEFAULT_WORKLOAD, metavar="SPEC",
                   help="a trace file (Mooncake JSONL, Azure or BurstGPT CSV), sample-mooncake"
                        " / sample-azure / sample-burstgpt, or a generator preset "
                        "PRESET[:key=value,...] (agentic-qwen32b, agentic-100k, agentic-500k;"
                        " docs/serving-workloads.md), or closed-loop:users=N,requests=R,"
                        "input=I,output=O (N users each sending R requests of I prompt and O "
                        "output tokens back to back: a fixed-concurrency client); default "
                        f"{DEFAULT_WORKLOAD}")
    w.add_argument("--format", choices=("mooncake", "azure", "burstgpt"),
                   help="trace format of a --workload file (default: sniffed)")
    o = p.add_argument_group("outputs")
    o.add_argument("--json", metavar="S.json", help="write the summary as JSON")
    o.add_argument("--csv", metavar="S.csv", help="write the summary as one CSV row")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def _opt(key: str) -> str:
    """The option that sets serving setting ``key`` (messages name what the user typed)."""
    return "--" + {"cache": "no-cache"}.get(key, key).replace("_", "-")


def _outputs(a):
    """The output-safety rule (docs/outputs.md): every output checked before any work, none
    may be an input (model config, HBF config, trace) or another output."""
    from hbfsim.outputs import resolve_outputs

    inputs = {k: v for k, v in (("--hbf-config", a.hbf_config), ("--model", a.model),
                                ("--workload", a.workload)) if v and Path(v).is_file()}
    return resolve_outputs({"--json": a.json, "--csv": a.csv}, inputs)


def run_cli(a) -> int:
    """Run ``hbfsim serve`` from parsed arguments; return the exit code."""
    from hbfsim.serve.report import format_summary, to_csv, to_json
    from hbfsim.serve.run import DEFAULTS, run_serving, validate

    if a.cost_provenance:
        from hbfsim.serve.calibration import format_cost_provenance

        print(format_cost_provenance(a.gpu, a.dtype))
        return 0
    settings = {k: getattr(a, k) for k in DEFAULTS if k != "cache"}
    settings["cache"] = not a.no_cache
    validate(settings, _opt)  # every option before the outputs are checked
    if a.engine is not None and (a.hbf_model != "device" or a.hbf == 0):
        raise ValueError(f"--engine {a.engine}: it chooses the engine of the HBF stack's "
                         "characterization, and this run has none (--hbf-model constant or "
                         "--hbf 0)")
    outs = _outputs(a)
    s = run_serving(settings, progress=not a.no_progress, label=_opt, engine=a.engine)
    s.pop("energy_j")
    print(format_summary(s))
    if outs["--json"]:
        outs["--json"].write_text(to_json(s))
    if outs["--csv"]:
        outs["--csv"].write_text(to_csv([s]))
    return 0
