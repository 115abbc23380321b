"""The HBF read bandwidth a FlashAccel GPU achieves, from the device model (docs/flashaccel.md,
"The study: the bandwidth chain").

1. **Stack**: the device model's characterization of one ``flashaccel`` stack
   (serve/characterize.py, on the configuration's engine): the streaming read bandwidth and
   startup latency, and the ``kv`` pattern's (scattered 64 KiB blocks) bandwidth.
2. **Weight layout**: the fraction of the stack's bandwidth one decode step's weight kernels
   keep, from the per-plane loads of ``layout-decode`` (model/workloads.py) on the scaled
   FlashAccel geometry: ``sum(pages) / sum(planes x most pages on one plane)`` over the
   step's kernels (each lasts its most loaded plane's pages x tR: tests/model/test_layout.py
   checks that on runs). ``execution`` order with straggler replication (model/replication.py)
   when the layout is on; ``declaration`` order, no replication, when it is off. MLA models
   are refused by the layouts; they take the figure of the GQA MoE stand-in (stated).
3. **KV layout**: on, KV slices are megapage aligned and striped (model/layout.py
   ``KvLayout``) and stragglers are replicated, so KV reads stream: the streaming bandwidth
   times the replication balance of the live requests' slices; off, KV blocks are scattered
   and read at the characterization's ``kv`` bandwidth.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from hbfsim.config import load_config
from hbfsim.model.layout import KvLayout, PlaneMap
from hbfsim.model.replication import plan_kernel
from hbfsim.model.workloads import LAYOUT_GEOMETRY, layout_decode
from hbfsim.shapes import model_shape

__all__ = ["GQA_STAND_IN", "PROFILE", "kv_balance", "stack_timing", "weight_balance"]

#: The HbfConfig profile of one FlashAccel stack.
PROFILE = "flashaccel"
#: The model whose layout figures an MLA model takes (the layouts place GQA tensors only).
GQA_STAND_IN = "qwen3-235b-a22b"
#: Scale of the layout computation (the scaled geometry keeps FlashAccel's 2/3 arithmetic).
SCALE = 8


def stack_timing(cache: bool = True, engine: str | None = None):
    """The characterized ``flashaccel`` stack (a :class:`~hbfsim.serve.tier_timing.TierTiming`)
    and its configuration, whose ``engine`` key is ``engine`` when given (``compiled`` or
    ``reference``; the profile's default otherwise): the engine the characterization runs on
    and that the configuration's further device runs take."""
    from hbfsim.serve.characterize import characterize

    cfg = load_config(profile=PROFILE, **({} if engine is None else {"engine": engine}))
    return characterize(cfg, cache=cache, same_engine=engine is not None), cfg


def _bucket(batch: int) -> int:
    """Batches are evaluated at powers of two (the routing's touched experts saturate)."""
    b = 1
    while b < batch and b < 256:
        b *= 2
    return b


@lru_cache(maxsize=None)
def _weight_balance(model: str, layout: str, replicate: bool, batch: int) -> float:
    from hbfsim.model.replication import replicate_program

    cfg = load_config(base=LAYOUT_GEOMETRY)
    prog = layout_decode(cfg, model=model, scale=SCALE, layout=layout, batch=batch)
    planes = prog.expected["planes"]
    if replicate:
        plans = replicate_program(cfg, prog).expected["replication"]
        pages = sum(p["hbf_pages"] for p in plans)
        slots = sum(planes * p["max_plane_pages_after"] for p in plans)
    else:
        ks = prog.expected["kernels"]
        pages = sum(k["pages"] for k in ks)
        slots = sum(planes * k["max_plane_pages"] for k in ks)
    return pages / slots


def weight_balance(model: str, layout_on: bool, batch: int) -> float:
    """Fraction of the planes' bandwidth a decode step's weight reads keep (step 2)."""
    shape = model_shape(model)
    name = GQA_STAND_IN if shape.is_mla else shape.name
    return _weight_balance(name, "execution" if layout_on else "declaration", layout_on,
                           _bucket(batch))


@lru_cache(maxsize=None)
def _kv_balance(model: str, requests: int, context: int, slice_tokens: int) -> float:
    cfg = load_config(base=LAYOUT_GEOMETRY, pages_per_block=4)
    shape = model_shape(model)
    shape = dataclasses.replace(shape.scaled(SCALE), layers=2)
    kv = KvLayout(cfg, shape, slice_tokens=slice_tokens, max_tokens=context)
    pm = PlaneMap(cfg)
    pages, kept, slots = 0, 0, 0
    for layer in range(shape.layers):
        read = [p for r in range(requests) for t in range(0, context, slice_tokens)
                for p in kv.slice_pages(r, layer, t)]
        plan = plan_kernel(pm, read)
        pages += len(read)
        kept += len(plan.hbf_pages)
        slots += pm.planes * plan.max_plane_after
    return kept / slots


def kv_balance(model: str, requests: int = 8, context: int = 256) -> float:
    """Fraction of the planes' bandwidth one layer's KV reads keep with the KV layout and
    replication (step 3), from ``KvLayout`` addresses of ``requests`` live requests of
    ``context`` tokens on the scaled geometry (16-token slices)."""
    shape = model_shape(model)
    name = GQA_STAND_IN if shape.is_mla else shape.name
    return _kv_balance(name, requests, context, 16)
