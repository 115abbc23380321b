"""One serving run from flat settings: what ``hbfsim serve``, the serving study and a sweep use.

    from hbfsim.serve.run import run_serving
    s = run_serving({"hbm": 8, "hbf": 0, "scheduler": "fcfs", "hbf_model": "constant"})
    s["completion_s"], s["device_hit"], s["hbf_life_years"]

Settings are the ``hbfsim serve`` options with underscores (:data:`DEFAULTS`); every value is
validated and a bad one raises ValueError naming it (``label(key)``: the key itself, or the
command-line option when the CLI calls).
"""

from __future__ import annotations

import math
import sys
import time

__all__ = ["DEFAULTS", "DEFAULT_WORKLOAD", "DEVICE_PROFILE", "validate", "hbf_timing",
           "prepare_serving", "run_serving"]

#: The embedded default workload: 4 % of the seeded Qwen3-32B agentic preset (1,000 turns).
DEFAULT_WORKLOAD = "agentic-qwen32b:scale=0.04"
#: HbfConfig profile characterized for ``hbf_model = "device"`` when none is given.
DEVICE_PROFILE = "hbf-serving"

#: Every setting and its default (docs/serving.md explains each).
DEFAULTS = {
    "model": "qwen3-32b", "gpu": "h100", "gpus": 1, "hbm": 4, "hbf": 4,
    "hbm_stack": "table1", "packaging": "shared", "tp": None, "ep": None, "dpa": False,
    "weights": "hbm",
    "split_fraction": 0.5, "dtype": "bf16", "dram_gb": 250.0, "ssd_tb": 3.84,
    "hbf_model": "device", "hbf_config": None, "hbf_profile": None, "cache": True,
    "scheduler": "buffered", "headroom": 0.10, "max_batch": 256, "max_tokens": 8192,
    "page_tokens": 16, "compute_efficiency": None, "cost_model": "calibrated",
    "reserve_output": False, "workload": DEFAULT_WORKLOAD, "format": None,
}
#: Largest node simulated: set-up costs about 0.3 ms and 2 KB a replica (32,768 one-GPU
#: replicas: 10.7 s, 1.8 KB each, measured), so 65,536 GPUs are ~20 s before the first turn.
MAX_GPUS = 65_536
_INTS = ("gpus", "hbm", "hbf", "tp", "ep", "max_batch", "max_tokens", "page_tokens")
_FLOATS = ("split_fraction", "dram_gb", "ssd_tb", "headroom", "compute_efficiency")
_BOOLS = ("dpa", "cache", "reserve_output")
_CHOICES = {"packaging": ("shared", "beside", "h3"),
            "hbm_stack": ("table1", "hbm3", "hbm3e"), "cost_model": ("calibrated", "roofline"),
            "weights": ("hbm", "hbf", "split"),
            "dtype": ("bf16", "fp8"), "hbf_model": ("device", "constant"),
            "scheduler": ("fcfs", "cache-aware", "buffered"),
            "format": (None, "mooncake", "azure", "burstgpt")}


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def validate(settings: dict | None = None, label=str) -> dict:
    """The settings with defaults filled in, every value checked.

    Raises
    ------
    ValueError
        Naming ``label(key)`` and the value.
    """
    from hbfsim.serve.hardware import GPU_PRESETS, check_packaging

    s = dict(DEFAULTS)
    unknown = sorted(set(settings or {}) - set(DEFAULTS))
    _check(not unknown, f"unknown serving setting {unknown[0]!r}; expected one of "
                        f"{', '.join(DEFAULTS)}" if unknown else "")
    s.update(settings or {})
    L = label
    for k in _INTS:
        v = s[k]
        if v is None and k in ("tp", "ep"):
            continue
        _check(not isinstance(v, bool) and isinstance(v, int),
               f"{L(k)} must be an integer, not {v!r}")
    for k in _FLOATS:
        v = s[k]
        if v is None and k == "compute_efficiency":
            continue
        _check(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v),
               f"{L(k)} must be a finite number, not {v!r}")
    for k in _BOOLS:
        _check(isinstance(s[k], bool), f"{L(k)} must be true or false, not {s[k]!r}")
    for k, opts in _CHOICES.items():
        _check(s[k] in opts, f"{L(k)} must be one of "
                             f"{', '.join(o for o in opts if o)}, not {s[k]!r}")
    _check(s["gpu"] in GPU_PRESETS,
           f"{L('gpu')} must be one of {', '.join(GPU_PRESETS)}, not {s['gpu']!r}")
    for k in ("model", "workload"):
        _check(isinstance(s[k], str) and s[k], f"{L(k)} must be a name or a path, not {s[k]!r}")
    _check(s["gpus"] >= 1, f"{L('gpus')} must be a positive integer, not {s['gpus']}")
    _check(s["gpus"] <= MAX_GPUS, f"{L('gpus')} {s['gpus']} is more than {MAX_GPUS:,} (each "
                                  f"replica costs about 0.3 ms and 2 KB before the first turn)")
    _check(s["hbm"] >= 1, f"{L('hbm')} must be at least 1 (activations live in HBM), "
                          f"not {s['hbm']}")
    _check(s["hbf"] >= 0, f"{L('hbf')} must be >= 0, not {s['hbf']}")
    if s["tp"] is not None:
        _check(1 <= s["tp"] <= s["gpus"] and s["gpus"] % s["tp"] == 0,
               f"{L('tp')} must divide {L('gpus')} {s['gpus']}, not {s['tp']}")
    if s["ep"] is not None:
        tp = s["tp"] or s["gpus"]
        _check(1 <= s["ep"] <= tp and tp % s["ep"] == 0,
               f"{L('ep')} must divide {L('tp')} {tp}, not {s['ep']}")
    try:
        check_packaging(s["hbm"], s["hbf"], s["packaging"])
    except ValueError as e:
        raise ValueError(f"{L('hbm')} {s['hbm']} {L('hbf')} {s['hbf']} {L('packaging')} "
                         f"{s['packaging']}: {e}") from None
    _check(0 <= s["headroom"] < 1, f"{L('headroom')} must be in [0, 1), not {s['headroom']}")
    _check(0 <= s["split_fraction"] <= 1,
           f"{L('split_fraction')} must be in [0, 1], not {s['split_fraction']}")
    for k in ("max_batch", "max_tokens", "page_tokens"):
        _check(s[k] >= 1, f"{L(k)} must be a positive integer, not {s[k]}")
    _check(s["compute_efficiency"] is None or 0 < s["compute_efficiency"] <= 1,
           f"{L('compute_efficiency')} must be in (0, 1], not {s['compute_efficiency']}")
    _check(0 <= s["dram_gb"] < 1e6, f"{L('dram_gb')} must be in [0, 1e6), not {s['dram_gb']}")
    _check(0 <= s["ssd_tb"] < 1e4, f"{L('ssd_tb')} must be in [0, 1e4), not {s['ssd_tb']}")
    if s["hbf_model"] == "constant":
        _check(s["hbf_config"] is None and s["hbf_profile"] is None,
               f"{L('hbf_config')} / {L('hbf_profile')} apply to {L('hbf_model')} device, "
               f"not constant")
    return s


def hbf_timing(mode: str, config=None, profile=None, cache=True, progress=False, label=str,
               engine=None):
    """The HBF tier's :class:`TierTiming`: the serving paper's Table 1 (``constant``) or the
    ``HbfConfig`` characterized on the device model (``device``; on ``engine``, default the
    configuration's own ``engine`` key; either engine gives the golden model's figures;
    cached by its hash)."""
    from hbfsim.serve.tier_timing import TABLE1_HBF

    if mode == "constant":
        return TABLE1_HBF
    return characterize_stack(config, profile, cache, progress, label, engine)[0]


def characterize_stack(config=None, profile=None, cache=True, progress=False, label=str,
                       engine=None):
    """``(timing, stack_bytes)`` of the ``HbfConfig`` named by ``config``/``profile`` (default
    profile ``hbf-serving``): its characterization on the device model (on ``engine``,
    ``compiled`` or ``reference``; default the configuration's ``engine`` key) and its
    capacity per stack, so that the serving node's HBF tier is the characterized stack in
    both respects."""
    from hbfsim.config import ConfigError, load_config
    from hbfsim.serve.characterize import cache_path, characterize

    try:
        cfg = load_config(config, profile or (None if config else DEVICE_PROFILE))
    except ConfigError as e:
        raise ValueError(f"{label('hbf_config' if config else 'hbf_profile')}: {e}") from None
    if engine is not None:
        cfg = cfg.replace(engine=engine)     # a bad name: ConfigError, a ValueError
    if progress and (not cache or not cache_path(cfg).exists()):
        print(f"hbfsim serve: characterizing the HBF stack of profile {cfg.profile!r} on the "
              f"{cfg.engine} engine (once; cached by configuration hash) ...", file=sys.stderr)
    return (characterize(cfg, cache=cache, same_engine=engine is not None),
            cfg.capacity_bytes / cfg.stacks)


#: Memory a loaded trace takes per byte of its file: 5.2 (a 11 MB Mooncake JSONL of 50,000
#: turns peaked at 57 MB under tracemalloc).
TRACE_MEMORY_PER_BYTE = 5.2


def _check_trace_size(spec: str, label) -> None:
    """Refuse a trace file whose loaded turns would not fit in half of this machine's
    memory, before reading it."""
    from pathlib import Path

    p = Path(spec)
    if not p.is_file():
        return
    from hbfsim.serve.agentic import physical_memory

    limit = int(physical_memory() / 2 / TRACE_MEMORY_PER_BYTE)
    size = p.stat().st_size
    _check(size <= limit, f"{label('workload')} {spec}: {size:,} bytes, more than {limit:,} "
                          f"(a loaded trace takes about {TRACE_MEMORY_PER_BYTE:g} bytes of "
                          f"memory a byte; half of this machine's {physical_memory():,})")


def prepare_serving(settings: dict | None = None, *, label=str, workloads=None) -> dict:
    """Every check of a serving run, and nothing that costs: the settings validated, the
    model resolved (and its combination with ``weights`` and ``ep`` checked), the workload
    loaded and checked against ``page_tokens``, and the HBF configuration resolved (not
    characterized), so that a caller refuses bad input before any work.

    ``workloads`` (a dict) memoizes loaded workloads by ``(spec, format)`` across calls (a
    sweep checks many points of one workload). Returns ``{"s", "mc", "wl", "hbf_cfg"}``
    (``hbf_cfg`` None unless the HBF tier is the characterized device).

    Raises
    ------
    ValueError
        Naming ``label(key)`` and the value.
    """
    from hbfsim.serve.models import model_costs, serving_shape
    from hbfsim.serve.traces import load_workload

    s = validate(settings, label)
    L = label
    try:
        mc = model_costs(serving_shape(s["model"]))
    except ValueError as e:
        raise ValueError(f"{L('model')}: {e}") from None
    _check(s["weights"] != "split" or mc.is_moe,
           f"{L('weights')} split places routed experts; model {mc.name!r} is dense")
    _check(s["weights"] == "hbm" or s["hbf"] > 0,
           f"{L('weights')} {s['weights']} needs HBF stacks ({L('hbf')} 0)")
    _check(s["ep"] is None or mc.is_moe,
           f"{L('ep')} applies to MoE models; model {mc.name!r} is dense")
    hbf_cfg = None
    if s["hbf"] and s["hbf_model"] == "device":
        from hbfsim.config import ConfigError, load_config

        config = s["hbf_config"]
        try:
            hbf_cfg = load_config(config, s["hbf_profile"] or (None if config else
                                                                DEVICE_PROFILE))
        except ConfigError as e:
            raise ValueError(f"{L('hbf_config' if config else 'hbf_profile')}: {e}") from None
    key = (s["workload"], s["format"])
    wl = None if workloads is None else workloads.get(key)
    if wl is None:
        _check_trace_size(s["workload"], L)
        try:
            wl = load_workload(s["workload"], format=s["format"])
        except ValueError as e:
            raise ValueError(f"{L('workload')}: {e}") from None
        if workloads is not None:
            workloads[key] = wl
    _check(wl.block_tokens % s["page_tokens"] == 0,
           f"{L('page_tokens')} {s['page_tokens']} must divide the workload's "
           f"{wl.block_tokens}-token hash blocks")
    # the node and the cost model as the run builds them, with the HBF tier's capacity but
    # Table 1 timing (the characterized timing changes speeds, never what fits)
    from hbfsim.serve.calibration import cost_params
    from hbfsim.serve.cost import CostModel
    from hbfsim.serve.hardware import make_node

    stack_kw = {} if hbf_cfg is None else \
        {"hbf_stack_bytes": hbf_cfg.capacity_bytes / hbf_cfg.stacks}
    try:
        node = make_node(s["gpu"], s["gpus"], s["hbm"], s["hbf"], s["packaging"], **stack_kw,
                         hbm_stack=s["hbm_stack"], dram_bytes_per_gpu=s["dram_gb"] * 1e9,
                         ssd_bytes_per_gpu=s["ssd_tb"] * 1e12)
    except ValueError as e:
        raise ValueError(f"{L('hbm')} {s['hbm']} {L('hbf')} {s['hbf']} {L('packaging')} "
                         f"{s['packaging']}: {e}") from None
    params = cost_params(s["cost_model"], s["gpu"], s["dtype"], s["compute_efficiency"],
                         s["split_fraction"])
    CostModel(node, mc, tp=s["tp"] or s["gpus"], ep=s["ep"], weights=s["weights"],
              params=params, dpa=s["dpa"])
    return {"s": s, "mc": mc, "wl": wl, "hbf_cfg": hbf_cfg}


def run_serving(settings: dict | None = None, *, progress: bool = False, label=str,
                prepared: dict | None = None, cost_values: dict | None = None,
                engine: str | None = None) -> dict:
    """Validate ``settings``, serve the workload and return the run's figures.

    ``prepared``: what :func:`prepare_serving` returned for these settings (so a caller
    that checked first does not load the workload twice). ``cost_values`` replaces the
    fitted globals of the calibrated cost model
    (:func:`hbfsim.serve.calibration.calibrated_params`; the fit's trial values).
    ``engine`` (``compiled`` or ``reference``): the engine of the HBF characterization
    (``hbf_model = "device"``), default the HBF configuration's ``engine`` key; the serving
    simulation itself is this package's Python on either.

    Returns the dict of :func:`hbfsim.serve.report.summarize` plus ``host_seconds`` and
    ``energy_j`` (the energy breakdown in joules, with ``total``).
    """
    from hbfsim.serve.calibration import cost_params
    from hbfsim.serve.cost import CostModel
    from hbfsim.serve.energy import energy_breakdown
    from hbfsim.serve.engine import EngineConfig, simulate
    from hbfsim.serve.hardware import make_node
    from hbfsim.serve.report import summarize
    from hbfsim.serve.scheduler import Scheduler

    # every check before the characterization (minutes) and the run
    pre = prepared if prepared is not None else prepare_serving(settings, label=label)
    s, mc, wl = pre["s"], pre["mc"], pre["wl"]
    L = label
    timing, stack_kw = None, {}
    if s["hbf"] and s["hbf_model"] == "device":
        timing, stack_bytes = characterize_stack(s["hbf_config"], s["hbf_profile"],
                                                 cache=s["cache"], progress=progress, label=L,
                                                 engine=engine)
        stack_kw = {"hbf_stack_bytes": stack_bytes}
    elif s["hbf"]:
        timing = hbf_timing(s["hbf_model"])
    try:
        node = make_node(s["gpu"], s["gpus"], s["hbm"], s["hbf"], s["packaging"],
                         **({"hbf_timing": timing} if timing else {}), **stack_kw,
                         hbm_stack=s["hbm_stack"], dram_bytes_per_gpu=s["dram_gb"] * 1e9,
                         ssd_bytes_per_gpu=s["ssd_tb"] * 1e12)
    except ValueError as e:
        raise ValueError(f"{L('hbm')} {s['hbm']} {L('hbf')} {s['hbf']} {L('packaging')} "
                         f"{s['packaging']}: {e}") from None
    tp = s["tp"] or s["gpus"]
    params = cost_params(s["cost_model"], s["gpu"], s["dtype"], s["compute_efficiency"],
                         s["split_fraction"], values=cost_values)
    kw = dict(tp=tp, ep=s["ep"], weights=s["weights"], params=params, dpa=s["dpa"])
    cost = CostModel(node, mc, **kw)
    cfg = EngineConfig(max_batch=s["max_batch"], max_tokens=s["max_tokens"],
                       page_tokens=s["page_tokens"], reserve_output=s["reserve_output"])
    sched = Scheduler(s["scheduler"], s["headroom"])
    from tqdm import tqdm

    t0 = time.perf_counter()
    with tqdm(total=len(wl.turns), desc="serve", unit="turn",
              disable=None if progress else True, file=sys.stderr, leave=False) as bar:
        run = simulate(wl, node, mc, sched, config=cfg, progress=bar.update, **kw)
    out = summarize(run, node, cost, sched, wl, timing,
                    {"host_seconds": time.perf_counter() - t0, "cost_model": s["cost_model"]})
    out["energy_j"] = energy_breakdown(run.tally, node)
    return out
