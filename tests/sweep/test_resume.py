"""Sweeps that resume exactly (issue 26): a resumed, grown, shrunk, re-axed or interrupted
sweep gives the table of a fresh run of the same grid, byte for byte (the ``host_seconds``
column, the host's own time, aside); a point is its resolved run, so an edited file is a
new point; two sweeps never share a folder; workers end with the sweep, however it ends.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hbfsim.cli import main
from hbfsim.sweep.store import SweepLock

GRID = """
[sweep]
name = "r"
workloads = ["conservation", "default"]
[base]
config = "c.toml"
[grid]
channels = [1, 2]
t_read_us = [5, 15]
"""


def table(folder) -> list[str]:
    """results.csv without its last column (host_seconds), line by line."""
    lines = (Path(folder) / "results.csv").read_bytes().decode().splitlines()
    assert lines[0].endswith(",host_seconds")
    return [ln.rsplit(",", 1)[0] for ln in lines]


def parquet(folder):
    return pq.read_table(Path(folder) / "results.parquet").drop(["host_seconds"])


def sweep(tmp_path, grid_text, out, *extra, config='profile = "reference"\n'):
    (tmp_path / "g.toml").write_text(grid_text)
    (tmp_path / "c.toml").write_text(config)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return main(["sweep", "g.toml", "--out", str(out), "--workers", "1", "--no-progress",
                     *extra])
    finally:
        os.chdir(old)


def same_as_fresh(tmp_path, grid_text, out, config='profile = "reference"\n'):
    fresh = tmp_path / f"fresh-{out.name}"
    assert sweep(tmp_path, grid_text, fresh, config=config) == 0
    assert table(out) == table(fresh)
    assert parquet(out).equals(parquet(fresh))


def test_an_edited_configuration_file_is_a_new_point(tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep(tmp_path, GRID, out) == 0
    capsys.readouterr()
    edited = 'profile = "reference"\npage_buffers = 0\n'
    assert sweep(tmp_path, GRID, out, config=edited) == 0
    assert "0 already done, 8 to run" in capsys.readouterr().out
    same_as_fresh(tmp_path, GRID, out, config=edited)
    # and the file's old content is the old points again (kept in the journal)
    assert sweep(tmp_path, GRID, out) == 0
    assert "8 already done, 0 to run" in capsys.readouterr().out


@pytest.mark.parametrize("first, second", [
    (GRID, GRID.replace("[1, 2]", "[1, 2, 4]")),                      # grown
    (GRID.replace("[1, 2]", "[1, 4]"), GRID.replace("[1, 2]", "[1, 2, 4]")),  # grown inside
    (GRID, GRID.replace("[5, 15]", "[15]")),                           # shrunk
    (GRID, GRID.replace("channels = [1, 2]\n", "").replace(
        'config = "c.toml"', 'config = "c.toml"\nchannels = 2')),      # swept key -> [base]
    (GRID, GRID.replace("t_read_us = [5, 15]", "t_read_us = [15, 5]")),  # reordered
    (GRID, GRID.replace('["conservation", "default"]', '["default"]')),  # workload dropped
    (GRID, GRID.replace("channels", "hbf_num_channels")),             # the key's alias
])
def test_a_changed_grid_gives_the_table_of_a_fresh_run(tmp_path, first, second):
    out = tmp_path / "out"
    assert sweep(tmp_path, first, out) == 0
    assert sweep(tmp_path, second, out) == 0
    same_as_fresh(tmp_path, second, out)


def test_a_value_written_two_ways_is_one_point_reused(tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep(tmp_path, GRID, out) == 0
    capsys.readouterr()
    assert sweep(tmp_path, GRID.replace("[5, 15]", "[5.0, 15.0]"), out) == 0
    assert "8 already done, 0 to run" in capsys.readouterr().out


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"      # a zombie has ended


def assert_workers_end(workers: list[int], within: float, what: str) -> None:
    """Fail (killing them) unless every pid of ``workers`` ends within ``within`` seconds."""
    end = time.monotonic() + within
    while any(_alive(w) for w in workers):
        if time.monotonic() > end:
            for w in workers:
                if _alive(w):
                    os.kill(w, signal.SIGKILL)
            pytest.fail(f"workers left running {what}: {workers}")
        time.sleep(0.05)


KILL_GRID = """
[sweep]
name = "k"
workloads = ["conservation"]
[params]
requests = 1500
[grid]
channels = [1, 2, 4]
t_read_us = [5, 10, 15, 20]
"""


@pytest.fixture(scope="module")
def fresh_kill_grid(tmp_path_factory):
    """An uninterrupted run of KILL_GRID (one, shared by the interrupted cases)."""
    d = tmp_path_factory.mktemp("fresh")
    (d / "k.toml").write_text(KILL_GRID)
    assert main(["sweep", str(d / "k.toml"), "--out", str(d / "out"), "--workers", "1",
                 "--no-progress"]) == 0
    return d / "out"


def _default_sigint() -> None:
    """In the child before exec: SIGINT's default disposition, as from a shell. An ignored
    SIGINT is inherited through exec, and in the full suite the test process's can be
    ignored (a sweep's pool workers run in it ignore it, backends.die_with_parent); the
    sweep then never saw Ctrl-C (rc 0, or no exit within 30 s: the failures of two full
    runs, tests/test_outputs.py's case found the same)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path, out):
    (tmp_path / "k.toml").write_text(KILL_GRID)
    with open(tmp_path / "err", "w") as err:
        # the reference engine: its points take long enough to be interrupted in the middle
        # (the compiled engine finishes them before the signal; engine is no part of a
        # point's identity, so the resumed table is a fresh run's either way)
        return subprocess.Popen([sys.executable, "-m", "hbfsim.cli", "sweep", "k.toml",
                                 "--out", str(out), "--workers", "2", "--no-progress",
                                 "--engine", "reference"],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, preexec_fn=_default_sigint)


def _journal_lines(out) -> int:
    try:
        return (out / "points.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig, after, rc", [
    (signal.SIGKILL, 0, -9),           # before any point finished
    (signal.SIGKILL, 3, -9),
    (signal.SIGTERM, 1, 143),
    (signal.SIGINT, 5, 130),           # Ctrl-C: the terminal signals the whole group
])
def test_an_interrupted_sweep_resumes_to_the_table_of_a_fresh_run(tmp_path, fresh_kill_grid,
                                                                   sig, after, rc):
    out = tmp_path / "out"
    proc = _start(tmp_path, out)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while _journal_lines(out) < after or len(workers) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended early"
        workers = _children(proc.pid)
        time.sleep(0.02)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.wait(timeout=30)
    assert proc.returncode == rc, (tmp_path / "err").read_text()
    end = time.monotonic() + 10
    while any(_alive(w) for w in workers):   # the workers die with the main process
        assert time.monotonic() < end, f"workers left running: {workers}"
        time.sleep(0.05)
    assert not [p for p in out.iterdir() if "hbfsim-tmp" in p.name]
    assert main(["sweep", str(tmp_path / "k.toml"), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    assert table(out) == table(fresh_kill_grid)
    assert parquet(out).equals(parquet(fresh_kill_grid))


def test_two_sweeps_into_one_folder_the_second_is_refused_naming_the_first(tmp_path,
                                                                          capsys):
    out = tmp_path / "out"
    proc = _start(tmp_path, out)
    try:
        deadline = time.monotonic() + 60
        while not ((out / ".sweep.lock").exists() and (out / ".sweep.lock").read_text()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        before = (out / "points.jsonl").read_bytes() if (out / "points.jsonl").exists() \
            else b""
        rc = main(["sweep", str(tmp_path / "k.toml"), "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1, err
        assert f"another sweep is writing to it (pid {proc.pid}, grid k.toml" in err
        after = (out / "points.jsonl").read_bytes() if (out / "points.jsonl").exists() \
            else b""
        assert after.startswith(before)                   # the second wrote nothing
    finally:
        proc.kill()
        proc.wait()
    # the holder is gone (kill -9): its lock went with it
    assert main(["sweep", str(tmp_path / "k.toml"), "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0


def test_a_held_lock_refuses_and_a_released_one_does_not(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    lock = SweepLock(out)
    lock.acquire("other.toml")
    try:
        assert sweep(tmp_path, GRID, out) == 2
        assert "another sweep is writing to it" in capsys.readouterr().err
        assert not (out / "points.jsonl").exists()
    finally:
        lock.release()
    assert sweep(tmp_path, GRID, out) == 0


# ------------------------------------------------------------------- the journal is checked
def _entries(out):
    return (out / "points.jsonl").read_text().splitlines()


def _bad_line(line: str, how: str) -> str:
    d = json.loads(line)
    m = d["metrics"]
    if how == "null metric":
        m["requests"] = None
    elif how == "nan metric":
        return line.replace('"requests": ', '"requests": NaN, "x": ', 1)
    elif how == "list metric":
        m["requests"] = [1]
    elif how == "missing metric":
        del m["requests"]
    elif how == "missing field":
        del d["host_seconds"]
    elif how == "extra field":
        d["extra"] = 1
    elif how == "negative host time":
        d["host_seconds"] = -1
    elif how == "old version":
        d["v"] = 1
    elif how == "id of another identity":
        d["identity"] = d["identity"].replace('"channels":1', '"channels":4')
    elif how == "text where a count belongs":
        m["requests"] = "many"
    elif how == "deeply nested":
        return '{"v": 2, "point": ' + "[" * 100000 + "]" * 100000 + "}"
    elif how == "not utf-8":
        return "\udcff"
    elif how == "torn":
        return line[: len(line) // 2]
    elif how == "not an object":
        return "[1, 2]"
    return json.dumps(d)


JOURNAL_BAD = ["null metric", "nan metric", "list metric", "missing metric", "missing field",
               "extra field", "negative host time", "old version", "id of another identity",
               "text where a count belongs", "deeply nested", "not utf-8", "torn", "not an object"]


@pytest.mark.parametrize("how", JOURNAL_BAD)
def test_a_bad_journal_line_is_rerun_with_a_note_never_used(tmp_path, capsys, how):
    out = tmp_path / "out"
    assert sweep(tmp_path, GRID, out) == 0
    lines = _entries(out)
    bad = _bad_line(lines[0], how)
    data = "\n".join([bad] + lines[1:]) + "\n"
    (out / "points.jsonl").write_bytes(data.encode("utf-8", "surrogateescape"))
    (out / "results.csv").unlink()
    capsys.readouterr()
    assert sweep(tmp_path, GRID, out) == 0
    cap = capsys.readouterr()
    assert "7 already done, 1 to run" in cap.out, cap.out
    notes = cap.err.strip().splitlines()
    assert len(notes) == 1 and "points.jsonl: 1 line(s) not used" in notes[0], cap.err
    same_as_fresh(tmp_path, GRID, out)


def test_an_unreadable_journal_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep(tmp_path, GRID, out) == 0
    (out / "points.jsonl").chmod(0)
    if os.access(out / "points.jsonl", os.R_OK):
        pytest.skip("running as a user who reads any file")
    capsys.readouterr()
    assert sweep(tmp_path, GRID, out) == 2
    err = capsys.readouterr().err.strip()
    assert "points.jsonl" in err and "Permission denied" in err and len(err.splitlines()) == 1


LONG_GRID = """
[sweep]
name = "long"
workloads = ["conservation"]
[params]
requests = 400000
[grid]
channels = [1, 2]
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_workers_end_with_the_sweep_in_the_middle_of_a_long_point(tmp_path, sig):
    """Two points of ~20 s each on the reference engine: killed a moment after they start,
    their workers must end within 2 s (not when their points end)."""
    (tmp_path / "l.toml").write_text(LONG_GRID)
    proc = subprocess.Popen([sys.executable, "-m", "hbfsim.cli", "sweep", "l.toml", "--out",
                             "out", "--workers", "2", "--no-progress", "--engine", "reference"],
                            cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2:
        assert proc.poll() is None and time.monotonic() < deadline
        workers = _children(proc.pid)
        time.sleep(0.02)
    time.sleep(0.5)                       # both are inside their point now
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.wait(timeout=30)
    assert_workers_end(workers, 2, f"after {sig!r}")
    assert not (tmp_path / "out" / "points.jsonl").exists()


def test_a_serve_point_follows_the_content_of_its_model_and_trace_files(tmp_path, capsys):
    """A serve point names a model config.json and a trace file: editing either makes it a
    new point, and the table is a fresh run's."""
    from importlib import resources

    trace = resources.files("hbfsim.serve").joinpath("data", "sample_mooncake.jsonl")
    lines = trace.read_text().splitlines(keepends=True)
    (tmp_path / "t.jsonl").write_text("".join(lines))
    model = ('{"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, '
             '"num_key_value_heads": 2, "head_dim": 128, "intermediate_size": %d, '
             '"vocab_size": 32000}')
    (tmp_path / "m.json").write_text(model % 4096)
    grid = ('[sweep]\nname = "s"\nkind = "serve"\nworkloads = ["t.jsonl"]\n[base]\n'
            'hbf_model = "constant"\nhbf = 0\nmodel = "m.json"\n[grid]\nhbm = [4, 8]\n')
    out = tmp_path / "out"
    assert sweep(tmp_path, grid, out) == 0
    capsys.readouterr()
    (tmp_path / "m.json").write_text(model % 8192)                  # the model changed
    assert sweep(tmp_path, grid, out) == 0
    assert "0 already done, 2 to run" in capsys.readouterr().out
    (tmp_path / "t.jsonl").write_text("".join(lines[:-5]))          # the trace changed
    assert sweep(tmp_path, grid, out) == 0
    assert "0 already done, 2 to run" in capsys.readouterr().out
    fresh = tmp_path / "fresh"
    assert sweep(tmp_path, grid, fresh) == 0
    assert table(out) == table(fresh)
    (tmp_path / "m.json").write_text(model % 4096)                  # back: reused
    (tmp_path / "t.jsonl").write_text("".join(lines))
    capsys.readouterr()
    assert sweep(tmp_path, grid, out) == 0
    assert "2 already done, 0 to run" in capsys.readouterr().out
