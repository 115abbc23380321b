"""Named workloads: the source's microbenchmarks and an LLM decode step, as GPU programs.

Each registered workload is a function ``f(cfg=None, **params)`` returning a
:class:`~hbfsim.model.gpu.GpuProgram` (closed loop) or, for a pure device stream, a
:class:`DeviceStream` (requests with fixed arrival ticks). Both carry ``name``, ``params``,
``config`` (the HBF configuration overrides of the source study the workload comes from;
informational, never applied implicitly), ``gpu`` and ``expected`` (counts the workload
generates). Everything is generated lazily and deterministically; random parts take a
``seed``. Sources: the HBF-Sim paper §5.1-§5.5 and §6; sources.md §figures and §6;
docs/gpu.md lists every parameter.
"""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, Iterator

from hbfsim.config import PAGE_BYTES, HbfConfig, load_config
from hbfsim.model.controller import Request
from hbfsim.model.gpu import GpuConfig, GpuError, GpuProgram, Kernel, Producer, \
    us_to_gpu_cycles
# The LLM shapes live in hbfsim/shapes.py (shared with the serving level); re-exported here.
from hbfsim.shapes import DTYPE_BYTES as _DTYPES  # noqa: F401  (the old name)
from hbfsim.shapes import MODEL_PRESETS, ModelShape, ShapeError
from hbfsim.shapes import model_shape as _model_shape

__all__ = [
    "MODEL_PRESETS",
    "WORKLOADS",
    "DeviceStream",
    "ModelShape",
    "burst_page_service",
    "conservation",
    "decode_counts",
    "decode_layout",
    "get_workload",
    "layout_decode",
    "llm_decode",
    "media_saturation",
    "model_shape",
    "mshr_grid",
    "placement",
    "placement_map",
    "rw_isolation",
    "shared_staging",
    "workload_names",
]

SECTOR = 32


class DeviceStream:
    """A pure device request stream: requests with fixed arrival ticks (open loop).

    Iterating yields fresh :class:`Request` objects in arrival order, lazily, so the same
    stream can be run more than once.

    Members
    -------
    name, params, config, expected
        As for :class:`~hbfsim.model.gpu.GpuProgram`.
    """

    def __init__(self, factory: Callable[[], Iterator[Request]], name: str,
                 config: dict | None = None, expected: dict | None = None,
                 params: dict | None = None):
        self._factory = factory
        self.name = name
        self.config = dict(config or {})
        self.expected = dict(expected or {})
        self.params = dict(params or {})
        self.gpu = None

    def __iter__(self) -> Iterator[Request]:
        return iter(self._factory())

    def accesses(self) -> Iterator[tuple]:
        """Every request as ``(op, addr, nbytes)``, lazily (as :meth:`GpuProgram.accesses`)."""
        return ((r.op, r.addr, r.nbytes) for r in self)

    def __repr__(self):
        return f"DeviceStream({self.name!r}, params={self.params!r})"


def _cfg(cfg: HbfConfig | None) -> HbfConfig:
    return cfg if cfg is not None else load_config()


def _positive(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise GpuError(f"{name} must be a positive integer, not {v!r}")
    return v


def _nonneg(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise GpuError(f"{name} must be a non-negative integer, not {v!r}")
    return v


def _entry_bytes(name: str, v) -> int:
    if v not in (32, 64, 128):
        raise GpuError(f"{name} must be 32, 64 or 128 (a sector or a line), not {v!r}")
    return v


def _page_addr(cfg: HbfConfig, page: int) -> int:
    return cfg.base_address + page * PAGE_BYTES


def _one_access_warps(accesses, sms: int, bound: int = 1, start: int = 0) -> list[Producer]:
    """One warp per access (warp w on SM w mod sms), all launched together."""
    return [Producer([a], bound=bound, start=start, sm=w % sms) for w, a in enumerate(accesses)]


def _spread(accesses: list, warps: int, sms: int, bound: int, start: int = 0):
    """Deal ``accesses`` round-robin over ``warps`` warps (access i -> warp i mod warps)."""
    if warps <= 0 or warps >= len(accesses):
        return _one_access_warps(accesses, sms, bound, start)
    return [Producer(accesses[w::warps], bound=bound, start=start, sm=w % sms)
            for w in range(warps)]


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


# ============================================================================ §5.5 LLM
def model_shape(spec) -> ModelShape:
    """:func:`hbfsim.shapes.model_shape`, raising :class:`GpuError` as the workloads do.

    Raises
    ------
    GpuError
        Unknown preset, unreadable config or a bad key (the one-line message of
        :class:`~hbfsim.shapes.ShapeError`).
    """
    try:
        return _model_shape(spec)
    except ShapeError as e:
        raise GpuError(str(e)) from None


def _decode_shape(spec, scale: int = 1) -> ModelShape:
    """The shape of a decode step: a dense GQA model (:func:`_tensors` lays out no experts
    and no MLA projections), scaled by ``scale``."""
    s = model_shape(spec)
    if s.is_moe or s.is_mla:
        raise GpuError(f"model must be a dense GQA transformer for llm_decode, not "
                       f"{s.name!r} ({'MoE' if s.is_moe else 'MLA'})")
    try:
        return s.scaled(scale)
    except ShapeError as e:
        raise GpuError(str(e)) from None


def _tensors(s: ModelShape) -> list[tuple[str, int]]:
    """Weight tensors in storage order as ``(name, bytes)`` (Hugging Face names)."""
    from hbfsim.model.layout import attention_tensors

    d = s.dtype_bytes
    out = [("model.embed_tokens.weight", s.vocab * s.hidden * d)]
    for i in range(s.layers):
        L = f"model.layers.{i}."
        out += attention_tensors(s, L)
        out.append((L + "mlp.gate_proj.weight", s.intermediate * s.hidden * d))
        out.append((L + "mlp.up_proj.weight", s.intermediate * s.hidden * d))
        out.append((L + "mlp.down_proj.weight", s.hidden * s.intermediate * d))
    out.append(("model.norm.weight", s.hidden * d))
    if not s.tied_embeddings:
        out.append(("lm_head.weight", s.vocab * s.hidden * d))
    return out


def _align(v: int, a: int) -> int:
    return -(-v // a) * a


def decode_layout(shape, align: int = 256, max_tokens: int = 4096, batch: int = 1,
                  prefix_tokens: int = 0, rag_store_vectors: int = 0,
                  rag_vector_bytes: int = 1024) -> dict:
    """HBF byte offsets (from the HBF base) of the decode step's data.

    Weights are stored back to back in :func:`_tensors` order, each aligned to ``align``
    bytes (a power of two >= 32; 256 = cudaMalloc's alignment). Then, page aligned: the KV
    region (per layer: ``prefix_tokens`` shared tokens, then per sequence ``max_tokens``
    private tokens, one token's K then V per ``kv_token_bytes``), then the RAG vector store.
    """
    s = _decode_shape(shape)
    if align < SECTOR or align & (align - 1):
        raise GpuError(f"align must be a power of two >= {SECTOR}, not {align!r}")
    off = 0
    tensors = {}
    for name, nb in _tensors(s):
        off = _align(off, align)
        tensors[name] = (off, nb)
        off += nb
    kv_token = 2 * s.kv_heads * s.head_dim * s.dtype_bytes
    kv_base = _align(off, PAGE_BYTES)
    layer_kv = _align((prefix_tokens + batch * max_tokens) * kv_token, PAGE_BYTES)
    rag_base = kv_base + s.layers * layer_kv
    end = _align(rag_base + rag_store_vectors * rag_vector_bytes, PAGE_BYTES)
    return {"tensors": tensors, "weights_bytes": off, "kv_base": kv_base,
            "kv_token_bytes": kv_token, "kv_layer_bytes": layer_kv, "rag_base": rag_base,
            "end": end}


def decode_counts(shape, scale: int = 1, request_bytes: int = SECTOR,
                  norm_per_head: bool = True, kv_append: bool = False,
                  kv_in_hbf: bool = False, context_tokens: int = 29, batch: int = 1,
                  prefix_tokens: int = 0, rag_vectors: int = 0,
                  rag_vector_bytes: int = 1024) -> dict:
    """Requests one decode step generates, by category, in closed form (no generation).

    ``weights`` reads every tensor once except the embedding matrix, whose single token row
    is ``embed_row``; the LM head reads the (tied) embedding matrix or ``lm_head.weight``.
    ``norm_rereads`` are the extra reads of the QK-norm weights, read once per query head
    and once per KV head when ``norm_per_head``.
    """
    s = _decode_shape(shape, scale)
    rb = request_bytes
    n = {k: 0 for k in ("weights", "embed_row", "norm_rereads", "kv_append", "kv_reads",
                        "rag")}
    for name, nb in _tensors(s):
        if name == "model.embed_tokens.weight":
            n["embed_row"] += -(-s.hidden * s.dtype_bytes // rb)
            if s.tied_embeddings:
                n["weights"] += -(-nb // rb)          # read by the LM head
            continue
        n["weights"] += -(-nb // rb)
        if norm_per_head and name.endswith("q_norm.weight"):
            n["norm_rereads"] += (s.q_heads - 1) * -(-nb // rb)
        if norm_per_head and name.endswith("k_norm.weight"):
            n["norm_rereads"] += (s.kv_heads - 1) * -(-nb // rb)
    kv_token = 2 * s.kv_heads * s.head_dim * s.dtype_bytes
    if kv_append:
        n["kv_append"] = s.layers * batch * -(-kv_token // rb)
    if kv_in_hbf:
        private = context_tokens - prefix_tokens
        per_seq = -(-prefix_tokens * kv_token // rb) + -(-private * kv_token // rb)
        n["kv_reads"] = s.layers * batch * per_seq
    if rag_vectors:
        n["rag"] = rag_vectors * -(-rag_vector_bytes // rb)
    reads = n["weights"] + n["embed_row"] + n["norm_rereads"] + n["kv_reads"] + n["rag"]
    n["reads"] = reads
    n["writes"] = n["kv_append"]
    n["requests"] = reads + n["kv_append"]
    return n


def llm_decode(cfg: HbfConfig | None = None, model="qwen3-1.7b", scale: int = 1,
               layers: int | None = None, sms: int = 8, warps_per_sm: int = 48, bound: int = 16,
               store_bound: int = 128, line_bytes: int = 128,
               request_bytes: int = SECTOR, align: int = 256, token_id: int = 0,
               norm_per_head: bool = True, compute: int = 0, kv_append: bool = False,
               kv_in_hbf: bool = False, context_tokens: int = 29, max_tokens: int = 4096,
               batch: int = 1, prefix_tokens: int = 0, rag_vectors: int = 0,
               rag_vector_bytes: int = 1024, rag_store_vectors: int = 1 << 20,
               seed: int = 0) -> GpuProgram:
    """One decode step of a dense transformer with its weights in HBF (source §5.5).

    Kernels follow the Hugging Face eager forward pass, one per weight read, separated by
    barriers: embedding row, then per layer input norm, q/k/v projections, q/k norms
    (per head), [KV append], [attention KV reads], o projection, post-attention norm,
    gate/up/down projections; final norm and the LM head (the embedding matrix when tied).
    A GEMV kernel has ``sms x warps_per_sm`` warps walking the tensor's ``line_bytes``
    lines grid-stride (line ``l`` -> warp ``l mod W``), each line as ``request_bytes``
    requests (32 B sectors by default), at most ``bound`` loads (``store_bound`` stores:
    stores do not stall a warp until the barrier) outstanding per warp. KV cache
    and activations stay in GPU memory unless ``kv_append`` (new token's K/V written to
    HBF: sector stores) or ``kv_in_hbf`` (attention reads the context's K/V from HBF;
    ``prefix_tokens`` of it shared by all ``batch`` sequences). ``rag_vectors`` adds a
    first kernel gathering that many random ``rag_vector_bytes`` vectors (``seed``) from a
    store of ``rag_store_vectors``. ``scale`` shrinks the model (:meth:`ModelShape.scaled`)
    (and ``layers`` overrides the layer count) so tests run small versions;
    :func:`decode_counts` gives the request counts (``expected``).
    """
    cfg = _cfg(cfg)
    shape = _decode_shape(model, scale)
    if layers is not None:
        shape = replace(shape, layers=_positive("layers", layers))
    for name, v in (("sms", sms), ("warps_per_sm", warps_per_sm), ("bound", bound),
                    ("store_bound", store_bound), ("batch", batch),
                    ("max_tokens", max_tokens)):
        _positive(name, v)
    for name, v in (("context_tokens", context_tokens), ("prefix_tokens", prefix_tokens),
                    ("rag_vectors", rag_vectors), ("compute", compute),
                    ("token_id", token_id)):
        _nonneg(name, v)
    if request_bytes not in (32, 64, 128):
        raise GpuError(f"request_bytes must be 32, 64 or 128, not {request_bytes!r}")
    if line_bytes not in (32, 64, 128) or line_bytes < request_bytes:
        raise GpuError(f"line_bytes must be 32, 64 or 128 and >= request_bytes, "
                       f"not {line_bytes!r}")
    if align < line_bytes:
        raise GpuError(f"align must be at least line_bytes ({line_bytes}), not {align!r}")
    if token_id >= shape.vocab:
        raise GpuError(f"token_id must be below vocab ({shape.vocab}), not {token_id!r}")
    if prefix_tokens > context_tokens:
        raise GpuError(f"prefix_tokens ({prefix_tokens}) exceeds context_tokens "
                       f"({context_tokens})")
    if kv_append or kv_in_hbf:
        kvt = 2 * shape.kv_heads * shape.head_dim * shape.dtype_bytes
        if kvt % line_bytes:
            raise GpuError(f"a token's K/V ({kvt} B) must be a multiple of line_bytes "
                           f"({line_bytes}) so no request crosses a page")
        if context_tokens - prefix_tokens + 1 > max_tokens:
            raise GpuError(f"max_tokens ({max_tokens}) is too small for context_tokens "
                           f"({context_tokens})")
    if rag_vectors and (rag_vector_bytes < 1 or rag_vector_bytes % SECTOR
                        or rag_vector_bytes > PAGE_BYTES
                        or PAGE_BYTES % rag_vector_bytes):
        raise GpuError(f"rag_vector_bytes must be a multiple of 32 dividing 4096, "
                       f"not {rag_vector_bytes!r}")
    if rag_vectors and rag_store_vectors < 1:
        raise GpuError(f"rag_store_vectors must be positive, not {rag_store_vectors!r}")
    lay = decode_layout(shape, align, max_tokens, batch, prefix_tokens,
                        rag_store_vectors if rag_vectors else 0, rag_vector_bytes)
    hbf_end = lay["end"]
    if hbf_end > cfg.capacity_bytes:
        raise GpuError(f"the decode step needs {hbf_end:,} B of HBF, more than capacity_bytes "
                       f"{cfg.capacity_bytes:,}")
    W = sms * warps_per_sm
    B = cfg.base_address
    tensors = lay["tensors"]
    kvb = lay["kv_token_bytes"]
    params = dict(model=shape.name, scale=scale, layers=shape.layers, sms=sms,
                  warps_per_sm=warps_per_sm, bound=bound, store_bound=store_bound,
                  line_bytes=line_bytes, request_bytes=request_bytes,
                  align=align, token_id=token_id, norm_per_head=norm_per_head,
                  compute=compute, kv_append=kv_append, kv_in_hbf=kv_in_hbf,
                  context_tokens=context_tokens, max_tokens=max_tokens, batch=batch,
                  prefix_tokens=prefix_tokens, rag_vectors=rag_vectors,
                  rag_vector_bytes=rag_vector_bytes, rag_store_vectors=rag_store_vectors,
                  seed=seed)
    per_line = line_bytes // request_bytes

    def line_walk(op, ranges, w, stride):
        """Warp ``w``'s requests over the concatenated byte ranges: global line ``g`` belongs
        to warp ``g mod stride``; each line is split into ``request_bytes`` requests."""
        g = 0
        for start, nb in ranges:
            nlines = -(-nb // line_bytes)
            first = (w - g) % stride
            end = start + nb
            for li in range(first, nlines, stride):
                a = start + li * line_bytes
                for k in range(per_line):
                    s = a + k * request_bytes
                    if s >= end:
                        break
                    yield (op, s, request_bytes if s + request_bytes <= end else end - s)
            g += nlines

    def gemv(name, ranges, op="R"):
        total = sum(-(-nb // line_bytes) for _, nb in ranges)
        nw = min(W, total)
        b = bound if op == "R" else store_bound
        return Kernel(name, [Producer(line_walk(op, ranges, w, W), bound=b, sm=w % sms)
                             for w in range(nw)], compute=compute)

    def t(name):
        off, nb = tensors[name]
        return (B + off, nb)

    def per_head(name, heads):
        a, nb = t(name + ".weight")
        if not norm_per_head:
            return gemv(name, [(a, nb)])
        # every head's warp reads the whole norm vector (head h runs on SM h mod sms)
        return Kernel(name, [Producer(line_walk("R", [(a, nb)], 0, 1), bound=bound, sm=h % sms)
                             for h in range(heads)], compute=compute)

    def kv_addr(layer, seq, token):
        """Address of a token's K/V in HBF: shared prefix first, then per sequence."""
        base = B + lay["kv_base"] + layer * lay["kv_layer_bytes"]
        if token < prefix_tokens:
            return base + token * kvb
        return base + (prefix_tokens + seq * max_tokens + token - prefix_tokens) * kvb

    def kernels():
        if rag_vectors:
            rng = random.Random(seed)
            idx = [rng.randrange(rag_store_vectors) for _ in range(rag_vectors)]
            rb = B + lay["rag_base"]
            yield gemv("rag_gather", [(rb + i * rag_vector_bytes, rag_vector_bytes)
                                      for i in idx])
        ea, _ = t("model.embed_tokens.weight")
        row = shape.hidden * shape.dtype_bytes
        yield gemv("embed", [(ea + token_id * row, row)])
        for i in range(shape.layers):
            L = f"model.layers.{i}."
            yield gemv(L + "input_layernorm", [t(L + "input_layernorm.weight")])
            for proj in ("q", "k", "v"):
                r = [t(f"{L}self_attn.{proj}_proj.weight")]
                if shape.attention_bias:
                    r.append(t(f"{L}self_attn.{proj}_proj.bias"))
                yield gemv(f"{L}self_attn.{proj}_proj", r)
            if shape.qk_norm:
                yield per_head(L + "self_attn.q_norm", shape.q_heads)
                yield per_head(L + "self_attn.k_norm", shape.kv_heads)
            if kv_append:
                yield gemv(L + "kv_append", [(kv_addr(i, b, context_tokens), kvb)
                                             for b in range(batch)], op="W")
            if kv_in_hbf:
                rng_ = []
                for b in range(batch):
                    if prefix_tokens:
                        rng_.append((kv_addr(i, b, 0), prefix_tokens * kvb))
                    if context_tokens > prefix_tokens:
                        rng_.append((kv_addr(i, b, prefix_tokens),
                                     (context_tokens - prefix_tokens) * kvb))
                if rng_:
                    yield gemv(L + "attention_kv", rng_)
            yield gemv(L + "self_attn.o_proj", [t(L + "self_attn.o_proj.weight")])
            yield gemv(L + "post_attention_layernorm",
                       [t(L + "post_attention_layernorm.weight")])
            for proj in ("gate", "up", "down"):
                yield gemv(f"{L}mlp.{proj}_proj", [t(f"{L}mlp.{proj}_proj.weight")])
        yield gemv("model.norm", [t("model.norm.weight")])
        head = "model.embed_tokens.weight" if shape.tied_embeddings else "lm_head.weight"
        yield gemv("lm_head", [t(head)])

    counts = decode_counts(shape, 1, request_bytes, norm_per_head, kv_append, kv_in_hbf,
                           context_tokens, batch, prefix_tokens, rag_vectors,
                           rag_vector_bytes)
    counts["hbf_bytes"] = hbf_end
    return GpuProgram(kernels, f"llm_decode:{shape.name}",
                      config={"channels": 16, "subarrays_per_channel": 32,
                              "active_per_channel": 32, "admission": 4096,
                              "mshr_entries": 1024, "page_cache_pages": 0,
                              "gpu_clock_mhz": 1410.0, "memory_clock_mhz": 1512.0},
                      gpu=GpuConfig(sms=sms, partitions=8), expected=counts, params=params)


# ============================================================================ FlashAccel
#: The scaled geometry :func:`layout_decode` was designed for: FlashAccel's arithmetic at
#: 1/8 size. Its CSI node puts 6 stacks x 8 dies x 96 planes = 4,608 planes beside a GPU,
#: and one 12 MiB expert matrix of Qwen3-235B (4096 x 1536 x 2 B) is 3,072 pages, 2/3 of
#: them; scaled by 8 a matrix is 48 pages and 2 dies x 36 planes = 72 planes keep the 2/3,
#: with 3 megaplanes per die as FlashAccel's 96 / 32 (docs/flashaccel.md).
LAYOUT_GEOMETRY = {"channels": 2, "subarrays_per_channel": 36, "planes_per_die": 36,
                   "megaplane_planes": 12, "active_per_channel": 36, "t_read_us": 4.0,
                   "t_prog_us": 75.0, "channel_bw_gbps": 96.0, "admission": 16384,
                   "mshr_entries": 16384, "queue_depth": 256, "page_cache_pages": 0}


def layout_decode(cfg: HbfConfig | None = None, model="qwen3-235b-a22b", scale: int = 8,
                  layers: int | None = 1, layout: str = "execution", batch: int = 16,
                  seed: int = 0, align: int = 256, token_id: int = 0,
                  issue: str = "stream", sms: int = 8) -> GpuProgram:
    """One decode step's weight reads under a FlashAccel layout (model/layout.py).

    The weights of ``model`` (scaled by ``scale``, ``layers`` of them) are placed in
    ``declaration`` or ``execution`` order (:func:`hbfsim.model.layout.weight_layout`);
    the step then reads, kernel by kernel with a barrier between kernels, the pages of
    :func:`hbfsim.model.layout.decode_phases`: attention, router and the experts that
    ``batch`` tokens route to (uniform top-k, ``seed``). Each kernel reads each of its
    pages once, one warp per page and one 4096 B load each, all launched together, so its
    span is set by the most loaded plane. ``issue = "stream"`` issues a kernel's pages in
    layout order; ``"hyperpage"`` in the order a hyperpage command fires planes (row, then
    plane within the megaplane, then megaplane: :meth:`PlaneMap.hyperpage_key`), so a
    megapage's pages do not arrive back to back on one channel. ``expected['kernels']``
    lists, per kernel, the pages and the most pages on one plane the layout implies
    (computed, not run).
    """
    from hbfsim.model.layout import (LayoutError, PlaneMap, decode_phases, touched_experts,
                                     weight_layout)

    cfg = _cfg(cfg)
    shape = model_shape(model)
    try:
        shape = shape.scaled(_positive("scale", scale))
    except ShapeError as e:
        raise GpuError(str(e)) from None
    if shape.is_mla:
        raise GpuError(f"model must use GQA attention for a weight layout, not "
                       f"{shape.name!r} (MLA)")
    if layers is not None:
        # an MoE model keeps at least one MoE layer: its leading dense layers are cut first
        n = _positive("layers", layers)
        dense = min(shape.dense_layers, n - 1) if shape.is_moe else 0
        shape = replace(shape, layers=n, dense_layers=dense)
    _positive("batch", batch)
    _positive("sms", sms)
    _nonneg("token_id", token_id)
    if issue not in ("stream", "hyperpage"):
        raise GpuError(f"issue must be stream or hyperpage, not {issue!r}")
    if token_id >= shape.vocab:
        raise GpuError(f"token_id must be below vocab ({shape.vocab}), not {token_id!r}")
    try:
        lay = weight_layout(cfg, shape, layout, align)
        planes = PlaneMap(cfg)
        phases = decode_phases(shape, touched_experts(shape, batch, seed), token_id)
        kpages = []
        for name, reads in phases:
            seen, pages = set(), []
            for tensor, off, nb in reads:
                for p in lay.pages(tensor, off, nb):
                    if p not in seen:
                        seen.add(p)
                        pages.append(p)
            if issue == "hyperpage":
                pages.sort(key=planes.hyperpage_key)
            kpages.append((name, pages))
    except LayoutError as e:
        raise GpuError(str(e)) from None
    params = dict(model=shape.name, scale=scale, layers=shape.layers, layout=layout,
                  batch=batch, seed=seed, align=align, token_id=token_id, issue=issue,
                  sms=sms)
    expected = {"requests": sum(len(p) for _, p in kpages), "planes": planes.planes,
                "kernels": []}
    for name, pages in kpages:
        load: dict[int, int] = {}
        for p in pages:
            q = planes.plane_of(p)
            load[q] = load.get(q, 0) + 1
        expected["kernels"].append({"name": name, "pages": len(pages),
                                    "max_plane_pages": max(load.values()),
                                    "planes_used": len(load)})

    def kernels():
        for name, pages in kpages:
            yield Kernel(name, _one_access_warps(
                [("R", _page_addr(cfg, p), PAGE_BYTES) for p in pages], sms))

    return GpuProgram(kernels, f"layout_decode:{shape.name}:{layout}",
                      config=dict(LAYOUT_GEOMETRY), gpu=GpuConfig(sms=sms),
                      expected=expected, params=params)


# ============================================================================ registry
WORKLOADS: dict[str, Callable] = {
    "conservation": conservation,
    "shared_staging": shared_staging,
    "burst_page_service": burst_page_service,
    "media_saturation": media_saturation,
    "mshr_grid": mshr_grid,
    "placement": placement,
    "rw_isolation": rw_isolation,
    "llm_decode": llm_decode,
    "layout_decode": layout_decode,
}


def workload_names() -> list[str]:
    """Names of the registered workloads."""
    return list(WORKLOADS)


def get_workload(name: str, cfg: HbfConfig | None = None, **params):
    """Build the named workload (a :class:`GpuProgram` or :class:`DeviceStream`).

    Raises
    ------
    GpuError
        Unknown name or a bad parameter (the message names it).
    """
    fn = WORKLOADS.get(name)
    if fn is None:
        raise GpuError(f"workload must be one of {', '.join(WORKLOADS)}, not {name!r}")
    try:
        return fn(cfg, **params)
    except TypeError as e:
        raise GpuError(f"workload {name!r}: {e}") from None
