"""Bad output paths: outputs equal to inputs or each other, directories, unwritable places,
links, a user's own files; and the cases that need a real process
(tests/bad_input/harness.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hbfsim.cli import main
from tests.bad_input.harness import MODEL_OK, ROW, SWEEP_GRID, H, _case, _run

# ---------------------------------------------------------------- output paths
OUT_BAD = [
    (["run", "--requests", "r.csv", "--trace", "r.csv"], {"r.csv": H + ROW},
     r"--trace 'r.csv' is the same file as the input --requests"),
    (["run", "--requests", "r.csv", "--stats-json", "r.csv"], {"r.csv": H + ROW},
     r"--stats-json 'r.csv' is the same file as the input --requests"),
    (["run", "--requests", "r.csv", "--stats-json", "./sub/../r.csv"],
     {"r.csv": H + ROW, "sub": None}, r"same file as the input --requests"),
    (["run", "--config", "c.toml", "--stats-json", "c.toml"], {"c.toml": "channels = 2\n"},
     r"--stats-json 'c.toml' is the same file as the input --config"),
    (["run", "--config", "c.toml"], {"c.toml": 'trace_file = "c.toml"\n'},
     r"trace_file 'c.toml' is the same file as the input --config"),
    (["run", "--config", "c.toml", "--requests", "r.csv"],
     {"c.toml": 'trace_file = "r.csv"\n', "r.csv": H + ROW},
     r"trace_file 'r.csv' is the same file as the input --requests"),
    (["run", "--config", "c.toml"], {"c.toml": 'trace_file = "d"\n', "d": None},
     r"trace_file 'd' is a directory"),
    (["run", "--trace", "o.csv", "--stats-json", "o.csv"], {},
     r"--stats-json 'o.csv' is the same file as --trace"),
    (["run", "--trace", "o.csv", "--stats-json", "./o.csv"], {},
     r"--stats-json './o.csv' is the same file as --trace"),
    (["replay", "tr.csv", "--trace", "tr.csv"], {"tr.csv": "x\n"},
     r"--trace 'tr.csv' is the same file as the input trace file"),
    (["replay", "tr.csv", "--stats-json", "tr.csv"], {"tr.csv": "x\n"},
     r"same file as the input trace file"),
    (["run", "--stats-json", "d"], {"d": None}, r"--stats-json 'd' is a directory"),
    (["run", "--trace", "d"], {"d": None}, r"--trace 'd' is a directory"),
    (["run", "--trace", "."], {}, r"--trace '.' is a directory"),
    (["run", "--stats-json", "no/such/dir/s.json"], {}, r"directory .* does not exist"),
    (["run", "--trace", "f.txt/t.csv"], {"f.txt": "x"}, r"Not a directory|does not exist"),
    (["run", "--stats-json", "/sys/hbfsim.json"], {}, r"directory '/sys' is not writable"),
    (["run", "--trace", "/proc/hbfsim.csv"], {}, r"directory '/proc' is not writable"),
    (["rtl", "emit", "-o", "d"], {"d": None}, r"-o 'd' is a directory"),
    (["rtl", "emit", "-o", "no/x.v"], {}, r"-o 'no/x.v': directory .* does not exist"),
    (["rtl", "emit", "-o", "c.toml", "--config", "c.toml"], {"c.toml": "channels = 2\n"},
     r"-o 'c.toml' is the same file as the input --config"),
    (["rtl", "stats", "--json", "d"], {"d": None}, r"--json 'd' is a directory"),
    (["run", "--workload", "llm-decode", "--model", "m.json", "--stats-json", "m.json"],
     {"m.json": MODEL_OK}, r"same file as the input --model"),
    (["run", "--workload", "llm-decode", "--param", "model=m.json", "--trace", "m.json"],
     {"m.json": MODEL_OK}, r"same file as the input --param model"),
    (["sweep", "g.toml", "--out", "o", "--workers", "1"], {"g.toml": SWEEP_GRID, "o": None,
                                                         "o/results.csv": None},
     r"results.csv.*(not a regular file|is a directory)"),
    (["sweep", "g.toml", "--out", "o", "--workers", "1"], {"g.toml": SWEEP_GRID, "o": None,
                                                         "o/points.jsonl": None},
     r"points.jsonl.*(not a regular file|is a directory)"),
    (["study", "media-saturation", "--quick", "--out", "o", "--workers", "1"],
     {"o": None, "o/plot.png": None}, r"o/plot.png' is a directory"),
    (["study", "placement", "--quick", "--out", "o", "--workers", "1"],
     {"o": None, "o/summary.json": None}, r"o/summary.json' is a directory"),
    (["study", "page-service", "--quick", "--out", "f.txt"], {"f.txt": "x"},
     r"output folder 'f.txt' is a file"),
]


@pytest.mark.parametrize("argv,files,match", OUT_BAD, ids=[f"out{i}" for i in range(len(OUT_BAD))])
def test_bad_output(tmp_path, monkeypatch, capsys, argv, files, match):
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


def test_output_hard_link_to_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "r.csv").write_text(H + ROW)
    os.link(tmp_path / "r.csv", tmp_path / "alias.csv")
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--trace", "alias.csv"],
          {}, r"same file as the input --requests")


def test_output_symlink_to_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "r.csv").write_text(H + ROW)
    (tmp_path / "link.csv").symlink_to("r.csv")
    _case(tmp_path, monkeypatch, capsys, ["run", "--requests", "r.csv", "--trace", "link.csv"],
          {}, r"same file as the input --requests")


def test_users_partial_file_survives(tmp_path, monkeypatch, capsys):
    rc, _, err, before, after = _run(tmp_path, monkeypatch, capsys,
                                     ["run", "--trace", "t.csv"], {"t.csv.partial": "mine"})
    assert rc == 0 and (tmp_path / "t.csv.partial").read_text() == "mine"
    assert sorted(after) == ["t.csv", "t.csv.partial"]


@pytest.mark.parametrize("argv", [
    ["run", "--stats-json", "/dev/null"],
    ["run", "--trace", "/dev/null", "--stats-json", "/dev/null"],
    ["replay", "t.csv", "--trace", "/dev/null"],
])
def test_dev_null_outputs(tmp_path, monkeypatch, capsys, argv):
    if "replay" in argv:
        assert main(["run", "--trace", str(tmp_path / "t.csv")]) == 0
        capsys.readouterr()
    rc, _, err, before, after = _run(tmp_path, monkeypatch, capsys, argv, {})
    assert rc == 0 and err == "" and before == after
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


# ---------------------------------------------------------------- real processes
def test_broken_pipe_is_quiet(tmp_path):
    p = subprocess.run(f"{sys.executable} -m hbfsim.cli run --list-workloads | head -1",
                       shell=True, capture_output=True, text=True, cwd=tmp_path)
    assert p.stdout.strip() and p.stderr == "", p.stderr



def test_cosim_wave_file_refused_before_the_build(tmp_path, monkeypatch, capsys):
    from hbfsim.cosim import runner

    if runner.skip_reason("verilator"):
        pytest.skip(runner.skip_reason("verilator"))
    monkeypatch.setattr(runner, "WAVES_DIR", tmp_path / "waves")
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("built despite the refusal"))
    _case(tmp_path, monkeypatch, capsys, ["cosim", "run", "--scenario", "coverage", "--waves"],
          {"waves": None, "waves/coverage.vcd": None}, r"waves '.*coverage.vcd' is a directory")
