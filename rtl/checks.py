"""How a block states its properties: simulation assertions, or a formal proof's properties.

Issue 12 item 4: the same Amaranth statements serve the Python simulator, Verilator (item 5)
and the solver. Every block that owns a table takes ``checks``:

* ``False``: no property at all (what ``hbfsim rtl emit`` writes by default);
* ``True``: every property is an :class:`~amaranth.hdl.Assert`, including the ones about the
  block's inputs (the protocol its neighbours must keep); inside a controller those are
  invariants of the neighbours, so a broken neighbour fails them;
* ``"formal"``: the block is the top of a proof (:mod:`hbfsim.rtl.formal`): properties about
  its inputs become :class:`~amaranth.hdl.Assume` (the solver may only drive the ports as the
  neighbours would), the others stay ``Assert``, and ``Cover`` goals are added;
* ``"proof"``: the block sits inside a proof's top (the controller's blocks when the
  controller is proved): as ``True`` (its inputs' protocol asserted, its neighbours being
  real), plus its :func:`lemma` statements, so that the top's induction step can use them.

All properties are clocked (``m.d.sync``): checked at the clock edge on the values of the
cycle that ends there.
"""

from __future__ import annotations

__all__ = ["CHECK_MODES", "check_mode", "cover", "inner", "invariant", "lemma", "protocol",
           "proving", "stream_protocol"]

from amaranth.hdl import Assert, Assume, Cover, Signal, Value

#: The accepted values of a block's ``checks`` argument.
CHECK_MODES = (False, True, "formal", "proof")


def check_mode(checks) -> bool | str:
    """Return ``checks`` validated (``False``, ``True``, ``"formal"`` or ``"proof"``).

    Raises
    ------
    ValueError
        For any other value.
    """
    if checks is False or checks is True or checks in ("formal", "proof"):
        return checks
    raise ValueError(f"checks must be False, True, 'formal' or 'proof', not {checks!r}")


def proving(checks) -> bool:
    """Whether a block is part of a proof (its lemmas and their ghost state are built)."""
    return checks in ("formal", "proof")


def inner(checks):
    """The ``checks`` a block passes to the blocks it instantiates: their protocol is its own
    invariant; inside a proof they keep their lemmas (``"proof"``)."""
    return "proof" if proving(checks) else bool(checks)


def invariant(m, checks, cond, msg: str) -> None:
    """A property of the block's own state and outputs: ``Assert`` whenever checks are on."""
    if checks:
        m.d.sync += Assert(cond, msg, src_loc_at=1)


def lemma(m, checks, cond, msg: str) -> None:
    """A property that strengthens a proof's induction step (only in a proof of this block).

    True of every reachable state, like an :func:`invariant`, but stated about the block's
    internal registers and memories (a list's shape, a shadow register's copy) so that the
    block's properties become inductive (docs/formal.md "Induction"); some need extra read
    ports or ghost registers, which the design proper and its simulation do not carry.
    """
    if proving(checks):
        m.d.sync += Assert(cond, msg, src_loc_at=1)


def protocol(m, checks, cond, msg: str) -> None:
    """A property of the block's inputs: ``Assume`` in a proof of this block, else ``Assert``."""
    if checks == "formal":
        m.d.sync += Assume(cond, msg, src_loc_at=1)
    elif checks:
        m.d.sync += Assert(cond, msg, src_loc_at=1)


def cover(m, checks, cond, msg: str) -> None:
    """A goal the proof must show reachable (only in a proof of this block)."""
    if checks == "formal":
        m.d.sync += Cover(cond, msg, src_loc_at=1)


def stream_protocol(m, checks, port, name: str) -> None:
    """The valid/ready protocol of a stream *into* a block, as :func:`protocol` states it:
    ``valid`` held until ``ready``, the payload stable meanwhile (timing-contract.md
    §1, the ports' assumptions). It looks only at the port, not at the cycle in which the
    block takes the item."""
    if not checks:
        return
    stem = "".join(ch if ch.isalnum() else "_" for ch in name)
    waiting = Signal(name=f"{stem}_waiting")
    held = Signal(len(Value.cast(port.payload)), name=f"{stem}_held")
    m.d.sync += [waiting.eq(port.valid & ~port.ready), held.eq(Value.cast(port.payload))]
    protocol(m, checks, ~waiting | port.valid, f"{name}: valid dropped before ready")
    protocol(m, checks, ~waiting | (Value.cast(port.payload) == held),
             f"{name}: payload changed while waiting for ready")
