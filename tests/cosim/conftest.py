"""Shared co-simulation runs: every selected scenario runs once per session, grouped by RTL
build (one Verilator build and one simulator process per parameter set)."""

from __future__ import annotations

import os

import pytest

from hbfsim.cosim import runner, scenarios

#: Seed of the CI runs (the full suite adds more).
SEED = 1

#: The CI run (docs/cosim.md "CI subset"), the default shape first: in the channel shape
#: (``host_ports = "channel"``) the directed multi-port scenarios, their random mix and the
#: closed-loop GPU on the two-port RTL set ``ports``; RTL set A's directed scenarios, random
#: traffic and GPU program (``<name>-ch``); the smallest tables (every stall), two stacks
#: (``S * C`` ports, the system as wiring) and megaplane commands, one build each. Not
#: ``read-after-write-ch`` (nor ``burst-ch``, below): its property (one PROGRAM and one
#: error: 32 writes of 128 B, one a tick, fill a page before the read that flushes it) is
#: the stack shape's; with two ports over 32 admission slots the channel shape admits every
#: port only while 2 slots are free (§4.1), the page's last writes wait for a response, the
#: deadline flushes the entry incomplete and 33 responses carry the strict error, no PROGRAM
#: (golden model and RTL alike, measured 2026-12-03: every event equal).
FAST_CHANNEL = ["ports-same-cycle-ports", "pool-fairness-ports", "admission-full-ports",
                "pressure-raw", "mix-ports", "gpu-ports",
                # pools per channel (docs/timing-contract.md §4.5): one build
                "pool-fairness-ports-pools", "mix-ports-pools", "gpu-ports-pools"] + \
    [f"{k}-ch" for k in ("conservation", "coverage", "strict", "saturation", "sched-fcfs",
                         "mix-backpressure", "gpu-backpressure", "mix-tiny", "mix-2stacks",
                         "mp-mix-megaplane")]
#: Then the stack shape: RTL set A's directed scenarios, random traffic and GPU program,
#: and the smallest tables; two builds.
FAST_STACK = ["conservation", "coverage", "strict", "read-after-write", "saturation",
              "sched-fcfs", "mix-backpressure", "gpu-backpressure", "mix-tiny"]
#: Added with HBFSIM_COSIM_FULL=1: every other scenario, in the stack shape (the shared
#: page, bursts, merging off, every scheduler, aggregation, 1 to 16 channels, a stack-wide
#: cap, a slow link, 32-byte coverage, two and three stacks, the GPU scenarios, multi-plane
#: commands in every mode and RTL set, seeded random configurations) ...
FULL_STACK = FAST_STACK + [
    "conservation-1ch", "conservation-4ch", "conservation-8ch", "conservation-16ch",
    "shared-staging", "merging-off", "burst", "partial", "sched-read-priority",
    "sched-write-drain", "sched-partition-1r3w", "sched-partition-2r2w",
    "sched-partition-3r1w", "mix-aggregation", "mix-merge-off", "mix-link", "mix-1ch",
    "mix-16ch", "mix-active-total", "mix-sectors", "mix-2stacks", "gpu-mshr-grid",
    "gpu-rw-isolation", "gpu-aggregation", "gpu-16ch", "gpu-sectors", "gpu-3stacks"] + \
    [f"mix@{s}" for s in range(1, 9)] + [f"gpu-mix@{s}" for s in range(1, 7)] + \
    [f"mp-{k}-{mode}" for mode in ("megaplane", "page", "off")
     for k in ("full", "partial", "two-rows", "program")] + \
    [f"mp-mix-{k}" for k in ("megaplane", "page", "off", "rich", "m4", "2stacks",
                             "tiny-page")]
#: ... and in the channel shape: the directed multi-port scenarios on four ports under a
#: partition scheduler (§4.2.4, a page on two ports) and on four fcfs ports, and the
#: scenarios above in the channel shape (``conservation-1ch-ch``: one channel, the shape
#: equal to the stack shape). Not ``burst-ch``: its property (one READ per page) is the
#: stack shape's; with two ports sharing 32 admission slots a page's 32 reads are accepted
#: over more than tR, and the late ones allocate again (golden model and RTL alike).
FULL_CHANNEL = FAST_CHANNEL + [
    "ports-same-cycle-ports-partition", "pool-fairness-ports-partition",
    "admission-full-ports-partition", "partition-same-page", "mix-ports-partition",
    "mix-ports-fcfs", "ports-same-cycle-ports-pools", "admission-full-ports-pools",
    "ports-same-cycle-ports-pools-partition", "pool-fairness-ports-pools-partition",
    "admission-full-ports-pools-partition", "mix-ports-pools-partition"] + [f"{k}-ch" for k in (
        "conservation-1ch", "conservation-16ch", "partial", "sched-read-priority",
        "sched-write-drain", "sched-partition-1r3w", "sched-partition-2r2w",
        "sched-partition-3r1w", "mix-aggregation", "mix-merge-off", "mix-link", "mix-1ch",
        "mix-16ch", "mix-active-total", "mix-sectors", "gpu-mshr-grid", "gpu-rw-isolation",
        "gpu-aggregation", "gpu-16ch", "gpu-sectors", "gpu-mix@1", "gpu-mix@4", "gpu-mix@7",
        "gpu-3stacks", "mp-full-megaplane", "mp-partial-megaplane", "mp-two-rows-megaplane",
        "mp-program-megaplane", "mp-mix-page")]


def full_suite() -> bool:
    return os.environ.get("HBFSIM_COSIM_FULL", "") not in ("", "0")


def selected() -> list[str]:
    return (FULL_CHANNEL + FULL_STACK) if full_suite() else (FAST_CHANNEL + FAST_STACK)


def make(key: str):
    """``name``, ``name@seed`` or either with ``-ch`` (the channel shape) -> Scenario."""
    shape = None
    if key.endswith("-ch"):
        key, shape = key[:-3], "channel"
    name, _, seed = key.partition("@")
    return scenarios.make(name, int(seed) if seed else SEED, host_ports=shape)


def verilator_or_skip():
    reason = runner.skip_reason("verilator")
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def cosim_results(request):
    """``{scenario key: result}`` for every scenario key the session's tests ask for."""
    verilator_or_skip()
    keys = []
    for item in request.session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and "scenario_key" in cs.params and \
                cs.params["scenario_key"] not in keys:
            keys.append(cs.params["scenario_key"])
    if not keys:    # a test that looks across scenarios, run on its own
        keys = selected()
    scs = [make(k) for k in keys]
    return dict(zip(keys, runner.run(scs)))
