"""The validation harness (serve/validate.py): its metrics, its sets, and that the fit reads
the calibration points only (docs/validation-serving.md)."""

import pytest

from hbfsim.serve import validate
from hbfsim.serve.run import run_serving
from hbfsim.serve.validate import SETS, load_points, metric_value, prepare

GOOD = """
[sources.s]
url = "u"
dtype = "bf16"
metric = "latency_ms"

[[points]]
id = "p1"
source = "s"
model = "llama-3.1-8b"
gpu = "h100"
gpus = 1
tp = 1
isl = 32
osl = 16
published_requests = 4
measured = 100.0
set = "held-out-2"
"""


def _point(data, pid):
    return next(p for p in data["points"] if p["id"] == pid)


def test_one_request_alone_its_latency_is_ttft_plus_its_decode_steps(tmp_path):
    """For one request, the run's latency is its first token plus (output - 1) times its
    time per output token: the three metrics read one run consistently."""
    data = load_points()
    pt = _point(data, "nim-l70b-h100-tp2-c1-500-2000-itl")
    s, _ = prepare(data, pt, tmp_path)
    r = run_serving(s)
    ttft, tpot = metric_value("ttft_ms", r), metric_value("tpot_ms", r)
    assert 0 < ttft < tpot * pt["osl"]
    assert metric_value("latency_ms", r) == pytest.approx(ttft + tpot * (pt["osl"] - 1),
                                                           rel=1e-9)
    with pytest.raises(ValueError, match="metric must be one of"):
        metric_value("tokens_per_joule", r)


def test_data_file_sets_metrics_and_bad_entries(tmp_path):
    data = load_points()
    assert {p["set"] for p in data["points"]} == set(SETS)
    held2 = [p for p in data["points"] if p["set"] == "held-out-2"]
    assert {validate.metric_of(data, p) for p in held2} >= {"latency_ms", "tpot_ms", "ttft_ms"}
    assert {data["sources"][p["source"]]["dtype"] for p in held2} >= {"bf16", "fp8"}
    f = tmp_path / "v.toml"
    f.write_text(GOOD)
    assert load_points(f)["points"][0]["id"] == "p1"
    for old, new, word in (('set = "held-out-2"', 'set = "held-out-9"', "p1: set"),
                           ("published_requests = 4", "", "p1: needs published_requests"),
                           ('metric = "latency_ms"', 'metric = "joules"', "source s: metric"),
                           ("tp = 1", "tp = 1\nep = 2", "p1: ep must"),
                           ("tp = 1", "tp = 1\ndpa = 1", "p1: dpa must")):
        f.write_text(GOOD.replace(old, new))
        with pytest.raises(ValueError, match=word):
            load_points(f)


def test_fit_objective_reads_the_calibration_points_only(tmp_path, monkeypatch):
    seen = []

    def fake(data, pt, settings, values=None):
        seen.append(pt["id"])
        return pt["measured"]

    monkeypatch.setattr(validate, "simulate_point", fake)
    data = load_points()
    assert validate._objective(data, tmp_path, {}) == 0.0
    assert seen == [p["id"] for p in data["points"] if p["set"] == "calibration"]


def test_a_sources_batch_limits_reach_the_run_and_its_command(tmp_path):
    """A source that states its engine's limits (the tuning guide's max batch size 512, max
    num tokens 2048) runs with them; others with the page's defaults."""
    data = load_points()
    tuned = _point(data, "tune-l70b-h100-tp4-bf16-2048-2048")
    s, cmd = prepare(data, tuned, tmp_path)
    assert (s["max_batch"], s["max_tokens"], s["reserve_output"]) == (512, 2048, True)
    assert "--max-batch 512 --max-tokens 2048 --reserve-output" in cmd
    s, cmd = prepare(data, _point(data, "l8b-h100-tp1-128-128"), tmp_path)
    assert (s["max_batch"], s["max_tokens"]) == (validate.MAX_BATCH, validate.MAX_TOKENS)


def test_a_concurrency_point_runs_the_closed_loop_client(tmp_path):
    data = load_points()
    pt = _point(data, "nim-l70b-h100-tp2-c25-5000-500-itl")
    s, cmd = prepare(data, pt, tmp_path)
    spec = "closed-loop:users=25,requests=10,input=5000,output=500"
    assert s["workload"] == spec and cmd.endswith(f"--workload {spec}")
    f = tmp_path / "v.toml"
    f.write_text(GOOD.replace("published_requests = 4", "published_requests = 4\n"
                              "concurrency = 3"))
    with pytest.raises(ValueError, match="p1: concurrency must be an integer >= 1 that "
                                         "divides its 4 requests, not 3"):
        load_points(f)
