"""The RTL against the golden model on every scenario: all events equal, traces identical,
and the functional property each scenario demonstrates (issue 4 item 4)."""

from __future__ import annotations

import pytest

from tests.cosim.conftest import selected


@pytest.mark.parametrize("scenario_key", selected())
def test_rtl_matches_golden_model(scenario_key, cosim_results):
    r = cosim_results[scenario_key]
    assert r["passed"], r["diff"]
    assert r["mismatches"] == 0
    assert r["events_compared"] == r["expected_events"] > 0
    assert r["traces_identical"], (r["golden_trace"], r["rtl_trace"])


@pytest.mark.parametrize("scenario_key", selected())
def test_functional_property_holds_on_both_sides(scenario_key, cosim_results):
    from tests.cosim.conftest import make

    r = cosim_results[scenario_key]
    expect = make(scenario_key).expect
    assert expect, "every scenario states what it shows"
    for side in ("golden_summary", "rtl_summary"):
        got = {k: r[side][k] for k in expect}
        assert got == expect, f"{side}: {got} != {expect}"
