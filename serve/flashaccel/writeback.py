"""The KV write path of FlashAccel: megablock sets measured on the device model, and the
write volume, time and endurance they imply (FlashAccel paper, write-path paragraph;
docs/flashaccel.md, "KV write-back in megablock sets").

The set order (model/kv_writeback.py ``set_pages``: row by row, every plane once per row)
is programmed on one stack of the configuration by the characterization's ``measure``
(the same device run serve/characterize.py makes, full-page stores, on the configuration's
engine), beside the same number of pages as scattered 64 KiB KV blocks (the
characterization's ``kv`` write pattern, what a write-back without sets issues).
"""

from __future__ import annotations

from dataclasses import dataclass

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.kv_writeback import set_pages
from hbfsim.model.layout import PlaneMap
from hbfsim.serve.characterize import DEFAULT_KV_BLOCK_BYTES, kv_runs, measure

__all__ = ["SetWriteBandwidth", "endurance", "measure_set_writes"]

#: The FlashAccel paper's endurance assumption: 1M P/E (10x SLC's, from shorter retention).
FLASHACCEL_PE = 1_000_000
#: Conventional SLC endurance (the serving paper's Table 1).
SLC_PE = 100_000


@dataclass(frozen=True)
class SetWriteBandwidth:
    """Per-stack write bandwidth, bytes/s, measured on the device model (either engine: the
    same figures).

    Members
    -------
    rows : int
        Hyperpage rows programmed (``rows x planes`` pages).
    set_order_bw, scattered_bw : float
        Bytes over the window, set order and scattered 64 KiB blocks.
    set_order_steady_bw : float
        The set order's steady-state rate (the characterization's ``steady_bw``).
    """

    rows: int
    set_order_bw: float
    scattered_bw: float
    set_order_steady_bw: float


def measure_set_writes(cfg: HbfConfig, rows: int = 4) -> SetWriteBandwidth:
    """Program ``rows`` hyperpage rows of a megablock set on one stack of ``cfg``, and as
    many pages as scattered KV blocks, on ``cfg``'s engine; return both bandwidths."""
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows:
        raise ValueError(f"rows must be a positive integer, not {rows!r}")
    one = cfg.replace(stacks=1)
    pm = PlaneMap(one)
    if rows > one.pages_per_block:
        raise ValueError(f"rows must be at most pages_per_block ({one.pages_per_block}), "
                         f"not {rows}")
    pages = set_pages(pm)[:rows * pm.planes]
    s = measure(one, "W", [(p, PAGE_BYTES) for p in pages])
    k = measure(one, "W", kv_runs(one, len(pages) * PAGE_BYTES, DEFAULT_KV_BLOCK_BYTES))
    return SetWriteBandwidth(rows, s["bytes"] / s["seconds"], k["bytes"] / k["seconds"],
                             s["steady_bw"] or s["bytes"] / s["seconds"])


def endurance(write_bytes_per_s: float, capacity_bytes: float, write_bw: float,
              pe_cycles: int = FLASHACCEL_PE, years: float = 5.0,
              write_amplification: float = 1.0) -> dict:
    """Write figures of one GPU's HBF: the time fraction its write-back takes, the bytes
    written over ``years``, the TBW its capacity offers at ``pe_cycles`` and the life.

    Returns ``write_gb_per_s``, ``program_ms_per_s`` (flash busy programming per second of
    serving), ``write_tax`` (that fraction), ``written_tb`` (over ``years``), ``tbw_tb``
    (``capacity x pe_cycles``), ``life_years`` and ``pe_cycles``.
    """
    for name, v in (("capacity_bytes", capacity_bytes), ("write_bw", write_bw)):
        if not v > 0:
            raise ValueError(f"{name} must be positive, not {v!r}")
    media = write_bytes_per_s * write_amplification
    tbw = capacity_bytes * pe_cycles
    written = media * years * 365.25 * 86400
    return {"write_gb_per_s": write_bytes_per_s / 1e9,
            "program_ms_per_s": 1e3 * media / write_bw, "write_tax": media / write_bw,
            "written_tb": written / 1e12, "tbw_tb": tbw / 1e12, "pe_cycles": pe_cycles,
            "life_years": tbw / media / (365.25 * 86400) if media > 0 else float("inf")}
