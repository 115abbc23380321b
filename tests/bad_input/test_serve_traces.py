"""Bad request traces through `hbfsim serve --workload` (issue 25): Mooncake JSONL, Azure and
BurstGPT CSV. Every case: one line naming the file, the line and the field, exit 2, nothing
written (tests/bad_input/harness.py). The serve run has no HBF (no characterization) and
fails while loading the trace, before any simulation."""

from __future__ import annotations

import pytest

from tests.bad_input.harness import _case

AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZ_ROW = "2023-11-16 18:15:46.6805900,{},{}\n"
BG = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
MC = '{{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": {}}}\n'
GOOD_MC = MC.format(0, 10, 5, "[0]")
BIG = "1" + "0" * 5000        # beyond Python's 4,300-digit int conversion limit


def _azure_stray_quote():
    rows = [AZ_ROW.format(100 + i % 50, 20) for i in range(6000)]
    rows[40] = rows[40].replace(",1", ',"1', 1)       # a stray quote on data line 41
    return AZ + "".join(rows)


SERVE_TRACE_BAD = [
    # (name, file name, content, message pattern)
    ("azure-stray-quote-large", "t.csv", _azure_stray_quote(),
     r"t\.csv:42: malformed CSV record .*field larger than field limit"),
    ("azure-nul-byte", "t.csv", AZ + AZ_ROW.format("1\x000", 5),
     r"t\.csv:2: field 'ContextTokens' must be an integer"),
    ("azure-long-integer", "t.csv", AZ + AZ_ROW.format(BIG, 5),
     r"t\.csv:2: field 'ContextTokens' is <an integer of 5001 digits>"),
    ("burstgpt-long-integer", "t.csv", BG + f"0,ChatGPT,{BIG},5,15,Conversation log\n",
     r"t\.csv:2: field 'Request tokens' is <an integer of 5001 digits>"),
    ("burstgpt-stray-quote-large", "t.csv",
     BG + "0,ChatGPT,10,5,15,Conversation log\n" + '1,"ChatGPT,10,5,15,x\n'
     + "2,ChatGPT,10,5,15,Conversation log\n" * 5000,
     r"t\.csv:3: malformed CSV record .*field larger than field limit"),
    ("mooncake-deep-nesting", "t.jsonl",
     GOOD_MC + '{"timestamp": 1, "hash_ids": ' + "[" * 100000 + "]" * 100000 + "}\n",
     r"t\.jsonl:2: JSON nested too deeply"),
    ("mooncake-nested-hash-ids", "t.jsonl", MC.format(0, 10, 5, "[[[[0]]]]"),
     r"t\.jsonl:1: field 'hash_ids' holds \[\[\[0\]\]\]"),
    ("mooncake-long-input-length", "t.jsonl", MC.format(0, BIG, 5, "[0]"),
     r"t\.jsonl:1: field 'input_length' is <an integer of 5001 digits>"),
    ("mooncake-long-output-length", "t.jsonl", MC.format(0, 10, BIG, "[0]"),
     r"t\.jsonl:1: field 'output_length' is <an integer of 5001 digits>"),
    ("mooncake-long-hash-id", "t.jsonl", MC.format(0, 10, 5, f"[{BIG}]"),
     r"t\.jsonl:1: field 'hash_ids' holds <an integer of 5001 digits>"),
    ("mooncake-long-timestamp", "t.jsonl", GOOD_MC + MC.format(BIG, 10, 5, "[0]"),
     r"t\.jsonl:2: field 'timestamp' must be a number of ms, not <an integer"),
    ("mooncake-infinite-timestamp", "t.jsonl", MC.format("1e999", 10, 5, "[0]"),
     r"t\.jsonl:1: field 'timestamp' must be a finite time >= 0, not inf"),
    ("mooncake-huge-string-field", "t.jsonl", MC.format(0, '"' + "x" * 100000 + '"', 5, "[0]"),
     r"t\.jsonl:1: field 'input_length' must be an integer token count, not 'xxx.*"
     r"\(100002 characters\)"),
    ("mooncake-array-line", "t.jsonl", GOOD_MC + "[1, 2]\n",
     r"t\.jsonl:2: not a JSON object but a list"),
    ("mooncake-truncated-line", "t.jsonl", GOOD_MC + GOOD_MC[:30] + "\n",
     r"t\.jsonl:2: not a JSON object"),
]


@pytest.mark.parametrize("name,fname,content,match", SERVE_TRACE_BAD,
                         ids=[c[0] for c in SERVE_TRACE_BAD])
def test_bad_serve_trace(tmp_path, monkeypatch, capsys, name, fname, content, match):
    argv = ["serve", "--hbm", "8", "--hbf", "0", "--no-progress", "--workload", fname]
    _case(tmp_path, monkeypatch, capsys, argv, {fname: content}, match)
