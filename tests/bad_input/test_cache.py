"""A characterization cache that cannot lie (issue 26): every damaged entry of the HBF
characterization cache (serve/characterize.py) is refused by its schema check, noted in one
line, recomputed and overwritten: the figures are those of ``--no-cache``, never the
entry's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from hbfsim.config import load_config
from hbfsim.serve import characterize as ch


def small():
    """A one-channel stack: its characterization takes about 0.1 s."""
    return load_config(profile="reference", channels=1)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The entry of small() and what --no-cache computes for it."""
    d = tmp_path_factory.mktemp("fresh")
    t = ch.characterize(small(), cache_dir=d, cache=False)
    return ch.cache_path(small(), d).read_text(), t


def _measured(points):
    """Measurements without the host's time (``host_s``, the one figure that varies)."""
    return [{k: v for k, v in r.items() if k != "host_s"} for r in points]


def _edit(field_path, value):
    def damage(d):
        node = d
        for k in field_path[:-1]:
            node = node[k]
        if value is KeyError:
            del node[field_path[-1]]
        else:
            node[field_path[-1]] = value
        return json.dumps(d)
    return damage


def _other_config(d):
    d["config"] = d["config"].replace("channels = 1", "channels = 2")
    return json.dumps(d)


def _decreasing(d):
    d["timing"]["read_curve"] = list(reversed(d["timing"]["read_curve"]))
    return json.dumps(d)


CACHE_BAD = [
    ("null read_bw", _edit(("timing", "read_bw"), None), r"timing\.read_bw = None"),
    ("null write_bw", _edit(("timing", "write_bw"), None), r"timing\.write_bw"),
    ("null kv_read_bw", _edit(("timing", "kv_read_bw"), None), r"timing\.kv_read_bw"),
    ("null read latency", _edit(("timing", "read_latency_s"), None), r"read_latency_s"),
    ("null kv latency", _edit(("timing", "kv_read_latency_s"), None), r"kv_read_latency_s"),
    ("negative write latency", _edit(("timing", "write_latency_s"), -1e-6),
     r"write_latency_s = -1e-06"),
    ("zero bandwidth", _edit(("timing", "read_bw"), 0), r"read_bw = 0 .* > 0"),
    ("text bandwidth", _edit(("timing", "read_bw"), "fast"), r"read_bw = 'fast'"),
    ("boolean bandwidth", _edit(("timing", "write_bw"), True), r"write_bw = True"),
    ("write amplification < 1", _edit(("timing", "write_amplification"), 0.5),
     r"write_amplification = 0.5"),
    ("missing field", _edit(("timing", "write_bw"), KeyError), r"timing\.write_bw missing"),
    ("extra field", _edit(("timing", "bonus"), 1), r"unknown field timing\.bonus"),
    ("missing params", _edit(("params",), KeyError), r"field 'params' missing"),
    ("other parameters", _edit(("params", "kv_block_bytes"), 4096), r"other parameters"),
    ("zero wave pages", _edit(("params", "wave_pages"), 0), r"wave_pages = 0"),
    ("empty curve", _edit(("timing", "kv_read_curve"), []), r"kv_read_curve must be"),
    ("curve of triples", _edit(("timing", "write_curve"), [[1, 2, 3]]), r"write_curve\[0\]"),
    ("decreasing curve", _decreasing, r"read_curve\[1\] bytes .* do not increase"),
    ("no measurements", _edit(("timing", "points"), []), r"timing\.points must be"),
    ("measurement without seconds", _edit(("timing", "points"), [{"kind": "read",
                                                                 "bytes": 4096}]),
     r"points\[0\]\.seconds"),
    ("another configuration", _other_config, r"another configuration"),
    ("another key", _edit(("key",), "0" * 64), r"another key or version"),
    ("another version", _edit(("version",), 99), r"another key or version"),
    ("foreign name", _edit(("timing", "name"), "hbf-table1"), r"timing\.name"),
    ("huge number", lambda d: json.dumps(d).replace(
        f'"read_bw": {d["timing"]["read_bw"]!r}', '"read_bw": 1e400'), r"read_bw = inf"),
    ("NaN", lambda d: json.dumps(d).replace(
        f'"write_bw": {d["timing"]["write_bw"]!r}', '"write_bw": NaN'), r"NaN is not"),
    ("deeply nested", lambda d: "[" * 200000 + "]" * 200000, r"nested too deeply"),
    ("a list", lambda d: "[1, 2]", r"not an object"),
    ("truncated", lambda d: json.dumps(d)[:500], r"not JSON"),
    ("not UTF-8", lambda d: b"\xff\xfe" + json.dumps(d).encode(), r"not UTF-8 text"),
]


@pytest.mark.parametrize("damage,why", [c[1:] for c in CACHE_BAD],
                         ids=[c[0] for c in CACHE_BAD])
def test_a_damaged_entry_is_recomputed_with_a_note(tmp_path, capsys, fresh, damage, why):
    entry, no_cache = fresh
    path = ch.cache_path(small(), tmp_path)
    text = damage(json.loads(entry))
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    got = ch.characterize(small(), cache_dir=tmp_path)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "characterization cache" in err[0] and "recomputing" in err[0]
    assert re.search(why, err[0]), err[0]
    # the figures of --no-cache, field by field (TierTiming compares its figures)
    assert got == no_cache
    assert got.kv_read_bw == no_cache.kv_read_bw
    assert _measured(got.points) == _measured(no_cache.points)
    again = json.loads(path.read_text())                          # overwritten, valid
    want = json.loads(entry)
    assert _measured(again["timing"].pop("points")) == _measured(want["timing"].pop("points"))
    assert again == want
    assert ch.characterize(small(), cache_dir=tmp_path) == no_cache
    assert capsys.readouterr().err == ""                          # and now trusted


def test_serve_with_a_null_bandwidth_entry_prints_the_no_cache_figures(tmp_path, fresh):
    """End to end: `hbfsim serve` on a damaged entry prints what --no-cache prints."""
    entry, _ = fresh
    (tmp_path / "hbf.toml").write_text('profile = "reference"\nchannels = 1\n')
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    path = ch.cache_path(small(), tmp_path / "xdg" / "hbfsim")
    path.parent.mkdir(parents=True)
    d = json.loads(entry)
    d["timing"]["kv_read_bw"] = None
    path.write_text(json.dumps(d))
    cmd = [sys.executable, "-m", "hbfsim.cli", "serve", "--hbf-config", "hbf.toml",
           "--hbf", "4", "--hbm", "4", "--workload", "agentic-qwen32b:scale=0.002",
           "--no-progress"]

    def figures(extra):
        r = subprocess.run(cmd + extra, cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return [ln for ln in r.stdout.splitlines() if "host time" not in ln], r.stderr

    cached, err = figures([])
    assert "kv_read_bw" in err and err.count("\n") == 1
    assert cached == figures(["--no-cache"])[0]
