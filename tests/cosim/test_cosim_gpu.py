"""The closed-loop GPU model inside the co-simulation (issue 4 item 1): its next requests
depend on the RTL's own responses, and a GPU run is compared as strictly as a request list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim import runner, scenarios
from hbfsim.cosim.scenario import Scenario
from hbfsim.model.gpu import (GpuConfig, GpuError, GpuProgram, Kernel, Producer,
                              gpu_cycles_to_ticks)
from hbfsim.model.trace import read_trace
from tests.cosim.conftest import verilator_or_skip


def _chain_program(cfg, compute: int, ret: int) -> GpuProgram:
    """One warp, one request outstanding: every access waits for the previous response."""
    B = cfg.base_address
    acc = [("R" if i % 4 else "W", B + (i % 6) * PAGE_BYTES + 128 * (i // 6), 128)
           for i in range(24)]
    return GpuProgram(lambda: [Kernel("chain", [Producer(acc, bound=1, compute=compute)])],
                      "chain", gpu=GpuConfig(partitions=4, return_cycles=ret))


@pytest.mark.parametrize("compute,ret", [(0, 0), (30, 7)])
def test_each_request_follows_the_rtl_response_it_waits_for(compute, ret):
    """From the RTL side's own records: request i+1 is granted exactly 1 + return + compute
    ticks after the RTL answered request i (the partition FIFOs are empty: one warp)."""
    verilator_or_skip()
    cfg = scenarios.config()
    sc = Scenario.from_program(f"chain-{compute}-{ret}", cfg, _chain_program(cfg, compute,
                                                                              ret),
                               resp_ready=0.7, seed=4, expect={"responses": 24})
    (r,) = runner.run([sc])
    assert r["passed"], r["diff"]
    assert r["closed_loop"] and r["traces_identical"]
    ingress = json.loads(Path(r["ingress"]).read_text())
    done = {row["request_id"]: row["sim_cycle"] for row in read_trace(r["rtl_trace"])
            if row["state"] == "Completed"}
    assert [row[0] for row in ingress] == list(range(24))
    gap = 1 + gpu_cycles_to_ticks(ret, cfg) + gpu_cycles_to_ticks(compute, cfg)
    for prev, row in zip(ingress, ingress[1:]):
        assert row[5] == done[prev[0]] + gap
    assert r["gpu_kernels"][0]["end"] == done[23]


def test_a_gpu_run_reports_the_first_disagreement():
    """The golden model's NAND is slower: the RTL answers first, and the GPU runs on."""
    verilator_or_skip()
    sc = scenarios.make("gpu-mshr-grid", 1, 64)
    sc.name = "gpu-fault"
    sc.golden_overrides = {"t_read_us": 0.2}
    (r,) = runner.run([sc])
    assert not r["passed"] and r["mismatches"] == 1
    assert "stream 'resp'" in r["diff"]
    assert "the golden model has no resp event in cycle" in r["diff"]


def test_program_scenarios_are_validated():
    cfg = scenarios.config()
    prog = _chain_program(cfg, 0, 0)
    sc = Scenario.from_program("ok", cfg, prog)
    assert sc.n_requests == 24 and sc.requests == []
    with pytest.raises(ValueError, match="requests or a program, not both"):
        Scenario("both", cfg.as_dict(), [[0, "R", cfg.base_address, 32, 0, 0]],
                 program=sc.program).validate()
    bad = json.loads(json.dumps(sc.program))
    bad["kernels"][0]["producers"][0]["accesses"][0][1] = cfg.base_address - 4096
    with pytest.raises(ValueError, match="address"):
        Scenario("bad-addr", cfg.as_dict(), [], program=bad).validate()
    bad = json.loads(json.dumps(sc.program))
    bad["gpu"]["partitions"] = 300
    with pytest.raises(ValueError, match="partitions 300"):
        Scenario("wide", cfg.as_dict(), [], program=bad).validate()
    bad["gpu"]["partitions"] = 0
    with pytest.raises(GpuError, match="partitions"):
        Scenario("zero", cfg.as_dict(), [], program=bad).validate()
    with pytest.raises(ValueError, match="no accesses"):
        Scenario.from_program("empty", cfg, GpuProgram([Kernel("k", [])]))
    with pytest.raises(ValueError, match="at most"):
        scenarios.make("gpu-mshr-grid", 1, 10 ** 6)


def test_waves_name_the_requests_a_gpu_program_created():
    """A GPU run's requests exist only once the run made them: the sidecar keeps them, so
    ``hbfsim waves request`` can read any one back from the VCD."""
    verilator_or_skip()
    from hbfsim.cosim.waves import WaveFile

    sc = scenarios.make("gpu-backpressure", 2, 40)
    sc.name = "gpu-waves-test"
    (r,) = runner.run([sc], waves=True)
    assert r["passed"], r["diff"]
    ingress = json.loads(Path(r["ingress"]).read_text())
    w = WaveFile(r["vcd"])
    for row in (ingress[0], ingress[-1]):
        life = w.lifecycle(row[0])
        assert (life["op"], life["addr"], life["bytes"], life["arrival"]) == \
            (row[1], row[2], row[3], row[5])


def test_coarse_coverage_scenarios_need_aligned_writes():
    """With 32-byte coverage the RTL equals the byte-exact model only on sector-aligned
    writes: a scenario with any other write is refused, naming it."""
    cfg = scenarios.config()
    B = cfg.base_address
    rows = [[0, "W", B + 32, 64, 0, 0], [1, "W", B + 4096 + 8, 32, 0, 1]]
    Scenario("aligned", cfg.as_dict(), rows[:1], sector_bytes=32).validate()
    with pytest.raises(ValueError, match=r"request 1: a 32-byte write at 0x\w+ is not aligned "
                                         r"to sector_bytes = 32"):
        Scenario("unaligned", cfg.as_dict(), rows, sector_bytes=32).validate()
    Scenario("exact", cfg.as_dict(), rows).validate()          # byte-exact: anything goes
    prog = GpuProgram(lambda: [Kernel("k", [Producer([("W", B + 16, 32)])])])
    with pytest.raises(ValueError, match="GPU access 0: a 32-byte write"):
        Scenario.from_program("gpu-unaligned", cfg, prog, sector_bytes=32)
