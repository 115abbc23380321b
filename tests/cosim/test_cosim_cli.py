"""``cosim run/soak`` and ``waves list/request/check`` through :func:`register` (issue 4
item 4), with the parser class of hbfsim.cli."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hbfsim.cli import UsageError, _Parser
from hbfsim.cosim import scenarios
from hbfsim.cosim.cli import register
from tests.cosim.conftest import full_suite, verilator_or_skip


def cli(*argv) -> int:
    ap = _Parser(prog="hbfsim")
    register(ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser))
    a = ap.parse_args([str(x) for x in argv])
    return a.func(a)


def test_run_ends_with_events_and_mismatches(capsys):
    verilator_or_skip()
    assert cli("cosim", "run", "--scenario", "shared-staging", "--seed", 3) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"cosim run shared-staging: \d+ events compared, 0 mismatches", last)


def test_run_from_a_request_csv(tmp_path, capsys):
    verilator_or_skip()
    cfg = scenarios.config()
    toml = tmp_path / "c.toml"
    toml.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in cfg.as_dict().items()
                            if k not in ("explicit_map", "profile")))
    csv = tmp_path / "reqs.csv"
    b = cfg.base_address
    csv.write_text("tick,op,address,bytes,source\n" + "".join(
        f"{i},{'W' if i % 4 == 0 else 'R'},{b + (i % 5) * 4096 + 64 * (i % 7):#x},64,{i % 3}\n"
        for i in range(40)))
    assert cli("cosim", "run", "--csv", csv, "--config", toml, "--resp-ready", 0.7) == 0
    out = capsys.readouterr().out
    assert re.search(r"cosim run reqs: \d+ events compared, 0 mismatches\n$", out)


@pytest.mark.parametrize("argv,message", [
    (["cosim", "run", "--scenario", "nope"], "--scenario must be one of"),
    (["cosim", "run", "--sim", "xsim"], "--sim must be one of"),
    (["cosim", "run", "--window", "1:5"], "--window goes with --waves"),
    (["cosim", "run", "--waves", "--window", "9:5"], "--window must be A:B"),
    (["cosim", "run", "--requests", "0"], "--requests must be at least 1"),
    (["cosim", "run", "--config", "x.toml"], "go with --csv"),
    (["cosim", "soak", "--requests", "0"], "--requests must be at least 1"),
    (["waves", "list", "missing.vcd"], "cannot read VCD"),
])
def test_bad_input_is_one_line_value_error(argv, message):
    with pytest.raises(ValueError) as e:
        cli(*argv)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_usage_errors_go_through_the_parser_class():
    with pytest.raises(UsageError):
        cli("cosim", "run", "--seed", "x")
    with pytest.raises(UsageError):
        cli("waves", "request", "f.vcd")  # --id is required


def test_soak_reports_events_mismatches_and_time(capsys, monkeypatch):
    verilator_or_skip()
    # one configuration (an RTL set the scenario suite builds anyway) keeps this test short;
    # the real soak uses scenarios.soak_configs(): every policy, 1 to 16 channels; --shape
    # leaves the channel-shape one out (it is never built)
    monkeypatch.setattr(scenarios, "soak_configs",
                        lambda: [scenarios.config(host_ports="channel"), scenarios.config()])
    assert cli("cosim", "soak", "--requests", 700, "--seed", 5, "--shape", "stack") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "2 runs over 1 configurations" in lines[0], lines[0]
    last = lines[-1]
    # the configuration's line, printed as its runs finished (before the totals)
    assert re.fullmatch(r"  1 x +\d+ ch stack .* pools=stack .*: [\d,]+ events, "
                        r"0 failing of 2 runs "
                        r"\(1 closed-loop GPU\)", lines[-2]), lines[-2]
    assert re.fullmatch(r"cosim soak: [\d,]+ events compared, 0 mismatches, [\d.]+ s "
                        r"\(2 runs, 1 of them closed-loop GPU, 700 requests, seed 5\)", last)


def test_soak_configurations_cover_every_mode_in_both_shapes():
    """The soak's eighteen configurations: every scheduler, read mode, write policy,
    merging setting and multi-plane mode, 1 to 16 channels and two stacks, in each shape."""
    from hbfsim.config import SCHEDULERS

    cfgs = scenarios.soak_configs()
    assert len(cfgs) == 18
    for shape in ("stack", "channel"):
        mine = [c for c in cfgs if c.host_ports == shape]
        assert len(mine) == 9
        assert {c.scheduler for c in mine} >= set(SCHEDULERS)
        assert {c.read_mode for c in mine} == {"demand", "aggregation"}
        assert {c.write_timeout_policy for c in mine} == {"strict", "partial"}
        assert {c.mshr_merge for c in mine} == {True, False}
        assert {c.multiplane for c in mine} == {"off", "page", "megaplane"}
        assert {c.channels for c in mine} >= {1, 2, 4, 8, 16}
        assert {c.stacks for c in mine} == {1, 2}     # in the channel shape S * C ports


def test_soak_traffic_walks_megapages_on_a_multiplane_configuration():
    import random

    cfg = scenarios.config("mp-rich")
    spec = scenarios.soak_traffic(random.Random(1), cfg, 400)
    assert len(spec) == 400
    M, G = cfg.megaplane_planes, cfg.subarrays_per_channel // cfg.megaplane_planes
    megapage = {q * cfg.stacks + s: (s, ch, g, row) for s in range(cfg.stacks)
                for ch in range(cfg.channels) for g in range(G) for row in range(3)
                for q in scenarios._megapage(cfg, ch, g, row)}
    assert all(page in megapage for _, page, *_ in spec)
    # some burst names every plane of a megapage (so a command can group all M planes)
    seen = {}
    for op, page, *_ in spec:
        seen.setdefault((op, megapage[page]), set()).add(page)
    assert max(len(v) for v in seen.values()) == M
    # without multi-plane the soak keeps its random page traffic (same draws as before)
    r1, r2 = random.Random(7), random.Random(7)
    assert scenarios.soak_traffic(r1, scenarios.config(), 50) == scenarios.workload(
        r2, 50, pages=r2.choice([4, 8, 16, 32]), reads=r2.choice([0.3, 0.6, 0.9]),
        gap=r2.choice([1, 3, 10]))


@pytest.fixture(scope="module")
def waves_run():
    verilator_or_skip()
    out = Path(__file__).resolve().parents[2] / "waves"
    assert cli("cosim", "run", "--scenario", "read-after-write", "--waves") == 0
    vcd = out / "read-after-write.vcd"
    return vcd, json.loads(vcd.with_suffix(".json").read_text())


def test_waves_files_written(waves_run):
    vcd, side = waves_run
    assert vcd.exists() and vcd.with_suffix(".gtkw").exists()
    assert vcd.stat().st_size < 2_000_000
    gtkw = vcd.with_suffix(".gtkw").read_text()
    assert "[dumpfile]" in gtkw and "req__payload.id" in gtkw and "cmd__1.tag.index" in gtkw


def test_waves_list_and_request(waves_run, capsys):
    vcd, side = waves_run
    assert cli("waves", "list", vcd) == 0
    out = capsys.readouterr().out
    assert "35 requests accepted, 35 answered" in out and "0x4000002000" in out
    # request 32 reads page 2 after 32 writes to it: it waits for their PROGRAM
    assert cli("waves", "request", vcd, "--id", 32) == 0
    out = capsys.readouterr().out
    assert re.search(r"accept: +cycle \d+", out)
    assert "MSHR miss" in out and re.search(r"media: +READ issued cycle \d+", out)
    assert re.search(r"response: +cycle \d+ .*mshr_hit 0", out)
    # request 33 writes half of page 9: the read that follows flushes it, strict error
    assert cli("waves", "request", vcd, "--id", 33) == 0
    out = capsys.readouterr().out
    assert "strict-policy error" in out and "error 1" in out
    with pytest.raises(ValueError, match="no such request"):
        cli("waves", "request", vcd, "--id", 999)


def test_waves_check_against_traces(waves_run, capsys, tmp_path):
    vcd, side = waves_run
    assert cli("waves", "check", vcd, "--trace", side["golden_trace"]) == 0
    assert "agree: 35 requests" in capsys.readouterr().out
    rows = Path(side["rtl_trace"]).read_text().splitlines()
    bad = tmp_path / "bad.csv"
    cols = rows[1].split(",")
    cols[0] = str(int(cols[0]) + 1)
    bad.write_text("\n".join([rows[0], ",".join(cols)] + rows[2:]) + "\n")
    assert cli("waves", "check", vcd, "--trace", bad) == 1
    assert "disagree" in capsys.readouterr().out


def test_waves_of_a_multiplane_run(capsys):
    """`waves` reads a multi-plane run (docs/timing-contract.md §7a MP2, MP7): one
    full megapage per megaplane, so a request's command is its megaplane's group."""
    # a waves build of its own (about 28 s on two cores): with HBFSIM_COSIM_FULL=1 only, to
    # keep CI under 15 minutes; CI runs the multi-plane scenarios without waves (FAST_V2)
    if not full_suite():
        pytest.skip("a waves build of the multi-plane RTL: set HBFSIM_COSIM_FULL=1")
    verilator_or_skip()
    assert cli("cosim", "run", "--scenario", "mp-full-megaplane", "--waves") == 0
    vcd = Path(__file__).resolve().parents[2] / "waves" / "mp-full-megaplane.vcd"
    side = json.loads(vcd.with_suffix(".json").read_text())
    gtkw = vcd.with_suffix(".gtkw").read_text()
    assert "cmd__0.planes" in gtkw and "cpl__0.buffer_hit" in gtkw and ".tag." not in gtkw
    assert cli("waves", "check", vcd, "--trace", side["golden_trace"]) == 0
    capsys.readouterr()
    assert cli("waves", "request", vcd, "--id", 0) == 0
    out = capsys.readouterr().out
    m = re.search(r"media: +READ issued cycle (\d+) .*megaplane (\d+), planes (0x[0-9a-f]+), "
                  r"row (\d+)", out)
    # request 0 reads row 1 of megaplane 0 on channel 0; both planes issue as one command
    assert m, out
    assert (int(m.group(2)), int(m.group(3), 16), int(m.group(4))) == (0, 0b11, 1), out
    c = re.search(r"completion: cycle (\d+)", out)
    assert c and int(c.group(1)) > int(m.group(1))
    assert re.search(r"response: +cycle \d+", out)


def test_waves_window_keeps_only_those_cycles(capsys):
    verilator_or_skip()
    assert cli("cosim", "run", "--scenario", "coverage", "--waves", "--window", "10:30") == 0
    vcd = Path(__file__).resolve().parents[2] / "waves" / "coverage.vcd"
    assert cli("waves", "list", vcd) == 0
    out = capsys.readouterr().out
    assert "cycles 10..30" in out


def test_run_from_a_trace_replay_and_a_workload(tmp_path, capsys):
    """Every hbfsim request source can drive the RTL: trace replay and named workloads (a
    GPU program runs closed loop on the golden model; its ingress is replayed)."""
    verilator_or_skip()
    from hbfsim.cli import main as hbfsim_main

    toml = tmp_path / "c.toml"
    toml.write_text("channels = 2\nsubarrays_per_channel = 4\nmshr_entries = 8\n"
                    "write_buffer_entries = 4\nadmission = 16\nqueue_depth = 4\n"
                    "capacity_bytes = 33554432\n")
    trace = tmp_path / "t.csv"
    assert hbfsim_main(["run", "--config", str(toml), "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert cli("cosim", "run", "--replay", trace, "--config", toml) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"cosim run t: [\d,]+ events compared, 0 mismatches", last)
    assert cli("cosim", "run", "--workload", "shared-staging", "--config", toml) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"cosim run shared-staging: [\d,]+ events compared, 0 mismatches", last)
    with pytest.raises(ValueError, match="at most one of"):
        cli("cosim", "run", "--replay", trace, "--workload", "conservation")
