"""Random cases for the differential tests of the compiled engine (tests/engine/).

Hypothesis strategies for the media (a small geometry and a command stream) and the GPU
port (a configuration, a GPU configuration, a program and the stand-in controller's
response delays), and the checks that run one case through the golden model's component
and the compiled one and assert every event equal. test_mutants.py reuses strategies and
checks unchanged to show that broken variants of the engine fail them.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.engine import compiled_gpu_port, compiled_media
from hbfsim.engine_standin import gpu_figures, replay_media, run_gpu
from hbfsim.model.gpu import GpuConfig, GpuPort, GpuProgram, Kernel, Producer
from hbfsim.model.media import Media

MEDIA_STATS = ("page_reads", "buffer_hits", "page_programs", "block_erases",
               "gc_relocations", "capacity_errors", "busy_ticks")


def assert_logs_equal(want: np.ndarray, got: np.ndarray, what: str) -> None:
    """Assert two event logs equal row by row; the message names the first difference."""
    n = min(len(want), len(got))
    diff = np.nonzero((want[:n] != got[:n]).any(axis=1))[0]
    if len(diff):
        i = int(diff[0])
        raise AssertionError(f"{what}: event {i} differs: golden {want[i].tolist()}, "
                             f"compiled {got[i].tolist()}")
    assert len(want) == len(got), f"{what}: {len(want)} golden events, {len(got)} compiled"


# ------------------------------------------------------------------------------ media
@st.composite
def media_configs(draw, modes=("hbf", "ssd")):
    """A small stack: few blocks per subarray, so erase, GC and capacity errors occur."""
    channels = draw(st.sampled_from([1, 2, 4]))
    subs = draw(st.sampled_from([1, 2, 4]))
    ppb = draw(st.sampled_from([2, 4, 8]))
    blocks = draw(st.integers(1, 6))
    t_read, t_prog, t_erase = draw(st.sampled_from([(15.0, 200.0, 2000.0), (0.01, 0.02, 0.05),
                                                    (0.01, 0.01, 0.01)]))
    return load_config(
        channels=channels, subarrays_per_channel=subs, active_per_channel=subs,
        pages_per_block=ppb, capacity_bytes=blocks * channels * subs * ppb * PAGE_BYTES,
        page_buffers=draw(st.integers(0, 3)), buffer_hit_ticks=draw(st.integers(1, 12)),
        media_mode=draw(st.sampled_from(modes)),
        overprovisioning=draw(st.sampled_from([0.0, 0.15, 0.34, 0.5])),
        blocks_per_zone=draw(st.integers(1, 3)),
        t_read_us=t_read, t_prog_us=t_prog, t_erase_us=t_erase)


@st.composite
def media_cases(draw):
    """``(cfg, rows)``: a configuration and a media command stream (replay_media's rows),
    ticks non-decreasing, ending with enough deliveries to drain every completion."""
    # a quarter of the cases are GC-heavy: ssd, mostly programs on one subarray whose pages
    # about fill it, so that GC chooses between victims of different valid counts
    gc = draw(st.integers(0, 3)) == 0
    cfg = draw(media_configs(("ssd",) if gc else ("hbf", "ssd")))
    tr, tp = cfg.t_read_ticks, cfg.t_prog_ticks
    # "fit": as many pages as a subarray has, so that rewrites leave blocks part-valid and
    # ssd GC chooses between victims of different valid counts
    blocks = cfg.pages_per_stack // (cfg.subarrays_per_stack * cfg.pages_per_block)
    pages = "fit" if gc else draw(st.sampled_from([2, 6, 24, 200, "fit"]))
    if pages == "fit":
        pages = max(2, blocks * cfg.pages_per_block - draw(st.integers(0, cfg.pages_per_block)))
    writes = draw(st.sampled_from([0.7, 0.9] if gc else [0.0, 0.3, 0.7, 1.0]))
    # a focused stream stays on one subarray: page-buffer LRU order and block reuse matter
    chs = 1 if gc or draw(st.booleans()) else cfg.channels
    subs = 1 if chs == 1 and (gc or draw(st.booleans())) else cfg.subarrays_per_channel
    n = draw(st.integers(60, 200) if gc else st.integers(1, 120))
    steps = [0, 0, 1, 2, max(1, tr // 2), tr, tp]
    rows = []
    t = 0
    for i in range(n):
        t += draw(st.sampled_from(steps))
        kind = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))
        op = int(draw(st.floats(0, 1, exclude_max=True)) < writes)
        rows.append((kind, t, draw(st.integers(0, chs - 1)), draw(st.integers(0, subs - 1)),
                     op, draw(st.integers(0, pages - 1)), i))
    end = t + 100 * (tr + tp + cfg.t_erase_ticks)
    rows += [(1, end, 0, 0, 0, 0, 0)] * n + [(2, end, 0, 0, 0, 0, 0), (3, end, 0, 0, 0, 0, 0)]
    return cfg, np.array(rows, dtype=np.int64)


def check_media(case) -> None:
    """The golden Media and the compiled one, driven alike per call (and the compiled one
    by the C++ replay): equal logs and equal statistics."""
    cfg, rows = case
    gold, comp, comp_replay = Media(cfg), compiled_media(cfg), compiled_media(cfg)
    want = replay_media(gold, rows)
    assert_logs_equal(want, replay_media(comp, rows), "media per call")
    assert_logs_equal(want, comp_replay.replay(rows), "media replay (C++ driver)")
    for m in (comp, comp_replay):
        for k in MEDIA_STATS:
            assert getattr(gold, k) == getattr(m, k), k
        assert gold.zone_pec() == m.zone_pec()
        assert gold.valid_pages() == m.valid_pages()
        assert (gold.blocks, gold.reserve) == (m.blocks, m.reserve)


@st.composite
def media_group_cases(draw):
    """``(cfg, planes, calls)``: multi-plane commands (issue_group, MP2) interleaved with
    deliveries; a group holds distinct subarrays of one megaplane of ``planes``."""
    cfg = draw(media_configs())
    S = cfg.subarrays_per_channel
    planes = draw(st.sampled_from([p for p in (1, 2, 4) if S % p == 0]))
    tr, tp = cfg.t_read_ticks, cfg.t_prog_ticks
    pages = draw(st.sampled_from([2, 4, 16, 64]))
    calls = []
    t = 0
    tag = 0
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0, 1, max(1, tr // 2), tr, tp]))
        if draw(st.booleans()):
            calls.append(("deliver", t))
            continue
        ch = draw(st.integers(0, cfg.channels - 1))
        g = draw(st.integers(0, S // planes - 1))
        subs = draw(st.lists(st.integers(g * planes, g * planes + planes - 1), min_size=1,
                             max_size=planes, unique=True))
        op = draw(st.integers(0, 1))
        ops = []
        for s in subs:
            ops.append((s, op, draw(st.integers(0, pages - 1)), tag))
            tag += 1
        calls.append(("group", t, ch, g, ops))
    calls += [("deliver", t + 100 * (tr + tp + cfg.t_erase_ticks))] * (len(calls) + 1)
    return cfg, planes, calls


def check_media_groups(case) -> None:
    """issue_group's latencies and the grouped completions, golden against compiled."""
    cfg, _, calls = case
    gold, comp = Media(cfg), compiled_media(cfg)
    for i, c in enumerate(calls):
        if c[0] == "deliver":
            a, b = gold.deliver(c[1]), comp.deliver(c[1])
        else:
            a, b = gold.issue_group(*c[1:]), comp.issue_group(*c[1:])
        assert a == b, f"call {i} {c}: golden {a}, compiled {b}"
        assert gold.next_due() == comp.next_due(), f"next_due after call {i}"
    for k in MEDIA_STATS:
        assert getattr(gold, k) == getattr(comp, k), k
    assert gold.zone_pec() == comp.zone_pec()


# ------------------------------------------------------------------------------ GPU
@st.composite
def gpu_cases(draw):
    """``(cfg, gpu, make, delays)``: a configuration (either host-port shape), a GPU
    configuration, a re-runnable program's kernel factory and the stand-in's delays."""
    shape = draw(st.sampled_from(["stack", "channel"]))
    channels = draw(st.sampled_from([1, 2, 4]))
    stacks = draw(st.sampled_from([1, 2]))
    placement = draw(st.sampled_from(["interleave", "grouped", "contiguous", "explicit"]))
    scheduler = "fcfs"
    if channels == 4 and placement != "explicit" and draw(st.booleans()):
        scheduler = draw(st.sampled_from(["partition-1r3w", "partition-2r2w"]))
    clocks = draw(st.sampled_from([(850.0, 1132.0), (1000.0, 1000.0), (850.0, 1755.0)]))
    explicit = ()
    if placement == "explicit":
        # two ranges of stack-local pages with their own channels, a gap between them
        # (pages in the gap fall back to q mod channels); the default stack has 2^27 pages
        split = draw(st.sampled_from([1, 8, 1 << 16, 1 << 24]))
        explicit = ((0, split - 1, draw(st.integers(0, channels - 1))),
                    (2 * split, (1 << 26) - 1, draw(st.integers(0, channels - 1))))
    cfg = load_config(channels=channels, stacks=stacks, host_ports=shape, placement=placement,
                      scheduler=scheduler, explicit_map=explicit,
                      stack_select=draw(st.sampled_from(["interleave", "contiguous"])),
                      memory_clock_mhz=clocks[0], gpu_clock_mhz=clocks[1])
    gpu = GpuConfig(sms=2, partitions=draw(st.integers(1, 8)),
                    partition_bytes=draw(st.sampled_from([32, 256, 4096])),
                    return_cycles=draw(st.integers(0, 20)),
                    launch_cycles=draw(st.integers(0, 20)))
    pages = draw(st.sampled_from([2, 16, 4096]))
    span = min(pages, cfg.pages)
    # spread the pages over the whole range so that contiguous placements use every channel
    stride = max(1, cfg.pages // span)
    kernels = []
    for _ in range(draw(st.integers(1, 3))):
        prods = []
        for _ in range(draw(st.integers(0, 4))):
            acc = []
            for _ in range(draw(st.integers(0, 12))):
                nb = draw(st.sampled_from([32, 64, 128]))
                off = draw(st.integers(0, (PAGE_BYTES - nb) // 32)) * 32
                page = draw(st.integers(0, span - 1)) * stride
                acc.append((draw(st.sampled_from("RRW")),
                            cfg.base_address + page * PAGE_BYTES + off, nb))
            prods.append((acc, draw(st.integers(1, 4)), draw(st.integers(0, 30)),
                          draw(st.one_of(st.none(), st.integers(0, 30)))))
        kernels.append((prods, draw(st.integers(0, 30))))

    def make():
        return [Kernel(f"k{i}", [Producer(list(a), bound=b, start=s, compute=c)
                                 for a, b, s, c in prods], compute=kc)
                for i, (prods, kc) in enumerate(kernels)]

    delays = draw(st.lists(st.integers(0, 40), min_size=1, max_size=6))
    return cfg, gpu, make, delays


def check_gpu(case) -> None:
    """The golden GpuPort and the compiled one under the stand-in controller, driven per
    call from Python (and the compiled one by the C++ stand-in): equal grants (tick, port,
    id, creation tick, partition, op, address, size), responses and figures."""
    cfg, gpu, make, delays = case
    gold = GpuPort(cfg, GpuProgram(make), gpu)
    want = run_gpu(gold, delays)
    comp = compiled_gpu_port(cfg, GpuProgram(make), gpu)
    assert_logs_equal(want, run_gpu(comp, delays), "GPU per call")
    comp2 = compiled_gpu_port(cfg, GpuProgram(make), gpu)
    assert_logs_equal(want, comp2.run_standin(np.array(delays)), "GPU stand-in (C++ driver)")
    figures = gpu_figures(gold.result())
    assert figures == comp.result(), "GPU result figures"
    assert figures == comp2.result(), "GPU result figures (C++ driver)"
    assert (gold.exhausted, gold.finished) == (comp.exhausted, comp.finished)
