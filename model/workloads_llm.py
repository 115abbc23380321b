"""One decode step of a dense transformer with its weights in HBF (the HBF-Sim paper §5.5).

:func:`llm_decode` builds the step as a GPU program, one GEMV kernel per weight read in
the Hugging Face eager forward pass, with optional KV append, KV reads and a RAG gather;
:func:`decode_layout` places the weights, KV cache and RAG store in HBF and
:func:`decode_counts` gives the requests the step generates in closed form.
:func:`model_shape` is :func:`hbfsim.shapes.model_shape` with the workloads' error type.
Separate from the microbenchmarks (:mod:`.workloads_micro`) because its accesses follow
a model's tensor shapes (:mod:`hbfsim.shapes`); the MoE / FlashAccel layout variant is
:mod:`.workloads_layout`. Registered and re-exported by :mod:`hbfsim.model.workloads`.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.gpu_config import GpuConfig, GpuError
from hbfsim.model.gpu_program import GpuProgram, Kernel, Producer
from hbfsim.model.workloads_common import SECTOR, _cfg, _nonneg, _positive
from hbfsim.shapes import ModelShape, ShapeError
from hbfsim.shapes import model_shape as _model_shape

__all__ = ["LineWalk", "decode_counts", "decode_layout", "llm_decode", "model_shape"]


class LineWalk:
    """Warp ``w``'s requests over the concatenated byte ``ranges``: global line ``g``
    belongs to warp ``g mod stride``; each line is split into ``request_bytes`` requests.

    Iterating yields ``(op, addr, nbytes)`` lazily (what a :class:`Producer` consumes);
    :meth:`arrays` gives the same accesses, in the same order, as numpy arrays, for the
    compiled engine's program (hbfsim/engine.py ``program_arrays``), without a Python
    object per access.
    """

    __slots__ = ("op", "ranges", "w", "stride", "line_bytes", "request_bytes")

    def __init__(self, op, ranges, w, stride, line_bytes, request_bytes):
        self.op, self.ranges, self.w, self.stride = op, ranges, w, stride
        self.line_bytes, self.request_bytes = line_bytes, request_bytes

    def __iter__(self):
        op, lb, rb, stride, w = self.op, self.line_bytes, self.request_bytes, self.stride, self.w
        per_line = lb // rb
        g = 0
        for start, nb in self.ranges:
            nlines = -(-nb // lb)
            first = (w - g) % stride
            end = start + nb
            for li in range(first, nlines, stride):
                a = start + li * lb
                for k in range(per_line):
                    s = a + k * rb
                    if s >= end:
                        break
                    yield (op, s, rb if s + rb <= end else end - s)
            g += nlines

    def arrays(self):
        """``(op, addr, nbytes)``: the op (``"R"`` / ``"W"``) and two int64 arrays.

        Every line but a range's last is whole, so the addresses are the lines' starts plus
        the request offsets, with only the last line's requests past the range's end cut
        and only the last request's size short (no mask over every access).
        """
        lb, rb, stride, w = self.line_bytes, self.request_bytes, self.stride, self.w
        per_line = lb // rb
        k = np.arange(per_line, dtype=np.int64) * rb
        addrs, sizes = [], []
        g = 0
        for start, nb in self.ranges:
            nlines = -(-nb // lb)
            end = start + nb
            first = (w - g) % stride
            g += nlines
            if first >= nlines:
                continue
            lines = np.arange(start + first * lb, start + nlines * lb, stride * lb,
                              dtype=np.int64)
            a = (lines[:, None] + k[None, :]).ravel()   # row-major: line by line
            n = a.size
            tail = nb - (nlines - 1) * lb                # bytes in the range's last line
            if (nlines - 1 - first) % stride == 0 and tail < lb:
                n -= per_line - -(-tail // rb)           # its requests at or past end
                a = a[:n]
            s = np.full(n, rb, dtype=np.int64)
            if a[n - 1] + rb > end:
                s[n - 1] = end - a[n - 1]
            addrs.append(a)
            sizes.append(s)
        if not addrs:
            return self.op, np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(addrs) == 1:
            return self.op, addrs[0], sizes[0]
        return self.op, np.concatenate(addrs), np.concatenate(sizes)


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

    def line_walk(op, ranges, w, stride):
        return LineWalk(op, ranges, w, stride, line_bytes, request_bytes)

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
