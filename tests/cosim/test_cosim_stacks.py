"""Several stacks in co-simulation: the system layer (rtl/system.py, contract §2) against
HbfSystem with one Media per stack, media ports numbered ``stack * channels + channel``."""

from __future__ import annotations

import pytest

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim import runner, scenarios
from hbfsim.model.trace import read_trace
from tests.cosim.conftest import full_suite, verilator_or_skip


def test_waves_follow_a_request_into_the_second_stack():
    # a waves build of its own (about 40 s on two cores): with HBFSIM_COSIM_FULL=1 only, to
    # keep CI under 15 minutes; CI checks waves on one stack (test_cosim_cli.py)
    if not full_suite():
        pytest.skip("a waves build of two stacks: set HBFSIM_COSIM_FULL=1")
    verilator_or_skip()
    from hbfsim.cosim.waves import WaveFile

    sc = scenarios.make("mix-2stacks", 3, 80)
    sc.name = "stacks-waves-test"
    (r,) = runner.run([sc], waves=True)
    assert r["passed"], r["diff"]
    w = WaveFile(r["vcd"])
    cfg = w.cfg
    # interleaved stack select: odd pages live in stack 1, whose ports follow stack 0's
    rid = next(row[0] for row in w.requests
               if row[1] == "R" and (row[2] - cfg.base_address) // PAGE_BYTES % 2)
    life = w.lifecycle(rid)
    assert life["channel"] >= cfg.channels
    assert life["response"] is not None
    assert life["command"] is not None or life["response"]["mshr_hit"]
    checked, problem = w.check_trace(read_trace(r["rtl_trace"]))
    assert problem is None and checked == 80
