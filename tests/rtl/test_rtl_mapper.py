"""The RTL address mapper equals the golden mapping (contract §3) bit for bit."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rtl_helpers import simulate, small_config

from hbfsim.model.mapping import Mapper as GoldenMapper
from hbfsim.rtl.mapper import Mapper

#: Ranges that do not overlap (the configuration refuses overlapping ones, naming both),
#: with gaps between them (pages outside every range use q mod C, §3).
EXPLICIT = ((0, 4, 3), (5, 7, 2), (8, 20, 1), (100, 100, 0), (200, 300, 2), (301, 301, 1))

CONFIGS = {
    "interleave-C2-full-size": dict(channels=2, subarrays_per_channel=32,
                                    capacity_bytes=512 << 30),
    "interleave-C16": dict(channels=16),
    "grouped-G2-C4": dict(channels=4, placement="grouped", group_pages=2),
    "grouped-G3-C8-S6": dict(channels=8, subarrays_per_channel=6, placement="grouped",
                             group_pages=3),
    "contiguous-C4": dict(channels=4, placement="contiguous"),
    "contiguous-C3-S5": dict(channels=3, experimental_channels=True, subarrays_per_channel=5,
                             placement="contiguous"),
    "explicit-C4": dict(channels=4, placement="explicit", explicit_map=EXPLICIT),
    "partition-1r3w-interleave": dict(channels=4, scheduler="partition-1r3w"),
    "partition-3r1w-grouped-C8": dict(channels=8, scheduler="partition-3r1w",
                                      placement="grouped", group_pages=2),
    "partition-3r1w-contiguous": dict(channels=4, scheduler="partition-3r1w",
                                      placement="contiguous"),
    "partition-2r2w-contiguous": dict(channels=4, scheduler="partition-2r2w",
                                      placement="contiguous"),
    "two-stacks": dict(stacks=2, channels=2),
}


def interesting_pages(cfg, n_random: int, seed: int) -> list[int]:
    """Edges, region and range boundaries, then random pages of one stack."""
    pps = cfg.pages_per_stack
    pages = set(range(min(70, pps))) | {pps - 1 - k for k in range(min(20, pps))}
    for n in {cfg.channels, cfg.read_channels, cfg.channels - cfg.read_channels} - {0}:
        region = pps // n
        for k in range(1, n + 1):
            pages |= {k * region - 1, k * region, k * region + 1}
    for first, last, _ in cfg.explicit_map:
        pages |= {first - 1, first, last, last + 1}
    rng = random.Random(seed)
    pages |= {rng.randrange(pps) for _ in range(n_random)}
    return sorted(p for p in pages if 0 <= p < pps)


def run_rtl(cfg, pages: list[int]) -> list[tuple[int, int, int]]:
    """Map every (page, write) pair through the RTL; return (channel, local, subarray)."""
    dut = Mapper(cfg)
    out = []

    async def tb(ctx):
        for q in pages:
            for write in (0, 1):
                ctx.set(dut.page, q)
                ctx.set(dut.write, write)
                out.append((ctx.get(dut.target.channel), ctx.get(dut.target.local),
                            ctx.get(dut.target.subarray)))

    simulate(dut, tb)
    return out


def run_model(cfg, pages: list[int]) -> list[tuple[int, int, int]]:
    gold = GoldenMapper(cfg)
    return [gold.channel_of(q, write=bool(w)) for q in pages for w in (0, 1)]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mapper_matches_model(name):
    cfg = small_config(**CONFIGS[name])
    pages = interesting_pages(cfg, n_random=300, seed=len(name))
    assert run_rtl(cfg, pages) == run_model(cfg, pages)


def test_partition_sends_reads_and_writes_to_their_halves():
    cfg = small_config(channels=4, scheduler="partition-1r3w")
    pages = list(range(64))
    got = run_rtl(cfg, pages)
    reads, writes = got[0::2], got[1::2]
    assert {ch for ch, _, _ in reads} == {0}
    assert {ch for ch, _, _ in writes} == {1, 2, 3}


@st.composite
def configs_and_pages(draw):
    channels = draw(st.sampled_from([1, 2, 4, 8, 16, 3, 5, 6]))
    v = dict(channels=channels, experimental_channels=channels not in (1, 2, 4, 8, 16),
             subarrays_per_channel=draw(st.integers(1, 9)),
             pages_per_block=draw(st.sampled_from([1, 3, 4, 16])),
             placement=draw(st.sampled_from(["interleave", "grouped", "contiguous",
                                             "explicit"])),
             group_pages=draw(st.integers(1, 6)))
    if channels % 4 == 0 and v["placement"] != "explicit" and draw(st.booleans()):
        v["scheduler"] = draw(st.sampled_from(["partition-1r3w", "partition-2r2w",
                                               "partition-3r1w"]))
    blocks = draw(st.integers(1, 12))
    v["capacity_bytes"] = (channels * v["subarrays_per_channel"] * v["pages_per_block"] * 4096
                           * blocks)
    pps = v["capacity_bytes"] // 4096
    if v["placement"] == "explicit" and pps < 2:
        v["placement"] = "interleave"      # an explicit range needs two distinct pages
    if v["placement"] == "explicit":
        # disjoint ranges: consecutive pairs of sorted distinct pages (overlaps are refused)
        cuts = sorted(draw(st.lists(st.integers(0, pps - 1), min_size=2, max_size=12,
                                    unique=True)))
        chans = draw(st.lists(st.integers(0, channels - 1), min_size=6, max_size=6))
        v["explicit_map"] = tuple((cuts[2 * k], cuts[2 * k + 1], chans[k])
                                  for k in range(len(cuts) // 2))
    cfg = small_config(**v)
    pages = draw(st.lists(st.integers(0, pps - 1), min_size=1, max_size=40))
    return cfg, pages


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs_and_pages())
def test_mapper_matches_model_random(case):
    cfg, pages = case
    assert run_rtl(cfg, pages) == run_model(cfg, pages)
