import csv
import json

import pytest

from hbfsim.cli import main


def run(argv, capsys):
    if "--hbf-model" not in argv:
        argv = ["--hbf-model", "constant", *argv]  # device mode: test_device_mode_*
    rc = main(["serve", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_default_prints_the_summary(capsys):
    rc, out, err = run([], capsys)
    assert rc == 0, err
    for word in ("completion", "throughput", "TTFT", "TPOT", "energy", "KV writes", "hits",
                 "HBF life", "4+4 shared", "qwen3-32b"):
        assert word in out


def test_json_and_csv_outputs(tmp_path, capsys):
    j, c = tmp_path / "s.json", tmp_path / "s.csv"
    rc, out, err = run(["--workload", "agentic-qwen32b:scale=0.00032", "--hbm", "8", "--hbf", "0",
                        "--json", str(j), "--csv", str(c)], capsys)
    assert rc == 0, err
    s = json.loads(j.read_text())
    assert s["completed"] == 8 and s["hbf_life_years"] is None and s["node"] == "8+0 shared"
    with c.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and float(rows[0]["completion_s"]) == pytest.approx(s["completion_s"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.json"]


@pytest.mark.parametrize("argv,word", [
    (["--hbm", "9"], "--hbm 9"), (["--hbm", "0"], "--hbm"), (["--hbf", "-1"], "--hbf"),
    (["--gpus", "0"], "--gpus"), (["--tp", "2"], "--tp"), (["--gpus", "4", "--ep", "3"], "--ep"),
    (["--headroom", "1.5"], "--headroom"), (["--max-batch", "0"], "--max-batch"),
    (["--scheduler", "lifo"], "--scheduler"), (["--weights", "ssd"], "--weights"),
    (["--model", "gpt-9"], "--model"), (["--compute-efficiency", "2"], "--compute-efficiency"),
    (["--workload", "agentic-nope"], "--workload"), (["--page-tokens", "48"], "--page-tokens"),
    (["--workload", "agentic-qwen32b:scale=0"], "--workload"), (["--max-tokens", "x"], "--max"),
    (["--hbf-profile", "reference"], "--hbf-profile"), (["--weights", "split"], "--weights"),
    (["--hbm", "4", "--hbf", "4", "--packaging", "h3", "--gpu", "tpu"], "--gpu"),
    (["--hbm", "1", "--hbf", "0"], "does not fit"), (["--ep", "1"], "--ep"),
    (["--hbf", "0", "--weights", "hbf"], "--weights hbf"),
])
def test_bad_options_one_line_exit_2(argv, word, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert err.count("\n") == 1 and word in err and "Traceback" not in err


def test_workload_file_and_its_errors(tmp_path, capsys):
    tr = tmp_path / "t.jsonl"
    tr.write_text('{"timestamp": 0, "input_length": 600, "output_length": 3, '
                  '"hash_ids": [1, 2]}\n'
                  '{"timestamp": 10, "input_length": 700, "output_length": 2, '
                  '"hash_ids": [1, 3]}\n')
    rc, out, err = run(["--workload", str(tr), "--json", str(tmp_path / "s.json")], capsys)
    assert rc == 0, err
    assert json.loads((tmp_path / "s.json").read_text())["completed"] == 2
    rc, out, err = run(["--workload", str(tr), "--json", str(tr)], capsys)
    assert rc == 2 and "same file as the input --workload" in err
    rc, out, err = run(["--workload", str(tr), "--json", str(tmp_path / "a"), "--csv",
                        str(tmp_path / "a")], capsys)
    assert rc == 2 and "--csv" in err and "--json" in err
    tr.write_text('{"timestamp": 0, "input_length": -5, "output_length": 3, "hash_ids": [1]}\n')
    rc, out, err = run(["--workload", str(tr)], capsys)
    assert rc == 2 and "--workload" in err and "input_length" in err and err.count("\n") == 1


def test_outputs_refused_before_work(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, '
                   '"num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}')
    before = cfg.read_text()
    rc, out, err = run(["--model", str(cfg), "--json", str(cfg)], capsys)
    assert rc == 2 and "same file as the input --model" in err and cfg.read_text() == before
    rc, out, err = run(["--json", str(tmp_path / "no" / "s.json")], capsys)
    assert rc == 2 and "--json" in err and err.count("\n") == 1
    assert out == ""


def test_model_from_config_json(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, '
                   '"num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}')
    rc, out, err = run(["--model", str(cfg), "--workload", "sample-mooncake"], capsys)
    assert rc == 0, err


def test_device_mode_uses_the_characterized_figures(monkeypatch, tmp_path, capsys):
    """--hbf-model device runs characterize() on the HbfConfig and the run uses its figures
    (a stand-in characterization here: the real one is tests/serve/test_characterize.py)."""
    import hbfsim.serve.characterize as ch
    from hbfsim.serve.tier_timing import TierTiming

    seen = []

    def fake(cfg, *, cache=True, **kw):
        seen.append(cfg)
        return TierTiming("hbf-device:test", read_bw=500e9, read_latency_s=5e-6,
                          write_bw=2e9, write_latency_s=1e-3, write_amplification=2.0,
                          source="stand-in device figures")

    monkeypatch.setattr(ch, "characterize", fake)
    j = [tmp_path / f"{m}.json" for m in ("device", "constant")]
    wl = ["--workload", "agentic-qwen32b:scale=0.002", "--weights", "hbf"]  # HBF every step
    assert run(["--hbf-model", "device", "--hbf-profile", "ocp-grade3", *wl, "--json",
                str(j[0])], capsys)[0] == 0
    assert seen and seen[0].profile == "ocp-grade3"
    assert run(["--hbf-model", "constant", *wl, "--json", str(j[1])], capsys)[0] == 0
    dev, const = (json.loads(p.read_text()) for p in j)
    assert dev["hbf_model"] == "stand-in device figures"
    assert "Table 1" in const["hbf_model"]
    assert dev["completion_s"] != const["completion_s"]
    rc, out, err = run(["--hbf-model", "device", "--hbf-profile", "nope"], capsys)
    assert rc == 2 and "--hbf-profile" in err


def test_engine_option_reaches_the_characterization(monkeypatch, capsys):
    """--engine E characterizes the HBF stack on E (a cached entry only if made on E:
    ``same_engine``); with no device characterization to run it is refused in one line."""
    import hbfsim.serve.characterize as ch
    from hbfsim.serve.tier_timing import TierTiming

    seen = []

    def fake(cfg, *, cache=True, same_engine=False, **kw):
        seen.append((cfg.engine, cache, same_engine))
        return TierTiming("hbf-device:test", read_bw=500e9, read_latency_s=5e-6,
                          write_bw=2e9, write_latency_s=1e-3, write_amplification=2.0,
                          source=f"stand-in, {cfg.engine} engine")

    monkeypatch.setattr(ch, "characterize", fake)
    wl = ["--workload", "agentic-qwen32b:scale=0.002"]
    for engine in ("reference", "compiled"):
        rc, out, err = run(["--hbf-model", "device", "--hbf-profile", "ocp-grade3",
                            "--engine", engine, *wl], capsys)
        assert rc == 0, err
        assert seen[-1] == (engine, True, True) and f"stand-in, {engine} engine" in out
    assert run(["--hbf-model", "device", "--hbf-profile", "ocp-grade3", *wl], capsys)[0] == 0
    assert seen[-1][1:] == (True, False)          # without --engine any cached entry serves
    for argv in (["--hbf-model", "constant"], ["--hbf-model", "device", "--hbf", "0"]):
        rc, out, err = run([*argv, "--engine", "reference", *wl], capsys)
        assert rc == 2 and "--engine reference" in err and out == ""
