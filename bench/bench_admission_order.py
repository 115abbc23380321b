"""Measure how the channel shape shares its admission count among the ports.

    python bench/bench_admission_order.py [--requests N] [--pipeline NAME ...]
                                          [--order NAME ...] [--sample TICKS]

Replays ``bench_contract2.py``'s read stream (ocp-grade3, open loop, the reference loop)
in the stack shape and in the channel shape, and prints for each run the end tick, the
cycles in which a slot was free, a port's head had arrived and its Q had room and no port
accepted (timing-contract.md §19 question 3: the retired rotating rank ``(p - t) mod P`` left
such slots unused, and ``free >= P`` leaves fewer than ``P`` free slots unused), the unused slot-cycles, the range of per-port acceptances per sample
window, and the MSHR entries QUEUED and ISSUED at each sample tick (an entry QUEUED holds
its requests' slots while its subarray is busy).

``--order`` chooses how the channel shape hands out free admission slots:

* ``contract``: §4.1's rule, every port ready while ``admission - inflight >= P`` (what the
  model implements since 2026-12-03; before, the rotating rank);
* ``rank``: the rotating rank ``(p - t) mod P < free`` alone, the rule §4.1 had before §19
  question 3 was decided (and keeps for ``admission < P``);
* ``filled``: the same rotation, but every free slot is taken (ports from ``t mod P``
  while slots remain);
* ``random``: ports in a random order each cycle (seeded) take every free slot;
* ``arrival``: the arrived heads in arrival order across the ports (the stack shape's
  order);

The last four are **counterfactuals, not the contract**: for the duration of a run they
replace the ingress phase of the reference loop (``model/system_v2.py``,
``_ingress_ports``) and restore it afterwards. docs/results.md ("Re-run on the one timing
contract", the admission bound) quotes this script's figures.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter

from hbfsim.config import load_config
from hbfsim.model import system_v2
from hbfsim.model.controller import ISSUED, QUEUED, Request
from hbfsim.model.controller_v2 import INGRESS_DEPTH
from hbfsim.model.system import HbfSystem

ORDERS = ("contract", "rank", "filled", "random", "arrival")
#: the reference loop's channel-shape ingress phase (restored after every run)
_ORIGINAL = system_v2._ingress_ports


def _take(system, s, p: int, t: int) -> None:
    req = system.port_in[p].popleft()
    req.t_accept = t
    s.accept(req, t, p)


def _waiting(system, s, t: int) -> list[int]:
    """The ports whose head has arrived and whose Q has room."""
    return [p for p, q in enumerate(system.port_in)
            if q and q[0].arrival <= t and len(s.inp[p].qin) < INGRESS_DEPTH]


def counterfactual(order: str, seed: int = 1):
    """The ingress phase that hands out free slots in ``order`` (one stack)."""
    rng = random.Random(seed)

    def ingress(system, t: int) -> bool:
        s = system.stacks[0]
        free = s.admission - s.inflight
        ports = _waiting(system, s, t)
        if order == "rank":
            P = len(system.port_in)
            ports = [p for p in ports if (p - t) % P < free]
        elif order == "filled":
            P = len(system.port_in)
            ports = sorted(ports, key=lambda p: (p - t) % P)
        elif order == "random":
            rng.shuffle(ports)
        else:  # arrival
            ports.sort(key=lambda p: (system.port_in[p][0].arrival, system.port_in[p][0].id))
        taken = ports[:max(0, free)]
        for p in taken:
            _take(system, s, p, t)
        return bool(taken)

    return ingress


def run(pipeline: str, shape: str, order: str, n: int, sample: int) -> dict:
    """Replay the read stream once; return the measured figures."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_contract2 import PROFILE, read_stream

    cfg = load_config(**PROFILE, host_ports=shape, pipeline=pipeline)
    system = HbfSystem(cfg, keep=False)
    system.engine = "reference"
    for i, (op, addr, nbytes, source, arrival) in enumerate(read_stream(n)):
        system.submit(Request(i, op, addr, nbytes, source, arrival, None))
    system.close_input()
    s = system.stacks[0]
    fig = Counter()
    windows: dict[int, Counter] = {}
    samples: list[tuple[int, int, int]] = []
    last = [None]
    inner = _ORIGINAL if order == "contract" else counterfactual(order)

    def measured(system, t: int) -> bool:
        free = s.admission - s.inflight
        waiting = len(_waiting(system, s, t))
        before = [len(q) for q in system.port_in]
        changed = inner(system, t)
        accepted = 0
        for p, q in enumerate(system.port_in):
            if len(q) < before[p]:
                accepted += 1
                windows.setdefault(t // sample, Counter())[p] += 1
        # the cycles the loop skipped since the last call held the same state (C3)
        gap = 0 if last[0] is None else t - last[0] - 1
        last[0] = t
        for cycles, acc in ((1, accepted), (gap, 0)):
            if cycles > 0 and free > 0 and waiting:
                fig["stuck"] += cycles * (acc == 0)
                fig["unused"] += cycles * max(0, min(free, waiting) - acc)
        return changed

    orig_issue = s.issue
    nxt = [0]

    def issue(t: int) -> bool:
        while t >= nxt[0]:
            st = Counter(e.state for e in s.mshr)
            samples.append((nxt[0], st[QUEUED], st[ISSUED]))
            nxt[0] += sample
        return orig_issue(t)

    s.issue = issue
    t0 = time.perf_counter()
    if shape == "channel":
        system_v2._ingress_ports = measured
    try:
        end = system.run()
    finally:
        system_v2._ingress_ports = _ORIGINAL
    steady = [w for k, w in sorted(windows.items())][1:-1]  # after the first round, before the tail
    shares = [c[p] for c in steady for p in range(cfg.channels)]
    mid = samples[len(samples) // 4:-1] or samples
    return dict(end=end, host=time.perf_counter() - t0, stuck=fig["stuck"], unused=fig["unused"],
                share=(min(shares), max(shares)) if shares else None,
                queued=(min(q for _, q, _ in mid), max(q for _, q, _ in mid)),
                issued=(min(i for _, _, i in mid), max(i for _, _, i in mid)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="read stream length")
    ap.add_argument("--pipeline", nargs="+", choices=("standard", "deep"),
                    default=["standard", "deep"])
    ap.add_argument("--order", nargs="+", choices=ORDERS, default=list(ORDERS))
    ap.add_argument("--sample", type=int, default=20_000, help="sample window in ticks")
    a = ap.parse_args(argv)
    if a.requests < 1:
        ap.error(f"--requests must be positive, not {a.requests}")
    if a.sample < 1:
        ap.error(f"--sample must be positive, not {a.sample}")
    print(f"admission order, ocp-grade3 read stream of {a.requests:,} requests (reference "
          f"loop); 'unused' = slot-cycles with a free slot and a waiting port left untaken; "
          f"shares = accepts per port per {a.sample:,}-tick window after the first")
    print(f"{'pipeline':<9} {'shape':<8} {'order':<9} {'end tick':>10} {'stuck cyc':>9} "
          f"{'unused':>7} {'shares':>10} {'QUEUED':>9} {'ISSUED':>9} {'host s':>7}")
    for pipe in a.pipeline:
        runs = [("stack", "contract")] + [("channel", o) for o in a.order]
        for shape, order in runs:
            r = run(pipe, shape, order, a.requests, a.sample)
            sh = "-" if r["share"] is None or shape == "stack" else "%d-%d" % r["share"]
            print(f"{pipe:<9} {shape:<8} {order:<9} {r['end']:>10,} {r['stuck']:>9,} "
                  f"{r['unused']:>7,} {sh:>10} {'%d-%d' % r['queued']:>9} "
                  f"{'%d-%d' % r['issued']:>9} {r['host']:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
