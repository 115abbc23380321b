"""The serving node: GPUs, their memory tiers (HBM, HBF, host DRAM, host SSD) and interconnect.

Per-stack memory figures come from the serving paper's Table 1; GPU compute figures
from NVIDIA's published H100 / H200 SXM datasheets; host and interconnect figures are stated
assumptions (the source gives none). Both packaging architectures of the source's Figure 2:

- ``shared``: HBM and HBF stacks divide ``SITES`` (8) stack sites of a GPU (8+0, 6+2, 4+4, ...);
  each stack has its own link to the GPU, so HBM and HBF transfers proceed in parallel.
- ``beside``: every stack has a site and a link of its own, with no shared budget of sites
  (FlashAccel's CSI, "cascaded integration": 6 FlashAccel stacks beside an H200's 6 HBM3e
  stacks; at most ``BESIDE_SITES`` (16) stacks). Timing as ``shared``: HBM and HBF transfers
  proceed in parallel.
- ``h3``: HBF stacks sit *behind* HBM stacks (8+8 at most: one HBF stack behind each HBM
  stack); HBF data reaches the GPU through the HBM stacks' links, so HBM and HBF bytes of one
  operator share the HBM link bandwidth. A latency-hiding buffer on the HBF read path (its
  Figure 3) prefetches *streaming* reads (weights: addresses known in advance): it hides the
  HBF read startup latency of every streaming transfer of an iteration except the first. It
  does not hide KV-block reads (``kv`` pattern), writes, or any bandwidth limit.
  See docs/serving.md, "Hardware".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hbfsim.serve.tier_timing import TABLE1_HBF, TABLE1_HBM, TierTiming

__all__ = ["SITES", "BESIDE_SITES", "PACKAGINGS", "HBM_STACKS", "GPU_PRESETS", "GpuSpec",
           "MemoryTier", "Interconnect", "Node", "check_packaging", "make_node", "hbm_tier",
           "hbf_tier"]

#: Stack sites around one GPU (the serving paper's Figure 2).
SITES = 8
#: Most stacks of the ``beside`` packaging (FlashAccel's CSI has 12; an assumption beyond).
BESIDE_SITES = 16
PACKAGINGS = ("shared", "beside", "h3")


def _pos(name, v, allow_zero=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or v < 0 or (v == 0 and not allow_zero):
        need = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{name} must be {need} finite number, not {v!r}")
    return v


@dataclass(frozen=True)
class GpuSpec:
    """Compute figures of one accelerator.

    Members
    -------
    name : str
    flops : dict
        Dense peak FLOP/s by dtype (``"bf16"``, ``"fp8"``).
    sms : int
        Streaming multiprocessors (informational).
    published_hbm_bytes, published_hbm_bw : float
        The product's own HBM (informational only: in hbfsim the GPU's memory is the stacks
        the node gives it, Table 1 per stack).
    source : str
    """

    name: str
    flops: dict
    sms: int
    published_hbm_bytes: float
    published_hbm_bw: float
    source: str

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``."""
        if dtype not in self.flops:
            raise ValueError(f"dtype must be one of {', '.join(self.flops)}, not {dtype!r}")
        return self.flops[dtype]


GPU_PRESETS = {
    # NVIDIA H100 SXM5 datasheet: 989.4 TFLOP/s dense BF16, 1,978.9 dense FP8 (the sparse
    # figures are twice these), 132 SMs, 80 GB HBM3 at 3.35 TB/s.
    "h100": GpuSpec("h100", {"bf16": 989.4e12, "fp8": 1978.9e12}, 132, 80e9, 3.35e12,
                    "NVIDIA H100 SXM5 datasheet (dense tensor-core peaks)"),
    # NVIDIA H200 SXM datasheet: same tensor cores as H100 SXM; 141 GB HBM3e at 4.8 TB/s.
    "h200": GpuSpec("h200", {"bf16": 989.4e12, "fp8": 1978.9e12}, 132, 141e9, 4.8e12,
                    "NVIDIA H200 SXM datasheet (dense tensor-core peaks)"),
}


@dataclass(frozen=True)
class MemoryTier:
    """One memory tier of one GPU: ``stacks`` identical stacks (or devices), data striped.

    Members
    -------
    name : str
        ``"hbm"``, ``"hbf"``, ``"dram"`` or ``"ssd"``.
    stacks : int
        Stacks (devices) the tier's data is striped over; 0 = the tier is absent.
    stack_bytes : float
        Capacity of one stack, bytes (decimal GB as in Table 1).
    timing : TierTiming
        Per-stack timing (bandwidth, startup latency).
    read_pj_per_bit, write_pj_per_bit : float
        Energy per bit moved (the serving paper's Table 1 gives read energy; write energy
        is an assumption).
    pe_cycles : int or None
        Program/erase endurance (flash only).
    """

    name: str
    stacks: int
    stack_bytes: float
    timing: TierTiming
    read_pj_per_bit: float
    write_pj_per_bit: float
    pe_cycles: int | None = None

    def __post_init__(self):
        if isinstance(self.stacks, bool) or not isinstance(self.stacks, int) or self.stacks < 0:
            raise ValueError(f"{self.name} stacks must be a non-negative integer, "
                             f"not {self.stacks!r}")
        _pos(f"{self.name} stack_bytes", self.stack_bytes)
        _pos(f"{self.name} read_pj_per_bit", self.read_pj_per_bit, allow_zero=True)
        _pos(f"{self.name} write_pj_per_bit", self.write_pj_per_bit, allow_zero=True)

    @property
    def capacity(self) -> float:
        """Bytes over all stacks."""
        return self.stacks * self.stack_bytes

    @property
    def read_bw(self) -> float:
        """Aggregate streaming read bandwidth, bytes/s (all stacks in parallel)."""
        return self.stacks * self.timing.read_bw

    @property
    def write_bw(self) -> float:
        """Aggregate write bandwidth, bytes/s."""
        return self.stacks * self.timing.write_bw

    @property
    def kv_read_bw(self) -> float:
        """Aggregate read bandwidth for KV-block reads, bytes/s."""
        bw = self.timing.kv_read_bw if self.timing.kv_read_bw is not None else \
            self.timing.read_bw
        return self.stacks * bw

    @property
    def kv_read_latency_s(self) -> float:
        t = self.timing
        return t.read_latency_s if t.kv_read_latency_s is None else t.kv_read_latency_s


#: HBM3e of an H200 as FlashAccel reads it: 141 GB at 4.8 TB/s over 6 stacks (NVIDIA's H200
#: datasheet), 100 ns startup (the FlashAccel paper: "roughly 100ns for HBM"), and 8 / 2.68
#: pJ/bit (the FlashAccel paper: HBF reads at 8 pJ/bit, 2.68x HBM3e); writes at the read cost.
HBM3E_TIMING = TierTiming("hbm3e-h200", read_bw=4.8e12 / 6, read_latency_s=100e-9,
                          write_bw=4.8e12 / 6, write_latency_s=100e-9,
                          source="NVIDIA H200 datasheet / 6 stacks; the FlashAccel paper")
#: HBM3 of an H100 SXM5: 80 GB at 3.35 TB/s over its 5 active stacks (NVIDIA's H100
#: datasheet), 100 ns startup as HBM3e; energy as Table 1's HBM (3.4 pJ/bit, an assumption).
HBM3_TIMING = TierTiming("hbm3-h100", read_bw=3.35e12 / 5, read_latency_s=100e-9,
                         write_bw=3.35e12 / 5, write_latency_s=100e-9,
                         source="NVIDIA H100 SXM5 datasheet / 5 stacks")
#: HBM stack presets: ``(capacity bytes, timing, pJ/bit)``.
HBM_STACKS = {
    "table1": (24e9, TABLE1_HBM, 3.4),
    "hbm3": (80e9 / 5, HBM3_TIMING, 3.4),
    "hbm3e": (141e9 / 6, HBM3E_TIMING, 8.0 / 2.68),
}


def hbm_tier(stacks: int, timing: TierTiming | None = None,
             stack: str = "table1") -> MemoryTier:
    """HBM stacks of preset ``stack``: ``table1``, the serving paper's Table 1 (24 GB,
    1,000 GB/s, 0.1 us, 3.4 pJ/bit read), ``hbm3``, an H100 SXM5's (:data:`HBM3_TIMING`; 5
    stacks make its 80 GB), or ``hbm3e``, an H200's (:data:`HBM3E_TIMING`; 6 stacks).
    ``timing`` replaces the preset's timing; writes are assumed at the read cost."""
    if stack not in HBM_STACKS:
        raise ValueError(f"hbm stack must be one of {', '.join(HBM_STACKS)}, not {stack!r}")
    nbytes, t, pj = HBM_STACKS[stack]
    return MemoryTier("hbm", stacks, nbytes, timing or t, pj, pj)


#: HBF stack capacity of the serving paper's Table 1 (decimal GB).
TABLE1_HBF_STACK_BYTES = 375e9


def hbf_tier(stacks: int, timing: TierTiming = TABLE1_HBF,
             stack_bytes: float = TABLE1_HBF_STACK_BYTES) -> MemoryTier:
    """HBF stacks per the serving paper's Table 1: 375 GB, 6.8 pJ/bit read, 100,000 P/E (SLC).

    ``stack_bytes`` replaces Table 1's capacity when the stack is the characterized
    ``HbfConfig`` (its ``capacity_bytes`` per stack), so that device timing and device
    capacity describe the same stack. Write energy is not in Table 1; we assume the read
    figure (the source notes that HBF write traffic is marginal, so modeled energy is
    insensitive to it)."""
    return MemoryTier("hbf", stacks, stack_bytes, timing, 6.8, 6.8, pe_cycles=100_000)


# Host tiers, per GPU (assumptions; the source gives no host figures). An 8-GPU HGX-class
# server has ~2 TB DRAM and one NVMe drive per GPU; every host transfer crosses the GPU's PCIe
# Gen5 x16 link (64 GB/s raw per direction, ~50 GB/s achieved).
HOST_LINK_BW = 50e9
HOST_LINK_LATENCY_S = 5e-6
# DDR5 access plus the PCIe transfer, ~20 pJ/bit together (order of magnitude).
DRAM_PJ_PER_BIT = 20.0
# An NVMe drive draws ~25 W at ~7 GB/s: ~450 pJ/bit including the link.
SSD_PJ_PER_BIT = 450.0


def host_dram_tier(bytes_per_gpu: float = 250e9) -> MemoryTier:
    """Host DRAM share of one GPU, reached over PCIe (bandwidth = the link's)."""
    t = TierTiming("host-dram", read_bw=HOST_LINK_BW, read_latency_s=HOST_LINK_LATENCY_S,
                   write_bw=HOST_LINK_BW, write_latency_s=HOST_LINK_LATENCY_S,
                   source="assumption: PCIe Gen5 x16, ~50 GB/s achieved, 5 us")
    return MemoryTier("dram", 1 if bytes_per_gpu > 0 else 0, max(bytes_per_gpu, 1.0), t,
                      DRAM_PJ_PER_BIT, DRAM_PJ_PER_BIT)


def host_ssd_tier(bytes_per_gpu: float = 3.84e12) -> MemoryTier:
    """One NVMe drive per GPU (7 GB/s read, 4 GB/s write, 80 us; datacenter Gen4 class)."""
    t = TierTiming("host-ssd", read_bw=7e9, read_latency_s=80e-6, write_bw=4e9,
                   write_latency_s=20e-6, source="assumption: datacenter NVMe Gen4 drive")
    return MemoryTier("ssd", 1 if bytes_per_gpu > 0 else 0, max(bytes_per_gpu, 1.0), t,
                      SSD_PJ_PER_BIT, SSD_PJ_PER_BIT)


@dataclass(frozen=True)
class Interconnect:
    """GPU-to-GPU links for TP / EP collectives.

    Members
    -------
    bw : float
        Per-GPU unidirectional bandwidth, bytes/s (NVLink 4: 900 GB/s bidirectional).
    latency_s : float
        Per-hop startup latency of one collective step (assumption: 2 us).
    pj_per_bit : float
        Energy per bit crossing the link (assumption: ~1.3 pJ/bit, NVLink-class SerDes).
    """

    bw: float = 450e9
    latency_s: float = 2e-6
    pj_per_bit: float = 1.3


def check_packaging(hbm: int, hbf: int, packaging: str) -> None:
    """Raise ValueError unless ``hbm`` + ``hbf`` stacks fit ``packaging`` (the serving
    paper's Figure 2: 8 shared sites, or H3's one HBF stack behind each HBM stack; or a site
    per stack, ``beside``)."""
    if packaging not in PACKAGINGS:
        raise ValueError(f"packaging must be one of {', '.join(PACKAGINGS)}, not {packaging!r}")
    if hbm < 1:
        raise ValueError(f"hbm stacks must be at least 1 (activations live in HBM), not {hbm}")
    if packaging == "shared" and hbm + hbf > SITES:
        raise ValueError(f"shared-site packaging divides {SITES} sites: hbm + hbf stacks "
                         f"must be <= {SITES}, not {hbm} + {hbf} (beside: a site per stack)")
    if packaging == "beside" and hbm + hbf > BESIDE_SITES:
        raise ValueError(f"beside packaging gives every stack its own site, at most "
                         f"{BESIDE_SITES}: hbm + hbf stacks must be <= {BESIDE_SITES}, "
                         f"not {hbm} + {hbf}")
    if packaging == "h3" and (hbm > SITES or hbf > hbm):
        raise ValueError(f"h3 packaging puts one HBF stack behind each HBM stack: hbm <= "
                         f"{SITES} and hbf <= hbm, not {hbm} + {hbf}")


@dataclass(frozen=True)
class Node:
    """N GPUs with identical memory; the unit a serving run is placed on.

    Members
    -------
    gpu : GpuSpec
    gpus : int
    hbm, hbf, dram, ssd : MemoryTier
        Per-GPU tiers (``hbf.stacks == 0``: no HBF).
    packaging : str
        ``"shared"``, ``"beside"`` or ``"h3"`` (module docstring).
    link : Interconnect
    """

    gpu: GpuSpec
    gpus: int
    hbm: MemoryTier
    hbf: MemoryTier
    dram: MemoryTier
    ssd: MemoryTier
    packaging: str = "shared"
    link: Interconnect = field(default_factory=Interconnect)

    def __post_init__(self):
        if self.packaging not in PACKAGINGS:
            raise ValueError(f"packaging must be one of {', '.join(PACKAGINGS)}, "
                             f"not {self.packaging!r}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise ValueError(f"gpus must be a positive integer, not {self.gpus!r}")
        check_packaging(self.hbm.stacks, self.hbf.stacks, self.packaging)

    @property
    def label(self) -> str:
        """``"4+4 shared"``-style name (``"6+6 beside, hbm3e"`` with H200 HBM3e stacks)."""
        extra = {HBM3E_TIMING.name: ", hbm3e", HBM3_TIMING.name: ", hbm3"}.get(
            self.hbm.timing.name, "")
        return f"{self.hbm.stacks}+{self.hbf.stacks} {self.packaging}{extra}"


def make_node(gpu: str = "h100", gpus: int = 1, hbm_stacks: int = 8, hbf_stacks: int = 0,
              packaging: str = "shared", hbf_timing: TierTiming = TABLE1_HBF,
              hbm_timing: TierTiming | None = None, dram_bytes_per_gpu: float = 250e9,
              ssd_bytes_per_gpu: float = 3.84e12,
              link: Interconnect | None = None,
              hbf_stack_bytes: float = TABLE1_HBF_STACK_BYTES,
              hbm_stack: str = "table1") -> Node:
    """Build a :class:`Node` from preset names and stack counts (validated)."""
    if gpu not in GPU_PRESETS:
        raise ValueError(f"gpu must be one of {', '.join(GPU_PRESETS)}, not {gpu!r}")
    return Node(GPU_PRESETS[gpu], gpus, hbm_tier(hbm_stacks, hbm_timing, hbm_stack),
                hbf_tier(hbf_stacks, hbf_timing, hbf_stack_bytes),
                host_dram_tier(dram_bytes_per_gpu),
                host_ssd_tier(ssd_bytes_per_gpu), packaging, link or Interconnect())
