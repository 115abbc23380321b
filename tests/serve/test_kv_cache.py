import pytest

from hbfsim.serve.engine import simulate
from hbfsim.serve.kv_cache import DRAM, HBF, HBM, SSD, KVCache
from hbfsim.serve.scheduler import Scheduler
from hbfsim.serve.workload import Turn, Workload

from .conftest import NO_RESERVE, exact_node


def idle_block(kv, h):
    """Compute one block's KV into own pages, register it and let it go idle."""
    nh, nf = kv.alloc(kv.bp)
    b = kv.register(h, HBM if nh else HBF)
    kv.release([b])
    kv.check()
    return b


def test_lru_cools_hbm_to_hbf_to_host_and_drops():
    kv = KVCache([2, 2, 2, 2], page_tokens=16, block_tokens=16)
    blocks = [idle_block(kv, h) for h in range(9)]
    # 2 newest in HBM, then HBF, DRAM, SSD; the oldest one dropped.
    assert [b.tier for b in blocks[1:]] == [SSD, SSD, DRAM, DRAM, HBF, HBF, HBM, HBM]
    assert kv.resident_tier(0) is None and kv.dropped_blocks == 1
    # Every cooling step wrote one block into the next tier.
    assert kv.written == [0, 7 * 16, 5 * 16, 3 * 16]
    assert kv.used == [2, 2, 2, 2]


def test_host_reload_returns_to_hbm_and_pins():
    kv = KVCache([2, 2, 2, 0], page_tokens=16, block_tokens=16)
    blocks = [idle_block(kv, h) for h in range(6)]
    cold = blocks[0]
    assert cold.tier == DRAM
    kv.pin(cold)
    assert kv.reload(cold) == HBM
    kv.check()
    assert cold.ref == 1 and kv.dev_busy == 1
    kv.release([cold])
    kv.check()
    assert kv.dev_busy == 0


def test_tail_of_a_prefix_cools_first():
    kv = KVCache([3, 3, 0, 0], page_tokens=16, block_tokens=16)
    kv.alloc(3)
    prefix = [kv.register(h, HBM) for h in ("a", "b", "c")]
    kv.release(prefix)
    kv.alloc(1)  # needs one HBM page: the tail block "c" goes to HBF
    assert [b.tier for b in prefix] == [HBM, HBM, HBF]
    kv.check()


def test_a_kept_context_counts_while_it_is_all_on_the_device():
    """``protect`` counts a session's context while every block of it is on the device; the
    first block to reach the host ends the protection (the session reloads anyway)."""
    kv = KVCache([2, 1, 4, 0], page_tokens=16, block_tokens=16)
    ctx = [idle_block(kv, h) for h in ("a", "b", "c")]  # a: HBF, b and c: HBM
    kv.protect("s", ctx)
    assert kv.protected_dev == 3 and kv.owner_dev == {"s": 3}
    kv.check()
    idle_block(kv, "x")  # cools "b" from HBM to HBF, so "a" from HBF to DRAM
    assert ctx[0].tier == DRAM
    assert kv.protected_dev == 0 and kv.owner_dev == {} and ctx[1].owner is None
    kv.check()
    kv.protect("s", ctx)  # partly on the host: keeps nothing
    assert kv.protected_dev == 0
    kv.protect("t", ctx[1:])  # the device part alone
    assert kv.protected_dev == 2
    kv.unprotect("t")
    assert kv.protected_dev == 0 and all(b.owner is None for b in ctx)
    kv.check()


def test_new_pages_spill_to_hbf_when_hbm_is_busy():
    kv = KVCache([4, 8, 0, 0], page_tokens=16, block_tokens=16)
    assert kv.alloc(10) == (4, 6)
    kv.check()
    with pytest.raises(RuntimeError):
        kv.alloc(3)


@pytest.mark.parametrize("cap_pages", [18, 19, 22, 24, 60])
def test_kv_capacity_bounds_the_batch_exactly(tiny, cap_pages):
    """Ten 64-token prompts (4 pages) at t = 0, one output token each: the m-th admission
    needs m x 4 pages + one watermark page per running sequence, m - 1 <= cap."""
    r = 4
    wl = Workload("burst", 16, tuple(Turn(s, 0, 64, 1, tuple((s, k) for k in range(4)), 0.0)
                                     for s in range(10)))
    node = exact_node(tiny, hbm_pages=cap_pages)
    run = simulate(wl, node, tiny, Scheduler("fcfs"), config=NO_RESERVE, check=True)
    rep = run.replicas[0]
    assert rep.pages[0] == cap_pages
    assert rep.max_running == min(10, (cap_pages + 1) // (r + 1))
    assert (rep.completions == 1).all()
