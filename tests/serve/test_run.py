import pytest

from hbfsim.serve.run import DEFAULTS, run_serving, validate

SMALL = {"workload": "agentic-qwen32b:scale=0.0008", "hbf_model": "constant"}


def test_defaults_validate_and_fill():
    s = validate({"hbm": 8, "hbf": 0})
    assert s["hbm"] == 8 and s["scheduler"] == DEFAULTS["scheduler"] and set(s) == set(DEFAULTS)


@pytest.mark.parametrize("settings,word", [
    ({"hbms": 8}, "unknown serving setting 'hbms'"), ({"hbm": "8"}, "hbm must be an integer"),
    ({"hbm": True}, "hbm must be an integer"), ({"dpa": 1}, "dpa must be true or false"),
    ({"headroom": float("nan")}, "headroom must be a finite number"),
    ({"scheduler": "lifo"}, "scheduler must be one of"), ({"gpu": "a100"}, "gpu must be one of"),
    ({"gpus": 2, "tp": 3}, "tp must divide gpus 2"), ({"format": "parquet"}, "format"),
    ({"hbf_model": "constant", "hbf_profile": "ocp-grade3"}, "hbf_profile"),
    ({"hbm_stack": "hbm4"}, "hbm_stack must be one of table1, hbm3, hbm3e"),
    ({"hbm": 6, "hbf": 6}, "hbm 6 hbf 6 packaging shared"),
])
def test_bad_settings_name_the_key(settings, word):
    with pytest.raises(ValueError, match=word.replace("(", r"\(")):
        validate(settings)


def test_run_serving_is_what_the_cli_prints(tmp_path, capsys):
    import json

    from hbfsim.cli import main

    s = run_serving(dict(SMALL, hbm=8, hbf=0))
    assert s["completed"] == s["turns"] == 20 and s["energy_j"]["total"] == pytest.approx(
        s["energy_mj"] * 1e6)
    out = tmp_path / "s.json"
    assert main(["serve", "--no-progress", "--workload", SMALL["workload"], "--hbf-model",
                 "constant", "--hbm", "8", "--hbf", "0", "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    assert cli["completion_s"] == pytest.approx(s["completion_s"])
    assert cli["device_hit"] == pytest.approx(s["device_hit"])
    with pytest.raises(ValueError, match="weights split places routed experts"):
        run_serving(dict(SMALL, weights="split"))
