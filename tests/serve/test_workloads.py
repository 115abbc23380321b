"""Workloads of the serving level: the agentic generator, its presets, the trace readers."""

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hbfsim.serve.agentic import PRESETS, generate, preset
from hbfsim.serve.traces import (MAX_TOKENS, load_workload, read_trace, sample_path)
from hbfsim.serve.workload import Turn, Workload, WorkloadError

ROOT = Path(__file__).resolve().parents[2]


def columns(w):
    t = w.turns
    return (np.array([x.session for x in t]), np.array([x.index for x in t]),
            np.array([x.input_tokens for x in t]), np.array([x.output_tokens for x in t]),
            np.array([x.think_s for x in t]))


# --- generator --------------------------------------------------------------------------

def test_same_seed_same_workload_other_seed_other():
    a = generate(200, seed=5, system_prompt_tokens=1000, system_prompts=2)
    b = generate(200, seed=5, system_prompt_tokens=1000, system_prompts=2)
    c = generate(200, seed=6, system_prompt_tokens=1000, system_prompts=2)
    assert a == b
    assert a.turns != c.turns


def test_lognormal_medians_and_geometric_mean():
    # Big window and cap so that nothing truncates the draws being measured.
    w = generate(4000, seed=1, turns_per_session=6, max_turns_per_session=10_000,
                 first_prompt=(3000, 0.8), followup_prompt=(250, 1.2), output=(180, 1.0),
                 think_s=(3.0, 0.7), arrival_rate=2.0, max_context=MAX_TOKENS)
    sess, idx, inp, out, think = columns(w)
    later = np.flatnonzero(idx > 0)
    first = idx == 0
    followup = inp[later] - inp[later - 1] - out[later - 1]
    # Median standard error of a lognormal sample: ~1.25 sigma / sqrt(n) relative; 4 % is
    # over four of them for the smallest sample here (4,000 first prompts).
    assert np.median(inp[first]) == pytest.approx(3000, rel=0.04)
    assert np.median(followup) == pytest.approx(250, rel=0.04)
    assert np.median(out) == pytest.approx(180, rel=0.04)
    assert np.median(think[later]) == pytest.approx(3.0, rel=0.04)
    assert np.all(think[first] == 0)
    assert np.bincount(sess).mean() == pytest.approx(6, rel=0.05)
    t0 = np.array([x.arrival_s for x in w.turns if x.index == 0])
    assert t0[0] == 0 and np.all(np.diff(t0) >= 0)
    assert np.diff(t0).mean() == pytest.approx(0.5, rel=0.05)
    assert all(x.arrival_s is None for x in w.turns if x.index > 0)


@pytest.mark.parametrize("sys_tokens", [0, 1024, 1300])
def test_context_grows_and_prefix_hashes_follow_it(sys_tokens):
    B = 512
    w = generate(300, seed=2, turns_per_session=8, block_tokens=B, max_context=40_000,
                 system_prompt_tokens=sys_tokens, system_prompts=3).validate()
    owner = {}
    prev = None
    for t in w.turns:
        assert t.input_tokens + t.output_tokens <= 40_000
        full = t.input_tokens // B
        if t.index > 0:
            assert t.input_tokens > prev.input_tokens + prev.output_tokens
            # Turn k re-sends turn k-1's input and output: the full blocks of that stream
            # are turn k's leading blocks, and turn k-1's full input blocks are among them.
            carried = (prev.input_tokens + prev.output_tokens) // B
            assert carried <= full
            assert t.block_hashes[:prev.input_tokens // B] == \
                prev.block_hashes[:prev.input_tokens // B]
        for j, h in enumerate(t.block_hashes[:full]):
            # One id per block position in one session; shared across sessions only for
            # the system prompt's full blocks.
            key = owner.setdefault(h, (t.session, j))
            assert key[1] == j
            if key[0] != t.session:
                assert j < sys_tokens // B
        if t.input_tokens % B:
            assert t.block_hashes[-1] not in owner
            owner[t.block_hashes[-1]] = (t.session, -1)
        prev = t
    if sys_tokens >= B:
        heads = {t.block_hashes[0] for t in w.turns}
        assert len(heads) == 3


def test_window_ends_a_session_and_shortens_a_first_turn():
    w = generate(500, seed=3, turns_per_session=50, first_prompt=(9000, 0.5),
                 max_context=10_000).validate()
    sess, idx, inp, out, _ = columns(w)
    assert np.all(inp + out <= 10_000)
    assert np.bincount(sess).mean() < 10


@pytest.mark.parametrize("kw, field", [
    (dict(sessions=0), "sessions"),
    (dict(turns_per_session=0.5), "turns_per_session"),
    (dict(first_prompt=(0, 1)), "first_prompt"),
    (dict(output=(100, -1)), "output"),
    (dict(think_s="x"), "think_s"),
    (dict(arrival_rate=0.0), "arrival_rate"),
    (dict(arrival_rate="fast"), "arrival_rate"),
    (dict(turns_per_session=(3, 1)), "turns_per_session"),
    (dict(seed=1.5), "seed"),
    (dict(think_s=(-1, 0)), "think_s"),
    (dict(system_prompt_tokens=200_000), "max_context"),
    (dict(block_tokens=0), "block_tokens"),
    (dict(turns_sigma=-0.1), "turns_sigma"),
    (dict(turns_sigma=5.0), "turns_sigma"),
    (dict(turns_sigma="wide"), "turns_sigma"),
])
def test_bad_generator_parameter_is_named(kw, field):
    args = dict(dict(sessions=10, seed=0), **kw)
    with pytest.raises(WorkloadError, match=f"'{field}'"):
        generate(args.pop("sessions"), **args)


def test_turn_count_spread():
    """``turns_sigma`` 0: every session has the mean count; a positive sigma keeps the mean
    (lognormal) and spreads less than the geometric default (coefficient of variation ~1)."""
    cv = {}
    for sigma in (None, 0.0, 0.3):
        w = generate(3000, seed=4, turns_per_session=20, turns_sigma=sigma,
                     max_context=10 ** 7)
        n = np.bincount(columns(w)[0])
        assert abs(n.mean() - 20) < 1.0, (sigma, n.mean())
        cv[sigma] = n.std() / n.mean()
    assert cv[0.0] == 0 and 0.25 < cv[0.3] < 0.35 and 0.9 < cv[None] < 1.05


def test_zero_think_time_is_allowed():
    w = generate(20, seed=0, think_s=(0, 1.0))
    assert {t.think_s for t in w.turns} == {0.0}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_scale_gives_exact_turns(name):
    w = preset(name, scale=0.002, seed=4).validate()
    assert len(w.turns) == max(1, round(PRESETS[name].turns * 0.002))
    assert w == preset(name, scale=0.002, seed=4)


def test_qwen_preset_matches_the_table4_inference():
    # docs/serving-workloads.md: serving paper Table 4 implies ~24.2k input tokens per turn and a
    # 3.47 % share that no configuration hits; the preset is tuned to both.
    w = preset("agentic-qwen32b", scale=0.4, seed=0)
    _, idx, inp, out, _ = columns(w)
    B = w.block_tokens
    later = np.flatnonzero(idx > 0)
    miss = inp.copy()
    miss[later] = inp[later] - B * ((inp[later - 1] + out[later - 1]) // B)
    assert inp.mean() == pytest.approx(24_200, rel=0.15)
    assert miss.sum() / inp.sum() == pytest.approx(0.0347, rel=0.2)
    longer = preset("agentic-500k", scale=0.02, seed=0)
    assert longer.input_tokens / len(longer.turns) > 1.5 * inp.mean()


# --- Workload.validate ------------------------------------------------------------------

GOOD = (Turn(0, 0, 600, 5, (1, 2), 0.0), Turn(0, 1, 1200, 5, (1, 3, 4), None, 1.0),
        Turn(1, 0, 10, 1, (5,), 2.0))


@pytest.mark.parametrize("pos, change, field", [
    (1, dict(index=2), "index"),
    (2, dict(index=1), "index"),
    (0, dict(output_tokens=0), "output_tokens"),
    (0, dict(input_tokens=True), "input_tokens"),
    (1, dict(block_hashes=(1, 3)), "block_hashes"),
    (1, dict(block_hashes=[1, 3, 4]), "block_hashes"),
    (0, dict(arrival_s=None), "arrival_s"),
    (2, dict(arrival_s=math.inf), "arrival_s"),
    (1, dict(think_s=-1.0), "think_s"),
    (2, dict(session=-1), "session"),
])
def test_validate_names_turn_and_field(pos, change, field):
    assert Workload("w", 512, GOOD).validate().turns == GOOD
    turns = list(GOOD)
    turns[pos] = replace(turns[pos], **change)
    with pytest.raises(WorkloadError) as e:
        Workload("w", 512, tuple(turns)).validate()
    msg = str(e.value)
    assert "\n" not in msg and f"turn {pos} " in msg and repr(field) in msg


# --- trace readers ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt, turns, sessions", [
    ("mooncake", 40, 40), ("azure", 40, 40), ("burstgpt", 38, 38)])
def test_samples_read_through_package_resources(fmt, turns, sessions):
    w = load_workload(f"sample-{fmt}")
    assert (len(w.turns), w.sessions, w.block_tokens) == (turns, sessions, 512)
    arrivals = [t.arrival_s for t in w.turns]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals)
    assert w == read_trace(sample_path(fmt))
    hashes = [h for t in w.turns for h in t.block_hashes]
    if fmt == "mooncake":
        # Generated from agentic sessions: later turns re-send earlier prefixes.
        assert len(set(hashes)) < len(hashes) / 2
    else:
        assert len(set(hashes)) == len(hashes)


def test_sample_values_are_the_files():
    w = load_workload("sample-azure")
    first = sample_path("azure").read_text().splitlines()[1:3]
    assert [f"{t.input_tokens},{t.output_tokens}" for t in w.turns[:2]] == \
        [line.split(",", 1)[1] for line in first]
    assert w.turns[1].arrival_s == pytest.approx(52.05461 - 47.476, abs=1e-6)
    b = load_workload("sample-burstgpt")
    lines = sample_path("burstgpt").read_text().splitlines()[1:]
    ok = [line.split(",") for line in lines if line.split(",")[3] != "0"]
    assert [(t.input_tokens, t.output_tokens) for t in b.turns] == \
        [(int(r[2]), int(r[3])) for r in ok]


def test_samples_are_what_the_script_writes(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "make_sample_traces", ROOT / "bench" / "make_sample_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(tmp_path)
    for fmt in ("mooncake", "azure", "burstgpt"):
        packaged = sample_path(fmt)
        assert (tmp_path / packaged.name).read_bytes() == packaged.read_bytes()


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "burstgpt"])
def test_crlf_bom_and_blank_lines_are_accepted(tmp_path, fmt):
    src = sample_path(fmt)
    lines = src.read_text().splitlines()
    text = "\ufeff" + "\r\n".join(lines[:3] + ["", "  "] + lines[3:]) + "\r\n\r\n"
    p = tmp_path / src.name
    p.write_bytes(text.encode())
    assert read_trace(p).turns == read_trace(src).turns


def test_burstgpt_session_column_groups_turns(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,"
                 "Total tokens,Log Type\n"
                 "1,a,0,ChatGPT,10,5,15,Conversation log\n"
                 "2,b,0,ChatGPT,20,5,25,Conversation log\n"
                 "3,a,0,ChatGPT,30,5,35,Conversation log\n")
    w = read_trace(p)
    assert [(t.session, t.index, t.input_tokens, t.arrival_s) for t in w.turns] == \
        [(0, 0, 10, 0.0), (0, 1, 30, 2.0), (1, 0, 20, 1.0)]


# --- load_workload ----------------------------------------------------------------------

def test_load_workload_preset_parameters():
    w = load_workload("agentic-qwen32b:scale=0.004,seed=3,think_s=5/0.5,arrival_rate=none")
    assert len(w.turns) == 100 and w.name == "agentic-qwen32b(scale=0.004,seed=3)"
    assert {t.arrival_s for t in w.turns if t.index == 0} == {0.0}
    assert w == preset("agentic-qwen32b", scale=0.004, seed=3, think_s=(5, 0.5),
                       arrival_rate=None)


def test_load_workload_path_and_explicit_format(tmp_path):
    p = tmp_path / "trace.txt"
    p.write_bytes(sample_path("azure").read_bytes())
    assert load_workload(p).turns == load_workload("sample-azure").turns
    assert load_workload(str(p), format="azure").turns == load_workload(p).turns
    with pytest.raises(WorkloadError, match="unknown trace format 'csv'"):
        load_workload(p, format="csv")


def test_names_win_over_files_reached_as_dot_slash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("agentic-qwen32b", "sample-azure"):
        (tmp_path / name).write_bytes(sample_path("burstgpt").read_bytes())
        assert load_workload(f"./{name}").name == name
    assert load_workload("sample-azure").name == "sample_azure.csv"
    assert load_workload("agentic-qwen32b:scale=0.001").name.startswith("agentic-qwen32b(")


@pytest.mark.parametrize("spec, text", [
    ("agentic-qwen32b:scale=0", "'scale'"),
    ("agentic-qwen32b:turns=5", "unknown parameter 'turns'"),
    ("agentic-qwen32b:seed", "must be key=value"),
    ("agentic-qwen32b:think_s=fast", "parameter 'think_s'"),
    ("agentic-qwen32b:output=100", "'output'"),
    ("agentic-nope", "not a preset"),
    ("sample-foo", "no sample trace for 'foo'"),
    ("missing/trace.csv", "no such trace file"),
])
def test_bad_spec_is_one_line(spec, text):
    with pytest.raises(WorkloadError) as e:
        load_workload(spec)
    assert text in str(e.value) and "\n" not in str(e.value)


MC = '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}\n'
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
BG = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
      "5,ChatGPT,472,18,490,Conversation log\n")


def mc(**kw):
    obj = dict(timestamp=10, input_length=600, output_length=4, hash_ids="[1, 3]")
    obj.update(kw)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in obj.items()) + "}\n"


BAD = [
    # name, file name, content, line, field (None: the message names no field)
    ("mc-negative", "t.jsonl", MC + mc(input_length=-5, hash_ids="[]"), 2, "input_length"),
    ("mc-zero-out", "t.jsonl", MC + mc(output_length=0), 2, "output_length"),
    ("mc-float", "t.jsonl", MC + mc(input_length=600.5), 2, "input_length"),
    ("mc-string", "t.jsonl", MC + mc(output_length='"4"'), 2, "output_length"),
    ("mc-bool", "t.jsonl", MC + mc(output_length="true"), 2, "output_length"),
    ("mc-absurd", "t.jsonl", MC + mc(input_length=10**9), 2, "input_length"),
    ("mc-missing", "t.jsonl", MC + '{"timestamp": 1, "input_length": 5, "output_length": 1}',
     2, "hash_ids"),
    ("mc-hash-count", "t.jsonl", MC + mc(hash_ids="[1]"), 2, "hash_ids"),
    ("mc-hash-neg", "t.jsonl", MC + mc(hash_ids="[1, -2]"), 2, "hash_ids"),
    ("mc-time-back", "t.jsonl", mc(timestamp=50) + "\n" + mc(timestamp=20), 3, "timestamp"),
    ("mc-time-nan", "t.jsonl", MC + mc(timestamp="NaN"), 2, "timestamp"),
    ("mc-time-unit", "t.jsonl", MC + mc(timestamp=10**16), 2, "timestamp"),
    ("mc-json", "t.jsonl", MC + '{"timestamp": 1,\n', 2, None),
    ("mc-array", "t.jsonl", MC + "[1, 2]\n", 2, None),
    ("mc-empty", "t.jsonl", "\n  \r\n", 1, None),
    ("mc-utf8", "t.jsonl", MC.encode() + b'{"timestamp": 1\xff}\n', 2, None),
    ("az-time", "t.csv", AZ + "16/11/2023 18:15,374,44\n", 3, "TIMESTAMP"),
    ("az-time-back", "t.csv", AZ + "2023-11-16 18:15:40.0,374,44\n", 3, "TIMESTAMP"),
    ("az-tz", "t.csv", AZ + "2023-11-16 18:15:50+00:00,374,44\n", 3, "TIMESTAMP"),
    ("az-column", "t.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,374\n", 1,
     "GeneratedTokens"),
    ("az-zero", "t.csv", AZ + "2023-11-16 18:15:47,0,44\n", 3, "ContextTokens"),
    ("az-float", "t.csv", AZ + "2023-11-16 18:15:47,374,44.0\n", 3, "GeneratedTokens"),
    ("az-digit", "t.csv", AZ + "2023-11-16 18:15:47,374,\u00b2\n", 3, "GeneratedTokens"),
    ("az-fields", "t.csv", AZ + "2023-11-16 18:15:47,374\n", 3, None),
    ("az-header-only", "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\r\n", 1, None),
    ("az-utf8", "t.csv", AZ.encode() + b"2023-11-16 18:15:47,3\xe974,44\n", 3, None),
    ("bg-total", "t.csv", BG + "6,ChatGPT,10,5,16,API log\n", 3, "Total tokens"),
    ("bg-negative", "t.csv", BG + "6,ChatGPT,-10,5,-5,API log\n", 3, "Request tokens"),
    ("bg-time", "t.csv", BG + "soon,ChatGPT,10,5,15,API log\n", 3, "Timestamp"),
    ("bg-time-back", "t.csv", BG + "4,ChatGPT,10,5,15,API log\n", 3, "Timestamp"),
    ("bg-all-failed", "t.csv", BG.replace(",18,490,", ",0,472,"), 2, "Response tokens"),
    ("unknown-csv", "t.csv", "a,b,c\n1,2,3\n", 1, None),
]


@pytest.mark.parametrize("name, fname, content, line, field", BAD, ids=[b[0] for b in BAD])
def test_bad_trace_is_one_line_naming_file_line_field(tmp_path, name, fname, content, line,
                                                      field):
    p = tmp_path / fname
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(WorkloadError) as e:
        load_workload(p)
    msg = str(e.value)
    assert isinstance(e.value, ValueError)
    assert "\n" not in msg
    assert msg.startswith(f"{p}:{line}: "), msg
    if field is not None:
        assert f"field '{field}'" in msg, msg


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(WorkloadError, match="cannot read trace"):
        read_trace(tmp_path / "absent.jsonl")
