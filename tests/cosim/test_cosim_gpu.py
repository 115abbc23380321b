"""The closed-loop GPU model inside the co-simulation (issue 4 item 1): its next requests
depend on the RTL's own responses, and a GPU run is compared as strictly as a request list."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from hbfsim.config import PAGE_BYTES
from hbfsim.cosim import runner, scenarios
from hbfsim.cosim.scenario import Scenario
from hbfsim.model.gpu import (GpuConfig, GpuError, GpuProgram, Kernel, Producer,
                              gpu_cycles_to_ticks, run_closed_loop)
from hbfsim.model.mapping import Mapper
from hbfsim.model.trace import read_trace
from tests.cosim.conftest import make, verilator_or_skip
from tests.cosim.test_cosim_cli import cli


def _chain_program(cfg, compute: int, ret: int) -> GpuProgram:
    """One warp, one request outstanding: every access waits for the previous response."""
    B = cfg.base_address
    acc = [("R" if i % 4 else "W", B + (i % 6) * PAGE_BYTES + 128 * (i // 6), 128)
           for i in range(24)]
    return GpuProgram(lambda: [Kernel("chain", [Producer(acc, bound=1, compute=compute)])],
                      "chain", gpu=GpuConfig(partitions=4, return_cycles=ret))


@pytest.mark.parametrize("rtl,compute,ret", [("A", 0, 0), ("A", 30, 7), ("ports", 30, 7)])
def test_each_request_follows_the_rtl_response_it_waits_for(rtl, compute, ret):
    """From the RTL side's own records: request i+1 is granted exactly 1 + return + compute
    ticks after the RTL answered request i (the partition FIFOs are empty: one warp), in the
    stack shape and in the channel shape (RTL set ``ports``, the CI's two-port build)."""
    verilator_or_skip()
    cfg = scenarios.config(rtl)
    sc = Scenario.from_program(f"chain-{rtl}-{compute}-{ret}", cfg,
                               _chain_program(cfg, compute, ret),
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


@pytest.mark.parametrize("scenario_key", ["gpu-ports"])
def test_channel_shape_grants_are_the_golden_models(scenario_key, cosim_results):
    """In the channel shape the RTL side's GPU grants per port (G5'): every request was
    granted in the tick, and on the port, the golden closed loop granted it, no port got two
    in one tick, several ticks had grants on both ports, and each was accepted on its port."""
    r = cosim_results[scenario_key]
    assert r["passed"], r["diff"]
    sc = make(scenario_key)
    cfg = sc.cfg()
    assert cfg.host_ports == "channel" and cfg.channels == 2
    gold = run_closed_loop(cfg, sc.gpu_program(), record=True, resp_ready=sc.ready())
    mapper = Mapper(cfg)

    def port(addr, op):
        q = mapper.stack_of((addr - cfg.base_address) // PAGE_BYTES)[1]
        return mapper.channel_of(q, op == "W")[0]

    want = {g.id: (g.arrival, port(g.addr, g.op), g.source) for g in gold.records}
    ingress = json.loads(Path(r["ingress"]).read_text())
    got = {row[0]: (row[5], port(row[2], row[1]), row[4]) for row in ingress}
    assert got == want
    per = Counter((a, k) for a, k, _ in got.values())
    assert max(per.values()) == 1
    assert sum(1 for n in Counter(a for a, _ in per).values() if n == 2) > 1
    rows = [row for row in read_trace(r["rtl_trace"]) if row["state"] == "Ingress"]
    assert {row["request_id"]: row["channel"] for row in rows} == \
        {i: k for i, (_, k, _) in got.items()}
    assert all(row["sim_cycle"] >= got[row["request_id"]][0] for row in rows)


def test_soak_runs_gpu_programs_in_the_channel_shape(capsys, monkeypatch):
    """Every other soak run is a closed-loop GPU program, in the channel shape too (here RTL
    set ``ports``, the CI's two-port build; the real soak has nine channel-shape rows,
    scenarios.soak_configs)."""
    verilator_or_skip()
    monkeypatch.setattr(scenarios, "soak_configs",
                        lambda: [scenarios.config("ports")])
    assert cli("cosim", "soak", "--requests", 700, "--seed", 5) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"cosim soak: [\d,]+ events compared, 0 mismatches, [\d.]+ s "
                        r"\(2 runs, 1 of them closed-loop GPU, 700 requests, seed 5\)", out[-1])
    assert re.search(r" ch channel .*: [\d,]+ events, 0 failing of 2 runs "
                     r"\(1 closed-loop GPU\)$", out[-2])


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
