"""``hbfsim sweep``: local runs, resuming, the table, and bad input leaving nothing behind."""

import csv
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hbfsim.cli import main

GRID = """
[sweep]
name = "t"
workloads = ["conservation", "default"]
[base]
profile = "reference"
[grid]
channels = [1, 2]
t_read_us = [5, 15]
"""


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def listing(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in Path(folder).rglob("*"))


@pytest.fixture
def grid(tmp_path):
    g = tmp_path / "g.toml"
    g.write_text(GRID)
    return g


def test_sweep_runs_every_point_and_matches_a_direct_run(grid, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(grid), "--out", str(out), "--workers", "2",
                 "--no-progress"]) == 0
    table = rows(out / "results.csv")
    assert len(table) == 8 and [int(r["index"]) for r in table] == list(range(8))
    # A point's figures are those of the same run made directly with `hbfsim run`.
    r = next(r for r in table if r["workload"] == "default" and r["channels"] == "2"
             and r["t_read_us"] == "15")
    stats = tmp_path / "s.json"
    assert main(["run", "--profile", "reference", "--stats-json", str(stats)]) == 0
    import json
    direct = json.loads(stats.read_text())
    assert int(r["requests"]) == direct["requests"]
    assert int(r["last_completion_tick"]) == direct["last_completion_tick"]
    # Channel count and tR change the media-bound conservation run's window.
    cons = {(r["channels"], r["t_read_us"]): int(r["last_completion_tick"])
            for r in table if r["workload"] == "conservation"}
    assert cons[("1", "15")] > cons[("1", "5")]
    assert cons[("1", "15")] > cons[("2", "15")]
    import pyarrow.parquet as pq
    assert pq.read_table(out / "results.parquet").num_rows == 8


def test_a_rerun_skips_finished_points_and_a_grown_grid_runs_only_new_ones(grid, tmp_path,
                                                                           capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(grid), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    first = (out / "points.jsonl").read_text()
    capsys.readouterr()
    assert main(["sweep", str(grid), "--out", str(out), "--no-progress"]) == 0
    assert "8 already done, 0 to run" in capsys.readouterr().out
    assert (out / "points.jsonl").read_text() == first
    grid.write_text(GRID.replace("[1, 2]", "[1, 2, 4]"))
    assert main(["sweep", str(grid), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    assert "8 already done, 4 to run" in capsys.readouterr().out
    assert len(rows(out / "results.csv")) == 12
    assert main(["sweep", str(grid), "--out", str(out), "--fresh"]) == 2


@pytest.mark.parametrize("args, text, needle", [
    (["--backend", "slurm"], GRID, "--backend must be one of local, ray"),
    (["--address", "x:1"], GRID, "--address needs --backend ray"),
    (["--backend", "ray"], GRID, "--backend ray needs --address"),
    (["--backend", "ray", "--address", "nohost"], GRID, "must be host:port"),
    (["--backend", "ray", "--address", "127.0.0.1:9"], GRID, "no Ray cluster answers"),
    (["--workers", "0"], GRID, "--workers must be a positive integer"),
    (["--workers", "two"], GRID, "--workers must be a positive integer"),
    (["--out", ""], GRID, "empty argument after --out"),  # hbfsim.cli rejects it first
    ([], GRID.replace("[5, 15]", "[5, -1]"), "t_read_us"),
    ([], GRID.replace("[1, 2]", "[1, 3]"), "channels must be 1, 2, 4, 8 or 16, not 3"),
    ([], GRID.replace('"default"]', '"nosuch"]'), "workload must be one of"),
    ([], GRID + '[params]\nbogus = 1\n', "bogus"),
    ([], "[grid\n", "not valid TOML"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, text,
                                                         needle):
    g = tmp_path / "g.toml"
    g.write_text(text)
    before = listing(tmp_path)
    assert main(["sweep", str(g), "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert listing(tmp_path) == before


def test_an_output_that_is_a_file_or_the_grid_is_refused(grid, tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("keep")
    assert main(["sweep", str(grid), "--out", str(f)]) == 2
    assert f.read_text() == "keep"
    g2 = tmp_path / "results.csv"
    g2.write_text(GRID)
    assert main(["sweep", str(g2), "--out", str(tmp_path)]) == 2
    assert g2.read_text() == GRID
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read grid file" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ray_backend_on_a_local_cluster_gives_the_local_table(grid, tmp_path):
    """Issue 9 item 11: the same table from an existing Ray cluster (a local head here)."""
    pytest.importorskip("ray", reason="Ray (hbfsim[cluster]) is not installed")
    ray_bin = Path(sys.executable).with_name("ray")
    port = _free_port()
    # Ray's socket paths must stay under the 107-byte Unix limit: a short temporary folder.
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--block", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false",
                             "--node-ip-address=127.0.0.1", f"--temp-dir={ray_tmp}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, "no Ray head"
                time.sleep(0.5)
        time.sleep(2)                     # the head accepts before its GCS is ready
        run = [sys.executable, "-m", "hbfsim.cli", "sweep", str(grid), "--no-progress"]
        r = subprocess.run(run + ["--out", str(tmp_path / "ray_out"), "--backend", "ray",
                                  "--address", f"127.0.0.1:{port}"],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        try:
            # SIGKILL: a test cluster needs no 30 s graceful drain, and all of its
            # processes share the head's new session.
            os.killpg(head.pid, 9)
            head.wait(timeout=30)
        except ProcessLookupError:
            pass
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert main(["sweep", str(grid), "--out", str(tmp_path / "local_out"), "--workers", "1",
                 "--no-progress"]) == 0

    def table(folder):
        return [{k: v for k, v in r.items() if k != "host_seconds"}
                for r in rows(tmp_path / folder / "results.csv")]

    assert table("ray_out") == table("local_out")


def test_both_engines_give_the_same_table(grid, tmp_path, capsys):
    tables = {}
    for engine in ("compiled", "reference"):
        out = tmp_path / engine
        assert main(["sweep", str(grid), "--out", str(out), "--workers", "1", "--no-progress",
                     "--engine", engine]) == 0
        tables[engine] = [{k: v for k, v in r.items() if "host" not in k and "engine" not in k}
                          for r in rows(out / "results.csv")]
    assert tables["compiled"] == tables["reference"] and len(tables["compiled"]) == 8
