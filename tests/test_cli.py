"""The hbfsim command: the default run, files in and out, and every class of bad input."""

import json
import subprocess
import sys

import pytest


def hbfsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hbfsim.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_default_run_shows_the_mechanisms():
    p = hbfsim("run")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "embedded default workload" in out
    for key in ("MSHR hits", "page programs", "buffer hits", "write flushes"):
        assert key in out


def test_header_names_the_pipeline_and_its_ports(tmp_path):
    """Every tick figure depends on the controller and its ports, so the header names them:
    the default (a port per channel, a pool per channel), shared pools and the stack shape;
    a retired controller's key is refused with one line pointing to docs/history.md, and
    nothing is written."""
    p = hbfsim("run")
    assert p.returncode == 0, p.stderr
    assert "registered pipeline (a port per channel, a pool per channel), memory clock" \
        in p.stdout
    shared = tmp_path / "shared.toml"
    shared.write_text('pools = "stack"\n')
    p = hbfsim("run", "--config", str(shared))
    assert p.returncode == 0, p.stderr
    assert "registered pipeline (a port per channel, shared pools), memory clock" in p.stdout
    cfg = tmp_path / "stack.toml"
    cfg.write_text('host_ports = "stack"\n')
    p = hbfsim("run", "--config", str(cfg))
    assert p.returncode == 0, p.stderr
    assert "registered pipeline (one port per stack), memory clock" in p.stdout
    cfg.write_text('pipeline = "standard"\n')
    p = hbfsim("run", "--config", str(cfg), "--stats-json", str(tmp_path / "s.json"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "'pipeline'" in p.stderr and "docs/history.md" in p.stderr
    assert not (tmp_path / "s.json").exists()


def test_run_csv_with_trace_and_stats(tmp_path):
    req = tmp_path / "r.csv"
    req.write_text("tick,op,address,bytes,source\n"
                   "0,R,0x4000000000,32,0\n1,R,274877906976,32,1\n"
                   "2,W,0x4000010000,4096,2\n")
    tr, st = tmp_path / "t.csv", tmp_path / "s.json"
    p = hbfsim("run", "--requests", str(req), "--trace", str(tr), "--stats-json", str(st))
    assert p.returncode == 0, p.stderr
    s = json.loads(st.read_text())
    for key in ("requests", "completions", "read_requests", "write_requests", "page_reads",
                "page_programs", "block_erases", "mshr_hits", "page_buffer_hits",
                "page_cache_hits", "requested_bytes", "media_bytes", "read_amplification",
                "first_arrival_tick", "last_completion_tick", "media_utilization",
                "array_bandwidth_gbs", "errors"):
        assert key in s
    for key in ("read_latency_ticks", "write_latency_ticks"):
        assert {"p50", "p95", "p99"} <= set(s[key])
    assert s["requests"] == s["completions"] == 3 and s["mshr_hits"] == 1
    v = hbfsim("trace", "validate", str(tr))
    assert v.returncode == 0 and "3 requests" in v.stdout
    r = hbfsim("replay", str(tr))
    assert r.returncode == 0, r.stderr


def test_config_show_round_trips(tmp_path):
    p = hbfsim("config", "show", "--profile", "ocp-grade3")
    assert p.returncode == 0 and "channels = 16" in p.stdout
    f = tmp_path / "c.toml"
    f.write_text(p.stdout)
    q = hbfsim("config", "show", "--config", str(f))
    assert q.returncode == 0 and q.stdout == p.stdout


BAD_CSV = [
    ("tick,op,addr,bytes,source\n", "line 1: header must be"),
    ("tick,op,address,bytes,source\n0,X,0x4000000000,32,0\n", "line 2: op must be R or W"),
    ("tick,op,address,bytes,source\n0,R,0xZZ,32,0\n", "line 2: address '0xZZ'"),
    ("tick,op,address,bytes,source\n0,R,0x10,32,0\n", "line 2: address 0x10 is outside"),
    ("tick,op,address,bytes,source\n0,R,0x4000000ff0,32,0\n", "line 2: .*crosses a 4 KiB"),
    ("tick,op,address,bytes,source\n0,R,0x4000000000,32\n", "line 2: expected 5 fields"),
    ("tick,op,address,bytes,source\n-1,R,0x4000000000,32,0\n", "line 2: tick must be"),
]


@pytest.mark.parametrize("text,match", BAD_CSV)
def test_bad_requests_exit_2_one_line_no_output(tmp_path, text, match):
    import re

    req = tmp_path / "r.csv"
    req.write_text(text)
    tr, st = tmp_path / "t.csv", tmp_path / "s.json"
    p = hbfsim("run", "--requests", str(req), "--trace", str(tr), "--stats-json", str(st))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(match, lines[0]), p.stderr
    assert "Traceback" not in p.stderr
    assert not tr.exists() and not st.exists()
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("args,match", [
    (["run", "--profile", "nope"], "profile must be one of"),
    (["run", "--config", "/nonexistent.toml"], "cannot read configuration"),
    (["run", "--requests", "/nonexistent.csv"], "cannot read requests"),
    (["run", "--stats-json", "/nonexistent/dir/s.json"], "does not exist"),
    (["trace", "validate", "/nonexistent.csv"], "cannot read trace"),
    (["replay", "/nonexistent.csv"], "cannot read trace"),
    (["frobnicate"], "invalid choice"),
    (["run", "--trace-level", "7"], "invalid choice"),
])
def test_bad_usage_exit_2_one_line(args, match):
    p = hbfsim(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], p.stderr


def test_bad_config_value_names_key(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("channels = 5\n")
    p = hbfsim("run", "--config", str(f))
    assert p.returncode == 2 and "channels must be 1, 2, 4, 8 or 16, not 5" in p.stderr


def test_trace_validate_rejects_reordered(tmp_path):
    from hbfsim.model.trace import COLUMNS

    f = tmp_path / "t.csv"
    cols = list(COLUMNS)
    cols[3], cols[4] = cols[4], cols[3]
    f.write_text(",".join(cols) + "\n")
    p = hbfsim("trace", "validate", str(f))
    assert p.returncode == 2 and "reordered" in p.stderr


def test_run_workload_closed_loop(tmp_path):
    st = tmp_path / "s.json"
    p = hbfsim("run", "--workload", "shared-staging", "--stats-json", str(st))
    assert p.returncode == 0, p.stderr
    s = json.loads(st.read_text())
    assert s["mshr_hits"] == 31 and s["page_reads"] == 1 and s["gpu"]["requests"] == 32
    p = hbfsim("run", "--workload", "llm-decode", "--param", "scale=64", "--param", "layers=1")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("args,match", [
    (["run", "--workload", "nope"], "workload must be one of"),
    (["run", "--workload", "conservation", "--param", "bogus=1"], "bogus"),
    (["run", "--workload", "conservation", "--param", "noequals"], "KEY=VALUE"),
    (["run", "--param", "a=1"], "need --workload"),
])
def test_bad_workload_args(args, match):
    p = hbfsim(*args)
    assert p.returncode == 2 and match in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_list_workloads_shows_parameters_with_defaults_and_meaning(capsys):
    import inspect

    from hbfsim.cli import main
    from hbfsim.model.workloads import WORKLOADS

    assert main(["run", "--list-workloads"]) == 0
    out = capsys.readouterr().out
    for name, fn in WORKLOADS.items():
        assert f"\n{name.replace('_', '-')}: " in "\n" + out
        for p in list(inspect.signature(fn).parameters.values())[1:]:
            line = next(x for x in out.splitlines() if f"--param {p.name}=" in x)
            assert len(line.split(None, 2)) == 3, f"{p.name} has no meaning"


def test_unknown_param_lists_the_valid_ones(capsys):
    from hbfsim.cli import main

    assert main(["run", "--workload", "conservation", "--param", "scale=2"]) == 2
    err = capsys.readouterr().err
    assert "has no parameter 'scale'" in err and "requests, nbytes, page_stride, sms" in err


def test_bad_llm_model_is_a_one_line_usage_error(tmp_path):
    cfg = tmp_path / "tiny" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"model_type": "qwen3", "num_hidden_layers": 2,
                               "hidden_size": 64, "num_attention_heads": 4}))
    for model, match in (("gpt-17", "model must be one of qwen3-1.7b"),
                         (str(cfg), f"model config '{cfg}' lacks key 'intermediate_size'"),
                         ("qwen3-235b-a22b", "must be a dense GQA transformer")):
        p = hbfsim("run", "--workload", "llm-decode", "--model", model)
        assert p.returncode == 2 and match in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
