"""Benchmark the compiled engine's components against the golden model's, in one run.

    python bench/bench_engine_components.py [--media-rows N] [--gpu-accesses N] [--repeat R]

Two components, each driven by the stand-in drivers of hbfsim/engine_standin.py (no
controller: it is being rewritten, docs/engine.md), on the default configuration:

* ``media``: a saturated stream on one stack's media: every tick a ``deliver(t)`` and, in
  3 of 4 ticks, one command on a random channel and subarray (80 % reads of a random page
  among 4 M, so few buffer hits, 20 % programs of a page among 64 K: erase before write).
* ``gpu``: one kernel of 256 warps (bound 4, compute 100 GPU cycles) over 32 B sector reads
  and writes spread over pages, answered by the stand-in controller after a delay of 20-80
  ticks (a fixed pseudo-random table), in the default (channel) host-port shape.

Each is timed three ways: the golden model's component driven from Python, the compiled
component driven from Python call by call (binding overhead included), and the compiled
component driven by the C++ stand-in driver (``Media.replay``, ``GpuPort.run_standin``),
which is how the compiled controller will call it. Events are the driver's log rows: issues
and delivered completions (media), grants and responses (GPU). The logs of all three are
checked equal before any figure is printed, so the runs did the same work.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.engine import (compiled_available, compiled_gpu_port, compiled_media,
                           engine_status, program_arrays)
from hbfsim.engine_standin import replay_media, run_gpu
from hbfsim.model.gpu import GpuConfig, GpuPort, GpuProgram, Kernel, Producer
from hbfsim.model.media import Media


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def media_rows(cfg, n: int, seed: int = 1) -> np.ndarray:
    """The saturated media stream: ~n rows (deliver every tick, a command in 3 of 4)."""
    rng = np.random.default_rng(seed)
    ticks = n * 4 // 7 + 1
    rows = []
    issue = rng.random(ticks) < 0.75
    write = rng.random(ticks) < 0.2
    ch = rng.integers(0, cfg.channels, ticks)
    sub = rng.integers(0, cfg.subarrays_per_channel, ticks)
    rpage = rng.integers(0, 1 << 22, ticks)
    wpage = rng.integers(0, 1 << 16, ticks)
    for t in range(ticks):
        rows.append((1, t, 0, 0, 0, 0, 0))
        if issue[t]:
            rows.append((0, t, int(ch[t]), int(sub[t]), int(write[t]),
                         int(wpage[t] if write[t] else rpage[t]), t))
    return np.array(rows, dtype=np.int64)


def gpu_program(cfg, accesses: int, seed: int = 2) -> GpuProgram:
    rng = np.random.default_rng(seed)
    warps = 256
    per = max(1, accesses // warps)
    pages = rng.integers(0, 1 << 20, (warps, per))
    offs = rng.integers(0, PAGE_BYTES // 32, (warps, per)) * 32
    ops = np.where(rng.random((warps, per)) < 0.25, "W", "R")
    B = cfg.base_address
    streams = [[(str(ops[w, i]), B + int(pages[w, i]) * PAGE_BYTES + int(offs[w, i]), 32)
                for i in range(per)] for w in range(warps)]

    def make():
        return [Kernel("stream", [Producer(s, bound=4, sm=w % 8) for w, s in
                                  enumerate(streams)], compute=100)]

    return GpuProgram(make, "bench")


def timed(fn, repeat: int):
    best, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best, out


def report(name: str, runs: list[tuple[str, float, np.ndarray]]) -> None:
    ref = runs[0][2]
    for label, _, log in runs[1:]:
        if log.shape != ref.shape or (log != ref).any():
            sys.exit(f"{name}: the {label} log differs from the golden model's")
    events = len(ref)
    base = runs[0][1]
    print(f"{name}: {events:,} events, logs equal in all {len(runs)} runs")
    for label, dt, _ in runs:
        print(f"  {label:<34} {dt:8.3f} s  {events / dt:14,.0f} events/s  "
              f"{base / dt:7.1f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--media-rows", type=int, default=300_000)
    ap.add_argument("--gpu-accesses", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs (default 3)")
    a = ap.parse_args(argv)
    for name in ("media_rows", "gpu_accesses", "repeat"):
        if getattr(a, name) < 1:
            print(f"--{name.replace('_', '-')} must be at least 1, not {getattr(a, name)}",
                  file=sys.stderr)
            return 2
    if not compiled_available():
        print(engine_status(), file=sys.stderr)
        return 2
    print(f"machine: {machine()}")
    print(engine_status())
    cfg = load_config()
    print(f"configuration: default ({cfg.channels} channels x {cfg.subarrays_per_channel} "
          f"subarrays, host_ports {cfg.host_ports}), best of {a.repeat}")

    rows = media_rows(cfg, a.media_rows)
    report("media", [
        ("golden model (Python driver)", *timed(lambda: replay_media(Media(cfg), rows),
                                                a.repeat)),
        ("compiled, Python driver per call", *timed(
            lambda: replay_media(compiled_media(cfg), rows), a.repeat)),
        ("compiled, C++ driver", *timed(lambda: compiled_media(cfg).replay(rows), a.repeat)),
    ])

    prog = gpu_program(cfg, a.gpu_accesses)
    gpu = GpuConfig(return_cycles=50)
    delays = np.random.default_rng(3).integers(20, 81, 997)
    t0 = time.perf_counter()
    arrays = program_arrays(prog)
    t_arrays = time.perf_counter() - t0
    report("gpu", [
        ("golden model (Python driver)", *timed(
            lambda: run_gpu(GpuPort(cfg, prog, gpu), delays), a.repeat)),
        ("compiled, Python driver per call", *timed(
            lambda: run_gpu(compiled_gpu_port(cfg, arrays, gpu), delays), a.repeat)),
        ("compiled, C++ driver", *timed(
            lambda: compiled_gpu_port(cfg, arrays, gpu).run_standin(delays), a.repeat)),
    ])
    print(f"  (program_arrays, once: {t_arrays:.3f} s for {len(arrays['access_op']):,} "
          f"accesses; not in the figures above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
