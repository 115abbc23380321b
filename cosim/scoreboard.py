"""In-order comparison of the RTL's observed events with the golden model's.

Three streams (:class:`hbfsim.cosim.golden.Events`): accepts, media commands, responses;
with multi-plane commands a fourth, the media's completions (their planes and flag masks,
docs/timing-contract.md §7a MP7), empty otherwise. The testbench hands over what
it saw in a cycle; every expected event of that cycle (and any older one still pending,
which would be a missed event) must match it exactly, field for field and cycle for
cycle. The first disagreement stops the run with a :class:`Mismatch`, whose text names the
stream, both events, the cycle, the VCD time and the last events of both sides.
"""

from __future__ import annotations

__all__ = ["Mismatch", "Scoreboard", "format_event"]

from collections import deque

from hbfsim.cosim.golden import Events

STREAMS = ("accept", "cmd", "resp", "cpl")
_CMD_OPS = ("READ", "PROGRAM")
_REQ_OPS = ("R", "W")


def format_event(stream: str, e: tuple | None, multiplane: bool = False) -> str:
    """One event as a line of text (None: "(none)"); ``multiplane``: the command and
    completion tuples of multi-plane commands (:class:`~hbfsim.cosim.golden.Events`)."""
    if e is None:
        return "(none)"
    if stream == "accept":
        return f"t={e[0]} accept id={e[1]}"
    if stream == "cpl":
        t, ch, g, planes, hit, err = e
        return (f"t={t} cpl ch={ch} megaplane={g} planes={planes:#b} buffer_hit={hit:#b} "
                f"error={err:#b}")
    if stream == "cmd" and multiplane:
        t, ch, op, g, planes, row = e
        return f"t={t} cmd ch={ch} op={_CMD_OPS[op]} megaplane={g} planes={planes:#b} row={row}"
    if stream == "cmd":
        t, ch, sub, op, page, tag = e
        kind = "wbuf" if tag & 1 else "mshr"
        return (f"t={t} cmd ch={ch} sub={sub} op={_CMD_OPS[op]} page={page} "
                f"tag={tag} ({kind} {tag >> 1})")
    t, rid, op, src, mh, bh, ch, err = e
    return (f"t={t} resp id={rid} op={_REQ_OPS[op]} source={src} mshr_hit={mh} "
            f"buffer_hit={bh} cache_hit={ch} error={err}")


class Mismatch(AssertionError):
    """The first disagreement between RTL and golden model (message: a readable diff)."""

    def __init__(self, text: str, cycle: int, stream: str):
        super().__init__(text)
        self.text = text
        self.cycle = cycle
        self.stream = stream


class Scoreboard:
    """Compare observed events against the golden model's, in order, per stream.

    Parameters
    ----------
    expected : Events
        The golden model's events.
    name : str
        Scenario name (for the diff).
    vcd_time : callable
        ``f(cycle) -> int``: the simulation time (ns) of the rising edge that starts a cycle.
    history : int
        Events of each side shown in a diff.
    """

    def __init__(self, expected: Events, name: str, vcd_time, history: int = 8):
        self.exp = {"accept": expected.accepts, "cmd": expected.cmds, "resp": expected.resps,
                    "cpl": expected.cpls}
        self.multiplane = expected.multiplane
        self.pos = dict.fromkeys(STREAMS, 0)
        self.name = name
        self.vcd_time = vcd_time
        self.compared = 0
        self.actual = Events(multiplane=expected.multiplane)
        self._gold_hist: deque = deque(maxlen=history)
        self._rtl_hist: deque = deque(maxlen=history)

    # ---- queries for the testbench's wake-up plan -------------------------------------
    def next_cycle(self) -> int | None:
        """Cycle of the earliest expected event not yet matched, or None."""
        best = None
        for s in STREAMS:
            lst, i = self.exp[s], self.pos[s]
            if i < len(lst) and (best is None or lst[i][0] < best):
                best = lst[i][0]
        return best

    def done(self) -> bool:
        return all(self.pos[s] == len(self.exp[s]) for s in STREAMS)

    def last_expected_cycle(self) -> int:
        return max((lst[-1][0] for lst in self.exp.values() if lst), default=0)

    # ---- comparison ----------------------------------------------------------------------
    def check(self, t: int, stream: str, events: list) -> None:
        """Compare the events of ``stream`` observed in cycle ``t`` (possibly none).

        Raises
        ------
        Mismatch
            At the first difference.
        """
        lst = self.exp[stream]
        i = self.pos[stream]
        n = len(lst)
        if not events and (i >= n or lst[i][0] > t):
            return
        j = i
        while j < n and lst[j][0] <= t:
            j += 1
        want = lst[i:j]
        if want == events:
            if events:
                self.pos[stream] = j
                self.compared += len(events)
                getattr(self.actual, stream + "s").extend(events)
                for e in events:
                    self._gold_hist.append((stream, e))
                    self._rtl_hist.append((stream, e))
            return
        k = 0
        while k < len(want) and k < len(events) and want[k] == events[k]:
            k += 1
        for e in events[:k]:
            self._gold_hist.append((stream, e))
            self._rtl_hist.append((stream, e))
        self.compared += k
        exp_e = want[k] if k < len(want) else None
        act_e = events[k] if k < len(events) else None
        if exp_e is None and j < n:
            later = lst[j]  # the RTL is early: show what the model does next
        else:
            later = None
        raise Mismatch(self._diff(t, stream, exp_e, act_e, later), t, stream)

    def _diff(self, t, stream, exp_e, act_e, later) -> str:
        def fmt(s, e):
            return format_event(s, e, self.multiplane)

        cyc = exp_e[0] if exp_e is not None and exp_e[0] < t else t
        lines = [f"co-simulation mismatch in scenario {self.name!r}, stream {stream!r}, "
                 f"cycle {cyc} (VCD time {self.vcd_time(cyc)} ns)",
                 f"  expected (golden model): {fmt(stream, exp_e)}",
                 f"  actual   (RTL):          {fmt(stream, act_e)}"]
        if exp_e is None:
            lines.append(f"  the golden model has no {stream} event in cycle {t}; its next: "
                         f"{fmt(stream, later)}")
        if act_e is None:
            lines.append(f"  the RTL produced no {stream} event in cycle {cyc}"
                         + (f" (noticed in cycle {t})" if cyc < t else ""))
        lines.append(f"  events matched before: {self.compared}")
        w = max([len(fmt(s, e)) for s, e in self._gold_hist] + [20]) + 4
        lines.append(f"  {'last events, golden model':<{w}}last events, RTL")
        gold = [fmt(s, e) for s, e in self._gold_hist] + \
            [">> " + fmt(stream, exp_e)]
        rtl = [fmt(s, e) for s, e in self._rtl_hist] + \
            [">> " + fmt(stream, act_e)]
        for a, b in zip(gold, rtl):
            lines.append(f"    {a:<{w - 2}}{b}")
        return "\n".join(lines)
