"""KV write-back in megablock sets (model/kv_writeback.py)."""

from __future__ import annotations

import pytest

from hbfsim.config import load_config
from hbfsim.model.kv_writeback import KvWriteback, set_pages
from hbfsim.model.layout import PlaneMap
from hbfsim.model.replication import megapage_of

SMALL = dict(channels=2, subarrays_per_channel=6, planes_per_die=6, megaplane_planes=3,
             pages_per_block=4)


def test_a_set_is_one_erase_block_of_every_plane_in_hyperpage_rows():
    pm = PlaneMap(load_config(**SMALL))
    pages = set_pages(pm, first_row=4)
    ppb = pm.cfg.pages_per_block
    assert len(pages) == len(set(pages)) == pm.planes * ppb
    for r in range(ppb):      # each row: every plane once (one hyperpage)
        row = pages[r * pm.planes:(r + 1) * pm.planes]
        assert sorted(pm.plane_of(p) for p in row) == list(range(pm.planes))
        assert {megapage_of(pm, p)[1] for p in row} == {4 + r}
    with pytest.raises(ValueError, match="first_row must be a multiple of pages_per_block"):
        set_pages(pm, first_row=1)


def test_new_kv_stays_in_hbm_until_k_megablocks_are_ready():
    wb = KvWriteback(load_config(**SMALL))
    K, mb = wb.K, wb.megablock_bytes
    assert K == 4 and mb == 3 * 4 * 4096 and wb.set_bytes == K * mb
    assert wb.append("a", 2 * mb + 100) == []           # two ready, a partial third
    assert wb.append("b", mb - 1) == [] and wb.ready() == 2
    assert wb.hbm_bytes == 3 * mb + 99
    sets = wb.append("b", 1 + mb)                       # b fills two: four ready
    assert len(sets) == 1 and [m[0] for m in sets[0].megablocks] == ["a", "a", "b", "b"]
    assert wb.hbm_bytes == 100 and wb.written_bytes == wb.set_bytes
    assert wb.peak_hbm_bytes == 4 * mb + 100
    assert wb.drop("a") == 100 and wb.hbm_bytes == 0 and wb.dropped_bytes == 100
    # one request's megablocks are its own: no (request, index) twice in the sets
    wb.append("c", 5 * mb)
    owned = [m for s in wb.sets for m in s.megablocks]
    assert len(owned) == len(set(owned)) == 8
    with pytest.raises(ValueError, match="nbytes must be a non-negative integer"):
        wb.append("c", -1)
