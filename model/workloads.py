"""Named workloads: the source's microbenchmarks and an LLM decode step, as GPU programs.

Each registered workload is a function ``f(cfg=None, **params)`` returning a
:class:`~hbfsim.model.gpu.GpuProgram` (closed loop) or, for a pure device stream, a
:class:`DeviceStream` (requests with fixed arrival ticks). Both carry ``name``, ``params``,
``config`` (the HBF configuration overrides of the source study the workload comes from;
informational, never applied implicitly), ``gpu`` and ``expected`` (counts the workload
generates). Everything is generated lazily and deterministically; random parts take a
``seed``. Sources: the HBF-Sim paper §5.1-§5.5 and §6; sources.md §figures and §6;
docs/gpu.md lists every parameter.

This module is the registry (:data:`WORKLOADS`, :func:`get_workload`) and the public entry
point; the workloads live in one file per family and are re-exported here:

* :mod:`.workloads_micro` - the source's microbenchmarks (§5.1-§5.4, §6.1, §6.2).
* :mod:`.workloads_llm` - one decode step of a dense transformer (§5.5) and its layout
  and request counts.
* :mod:`.workloads_layout` - one MoE decode step under a FlashAccel weight layout.
* :mod:`.workloads_common` - :class:`DeviceStream` and the helpers they share.
"""

from __future__ import annotations

from typing import Callable

from hbfsim.config import HbfConfig
from hbfsim.model.gpu_config import GpuError
from hbfsim.model.workloads_common import DeviceStream
from hbfsim.model.workloads_layout import LAYOUT_GEOMETRY as LAYOUT_GEOMETRY
from hbfsim.model.workloads_layout import layout_decode
from hbfsim.model.workloads_llm import decode_counts, decode_layout, llm_decode, model_shape
from hbfsim.model.workloads_micro import PLACEMENTS as PLACEMENTS
from hbfsim.model.workloads_micro import (burst_page_service, conservation, media_saturation,
                                          mshr_grid, placement, placement_map, rw_isolation,
                                          shared_staging)
# The LLM shapes live in hbfsim/shapes.py (shared with the serving level); re-exported here.
from hbfsim.shapes import DTYPE_BYTES as _DTYPES  # noqa: F401  (the old name)
from hbfsim.shapes import MODEL_PRESETS, ModelShape

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
