"""Check everything before work starts (issue 26): every command refuses bad input before it
creates a folder, writes a journal line or a cache entry, or starts a build, a proof, a
synthesis or a characterization; sizes are bounded by what they cost; odd but valid input is
accepted (the corpus: tests/bad_input/harness.py).

The HBF characterization cache is pointed at the case's own folder (``XDG_CACHE_HOME``), so
a characterization that starts before the refusal shows as a changed folder.
"""

from __future__ import annotations

import pytest

from tests.bad_input.harness import _case, _run

DEV = '[sweep]\nname = "t"\nworkloads = ["conservation"]\n'
SRV = ('[sweep]\nname = "s"\nkind = "serve"\nworkloads = ["agentic-qwen32b:scale=0.0008"]\n'
       '[base]\nhbf_model = "constant"\n')
WL = ["--workload", "agentic-qwen32b:scale=0.0008"]
SMALL_HBF = {"hbf.toml": 'profile = "reference"\nchannels = 1\n'}


def _json_model(heads, kv, hidden=256):
    return ('{"num_hidden_layers": 1, "hidden_size": %d, "num_attention_heads": %d, '
            '"num_key_value_heads": %d, "head_dim": 128, "intermediate_size": 512, '
            '"vocab_size": 1024, "tie_word_embeddings": true}' % (hidden, heads, kv))


def _sweep(grid, *extra):
    return (["sweep", "g.toml", "--out", "o", "--no-progress", *extra], {"g.toml": grid})


# (argv, files, regular expression of the one line)
CHECK_FIRST_BAD = [
    # ------------------------------------------------------------------ sweeps: identity
    (*_sweep(DEV + "[grid]\nt_read_us = [15, 15.0]\n"),
     r"'t_read_us' lists a value twice \(15 and 15.0\)"),
    (*_sweep(DEV.replace('["conservation"]', '["media-saturation", "media_saturation"]')),
     r"points 0 \(workload media-saturation\) and 1 \(workload media_saturation\) are one "
     r"run"),
    (*_sweep(DEV + "[grid]\nchannels = [1, 2]\nhbf_num_channels = [4]\n"),
     r"\[grid\] 'channels' and 'hbf_num_channels' are one key \(channels\)"),
    (*_sweep(DEV + "[base]\nchannels = 2\n[grid]\nhbf_num_channels = [4]\n"),
     r"\[grid\] 'hbf_num_channels' is also fixed in \[base\] \(as 'channels'\)"),
    (*_sweep(DEV + "[params]\npage-stride = 2\n[grid]\n\"param.page_stride\" = [3]\n"),
     r"'param.page_stride' is also fixed in \[params\] \(as 'page-stride'\)"),
    (*_sweep(DEV + "[params]\npage-stride = 2\npage_stride = 3\n"),
     r"\[params\] 'page-stride' and 'page_stride' are one parameter"),
    (*_sweep(DEV + "[grid]\n\"param.requests\" = [8, 8.0]\n"), r"lists a value twice"),
    # ------------------------------------------------------------------ sweeps: sizes
    (*_sweep(DEV + "[grid]\n" + "".join(f'"param.p{i}" = [{", ".join(map(str, range(10)))}]\n'
                                        for i in range(8))),
     r"the grid has 100,000,000 points \(10 param.p0 x .* x 1 workload\(s\)\), more than "
     r"--max-points 10,000"),
    (*_sweep(DEV + "[grid]\nchannels = [1, 2]\nt_read_us = [5, 10]\n", "--max-points", "3"),
     r"the grid has 4 points \(2 channels x 2 t_read_us x 1 workload\(s\)\), more than "
     r"--max-points 3"),
    (*_sweep(DEV, "--max-points", "0"), r"--max-points must be a positive integer, not '0'"),
    (*_sweep(DEV, "--max-points", "999999999999"), r"--max-points 999,999,999,999 is more than"),
    (*_sweep(DEV, "--workers", "1000000000"), r"--workers 1,000,000,000 is more than"),
    (*_sweep(DEV + '[base]\nconfig = "missing.toml"\n'),
     r"point 0 \(workload conservation\): cannot read configuration 'missing.toml'"),
    # ------------------------------------------------------------------ sweeps: serve points
    (*_sweep(SRV + '[grid]\nmodel = ["qwen3-32b", "gpt-9"]\n'),
     r"point 1 \(workload agentic-qwen32b:scale=0.0008, model='gpt-9'\): model: model must "
     r"be one of"),
    (*_sweep(SRV.replace('scale=0.0008"]', 'scale=0.0008", "missing.jsonl"]')),
     r"point 1 \(workload missing.jsonl\): workload: .*no such trace file"),
    (*_sweep(SRV + '[grid]\nweights = ["hbm", "split"]\nhbf = [4]\n'
             .replace("hbf = [4]", "")),
     r"point 1 .*weights='split'.*model 'qwen3-32b' is dense"),
    (*_sweep(SRV + "[grid]\npage_tokens = [16, 7]\n"),
     r"point 1 .*page_tokens=7.*page_tokens 7 must divide the workload's 512-token"),
    (*_sweep(SRV.replace('hbf_model = "constant"', "") + '[grid]\nhbf_profile = ["nope"]\n'),
     r"point 0 .*hbf_profile='nope'.*profile must be one of"),
    (*_sweep(SRV.replace('hbf_model = "constant"', "") + '[grid]\nhbf_config = ["no.toml"]\n'),
     r"point 0 .*hbf_config='no.toml'.*cannot read configuration 'no.toml'"),
    (*_sweep(SRV + "[grid]\ngpus = [1, 99999999999999999999]\n"),
     r"point 1 .*gpus 99999999999999999999 is more than 65,536"),
    (*_sweep(SRV.replace('scale=0.0008"]', 'scale=0.0008", "agentic-qwen32b:seed=0,'
                                           'scale=0.00080"]')),
     r"points 0 .* and 1 .* are one run"),
    (*_sweep(SRV.replace("scale=0.0008", "scale=1e9")),
     r"scale=1e\+09 gives 25,000,000,000,000 turns, more than"),
    (*_sweep(SRV + '[grid]\nmax-batch = [64]\nmax_batch = [128]\n'),
     r"\[grid\] 'max-batch' and 'max_batch' are one key \(max_batch\)"),
    # ------------------------------------------------------------------ study --set
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "bogus=1"], {},
     r"--set: unknown configuration key 'bogus'"),
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "channels=4"], {},
     r"--set channels: study media-saturation sets channels itself"),
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "channel_bw_gbps=nan"],
     {}, r"channel_bw_gbps must be a finite number, not nan"),
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "page_buffers=two"], {},
     r"page_buffers must be an integer, not 'two'"),
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "trace_file=t.csv"], {},
     r"--set trace_file: a study writes no trace"),
    (["study", "media-saturation", "--quick", "--out", "o", "--set", "contract=1"], {},
     r"configuration key 'contract' .* is retired .*docs/history.md"),
    (["study", "rw-isolation", "--quick", "--out", "o", "--set", "hbf_num_stacks=2", "--set",
      "stacks=2"], {}, r"configuration key 'stacks' given twice"),
    (["study", "serving", "--quick", "--out", "o", "--set", "host_ports=stack"], {},
     r"--set applies to the device studies; serving takes no HbfConfig"),
    (["study", "flashaccel", "--quick", "--out", "o", "--set", "channels=4"], {},
     r"--set applies to the device studies; flashaccel takes no HbfConfig of its own: its "
     r"device runs are fixed configurations of its own, which take only --engine"),
    (["study", "flashaccel", "--quick", "--out", "o", "--engine", "reference", "--set",
      "channels=4"], {}, r"--set applies to the device studies; flashaccel takes no"),
    (["study", "serving", "--quick", "--out", "o", "--set", "engine=fast"], {},
     r"--set: engine must be one of compiled, reference, not 'fast'"),
    (["study", "serving", "--quick", "--out", "o", "--engine", "reference", "--set",
      "engine=compiled"], {}, r"--engine and --set engine=...: give one"),
    # ------------------------------------------------------------------ serve: before the
    # characterization (its cache would appear in the folder)
    (["serve", "--workload", "missing.jsonl", "--hbf-config", "hbf.toml"], SMALL_HBF,
     r"--workload: workload 'missing.jsonl': no such trace file"),
    (["serve", *WL, "--page-tokens", "7", "--hbf-config", "hbf.toml"], SMALL_HBF,
     r"--page-tokens 7 must divide the workload's 512-token hash blocks"),
    (["serve", *WL, "--model", "gpt-9", "--hbf-config", "hbf.toml"], SMALL_HBF,
     r"--model: model must be one of"),
    (["serve", *WL, "--weights", "split", "--hbf-config", "hbf.toml"], SMALL_HBF,
     r"--weights split places routed experts; model 'qwen3-32b' is dense"),
    (["serve", *WL, "--model", "kv4.json", "--hbf-config", "hbf.toml"],
     {**SMALL_HBF, "kv4.json": _json_model(2, 4)},
     r"kv_heads \(4\) must divide q_heads \(2\).*GQA"),
    (["serve", *WL, "--hbf-profile", "nope"], {}, r"--hbf-profile: profile must be one of"),
    (["serve", *WL, "--hbf-config", "no.toml"], {}, r"--hbf-config: cannot read configuration"),
    (["serve", *WL, "--hbf-config", "hbf.toml", "--hbm", "4", "--hbf", "4", "--gpus", "2",
      "--tp", "1", "--ep", "2"], SMALL_HBF, r"--ep must divide --tp 1, not 2"),
    # ------------------------------------------------------------------ serve: sizes
    (["serve", "--workload", "agentic-qwen32b:scale=1e9", "--hbf-config", "hbf.toml"],
     SMALL_HBF, r"scale=1e\+09 gives 25,000,000,000,000 turns, more than [\d,]+ \(this "
                r"machine's memory"),
    (["serve", *WL, "--gpus", "99999999999999999999", "--tp", "1"], {},
     r"--gpus 99999999999999999999 is more than 65,536"),
    (["serve", *WL, "--gpus", "70000"], {}, r"--gpus 70000 is more than 65,536"),
    # ------------------------------------------------------------------ models obey GQA
    (["run", "--workload", "llm-decode", "--model", "kv4.json"], {"kv4.json": _json_model(2, 4)},
     r"kv_heads \(4\) must divide q_heads \(2\)"),
    (["run", "--workload", "llm-decode", "--model", "kv2.json"],
     {"kv2.json": _json_model(3, 2, 384)}, r"kv_heads \(2\) must divide q_heads \(3\)"),
    (["run", "--workload", "llm-decode", "--model", "deep.json"],
     {"deep.json": "[" * 100000 + "]" * 100000}, r"deep.json: not valid JSON: nested too "
                                                 r"deeply"),
    (["serve", *WL, "--model", "deep.json"], {"deep.json": '{"a": ' * 100000 + "1" +
                                                           "}" * 100000},
     r"--model: cannot read model config 'deep.json': JSON nested too deeply"),
    # ------------------------------------------------------------------ explicit_map
    (["config", "show", "--config", "c.toml"],
     {"c.toml": 'placement = "explicit"\nexplicit_map = [[0, 100, 0], [50, 200, 1]]\n'},
     r"explicit_map ranges \[0, 100\] and \[50, 200\] overlap \(pages 50..100\)"),
    (["config", "show", "--config", "c.toml"],
     {"c.toml": 'placement = "explicit"\nexplicit_map = [[300, 400, 1], [0, 300, 0]]\n'},
     r"explicit_map ranges \[0, 300\] and \[300, 400\] overlap \(pages 300..300\)"),
    # ------------------------------------------------------------------ cosim: before the build
    (["cosim", "run", "--seed", "-1"], {}, r"--seed must be a non-negative integer, not -1"
                                           r"|--seed must be a non-negative integer below"),
    (["cosim", "soak", "--seed", "-1"], {}, r"--seed must be a non-negative integer below"),
    (["rtl", "prove", "--depth", "65"], {}, r"--depth 65 is more than 64"),
    # a workload's count parameters, bounded by the golden model's speed
    (["run", "--workload", "conservation", "--param", "requests=1000000000000"], {},
     r"requests = 1,000,000,000,000 is more than 100,000,000"),
    (["run", "--workload", "media-saturation", "--param", "pages-per-producer=100000001"],
     {}, r"pages-per-producer = 100,000,001 is more than 100,000,000"),
    (["cosim", "run", "--requests", "100000000000000"], {},
     r"--requests 100,000,000,000,000 is more than 10,000,000"),
    (["cosim", "soak", "--requests", "1000000000000"], {},
     r"--requests 1,000,000,000,000 is more than 10,000,000"),
    # ------------------------------------------------------------------ rtl: before proof,
    # elaboration and synthesis
    (["rtl", "prove", "--block", "mshr", "--waves-dir", "f"], {"f": "x"},
     r"--waves-dir 'f' is a file, not a folder"),
    (["rtl", "prove", "--block", "mshr", "--waves-dir", "f/sub"], {"f": "x"},
     r"--waves-dir 'f/sub': 'f' is a file, not a folder"),
    (["rtl", "prove", "--block", "mshr", "--waves-dir", "/proc/hbfsim-waves"], {},
     r"--waves-dir '/proc/hbfsim-waves': directory '/proc' is not writable"),
    (["rtl", "timing", "--freq", "0"], {}, r"--freq must be a finite frequency in \(0, 1000\] "
                                           r"MHz, not 0"),
    (["rtl", "timing", "--freq", "-5"], {}, r"--freq must be .* not -5"),
    (["rtl", "timing", "--freq", "nan"], {}, r"--freq must be .* not nan"),
    (["rtl", "timing", "--freq", "inf"], {}, r"--freq must be .* not inf"),
    (["rtl", "timing", "--keep", "f"], {"f": "x"}, r"--keep 'f' is a file, not a folder"),
    (["rtl", "timing", "--seed", "-1"], {}, r"--seed must be a non-negative integer below "
                                            r"2\*\*31"),
]


@pytest.mark.parametrize("argv,files,match", CHECK_FIRST_BAD,
                         ids=[" ".join(c[0])[:60] for c in CHECK_FIRST_BAD])
def test_refused_before_any_work(tmp_path, monkeypatch, capsys, argv, files, match):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


# ---------------------------------------------------------------- odd but valid
BOM = "\ufeff"
ODD_BUT_VALID = [
    (["sweep", "g.toml", "--out", "o", "--no-progress", "--workers", "1"],
     {"g.toml": BOM + DEV + "[params]\nrequests = 8\n"}, "o/results.csv"),
    (["sweep", "g.toml", "--out", "o", "--no-progress", "--workers", "1"],
     {"g.toml": DEV + "[params]\nrequests = 8\npage-stride = 3\n"}, "o/results.csv"),
    (["sweep", "g.toml", "--out", "o", "--no-progress", "--workers", "1"],
     {"g.toml": DEV + '[params]\nrequests = 8\n[grid]\n"param.page-stride" = [1, 3]\n'},
     "o/results.csv"),
    (["sweep", "g.toml", "--out", "o", "--no-progress", "--workers", "1"],
     {"g.toml": SRV.replace("hbf_model", "hbf-model") + "[grid]\nmax-batch = [64]\n"},
     "o/results.csv"),
    (["run", "--workload", "llm-decode", "--model", "m.toml", "--param", "request_bytes=128",
      "--stats-json", "s.json"],
     {"m.toml": "\n".join(f"{k} = {v}" for k, v in (
         ("num_hidden_layers", 1), ("hidden_size", 256), ("num_attention_heads", 2),
         ("num_key_value_heads", 1), ("head_dim", 128), ("intermediate_size", 512),
         ("vocab_size", 1024), ("tie_word_embeddings", "true"))) + "\n"}, "s.json"),
    (["run", "--workload", "llm-decode", "--model", "m.json", "--param", "request_bytes=128",
      "--stats-json", "s.json"],
     {"m.json": BOM + _json_model(2, 1)}, "s.json"),
    (["serve", *WL, "--model", "m.json", "--hbf", "0", "--hbf-model", "constant",
      "--no-progress", "--json", "s.json"], {"m.json": BOM + _json_model(2, 1)}, "s.json"),
    (["config", "show", "--config", "c.toml"],
     {"c.toml": 'placement = "explicit"\nexplicit_map = [[0, 100, 0], [101, 200, 1]]\n'},
     None),
]


@pytest.mark.parametrize("argv,files,made", ODD_BUT_VALID,
                         ids=[" ".join(c[0])[:50] + str(i) for i, c in
                              enumerate(ODD_BUT_VALID)])
def test_odd_but_valid_is_accepted(tmp_path, monkeypatch, capsys, argv, files, made):
    rc, out, err, _, _ = _run(tmp_path, monkeypatch, capsys, argv, files)
    assert rc == 0 and err == "", err
    if made:
        assert (tmp_path / made).stat().st_size > 0


def test_a_trace_bigger_than_memory_allows_is_refused_before_it_is_read(tmp_path, monkeypatch,
                                                                         capsys):
    """The bound is half of the physical memory at 5.2 bytes a trace byte: on a machine of
    1 MB (pretended here), a 200 kB trace is refused by its size, unread."""
    from hbfsim.serve import agentic

    monkeypatch.setattr(agentic, "physical_memory", lambda: 1_000_000)
    _case(tmp_path, monkeypatch, capsys, ["serve", "--workload", "t.jsonl", "--hbf", "0",
                                          "--hbf-model", "constant"],
          {"t.jsonl": "not a trace\n" * 20000},
          r"--workload t.jsonl: 240,000 bytes, more than 96,153 \(a loaded trace takes about "
          r"5.2 bytes of memory a byte")
