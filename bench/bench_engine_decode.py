"""Benchmark the compiled closed loop on the §5.5 LLM decode step, against the golden one.

    python bench/bench_engine_decode.py [--scale N] [--layers L] [--golden | --no-golden]

The decode step of bench/bench_decode.py (Qwen3-1.7B, the source's §5.5 configuration) on
the one timing contract, reduced by ``--scale`` and ``--layers`` (default: scale 8, one
layer, about 0.7 M sector reads). It runs through:

* the golden model's closed loop (``hbfsim.model.gpu.run_closed_loop``: ``ClosedLoop``'s
  chunked driver over ``HbfSystem``, the one contract's reference loop), unless
  ``--no-golden``;
* the compiled closed loop (``hbfsim.engine.run_compiled_closed_loop``: the compiled GPU
  port stepped tick by tick against the compiled system), timed whole: the program's
  arrays in (``program_arrays``, timed apart), the run, every per-request array out.

The GPU's result figures and the system's end tick, completions and page services are
checked equal before the figures are printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import decode_config  # noqa: E402
from bench_engine_components import machine  # noqa: E402

from hbfsim.engine import (compiled_available, engine_status, program_arrays,  # noqa: E402
                           run_compiled_closed_loop)
from hbfsim.engine_standin import gpu_figures  # noqa: E402
from hbfsim.model.gpu import run_closed_loop  # noqa: E402
from hbfsim.model.stats import collect_stats  # noqa: E402
from hbfsim.model.workloads import llm_decode  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=8)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--no-golden", action="store_true", help="run the compiled loop only")
    a = ap.parse_args(argv)
    if not compiled_available():
        print(engine_status())
        return 2
    cfg = decode_config()
    w = llm_decode(cfg, scale=a.scale, layers=a.layers)
    print(f"decode step: {w.params['model']}, scale {a.scale}, {w.params['layers']} layer(s), "
          f"the one timing contract, {cfg.host_ports} shape, {cfg.channels} channels")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} at the start")
    t0 = time.perf_counter()
    arrays = program_arrays(w)
    t_arrays = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = run_compiled_closed_loop(cfg, arrays, getattr(w, "gpu", None))
    t_comp = time.perf_counter() - t0
    n = len(got["t_done"])
    c = got["counters"]
    print(f"compiled: {n:,} requests in {t_comp:.2f} s = {n / t_comp:,.0f} req/s "
          f"(program arrays {t_arrays:.2f} s); end tick {c['end_tick']:,}, GPU span "
          f"{got['gpu']['span_ticks']:,} ticks, page services "
          f"{c['page_reads'] + c['buffer_hits'] + c['page_cache_hits']:,}; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    if not a.no_golden:
        w = llm_decode(cfg, scale=a.scale, layers=a.layers)
        t0 = time.perf_counter()
        res = run_closed_loop(cfg, w)
        t_gold = time.perf_counter() - t0
        s = collect_stats(res.system)
        assert gpu_figures(res) == got["gpu"], "the GPU result figures differ"
        assert s["completions"] == c["completions"] == n, "the completions differ"
        assert res.system.t == c["end_tick"], "the end ticks differ"
        assert s["page_services"] == c["page_reads"] + c["buffer_hits"] + c["page_cache_hits"]
        print(f"golden:   {n:,} requests in {t_gold:.2f} s = {n / t_gold:,.0f} req/s; "
              f"equal GPU figures, end tick, completions and page services")
        print(f"compiled / golden: {t_gold / t_comp:.1f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
