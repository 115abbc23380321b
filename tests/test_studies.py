"""The studies of hbfsim/studies/ (quick sweeps), their registry, runner and command line.

Source: the HBF-Sim paper §5.2-§6.2 (figures in docs/sources.md). Each quick study runs in
about a second; the whole file in a few seconds.
"""

import argparse
import csv
import json
import subprocess
import sys

import pytest

from hbfsim.studies import STUDIES, Study, main, register, run_study, study_names


def read(path) -> str:
    with open(path) as f:
        return f.read()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Every quick study, run once (two worker processes) and shared by the tests."""
    base = tmp_path_factory.mktemp("results")
    return {n: run_study(n, base / n, quick=True, workers=2) for n in study_names()}


def test_every_study_writes_csv_plot_and_summaries(quick):
    assert set(quick) == {"media-saturation", "mshr-feedback", "placement", "rw-isolation",
                          "page-service", "serving"}
    for name, s in quick.items():
        files = s["files"]
        with open(files["csv"], newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == s["runs"] > 0 and "host_seconds" in rows[0]
        with open(files["plot"], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        text = read(files["summary_md"])
        assert text.startswith("# ") and "|" in text and STUDIES[name].source in text
        on_disk = json.loads(read(files["summary_json"]))
        assert on_disk["study"] == name and on_disk["quick"] is True
        assert on_disk["runs"] == s["runs"]


def test_media_saturation_scales_linearly_with_channels(quick):
    s = quick["media-saturation"]
    bw = {int(c): v for c, v in s["bandwidth_gbs"].items()}
    assert sorted(bw) == [1, 2, 4, 8, 16]
    for c in (2, 4, 8, 16):
        assert 1.9 < bw[c] / bw[c // 2] <= 2.0 + 1e-9        # each doubling ~2x
    assert s["scaling_1_to_16"] > 15.0                        # source 15.94x
    for c, f in s["fraction_of_ceiling"].items():
        assert 0.97 < f <= 1.0 + 1e-9
    for c, pub in s["published"]["bandwidth_gbs"].items():
        assert bw[int(c)] == pytest.approx(pub, rel=0.02)
    # fixed 32 slots in the whole stack: 16 channels give the one-channel bandwidth
    assert s["fixed_32_slots_gbs"]["16"] == pytest.approx(bw[1], rel=0.005)
    # 512 producers fill all 512 slots at 16 channels (source 138.291 GB/s)
    assert s["producers_16ch_gbs"]["512"] > 0.95 * bw[16]


def test_page_service_window_grows_by_64_dtr_over_channels(quick):
    s = quick["page-service"]
    for key, g in s["growth"].items():
        assert g["hbfsim_us"] == pytest.approx(64 * 14 / g["channels"], abs=0.01), key
    for key, w in s["windows"].items():
        assert w["hbfsim_us"] == pytest.approx(w["source_hbfsim_us"], abs=0.2), key
        assert w["mqsim_us"] > w["hbfsim_us"]      # MQSim's ONFI/NVMe overheads
    assert s["page_reads"] == [64]


def test_mshr_feedback_closed_loop_benefit_exceeds_replay_under_pressure(quick):
    cases = {(c["slot_kind"], c["t_read_us"], c["slots"]): c
             for c in quick["mshr-feedback"]["cases"] if c["entries"] == 32}
    for slots in (32, 128):
        c = cases[("mshr", 15.0, slots)]
        assert c["closed_reduction"] > 0.4
        assert c["closed_reduction"] - c["replay_reduction"] > 0.3
        assert c["replay_off"] == c["closed_off"]     # replay on the same config is exact
    big = cases[("mshr", 15.0, 4096)]
    assert big["closed_reduction"] == pytest.approx(big["replay_reduction"], abs=0.005)
    c1 = cases[("mshr", 1.0, 128)]
    assert c1["closed_reduction"] - c1["replay_reduction"] > 0.3


def test_placement_striping_helps_at_stride_32_hurts_at_stride_4(quick):
    s = quick["placement"]
    st = {v["stride"]: v for v in s["striping"].values() if v["pages"] == 64}
    assert st[32]["speedup"] > 3.5                 # source 3.94x
    assert st[4]["speedup"] < 0.6                  # source 0.51x
    assert st[32]["subarrays_interleave"] == 1 and st[32]["subarrays_striping"] == 4
    assert st[4]["subarrays_interleave"] == 8 and st[4]["subarrays_striping"] == 4
    assert st[32]["page_reads"] == [64, 64]
    for m, v in s["diagnostic"]["32"].items():     # 16 array reads for every mapping
        assert v["page_reads"] == 16, m


def test_rw_isolation_3r1w_protects_reads_at_the_cost_of_writes(quick):
    s = quick["rw-isolation"]
    h = s["headline_4_pages"]["100"]
    assert h["read_p95_3r1w"] < h["read_p95_shared"]
    assert h["write_ratio"] > 3.0                  # source 4.00x
    assert h["kernel_change"] > 0.0                # source +17.5%
    ro = s["read_only_p95"]
    for d, by in s["table"]["4"].items():
        for pol, v in by.items():
            assert v["read_p95_gpu_cycles"] >= ro[d]
    # once the programs are done (250 us) sharing is better again, as in the source
    assert s["headline_4_pages"]["250"]["read_change"] > 0


def test_workers_do_not_change_results(tmp_path):
    a = run_study("page-service", tmp_path / "a", quick=True, workers=1)
    b = run_study("page-service", tmp_path / "b", quick=True, workers=2)
    assert a["windows"] == b["windows"] and a["growth"] == b["growth"]
    assert read(a["files"]["csv"]).count("\n") == read(b["files"]["csv"]).count("\n")


def test_bad_input_names_the_value(tmp_path, capsys):
    with pytest.raises(ValueError, match="'nope'"):
        run_study("nope", tmp_path)
    with pytest.raises(ValueError, match="workers"):
        run_study("page-service", tmp_path, quick=True, workers=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run_study("page-service", tmp_path / "file", quick=True, workers=1)
    assert main(["nope", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err


def test_register_adds_the_study_subcommand(tmp_path, capsys):
    ap = argparse.ArgumentParser(prog="hbfsim")
    register(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["study", "page-service", "--quick", "--out", str(tmp_path),
                       "--workers", "1", "--no-progress"])
    assert a.func(a) == 0
    out = capsys.readouterr().out
    assert "page-service --quick" in out and "growth C1/burst: 896.000" in out
    assert (tmp_path / "runs.csv").is_file() and (tmp_path / "plot.png").is_file()
    a = ap.parse_args(["study", "page-service", "--workers", "0"])
    with pytest.raises(ValueError, match="--workers"):
        a.func(a)


def test_every_study_prints_a_headline(quick):
    for name, s in quick.items():
        lines = STUDIES[name].headline(s)
        assert lines and all(isinstance(x, str) and x for x in lines), name


def test_serving_quick_runs_every_configuration_to_completion(quick):
    s = quick["serving"]
    assert len(s["t4"]) == 6 and len(s["t5"]) == 3 and len(s["t6"]) == 7
    for table in ("t4", "t5", "t6"):
        for r in s[table].values():
            assert r["completed"] == r["turns"] > 0 and r["completion_s"] > 0
    for v in s["t7"].values():
        parts = (v["reduced_weight_reads"] + v["increased_kv_reads"] + v["avoided_prefill"]
                 + v["other"])
        assert abs(parts - v["net"]) < 1e-9


def test_registry_names_studies_without_importing_them():
    # what `hbfsim --help` does: build the parser; no study module, matplotlib or pool loads
    code = ("import json, sys; from hbfsim.cli import _parser; _parser(); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(("
            "'hbfsim.studies.', 'matplotlib', 'concurrent.futures.process')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == ["hbfsim.studies.base", "hbfsim.studies.cli",
                               "hbfsim.studies.registry", "hbfsim.studies.runner"]
    assert "page-service" in STUDIES and "nope" not in STUDIES
    assert len(STUDIES) == len(study_names()) == 6


def test_every_study_implements_the_interface():
    for name in study_names():
        s = STUDIES[name]
        assert isinstance(s, Study) and s.name == name and s.title and s.source
        if name == "serving":
            assert s.cites() == f"the serving paper {s.source} and docs/results-serving.md"
        else:
            assert s.cites() == (f"the HBF-Sim paper {s.source} and docs/sources.md (figures "
                                 "to compare against)")


def test_a_study_missing_a_method_cannot_be_made():
    class Half(Study):
        name, title, source = "half", "Half", "§0"

        def tasks(self, quick):
            return []

    with pytest.raises(TypeError, match="abstract"):
        Half()


def test_python_m_runs_the_subcommand(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hbfsim.studies", "page-service", "--quick",
                        "--out", str(tmp_path), "--workers", "1", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "growth C1/burst: 896.000" in r.stdout and (tmp_path / "summary.json").is_file()
