"""``hbfsim sweep`` with kind ``serve``: points are serving runs, equal to direct ones."""

import csv

import pytest

from hbfsim.cli import main
from hbfsim.serve.run import run_serving

WL = "agentic-qwen32b:scale=0.0008"
GRID = f"""
[sweep]
name = "s"
kind = "serve"
workloads = ["{WL}"]
[base]
hbf_model = "constant"
hbf = 0
[grid]
hbm = [8, 4]
scheduler = ["fcfs", "buffered"]
"""


def test_serve_points_equal_direct_runs(tmp_path, capsys):
    g = tmp_path / "g.toml"
    g.write_text(GRID)
    out = tmp_path / "out"
    assert main(["sweep", str(g), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [(int(r["hbm"]), r["scheduler"]) for r in table] == [
        (8, "fcfs"), (8, "buffered"), (4, "fcfs"), (4, "buffered")]
    for r in table:
        d = run_serving({"hbm": int(r["hbm"]), "hbf": 0, "scheduler": r["scheduler"],
                         "hbf_model": "constant", "workload": WL})
        assert float(r["completion_s"]) == pytest.approx(d["completion_s"])
        assert float(r["energy_j.total"]) == pytest.approx(d["energy_j"]["total"])


@pytest.mark.parametrize("grid,word", [
    (GRID.replace('hbf_model = "constant"', 'hbf_model = "analog"'), "hbf_model"),
    (GRID + "[params]\nx = 1\n", "takes no [params]"),
    (GRID.replace("hbf = 0", "hbf = 4"), "shared-site"),
])
def test_bad_serve_points_are_refused_before_any_run(tmp_path, capsys, grid, word):
    g = tmp_path / "g.toml"
    g.write_text(grid)
    rc = main(["sweep", str(g), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and word in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "results.csv").exists()
