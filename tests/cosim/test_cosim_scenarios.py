"""The RTL against the golden model on every scenario: all events equal, traces identical,
flush counters equal, and the functional property each scenario demonstrates (issue 4)."""

from __future__ import annotations

import pytest

from pathlib import Path

from tests.cosim.conftest import make, selected

#: hbf-trace-v1 column of the Ingress row's ``queue_depth`` (model/trace.py).
_DEPTH = 10


def _ingress_depth_only(golden: str, rtl: str) -> bool:
    """The two traces differ only in the ``queue_depth`` of Ingress rows.

    Under contract 2 with several stacks the golden model takes an Ingress row's
    ``queue_depth`` (requests inside the stack) when the stack accepts the request from the
    route stage (v2 §2, ``ts + 1`` or later), but stamps the row with the system accept
    ``ts``; the co-simulation's recorder sees only the system port and counts at ``ts``.
    The trace format does not say which cycle counts (reported with §18 step 3; the port
    events are compared exactly either way)."""
    a = Path(golden).read_text().splitlines()
    b = Path(rtl).read_text().splitlines()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x != y:
            fx, fy = x.split(","), y.split(",")
            if not (len(fx) == len(fy) and fx[8] == "Ingress"
                    and fx[:_DEPTH] + fx[_DEPTH + 1:] == fy[:_DEPTH] + fy[_DEPTH + 1:]):
                return False
    return True


@pytest.mark.parametrize("scenario_key", selected())
def test_rtl_matches_golden_model(scenario_key, cosim_results):
    r = cosim_results[scenario_key]
    assert r["events_compared"] == r["expected_events"] > 0
    cfg = make(scenario_key).cfg()
    if cfg.contract == 2 and cfg.stacks > 1 and not r["traces_identical"] \
            and r["diff"].startswith("events agree but the hbf-trace-v1 files differ"):
        assert _ingress_depth_only(r["golden_trace"], r["rtl_trace"]), r["diff"]
    else:
        assert r["passed"], r["diff"]
        assert r["mismatches"] == 0
        assert r["traces_identical"], (r["golden_trace"], r["rtl_trace"])
    # statistics the ports do not show: the write buffer's flush counters per cause (§5)
    assert r["flushes"]["rtl"] == r["flushes"]["golden"]


def test_every_flush_cause_is_exercised(cosim_results):
    """Across the selected scenarios each flush cause occurs, so the counter comparison
    above checks all five."""
    seen = {c: 0 for c in ("full", "raw", "pressure", "deadline", "drain")}
    for r in cosim_results.values():
        for c, n in r["flushes"]["golden"].items():
            seen[c] += n
    assert all(seen.values()), seen


@pytest.mark.parametrize("scenario_key", selected())
def test_functional_property_holds_on_both_sides(scenario_key, cosim_results):
    r = cosim_results[scenario_key]
    expect = make(scenario_key).expect
    assert expect, "every scenario states what it shows"
    for side in ("golden_summary", "rtl_summary"):
        got = {k: r[side][k] for k in expect}
        assert got == expect, f"{side}: {got} != {expect}"
