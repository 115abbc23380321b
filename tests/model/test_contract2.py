"""The golden model under timing contract 2, stack shape (docs/timing-contract.md §18 step 1).

The expected cycles are the contract's: §10's worked timings (both columns), the diagrams of
§11 as exact event tables, the stalls of §4.1, §4.2, §6 and §8, and the §4a offsets against
contract 1 as randomized properties. Every expected cycle is written as the contract writes
it (``ta + 5 + tR``) with tR and tPROG taken from the configuration.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, ConfigError, load_config
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs


# ------------------------------------------------------------------ the event recorder
def record(system):
    """Record every pipeline event of ``system``'s stacks as ``(cycle, stage, name)``.

    Stages: ``cmd`` and ``cpl`` on the media ports, ``dec`` (issue decision), ``flush``,
    ``R`` (taken by choose), ``K`` (launched) and ``free`` (first FREE cycle of an entry);
    ``A`` (accept), ``M`` (dispatch), ``enq`` and ``resp`` come from the requests and
    entries afterwards (:func:`events`). Entries are named ``m<idx>`` (MSHR) or ``b<idx>``
    (write buffer), requests by their id.

    The recorder wraps the controller's methods, which the fused loop writes out, so the
    system runs the reference loop (the fused loop equals it: tests/model/test_engines_v2.py).
    """
    system.engine = "reference"
    log = []
    for s in system.stacks:
        now = [0]

        def name(tag):
            return f"{'b' if tag & 1 else 'm'}{tag >> 1}"

        def issue(t, orig=s.issue, s=s):
            now[0] = t
            return orig(t)

        def media_issue(ti, ch, sub, op, local, tag, orig=s.media.issue):
            log.append((now[0], "dec", name(tag)))
            log.append((ti, "cmd", name(tag)))
            return orig(ti, ch, sub, op, local, tag)

        def release(t, orig=s.release_media, s=s):
            changed = orig(t)
            for _ch, _sub, tag, _flags in s._delivered:
                log.append((t, "cpl", name(tag)))
            return changed

        def stages(t, orig=s.respond_stages):
            now[0] = t
            return orig(t)

        def choose(orig=s._choose):
            w = orig()
            if w is not None:
                log.append((now[0], "R", w[0].waiters[w[1]].id))
            return w

        def launch(cur, i, req, t, orig=s._launch):
            log.append((t, "K", req.id))
            if i + 1 == len(cur.waiters):
                log.append((t + 1, "free", f"{'b' if cur.kind else 'm'}{cur.idx}"))
            return orig(cur, i, req, t)

        def triggers(t, drain, orig=s.wb_triggers):
            now[0] = t
            return orig(t, drain)

        def flush(e, cause, orig=s._flush):
            log.append((now[0], "flush", f"b{e.idx}:{cause}"))
            return orig(e, cause)

        s.issue, s.media.issue, s.release_media = issue, media_issue, release
        s.respond_stages, s._choose, s._launch = stages, choose, launch
        s.wb_triggers, s._flush = triggers, flush
    return log


def events(system, log, names):
    """The whole event table: ``log`` plus accept, dispatch and response of every request,
    with request ids replaced by ``names`` (enqueue cycles are in ``entry_info``)."""
    out = set(log)
    for r in system.completed:
        out |= {(r.t_accept, "A", r.id), (r.t_map, "M", r.id), (r.t_done, "resp", r.id)}
    return {(t, s, names.get(n, n)) for t, s, n in out}


def run(cfg, spec, resp_ready=None):
    system = HbfSystem(cfg)
    system.resp_ready = resp_ready
    log = record(system) if cfg.contract == 2 else None
    system.run_requests(make_reqs(spec, cfg))
    system.completed.sort(key=lambda r: r.id)
    return system, log


def v2(**kw):
    """Contract 2 in the stack shape, this file's subject (the channel shape, the default:
    tests/model/test_channel_shape.py)."""
    return load_config(**({"contract": 2, "host_ports": "stack"} | kw))


def shaped(contract, **kw):
    """Contract 1, or contract 2 in the stack shape: the shape both contracts share."""
    return load_config(contract=contract, host_ports="stack", **kw)


def credit_launches(first, sizes, cfg):
    """Launch cycles of consecutive waiters of one channel by §8's rule: the first in
    ``first`` with full credit, each next one in the first later cycle with ``x > 0``."""
    b, g = cfg.link_byte_cost, cfg.link_gain
    x, t, out = g, first, []
    for n in sizes:
        while x <= 0:
            x, t = min(g, x + g), t + 1
        out.append(t)
        x, t = min(g, x - n * b + g), t + 1
    return out


# ------------------------------------------------------------------ configuration
def test_contract_keys_default_and_validation():
    cfg = load_config()   # contract 2 in the channel shape, the default since 2026-12-02
    assert cfg.contract == 2 and cfg.host_ports == "channel"
    assert load_config(contract=1).host_ports == "stack"      # contract 1's only shape
    assert v2().contract == 2
    with pytest.raises(ConfigError, match=r"^contract must be 1 or 2, not 3$"):
        load_config(contract=3)
    with pytest.raises(ConfigError, match=r"^host_ports must be stack or channel, not 'x'$"):
        load_config(host_ports="x")
    assert v2(host_ports="channel").host_ports == "channel"     # §18 step 5
    with pytest.raises(ConfigError, match=r"^host_ports = 'channel' needs contract = 2 "):
        load_config(contract=1, host_ports="channel")


# ------------------------------------------------------------------ §10 worked timings
@pytest.mark.parametrize("contract,extra", [(1, 4), (2, 8)])
def test_isolated_read(contract, extra):
    cfg = shaped(contract)
    system, _ = run(cfg, [("R", 0, 0, 32, 100)])
    (r,) = system.completed
    tq, ti, tc, _ = r.entry_info
    ta = r.t_accept
    assert ta == 100
    if contract == 1:
        assert (r.t_map, tq, ti) == (ta + 1, ta + 2, ta + 3)
    else:
        assert (r.t_map, tq, ti) == (ta + 2, ta + 3, ta + 5)
    assert tc == ti + cfg.t_read_ticks
    assert r.t_done - ta == cfg.t_read_ticks + extra


@pytest.mark.parametrize("contract,extra", [(1, 5), (2, 9)])
def test_isolated_full_page_write(contract, extra):
    cfg = shaped(contract)
    system, _ = run(cfg, [("W", 0, 0, PAGE_BYTES, 100)])
    (w,) = system.completed
    tq, ti, tc, _ = w.entry_info
    k = contract - 1           # v2: dispatch +1, command +1 (§4a)
    assert (w.t_map, tq, ti) == (101 + k, 103 + k, 104 + 2 * k)
    assert tc == ti + cfg.t_prog_ticks
    assert w.t_done - w.t_accept == cfg.t_prog_ticks + extra


@pytest.mark.parametrize("contract,extra", [(1, 2), (2, 5)])
def test_isolated_page_cache_hit(contract, extra):
    """A page-cache hit issues no command: dispatch +1 and response +2 only, so +3 (§4a)."""
    cfg = shaped(contract, page_cache_pages=4)
    system, _ = run(cfg, [("R", 0, 0, 32, 0), ("R", 0, 0, 32, 20_000)])
    r = system.completed[1]
    assert r.cache_hit and r.t_done - r.t_accept == cfg.cache_hit_ticks + extra


def _serial_chain(contract, t_read_us, n):
    """``n`` reads of distinct pages on one subarray, all arriving at tick 0 (§10)."""
    cfg = shaped(contract, channels=1, subarrays_per_channel=1,
                      active_per_channel=1, t_read_us=t_read_us,
                      capacity_bytes=256 * PAGE_BYTES * 4)
    system, _ = run(cfg, [("R", p, 0, 32, 0) for p in range(n)])
    return cfg, system.completed


@pytest.mark.parametrize("contract", [1, 2])
def test_serial_page_reads_pace_at_tR_plus_1(contract):
    cfg, done = _serial_chain(contract, 1.0, 6)
    cmds = [r.entry_info[1] for r in done]
    assert [b - a for a, b in zip(cmds, cmds[1:])] == [cfg.t_read_ticks + 1] * 5
    # the span grows by exactly N * dtR with tR (one channel, §5.3)
    cfg2, done2 = _serial_chain(contract, 2.0, 6)
    dtr = cfg2.t_read_ticks - cfg.t_read_ticks
    assert done2[-1].t_done - done[-1].t_done == 6 * dtr


def test_serial_page_reads_constant_grows_by_4():
    _, d1 = _serial_chain(1, 1.0, 6)
    _, d2 = _serial_chain(2, 1.0, 6)
    assert d2[-1].t_done - d1[-1].t_done == 4


@pytest.mark.parametrize("contract,first", [(1, 1), (2, 3)])
def test_merged_reads_one_response_per_cycle(contract, first):
    cfg = shaped(contract)
    system, _ = run(cfg, [("R", 3, 32 * i, 32, 0) for i in range(8)])
    done = system.completed
    tc = done[0].entry_info[2]
    assert [r.mshr_hit for r in done] == [False] + [True] * 7
    assert [r.t_done for r in done] == [tc + first + i for i in range(8)]


@pytest.mark.parametrize("contract,extra", [(1, 4), (2, 9)])
def test_isolated_read_through_two_stacks(contract, extra):
    cfg = shaped(contract, stacks=2)
    for page in (0, 1):         # one page on each stack (stack_select = interleave)
        system, _ = run(cfg, [("R", page, 0, 32, 100)])
        (r,) = system.completed
        assert r.stack == page and r.t_accept == 100
        assert r.t_done - r.t_accept == cfg.t_read_ticks + extra


@pytest.mark.parametrize("contract,writes,read_map,read_done",
                         [(1, [1708, 1709, 1710, 1711], 1712, 2565),
                          (2, [1712, 1716, 1721, 1725], 1725, 2581)])
def test_raw_worked_example(contract, writes, read_map, read_done):
    """§10's last row: 4 x 1024 B writes fill page q at ta..ta+3, a read of q at ta+4, with
    tR 850 and tPROG 1,700 ticks, ta = 0 (v2: the acknowledgements paced by §8's credit)."""
    cfg = shaped(contract, t_read_us=1.0, t_prog_us=2.0)
    assert (cfg.t_read_ticks, cfg.t_prog_ticks) == (850, 1700)
    spec = [("W", 0, 1024 * k, 1024, k) for k in range(4)] + [("R", 0, 0, 32, 4)]
    system, _ = run(cfg, spec)
    done = system.completed
    assert [r.t_done for r in done[:4]] == writes
    assert (done[4].t_map, done[4].t_done) == (read_map, read_done)
    assert not any(r.error for r in done)


# ------------------------------------------------------------------ §11 timing diagrams
def test_diagram_11_1_back_to_back_reads_one_page():
    cfg = v2()
    ta, tr = 10, cfg.t_read_ticks
    system, log = run(cfg, [("R", 7, 32 * i, 32, ta + i) for i in range(3)])
    got = events(system, log, {0: "r1", 1: "r2", 2: "r3"})
    tc = ta + 5 + tr
    want = {(ta, "A", "r1"), (ta + 1, "A", "r2"), (ta + 2, "A", "r3"),
            (ta + 2, "M", "r1"), (ta + 3, "M", "r2"), (ta + 4, "M", "r3"),
            (ta + 4, "dec", "m0"), (ta + 5, "cmd", "m0"), (tc, "cpl", "m0"),
            (tc + 1, "R", "r1"), (tc + 2, "R", "r2"), (tc + 3, "R", "r3"),
            (tc + 2, "K", "r1"), (tc + 3, "K", "r2"), (tc + 4, "K", "r3"),
            (tc + 3, "resp", "r1"), (tc + 4, "resp", "r2"), (tc + 5, "resp", "r3"),
            (tc + 5, "free", "m0")}
    assert got == want
    r1, r2, r3 = system.completed
    assert r1.entry_info[0] == ta + 3           # enqueue
    assert (r1.mshr_hit, r2.mshr_hit, r3.mshr_hit) == (False, True, True)
    assert system.stacks[0].media.page_reads == 1


def test_diagram_11_2_reads_to_different_pages_on_one_channel():
    cfg = v2()
    mp = HbfSystem(cfg).mapper
    # channel 0, subarrays 0, 1, 0 (interleave over 2 channels, 32 subarrays)
    pages = (0, 2, 64)
    assert [mp.channel_of(p, False) for p in pages] == [(0, 0, 0), (0, 1, 1), (0, 32, 0)]
    ta, tr = 10, cfg.t_read_ticks
    system, log = run(cfg, [("R", p, 0, 32, ta + i) for i, p in enumerate(pages)])
    got = events(system, log, {0: "r0", 1: "r1", 2: "r2"})
    tc0 = ta + 5 + tr
    want = {(ta, "A", "r0"), (ta + 1, "A", "r1"), (ta + 2, "A", "r2"),
            (ta + 2, "M", "r0"), (ta + 3, "M", "r1"), (ta + 4, "M", "r2"),
            (ta + 4, "dec", "m0"), (ta + 5, "dec", "m1"), (tc0, "dec", "m2"),
            (ta + 5, "cmd", "m0"), (ta + 6, "cmd", "m1"), (tc0 + 1, "cmd", "m2"),
            (tc0, "cpl", "m0"), (tc0 + 1, "cpl", "m1"), (tc0 + 1 + tr, "cpl", "m2"),
            (tc0 + 1, "R", "r0"), (tc0 + 2, "R", "r1"), (tc0 + 2 + tr, "R", "r2"),
            (tc0 + 2, "K", "r0"), (tc0 + 3, "K", "r1"), (tc0 + 3 + tr, "K", "r2"),
            (tc0 + 3, "resp", "r0"), (tc0 + 4, "resp", "r1"), (tc0 + 4 + tr, "resp", "r2"),
            (tc0 + 3, "free", "m0"), (tc0 + 4, "free", "m1"), (tc0 + 4 + tr, "free", "m2")}
    assert got == want
    assert [r.entry_info[0] for r in system.completed] == [ta + 3, ta + 4, ta + 5]


def test_diagram_11_3_raw():
    """w1..w4 fill page q; r reads it; three more reads (other pages) show Q filling."""
    cfg = v2()
    ta, tr, tp = 10, cfg.t_read_ticks, cfg.t_prog_ticks
    spec = [("W", 4, 1024 * k, 1024, ta + k) for k in range(4)] + [("R", 4, 0, 32, ta + 4)]
    spec += [("R", 9 + 2 * k, 0, 32, ta + 5 + k) for k in range(3)]  # channel 1
    names = {0: "w1", 1: "w2", 2: "w3", 3: "w4", 4: "r", 5: "n1", 6: "n2", 7: "n3"}
    system, log = run(cfg, spec)
    got = events(system, log, names)
    tc = ta + 9 + tp
    want = {(ta + k, "A", f"w{k + 1}") for k in range(4)}
    want |= {(ta + 2 + k, "M", f"w{k + 1}") for k in range(4)}
    want |= {(ta + 4, "A", "r"), (ta + 6, "flush", "b0:full"),
             (ta + 8, "dec", "b0"), (ta + 9, "cmd", "b0"), (tc, "cpl", "b0")}
    # the 1024 B acknowledgements cost more than a tick's refill: paced by the credit
    k1, k2, k3, k4 = credit_launches(tc + 2, [1024] * 4, cfg)
    assert (k1, k2) == (tc + 2, tc + 6)         # the diagram's rows
    want |= {(tc + 1, "R", "w1"), (tc + 2, "R", "w2"), (tc + 3, "R", "w3"), (k2, "R", "w4")}
    want |= {(k, "K", f"w{i + 1}") for i, k in enumerate((k1, k2, k3, k4))}
    want |= {(k + 1, "resp", f"w{i + 1}") for i, k in enumerate((k1, k2, k3, k4))}
    f = k4 + 1                                  # b FREE, r dispatched
    want |= {(f, "free", "b0"), (f, "M", "r"),
             (f + 2, "dec", "m0"), (f + 3, "cmd", "m0"), (f + 3 + tr, "cpl", "m0"),
             (f + 4 + tr, "R", "r"), (f + 5 + tr, "K", "r"), (f + 6 + tr, "resp", "r"),
             (f + 6 + tr, "free", "m0")}
    # the reads behind r: n1, n2 accepted behind the stall (Q full from ta + 7), n3 once
    # r has left M and n1 moved up (Q's occupancy is 1 again at the start of f + 1)
    want |= {(ta + 5, "A", "n1"), (ta + 6, "A", "n2"), (f + 1, "A", "n3"),
             (f + 1, "M", "n1"), (f + 2, "M", "n2"), (f + 3, "M", "n3")}
    got_main = {e for e in got if e[2] in names.values() or e[2] in ("b0", "m0", "b0:full")}
    got_main -= {e for e in got_main
                 if e[2] in ("n1", "n2", "n3") and e[1] not in ("A", "M")}
    assert got_main == want
    assert system.completed[0].entry_info[0] == ta + 7      # b enqueued
    r = system.completed[4]
    assert r.entry_info[0] == f + 1 and not r.buffer_hit
    # r's stall counts a read-after-write event, but the flush reports the prior cause
    assert system.stats["flush_full"] == 1 and system.stats["flush_raw"] == 0
    assert system.stats["raw_events"] == 1


def test_diagram_11_4_two_stacks_competing():
    """Entry a of stack 0 (a1, a2) and entry b of stack 1 (b1, b2) RETURN in one cycle u,
    the round-robin pointer at stack 0.

    The route stage passes one request per cycle, so two READs of tR cannot complete in one
    cycle; b's READ is made a page-buffer hit instead (page b read once before, which also
    leaves the pointer at stack 0) and enters ``tR - buffer_hit_ticks`` cycles after a's."""
    cfg = v2(stacks=2, t_read_us=1.0)
    tr, hit = cfg.t_read_ticks, cfg.buffer_hit_ticks
    T = 10 * tr
    d = tr - hit
    # logical page 0 is stack 0's page 0, logical page 1 stack 1's page 0 (interleave)
    spec = [("R", 1, 0, 32, 0),
            ("R", 0, 0, 32, T), ("R", 0, 32, 32, T + 1),
            ("R", 1, 0, 32, T + d), ("R", 1, 32, 32, T + d + 1)]
    system, log = run(cfg, spec)
    got = events(system, log, {1: "a1", 2: "a2", 3: "b1", 4: "b2"})
    _, a1, a2, b1, b2 = system.completed
    assert (a1.stack, b1.stack) == (0, 1) and b1.buffer_hit and not a1.buffer_hit
    u = a1.entry_info[2] + 1
    assert b1.entry_info[2] + 1 == u
    after = {e for e in got if e[0] >= u and e[1] in ("R", "K", "resp")}
    want = {(u, "R", "a1"), (u, "R", "b1"), (u + 1, "R", "a2"), (u + 1, "R", "b2"),
            (u + 1, "K", "a1"), (u + 1, "K", "b1"), (u + 2, "K", "a2"), (u + 2, "K", "b2"),
            (u + 2, "resp", "a1"), (u + 3, "resp", "b1"), (u + 4, "resp", "a2"),
            (u + 5, "resp", "b2")}
    assert after == want


def test_diagram_11_5_credit_slow_link():
    """1 B/tick: two 128 B waiters of one entry launch 128 ticks apart (HBF-Sim's unit
    test); contract 1's bucket sends them in consecutive cycles."""
    cfg = v2(channel_bw_gbps=0.85)
    assert (cfg.link_unit, cfg.link_byte_cost, cfg.link_gain) == (850_000, 1, 1)
    system = HbfSystem(cfg)
    log = record(system)
    link = system.stacks[0].link
    levels = []
    orig = link.charge
    link.charge = lambda ch, t, n: (levels.append((t, link.level(ch, t))), orig(ch, t, n))[1]
    reqs = make_reqs([("R", 0, 0, 128, 0), ("R", 0, 128, 128, 0)], cfg)
    system.run_requests(reqs)
    w1, w2 = reqs
    u = w1.entry_info[2] + 1
    got = events(system, log, {0: "w1", 1: "w2"})
    assert {e for e in got if e[0] >= u and e[1] in ("R", "K", "resp")} == {
        (u, "R", "w1"), (u + 1, "R", "w2"), (u + 1, "K", "w1"), (u + 129, "K", "w2"),
        (u + 2, "resp", "w1"), (u + 130, "resp", "w2")}
    assert levels == [(u + 1, 1), (u + 129, 1)]
    assert link.level(0, u + 130) == 1 - 128 + 1
    old, _ = run(load_config(contract=1, channel_bw_gbps=0.85), [("R", 0, 0, 128, 0),
                                                      ("R", 0, 128, 128, 0)])
    v1_w1, v1_w2 = old.completed
    assert v1_w2.t_done - v1_w1.t_done == 1


@pytest.mark.parametrize("mhz,units", [(850.0, (50_000, 17, 3_840)),
                                       (1512.0, (24_000, 63, 8_000))])
def test_credit_units(mhz, units):
    """§8's worked units at 192 GB/s: the defaults and the decode clock."""
    cfg = v2(memory_clock_mhz=mhz)
    assert (cfg.link_unit, cfg.link_byte_cost, cfg.link_gain) == units


def test_link_burst_bytes_is_refused_under_contract_2():
    assert v2(link_burst_bytes=4096).link_burst_bytes == 4096
    with pytest.raises(ConfigError, match=r"^link_burst_bytes is not used by contract = 2 "
                                          r".*, not 8192$"):
        v2(link_burst_bytes=8192)
    assert load_config(contract=1, link_burst_bytes=8192).link_burst_bytes == 8192


# ------------------------------------------------------------------ stalls
def test_stall_no_free_mshr_entry():
    """One MSHR entry: the second read waits in M until the first entry is FREE, the cycle
    after its waiter's launch (v2 §4.3): completion + 3 (v1: + 2)."""
    for contract, free_after in ((1, 2), (2, 3)):
        cfg = shaped(contract, mshr_entries=1)
        system, _ = run(cfg, [("R", 0, 0, 32, 0), ("R", 2, 0, 32, 1)])
        r0, r1 = system.completed
        tc = r0.entry_info[2]
        assert r1.t_map == tc + free_after
        k = contract - 1
        assert r1.entry_info[:2] == (r1.t_map + 1, r1.t_map + 2 + k)
        assert r1.t_done == r1.entry_info[1] + cfg.t_read_ticks + 1 + 2 * k


def test_stall_full_channel_queue():
    """queue_depth 1, one active slot: an entry enqueues only when the queue held none at
    the start of the cycle (v1 §6, counting the entry decided in that cycle)."""
    cfg = v2(queue_depth=1, active_per_channel=1)
    ta, tr = 0, cfg.t_read_ticks
    # channel 0, subarrays 0, 1, 2 (pages 0, 2, 4)
    system, log = run(cfg, [("R", 2 * k, 0, 32, ta + k) for k in range(3)])
    e0, e1, e2 = (r.entry_info for r in system.completed)
    tc0 = ta + 5 + tr
    assert (e0[0], e0[1], e0[2]) == (ta + 3, ta + 5, tc0)
    assert e1[0] == ta + 5                  # not ta + 4: e0 was still queued at its start
    assert (e1[1], e1[2]) == (tc0 + 1, tc0 + 1 + tr)   # decided in tc0 (forwarding)
    assert e2[0] == tc0 + 1                 # e1 left the queue by the decision in tc0
    assert e2[1] == tc0 + 2 + tr


def test_stall_ingress_queue_full_and_admission_full():
    """Admission 2: the third request is accepted the cycle after the first response's
    handshake (v2 §4.1, kept from v1)."""
    for contract in (1, 2):
        cfg = shaped(contract, admission=2)
        system, _ = run(cfg, [("R", 2 * p, 0, 32, 0) for p in range(3)])
        r0, r1, r2 = system.completed
        assert (r0.t_accept, r1.t_accept) == (0, 1)
        assert r2.t_accept == r0.t_done + 1


def test_stall_resp_ready_low_with_egress_full():
    """Four merged reads; ``resp.ready`` low for H cycles from the first response: E fills
    with two responses, K holds the third (launched the cycle after the first handshake,
    E's start-of-cycle occupancy), R the fourth."""
    cfg = v2()
    spec = [("R", 5, 32 * i, 32, i) for i in range(4)]
    system, _ = run(cfg, spec)
    tc = system.completed[0].entry_info[2]
    H = 7
    system, log = run(cfg, spec, resp_ready=lambda t: not tc + 3 <= t < tc + 3 + H)
    got = events(system, log, {i: f"r{i + 1}" for i in range(4)})
    ks = sorted(t for t, s, _ in got if s == "K")
    rs = sorted(t for t, s, _ in got if s == "R")
    assert rs == [tc + 1, tc + 2, tc + 3, tc + 4]
    assert ks == [tc + 2, tc + 3, tc + 4 + H, tc + 5 + H]
    assert [r.t_done for r in system.completed] == [tc + 3 + H + i for i in range(4)]


def test_stall_credit_is_charged_at_launch_not_while_held():
    """A waiter held in K by a full E is charged nothing until it launches (v2 §11.4)."""
    cfg = v2()              # 32 B responses cost less than one tick's refill: never wait
    spec = [("R", 5, 32 * i, 32, i) for i in range(3)]
    system = HbfSystem(cfg)
    system.engine = "reference"     # the wrapped charge is written out by the fused loop
    link = system.stacks[0].link
    charges = []
    orig = link.charge
    link.charge = lambda ch, t, n: (charges.append(t), orig(ch, t, n))[1]
    system.resp_ready = lambda t: t >= 30_000
    system.run_requests(make_reqs(spec, cfg))
    tc = system.completed[0].entry_info[2]
    # r1, r2 launch at once and fill E; r3 only after the first handshake made room
    assert charges == [tc + 2, tc + 3, 30_001]


# ------------------------------------------------------------------ §4a offsets
cfgs = st.fixed_dictionaries({
    "channels": st.sampled_from([1, 2, 4]),
    "subarrays_per_channel": st.sampled_from([1, 4]),
    "t_read_us": st.sampled_from([0.05, 0.5, 15.0]),
    "t_prog_us": st.sampled_from([0.1, 2.0]),
    "page_buffers": st.sampled_from([0, 2]),
    "scheduler": st.sampled_from(["fcfs", "read-priority", "write-drain"]),
    "stacks": st.sampled_from([1, 1, 2]),
    "write_timeout_policy": st.sampled_from(["strict", "partial"]),
})


def _pair(kw, spec):
    out = []
    for contract in (1, 2):
        cfg = shaped(contract, pages_per_block=4, **kw)
        system, _ = run(cfg, spec)
        out.append(system)
    return out


@settings(max_examples=60, deadline=None)
@given(kw=cfgs, op=st.sampled_from("RW"), page=st.integers(0, 63),
       size=st.sampled_from([32, 128, 1024, PAGE_BYTES]), arrival=st.integers(0, 50))
def test_isolated_request_responds_4_later(kw, op, page, size, arrival):
    """v2 §4a: an isolated request served by the media responds exactly 4 ticks later than
    under contract 1 (an incomplete write under strict is not: 3, §4a's footnote)."""
    off = 0 if size == PAGE_BYTES else (page * 32) % (PAGE_BYTES - size)
    s1, s2 = _pair(kw, [("W" if op == "W" else "R", page, off, size, arrival)])
    (r1,), (r2,) = s1.completed, s2.completed
    assert r1.t_accept == r2.t_accept == arrival
    strict_error = op == "W" and size < PAGE_BYTES and kw["write_timeout_policy"] == "strict"
    assert r1.error == r2.error == strict_error
    assert r2.t_done - r1.t_done == (3 if strict_error else 4) + (kw["stacks"] > 1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 12), waiters=st.integers(1, 4), t_read_us=st.sampled_from([0.05, 1.0]),
       gap=st.integers(0, 3), buffers=st.sampled_from([0, 2]))
def test_serial_chain_media_pacing_equal(n, waiters, t_read_us, gap, buffers):
    """Reads of ``n`` distinct pages on one subarray, ``waiters`` merged reads each: every
    command on ``cmd`` is exactly 2 ticks later under contract 2 and every response 4
    (v2 §7: a freed subarray takes its next command in ``tc + 1``, as in v1)."""
    kw = dict(channels=1, subarrays_per_channel=1, active_per_channel=1,
              t_read_us=t_read_us, page_buffers=buffers, capacity_bytes=256 * PAGE_BYTES * 4)
    spec, t = [], 0
    for p in range(n):
        for k in range(waiters):
            spec.append(("R", p, 32 * k, 32, t))
            t += gap
    s1, s2 = _pair(kw, spec)
    assert [r.entry_info[1] + 2 for r in s1.completed] == [r.entry_info[1] for r in s2.completed]
    assert [r.t_done + 4 for r in s1.completed] == [r.t_done for r in s2.completed]
    assert [r.mshr_hit for r in s1.completed] == [r.mshr_hit for r in s2.completed]


# ------------------------------------------------------------------ §8 credit, step 2
def _launches(system):
    """Wrap every stack's credit: record each launch as ``(stack, channel, tick, bytes)``.
    The fused loop writes the charge out, so the system runs the reference loop."""
    system.engine = "reference"
    out = []
    for s in system.stacks:
        link = s.link

        def charge(ch, t, n, orig=link.charge, k=s.stack):
            out.append((k, ch, t, n))
            return orig(ch, t, n)

        link.charge = charge
    return out


credit_runs = st.fixed_dictionaries({
    "bw": st.sampled_from([0.85, 3.0, 8.0, 192.0]),
    "channels": st.sampled_from([1, 2]),
    "reqs": st.lists(st.tuples(st.sampled_from("RRRW"), st.integers(0, 15),
                               st.sampled_from([1, 32, 128, 1000, PAGE_BYTES]),
                               st.integers(0, 40)), min_size=1, max_size=40),
})


def _credit_system(run_kw):
    cfg = v2(channels=run_kw["channels"], subarrays_per_channel=4,
             channel_bw_gbps=run_kw["bw"], t_read_us=0.2, t_prog_us=0.5,
             write_timeout_policy="partial", pages_per_block=4)
    reqs, t = [], 0
    for i, (op, page, n, gap) in enumerate(run_kw["reqs"]):
        t += gap
        reqs.append((op, page, 0 if n == PAGE_BYTES else (i * 64) % (PAGE_BYTES - n), n, t))
    return cfg, make_reqs(reqs, cfg)


@settings(max_examples=40, deadline=None)
@given(run_kw=credit_runs)
def test_credit_bounds_launched_bytes_over_every_window(run_kw):
    """§15 (3): over any interval [t0, t1] the bytes launched on a channel are at most
    ``γ/b * (t1 - t0 + 1) + 4096``."""
    cfg, reqs = _credit_system(run_kw)
    system = HbfSystem(cfg, keep=False)
    log = _launches(system)
    system.run_requests(reqs)
    assert len(log) == len(reqs)
    b, g = cfg.link_byte_cost, cfg.link_gain
    for ch in range(cfg.channels):
        ts = [(t, n) for _, c, t, n in log if c == ch]
        for i in range(len(ts)):
            total = 0
            for j in range(i, len(ts)):
                total += ts[j][1]
                # b * bytes <= γ * len + 4096 * b, in integers
                assert b * total <= g * (ts[j][0] - ts[i][0] + 1) + PAGE_BYTES * b


@pytest.mark.parametrize("bw", [8.0, 192.0])
def test_credit_rate_under_saturation(bw):
    """32 page reads completing one per cycle on one channel saturate the link: every
    launch is in the first tick with positive credit (x of §8, recomputed here), and the
    bytes before the last launch are the rate ``γ / b`` times the span to within one tick's
    refill (``b * bytes - γ * span = γ - x`` with ``0 < x <= γ``)."""
    cfg = v2(channels=1, channel_bw_gbps=bw)
    system = HbfSystem(cfg, keep=False)
    log = _launches(system)
    system.run_requests(make_reqs([("R", p, 0, PAGE_BYTES, 0) for p in range(32)], cfg))
    b, g = cfg.link_byte_cost, cfg.link_gain
    x, tx, prev = g, 0, None        # x at the start of cycle tx; no launch in between

    def level(u):
        return min(g, x + g * (u - tx))

    for _, _, t, n in log:
        assert level(t) > 0
        if prev is not None and t - 1 > prev:   # K waited: for credit alone
            assert level(t - 1) <= 0
        x, tx, prev = min(g, level(t) - n * b + g), t + 1, t
    span = log[-1][2] - log[0][2]
    before_last = sum(n for *_, n in log[:-1])
    assert 0 <= b * before_last - g * span < g
    assert span > 31 * PAGE_BYTES * b // g - 1      # the link, not the media, set the pace


@settings(max_examples=25, deadline=None)
@given(run_kw=credit_runs)
def test_event_skipping_equals_stepping_every_cycle(run_kw):
    """The loop skips cycles in which nothing can change (C3), credit waits included: the
    same run stepped one cycle per call gives the same events."""
    out = []
    for step in (False, True):
        cfg, reqs = _credit_system(run_kw)
        system = HbfSystem(cfg)
        log = _launches(system)
        for r in reqs:
            system.submit(r)
        system.close_input()
        if step:
            while system.n_done < system.submitted:
                system.run(until=system.t)
        else:
            system.run()
        out.append(([(r.t_accept, r.t_map, r.t_done, r.entry_info) for r in reqs], log))
    assert out[0] == out[1]
