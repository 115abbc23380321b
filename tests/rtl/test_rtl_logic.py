"""The combinational helpers of rtl/logic.py against Python arithmetic."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from hypothesis import given, settings
from hypothesis import strategies as st
from rtl_helpers import simulate

from hbfsim.rtl.logic import (at_least, divmod_const, lowest_onehot, lowest_set,
                              onehot_index, onehot_select, prefix_or)


def _comb(build, width: int, values: list[int]) -> list:
    """Drive ``values`` into a ``width``-bit input of ``build(m, q) -> outputs``; read them."""
    m = Module()
    q = Signal(width)
    outs = build(m, q)
    got = []

    async def tb(ctx):
        for v in values:
            ctx.set(q, v)
            got.append(tuple(ctx.get(o) for o in outs))

    simulate(m, tb)
    return got


def _divmod_rtl(width: int, n: int, values: list[int]) -> list[tuple[int, int]]:
    def build(m, q):
        quo, rem = divmod_const(q, n)
        quo_s, rem_s = Signal(width), Signal(max(1, len(rem)))
        m.d.comb += [quo_s.eq(quo), rem_s.eq(rem)]
        return quo_s, rem_s
    return _comb(build, width, values)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 24, 100, 255])
def test_divmod_const_exhaustive(n):
    values = list(range(1 << 9))
    assert _divmod_rtl(9, n, values) == [divmod(v, n) for v in values]


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 1 << 20), st.lists(st.integers(0, (1 << 40) - 1), min_size=1,
                                         max_size=30))
def test_divmod_const_wide(n, values):
    assert _divmod_rtl(40, n, values) == [divmod(v, n) for v in values]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64])
def test_lowest_set(n):
    if n <= 8:  # exhaustive where it is cheap
        values = list(range(1 << n))
    else:
        values = [0, 1, 1 << (n - 1), (1 << n) - 1, 0b1010 << (n - 4)]

    def build(m, q):
        found, index = lowest_set(m, [q[i] for i in range(n)], "index")
        f = Signal()
        m.d.comb += f.eq(found)
        return f, index

    want = [(int(v != 0), (v & -v).bit_length() - 1 if v else 0) for v in values]
    assert _comb(build, n, values) == want


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 128, 4096])
def test_at_least_is_a_thermometer(n):
    values = list(range(n + 2)) if n <= 128 else [0, 1, 31, 32, 33, 2047, 4095, 4096, 4097]
    width = (n + 1).bit_length()
    want = [(sum(1 << i for i in range(n) if i >= x),) for x in values]
    assert _comb(lambda m, q: (at_least(m, q, n, "t"),), width, values) == want


def _bits_cases(n: int) -> list[int]:
    if n <= 8:  # exhaustive where it is cheap
        return list(range(1 << n))
    return [0, 1, 1 << (n - 1), (1 << n) - 1, 0b1010 << (n - 4), 0b0110 << (n // 2)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 32])
def test_prefix_or(n):
    values = _bits_cases(n)

    def build(m, q):
        out = prefix_or(m, [q[i] for i in range(n)], "p")
        return tuple(out)

    want = [tuple(int(v & ((2 << k) - 1) != 0) for k in range(n)) for v in values]
    assert _comb(build, n, values) == want


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 32])
def test_lowest_onehot_select_and_index(n):
    """The one-hot grant is the lowest set bit; its AND-OR select and its binary index equal
    lowest_set's index and an indexed read of the same items."""
    values = _bits_cases(n)
    items = [(7 * k + 3) % 256 for k in range(n)]

    def build(m, q):
        found, grant = lowest_onehot(m, [q[i] for i in range(n)], "g")
        f = Signal()
        m.d.comb += f.eq(found)
        sigs = [Signal(8, name=f"item{k}", init=items[k]) for k in range(n)]
        sel = onehot_select(m, sigs, grant, "sel")
        idx = onehot_index(m, grant, "idx")
        return (f, idx, sel, *grant)

    want = []
    for v in values:
        low = (v & -v).bit_length() - 1 if v else -1
        want.append((int(v != 0), max(low, 0), items[low] if v else 0,
                     *[int(k == low) for k in range(n)]))
    assert _comb(build, n, values) == want
