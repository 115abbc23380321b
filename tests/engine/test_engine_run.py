"""``hbfsim run`` / ``replay`` on both engines write the same files (hbfsim/simulate.py).

Each case runs the command line twice, ``--engine compiled`` and ``--engine reference``, and
compares the trace byte for byte, the statistics JSON key for key (but ``engine`` and
``host_seconds``) and the printed report line for line (but the engine's name and the host
time). The cases cover an open-loop request CSV in both host-port shapes and with two
stacks, the embedded workload, closed-loop GPU workloads (including a small LLM decode step),
a device-stream workload and a replay, at trace levels 1 and 2.
"""

import json
import random
import re

import pytest

from hbfsim.cli import main

STACK_SHAPE = 'host_ports = "stack"\n'
TWO_STACKS = ('stacks = 2\nchannels = 4\nsubarrays_per_channel = 4\nwrite_buffer_entries = 4\n'
              'channel_bw_gbps = 4.0\nmshr_entries = 8\nadmission = 16\n')


def _csv(path, n=400, seed=3):
    """A mixed stream of sector and line reads and writes on a few pages, bursts and gaps."""
    rng = random.Random(seed)
    base = 256 << 30
    t = 0
    lines = ["tick,op,address,bytes,source"]
    for _ in range(n):
        t += rng.choice((0, 0, 1, 3, 40))
        page = rng.randrange(24)
        size = rng.choice((32, 64, 128))
        off = rng.randrange(4096 // size) * size
        lines.append(f"{t},{rng.choice('RRRW')},{base + page * 4096 + off:#x},{size},"
                     f"{rng.randrange(4)}")
    path.write_text("\n".join(lines) + "\n")
    return path


CASES = {
    "csv-channel-level2": (["--requests", "{csv}"], "", 2),
    "csv-stack-level1": (["--requests", "{csv}"], STACK_SHAPE, 1),
    "csv-two-stacks": (["--requests", "{csv}"], TWO_STACKS, 2),
    "embedded": ([], "", 2),
    "closed-conservation": (["--workload", "conservation"], "", 2),
    "closed-mshr-grid-stack": (["--workload", "mshr-grid", "--param", "pages=4"], STACK_SHAPE,
                               2),
    "closed-rw-isolation": (["--workload", "rw-isolation"], TWO_STACKS, 1),
    "closed-llm-decode": (["--workload", "llm-decode", "--param", "scale=128", "--param",
                           "layers=1"], "", 1),
    "device-stream": (["--workload", "burst-page-service", "--param", "pages=8"], "", 2),
}


def _run(tmp_path, capsys, engine, args, config, level, tag):
    out = tmp_path / tag
    out.mkdir()
    argv = ["run", *args, "--engine", engine, "--trace", str(out / "t.csv"), "--trace-level",
            str(level), "--stats-json", str(out / "s.json"), "--no-progress"]
    if config:
        (tmp_path / "c.toml").write_text(config)
        argv += ["--config", str(tmp_path / "c.toml")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    stats = json.loads((out / "s.json").read_text())
    assert stats.pop("engine") == engine
    stats.pop("host_seconds")
    # the report but the engine's name, the host time and the output paths
    report = [re.sub(r"(compiled|reference) engine", "ENGINE", line) for line in
              text.splitlines() if "host time" not in line and str(out) not in line]
    assert f"{engine} engine" in text.splitlines()[0]
    return (out / "t.csv").read_bytes(), stats, report


@pytest.mark.parametrize("case", CASES)
def test_both_engines_write_the_same_files(tmp_path, capsys, case):
    args, config, level = CASES[case]
    csv = _csv(tmp_path / "r.csv")
    args = [a.format(csv=csv) for a in args]
    c = _run(tmp_path, capsys, "compiled", args, config, level, "compiled")
    r = _run(tmp_path, capsys, "reference", args, config, level, "reference")
    assert c[0] == r[0] and c[0].count(b"\n") > 20
    assert c[1] == r[1]
    assert c[2] == r[2]


def test_replay_on_both_engines(tmp_path, capsys):
    csv = _csv(tmp_path / "r.csv", n=150, seed=8)
    assert main(["run", "--requests", str(csv), "--trace", str(tmp_path / "src.csv"),
                 "--no-progress"]) == 0
    files = {}
    for engine in ("compiled", "reference"):
        t, s = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        assert main(["replay", str(tmp_path / "src.csv"), "--engine", engine, "--trace",
                     str(t), "--stats-json", str(s), "--no-progress"]) == 0
        stats = json.loads(s.read_text())
        assert stats.pop("engine") == engine
        stats.pop("host_seconds")
        files[engine] = (t.read_bytes(), stats)
    capsys.readouterr()
    assert files["compiled"] == files["reference"]


def test_the_default_engine_is_compiled(tmp_path, capsys):
    assert main(["run", "--stats-json", str(tmp_path / "s.json"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["engine"] == "compiled"
    assert "compiled engine" in capsys.readouterr().out.splitlines()[0]
