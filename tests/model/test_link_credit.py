"""The host-link deficit credit of the response ports (docs/timing-contract.md §8, §15) in
both host-port shapes: its bound over every window, its rate under saturation, and event
skipping across credit waits (C3). Moved from the retired standard pipeline's tests; the
credit is the contract's, unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.system import HbfSystem
from tests.conftest import make_reqs


def _launches(system):
    """Wrap every stack's credit: record each launch as ``(stack, channel, tick, bytes)``."""
    out = []
    for s in system.stacks:
        link = s.link

        def launch(ch, t, n, orig=link.launch, k=s.stack):
            ok = orig(ch, t, n)
            if ok:
                out.append((k, ch, t, n))
            return ok

        link.launch = launch
    return out


credit_runs = st.fixed_dictionaries({
    "shape": st.sampled_from(["stack", "channel"]),
    "bw": st.sampled_from([0.85, 3.0, 8.0, 192.0]),
    "channels": st.sampled_from([1, 2]),
    "reqs": st.lists(st.tuples(st.sampled_from("RRRW"), st.integers(0, 15),
                               st.sampled_from([1, 32, 128, 1000, PAGE_BYTES]),
                               st.integers(0, 40)), min_size=1, max_size=40),
})


def _credit_system(run_kw):
    cfg = load_config(host_ports=run_kw["shape"], channels=run_kw["channels"],
                      subarrays_per_channel=4, channel_bw_gbps=run_kw["bw"], t_read_us=0.2,
                      t_prog_us=0.5, write_timeout_policy="partial", pages_per_block=4)
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


@pytest.mark.parametrize("shape", ["stack", "channel"])
@pytest.mark.parametrize("bw", [8.0, 192.0])
def test_credit_rate_under_saturation(bw, shape):
    """32 page reads completing one per cycle on one channel saturate the link: every
    launch is in the first tick with positive credit (x of §8, recomputed here), and the
    bytes before the last launch are the rate ``γ / b`` times the span to within one tick's
    refill (``b * bytes - γ * span = γ - x`` with ``0 < x <= γ``)."""
    cfg = load_config(host_ports=shape, channels=1, channel_bw_gbps=bw)
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
