"""The one timing contract's conformance cases (tests/conformance/cases.py) on every level.

One runner per level turns a case into the same observation, ``{id: (accept, done,
mshr_hit, error)}`` and the media commands ``[(cycle, table, entry index)]``, and one
checker compares it with the case's expectations:

* ``model``: the golden model (``HbfSystem``);
* ``rtl``: the Amaranth simulation of the RTL top (``tests/rtl/rtl_helpers.run_rtl``);
* ``cosim``: cocotb + Verilator, the scoreboard comparing every event (media commands
  included) with the golden model; the observation is the RTL's own trace, and its media
  commands, which the scoreboard found equal to the golden model's, the golden run's. The cases on the
  base configuration share one Verilator build and run in CI; the others (one build per
  configuration) with ``HBFSIM_COSIM_FULL=1``, as the other co-simulation scenarios.

A level that does not implement a case's configuration yet is reported as a skip naming
the step of docs/timing-contract.md §18 that brings it, never as a pass.
"""

from __future__ import annotations

import csv
import os

import pytest

from hbfsim.config import PAGE_BYTES
from hbfsim.model.controller import Request
from tests.conformance.cases import BASE, CASES, LEVELS, Case
from tests.rtl.rtl_helpers import run_model, run_rtl, run_rtl_ports

#: The RTL's write-coverage granularity for every case (writes of 32 B and up).
SECTOR_BYTES = 32


def observe_model(case: Case):
    cfg = case.cfg()
    out, cmds = run_model(cfg, list(case.requests))
    return {i: (a, d, m, e) for i, (a, d, m, _b, e) in out.items()}, _tags(cmds)


def observe_rtl(case: Case):
    cfg = case.cfg()
    run = run_rtl_ports if cfg.host_ports == "channel" else run_rtl   # a port per channel
    out, cmds = run(cfg, list(case.requests), sector_bytes=SECTOR_BYTES)
    return {i: (a, d, m, e) for i, (a, d, m, _b, e) in out.items()}, _tags(cmds)


def _tags(cmds):
    """``(cycle, global channel, subarray, op, page, tag)`` -> ``(cycle, table, index)`` in
    issue order (commands of one cycle by channel)."""
    return [(t, "b" if tag & 1 else "m", tag >> 1) for t, _g, _s, _op, _p, tag in sorted(cmds)]


def check(case: Case, seen, commands) -> None:
    """Assert every expectation of ``case`` on an observation."""
    assert sorted(seen) == list(range(len(case.requests))), "every request answered once"
    env = {"tR": case.cfg().t_read_ticks, "tPROG": case.cfg().t_prog_ticks,
           "D": case.cfg().write_deadline_ticks}
    for i, (a, d, _m, _e) in seen.items():
        env[f"a{i}"], env[f"d{i}"] = a, d
    for k, (t, _tb, _idx) in enumerate(commands):
        env[f"c{k}"] = t
    for what, table, col in (("response", case.done, 1), ("accept", case.accept, 0)):
        for i, expr in table.items():
            want = eval(expr, {}, env)   # noqa: S307 - the cases are this suite's own data
            assert seen[i][col] == want, f"request {i} {what} cycle {seen[i][col]} != {expr} " \
                                         f"= {want}"
    for i, (mshr_hit, error) in case.flags.items():
        assert (seen[i][2], seen[i][3]) == (mshr_hit, error), \
            f"request {i} (mshr_hit, error) {seen[i][2:]} != {(mshr_hit, error)}"
    if case.commands is not None:
        got = [t for t, _tb, _idx in commands]
        want = [eval(e, {}, env) for e in case.commands]   # noqa: S307
        assert got == want, f"command cycles {got} != {list(case.commands)} = {want}"
    if case.tags is not None:
        assert [(tb, idx) for _t, tb, idx in commands] == list(case.tags), "command tags"


def _skip_unless(case: Case, level: str) -> None:
    if level not in case.levels:
        pytest.skip(f"{level}: not implemented for {case.config} yet "
                    "(docs/timing-contract.md §18 step 3)")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_model(case):
    _skip_unless(case, "model")
    check(case, *observe_model(case))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rtl_simulation(case):
    _skip_unless(case, "rtl")
    check(case, *observe_rtl(case))


# ------------------------------------------------------------------ co-simulation
def _on_base(case: Case) -> bool:
    return not case.config


def _cosim_cases():
    full = os.environ.get("HBFSIM_COSIM_FULL", "") not in ("", "0")
    return [c for c in CASES if "cosim" in c.levels and (full or _on_base(c))]


@pytest.fixture(scope="module")
def cosim_observations():
    """Every co-simulated case in one call (one Verilator build per configuration)."""
    from hbfsim.cosim import runner
    from hbfsim.cosim.scenario import Scenario

    reason = runner.skip_reason("verilator")
    if reason:
        pytest.skip(reason)
    cases = _cosim_cases()
    scs = []
    for c in cases:
        cfg = c.cfg()
        reqs = [Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, t)
                for i, (op, page, off, n, t) in enumerate(c.requests)]
        scs.append(Scenario.from_requests(f"conformance-{c.name}", cfg, reqs,
                                          sector_bytes=SECTOR_BYTES))
    return {c.name: r for c, r in zip(cases, runner.run(scs))}


def _read_rtl_trace(path) -> dict:
    """The RTL's hbf-trace-v1 level-1 rows -> ``{id: (accept, done, mshr_hit, error)}``."""
    rows = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            i = int(r["request_id"])
            acc, done, hit, err = rows.get(i, (None, None, None, None))
            if r["state"] == "Ingress":
                acc = int(r["sim_cycle"])
            elif r["state"] == "Completed":
                done, hit, err = int(r["sim_cycle"]), int(r["mshr_hit"]), int(r["error"])
            rows[i] = (acc, done, hit, err)
    return rows


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cosimulation(case, cosim_observations):
    _skip_unless(case, "cosim")
    if case.name not in cosim_observations:
        pytest.skip("a configuration of its own: one more Verilator build, run with "
                    "HBFSIM_COSIM_FULL=1")
    r = cosim_observations[case.name]
    assert r["passed"], r["diff"]           # every event equals the golden model's
    # the scoreboard compared every media command with the golden model's: those are the
    # RTL's commands too
    _, commands = observe_model(case)
    check(case, _read_rtl_trace(r["rtl_trace"]), commands)


def test_every_level_is_named():
    """Every case names only known levels and its rule; the golden model implements all."""
    assert {lvl for c in CASES for lvl in c.levels} <= set(LEVELS)
    assert all(c.rule and "model" in c.levels for c in CASES)
    assert len({c.name for c in CASES}) == len(CASES)
    assert "pipeline" not in BASE and "contract" not in BASE   # one contract (history.md)
