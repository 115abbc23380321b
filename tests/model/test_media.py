"""NAND media: erase before write, sequential pages in a block, page buffers, ssd GC (W5, R3)."""

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.media import PROGRAM, READ, Media
from hbfsim.model.stats import collect_stats
from tests.conftest import make_reqs, run_model


def tiny(**kw):
    # 1 channel x 1 subarray, 4 pages per block, 4 blocks
    base = dict(channels=1, subarrays_per_channel=1, active_per_channel=1, pages_per_block=4,
                capacity_bytes=16 * PAGE_BYTES)
    return load_config(**(base | kw))


def test_pages_in_a_block_are_programmed_in_order():
    m = Media(tiny())
    for local in (3, 0, 2):
        assert m.issue(0, 0, 0, PROGRAM, local, 1) == m.t_prog
    s = m._subs[(0, 0)]
    assert [s.map[p] for p in (3, 0, 2)] == [(0, 0), (0, 1), (0, 2)]


def test_erase_before_rewriting_a_freed_block():
    cfg = tiny()
    m = Media(cfg)
    lats = [m.issue(0, 0, 0, PROGRAM, 0, 1) for _ in range(9)]
    # rewriting one page: programs 1-4 fill block 0 and leave it fully invalid; the 5th
    # reuses it (freed blocks first), which needs an erase; likewise the 9th
    p, e = m.t_prog, m.t_erase
    assert lats == [p] * 4 + [p + e] + [p] * 3 + [p + e]
    assert m.block_erases == 2
    assert m.zone_pec()[(0, 0, 0)] == 2


def test_hbf_mode_has_no_gc_and_reports_capacity_errors():
    m = Media(tiny())
    for p in range(16):
        m.issue(0, 0, 0, PROGRAM, p, 1)
    assert m.capacity_errors == 0
    m.issue(0, 0, 0, PROGRAM, 16 % 16 + 16, 1)  # a 17th distinct page: no space, no GC
    assert m.capacity_errors == 1 and m.gc_relocations == 0


def test_ssd_mode_runs_greedy_gc():
    m = Media(tiny(media_mode="ssd", overprovisioning=0.25))
    for p in range(12):
        m.issue(0, 0, 0, PROGRAM, p, 1)
    for p in (0, 1, 2):  # invalidate three pages of block 0 by rewriting them
        m.issue(0, 0, 0, PROGRAM, p, 1)
    before = m.block_erases
    for p in range(3, 8):
        m.issue(0, 0, 0, PROGRAM, p, 1)
    assert m.gc_relocations > 0 and m.block_erases > before
    assert m.capacity_errors == 0


def test_page_buffers_lru_and_program_invalidates():
    m = Media(tiny(page_buffers=2))
    assert m.issue(0, 0, 0, READ, 1, 0) == m.t_read
    assert m.issue(0, 0, 0, READ, 2, 0) == m.t_read
    assert m.issue(0, 0, 0, READ, 1, 0) == m.t_hit
    assert m.issue(0, 0, 0, READ, 3, 0) == m.t_read   # evicts page 2 (LRU)
    assert m.issue(0, 0, 0, READ, 2, 0) == m.t_read
    m.issue(0, 0, 0, PROGRAM, 2, 1)
    assert m.issue(0, 0, 0, READ, 2, 0) == m.t_read   # no stale buffer after a program


def test_one_completion_per_channel_per_cycle():
    m = Media(load_config(channels=2, subarrays_per_channel=4))
    m.issue(0, 0, 2, READ, 2, 10)
    m.issue(0, 0, 1, READ, 1, 12)
    m.issue(0, 1, 0, READ, 0, 14)
    due = m.t_read
    assert m.deliver(due) == [(0, 1, 12, 0), (1, 0, 14, 0)]
    assert m.deliver(due + 1) == [(0, 2, 10, 0)]


def test_rewrite_through_controller_counts_erases_and_latency():
    cfg = tiny()
    spec = [("W", 0, 0, PAGE_BYTES, i * 10) for i in range(9)]
    system = run_model(cfg, make_reqs(spec, cfg))
    s = collect_stats(system)
    assert s["page_programs"] == 9 and s["block_erases"] == 2
    lat = sorted(r.entry_info[2] - r.entry_info[1] for r in system.completed)
    assert lat[-1] == cfg.t_prog_ticks + cfg.t_erase_ticks
    assert system.completed[-1].id == 8


@pytest.mark.parametrize("bad", [dict(pages_per_block=3), dict(capacity_bytes=12345)])
def test_geometry_validation(bad):
    from hbfsim.config import ConfigError
    with pytest.raises(ConfigError, match="capacity_bytes"):
        tiny(**bad)
