"""Formal checks of the controller's blocks (issue 12 item 4; docs/formal.md).

CI runs every block at its short ``ci_depth`` (about 30 s in all on a 2-core machine): no
assertion fails in any trace of that length from reset, every cover goal is reached, and
where :data:`~hbfsim.rtl.formal.BLOCKS` says so the induction step goes through (proved for
all time; blocks with ``ci_step = False``, the tables proved with lemmas, take the step in
the full runs only and their lemmas by the BMC here). ``HBFSIM_FORMAL_FULL=1`` adds the
deeper runs of ``hbfsim rtl prove`` (minutes); without it they are reported as skipped,
not passed.
"""

from __future__ import annotations

import os

import pytest

from hbfsim.rtl import formal

pytestmark = pytest.mark.skipif(formal.missing_tool() is not None,
                                reason=formal.missing_tool() or "")

FULL = os.environ.get("HBFSIM_FORMAL_FULL", "") not in ("", "0")


def _check(block: str, depth: int, tmp_path, cover_depth: int = 0, step: bool = True):
    induction = formal.BLOCKS[block].induction and step
    r = formal.check_block(block, depth=depth, vcd_dir=tmp_path, timeout=600,
                           cover_depth=max(depth, cover_depth), induction=induction)
    assert r.status != "failed", f"{block}: {r.failed} (counterexample {r.vcd})"
    assert r.asserts > 0 and r.covers
    unreached = [msg for msg, step in r.covers.items() if step is None]
    assert not unreached, (f"{block}: covers not reached in {max(depth, cover_depth)} steps: "
                           f"{unreached}")
    if induction:
        assert r.status == "proved", f"{block}: induction step failed at k={r.k}"
    return r


@pytest.mark.parametrize("block", [b for b, spec in formal.BLOCKS.items() if spec.ci])
def test_block_holds_at_ci_depth(block, tmp_path):
    spec = formal.BLOCKS[block]
    _check(block, spec.ci_depth, tmp_path, spec.ci_cover_depth, step=spec.ci_step)


@pytest.mark.skipif(not FULL, reason="deep formal runs: set HBFSIM_FORMAL_FULL=1")
@pytest.mark.parametrize("block", list(formal.BLOCKS))
def test_block_holds_at_full_depth(block, tmp_path):
    # covers at least as deep as the CI set's (the controller's lie beyond its BMC depth)
    spec = formal.BLOCKS[block]
    _check(block, spec.depth, tmp_path, spec.ci_cover_depth)


def test_a_failing_property_writes_a_counterexample(tmp_path):
    r = formal.check_block("response", depth=6, covers=False, induction=False,
                           mutations={"credit-stale"}, vcd_dir=tmp_path)
    assert r.status == "failed"
    assert any("launched without positive link credit" in msg for msg in r.failed)
    assert r.vcd is not None and (tmp_path / "prove-response-credit-stale.vcd").exists()
    assert "$var" in (tmp_path / "prove-response-credit-stale.vcd").read_text()


def test_every_property_has_a_message():
    from amaranth.back import rtlil
    from amaranth.hdl import Value

    for block in formal.BLOCKS:
        dut = formal._build(block, formal.formal_config(block), ())
        ports = [Value.cast(v) for _, _, v in dut.signature.flatten(dut)]
        props = formal.properties(rtlil.convert(formal._Harness(dut), ports=ports,
                                                name="top"))
        kinds = {f for f, _ in props.values()}
        assert {"assert", "assume", "cover"} <= kinds, block
        # every property but the harness's reset assumption names what it checks
        unnamed = [k for k, (f, msg) in props.items() if not msg and "formal.py" not in k]
        assert not unnamed, f"{block}: {unnamed}"


def test_bad_block_and_depth_are_refused():
    with pytest.raises(ValueError, match="--block must be one of"):
        formal.check_block("nope")
    with pytest.raises(ValueError, match="--depth must be a positive integer"):
        formal.check_block("admission", depth=0)


def _hbfsim(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "hbfsim.cli", *args], capture_output=True,
                          text=True)


def test_prove_command(tmp_path):
    p = _hbfsim("rtl", "prove", "--block", "admission", "--depth", "6")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "admission" in p.stdout and "proved (k=6)" in p.stdout
    p = _hbfsim("rtl", "prove", "--block", "admission", "--depth", "6", "--no-covers",
                "--mutation", "admission-slot-reuse", "--waves-dir", str(tmp_path))
    assert p.returncode == 1 and "FAILED" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / "prove-admission-admission-slot-reuse.vcd").exists()
    p = _hbfsim("rtl", "prove", "--depth", "0")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_the_controller_proof_carries_its_blocks_and_its_own_lemmas():
    # the blocks inside a proved controller take checks="proof" (their lemmas kept, their
    # neighbours' protocol asserted); the lemmas across them come from controller_lemmas
    from hbfsim.rtl.checks import check_mode, inner

    assert inner("formal") == "proof" and inner("proof") == "proof"
    assert inner(True) is True and inner(False) is False
    assert check_mode("proof") == "proof"
    with pytest.raises(ValueError, match="'proof'"):
        check_mode("lemmas")
    messages = {msg for flavor, msg in formal.block_properties("controller")
                if flavor == "assert"}
    assert "request slots: a slot in use is held nowhere" in messages
    assert "the MSHR's waiting slots are its listed slots and W's" in messages
    assert not any("M's MSHR vector" in msg for flavor, msg in
                   formal.block_properties("controller") if flavor == "assume")


def test_the_shared_pools_proof_has_its_own_lemmas_and_the_default_pools_none():
    # controller_lemmas._shared_pools: stated for the shared pools' step only (docs/formal.md)
    def asserts(block):
        return {msg for flavor, msg in formal.block_properties(block) if flavor == "assert"}

    # block_properties lists a statement once, by its first instance's message
    own = ("K0 holds the last waiter of the entry whose next waiter R0 holds",
           "R0 holds a waiter of another channel's MSHR entry",
           "R0 holds a waiter of MSHR entry not in RETURN",
           "write_buffer: W0's byte range lies outside its page",
           "mshr: W0's allocation's target is not its page's mapping",
           "mshr: W0 allocates for a page of another channel",
           "write_buffer entry 0: a W allocates it, not FREE",
           "mshr entry 0: W0 and W1 allocate it")
    shared = asserts("controller_channel_shared")
    assert all(msg in shared for msg in own), [msg for msg in own if msg not in shared]
    default = asserts("controller_channel")
    assert not any(msg in default for msg in own)
    assert formal.BLOCKS["controller_channel_shared"].induction
