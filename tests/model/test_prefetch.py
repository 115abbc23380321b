"""SRAM prefetch queue (model/prefetch.py): page-table flips, capacities, refusals."""

from __future__ import annotations

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.prefetch import PrefetchError, PrefetchQueue

TINY = dict(channels=2, subarrays_per_channel=4, planes_per_die=4, megaplane_planes=2,
            t_read_us=4.0, plane_sram_bytes=2 * PAGE_BYTES,
            base_die_sram_bytes=8 * PAGE_BYTES)


def test_entries_flip_to_sram_when_the_copy_completes_and_back_on_release():
    q = PrefetchQueue(load_config(**TINY))
    pf = q.prefetch("w", range(8), t=1e-6)
    assert pf.start == 1e-6
    # 8 pages over 8 planes: one tR, then each channel carries its 4 pages in turn
    xfer = PAGE_BYTES / (q.cfg.channel_bw_gbps * 1e9)
    assert pf.done == pytest.approx(1e-6 + 4e-6 + 4 * xfer)
    assert q.entry(3, pf.done - 1e-9) == "hbf" and q.entry(3, pf.done) == "sram"
    assert q.entry(9, pf.done) == "hbf"            # not prefetched
    q.release("w", pf.done)
    assert q.entry(3, pf.done) == "hbf"


def test_a_prefetch_that_does_not_fit_the_base_die_waits_for_a_release():
    q = PrefetchQueue(load_config(**TINY))
    a = q.prefetch("a", range(6), t=0.0)
    b = q.prefetch("b", range(6, 10), t=0.0)      # 6 + 4 pages > 8 of base-die SRAM
    c = q.prefetch("c", range(10, 11), t=0.0)     # fits, but FIFO: it waits behind b
    assert b.start is None and c.start is None and q.waiting() == ["b", "c"]
    with pytest.raises(PrefetchError, match="release of 'b' at 0 s: its copy waits for SRAM"):
        q.release("b", 0.0)
    with pytest.raises(PrefetchError, match="its copy completes at"):
        q.release("a", a.done / 2)
    t = a.done + 1e-6
    q.release("a", t)
    assert b.start == t and c.start == t and not q.waiting()
    assert q.entry(7, b.done) == "sram" and q.entry(2, b.done) == "hbf"
    assert q.free[0] == TINY["base_die_sram_bytes"] - 5 * PAGE_BYTES


@pytest.mark.parametrize("kw,match", [
    ({}, "plane_sram_bytes is 0: a prefetch needs at least one page"),
    (dict(TINY, base_die_sram_bytes=0), "base_die_sram_bytes is 0"),
])
def test_a_configuration_without_sram_refuses_prefetches(kw, match):
    with pytest.raises(PrefetchError, match=match):
        PrefetchQueue(load_config(**kw))


def test_a_prefetch_larger_than_the_base_die_sram_is_refused():
    q = PrefetchQueue(load_config(**TINY))
    with pytest.raises(PrefetchError, match=r"needs 36,864 B of stack 0's base-die SRAM, more "
                                            r"than base_die_sram_bytes 32,768: refused"):
        q.prefetch("big", range(9))
    q.prefetch("a", [1, 2])
    with pytest.raises(PrefetchError, match="already queued or resident"):
        q.prefetch("a", [3])
    with pytest.raises(PrefetchError, match="page 2 of 'b' is already in prefetch 'a'"):
        q.prefetch("b", [2, 3])
    with pytest.raises(PrefetchError, match="names no pages"):
        q.prefetch("c", [])


@pytest.mark.parametrize("slots", [1, 2, 4])
def test_a_plane_never_holds_more_pages_than_its_sram(slots):
    """A slow link: pages wait in the planes' SRAM, which bounds how far reads run ahead."""
    cfg = load_config(**TINY | dict(plane_sram_bytes=slots * PAGE_BYTES, channel_bw_gbps=0.2,
                                    base_die_sram_bytes=64 * PAGE_BYTES))
    q = PrefetchQueue(cfg)
    pf = q.prefetch("w", range(64))
    assert len(pf.copies) == 64
    for plane, start, _, _ in pf.copies:
        held = [c for c in pf.copies if c[0] == plane and c[2] <= start < c[3]]
        assert len(held) < slots            # room for the page it starts to read
    ends = [c[3] for c in pf.copies]
    assert pf.done == max(ends)
    for ch in range(cfg.channels):          # one transfer at a time per channel
        xs = sorted(c[3] for c in pf.copies if c[0] // cfg.subarrays_per_channel == ch)
        gaps = [b - a for a, b in zip(xs, xs[1:])]
        assert min(gaps) >= q.t_xfer * (1 - 1e-9)


def test_more_plane_sram_lets_reads_run_ahead_of_a_bursty_link():
    done = {}
    for slots in (1, 8):
        cfg = load_config(**TINY | dict(plane_sram_bytes=slots * PAGE_BYTES,
                                        channel_bw_gbps=4.0,
                                        base_die_sram_bytes=64 * PAGE_BYTES))
        done[slots] = PrefetchQueue(cfg).prefetch("w", range(64)).done
    assert done[8] < done[1]   # 36.8 us against 43.3 us with one page of SRAM per plane
