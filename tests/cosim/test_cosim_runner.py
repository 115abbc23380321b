"""Builds are cached per RTL parameter set; the scoreboard reports the first disagreement
readably; Icarus runs where it is installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hbfsim.cosim import runner, scenarios
from tests.cosim.conftest import verilator_or_skip


def test_build_is_cached_per_rtl_parameter_set():
    verilator_or_skip()
    a = runner.build(scenarios.config())
    again = runner.build(scenarios.config())
    assert again.cached and again.key == a.key and again.seconds < 5
    # media timing is not an RTL parameter: same Verilog, same build
    slow = runner.build(scenarios.config(t_read_us=15.0))
    assert slow.key == a.key
    other = runner.build(scenarios.config("C"))
    assert other.key != a.key
    assert (a.build_dir / "hbf_controller").exists()


def test_unsupported_configuration_is_refused_by_name():
    with pytest.raises(ValueError, match="page_cache_pages"):
        runner.build(scenarios.config(page_cache_pages=16))
    with pytest.raises(ValueError, match="--sim must be one of"):
        runner.build(scenarios.config(), sim="xsim")


@pytest.mark.parametrize("golden_t_read_us,stream_text", [
    # the RTL side's media (tR 85 ticks) answers before the model's (tR 170)
    (0.2, "the golden model has no resp event in cycle"),
    # the model's media (tR 43) answers first: the RTL misses the expected response
    (0.05, "the RTL produced no resp event in cycle"),
])
def test_first_mismatch_is_reported_with_a_readable_diff(golden_t_read_us, stream_text):
    verilator_or_skip()
    sc = scenarios.make("shared-staging")
    sc.name = f"fault-{golden_t_read_us}"
    sc.golden_overrides = {"t_read_us": golden_t_read_us}
    (r,) = runner.run([sc])
    assert not r["passed"] and r["mismatches"] == 1
    diff = r["diff"]
    assert "co-simulation mismatch in scenario" in diff and "stream 'resp'" in diff
    assert "expected (golden model):" in diff and "actual   (RTL):" in diff
    assert "VCD time" in diff and "last events, golden model" in diff
    assert stream_text in diff
    # everything before the fault matched: the accepts and the one READ command
    assert r["events_compared"] >= 33


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_each_simulator_runs_a_scenario(sim):
    reason = runner.skip_reason(sim)
    if reason:
        pytest.skip(reason)
    (r,) = runner.run([scenarios.make("coverage")], sim=sim)
    assert r["passed"], r["diff"]
    assert r["traces_identical"]


def test_raw_harness_refuses_what_it_cannot_answer(tmp_path):
    # bench/bench_cosim.py's plain C++ harness answers per-subarray commands of one stack
    from hbfsim.cosim import raw, scenarios

    with pytest.raises(ValueError, match="multiplane = 'megaplane'.*needs multiplane = 'off'"):
        raw.build_raw(scenarios.config("mp-megaplane"), [], root=tmp_path)
    with pytest.raises(ValueError, match="stacks = 2"):
        raw.build_raw(scenarios.config("A", stacks=2), [], root=tmp_path)


def test_groups_run_at_once_give_the_results_of_one_after_another(monkeypatch):
    """``run`` runs its RTL builds on several threads (one per core, HBFSIM_COSIM_JOBS): the
    events compared and both sides' traces are those of a run that takes them in turn."""
    verilator_or_skip()
    # three RTL sets of the CI subset (A, C, 16 channels): built once per session; 32
    # requests each, which is enough to interleave three simulations
    keys = ["burst", "merging-off", "conservation-16ch"]
    serial = {}
    for width in ("1", "3"):
        monkeypatch.setenv(runner.JOBS_ENV, width)
        rs = runner.run([scenarios.make(k, n=32) for k in keys])
        assert [r["name"] for r in rs] == keys
        assert len({r["build_key"] for r in rs}) == 3
        assert all(r["passed"] and r["mismatches"] == 0 for r in rs)
        assert all(Path(r["rtl_trace"]).stat().st_size > 0 for r in rs)
        got = {r["name"]: (r["events_compared"], Path(r["golden_trace"]).read_text(),
                           Path(r["rtl_trace"]).read_text()) for r in rs}
        if not serial:
            serial = got
    assert got == serial


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_bad_job_count_is_refused_by_name(monkeypatch, text):
    monkeypatch.setenv(runner.JOBS_ENV, text)
    with pytest.raises(ValueError, match="HBFSIM_COSIM_JOBS"):
        runner.jobs()


@pytest.mark.parametrize("text", ["-O3", "O0", "fast"])
def test_bad_optimisation_level_is_refused_by_name(monkeypatch, text):
    monkeypatch.setenv(runner.OPT_ENV, text)
    with pytest.raises(ValueError, match="HBFSIM_COSIM_OPT must be one of"):
        runner.opt_level()
    with pytest.raises(ValueError, match="C\\+\\+ optimisation level"):
        runner.toolchain.make_flags(None, text)


def test_optimisation_level_reaches_make_and_names_its_own_build(monkeypatch, tmp_path):
    """Builds at two levels are two cache entries, and make gets the level for the design
    (the Verilog and the compiler are replaced here: only the key and the hand-over are
    checked)."""
    verilator_or_skip()
    import hbfsim.rtl.emit

    monkeypatch.setattr(hbfsim.rtl.emit, "emit_verilog",
                        lambda cfg, **kw: "module hbf_controller;\nendmodule\n")
    seen = []

    def compile_(sim, cfg, bdir, vfile, flags, opt, waves, root, verbose):
        seen.append((opt, runner.toolchain.make_flags(None, opt)))

    monkeypatch.setattr(runner, "_compile", compile_)
    keys = []
    for level in ("-O0", "-Os"):
        monkeypatch.setenv(runner.OPT_ENV, level)
        keys.append(runner.build(scenarios.config(), root=tmp_path).key)
    assert keys[0] != keys[1]
    assert [o for o, _ in seen] == ["-O0", "-Os"]
    assert "OPT_FAST=-O0 OPT_SLOW=-O0" in seen[0][1] and "OPT_GLOBAL=-Os" in seen[0][1]


def test_threads_share_an_environment_value_and_wait_for_another(monkeypatch):
    import threading
    import time

    monkeypatch.delenv("HBFSIM_TEST_VAR", raising=False)
    seen = []
    inside = threading.Event()
    leave = threading.Event()

    def first():
        with runner._environ(HBFSIM_TEST_VAR="a"):
            inside.set()
            leave.wait(5)
            seen.append(("first leaves", os.environ.get("HBFSIM_TEST_VAR")))

    def other():
        inside.wait(5)
        with runner._environ(HBFSIM_TEST_VAR="b"):  # waits until "a" is released
            seen.append(("other", os.environ.get("HBFSIM_TEST_VAR")))

    t1, t2 = threading.Thread(target=first), threading.Thread(target=other)
    t1.start()
    t2.start()
    inside.wait(5)
    with runner._environ(HBFSIM_TEST_VAR="a"):       # the same value: shared at once
        seen.append(("same", os.environ.get("HBFSIM_TEST_VAR")))
    time.sleep(0.2)
    assert seen == [("same", "a")]                   # "b" is still waiting
    leave.set()
    t1.join(5)
    t2.join(5)
    assert seen == [("same", "a"), ("first leaves", "a"), ("other", "b")]
    assert "HBFSIM_TEST_VAR" not in os.environ       # restored by the last holder
