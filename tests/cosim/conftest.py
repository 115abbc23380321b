"""Shared co-simulation runs: every selected scenario runs once per session, grouped by RTL
build (one Verilator build and one simulator process per parameter set)."""

from __future__ import annotations

import os

import pytest

from hbfsim.cosim import runner, scenarios

#: Seed of the CI runs (the full suite adds more).
SEED = 1

#: Scenarios of the default (CI) run under contract 1 (superseded since 2026-12-02, kept
#: for comparison): RTL sets A, B, C, 16ch, A with 32-byte write coverage and 2 stacks, and
#: the set of shared-staging, seven builds; the gpu-* ones run the closed-loop GPU model on
#: the RTL's responses. The sets 1ch, active-total, read-priority (gpu-rw-isolation) and
#: 3 stacks moved to the full suite on 2026-12-02 so that the CI run stays under 15
#: minutes with Amendment A's builds (FAST_DEEP).
#: Since 2026-12-03 (issue 23: the CI's co-simulation budget goes to the one contract, in
#: its default shape first) CI keeps RTL set A's scenarios of each retired contract, one
#: build each; the rest of their former CI sets run with HBFSIM_COSIM_FULL=1.
FAST = ["conservation", "saturation", "coverage", "strict", "read-after-write",
        "sched-fcfs", "mix-backpressure", "gpu-backpressure"]
_C1_FORMER_CI = ["conservation-16ch", "shared-staging", "merging-off", "burst", "partial",
                 "sched-write-drain", "sched-partition-2r2w", "mix-aggregation",
                 "mix-merge-off", "mix-16ch", "mix-sectors", "mix-2stacks", "gpu-mshr-grid",
                 "gpu-aggregation", "gpu-16ch", "gpu-sectors"]
#: The contract-2 subset of the CI run (docs/timing-contract.md §18 step 3, stack shape):
#: the same scenarios under ``contract = 2``, keyed ``<name>-v2``; RTL sets A, link (the
#: deficit credit), tiny (every stall) and 2 stacks (the route stage), four builds, which
#: keeps the whole CI run under 15 minutes; sets B, C and 3 stacks with the closed-loop GPU
#: run with HBFSIM_COSIM_FULL=1.
FAST_V2 = [f"{k}-v2" for k in (
    "conservation", "coverage", "strict", "read-after-write", "mix-backpressure",
    "gpu-backpressure")]
_V2_FORMER_CI = [f"{k}-v2" for k in (
    "shared-staging", "burst", "partial", "mix-link", "mix-tiny", "mix-2stacks")]
#: Multi-plane commands (docs/timing-contract.md §7a): the four directed scenarios
#: under ``multiplane = "megaplane"`` are in the CI subset (one build); the same under
#: ``page`` and ``off`` on the same geometry, and the random mixes (also on four more RTL
#: sets: the other options, four planes a megaplane, two stacks, the smallest tables), with
#: HBFSIM_COSIM_FULL=1 (six more builds).
_V2_FORMER_CI += [f"mp-{k}-megaplane-v2" for k in ("full", "partial", "two-rows", "program")]
FULL_V2 = FAST_V2 + _V2_FORMER_CI + [f"{k}-v2" for k in (
    "sched-write-drain", "mix-aggregation", "merging-off", "mix-merge-off", "gpu-3stacks")] + \
    [f"mp-{k}-{mode}-v2" for mode in ("page", "off")
     for k in ("full", "partial", "two-rows", "program")] + \
    [f"mp-mix-{mode}-v2" for mode in ("megaplane", "page", "off", "rich", "m4", "2stacks",
                                      "tiny-page")]
#: The channel shape (docs/timing-contract.md §18 step 6): CI runs the directed
#: multi-port scenarios on one small build (two ports, RTL set ``ports``: about 25 s cold);
#: HBFSIM_COSIM_FULL=1 adds them on four ports under a partition scheduler (§4.2.4, same
#: page on two ports), the random mixes, and the contract-1 scenarios in the channel shape
#: (``<name>-ch``; ``conservation-1ch-ch``: one channel, the shape equal to the stack shape).
#: Not ``burst-ch``: its property (one READ per page) is the stack shape's; with two ports
#: sharing 32 admission slots a page's 32 reads are accepted over more than tR, and the late
#: ones allocate again (64 READs for 16 pages, golden model and RTL alike, 0 mismatches).
#: The closed-loop GPU (G5', one grant per port per tick): ``gpu-ports`` in CI, on the same
#: two-port build (no further Verilator build); the ``gpu-*`` scenarios in the channel shape
#: with HBFSIM_COSIM_FULL=1 (``gpu-mix`` seeds 1, 4, 7: 2-4 channels and 4 partitions, so
#: several grants share ticks). Several stacks (v2 §2: S * C ports, the system as wiring):
#: ``mix-2stacks-ch`` in CI (one more build), ``gpu-3stacks-ch`` with HBFSIM_COSIM_FULL=1.
#: Multi-plane commands in the channel shape: ``mp-mix-megaplane-ch`` in CI (one more
#: build), the directed ``mp-*-megaplane-ch`` and ``mp-mix-page-ch`` with the full suite.
FAST_CH = ["ports-same-cycle-ports", "pool-fairness-ports", "admission-full-ports",
           "pressure-raw", "mix-ports", "gpu-ports"]
FULL_CH = FAST_CH + ["mix-2stacks-ch", "mp-mix-megaplane-ch"] + [f"{k}-ports-partition" for k in ("ports-same-cycle", "pool-fairness",
                                                      "admission-full")] + \
    ["partition-same-page", "mix-ports-partition", "mix-ports-fcfs"] + \
    [f"{k}-ch" for k in ("gpu-mshr-grid", "gpu-rw-isolation", "gpu-backpressure",
                         "gpu-aggregation", "gpu-16ch", "gpu-sectors", "gpu-mix@1",
                         "gpu-mix@4", "gpu-mix@7", "gpu-3stacks")] + \
    [f"mp-{k}-ch" for k in ("full-megaplane", "partial-megaplane", "two-rows-megaplane",
                            "program-megaplane", "mix-page")] + \
    [f"{k}-ch" for k in (
        "conservation", "conservation-1ch", "conservation-16ch", "saturation",
        "coverage", "strict", "partial", "read-after-write", "sched-read-priority",
        "sched-write-drain", "sched-partition-1r3w", "sched-partition-2r2w",
        "sched-partition-3r1w", "mix-backpressure", "mix-aggregation", "mix-merge-off",
        "mix-tiny", "mix-link", "mix-1ch", "mix-16ch", "mix-active-total", "mix-sectors")]
#: Amendment A (docs/timing-contract.md, ``pipeline = "deep"``: stack shape, demand
#: reads, merging): CI runs RTL set A's directed scenarios and random traffic with the
#: closed-loop GPU, and the smallest tables (every stall), two builds; HBFSIM_COSIM_FULL=1
#: adds the shared page, bursts, a slow link, two stacks, 32-byte coverage, 1 and 16
#: channels and read priority (eight more builds).
FAST_DEEP = [f"{k}-deep" for k in (
    "conservation", "coverage", "strict", "read-after-write", "saturation", "sched-fcfs",
    "mix-backpressure", "gpu-backpressure", "mix-tiny")]
FULL_DEEP = FAST_DEEP + [f"{k}-deep" for k in (
    "shared-staging", "burst", "gpu-mshr-grid", "mix-link", "mix-2stacks", "mix-sectors",
    "gpu-sectors", "conservation-16ch", "mix-16ch", "gpu-16ch", "conservation-1ch",
    "mix-1ch", "sched-read-priority",
    # the stack shape's other modes (issue 23 step 3): aggregation reads (set B), merging
    # off (set C), megaplane commands
    "mix-aggregation", "mix-merge-off", "mp-mix-megaplane")]
#: The registered pipeline in the channel shape (issue 23 step 3): CI runs the channel
#: shape's directed multi-port scenarios and their random mixes (GPU included) on the
#: two-port ``ports`` set under deep (``<name>-deep``: their configuration is the channel
#: shape's already), one build; HBFSIM_COSIM_FULL=1 adds them on four ports under a
#: partition scheduler (§4.2.4), RTL set A's directed scenarios and random traffic in the
#: channel shape (``<name>-deep-ch``), the smallest tables, two stacks (S * C ports),
#: aggregation reads, merging off and multi-plane commands.
FAST_DEEP_CH = [f"{k}-deep" for k in (
    "ports-same-cycle-ports", "pool-fairness-ports", "admission-full-ports", "pressure-raw",
    "mix-ports", "gpu-ports")] + [f"{k}-deep-ch" for k in ("mix-2stacks", "mp-mix-megaplane")]
FULL_DEEP_CH = FAST_DEEP_CH + [f"{k}-deep" for k in (
    "ports-same-cycle-ports-partition", "pool-fairness-ports-partition",
    "admission-full-ports-partition", "partition-same-page", "mix-ports-partition",
    "mix-ports-fcfs")] + [f"{k}-deep-ch" for k in (
        "conservation", "coverage", "strict", "read-after-write", "saturation", "sched-fcfs",
        "mix-backpressure", "gpu-backpressure", "mix-tiny", "mix-aggregation",
        "mix-merge-off", "mp-mix-page")]
#: Added with HBFSIM_COSIM_FULL=1: the other schedulers and table sizes, 4 and 8 channels,
#: and fully random configurations (one build each).
FULL = FAST + _C1_FORMER_CI + ["conservation-1ch", "mix-1ch", "mix-active-total", "gpu-rw-isolation",
               "gpu-3stacks"] + \
    ["sched-read-priority", "sched-partition-1r3w", "sched-partition-3r1w",
               "mix-tiny", "mix-link", "conservation-4ch", "conservation-8ch"] + \
    [f"mix@{s}" for s in range(1, 9)] + [f"gpu-mix@{s}" for s in range(1, 7)]


def full_suite() -> bool:
    return os.environ.get("HBFSIM_COSIM_FULL", "") not in ("", "0")


def selected() -> list[str]:
    return (FULL + FULL_V2 + FULL_CH + FULL_DEEP + FULL_DEEP_CH) if full_suite() else \
        (FAST + FAST_V2 + FAST_CH + FAST_DEEP + FAST_DEEP_CH)


def make(key: str):
    """``name``, ``name@seed`` or either with ``-v2`` (contract 2), ``-ch`` (contract 2,
    channel shape), ``-deep`` (contract 2, the registered pipeline, in the scenario's own
    shape) or ``-deep-ch`` (the registered pipeline in the channel shape) -> Scenario."""
    contract, shape, pipeline = 1, "stack", "standard"
    if key.endswith("-deep-ch"):
        key, contract, shape, pipeline = key[:-8], 2, "channel", "deep"
    elif key.endswith("-deep"):
        key, contract, pipeline = key[:-5], 2, "deep"
    elif key.endswith("-v2"):
        key, contract = key[:-3], 2
    elif key.endswith("-ch"):
        key, contract, shape = key[:-3], 2, "channel"
    name, _, seed = key.partition("@")
    return scenarios.make(name, int(seed) if seed else SEED, contract=contract,
                          host_ports=shape, pipeline=pipeline)


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
