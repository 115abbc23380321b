"""The engine choice (hbfsim/simulate.py), its configuration key and the progress bars
(hbfsim/progress.py). The two engines' outputs are compared in tests/engine/test_engine_run.py."""

import io
import json

import pytest

from hbfsim import engine as eng
from hbfsim.cli import main
from hbfsim.config import ConfigError, load_config
from hbfsim.progress import Progress, progress_wanted
from hbfsim.simulate import choose_engine


def test_engine_key_is_checked_in_one_line(tmp_path, capsys):
    assert load_config().engine == "compiled"
    assert load_config(engine="reference").engine == "reference"
    with pytest.raises(ConfigError, match=r"^engine must be one of compiled, reference, "
                                          r"not 'fast'$"):
        load_config(engine="fast")
    (tmp_path / "c.toml").write_text('engine = "fast"\n')
    assert main(["run", "--config", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "engine must be one of compiled, reference" in err
    assert main(["run", "--engine", "fast"]) == 2
    assert "--engine" in capsys.readouterr().err


def test_config_show_lists_the_engine_with_its_source(capsys):
    assert main(["config", "show", "--provenance"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("engine = ")]
    assert len(line) == 1 and '"compiled"' in line[0] and "# " in line[0]


def test_the_key_is_the_default_and_the_option_overrides_it(monkeypatch):
    monkeypatch.setattr(eng, "compiled_available", lambda: True)
    monkeypatch.setattr(eng, "stale", lambda: False)
    cfg = load_config(engine="reference")
    assert choose_engine(cfg) == ("reference", None)
    assert choose_engine(cfg, "compiled") == ("compiled", None)
    assert choose_engine(load_config(), "reference") == ("reference", None)


def test_a_missing_extension_runs_the_reference_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(eng, "_engine", None)
    monkeypatch.setattr(eng, "_WHY", "No module named 'hbfsim._engine'")
    name, note = choose_engine(load_config())
    assert name == "reference"
    assert "not built" in note and eng.BUILD_COMMAND in note and "running the reference" in note
    assert main(["run", "--stats-json", str(tmp_path / "s.json"), "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"hbfsim: {note}"
    assert "reference engine" in out[1]
    assert json.loads((tmp_path / "s.json").read_text())["engine"] == "reference"


def test_a_feature_the_compiled_engine_lacks_is_named(monkeypatch):
    monkeypatch.setattr(eng, "compiled_available", lambda: True)
    monkeypatch.setattr(eng, "stale", lambda: False)
    name, note = choose_engine(load_config(), needs=("record=True (per-request records)",))
    assert name == "reference"
    assert note == ("the compiled engine does not do record=True (per-request records) yet; "
                    "running the reference engine")


def test_progress_is_off_without_a_terminal_or_when_asked():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress_wanted(False, Tty())
    assert not progress_wanted(True, Tty())
    assert not progress_wanted(False, io.StringIO())
    quiet = Progress(10, "x", enabled=False)
    quiet.to(5)
    quiet.close()


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_the_bar_counts_every_response(engine, monkeypatch):
    from hbfsim import progress
    from hbfsim.model.requests import default_workload
    from hbfsim.simulate import run_open

    if engine == "compiled" and (not eng.compiled_available() or eng.stale()):
        pytest.skip(eng.engine_status())
    monkeypatch.setattr(progress, "DELAY_S", 0)
    monkeypatch.setattr(progress, "COMPILED_EVERY", 64)
    monkeypatch.setattr(progress, "REFERENCE_EVERY", 64)
    import hbfsim.simulate as sim
    monkeypatch.setattr(sim, "COMPILED_EVERY", 64)
    cfg = load_config()
    seen = []
    sink = io.StringIO()
    bar = Progress(None, "test", stream=sink)
    inner = bar.to
    bar.to = lambda n: (seen.append(n), inner(n))
    reqs = default_workload(cfg)
    fin = run_open(cfg, reqs, engine, progress=bar)
    assert fin.engine == engine and fin.n_done == len(reqs)
    assert bar.bar.total == len(reqs) and bar.bar.n == len(reqs)
    # reports along the way (every 64 responses), then the last (perhaps twice)
    n = len(reqs)
    assert n % 64 and seen == sorted(seen) and seen[-1] == n
    assert sorted(set(seen)) == [*range(64, n + 1, 64), n]
    bar.close()
    assert "test" in sink.getvalue()
