"""The FlashAccel write path at the serving level (serve/flashaccel/writeback.py)."""

from __future__ import annotations

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.serve.flashaccel.writeback import endurance, measure_set_writes


def test_set_order_programs_faster_than_scattered_blocks_on_the_golden_model():
    """Set order fires every plane once per row: the stack's planes x page / tPROG."""
    cfg = load_config(profile="flashaccel")
    w = measure_set_writes(cfg, rows=2)
    planes = cfg.subarrays_per_stack
    ceiling = planes * PAGE_BYTES / (cfg.t_prog_us * 1e-6)
    assert w.set_order_steady_bw == pytest.approx(ceiling, rel=0.02)
    assert w.scattered_bw < w.set_order_bw <= ceiling
    with pytest.raises(ValueError, match="rows must be at most pages_per_block"):
        measure_set_writes(cfg, rows=cfg.pages_per_block + 1)


def test_endurance_figures_follow_the_write_rate():
    e = endurance(1e9, 1e12, 2.5e11, pe_cycles=1000, years=1.0)
    assert e["write_tax"] == pytest.approx(0.004)
    assert e["tbw_tb"] == pytest.approx(1000.0)
    assert e["written_tb"] == pytest.approx(365.25 * 86400 / 1e3)
    assert e["life_years"] == pytest.approx(1e15 / 1e9 / (365.25 * 86400))
    assert endurance(2e9, 1e12, 2.5e11, pe_cycles=1000)["life_years"] == \
        pytest.approx(e["life_years"] / 2)
    with pytest.raises(ValueError, match="write_bw must be positive"):
        endurance(1e9, 1e12, 0.0)
