"""The three GPUs of the FlashAccel study: an H200, CSI and CLI (FlashAccel paper, study
section; docs/flashaccel.md, "The study").

* ``baseline``: an H200, 141 GB HBM3e at 4.8 TB/s (NVIDIA's datasheet, the paper's
  baseline), read as 6 HBM3e stacks of 23.5 GB at 0.8 TB/s.
* ``csi``: cascaded integration, 6 FlashAccel stacks beside the 6 HBM3e stacks.
* ``cli``: co-located integration, 5 FlashAccel stacks replacing HBM; one HBM3e stack kept.

A FlashAccel stack's capacity is the ``flashaccel`` profile's (192 GiB), its read and write
timing the golden model's (serve/flashaccel/efficiency.py, writeback.py). Energy figures
are the paper's: HBF reads 8 pJ/bit, 2.68x HBM3e's (so HBM3e 2.99 pJ/bit); the power a GPU
draws beside the memory traffic is its TDP, 700 W for the H200 (NVIDIA's datasheet), x1.31
for CSI and x1.23 for CLI (the paper's TDP ratios).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPUS", "GpuMemory", "H200_TDP_W", "HBF_PJ_PER_BIT", "HBM_PJ_PER_BIT"]

#: The FlashAccel paper: HBF read energy 8 pJ/bit, 2.68x HBM3e.
HBF_PJ_PER_BIT = 8.0
HBM_PJ_PER_BIT = 8.0 / 2.68
#: NVIDIA H200 SXM TDP.
H200_TDP_W = 700.0
#: H200 HBM3e: 141 GB at 4.8 TB/s over 6 stacks.
HBM_STACK_BYTES = 141e9 / 6
HBM_STACK_BW = 4.8e12 / 6
#: HBM startup latency (the FlashAccel paper: "roughly 100ns for HBM").
HBM_LATENCY_S = 100e-9


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory: HBM3e stacks and FlashAccel stacks, and its power.

    Members
    -------
    name : str
    hbm_stacks, hbf_stacks : int
    tdp_w : float
        Power drawn whatever the traffic (the GPU's TDP).
    """

    name: str
    hbm_stacks: int
    hbf_stacks: int
    tdp_w: float

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_stacks * HBM_STACK_BYTES

    @property
    def hbm_bw(self) -> float:
        return self.hbm_stacks * HBM_STACK_BW


GPUS = {
    "baseline": GpuMemory("baseline", 6, 0, H200_TDP_W),
    "csi": GpuMemory("csi", 6, 6, 1.31 * H200_TDP_W),
    "cli": GpuMemory("cli", 1, 5, 1.23 * H200_TDP_W),
}
