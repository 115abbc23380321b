"""Shared builders for the serving tests: small models, nodes with exact KV page counts."""

import pytest

from hbfsim.serve.engine import EngineConfig
from hbfsim.serve.hardware import GPU_PRESETS, MemoryTier, Node, hbf_tier, host_dram_tier, \
    host_ssd_tier
from hbfsim.serve.models import model_costs, serving_shape
from hbfsim.serve.tier_timing import TABLE1_HBM

TINY = dict(name="tiny", layers=2, hidden=256, q_heads=4, kv_heads=2, head_dim=64,
            intermediate=512, vocab=1000, tied_embeddings=False, dtype_bytes=2)


@pytest.fixture(scope="session")
def tiny():
    return model_costs(serving_shape(dict(TINY)))


@pytest.fixture(scope="session")
def qwen32():
    return model_costs(serving_shape("qwen3-32b"))


def exact_node(mc, hbm_pages, hbf_pages=0, dram_pages=0, ssd_pages=0, page_tokens=16,
               hbm_stacks=8, hbf_stacks=None):
    """A 1-GPU node whose tiers hold exactly the given KV pages (no activation reserve)."""
    page = page_tokens * mc.kv_bytes_per_token
    half = 0.5 * page  # keeps floor() away from rounding
    hbm = MemoryTier("hbm", hbm_stacks, (mc.weight_bytes + hbm_pages * page + half) / hbm_stacks,
                     TABLE1_HBM, 3.4, 3.4)
    if hbf_pages:
        f = hbf_tier(hbf_stacks or 1)
        hbf = MemoryTier("hbf", f.stacks, (hbf_pages * page + half) / f.stacks, f.timing,
                         f.read_pj_per_bit, f.write_pj_per_bit, f.pe_cycles)
    else:
        hbf = hbf_tier(0)
    dram = host_dram_tier(dram_pages * page + half if dram_pages else 0)
    ssd = host_ssd_tier(ssd_pages * page + half if ssd_pages else 0)
    stacks = hbm_stacks + hbf.stacks
    return Node(GPU_PRESETS["h100"], 1, hbm, hbf, dram, ssd,
                "shared" if stacks <= 8 else "h3")


NO_RESERVE = EngineConfig(activation_reserve_bytes=0.0)
