"""Small combinational building blocks shared by the controller blocks.

Not blocks themselves (no ports): helpers that add logic to a :class:`Module`.
"""

from __future__ import annotations

__all__ = ["at_least", "divmod_const", "lowest_onehot", "lowest_set", "named", "onehot_index",
           "onehot_select", "prefix_or", "select", "tree_sum"]

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.utils import bits_for, ceil_log2


def divmod_const(q: Value, n: int) -> tuple[Value, Value]:
    """Return ``(q // n, q % n)`` for an unsigned value and a positive constant, no divider.

    A power of two is a shift and a slice. Any other ``n`` uses the exact reciprocal
    ``m = ceil(2**(W + l) / n)`` with ``l = ceil(log2 n)`` and ``W = len(q)``: then
    ``q // n == (q * m) >> (W + l)`` for every ``q < 2**W`` (Granlund and Montgomery,
    1994), so the hardware is one constant multiplier and one subtraction.

    Parameters
    ----------
    q : Value
        Unsigned dividend.
    n : int
        Divisor, at least 1.

    Raises
    ------
    ValueError
        If ``n`` is not positive.
    """
    if n < 1:
        raise ValueError(f"divisor must be positive, not {n!r}")
    q = Value.cast(q)
    if n == 1:
        return q, Const(0, 1)
    if n & (n - 1) == 0:
        k = n.bit_length() - 1
        return q >> k, q[:k]
    shift = len(q) + ceil_log2(n)
    mul = -(-(1 << shift) // n)
    quo = ((q * mul) >> shift)[:len(q)]
    rem = (q - quo * n)[:bits_for(n - 1)]
    return quo, rem


def lowest_set(m: Module, bits: list, name: str) -> tuple[Value, Signal]:
    """Return ``(any, index)`` of the lowest set bit of ``bits`` ("lowest index", contract §0).

    A priority-encoder tree (log depth): each node takes the left half's index if the left
    half has a set bit, else the right half's, and adds one index bit. ``index`` is 0 when no
    bit is set; qualify it with ``any``.
    """
    def node(lo: int, hi: int) -> tuple[Value, Value]:
        if hi - lo == 1:
            return Value.cast(bits[lo]), Const(0, 0)
        k = (hi - lo - 1).bit_length() - 1      # left part: 2**k bits, right part: the rest
        any_l, idx_l = node(lo, lo + (1 << k))
        any_r, idx_r = node(lo + (1 << k), hi)
        idx_l = Cat(idx_l, Const(0, k - len(idx_l)))
        idx_r = Cat(idx_r, Const(0, k - len(idx_r)))
        # Named, so that each level's "any" is built once, not once per reference.
        found = named(m, any_l | any_r, f"{name}_any_{lo}_{hi}")
        return found, Cat(Mux(any_l, idx_l, idx_r), ~any_l)

    index = Signal(range(max(2, len(bits))), name=name)
    found, raw = node(0, len(bits))
    m.d.comb += index.eq(Mux(found, raw, 0))
    return found, index


def prefix_or(m: Module, bits: list, name: str) -> list[Signal]:
    """Return ``out`` with ``out[k] = bits[0] | ... | bits[k]`` (a log-depth prefix network).

    Sklansky's construction: at level ``d`` every position in the upper half of each block
    of ``2**(d+1)`` takes the OR of the last position of the lower half, so depth is
    ``ceil(log2 n)`` two-input ORs and each level is named once.
    """
    cur = [Value.cast(b) for b in bits]
    n, d = len(cur), 0
    while (1 << d) < n:
        nxt = []
        for k in range(n):
            block = k >> (d + 1)
            lo_last = (block << (d + 1)) + (1 << d) - 1
            if (k >> d) & 1 and lo_last < k:
                nxt.append(named(m, cur[k] | cur[lo_last], f"{name}_l{d}_{k}"))
            else:
                nxt.append(cur[k])
        cur, d = nxt, d + 1
    return [named(m, v, f"{name}{k}") for k, v in enumerate(cur)]


def lowest_onehot(m: Module, bits: list, name: str) -> tuple[Value, list[Signal]]:
    """Return ``(any, grant)``: ``grant[k]`` is set for the lowest set bit of ``bits`` only.

    The one-hot form of :func:`lowest_set` ("lowest index", contract §0; §13 "one-hot
    grants"): ``grant[k] = bits[k] & ~(bits[0] | ... | bits[k-1])`` over a prefix network, so
    a consumer enables entry ``k`` with ``grant[k]`` instead of comparing a binary index.
    """
    bits = [Value.cast(b) for b in bits]
    before = prefix_or(m, bits, f"{name}_below")
    grant = [named(m, bits[0], f"{name}0")]
    grant += [named(m, bits[k] & ~before[k - 1], f"{name}{k}") for k in range(1, len(bits))]
    return before[-1], grant


def onehot_select(m: Module, items: list, grant: list, name: str) -> Signal:
    """Return ``items[k]`` for the one set bit ``k`` of ``grant`` (0 when none is set).

    An AND-OR tree: each item masked by its grant bit, ORed as a balanced tree, so the result
    is ``log2 n`` levels behind the grant rather than behind a binary index's last bit.
    """
    out = Signal(items[0].shape(), name=name)
    width = len(Value.cast(out))
    terms = [Mux(g, Value.cast(it), 0) for g, it in zip(grant, items)]
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    m.d.comb += out.eq(terms[0][:width])
    return out


def onehot_index(m: Module, grant: list, name: str) -> Signal:
    """Return the binary index of the one set bit of ``grant`` (0 when none is set): bit
    ``b`` of the index is the OR of the grant bits whose index has bit ``b`` set."""
    out = Signal(range(max(2, len(grant))), name=name)
    m.d.comb += out.eq(Cat(*[Cat(*[g for k, g in enumerate(grant) if (k >> b) & 1] or
                                 [Const(0, 1)]).any() for b in range(len(out))]))
    return out


def tree_sum(values: list) -> Value:
    """Sum ``values`` as a balanced adder tree (log depth; Python's ``sum`` builds a chain as
    deep as the list, which overflows Python's recursion limit for thousands of terms)."""
    vals = [Value.cast(v) for v in values]
    if not vals:
        return Const(0, 1)
    while len(vals) > 1:
        vals = [vals[i] + vals[i + 1] if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def at_least(m: Module, value: Value, n: int, name: str) -> Signal:
    """Return the ``n``-bit thermometer code whose bit ``i`` is ``i >= value``.

    Two levels (the upper and lower halves of ``value``'s bits, each decoded once), so every
    output bit is a three-input function: no wide shifter, whose every output bit would
    depend on every input bit (slow to build, and Amaranth's combinational-loop check walks
    every such edge).
    """
    value = Value.cast(value)
    bits = max(1, (n - 1).bit_length())
    v = Signal(bits + 1, name=f"{name}_value")
    m.d.comb += v.eq(value)
    low_bits = bits // 2
    high_n = 1 << (bits + 1 - low_bits)
    v_low, v_high = v[:low_bits], v[low_bits:]
    gt_high = Signal(high_n, name=f"{name}_gt_high")
    eq_high = Signal(high_n, name=f"{name}_eq_high")
    ge_low = Signal(1 << low_bits, name=f"{name}_ge_low")
    m.d.comb += [
        gt_high.eq(Cat(*[k > v_high for k in range(high_n)])),
        eq_high.eq(Cat(*[k == v_high for k in range(high_n)])),
        ge_low.eq(Cat(*[j >= v_low for j in range(1 << low_bits)])),
    ]
    # Row h holds bits h*L .. h*L+L-1 (L = 2**low_bits), one word-wide Mux per row.
    out = Signal(n, name=name)
    row = 1 << low_bits
    for h in range(-(-n // row)):
        width = min(row, n - h * row)
        m.d.comb += out[h * row:h * row + width].eq(
            Mux(gt_high[h], (1 << width) - 1, Mux(eq_high[h], ge_low[:width], 0)))
    return out


def select(m: Module, items: list, index: Value, name: str) -> Signal:
    """Return a signal holding ``items[index]`` (same shape as ``items[0]``).

    One multiplexer, however many fields of the result are read afterwards: each field
    access on an ``Array(...)[index]`` proxy builds a multiplexer of its own.
    """
    out = Signal(items[0].shape(), name=name)
    m.d.comb += out.eq(Array(items)[index])
    return out


def named(m: Module, value, name: str) -> Signal:
    """Return a signal driven by ``value``.

    An expression is rebuilt as logic at every place it is used; a signal is built once.
    Name every expression that many places read (per-entry loops, trees).
    """
    value = Value.cast(value)
    out = Signal(value.shape(), name=name)
    m.d.comb += out.eq(value)
    return out
