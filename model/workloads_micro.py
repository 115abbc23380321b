"""The source's microbenchmarks (the HBF-Sim paper §5.1-§5.4, §6.1, §6.2) as GPU programs
and device streams.

Small, synthetic access patterns, each built to expose one mechanism of the device:
routing and shared staging (§5.1: :func:`conservation`, :func:`shared_staging`), MSHR
merging closed versus open loop (§5.2: :func:`mshr_grid`), page service of merged bursts
(§5.3: :func:`burst_page_service`, a device stream), media scaling (§5.4:
:func:`media_saturation`), channel placement (§6.1: :func:`placement`,
:func:`placement_map`) and read/write isolation (§6.2: :func:`rw_isolation`). Separate
from the LLM workloads (:mod:`.workloads_llm`, :mod:`.workloads_layout`), which derive
their accesses from a model's tensor shapes. Registered and re-exported by
:mod:`hbfsim.model.workloads`; docs/gpu.md §4 lists every parameter.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.controller import Request
from hbfsim.model.gpu_config import GpuConfig, GpuError, us_to_gpu_cycles
from hbfsim.model.gpu_program import GpuProgram, Kernel, Producer
from hbfsim.model.workloads_common import (SECTOR, DeviceStream, _cfg, _entry_bytes, _nonneg,
                                           _one_access_warps, _page_addr, _positive, _spread)

__all__ = ["PLACEMENTS", "burst_page_service", "conservation", "media_saturation",
           "mshr_grid", "placement", "placement_map", "rw_isolation", "shared_staging"]


# ============================================================================ §5.1
def conservation(cfg: HbfConfig | None = None, requests: int = 64, nbytes: int = 128,
                 page_stride: int = 7, sms: int = 8) -> GpuProgram:
    """Routing test (§5.1): ``requests`` warps, one load each to its own page.

    Every request must get exactly one completion, at any channel count.
    """
    cfg = _cfg(cfg)
    _positive("requests", requests)
    _entry_bytes("nbytes", nbytes)
    _positive("page_stride", page_stride)
    params = dict(requests=requests, nbytes=nbytes, page_stride=page_stride, sms=sms)

    def kernels():
        acc = [("R", _page_addr(cfg, i * page_stride) + (i * nbytes) % PAGE_BYTES, nbytes)
               for i in range(requests)]
        yield Kernel("conservation", _one_access_warps(acc, sms))

    return GpuProgram(kernels, "conservation", gpu=GpuConfig(sms=sms),
                      expected={"requests": requests}, params=params)


def shared_staging(cfg: HbfConfig | None = None, requests: int = 32, page: int = 5,
                   nbytes: int = 128, sms: int = 8) -> GpuProgram:
    """Shared-staging probe (§5.1): ``requests`` warps load distinct lines of one page.

    Expected: one page read and ``requests - 1`` MSHR hits.
    """
    cfg = _cfg(cfg)
    _positive("requests", requests)
    _entry_bytes("nbytes", nbytes)
    if requests * nbytes > PAGE_BYTES:
        raise GpuError(f"requests x nbytes must fit one page, not {requests} x {nbytes}")
    params = dict(requests=requests, page=page, nbytes=nbytes, sms=sms)

    def kernels():
        base = _page_addr(cfg, page)
        acc = [("R", base + nbytes * i, nbytes) for i in range(requests)]
        yield Kernel("shared_staging", _one_access_warps(acc, sms))

    return GpuProgram(kernels, "shared_staging", gpu=GpuConfig(sms=sms),
                      expected={"requests": requests, "page_reads": 1,
                                "mshr_hits": requests - 1}, params=params)


# ============================================================================ §5.3
def burst_page_service(cfg: HbfConfig | None = None, pages: int = 64, entries: int = 32,
                       entry_bytes: int = 128, gap_us: float = 0.01,
                       partitions: int = 8) -> DeviceStream:
    """Page service cross-check (§5.3): ``pages`` pages x ``entries`` merged requests.

    A device stream: page ``k``'s ``entries`` requests (distinct ``entry_bytes`` entries)
    all arrive at tick ``round_half_up(k * gap_us * memory_clock_mhz)``. ``gap_us = 0.01``
    is the source's burst (10 ns spacing), ``gap_us = 50`` its isolated arrivals. The source
    study runs one serial subarray per channel (``config``); the span then grows by
    ``pages * dtR / channels`` when tR changes.
    """
    cfg = _cfg(cfg)
    _positive("pages", pages)
    _positive("entries", entries)
    _entry_bytes("entry_bytes", entry_bytes)
    if entries * entry_bytes > PAGE_BYTES:
        raise GpuError(f"entries x entry_bytes must fit one page, not {entries} x {entry_bytes}")
    if gap_us < 0:
        raise GpuError(f"gap_us must be non-negative, not {gap_us!r}")
    params = dict(pages=pages, entries=entries, entry_bytes=entry_bytes, gap_us=gap_us,
                  partitions=partitions)
    gap = Decimal(repr(gap_us)) * Decimal(repr(cfg.memory_clock_mhz))

    def stream():
        rid = 0
        for k in range(pages):
            tick = int((gap * k).quantize(Decimal(1), rounding=ROUND_HALF_UP))
            base = _page_addr(cfg, k)
            for e in range(entries):
                yield Request(rid, "R", base + e * entry_bytes, entry_bytes, e % partitions, tick)
                rid += 1

    return DeviceStream(stream, "burst_page_service",
                        config={"subarrays_per_channel": 1, "active_per_channel": 1,
                                "page_cache_pages": 0},
                        expected={"requests": pages * entries, "page_reads": pages},
                        params=params)


# ============================================================================ §5.4
def media_saturation(cfg: HbfConfig | None = None, producers: int = 1024,
                     pages_per_producer: int = 1, nbytes: int = 32, sms: int = 80,
                     bound: int = 1) -> GpuProgram:
    """Media scaling (§5.4): ``producers`` lanes, each reading its own page(s).

    Producer ``i`` loads one ``nbytes`` sector of pages ``i, i + producers, ...``
    (``pages_per_producer`` of them, dependent with ``bound = 1``). With enough producers
    the array bandwidth approaches ``channels x min(subarrays, active) x 4096 B / tR``
    (``expected['ceiling_gbs']`` for the configuration passed in).
    """
    cfg = _cfg(cfg)
    _positive("producers", producers)
    _positive("pages_per_producer", pages_per_producer)
    _entry_bytes("nbytes", nbytes)
    _positive("bound", bound)
    params = dict(producers=producers, pages_per_producer=pages_per_producer, nbytes=nbytes,
                  sms=sms, bound=bound)

    def stream(i):
        for j in range(pages_per_producer):
            yield ("R", _page_addr(cfg, i + j * producers), nbytes)

    def kernels():
        yield Kernel("media_saturation",
                     [Producer(stream(i), bound=bound, sm=i % sms) for i in range(producers)])

    slots = cfg.stacks * cfg.channels * min(cfg.subarrays_per_channel, cfg.active_per_channel)
    ceiling = slots * PAGE_BYTES / (cfg.t_read_ticks / (cfg.memory_clock_khz * 1000)) / 1e9
    n = producers * pages_per_producer
    return GpuProgram(kernels, "media_saturation",
                      config={"subarrays_per_channel": 32, "active_per_channel": 32,
                              "admission": 4096, "mshr_entries": 4096, "page_cache_pages": 0},
                      gpu=GpuConfig(sms=sms),
                      expected={"requests": n, "page_reads": n, "ceiling_gbs": ceiling},
                      params=params)


# ============================================================================ §5.2
def mshr_grid(cfg: HbfConfig | None = None, pages: int = 16, entries: int = 32,
              entry_bytes: int = 128, order: str = "page-major", warps: int = 0,
              bound: int = 1, sms: int = 8) -> GpuProgram:
    """The closed-vs-open-loop MSHR workload (§5.2): ``pages`` x ``entries`` 128 B loads.

    A CUDA read kernel over ``pages`` pages with ``entries`` distinct ``entry_bytes`` entries
    each. ``order = "page-major"`` numbers the loads page by page (a plain array walk),
    ``"entry-major"`` entry by entry across pages. ``warps = 0`` gives one warp per load
    (all issued at launch); otherwise load ``i`` goes to warp ``i mod warps``, each warp
    keeping at most ``bound`` outstanding. The study's grid varies ``entries`` (1/32),
    ``admission`` (32/128/4096), ``t_read_us`` (1/15) and ``mshr_merge``.
    """
    cfg = _cfg(cfg)
    _positive("pages", pages)
    _positive("entries", entries)
    _entry_bytes("entry_bytes", entry_bytes)
    _nonneg("warps", warps)
    _positive("bound", bound)
    if entries * entry_bytes > PAGE_BYTES:
        raise GpuError(f"entries x entry_bytes must fit one page, not {entries} x {entry_bytes}")
    if order not in ("page-major", "entry-major"):
        raise GpuError(f"order must be page-major or entry-major, not {order!r}")
    params = dict(pages=pages, entries=entries, entry_bytes=entry_bytes, order=order,
                  warps=warps, bound=bound, sms=sms)

    def kernels():
        if order == "page-major":
            pe = [(p, e) for p in range(pages) for e in range(entries)]
        else:
            pe = [(p, e) for e in range(entries) for p in range(pages)]
        acc = [("R", _page_addr(cfg, p) + e * entry_bytes, entry_bytes) for p, e in pe]
        yield Kernel("mshr_grid", _spread(acc, warps, sms, bound))

    return GpuProgram(kernels, "mshr_grid",
                      config={"channels": 4, "subarrays_per_channel": 8,
                              "active_per_channel": 2, "page_cache_pages": 0},
                      gpu=GpuConfig(sms=sms, partitions=8),
                      expected={"requests": pages * entries}, params=params)


# ============================================================================ §6.1
PLACEMENTS = ("interleave", "grouped", "contiguous", "modulo", "striping")


def placement_map(active_pages: list[int], mapping: str, channels: int) -> dict:
    """HBF configuration overrides that realise ``mapping`` for the given active pages.

    ``interleave`` / ``grouped`` / ``contiguous`` are built-in placements. ``modulo`` is the
    explicit map ``channel = p mod C``; ``striping`` (active-page striping) the explicit map
    ``channel = i mod C`` for the i-th active page. Explicit maps use the page itself as the
    channel-local index (A4), so their subarray is ``p mod subarrays_per_channel``. The map
    is over stack-local pages (one stack).
    """
    if mapping in ("interleave", "grouped", "contiguous"):
        return {"placement": mapping}
    if mapping == "modulo":
        rows = [(p, p, p % channels) for p in active_pages]
    elif mapping == "striping":
        rows = [(p, p, i % channels) for i, p in enumerate(active_pages)]
    else:
        raise GpuError(f"mapping must be one of {', '.join(PLACEMENTS)}, not {mapping!r}")
    return {"placement": "explicit", "explicit_map": tuple(sorted(rows))}


def placement(cfg: HbfConfig | None = None, pages: int = 64, entries: int = 1,
              entry_bytes: int = 128, stride: int = 1, mapping: str = "interleave",
              channels: int = 4, sms: int = 8) -> GpuProgram:
    """Placement study (§6.1): ``pages`` active pages ``p_i = i * stride``, ``entries`` loads each.

    One warp per load, all launched together. ``config`` carries the study's resources (4
    channels, 32 subarrays in total, 8 active operations in the whole stack, admission 4096)
    plus the placement
    overrides of :func:`placement_map` for ``mapping``; pass ``channels`` = the channel
    count you run with, since the explicit maps depend on it.
    """
    cfg = _cfg(cfg)
    _positive("pages", pages)
    _positive("entries", entries)
    _positive("stride", stride)
    _positive("channels", channels)
    _entry_bytes("entry_bytes", entry_bytes)
    if entries * entry_bytes > PAGE_BYTES:
        raise GpuError(f"entries x entry_bytes must fit one page, not {entries} x {entry_bytes}")
    active = [i * stride for i in range(pages)]
    overrides = placement_map(active, mapping, channels)
    params = dict(pages=pages, entries=entries, entry_bytes=entry_bytes, stride=stride,
                  mapping=mapping, channels=channels, sms=sms)

    def kernels():
        acc = [("R", _page_addr(cfg, p) + e * entry_bytes, entry_bytes)
               for p in active for e in range(entries)]
        yield Kernel("placement", _one_access_warps(acc, sms))

    # The source's cap of eight active operations is controller-wide: active_total = 8
    # (the per-channel cap of L2 stays at 8, so it never binds first).
    config = {"channels": channels, "subarrays_per_channel": max(1, 32 // channels),
              "active_per_channel": 8, "active_total": 8, "admission": 4096,
              "page_cache_pages": 0}
    config.update(overrides)
    return GpuProgram(kernels, "placement", config=config, gpu=GpuConfig(sms=sms),
                      expected={"requests": pages * entries, "active_pages": active},
                      params=params)


# ============================================================================ §6.2
def rw_isolation(cfg: HbfConfig | None = None, read_sectors: int = 512, read_pages: int = 16,
                 write_pages: int = 4, write_sectors: int = 128, read_delay_us: float = 100.0,
                 read_bound: int = 4, write_bound: int = 128, write_page_base: int = 1024,
                 sms: int = 8) -> GpuProgram:
    """Read/write isolation (§6.2): a read stream beside full-page writes.

    One kernel. ``write_pages`` writer warps (start at launch) each store ``write_sectors``
    32 B sectors covering their page in order (128 sectors = complete coverage), keeping up
    to ``write_bound`` stores outstanding (stores are non-posted: acknowledged after
    PROGRAM). ``read_pages`` reader warps start ``read_delay_us`` after launch (the nominal
    read-start delay) and load ``read_sectors / read_pages`` sectors each of their own page,
    ``read_bound`` outstanding. Read pages ``0..`` and write pages ``write_page_base..`` are
    disjoint.
    """
    cfg = _cfg(cfg)
    _positive("read_sectors", read_sectors)
    _positive("read_pages", read_pages)
    _nonneg("write_pages", write_pages)
    _positive("write_sectors", write_sectors)
    _positive("read_bound", read_bound)
    _positive("write_bound", write_bound)
    if read_sectors % read_pages:
        raise GpuError(f"read_sectors ({read_sectors}) must be a multiple of read_pages "
                       f"({read_pages})")
    per = read_sectors // read_pages
    if per * SECTOR > PAGE_BYTES or write_sectors * SECTOR > PAGE_BYTES:
        raise GpuError("a page holds at most 128 sectors")
    if read_delay_us < 0:
        raise GpuError(f"read_delay_us must be non-negative, not {read_delay_us!r}")
    if write_page_base < read_pages and write_pages:
        raise GpuError(f"write_page_base ({write_page_base}) overlaps the read pages "
                       f"0..{read_pages - 1}")
    start = us_to_gpu_cycles(read_delay_us, cfg)
    params = dict(read_sectors=read_sectors, read_pages=read_pages, write_pages=write_pages,
                  write_sectors=write_sectors, read_delay_us=read_delay_us,
                  read_bound=read_bound, write_bound=write_bound,
                  write_page_base=write_page_base, sms=sms)

    def writer(pg):
        base = _page_addr(cfg, pg)
        return (("W", base + SECTOR * s, SECTOR) for s in range(write_sectors))

    def reader(pg):
        base = _page_addr(cfg, pg)
        return (("R", base + SECTOR * s, SECTOR) for s in range(per))

    def kernels():
        prods = [Producer(writer(write_page_base + j), bound=write_bound, sm=j % sms)
                 for j in range(write_pages)]
        prods += [Producer(reader(j), bound=read_bound, start=start, sm=(write_pages + j) % sms)
                  for j in range(read_pages)]
        yield Kernel("rw_isolation", prods)

    # admission 4096: the source's admission slots count page operations (docs/model.md,
    # "Two admission bounds"); 256 request slots would hold the 512 write sectors until
    # their PROGRAMs complete and stall the reads at ingress whatever the scheduler.
    return GpuProgram(kernels, "rw_isolation",
                      config={"channels": 4, "subarrays_per_channel": 1,
                              "active_per_channel": 1, "admission": 4096,
                              "write_deadline_ticks": 10000,
                              "scheduler": "read-priority", "page_cache_pages": 0},
                      gpu=GpuConfig(sms=sms),
                      expected={"requests": read_sectors + write_pages * write_sectors,
                                "reads": read_sectors, "writes": write_pages * write_sectors,
                                "read_start_gpu_cycles": start},
                      params=params)
