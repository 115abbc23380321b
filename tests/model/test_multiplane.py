"""Multi-plane (hyperpage) commands in the golden model (docs/timing-contract.md §7a).

The checks: the design's "Worked timings" table for ``multiplane = off / page / megaplane``,
exactly; ``megaplane_planes = 1`` equals ``off`` event for event on random traffic in both
contract-2 shapes; a partial megapage issues at the window (MP4); the active-slot cut (MP5);
the slowest plane's latency with a page-buffer hit inside a group (MP6, MP8); a PROGRAM group
(MP9); a page-granular stream on one megaplane is ``M`` times slower than ``off`` (MP1); the
keys' defaults and refusals.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, ConfigError, load_config
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs

MODES = ("off", "page", "megaplane")


def mp(mode, M=4, S=8, **kw):
    """One channel of ``S`` subarrays in megaplanes of ``M``, tR 1 us."""
    kw.setdefault("channels", 1)
    return load_config(multiplane=mode, subarrays_per_channel=S,
                       planes_per_die=S, megaplane_planes=M, t_read_us=1.0, **kw)


def run(cfg, spec, close=True):
    """Run ``spec`` (:func:`make_reqs`); return the system (requests by id) and its media
    commands as ``(ti, stack, channel, (subarray, ...), op, (tag, ...), (latency, ...))``,
    one per command, whichever interface issued it. ``close = False`` keeps ``drain`` low
    (the worked timings assume nothing else happens)."""
    system = HbfSystem(cfg)
    cmds = []
    for s in system.stacks:
        def one(ti, ch, sub, op, local, tag, orig=s.media.issue, k=s.stack):
            lat = orig(ti, ch, sub, op, local, tag)
            cmds.append((ti, k, ch, (sub,), op, (tag,), (lat,)))
            return lat

        def group(ti, ch, g, ops, orig=s.media.issue_group, k=s.stack):
            lats = orig(ti, ch, g, ops)
            ops = list(ops)
            assert len({o[1] for o in ops}) == 1 and len({o[0] for o in ops}) == len(ops)
            assert {o[0] // cfg.megaplane_planes for o in ops} == {g}
            cmds.append((ti, k, ch, tuple(o[0] for o in ops), ops[0][1],
                         tuple(o[3] for o in ops), tuple(lats)))
            return lats
        s.media.issue, s.media.issue_group = one, group
    for r in make_reqs(spec, cfg):
        system.submit(r)
    if close:
        system.close_input()
    system.run()
    system.completed.sort(key=lambda r: r.id)
    return system, cmds


def megapage(cfg, row, g=0, planes=None, op="R", t=0, n=64):
    """Requests for the pages of megaplane ``g`` at channel-local ``row`` (one channel)."""
    M, S = cfg.megaplane_planes, cfg.subarrays_per_channel
    planes = range(M) if planes is None else planes
    return [(op, row * S + g * M + i, 0, n, t) for i in planes]


def busy_planes(cmds):
    """The most planes executing at once (each used plane for its own latency)."""
    edges = []
    for ti, _k, _ch, subs, _op, _tags, lats in cmds:
        for lat in lats:
            edges += [(ti, 1), (ti + lat, -1)]
    most = cur = 0
    for _, d in sorted(edges):
        cur += d
        most = max(most, cur)
    return most


# ------------------------------------------------------------------ the worked timings
@pytest.mark.parametrize("M", [2, 4, 8])
@pytest.mark.parametrize("mode", MODES)
def test_worked_timings(mode, M):
    """The design's table: ``M`` page READs of one megapage enqueued one per cycle from
    ``E``; the first command, every command, the last page's completion and the planes busy
    at once on the megaplane, exactly as the table writes them (timing-contract.md §7a,
    relative to ``E``)."""
    cfg = mp(mode, M=M)
    tR = cfg.t_read_ticks
    system, cmds = run(cfg, megapage(cfg, row=3), close=False)
    tq = [r.entry_info[0] for r in system.completed]
    E = tq[0]
    assert tq == list(range(E, E + M))     # the arbiter enqueues one per cycle
    last = max(r.entry_info[2] for r in system.completed)
    if mode == "off":
        assert [c[0] for c in cmds] == [E + 2 + i for i in range(M)]
        assert last == E + M + 1 + tR
        assert busy_planes(cmds) == M
    elif mode == "page":
        assert [c[0] for c in cmds] == [E + 2 + i * (tR + 1) for i in range(M)]
        assert all(len(c[3]) == 1 for c in cmds)
        assert last == E + 1 + M * (tR + 1)
        assert busy_planes(cmds) == 1
    else:
        assert [(c[0], c[3]) for c in cmds] == [(E + M + 1, tuple(range(M)))]
        assert last == E + M + 1 + tR
        assert busy_planes(cmds) == M
    if mode == "megaplane":     # MP7: every operation of the command completes with it
        assert {r.entry_info[2] for r in system.completed} == {E + M + 1 + tR}


def test_drain_ends_the_window_before_the_last_page_is_enqueued():
    """MP4 with ``drain``: the input closes after the megapage, so drain rises the cycle after
    the last request left M (§1), two cycles before its operation is enqueued; the window
    ends then and the pages not yet candidates take a second command (the design's note
    under MP4)."""
    cfg = mp("megaplane", M=4)
    tR = cfg.t_read_ticks
    system, cmds = run(cfg, megapage(cfg, row=0), close=True)
    E = system.completed[0].entry_info[0]
    # the last request left M in E + 1 (dispatch ta + 2, enqueue ta + 4), drain rises in
    # E + 2, the cycle page 2 is enqueued: the window ends with pages 0 and 1 as
    # candidates (command in E + 3), and pages 2 and 3 take a second command
    assert [(c[0], c[3]) for c in cmds] == [(E + 3, (0, 1)), (E + 4 + tR, (2, 3))]


# ------------------------------------------------------------------ M = 1 is off
traffic = st.lists(st.tuples(st.sampled_from("RRW"), st.integers(0, 47),
                             st.sampled_from([0, 32, 1024]),
                             st.sampled_from([32, 1024, PAGE_BYTES]), st.integers(0, 3)),
                   min_size=1, max_size=50)
configs = st.fixed_dictionaries({
    "host_ports": st.sampled_from(["stack", "channel"]),
    "channels": st.sampled_from([1, 2]),
    "admission": st.sampled_from([3, 256]),
    "mshr_entries": st.sampled_from([2, 16]),
    "write_buffer_entries": st.sampled_from([1, 8]),
    "queue_depth": st.sampled_from([1, 4, 64]),
    "active_per_channel": st.sampled_from([1, 2, 4]),
    "active_total": st.sampled_from([0, 3]),
    "mshr_merge": st.booleans(),
    "page_buffers": st.sampled_from([0, 2]),
    "scheduler": st.sampled_from(["fcfs", "read-priority", "write-drain"]),
    "write_timeout_policy": st.sampled_from(["strict", "partial"]),
    "read_mode": st.sampled_from(["demand", "aggregation"]),
})


def outcome(system):
    return [(r.t_accept, r.t_map, r.t_done, r.entry_info, r.mshr_hit, r.buffer_hit,
             r.cache_hit, r.error, r.data) for r in system.completed]


@settings(max_examples=60, deadline=None)
@given(kw=configs, ops=traffic, mode=st.sampled_from(["page", "megaplane"]))
def test_one_plane_megaplanes_equal_off(kw, ops, mode):
    """``multiplane = page / megaplane`` with ``M = 1`` is ``off`` exactly (Configuration):
    every command (cycle, channel, subarray, op, tag, latency), every request's accept,
    dispatch, enqueue, command, completion and response cycle and flags, and the counters,
    on random traffic in both shapes, through the multi-plane code path."""
    spec, t = [], 0
    for op, page, off, n, gap in ops:
        t += gap
        spec.append((op, page, min(off, PAGE_BYTES - n), n, t))
    if kw["host_ports"] == "channel" and kw["write_buffer_entries"] % kw["channels"]:
        kw = kw | {"pools": "stack"}     # a pool per channel needs multiples of channels
    base = dict(capacity_bytes=2 * kw["channels"] * 4 * 8 * PAGE_BYTES, pages_per_block=8,
                subarrays_per_channel=4, t_read_us=0.1, t_prog_us=0.5, t_erase_us=1.0,
                write_deadline_ticks=40, **kw)
    cfg_off = load_config(multiplane="off", **base)
    cfg_mp = load_config(multiplane=mode, megaplane_planes=1, **base)
    (s1, c1), (s2, c2) = run(cfg_off, spec), run(cfg_mp, spec)
    assert s2.stacks[0].mp is not None and s2.stacks[0].mp.commands == len(c2)
    assert outcome(s1) == outcome(s2)
    assert sorted(c1) == sorted(c2)
    assert dict(s1.stats) == dict(s2.stats)


# ------------------------------------------------------------------ MP4 the window
def test_partial_megapage_issues_at_the_window():
    """Two of four pages queued: the command leaves ``hyperpage_window_ticks`` after the
    first was enqueued (decided in ``E + W``, on ``cmd`` in ``E + W + 1``) with the pages
    present; a page of the row enqueued later waits for the megaplane and its own window."""
    W = 20
    cfg = mp("megaplane", M=4, hyperpage_window_ticks=W)
    tR = cfg.t_read_ticks
    spec = megapage(cfg, row=1, planes=[0, 2]) + megapage(cfg, row=1, planes=[3], t=30)
    system, cmds = run(cfg, spec, close=False)
    E = system.completed[0].entry_info[0]
    late = system.completed[2].entry_info[0]
    assert late > E + W + 1                  # enqueued after the first command left
    assert [(c[0], c[3]) for c in cmds] == [(E + W + 1, (0, 2)),
                                            (max(E + W + 2 + tR, late + W + 1), (3,))]


def test_window_zero_issues_what_is_queued():
    """A window of 0: the first page issues alone as under ``off`` (``E + 2``); the other
    three, queued meanwhile, wait for the megaplane (MP1) and leave as one command in the
    cycle after its completion (§7 forwarding)."""
    cfg = mp("megaplane", M=4, hyperpage_window_ticks=0)
    tR = cfg.t_read_ticks
    system, cmds = run(cfg, megapage(cfg, row=0), close=False)
    E = system.completed[0].entry_info[0]
    assert [(c[0], c[3]) for c in cmds] == [(E + 2, (0,)), (E + 3 + tR, (1, 2, 3))]


def test_full_megapage_does_not_wait_for_a_long_window():
    """MP4: a full megapage is a candidate at once, whatever the window."""
    cfg = mp("megaplane", M=4, hyperpage_window_ticks=10_000)
    system, cmds = run(cfg, megapage(cfg, row=0), close=False)
    E = system.completed[0].entry_info[0]
    assert [(c[0], c[3]) for c in cmds] == [(E + 5, (0, 1, 2, 3))]


def test_group_frees_its_queue_slots_from_the_next_cycle():
    """§6 with MP3: the enqueue arbiter counts the queue's occupancy at the start of the
    cycle, so a group of four leaving a full queue of four in ``td`` lets the next operation
    in only in ``td + 1``."""
    cfg = mp("megaplane", M=4, queue_depth=4)
    spec = megapage(cfg, row=0) + megapage(cfg, row=0, g=1, planes=[0])
    system, cmds = run(cfg, spec, close=False)
    E = system.completed[0].entry_info[0]
    assert cmds[0][0] == E + 5              # decided in E + 4 with the queue full
    assert system.completed[4].entry_info[0] == E + 5


# ------------------------------------------------------------------ MP5 active slots
@pytest.mark.parametrize("cap", [dict(active_per_channel=3), dict(active_total=3)])
def test_active_slot_cut(cap):
    """Three free slots, a full megapage of four: the command takes the oldest three; the
    fourth, past its window by then, leaves alone when the slots come back."""
    cfg = mp("megaplane", M=4, **cap)
    tR = cfg.t_read_ticks
    system, cmds = run(cfg, megapage(cfg, row=2), close=False)
    E = system.completed[0].entry_info[0]
    assert [(c[0], c[3]) for c in cmds] == [(E + 5, (0, 1, 2)), (E + 6 + tR, (3,))]


def test_group_cut_to_slots_another_megaplane_holds():
    """Slots held by one megaplane's command cut the next megaplane's group (MP5: the
    channel's active count plus the group's size within ``active_per_channel``)."""
    cfg = mp("megaplane", M=2, S=4, active_per_channel=3)
    spec = megapage(cfg, row=0, g=0) + megapage(cfg, row=0, g=1)
    system, cmds = run(cfg, spec, close=False)
    assert [c[3] for c in cmds[:2]] == [(0, 1), (2,)]
    assert cmds[2][3] == (3,)


# ------------------------------------------------------------------ MP6, MP8, MP9
def test_group_is_due_at_its_slowest_plane_with_a_buffer_hit():
    """A READ group in which one plane holds the page in its page buffers: that plane
    serves it in ``buffer_hit_ticks`` inside the group (MP8), the command is due at ``tR``,
    the slowest plane (MP6), and the hit is flagged on that page's response only."""
    cfg = mp("megaplane", M=4)
    tR, hit = cfg.t_read_ticks, cfg.buffer_hit_ticks
    spec = megapage(cfg, row=0, planes=[1]) + megapage(cfg, row=0, t=5000)
    system, cmds = run(cfg, spec, close=False)
    assert cmds[1][3] == (0, 1, 2, 3) and cmds[1][6] == (tR, hit, tR, tR)
    ti = cmds[1][0]
    assert [r.entry_info[2] for r in system.completed[1:]] == [ti + tR] * 4
    assert [r.buffer_hit for r in system.completed[1:]] == [False, True, False, False]


def test_program_group():
    """Four full-page writes to one megapage (MP9): they flush (full), enqueue one per
    cycle, leave as one PROGRAM command when the megapage is full, complete together at
    ``tPROG`` and are programmed (the data reads back)."""
    cfg = mp("megaplane", M=4)
    tP = cfg.t_prog_ticks
    spec = megapage(cfg, row=5, op="W", n=PAGE_BYTES)
    spec += [("R", p, 0, 64, 10 * tP) for _, p, *_ in spec]
    system, cmds = run(cfg, spec, close=False)
    w = system.completed[:4]
    E = w[0].entry_info[0]
    assert [r.entry_info[0] for r in w] == [E, E + 1, E + 2, E + 3]
    assert (cmds[0][0], cmds[0][3], cmds[0][4]) == (E + 5, (0, 1, 2, 3), 1)
    assert [r.entry_info[2] for r in w] == [E + 5 + tP] * 4 and not any(r.error for r in w)
    assert [r.data for r in system.completed[4:]] == [bytes([i + 1]) * 64 for i in range(4)]
    assert system.stats["page_programs_ok"] == 4


# ------------------------------------------------------------------ MP1
@pytest.mark.parametrize("M", [4, 8])
def test_page_stream_on_one_megaplane_is_M_times_slower(M):
    """MP1: ``rows`` megapages of one megaplane read page by page. ``off`` runs the ``M``
    planes in parallel; ``page`` holds the megaplane for every page, so its span is ``M``
    times ``off``'s; ``megaplane`` recovers ``off``'s within its gathering."""
    rows = 6
    spans = {}
    for mode in MODES:
        cfg = mp(mode, M=M, S=M, queue_depth=64)
        spec = [r for row in range(rows) for r in megapage(cfg, row=row)]
        system, _ = run(cfg, spec)
        spans[mode] = max(r.t_done for r in system.completed)
    assert spans["page"] / spans["off"] == pytest.approx(M, rel=0.02)
    assert spans["megaplane"] / spans["off"] == pytest.approx(1, rel=0.02)


# ------------------------------------------------------------------ configuration
def test_keys_default_and_window_follows_megaplane_planes():
    cfg = load_config()
    assert (cfg.multiplane, cfg.hyperpage_window_ticks) == ("off", -1)
    assert mp("megaplane", M=4).hyperpage_window == 4
    assert mp("megaplane", M=4, hyperpage_window_ticks=0).hyperpage_window == 0
    assert HbfSystem(mp("off")).stacks[0].mp is None


@pytest.mark.parametrize("kw, msg", [
    (dict(multiplane="wide"), r"multiplane must be off, page or megaplane, not 'wide'"),
    (dict(multiplane="megaplane", hyperpage_window_ticks=-2),
     r"hyperpage_window_ticks must be a tick count >= 0 .*not -2"),
    (dict(multiplane="page", hyperpage_window_ticks=8),
     r"hyperpage_window_ticks is used by multiplane = 'megaplane' only, not 8"),
])
def test_keys_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(**kw)


@pytest.mark.parametrize("mode", MODES)
def test_channel_shape_megapage_per_channel(mode):
    """The channel shape (§14) shares the channel queues and issue: a megapage on each of
    two channels, presented on both ports at once, enqueues on both from ``E`` and leaves
    as one command per channel in ``E + M + 1`` (``off``: one per page from ``E + 2``)."""
    M, C = 4, 2
    cfg = mp(mode, M=M, channels=C, host_ports="channel")
    S = cfg.subarrays_per_channel
    spec = [("R", C * (2 * S + i) + ch, 0, 64, 0) for i in range(M) for ch in range(C)]
    system, cmds = run(cfg, spec, close=False)
    E = min(r.entry_info[0] for r in system.completed)
    for ch in range(C):
        mine = [c for c in cmds if c[2] == ch]
        if mode == "megaplane":
            assert [(c[0], c[3]) for c in mine] == [(E + M + 1, tuple(range(M)))]
        else:
            assert mine[0][0] == E + 2 and len(mine) == M
