"""Benchmark: one LLM decode step (Qwen3-1.7B, weights in HBF) run closed loop end to end.

    python bench/bench_decode.py [--scale N] [--layers L] [--profile WHAT] [--top K]
                                 [--json OUT.json] [--engine compiled|reference]
                                 [--model NAME] [--set KEY=VALUE]

The HBF configuration is the source's §5.5 one (the HBF-Sim paper; sources.md §figures):
one stack, 16 channels, 512 subarrays in total (32 per channel), 512 active-operation
slots (32 per channel), 4096 admission slots, 1024 MSHR entries, MSHR merging and the two
NAND page buffers per subarray on, the logic-die page cache off, tR/tPROG/tBERS
15/200/2000 us, clocks 1.410 GHz core / 1.512 GHz memory (the workload's ``config``).

At full size (``--scale 1``) the step is 107,540,992 sector reads. The script prints the
simulated figures beside the reference's (sources.md §figures), the host time and requests per
host second (timed without a profiler), then a cProfile summary of where the time goes:
``--profile reduced`` (default) profiles a separate reduced step (scale 8, one layer: about
0.7 M requests, a few seconds; cProfile inflates small calls by about 3x), ``--profile
main`` runs the step itself under cProfile (no separate timing), ``--profile none`` skips it.
``--engine`` picks the engine (default: the configuration's, compiled; docs/engine.md): the
compiled one runs the step in bounded memory (hbfsim/engine_stream.py); the profile then
shows only the Python side (the program's generation and the statistics). ``--model``
runs another dense model's step on the same configuration (``qwen3-32b``: 1,999,049,344
sector reads at full size; no reference column).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import sys
import time

from hbfsim.config import load_config
from hbfsim.studies.cli import _config_set
from hbfsim.model.gpu import GpuError
from hbfsim.model.workloads import llm_decode
from hbfsim.simulate import choose_engine, run_closed

# sources.md §figures / source Table 5 (Qwen3-1.7B decode step, public HBF-Sim)
REFERENCE = {
    "read_requests": 107_540_992,
    "page_services": 27_724_248,
    "page_buffer_hits": 26_884_070,
    "bytes_returned": 3_441_311_744,
    "array_reads": 27_724_248 - 26_884_070,
    "gpu_ms": 249.95,
    "host_hours": 18,
}


def decode_config(**overrides):
    """The source's §5.5 decode configuration (see the module docstring)."""
    w = llm_decode(scale=64, layers=1)      # only for its config dict
    kw = dict(w.config)
    kw.update(page_buffers=2, mshr_merge=True, active_total=0)
    kw.update(overrides)
    return load_config(**kw)


def run(scale=1, layers=None, profile=False, config_set=None, engine=None,
        model="qwen3-1.7b", **params):
    cfg = decode_config(**(config_set or {}))
    w = llm_decode(cfg, model=model, scale=scale, layers=layers, **params)
    name, note = choose_engine(cfg, engine)
    if note:
        print(note)
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    fin = run_closed(cfg, w, name)
    if prof:
        prof.disable()
    host = time.perf_counter() - t0
    return w, cfg, fin.result, fin.stats, host, prof, name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=1,
                    help="divide hidden/intermediate/vocab/heads by N (1 = the full model)")
    ap.add_argument("--layers", type=int, default=None, help="override the layer count")
    ap.add_argument("--model", default="qwen3-1.7b",
                    help="a dense model of hbfsim.shapes whose decode step runs (default "
                    "qwen3-1.7b, the source's §5.5 step; only it has the reference column), "
                    "e.g. qwen3-32b")
    ap.add_argument("--profile", choices=("reduced", "main", "none"), default="reduced",
                    help="cProfile a reduced step (default), the step itself, or nothing")
    ap.add_argument("--top", type=int, default=20, help="profile rows to print")
    ap.add_argument("--json", metavar="OUT.json", help="write the figures as JSON")
    ap.add_argument("--engine", choices=("compiled", "reference"), default=None,
                    help="the engine (default: the configuration's engine key, compiled)")
    ap.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                    dest="config_set", help="override a configuration key of the decode "
                    "configuration (repeatable), e.g. --set host_ports=stack")
    a = ap.parse_args(argv)
    if a.scale < 1 or (a.layers is not None and a.layers < 1):
        ap.error("--scale and --layers must be positive")
    try:
        config_set = _config_set(a.config_set)
        llm_decode(decode_config(**config_set), model=a.model, scale=a.scale, layers=a.layers)
    except (ValueError, GpuError) as e:
        ap.error(str(e))
    w, cfg, res, s, host, prof, engine = run(a.scale, a.layers, a.profile == "main",
                                             config_set, a.engine, a.model)
    n = s["requests"]
    full = a.scale == 1 and a.layers is None and a.model == "qwen3-1.7b"
    buf, arr = s["page_buffer_hits"], s["page_reads"]
    out = {
        "model": w.params["model"], "scale": a.scale, "layers": w.params["layers"],
        "profiled": a.profile == "main",
        "requests": n, "expected_requests": w.expected["requests"],
        "read_requests": s["read_requests"], "completions": s["completions"],
        "errors": s["errors"], "kernels": len(res.kernels),
        "array_page_reads": arr, "page_buffer_hits": buf,
        "page_services": s["page_services"], "mshr_hits": s["mshr_hits"],
        "bytes_returned": s["requested_read_bytes"],
        "array_bytes": arr * 4096,
        "span_ticks": res.span_ticks, "span_gpu_cycles": res.span_gpu_cycles,
        "span_ms": res.span_us / 1000, "array_bandwidth_gbs": s["array_bandwidth_gbs"],
        "media_utilization": s["media_utilization"],
        "host_seconds": host, "requests_per_second": n / host if host else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu": os.cpu_count(), "config_set": config_set, "engine": engine,
    }
    print(f"LLM decode step: {out['model']} ({out['layers']} layers), {out['kernels']} kernels; "
          f"config: 1 stack x {cfg.channels} channels x {cfg.subarrays_per_channel} "
          f"subarrays, {cfg.active_per_channel * cfg.channels} active slots, admission "
          f"{cfg.admission}, MSHRs {cfg.mshr_entries}, page buffers {cfg.page_buffers}, "
          f"page cache {cfg.page_cache_pages}, tR {cfg.t_read_us} us, {cfg.host_ports} "
          f"shape; {engine} engine")
    ref = REFERENCE if full else {}

    def row(label, ours, key=None, fmt="{:,}"):
        r = ref.get(key) if key else None
        print(f"  {label:<34} {fmt.format(ours):>18}   "
              f"{'' if r is None else 'reference ' + fmt.format(r)}")

    row("read requests", s["read_requests"], "read_requests")
    row("completions", s["completions"])
    row("page services (array + buffer)", s["page_services"], "page_services")
    row("  NAND page-buffer hits", buf, "page_buffer_hits")
    row("  array page reads", arr, "array_reads")
    row("MSHR hits", s["mshr_hits"])
    row("bytes returned", out["bytes_returned"], "bytes_returned")
    row("simulated span (ms)", out["span_ms"], "gpu_ms", "{:,.2f}")
    print(f"  array bandwidth {out['array_bandwidth_gbs']:.2f} GB/s, media utilization "
          f"{out['media_utilization']:.4f}, errors {s['errors']}")
    print(f"host time: {host:,.1f} s, {out['requests_per_second']:,.0f} requests/s"
          f"{' (under cProfile)' if a.profile == 'main' else ''}, peak RSS "
          f"{out['peak_rss_mib']:,.0f} MiB")
    if s["completions"] != w.expected["requests"]:
        print(f"ERROR: {s['completions']:,} completions for {w.expected['requests']:,} "
              f"requests", file=sys.stderr)
        return 1
    title = "the step above"
    if a.profile == "reduced":
        pw, _, pres, ps, phost, prof, _ = run(8, 1, True, config_set, a.engine, a.model)
        title = (f"a reduced step: scale 8, 1 layer, {ps['requests']:,} requests, "
                 f"{phost:.1f} s under cProfile")
    if prof:
        buf_ = io.StringIO()
        st = pstats.Stats(prof, stream=buf_)
        st.sort_stats("tottime").print_stats(a.top)
        text = buf_.getvalue().splitlines()
        i = next((k for k, line in enumerate(text) if "ncalls" in line), 0)
        total = st.total_tt
        print(f"profile of {title} (top by own time; total {total:.1f} s):")
        print("\n".join(text[i:i + a.top + 1]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
