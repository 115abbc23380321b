"""Shared harness of the bad-input corpus (issue 11): fresh folders, in-process runs, the
one-line / exit 2 / nothing-changed assertion.

Each bad case runs the command in-process (``hbfsim.cli.main``) in a fresh folder holding
its input files and asserts: exit code 2, exactly one line on stderr that names the problem
(a regular expression per case), no traceback, and no file in the folder created, changed or
removed. Each odd-but-valid case asserts exit 0 and an empty stderr. Cases that need a real
process (signals, a closed pipe) are in tests/test_outputs.py and test_output_paths.py.
"""

from __future__ import annotations

import hashlib
import os
import re

from hbfsim.cli import main

H = "tick,op,address,bytes,source\n"
A = "0x4000000000"          # the first HBF address (base_address, 256 GiB)
ROW = f"0,R,{A},32,0\n"
MODEL_OK = ('{"num_hidden_layers": 1, "hidden_size": 256, "num_attention_heads": 2, '
            '"num_key_value_heads": 1, "head_dim": 128, "intermediate_size": 512, '
            '"vocab_size": 1024, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}')


SWEEP_GRID = ('[sweep]\nname = "t"\nworkloads = ["default"]\n[base]\nprofile = "reference"\n'
              "[grid]\nchannels = [1, 2]\n")


def _snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    digest = hashlib.sha1(fh.read()).hexdigest()
            # a folder's own mtime moves when the writability probe creates and removes its
            # temporary; its contents are compared entry by entry instead
            mtime = None if os.path.isdir(p) else st.st_mtime_ns
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size if mtime else None, mtime,
                                             digest)
    return out


def _write(tmp_path, files):
    for name, content in files.items():
        p = tmp_path / name
        if content is None:
            p.mkdir()
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, newline="")


def _run(tmp_path, monkeypatch, capsys, argv, files):
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, before, _snapshot(tmp_path)


def _case(tmp_path, monkeypatch, capsys, argv, files, match):
    rc, out, err, before, after = _run(tmp_path, monkeypatch, capsys, argv, files)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err, out[-300:])
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]
    assert before == after, "the folder changed"
