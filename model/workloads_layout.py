"""One MoE decode step's weight reads under a FlashAccel weight layout
(:func:`layout_decode`, docs/flashaccel.md).

The weights are placed by :func:`hbfsim.model.layout.weight_layout` (declaration or
execution order) on a scaled FlashAccel geometry (:data:`LAYOUT_GEOMETRY`), and the step
reads, kernel by kernel, the pages each decode phase touches, one warp per page; a
kernel's span is then set by its most loaded plane. Separate from :mod:`.workloads_llm`
(a dense model's step with sector and line requests, no layout) because it is built on
the plane map and weight layouts of :mod:`hbfsim.model.layout`. Registered and
re-exported by :mod:`hbfsim.model.workloads`.
"""

from __future__ import annotations

from dataclasses import replace

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.gpu_config import GpuConfig, GpuError
from hbfsim.model.gpu_program import GpuProgram, Kernel
from hbfsim.model.workloads_common import _cfg, _nonneg, _one_access_warps, _page_addr, \
    _positive
from hbfsim.model.workloads_llm import model_shape
from hbfsim.shapes import ShapeError

__all__ = ["LAYOUT_GEOMETRY", "layout_decode"]


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
