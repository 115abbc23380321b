"""Bad command-line usage, workloads and --param values (tests/bad_input/harness.py)."""

from __future__ import annotations

import pytest

from tests.bad_input.harness import _case

# ---------------------------------------------------------------- command-line usage
USAGE_BAD = [
    ([], r"the following arguments are required: cmd"),
    (["frobnicate"], r"invalid choice: 'frobnicate'"),
    (["run", "--frobnicate"], r"unrecognized arguments: --frobnicate"),
    (["run", "extra"], r"unrecognized arguments: extra"),
    (["run", "--requests"], r"--requests: expected one argument"),
    (["run", "--requests", ""], r"empty argument after --requests"),
    (["run", "--requests="], r"empty value in '--requests='"),
    (["run", "--workload", ""], r"empty argument after --workload"),
    (["run", "--stats-json", ""], r"empty argument after --stats-json"),
    (["run", "--trace", ""], r"empty argument after --trace"),
    (["run", "--config", ""], r"empty argument after --config"),
    (["run", "--profile", ""], r"empty argument after --profile"),
    (["run", "--profile", " "], r"empty argument after --profile"),
    (["run", "--model", ""], r"empty argument after --model"),
    (["run", "--param", ""], r"empty argument after --param"),
    ([""], r"empty argument as the first argument"),
    (["trace", "validate", ""], r"empty argument after validate"),
    (["replay", ""], r"empty argument after replay"),
    (["rtl", "emit", "-o", ""], r"empty argument after -o"),
    (["run", "--trace-level", "7"], r"argument --trace-level: invalid choice"),
    (["run", "--trace-level", "x"], r"argument --trace-level: invalid int value"),
    (["run", "--trace-level", "0"], r"argument --trace-level: invalid choice"),
    (["run", "--requests", "a.csv", "--workload", "conservation"], r"not allowed with"),
    (["run", "--model", "qwen3-1.7b"], r"--model and --param need --workload"),
    (["run", "--param", "a=1"], r"--model and --param need --workload"),
    (["config"], r"required: config_cmd"),
    (["config", "edit"], r"invalid choice: 'edit'"),
    (["trace"], r"required: trace_cmd"),
    (["trace", "validate"], r"required: file"),
    (["rtl"], r"required: rtl_cmd"),
    (["rtl", "emit"], r"required: -o"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "3"], r"--sector-bytes must be a power"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "0"], r"--sector-bytes must be a power"),
    (["rtl", "emit", "-o", "x.v", "--sector-bytes", "8192"], r"--sector-bytes must be"),
    (["rtl", "stats", "--sector-bytes", "x"], r"invalid int value"),
    (["rtl", "emit", "-o", "x.v", "--profile", "flashy"], r"profile must be one of"),
    (["replay"], r"required: file"),
    (["study"], r"required"),
    (["cosim", "run", "--sim", "ghdl"], r"--sim must be one of"),
    (["cosim", "run", "--window", "5:1", "--waves"], r"--window must be A:B"),
    (["cosim", "run", "--param", "a=1"], r"--param goes with --workload"),
    (["cosim", "soak", "--requests", "0"], r"--requests must be at least 1|--sim"),
    (["cosim", "run", "--csv", "r.csv", "--requests", "-5"], r"--requests must be at least 1"),
]


@pytest.mark.parametrize("argv,match", USAGE_BAD, ids=[" ".join(a[0]) or "none"
                                                      for a in USAGE_BAD])
def test_bad_usage(tmp_path, monkeypatch, capsys, argv, match):
    _case(tmp_path, monkeypatch, capsys, argv, {}, match)


# ---------------------------------------------------------------- workloads and --param
PARAM_BAD = [
    (["--workload", "nope"], r"--workload must be one of conservation, shared-staging"),
    (["--workload", "shared_staging2"], r"--workload must be one of"),
    (["--workload", "conservation", "--param", "scale=2"],
     r"workload conservation has no parameter 'scale'; its parameters are requests"),
    (["--workload", "conservation", "--param", "bogus=1"], r"no parameter 'bogus'"),
    (["--workload", "conservation", "--param", "noequals"], r"--param must be KEY=VALUE"),
    (["--workload", "conservation", "--param", "=5"], r"--param must be KEY=VALUE"),
    (["--workload", "conservation", "--param", "requests="], r"empty value|KEY=VALUE"),
    (["--workload", "conservation", "--param", "requests=1", "--param", "requests=2"],
     r"--param requests given twice"),
    (["--workload", "conservation", "--param", "requests=0"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=-5"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=1.5"], r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=many"],
     r"requests must be a positive"),
    (["--workload", "conservation", "--param", "requests=true"],
     r"requests must be a positive"),
    (["--workload", "conservation", "--param", "nbytes=48"], r"nbytes must be 32, 64 or 128"),
    (["--workload", "conservation", "--param", "page_stride=0"], r"page_stride must be"),
    (["--workload", "shared-staging", "--param", "requests=inf"], r"requests must be"),
    (["--workload", "mshr-grid", "--param", "order=diagonal"], r"order"),
    (["--workload", "placement", "--param", "mapping=spiral"], r"mapping"),
    (["--workload", "llm-decode", "--param", "scale=0"], r"scale must be a positive"),
    (["--workload", "llm-decode", "--param", "request_bytes=48"], r"request_bytes must be"),
    (["--workload", "llm-decode", "--param", "token_id=99999999"], r"token_id must be below"),
    (["--workload", "llm-decode", "--param", "prefix_tokens=50"], r"prefix_tokens"),
    (["--workload", "llm-decode", "--model", "gpt-9"], r"model must be one of qwen3-1.7b"),
    (["--workload", "conservation", "--model", "qwen3-1.7b"],
     r"--model goes with --workload llm-decode"),
    (["--workload", "media-saturation", "--param", "producers=-1"], r"producers"),
    (["--workload", "layout-decode", "--param", "layout=random"],
     r"layout must be one of declaration, execution, not 'random'"),
    (["--workload", "layout-decode", "--param", "scale=0"], r"scale must be a positive"),
    (["--workload", "layout-decode", "--param", "batch=0"], r"batch must be a positive"),
    (["--workload", "layout-decode", "--param", "layers=-1"], r"layers must be a positive"),
    (["--workload", "layout-decode", "--param", "align=48"],
     r"align must be a power of two >= 32, not 48"),
    (["--workload", "layout-decode", "--param", "token_id=99999999"], r"token_id must be below"),
    (["--workload", "layout-decode", "--param", "issue=random"],
     r"issue must be stream or hyperpage, not 'random'"),
    (["--workload", "layout-decode", "--param", "model=deepseek-v3"],
     r"model must use GQA attention .* \(MLA\)"),
]


@pytest.mark.parametrize("args,match", PARAM_BAD, ids=[" ".join(a[0][1:]) for a in PARAM_BAD])
def test_bad_workload_or_param(tmp_path, monkeypatch, capsys, args, match):
    _case(tmp_path, monkeypatch, capsys, ["run", *args, "--stats-json", "s.json"], {}, match)

