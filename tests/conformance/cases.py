"""The conformance cases of the one timing contract, written once as data.

Each :class:`Case` is a request stream on a small configuration and what
docs/timing-contract.md says must come out of it, written from the contract by hand (its
§10 worked timings and one directed case per rule), not from any implementation's output.
The same cases run against every level that implements their configuration
(``tests/conformance/test_conformance.py``): the golden model, the Amaranth simulation of
the RTL and the cocotb co-simulation, as PyMTL3 runs one test class against its FL, CL and
RTL models.

Expectations are Python expressions over:

* ``a0, a1, ...``: request ``i``'s accept cycle, ``d0, d1, ...`` its response cycle;
* ``c0, c1, ...``: the cycles of the media commands in issue order (levels that see the
  media side: the golden model and the Amaranth simulation; the co-simulation's
  scoreboard compares every command with the golden model's);
* ``tR``, ``tPROG``, ``D``: the configuration's read and program ticks and
  ``write_deadline_ticks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hbfsim.config import PAGE_BYTES, load_config

__all__ = ["BASE", "CASES", "Case", "LEVELS"]

#: The levels, in the order a reader meets them.
LEVELS = ("model", "rtl", "cosim")

#: The conformance configuration (the registered pipeline, stack shape, small tables, short
#: media times so that the RTL's cycle-by-cycle simulations stay short).
BASE = dict(host_ports="stack", channels=2,
            subarrays_per_channel=4, active_per_channel=4, admission=16, mshr_entries=8,
            queue_depth=4, write_buffer_entries=4, pages_per_block=4, t_read_us=0.01,
            t_prog_us=0.02, t_erase_us=0.05, buffer_hit_ticks=2, write_deadline_ticks=40)


@dataclass(frozen=True)
class Case:
    """One conformance case.

    Members
    -------
    name : str
        Identifier (test id).
    rule : str
        The contract section or rule it checks.
    requests : tuple
        ``(op, logical page, offset, bytes, arrival tick)`` per request, ids in order.
    config : dict
        Overrides of :data:`BASE`.
    done, accept : dict
        Request id -> expression of its response / accept cycle.
    flags : dict
        Request id -> ``(mshr_hit, error)``.
    commands : tuple or None
        Expressions of every media command's cycle, in issue order (None: not checked).
    tags : tuple or None
        ``(table, entry index)`` of every media command in issue order, table ``"m"`` (an
        MSHR entry) or ``"b"`` (a write-buffer entry) (None: not checked).
    levels : tuple
        The levels that implement the case's configuration (docs/timing-contract.md
        "Where the implementations stand"); the others are reported as not implemented.
    """

    name: str
    rule: str
    requests: tuple
    config: dict = field(default_factory=dict)
    done: dict = field(default_factory=dict)
    accept: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    commands: tuple | None = None
    tags: tuple | None = None
    levels: tuple = LEVELS

    def cfg(self):
        """The case's configuration; the capacity, unless given, is eight erase blocks per
        subarray (small page numbers, small RTL address widths)."""
        v = BASE | self.config
        v.setdefault("capacity_bytes", v.get("stacks", 1) * v["channels"]
                     * v["subarrays_per_channel"] * v["pages_per_block"] * PAGE_BYTES * 8)
        return load_config(**v)


P = PAGE_BYTES
_TR850 = dict(t_read_us=1.0, t_prog_us=2.0)   # tR 850, tPROG 1,700 ticks (§10's RAW row)

CASES = [
    Case("isolated-read", "§10 row 1", (("R", 5, 0, 64, 3),),
         done={0: "a0 + 13 + tR"}, flags={0: (0, 0)}, commands=("a0 + 6",), tags=(("m", 0),)),
    Case("isolated-full-page-write", "§10 row 2", (("W", 5, 0, P, 3),),
         done={0: "a0 + 16 + tPROG"}, flags={0: (0, 0)}, commands=("a0 + 10",),
         tags=(("b", 0),)),
    Case("merged-reads", "§10 row 3, DP7 cursor", tuple(("R", 3, 32 * i, 32, 0)
                                                        for i in range(8)),
         done={i: f"c0 + tR + 7 + {i}" for i in range(8)},
         flags={i: (int(i > 0), 0) for i in range(8)}, commands=("a0 + 6",)),
    Case("strict-partial-write-by-drain", "§10 row 4, DP5 drain, W3",
         (("W", 5, 0, 32, 3),), done={0: "a0 + 12"}, flags={0: (0, 1)}, commands=()),
    Case("two-stacks", "§10 row 5, §2 route stage", (("R", 4, 0, 64, 3),),
         config=dict(stacks=2), done={0: "a0 + 14 + tR"}, commands=("a0 + 7",)),
    Case("read-after-write", "§10 row 6, DP5 raw over full", (
        ("W", 0, 0, 1024, 0), ("W", 0, 1024, 1024, 1), ("W", 0, 2048, 1024, 2),
        ("W", 0, 3072, 1024, 3), ("R", 0, 0, 32, 4)), config=_TR850,
         done={0: "1718", 1: "1722", 2: "1727", 3: "1731", 4: "2592"},
         flags={i: (0, 0) for i in range(5)}, commands=("12", "d3 + 4")),
    Case("serial-pacing", "§7: tR + 1 per read of one subarray",
         tuple(("R", p, 0, 32, 0) for p in range(5)),
         config=dict(channels=1, subarrays_per_channel=1, active_per_channel=1,
                     capacity_bytes=1 * 4 * P * 8),
         commands=tuple(f"a0 + 6 + {k} * (tR + 1)" for k in range(5))),
    Case("completion-to-response", "DP7: 7 cycles for a read, 6 for a write",
         (("R", 0, 0, 32, 0), ("W", 9, 0, P, 200)),
         done={0: "c0 + tR + 7", 1: "c1 + tPROG + 6"}),
    Case("allocation-to-enqueue", "DP1, DP2: reads on one channel, commands one per cycle",
         tuple(("R", p, 0, 32, i) for i, p in enumerate((0, 2, 4, 6))),
         commands=("6", "7", "8", "9")),
    Case("free-list-order", "DP4: the least recently freed entry first",
         (("R", 0, 0, 32, 0), ("R", 2, 0, 32, 200), ("W", 4, 0, P, 400),
          ("W", 6, 0, P, 600)),
         tags=(("m", 0), ("m", 1), ("b", 0), ("b", 1))),
    Case("offers-in-allocation-order", "DP2: the oldest WAIT entry is enqueued first",
         (("R", 0, 0, 32, 0),) + tuple(("R", p, 0, 32, 200) for p in (1, 2, 3, 4)),
         config=dict(channels=1, subarrays_per_channel=1, active_per_channel=1, queue_depth=1,
                     mshr_entries=4, capacity_bytes=1 * 4 * P * 8),
         tags=(("m", 0), ("m", 1), ("m", 2), ("m", 3), ("m", 0))),
    Case("merge-after-flush-decision", "DP5: a merge in the cycle after the decision",
         (("W", 0, 0, P // 2, 0), ("W", 0, P // 2, P // 2, 11)),
         config=dict(write_deadline_ticks=10),
         # the second 2,048 B acknowledgement waits for the §8 credit: 34,816 units against
         # 3,840 a tick, positive again 9 cycles after the first launch
         done={0: "c0 + tPROG + 6", 1: "d0 + 9"}, flags={0: (0, 0), 1: (0, 0)},
         commands=("19",),
         tags=(("b", 0),)),
    Case("allocation-after-flush", "DP5: one cycle later the write allocates; strict error",
         (("W", 0, 0, P // 2, 0), ("W", 0, P // 2, P // 2, 12)),
         config=dict(write_deadline_ticks=10), done={0: "20"}, flags={0: (0, 1), 1: (0, 1)},
         commands=()),
    Case("merge-until-tc-plus-1", "DP6: a read dispatched in tc + 1 still merges",
         (("R", 0, 0, 32, 0), ("R", 0, 64, 32, 6 + 9 - 1)),
         done={1: "d0 + 1"}, flags={1: (1, 0)}, commands=("6",)),
    Case("new-entry-from-tc-plus-2", "DP6: a read dispatched in tc + 2 allocates",
         (("R", 0, 0, 32, 0), ("R", 0, 64, 32, 6 + 9)),
         flags={1: (0, 0)}, tags=(("m", 0), ("m", 1))),
    Case("deadline-from-dispatch", "DP1: deadline = tm + write_deadline_ticks",
         (("W", 5, 0, 32, 3), ("R", 9, 0, 32, 3 + 40 + 20)),
         config=dict(write_timeout_policy="partial"),
         flags={0: (0, 0)}, commands=("a0 + 2 + D + 6", "a1 + 6")),
    # ---- the channel shape and the modes (on every level since issue 23 step 3's first
    # part; each a Verilator build of its own, so co-simulated with HBFSIM_COSIM_FULL=1)
    Case("channel-isolated-read", "§10 last row: the channel shape",
         (("R", 1, 0, 64, 3), ("W", 7, 0, P, 3)), config=dict(host_ports="channel", channels=4),
         done={0: "a0 + 13 + tR", 1: "a1 + 16 + tPROG"}),
    Case("channel-pointer-order", "§4.2.3, DP4: several heads from the pointer",
         (("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0), ("R", 2, 0, 32, 1)),
         config=dict(host_ports="channel", pools="stack", mshr_entries=1),
         accept={0: "0", 1: "0"}, tags=(("m", 0), ("m", 0), ("m", 0)),
         commands=("6", "c0 + tR + 11", "c1 + tR + 11")),
    Case("channel-pools", "§4.5 B2: a read waits for its own channel's pool",
         (("R", 0, 0, 32, 0), ("R", 2, 0, 32, 1), ("R", 1, 0, 32, 1)),
         config=dict(host_ports="channel", pools="channel", mshr_entries=2),
         # channel 0 owns entry 0 and channel 1 entry 1: page 2 (channel 0) waits for entry
         # 0's free while entry 1 is free (stack-wide pools would give it entry 1 at once)
         tags=(("m", 0), ("m", 1), ("m", 0)), commands=("6", "7", "c0 + tR + 11")),
    Case("channel-admission-every-port-or-none", "§4.1: every port ready while free >= P",
         tuple(("R", p, 0, 32, 0) for p in range(4)),
         config=dict(host_ports="channel", admission=3),
         # cycle 0: 3 slots free, both ports accept; then 1 < P free: neither port is ready
         # until a response handshake frees a slot (usable from the next cycle)
         accept={0: "0", 1: "0", 2: "min(d0, d1) + 1", 3: "min(d0, d1) + 1"}),
    Case("channel-admission-rank-below-p", "§4.1: the rotating rank when admission < P",
         (("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0)),
         config=dict(host_ports="channel", admission=1),
         # one slot: port p only in cycles with (p - t) mod 2 < 1, i.e. t = p mod 2
         accept={0: "0", 1: "d0 + 1 + d0 % 2"}),
    Case("aggregation-window", "DP2a: ready at alloc + window, enqueued two later",
         (("R", 0, 0, 32, 3),), config=dict(read_mode="aggregation", read_agg_window_ticks=20,
                                            read_agg_threshold_bytes=P),
         done={0: "a0 + 13 + 20 + tR"}, commands=("a0 + 6 + 20",)),
    Case("aggregation-threshold", "DP2a: ready two cycles after the threshold's dispatch",
         tuple(("R", 0, 32 * k, 32, k) for k in range(4)),
         config=dict(read_mode="aggregation", read_agg_window_ticks=1000,
                     read_agg_threshold_bytes=128),
         commands=("a3 + 2 + 4 + 2",), flags={3: (1, 0)}),
    Case("merging-off", "§4.2 read step 3 with mshr_merge = false",
         tuple(("R", 0, 32 * k, 32, k) for k in range(3)), config=dict(mshr_merge=False),
         flags={k: (0, 0) for k in range(3)}, tags=(("m", 0), ("m", 1), ("m", 2))),
]
