"""Address mapping (A1-A4, contract §2-§3)."""

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.mapping import AddressError, Mapper


def test_interleave_grouped_contiguous():
    cfg = load_config(channels=4, subarrays_per_channel=8)
    m = Mapper(cfg)
    assert [m.channel_of(q)[0] for q in range(6)] == [0, 1, 2, 3, 0, 1]
    assert m.channel_of(9) == (1, 2, 2)
    g = Mapper(cfg.replace(placement="grouped", group_pages=2))
    assert [g.channel_of(q)[0] for q in range(10)] == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0]
    assert [g.channel_of(q)[1] for q in range(10)] == [0, 1, 0, 1, 0, 1, 0, 1, 2, 3]
    c = Mapper(cfg.replace(placement="contiguous"))
    region = cfg.pages_per_stack // 4
    assert c.channel_of(0)[:2] == (0, 0)
    assert c.channel_of(region + 5)[:2] == (1, 5)
    assert c.channel_of(4 * region - 1)[:2] == (3, region - 1)


def test_explicit_map_uses_page_as_local_index():
    cfg = load_config(channels=4, subarrays_per_channel=8, placement="explicit",
                      explicit_map=[[0, 9, 3], [100, 200, 1]])
    m = Mapper(cfg)
    assert m.channel_of(5) == (3, 5, 5)
    assert m.channel_of(150) == (1, 150, 150 % 8)
    assert m.channel_of(50) == (50 % 4, 50, 50 % 8)  # outside every range: q mod C


@pytest.mark.parametrize("sel", ["interleave", "contiguous"])
def test_stack_selection(sel):
    cfg = load_config(stacks=4, stack_select=sel)
    m = Mapper(cfg)
    per = cfg.pages_per_stack
    if sel == "interleave":
        assert m.stack_of(4 * 7 + 3) == (3, 7)
    else:
        assert m.stack_of(2 * per + 11) == (2, 11)


def test_range_checks():
    cfg = load_config()
    m = Mapper(cfg)
    m.check(cfg.base_address, PAGE_BYTES)
    m.check(cfg.base_address + cfg.capacity_bytes - 32, 32)
    with pytest.raises(AddressError):
        m.check(cfg.base_address + cfg.capacity_bytes, 32)
    with pytest.raises(AddressError):
        m.check(cfg.base_address - 1, 1)
    with pytest.raises(AddressError):
        m.check(cfg.base_address, 0)
