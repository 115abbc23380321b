"""Weight and KV layouts in the HBF address space: declaration order versus FlashAccel's
execution order (FlashAccel paper, docs/sources.md; docs/flashaccel.md).

Plain Python: a layout is a function from a tensor's bytes to logical HBF pages, computed
through the mapping interface (:class:`hbfsim.model.mapping.Mapper`, A1-A4), so every page
it names lands on the plane the controller will use.

* ``declaration``: the tensors one after another in the order the model declares them,
  from the HBF base, each aligned to ``align`` bytes (as ``decode_layout`` in
  ``model/workloads_llm.py`` stores a dense model).
* ``execution``: the tensors in the order a decode step reads them, cut into megapages (one
  page on each of the M planes of a megaplane), megapage ``j`` on megaplane ``j mod K``
  (K megaplanes, stacks fastest, then channels, then a die's megaplane groups) at row
  ``j div K``: striped round-robin across megaplanes and packed into consecutive
  hyperpages (FlashAccel: "weights are sliced into megapages in execution order, striped
  round-robin across megaplanes, and packed into consecutive hyperpages").

An MoE layer's declaration is the Hugging Face module order (router ``mlp.gate``, then each
expert's gate, up and down projections); its execution order is that of a fused MoE kernel,
the gate and up projections of every expert (one grouped GEMM), then every down projection
(the second GEMM), as vLLM stores them (its ``w13`` and ``w2`` tensors). For a dense model
the two orders are the same and only the striping differs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.mapping import Mapper
from hbfsim.shapes import ModelShape

__all__ = [
    "LAYOUTS",
    "KvLayout",
    "LayoutError",
    "PlaneMap",
    "WeightLayout",
    "decode_phases",
    "touched_experts",
    "weight_layout",
    "weight_tensors",
]

LAYOUTS = ("declaration", "execution")


class LayoutError(ValueError):
    """A layout that cannot be built (the message names the parameter and value)."""


# ============================================================================ planes
class PlaneMap:
    """Planes, megaplanes and hyperpages of a configuration, and their logical pages.

    Plane ``(stack * channels + channel) * subarrays_per_channel + subarray`` (a global
    index); megaplane = plane div ``megaplane_planes`` (M consecutive subarrays of one die,
    docs/flashaccel.md). :meth:`page_at` inverts the mapper for the built-in placements and
    checks every page it returns against it.

    Parameters
    ----------
    cfg : HbfConfig
        Placement ``interleave``, ``grouped`` or ``contiguous`` and no partition scheduler
        (whose reads and writes map over different channels).
    """

    def __init__(self, cfg: HbfConfig):
        if cfg.placement == "explicit":
            raise LayoutError("placement must be interleave, grouped or contiguous for a "
                              "layout, not 'explicit'")
        if cfg.scheduler.startswith("partition-"):
            raise LayoutError(f"scheduler {cfg.scheduler!r} maps reads and writes over "
                              "different channels; a layout needs one mapping")
        self.cfg = cfg
        self.mapper = Mapper(cfg)
        self.stacks, self.channels = cfg.stacks, cfg.channels
        self.subarrays, self.m = cfg.subarrays_per_channel, cfg.megaplane_planes
        self.planes = self.stacks * self.channels * self.subarrays
        self.megaplanes = self.planes // self.m
        self.rows = cfg.pages_per_stack // (self.channels * self.subarrays)
        # Round-robin order of the megaplanes: consecutive megapages on different stacks,
        # then different channels (links), then the next megaplane group of the dies.
        self.order = [(st, ch, g) for g in range(self.subarrays // self.m)
                      for ch in range(self.channels) for st in range(self.stacks)]

    def plane_of(self, page: int) -> int:
        """Global plane index of logical page ``page`` (through the mapper, A2-A4)."""
        st, q = self.mapper.stack_of(page)
        ch, _, sub = self.mapper.channel_of(q)
        return (st * self.channels + ch) * self.subarrays + sub

    def megaplane_of(self, page: int) -> int:
        return self.plane_of(page) // self.m

    def page_at(self, stack: int, channel: int, local: int) -> int:
        """The logical page the mapper sends to ``(stack, channel, channel-local page)``.

        Raises
        ------
        LayoutError
            When the page is beyond the capacity.
        """
        cfg, n = self.cfg, self.channels
        if cfg.placement == "interleave":
            q = local * n + channel
        elif cfg.placement == "grouped":
            g = cfg.group_pages
            q = (local // g) * g * n + channel * g + local % g
        else:  # contiguous: channel c owns pages [c * region, (c + 1) * region)
            q = channel * (cfg.pages_per_stack // n) + local
        if self.stacks == 1:
            page = q
        elif cfg.stack_select == "interleave":
            page = q * self.stacks + stack
        else:
            page = stack * cfg.pages_per_stack + q
        if not 0 <= page < cfg.pages:
            raise LayoutError(f"the layout needs page {page:,}, beyond the {cfg.pages:,} "
                              f"pages of capacity_bytes {cfg.capacity_bytes}")
        got = self.mapper.stack_of(page)
        if got[0] != stack or self.mapper.channel_of(got[1])[:2] != (channel, local):
            raise LayoutError(f"page {page} does not map to stack {stack}, channel {channel}, "
                              f"local page {local}")  # a placement this class cannot invert
        return page

    def hyperpage_key(self, page: int) -> tuple[int, int, int]:
        """Sort key that issues pages as a hyperpage command would fire them: by row, then
        by plane within the megaplane, then by megaplane in round-robin order, so
        consecutive pages go to different megaplanes (and links)."""
        st, q = self.mapper.stack_of(page)
        ch, local, _ = self.mapper.channel_of(q)
        row, s = divmod(local, self.subarrays)
        g, i = divmod(s, self.m)
        return row, i, (g * self.channels + ch) * self.stacks + st

    def megapage(self, j: int) -> list[int]:
        """The M logical pages of megapage ``j``: megaplane ``order[j mod K]``, row
        ``j div K``, one page on each of its planes (the same channel-local row)."""
        st, ch, g = self.order[j % self.megaplanes]
        row = j // self.megaplanes
        first = row * self.subarrays + g * self.m
        return [self.page_at(st, ch, first + i) for i in range(self.m)]


# ============================================================================ tensors
def _check_shape(shape: ModelShape) -> None:
    if shape.is_mla:
        raise LayoutError(f"model must use GQA attention for a weight layout, not "
                          f"{shape.name!r} (MLA)")


def attention_tensors(s: ModelShape, L: str) -> list[tuple[str, int]]:
    """One layer's norms and attention tensors, ``(name, bytes)`` in Hugging Face storage
    order under the prefix ``L`` (also the dense llm-decode layout of model/workloads_llm.py)."""
    d = s.dtype_bytes
    qd, kvd = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    out = [(L + "input_layernorm.weight", s.hidden * d),
           (L + "self_attn.q_proj.weight", qd * s.hidden * d)]
    if s.attention_bias:
        out.append((L + "self_attn.q_proj.bias", qd * d))
    out.append((L + "self_attn.k_proj.weight", kvd * s.hidden * d))
    if s.attention_bias:
        out.append((L + "self_attn.k_proj.bias", kvd * d))
    out.append((L + "self_attn.v_proj.weight", kvd * s.hidden * d))
    if s.attention_bias:
        out.append((L + "self_attn.v_proj.bias", kvd * d))
    if s.qk_norm:
        out.append((L + "self_attn.q_norm.weight", s.head_dim * d))
        out.append((L + "self_attn.k_norm.weight", s.head_dim * d))
    out.append((L + "self_attn.o_proj.weight", s.hidden * qd * d))
    out.append((L + "post_attention_layernorm.weight", s.hidden * d))
    return out


def _expert(prefix: str, s: ModelShape) -> list[tuple[str, int]]:
    nb = s.hidden * s.moe_intermediate * s.dtype_bytes
    return [(f"{prefix}.{p}_proj.weight", nb) for p in ("gate", "up", "down")]


def weight_tensors(shape: ModelShape, order: str = "declaration") -> list[tuple[str, int]]:
    """Every weight tensor as ``(name, bytes)`` (Hugging Face names) in ``order``.

    For a dense model both orders are ``_tensors()`` of ``model/workloads_llm.py``: the forward
    pass. An MoE layer (past the leading ``dense_layers``) declares its router, shared
    experts and experts ``0..E-1`` (gate, up, down each); executed, the router and shared
    experts come first, then every expert's gate and up, then every expert's down.
    """
    _check_shape(shape)
    if order not in LAYOUTS:
        raise LayoutError(f"layout must be one of {', '.join(LAYOUTS)}, not {order!r}")
    s, d = shape, shape.dtype_bytes
    out = [("model.embed_tokens.weight", s.vocab * s.hidden * d)]
    for i in range(s.layers):
        L = f"model.layers.{i}."
        out += attention_tensors(s, L)
        if not s.is_moe or i < s.dense_layers:
            out += [(L + "mlp.gate_proj.weight", s.intermediate * s.hidden * d),
                    (L + "mlp.up_proj.weight", s.intermediate * s.hidden * d),
                    (L + "mlp.down_proj.weight", s.hidden * s.intermediate * d)]
            continue
        out.append((L + "mlp.gate.weight", s.experts * s.hidden * d))
        for k in range(s.shared_experts):
            out += _expert(f"{L}mlp.shared_experts.{k}", s)
        experts = [_expert(f"{L}mlp.experts.{e}", s) for e in range(s.experts)]
        if order == "declaration":
            out += [t for ex in experts for t in ex]
        else:
            out += [t for ex in experts for t in ex[:2]] + [ex[2] for ex in experts]
    out.append(("model.norm.weight", s.hidden * d))
    if not s.tied_embeddings:
        out.append(("lm_head.weight", s.vocab * s.hidden * d))
    return out


# ============================================================================ layouts
@dataclass
class WeightLayout:
    """Where each weight tensor lives: byte ranges of a stream mapped to logical pages.

    Members
    -------
    name : str
        ``declaration`` or ``execution``.
    tensors : dict
        ``name -> (stream offset, bytes)``; the stream is the tensors in the layout's order,
        each aligned to ``align`` bytes.
    planes : PlaneMap
    stream_bytes : int
        End of the last tensor in the stream.
    """

    name: str
    tensors: dict
    planes: PlaneMap
    stream_bytes: int

    def page(self, k: int) -> int:
        """Logical page of stream page ``k``: ``k`` itself in declaration order, megapage
        ``k div M``'s page ``k mod M`` in execution order."""
        if self.name == "declaration":
            if k >= self.planes.cfg.pages:
                raise LayoutError(f"the layout needs page {k:,}, beyond the "
                                  f"{self.planes.cfg.pages:,} pages of capacity_bytes "
                                  f"{self.planes.cfg.capacity_bytes}")
            return k
        m = self.planes.m
        return self.planes.megapage(k // m)[k % m]

    def pages(self, name: str, offset: int = 0, nbytes: int | None = None) -> list[int]:
        """Logical pages holding bytes ``[offset, offset + nbytes)`` of tensor ``name``."""
        start, size = self.tensors[name]
        nbytes = size - offset if nbytes is None else nbytes
        first = (start + offset) // PAGE_BYTES
        last = (start + offset + nbytes - 1) // PAGE_BYTES
        return [self.page(k) for k in range(first, last + 1)]


def weight_layout(cfg: HbfConfig, shape: ModelShape, layout: str = "execution",
                  align: int = 256) -> WeightLayout:
    """Place every weight tensor of ``shape`` in the HBF address space of ``cfg``.

    Parameters
    ----------
    layout : str
        ``declaration`` or ``execution`` (module docstring).
    align : int
        Byte alignment of each tensor in the stream: a power of two >= 32.
    """
    if align < 32 or align & (align - 1):
        raise LayoutError(f"align must be a power of two >= 32, not {align!r}")
    tensors, off = {}, 0
    for name, nb in weight_tensors(shape, layout):
        off = -(-off // align) * align
        tensors[name] = (off, nb)
        off += nb
    lay = WeightLayout(layout, tensors, PlaneMap(cfg), off)
    lay.page(-(-off // PAGE_BYTES) - 1)  # the whole stream fits (raises otherwise)
    return lay


# ============================================================================ a decode step
def touched_experts(shape: ModelShape, batch: int, seed: int = 0) -> dict[int, list[int]]:
    """Experts each MoE layer's ``batch`` tokens route to: every token picks
    ``active_experts`` distinct experts uniformly at random (``seed``). Uniform routing is
    our assumption; real routers are skewed, which only adds stragglers."""
    rng = random.Random(seed)
    out = {}
    for i in range(shape.dense_layers, shape.layers) if shape.is_moe else ():
        hit = set()
        for _ in range(batch):
            hit.update(rng.sample(range(shape.experts), shape.active_experts))
        out[i] = sorted(hit)
    return out


def decode_phases(shape: ModelShape, touched: dict[int, list[int]],
                  token_id: int = 0) -> list[tuple[str, list[tuple[str, int, int | None]]]]:
    """The weight reads of one decode step, kernel by kernel, in execution order.

    Returns ``[(kernel, [(tensor, byte offset, bytes or None = to its end), ...]), ...]``:
    the embedding row of ``token_id``; per layer the input norm, q/k/v, the q/k norms, o,
    the post-attention norm, then the dense MLP's gate, up and down, or the router, the
    shared experts, the gate and up of the ``touched`` experts (one grouped GEMM) and their
    down projections; the final norm and the LM head.
    """
    _check_shape(shape)
    s = shape
    row = s.hidden * s.dtype_bytes
    out = [("embed", [("model.embed_tokens.weight", token_id * row, row)])]
    for i in range(s.layers):
        L = f"model.layers.{i}."
        att = [n for n, _ in attention_tensors(s, L)]
        out.append((L + "input_layernorm", [(att[0], 0, None)]))
        for name in att[1:]:
            if name.endswith(".bias"):
                continue
            k = [(name, 0, None)]
            bias = name[:-len("weight")] + "bias"
            if bias in att:
                k.append((bias, 0, None))
            out.append((name[:-len(".weight")], k))
        if not s.is_moe or i < s.dense_layers:
            for p in ("gate", "up", "down"):
                out.append((f"{L}mlp.{p}_proj", [(f"{L}mlp.{p}_proj.weight", 0, None)]))
            continue
        out.append((L + "mlp.gate", [(L + "mlp.gate.weight", 0, None)]))
        for k in range(s.shared_experts):
            out.append((f"{L}mlp.shared_experts.{k}",
                        [(f"{L}mlp.shared_experts.{k}.{p}_proj.weight", 0, None)
                         for p in ("gate", "up", "down")]))
        ex = touched.get(i, [])
        out.append((L + "mlp.experts.gate_up",
                    [(f"{L}mlp.experts.{e}.{p}_proj.weight", 0, None)
                     for e in ex for p in ("gate", "up")]))
        out.append((L + "mlp.experts.down",
                    [(f"{L}mlp.experts.{e}.down_proj.weight", 0, None) for e in ex]))
    out.append(("model.norm", [("model.norm.weight", 0, None)]))
    head = "model.embed_tokens.weight" if s.tied_embeddings else "lm_head.weight"
    out.append(("lm_head", [(head, 0, None)]))
    return [(k, r) for k, r in out if r]


# ============================================================================ KV
@dataclass
class KvLayout:
    """Per-request KV blocks: per-layer slices of ``slice_tokens`` tokens, each slice at the
    start of its own megapage, every request in flash blocks of its own (FlashAccel: "aligns
    each per-layer slice of N tokens to a megapage, and gives each Flash block to exactly
    one request so eviction is an erase, not a migrate").

    A request owns whole megablocks: ``pages_per_block`` consecutive rows of one megaplane,
    the rows a plane's erase block holds when its pages are programmed in row order (W5).
    Its slices fill them megapage by megapage, round-robin over the megaplanes as weights
    do; evicting the request frees exactly its megablocks. The region starts at ``first_row``
    (above the weights).

    Parameters
    ----------
    cfg : HbfConfig
    shape : ModelShape
        Gives the K/V bytes of one token of one layer.
    slice_tokens : int
        N: tokens per per-layer slice (their K/V must fit one megapage).
    max_tokens : int
        Tokens reserved per request.
    first_row : int
        First hyperpage row of the KV region; a multiple of ``pages_per_block``.
    """

    cfg: HbfConfig
    shape: ModelShape
    slice_tokens: int
    max_tokens: int
    first_row: int = 0

    def __post_init__(self):
        self.planes = PlaneMap(self.cfg)
        ppb = self.cfg.pages_per_block
        s = self.shape
        self.token_bytes = 2 * s.kv_heads * s.head_dim * s.kv_dtype_bytes
        self.megapage_bytes = self.planes.m * PAGE_BYTES
        for name, v in (("slice_tokens", self.slice_tokens), ("max_tokens", self.max_tokens)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayoutError(f"{name} must be a positive integer, not {v!r}")
        if self.slice_tokens * self.token_bytes > self.megapage_bytes:
            raise LayoutError(f"slice_tokens {self.slice_tokens} x {self.token_bytes} B of K/V "
                              f"exceeds a megapage ({self.megapage_bytes} B)")
        if self.first_row % ppb:
            raise LayoutError(f"first_row must be a multiple of pages_per_block ({ppb}), not "
                              f"{self.first_row!r}")
        slices = -(-self.max_tokens // self.slice_tokens) * s.layers
        self.megapages_per_request = slices
        # whole megablocks: ppb megapages each, on one megaplane
        self.megablocks_per_request = -(-slices // ppb)

    def _megablock(self, request: int, k: int) -> tuple[int, int]:
        """(megaplane, first row) of the request's ``k``-th megablock."""
        n = request * self.megablocks_per_request + k
        K = self.planes.megaplanes
        return n % K, self.first_row + (n // K) * self.cfg.pages_per_block

    def slice_pages(self, request: int, layer: int, token: int) -> list[int]:
        """Logical pages of the megapage holding ``token``'s slice of ``layer``."""
        j = layer * -(-self.max_tokens // self.slice_tokens) + token // self.slice_tokens
        ppb = self.cfg.pages_per_block
        # megapage j of the request: megablock (j mod blocks) so consecutive slices stripe
        # over the request's megablocks (and so over megaplanes), row j div blocks in it
        nb = self.megablocks_per_request
        mp, row0 = self._megablock(request, j % nb)
        row = row0 + j // nb
        assert row < row0 + ppb
        st, ch, g = self.planes.order[mp]
        first = row * self.planes.subarrays + g * self.planes.m
        return [self.planes.page_at(st, ch, first + i) for i in range(self.planes.m)]

    def address(self, request: int, layer: int, token: int) -> int:
        """Byte address of ``token``'s K/V in ``layer`` for ``request``."""
        off = (token % self.slice_tokens) * self.token_bytes
        pages = self.slice_pages(request, layer, token)
        return self.cfg.base_address + pages[off // PAGE_BYTES] * PAGE_BYTES + off % PAGE_BYTES

    def blocks(self, request: int) -> set[tuple[int, int]]:
        """The (plane, erase-block row index) pairs the request owns."""
        out = set()
        ppb = self.cfg.pages_per_block
        for k in range(self.megablocks_per_request):
            mp, row0 = self._megablock(request, k)
            st, ch, g = self.planes.order[mp]
            first = (st * self.planes.channels + ch) * self.planes.subarrays + g * self.planes.m
            for i in range(self.planes.m):
                out.add((first + i, row0 // ppb))
        return out
