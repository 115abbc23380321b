"""Count the CPython opcodes the golden model executes per request (noise-free cost).

    python bench/bench_opcodes.py [--stream read|mixed] [--requests N] [--lines K]
                                  [--host-ports stack|channel]

Runs one stream of bench/bench_model.py under ``sys.settrace`` with opcode events (slow:
about 40,000 requests take a minute) and prints the opcodes executed per request; ``--lines
K`` also prints the K source lines that execute the most. Unlike requests per second this
figure does not move with the load of a shared machine, so it compares two versions of a
loop exactly (it does not weigh opcodes: a function call costs more than its opcodes).
"""

from __future__ import annotations

import argparse
import linecache
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import mixed_stream, read_stream  # noqa: E402

from hbfsim.config import load_config  # noqa: E402
from hbfsim.model.system import HbfSystem  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stream", choices=("read", "mixed"), default="read")
    ap.add_argument("--requests", type=int, default=40_000)
    ap.add_argument("--lines", type=int, default=0)
    ap.add_argument("--host-ports", choices=("stack", "channel"), default="stack",
                    help="host-port shape")
    a = ap.parse_args(argv)
    over = {"host_ports": a.host_ports}
    cfg = load_config(profile="ocp-grade3", admission=4096, mshr_entries=1024,
                      queue_depth=64, **over)
    build = read_stream if a.stream == "read" else mixed_stream
    reqs = build(cfg, a.requests)
    system = HbfSystem(cfg, keep=False)
    for r in reqs:
        system.submit(r)
    system.close_input()
    counts: Counter = Counter()

    def local(frame, event, arg):
        if event == "opcode":
            counts[(frame.f_code.co_filename, frame.f_lineno)] += 1
        return local

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        return local

    sys.settrace(trace)
    try:
        system.run()
    finally:
        sys.settrace(None)
    total = sum(counts.values())
    shape = f"{a.host_ports} ports"
    print(f"{a.stream} stream, {a.requests:,} requests, {shape}, the reference loop: "
          f"{total:,} opcodes, "
          f"{total / a.requests:.1f} per request")
    for (path, line), n in counts.most_common(a.lines):
        text = linecache.getline(path, line).strip() if line else ""
        print(f"{n / a.requests:8.2f}  {Path(path).name}:{line}  {text[:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
