"""One typed, validated configuration object shared by the golden model, the RTL and the cosim.

The flat keys are a public interface (README "Configuration reference"). Values come from a
named profile, then a TOML file, then explicit overrides; every key is validated and every
error names the key and the offending value (the HBF-Sim paper §4.4, "We expose
configuration parameters ...").
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, fields
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

__all__ = [
    "MAX_TICK",
    "PAGE_BYTES",
    "PROFILES",
    "SCHEDULERS",
    "ConfigError",
    "HbfConfig",
    "geometry_capacity",
    "geometry_unit",
    "load_config",
]

#: NAND page size in bytes (A1, docs/sources.md): fixed, not a configuration key.
PAGE_BYTES = 4096

#: Largest tick any input may name (a CSV arrival, a trace cycle, a configured tick count or
#: a NAND time converted to ticks): 2**48 ticks is 3.8 days at 850 MHz, far beyond any run,
#: and keeps every sum of ticks far below the run loop's "never" horizon (2**62).
MAX_TICK = (1 << 48) - 1
#: Largest count or size key (slots, entries, pages, subarrays): 2**32.
MAX_COUNT = 1 << 32
#: Largest address: the 64-bit physical address space.
MAX_ADDRESS = 1 << 64
#: Largest clock (MHz) and link rate (GB/s): 10**6, a thousand times today's parts.
MAX_RATE = 1e6

SCHEDULERS = (
    "fcfs",
    "read-priority",
    "write-drain",
    "partition-1r3w",
    "partition-2r2w",
    "partition-3r1w",
)
PLACEMENTS = ("interleave", "grouped", "contiguous", "explicit")
STACK_SELECTS = ("interleave", "contiguous")
READ_MODES = ("demand", "aggregation")
TIMEOUT_POLICIES = ("strict", "partial")
MEDIA_MODES = ("hbf", "ssd")
HOST_PORTS = ("stack", "channel")
POOLS = ("stack", "channel")
MULTIPLANE = ("off", "page", "megaplane")
#: Which simulator runs a configuration: the C++17 extension (docs/engine.md) or the Python
#: golden model, equal event for event; where the compiled one cannot run, the reference does
ENGINES = ("compiled", "reference")
#: Keys of the retired controllers (docs/history.md): refused with a pointer there.
RETIRED_KEYS = {
    "contract": "the cycle contract",
    "pipeline": "the controller pipeline",
    "link_burst_bytes": "contract 1's link-credit bucket",
}
#: The last commit that has the retired controllers (docs/history.md).
RETIRED_AT = "e5ad083"


class ConfigError(ValueError):
    """A configuration key or value is invalid; the message names both."""


@dataclass(frozen=True)
class HbfConfig:
    """Every knob of one HBF system (stacks, controller, media, clocks).

    Members
    -------
    profile : str
        Name of the profile the values started from.
    stacks : int
        Independent stacks in the logical HBF system (A2, docs/sources.md).
    channels : int
        Host channels per stack: 1, 2, 4, 8 or 16 (A3); more only with
        ``experimental_channels = true``.
    subarrays_per_channel : int
        Subarrays (NAND planes) owned by each channel.
    planes_per_die : int
        Planes of one NAND die (FlashAccel: 96); 0 = one die per channel (a die is the
        channel's ``subarrays_per_channel`` planes). A channel owns whole dies: die ``d`` of
        channel ``c`` is its subarrays ``d*P .. d*P + P - 1`` (docs/flashaccel.md).
    megaplane_planes : int
        Planes per megaplane (FlashAccel: 32), the group of ``M`` consecutive subarrays of a
        die that shares command logic; 1 = every plane alone. A name only under
        ``multiplane = "off"``; the unit of shared command logic otherwise.
    plane_sram_bytes, base_die_sram_bytes : int
        SRAM beside each plane and on the base die (FlashAccel: 32 KiB, 32 MiB); recorded,
        used by nothing yet (0 = none).
    active_per_channel : int
        Cap on concurrent media operations per channel (L2).
    active_total : int
        Cap on concurrent media operations in the whole stack (0 = none; source §5.2 and
        §6.1 use 8 such slots, the HBF-Sim configuration 64).
    admission : int
        Request slots per stack: requests inside the controller (L1).
    mshr_entries : int
        Read MSHR entries per stack: distinct pages with reads in flight.
    mshr_merge : bool
        Merge reads of a page into one MSHR entry (R1); false = every read allocates.
    queue_depth : int
        Page operations waiting for issue per channel.
    placement, group_pages, explicit_map : str, int, tuple
        Channel placement inside a stack (A4). ``explicit_map`` is a tuple of
        ``(first_page, last_page, channel)`` ranges over stack-local pages.
    stack_select : str
        How a page picks its stack: ``interleave`` or ``contiguous`` (A2).
    read_mode, read_agg_window_ticks, read_agg_threshold_bytes
        Demand or aggregation reads (R2).
    page_buffers, buffer_hit_ticks : int
        NAND page buffers per subarray and their hit latency (R3).
    page_cache_pages, cache_hit_ticks : int
        Logic-die LRU page cache (R4); 0 pages disables it.
    write_buffer_entries, write_deadline_ticks, write_timeout_policy
        Write coverage buffer (W1-W3).
    scheduler : str
        Channel scheduler policy (M2).
    write_drain_high_water, write_drain_window_ticks : int
        Write-drain trigger (occupied write-buffer entries) and window length.
    channel_bw_gbps : float
        Host-link credit per channel (L2): the deficit credit's rate
        (docs/timing-contract.md §8).
    host_ports : str
        Request and response ports of a stack (docs/timing-contract.md §1): ``channel``
        (one per host channel, the default) or ``stack`` (one of each).
    pools : str
        The MSHR pool and the write buffer (docs/timing-contract.md §4.5): ``channel``
        (``1 / channels`` of each per channel; channel shape only) or ``stack`` (shared by
        every port). Unless set, it follows ``host_ports``: ``channel`` in the channel shape,
        ``stack`` in the stack shape.
    multiplane : str
        Hyperpage commands (docs/timing-contract.md §7a): ``off``
        (every subarray has its own command logic), ``page`` (megaplanes share command
        logic, one plane per command: MP1) or ``megaplane`` (MP1 and grouped commands,
        MP2-MP7).
    hyperpage_window_ticks : int
        How long a queued operation waits for the rest of its megapage under ``multiplane =
        "megaplane"`` (MP4); -1, the default, is ``megaplane_planes`` ticks
        (:attr:`hyperpage_window`).
    memory_clock_mhz, gpu_clock_mhz : float
        Controller/media clock and GPU core clock (C1).
    t_read_us, t_prog_us, t_erase_us : float
        NAND timing (M1).
    media_mode : str
        ``hbf`` (no GC, host zone remapping) or ``ssd`` (greedy GC baseline).
    pages_per_block, blocks_per_zone, overprovisioning
        Media geometry for erase-before-write, zone PEC accounting and ssd GC.
    base_address, capacity_bytes : int
        The HBF address range ``[base, base + capacity)``. A capacity the user does not set
        follows the geometry: the largest multiple of the capacity unit (stacks x channels x
        subarrays x erase block) not above the profile's capacity (512 GiB by default),
        at least one unit (:func:`geometry_capacity`).
    trace_file, trace_level : str, int
        hbf-trace-v1 output (``hbf_trace_file`` / ``hbf_trace_level``).
    engine : str
        ``compiled`` (the C++17 extension ``hbfsim._engine``, the default) or ``reference``
        (the Python golden model ``model/``). Both give the same events, traces and
        statistics; where the compiled one is not built or lacks a feature the run asks
        for, the reference runs and one line says why (docs/engine.md).
    """

    profile: str = "reference"
    stacks: int = 1
    channels: int = 2
    subarrays_per_channel: int = 32
    planes_per_die: int = 0
    megaplane_planes: int = 1
    plane_sram_bytes: int = 0
    base_die_sram_bytes: int = 0
    active_per_channel: int = 32
    active_total: int = 0
    admission: int = 256
    mshr_entries: int = 256
    mshr_merge: bool = True
    queue_depth: int = 64
    placement: str = "interleave"
    group_pages: int = 2
    explicit_map: tuple = ()
    stack_select: str = "interleave"
    read_mode: str = "demand"
    read_agg_window_ticks: int = 1000
    read_agg_threshold_bytes: int = 4096
    page_buffers: int = 2
    buffer_hit_ticks: int = 10
    page_cache_pages: int = 0
    cache_hit_ticks: int = 50
    write_buffer_entries: int = 32
    write_deadline_ticks: int = 1000
    write_timeout_policy: str = "strict"
    scheduler: str = "fcfs"
    write_drain_high_water: int = 8
    write_drain_window_ticks: int = 20000
    channel_bw_gbps: float = 192.0
    host_ports: str = "channel"
    pools: str = "channel"
    multiplane: str = "off"
    hyperpage_window_ticks: int = -1
    memory_clock_mhz: float = 850.0
    gpu_clock_mhz: float = 1132.0
    t_read_us: float = 15.0
    t_prog_us: float = 200.0
    t_erase_us: float = 2000.0
    media_mode: str = "hbf"
    pages_per_block: int = 256
    blocks_per_zone: int = 64
    overprovisioning: float = 0.15
    base_address: int = 256 << 30
    capacity_bytes: int = 512 << 30
    experimental_channels: bool = False
    trace_file: str = ""
    trace_level: int = 0
    engine: str = "compiled"

    # ---- derived values (integer ticks; one rounding rule, docs/timing-contract.md §9) ----
    @property
    def t_read_ticks(self) -> int:
        return us_to_ticks(self.t_read_us, self.memory_clock_mhz)

    @property
    def t_prog_ticks(self) -> int:
        return us_to_ticks(self.t_prog_us, self.memory_clock_mhz)

    @property
    def t_erase_ticks(self) -> int:
        return us_to_ticks(self.t_erase_us, self.memory_clock_mhz)

    @property
    def memory_clock_khz(self) -> int:
        return int(Decimal(repr(self.memory_clock_mhz)) * 1000)

    @property
    def gpu_clock_khz(self) -> int:
        return int(Decimal(repr(self.gpu_clock_mhz)) * 1000)

    @property
    def link_gain_per_tick(self) -> int:
        """Credit added per tick; one byte costs ``memory_clock_khz`` credit units."""
        return int(Decimal(repr(self.channel_bw_gbps)) * 1000) * 1000

    # the deficit credit in gcd-reduced units (timing-contract.md §8)
    @property
    def link_unit(self) -> int:
        """``g = gcd(link_gain_per_tick, memory_clock_khz)``: the credit unit (§8)."""
        return math.gcd(self.link_gain_per_tick, self.memory_clock_khz)

    @property
    def link_byte_cost(self) -> int:
        """``b = memory_clock_khz / g``: what one response byte costs (§8)."""
        return self.memory_clock_khz // self.link_unit

    @property
    def link_gain(self) -> int:
        """``γ = link_gain_per_tick / g``: the credit a tick adds, and the cap, under
        contract 2 (the link carries ``γ / b`` bytes per tick)."""
        return self.link_gain_per_tick // self.link_unit

    @property
    def pages(self) -> int:
        return self.capacity_bytes // PAGE_BYTES

    @property
    def pages_per_stack(self) -> int:
        return self.pages // self.stacks

    @property
    def subarrays_per_stack(self) -> int:
        return self.channels * self.subarrays_per_channel

    @property
    def die_planes(self) -> int:
        """Planes of one die: ``planes_per_die``, or the channel's subarrays when 0."""
        return self.planes_per_die or self.subarrays_per_channel

    @property
    def hyperpage_window(self) -> int:
        """The gather window of MP4 in ticks: ``hyperpage_window_ticks``, or
        ``megaplane_planes`` when it is -1 (docs/timing-contract.md §7a)."""
        w = self.hyperpage_window_ticks
        return self.megaplane_planes if w < 0 else w

    @property
    def dies_per_stack(self) -> int:
        return self.subarrays_per_stack // self.die_planes

    @property
    def megaplanes_per_stack(self) -> int:
        return self.subarrays_per_stack // self.megaplane_planes

    @property
    def capacity_unit(self) -> int:
        """Bytes every capacity must be a multiple of: one erase block per subarray."""
        return geometry_unit(self.stacks, self.channels, self.subarrays_per_channel,
                             self.pages_per_block)

    @property
    def read_channels(self) -> int:
        """Channels reserved for reads under a static partition scheduler (M2)."""
        if not self.scheduler.startswith("partition-"):
            return self.channels
        return self.channels * int(self.scheduler[10]) // 4

    def ticks_to_gpu_cycles(self, ticks: int) -> int:
        """Convert controller ticks to GPU core cycles, rounding up (contract §8)."""
        return -(-ticks * self.gpu_clock_khz // self.memory_clock_khz)

    def ticks_to_us(self, ticks: int) -> float:
        return ticks * 1000 / self.memory_clock_khz

    def replace(self, **changes) -> "HbfConfig":
        """Return a validated copy with ``changes`` applied (keys as in TOML).

        A capacity that is the one the geometry derives from the profile's capacity
        (:func:`geometry_capacity`) is re-derived for the new geometry unless ``changes``
        sets ``capacity_bytes``; any other capacity is kept and validated.
        """
        changes = _normalise(changes, "override")
        values = dataclasses.asdict(self) | changes
        if "capacity_bytes" not in changes and self.capacity_bytes == geometry_capacity(
                self.capacity_unit, _profile_capacity(self.profile)):
            values["capacity_bytes"] = _derived_capacity(values, values["profile"])
        if "pools" not in changes and self.pools == shape_pools(self.host_ports):
            values["pools"] = shape_pools(values["host_ports"])   # follows the shape
        return build_config(values)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["explicit_map"] = [list(r) for r in self.explicit_map]
        return d


def geometry_unit(stacks: int, channels: int, subarrays: int, pages_per_block: int) -> int:
    """Capacity unit in bytes: one erase block on every subarray of every stack (A2, W5)."""
    return stacks * channels * subarrays * pages_per_block * PAGE_BYTES


def geometry_capacity(unit: int, target: int) -> int:
    """The largest multiple of ``unit`` not above ``target``, and at least one ``unit``."""
    return max(1, target // unit) * unit


def us_to_ticks(us: float, mhz: float) -> int:
    """Microseconds to controller ticks: round half up of ``us * MHz`` in exact decimal."""
    v = Decimal(repr(us)) * Decimal(repr(mhz))
    return int(v.quantize(Decimal(1), rounding=ROUND_HALF_UP))


KEYS = {f.name: f for f in fields(HbfConfig)}

#: The reference simulator's spellings (its ``-gpgpu_hbf_*`` options) and how they map.
ALIASES = {
    "hbf_num_stacks": "stacks",
    "hbf_num_channels": "channels",
    "hbf_max_outstanding": "admission",
    "hbf_mshr_enabled": "mshr_merge",
    "hbf_max_active": "active_total",
    "hbf_channel_map": "placement",
    "hbf_read_mode": "read_mode",
    "hbf_read_agg_window": "read_agg_window_ticks",
    "hbf_read_agg_threshold": "read_agg_threshold_bytes",
    "hbf_page_buffers": "page_buffers",
    "hbf_buffer_hit_latency": "buffer_hit_ticks",
    "hbf_cache_entries": "page_cache_pages",
    "hbf_cache_hit_latency": "cache_hit_ticks",
    "hbf_write_buffer_entries": "write_buffer_entries",
    "hbf_write_agg_timeout": "write_deadline_ticks",
    "hbf_write_timeout_policy": "write_timeout_policy",
    "hbf_scheduler": "scheduler",
    "hbf_write_drain_high": "write_drain_high_water",
    "hbf_write_drain_maxwait": "write_drain_window_ticks",
    "hbf_channel_bw_gbps": "channel_bw_gbps",
    "hbf_media_mode": "media_mode",
    "hbf_blocks_per_zone": "blocks_per_zone",
    "hbf_overprovisioning": "overprovisioning",
    "hbf_base_addr": "base_address",
    "hbf_base_address": "base_address",
    "hbf_size": "capacity_bytes",
    "hbf_pages_per_block": "pages_per_block",
    "hbf_trace_file": "trace_file",
    "hbf_trace_level": "trace_level",
    # NAND timings in the reference are memory-clock ticks; converted in _normalise.
    "hbf_tR": "t_read_us",
    "hbf_tPROG": "t_prog_us",
    "hbf_tBERS": "t_erase_us",
}
_TICK_ALIASES = {"hbf_tR", "hbf_tPROG", "hbf_tBERS"}
_NUMERIC_ENUMS = {
    "placement": {0: "interleave", 1: "contiguous", "partition": "contiguous"},
    "scheduler": {0: "fcfs", 1: "read-priority", 2: "write-drain"},
    "media_mode": {0: "hbf", 1: "ssd"},
    "read_mode": {0: "demand", 1: "aggregation"},
    "write_timeout_policy": {0: "strict", 1: "partial"},
}

PROFILES: dict[str, dict] = {
    # The public HBF-Sim release's defaults (docs/sources.md, docs/provenance.md).
    "reference": {},
    # OCP HBF v0.7 speed grades 1 / 2 / 3: 0.384 / 1.536 / 3.072 TB/s per stack, as 2 / 8 /
    # 16 channels of 192 GB/s; request slots and MSHRs scale with the channels (256 and 64
    # per channel, grade 3's values).
    "ocp-grade1": {"channels": 2, "admission": 512, "mshr_entries": 128},
    "ocp-grade2": {"channels": 8, "admission": 2048, "mshr_entries": 512},
    "ocp-grade3": {"channels": 16, "admission": 4096, "mshr_entries": 1024},
    # FlashAccel paper (docs/sources.md, docs/flashaccel.md): one stack = 8 SLC dies of 96
    # planes in megaplanes of 32, 192 GB (read as 192 GiB: 256 MiB per plane), 768 GB/s,
    # 32 KB SRAM per plane, 32 MB base-die SRAM, XL-Flash tR 4 us / tPROG 75 us. A die is a
    # channel (8 x 96 GB/s = 768 GB/s); every plane may be active (a hyperpage fires all of
    # them); request slots and MSHRs cover two waves of page reads (2 x 768), each channel
    # queue sees all of its planes, one write-buffer entry per plane.
    "flashaccel": {"channels": 8, "subarrays_per_channel": 96, "planes_per_die": 96,
                   "megaplane_planes": 32, "active_per_channel": 96, "channel_bw_gbps": 96.0,
                   "capacity_bytes": 192 << 30, "plane_sram_bytes": 32 << 10,
                   "base_die_sram_bytes": 32 << 20, "admission": 1536, "mshr_entries": 1536,
                   "queue_depth": 96, "write_buffer_entries": 768,
                   "t_read_us": 4.0, "t_prog_us": 75.0},
    # The serving level's HBF stack (docs/serving-hbf-tier.md): OCP grade 3's 16 channels
    # with 256 subarrays each, so 4096 x 4 KiB / tR 15 us = 1,118 GB/s of media bandwidth,
    # the nearest power-of-two plane count above serving paper Table 1's 1,000 GB/s (the link's
    # 16 x 192 GB/s does not bind); every subarray may be active, request slots and MSHRs
    # cover two waves of page reads (the bandwidth-delay product, double-buffered), each
    # channel queue sees all of its subarrays, one write-buffer entry per subarray; read
    # priority, since serving reads dominate (serving paper Table 1 note); 352 GiB, the smallest
    # multiple of the capacity unit (16 x 256 erase blocks) that holds 375 GB.
    "hbf-serving": {"channels": 16, "subarrays_per_channel": 256, "active_per_channel": 256,
                    "admission": 8192, "mshr_entries": 8192, "queue_depth": 256,
                    "write_buffer_entries": 4096, "scheduler": "read-priority",
                    "capacity_bytes": 352 << 30},
}


def retired_key_message(key: str, where: str) -> str:
    """The one line that refuses a retired controller's key (docs/history.md)."""
    return (f"configuration key {key!r} in {where} is retired ({RETIRED_KEYS[key]}): "
            f"hbfsim has one controller, docs/timing-contract.md; contract 1 and the "
            f"standard pipeline are at commit {RETIRED_AT} (docs/history.md)")


def _normalise(raw: dict, where: str) -> dict:
    """Resolve aliases and numeric enum spellings; reject unknown keys."""
    out: dict = {}
    mhz = raw.get("memory_clock_mhz", HbfConfig.memory_clock_mhz)
    for key, value in raw.items():
        name = ALIASES.get(key, key)
        if name in RETIRED_KEYS:
            raise ConfigError(retired_key_message(key, where))
        if name not in KEYS or name == "profile" and key != "profile":
            raise ConfigError(f"unknown configuration key {key!r} in {where}")
        if key in _TICK_ALIASES:
            if (isinstance(value, bool) or not isinstance(value, int) or value < 0
                    or value > MAX_TICK):
                raise ConfigError(f"{key} must be a tick count in 0..{MAX_TICK}, not {value!r}")
            # validated before the division: the clock comes from the same untrusted file
            if _check_number("memory_clock_mhz", mhz) <= 0:
                raise ConfigError(f"memory_clock_mhz must be positive, not {mhz!r}")
            value = value / float(mhz)
        if key.startswith("hbf_") and KEYS[name].type == "bool" and value in (0, 1):
            value = bool(value)  # the reference writes booleans as 0/1
        if name in _NUMERIC_ENUMS and not isinstance(value, bool) and value in _NUMERIC_ENUMS[name]:
            value = _NUMERIC_ENUMS[name][value]
        if name in out:
            raise ConfigError(f"configuration key {name!r} given twice in {where} (as {key!r})")
        out[name] = value
    return out


#: Per-key upper bounds (inclusive) of integer keys; every other integer key: MAX_COUNT.
_INT_MAX = {
    "base_address": MAX_ADDRESS - PAGE_BYTES, "capacity_bytes": MAX_ADDRESS,
    "read_agg_window_ticks": MAX_TICK, "buffer_hit_ticks": MAX_TICK,
    "cache_hit_ticks": MAX_TICK, "write_deadline_ticks": MAX_TICK,
    "write_drain_window_ticks": MAX_TICK, "hyperpage_window_ticks": MAX_TICK,
    "plane_sram_bytes": MAX_COUNT * PAGE_BYTES, "base_die_sram_bytes": MAX_COUNT * PAGE_BYTES,
}
#: Upper bounds of float keys (finite, and below these).
_FLOAT_MAX = {"memory_clock_mhz": MAX_RATE, "gpu_clock_mhz": MAX_RATE,
              "channel_bw_gbps": MAX_RATE, "t_read_us": 1e9, "t_prog_us": 1e9,
              "t_erase_us": 1e9, "overprovisioning": 1.0}


def _check_number(name: str, value) -> float:
    """A finite number in 0..max for float key ``name`` (before any arithmetic on it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond the float range
        raise ConfigError(f"{name} must be at most {_FLOAT_MAX[name]:g}, not {value!r}") \
            from None
    if not math.isfinite(v):
        raise ConfigError(f"{name} must be a finite number, not {value!r}")
    hi = _FLOAT_MAX.get(name)
    if hi is not None and v > hi:
        raise ConfigError(f"{name} must be at most {hi:g}, not {value!r}")
    return v


def _check_type(name: str, value):
    want = KEYS[name].type
    if want == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
        hi = _INT_MAX.get(name, MAX_COUNT)
        if value > hi:
            raise ConfigError(f"{name} must be at most {hi}, not {value!r}")
    elif want == "float":
        return _check_number(name, value)
    elif want == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, not {value!r}")
    elif want == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, not {value!r}")
    elif want == "tuple":
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of [first_page, last_page, channel], "
                              f"not {value!r}")
        rows = []
        for row in value:
            if (not isinstance(row, (list, tuple)) or len(row) != 3
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in row)):
                raise ConfigError(f"{name} entries must be [first_page, last_page, channel], "
                                  f"not {row!r}")
            if any(abs(v) > MAX_ADDRESS for v in row):
                raise ConfigError(f"{name} entry {list(row)!r} is out of range")
            rows.append(tuple(row))
        return tuple(rows)
    return value


def _validate(c: HbfConfig) -> None:
    def need(cond, msg):
        if not cond:
            raise ConfigError(msg)

    def positive(name):
        v = getattr(c, name)
        need(v > 0, f"{name} must be positive, not {v!r}")

    def nonneg(name):
        v = getattr(c, name)
        need(v >= 0, f"{name} must be non-negative, not {v!r}")

    need(c.profile in PROFILES, f"profile must be one of {', '.join(PROFILES)}, not {c.profile!r}")
    for n in ("stacks", "subarrays_per_channel", "active_per_channel", "admission",
              "mshr_entries", "queue_depth", "group_pages",
              "write_buffer_entries", "write_deadline_ticks", "write_drain_high_water",
              "write_drain_window_ticks", "channel_bw_gbps",
              "memory_clock_mhz", "gpu_clock_mhz", "t_read_us", "t_prog_us", "t_erase_us",
              "pages_per_block", "blocks_per_zone", "read_agg_threshold_bytes"):
        positive(n)
    for n in ("active_total", "read_agg_window_ticks", "buffer_hit_ticks", "page_cache_pages",
              "cache_hit_ticks", "base_address", "trace_level", "page_buffers",
              "planes_per_die", "plane_sram_bytes", "base_die_sram_bytes"):
        nonneg(n)
    positive("megaplane_planes")
    # Geometry (docs/flashaccel.md): a channel owns whole dies, a die whole megaplanes.
    need(c.subarrays_per_channel % c.die_planes == 0, f"planes_per_die must divide "
         f"subarrays_per_channel ({c.subarrays_per_channel}): a channel owns whole dies, "
         f"not {c.planes_per_die!r}")
    need(c.die_planes % c.megaplane_planes == 0, f"megaplane_planes must divide the planes "
         f"of a die ({c.die_planes}), not {c.megaplane_planes!r}")
    if c.experimental_channels:
        need(1 <= c.channels <= 64, f"channels must be 1..64, not {c.channels!r}")
    else:
        need(c.channels in (1, 2, 4, 8, 16), f"channels must be 1, 2, 4, 8 or 16, not "
             f"{c.channels!r} (set experimental_channels = true for more)")
    need(c.placement in PLACEMENTS,
         f"placement must be one of {', '.join(PLACEMENTS)}, not {c.placement!r}")
    need(c.stack_select in STACK_SELECTS,
         f"stack_select must be one of {', '.join(STACK_SELECTS)}, not {c.stack_select!r}")
    need(c.read_mode in READ_MODES,
         f"read_mode must be one of {', '.join(READ_MODES)}, not {c.read_mode!r}")
    need(c.write_timeout_policy in TIMEOUT_POLICIES, f"write_timeout_policy must be strict or "
         f"partial, not {c.write_timeout_policy!r}")
    need(c.scheduler in SCHEDULERS,
         f"scheduler must be one of {', '.join(SCHEDULERS)}, not {c.scheduler!r}")
    need(c.media_mode in MEDIA_MODES, f"media_mode must be hbf or ssd, not {c.media_mode!r}")
    need(0 <= c.overprovisioning < 1,
         f"overprovisioning must be in [0, 1), not {c.overprovisioning!r}")
    need(c.trace_level in (0, 1, 2), f"trace_level must be 0, 1 or 2, not {c.trace_level!r}")
    need(c.engine in ENGINES,
         f"engine must be one of {', '.join(ENGINES)}, not {c.engine!r}")
    need(c.host_ports in HOST_PORTS,
         f"host_ports must be stack or channel, not {c.host_ports!r}")
    # docs/timing-contract.md §4.5 (B1): pools per channel, in the channel shape only
    need(c.pools in POOLS, f"pools must be stack or channel, not {c.pools!r}")
    if c.pools == "channel":
        need(c.host_ports == "channel", "pools = 'channel' needs host_ports = 'channel' "
             "(the stack shape has one port and one pool)")
        for key in ("mshr_entries", "write_buffer_entries"):
            need(getattr(c, key) % c.channels == 0, f"{key} must be a multiple of channels "
                 f"({c.channels}) under pools = 'channel' (the channel shape's default), not "
                 f"{getattr(c, key)!r}; set pools = 'stack' for one pool shared by every port")
    # docs/timing-contract.md §7a, Configuration: hyperpage commands
    need(c.multiplane in MULTIPLANE,
         f"multiplane must be off, page or megaplane, not {c.multiplane!r}")
    need(c.hyperpage_window_ticks >= -1, f"hyperpage_window_ticks must be a tick count >= 0 "
         f"(or -1: megaplane_planes ticks), not {c.hyperpage_window_ticks!r}")
    # MP4's window exists only under megaplane; a value given otherwise would be ignored
    need(c.multiplane == "megaplane" or c.hyperpage_window_ticks == -1,
         f"hyperpage_window_ticks is used by multiplane = 'megaplane' only, not "
         f"{c.hyperpage_window_ticks!r} under multiplane = {c.multiplane!r}")
    need(c.base_address % PAGE_BYTES == 0,
         f"base_address must be 4 KiB aligned, not {c.base_address:#x}")
    need(c.base_address + c.capacity_bytes <= MAX_ADDRESS, f"base_address + capacity_bytes "
         f"must fit in 64 bits, not {c.base_address:#x} + {c.capacity_bytes:#x}")
    unit = c.capacity_unit
    need(c.capacity_bytes > 0 and c.capacity_bytes % unit == 0,
         f"capacity_bytes must be a positive multiple of stacks x channels x subarrays x "
         f"erase block ({unit} B), not {c.capacity_bytes!r} (leave it unset to follow the "
         "geometry)")
    if c.placement == "contiguous":
        need(c.pages_per_stack % c.channels == 0, "capacity_bytes must split evenly into "
             f"contiguous channel regions, not {c.capacity_bytes!r}")
    if c.placement == "explicit":
        need(len(c.explicit_map) > 0, "explicit_map must list [first_page, last_page, channel] "
             "ranges when placement = 'explicit'")
    for first, last, ch in c.explicit_map:
        need(0 <= first <= last < c.pages_per_stack,
             f"explicit_map range [{first}, {last}] is outside the stack's "
             f"{c.pages_per_stack} pages")
        need(0 <= ch < c.channels, f"explicit_map channel {ch} is outside 0..{c.channels - 1}")
    ranges = sorted((first, last) for first, last, _ in c.explicit_map)
    for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):   # a page has one channel
        need(b0 > a1, f"explicit_map ranges [{a0}, {a1}] and [{b0}, {b1}] overlap (pages "
             f"{b0}..{min(a1, b1)}): a page belongs to one range")
    if c.scheduler.startswith("partition-"):
        need(c.channels % 4 == 0, f"scheduler {c.scheduler!r} needs channels divisible by 4, "
             f"not {c.channels!r}")
        need(c.placement != "explicit", f"scheduler {c.scheduler!r} cannot be combined with "
             "placement = 'explicit'")
    for key, ticks in (("t_read_us", c.t_read_ticks), ("t_prog_us", c.t_prog_ticks),
                       ("t_erase_us", c.t_erase_ticks)):
        need(ticks > 0, f"{key} {getattr(c, key)!r} rounds to 0 ticks")
        need(ticks <= MAX_TICK, f"{key} {getattr(c, key)!r} is {ticks} ticks at "
             f"memory_clock_mhz {c.memory_clock_mhz!r}, more than {MAX_TICK}")


def shape_pools(host_ports: str) -> str:
    """The pools a host-port shape takes unless ``pools`` is set (docs/timing-contract.md
    §4.5): a pool per channel in the channel shape, one in the stack shape."""
    return "channel" if host_ports == "channel" else "stack"


def _profile_capacity(profile: str) -> int:
    """The capacity a profile asks for (the default's 512 GiB unless it names one)."""
    return PROFILES.get(profile, {}).get("capacity_bytes", HbfConfig.capacity_bytes)


def _derived_capacity(values: dict, profile: str) -> int:
    """The capacity that follows the geometry in ``values`` (type-checked first, so a bad
    geometry value gets its own one-line error rather than an arithmetic failure)."""
    geo = {}
    for k in ("stacks", "channels", "subarrays_per_channel", "pages_per_block"):
        v = values.get(k, getattr(HbfConfig, k))
        _check_type(k, v)
        if v < 1:  # reported by _validate with the key's own message
            return _profile_capacity(profile)
        geo[k] = v
    unit = geometry_unit(geo["stacks"], geo["channels"], geo["subarrays_per_channel"],
                         geo["pages_per_block"])
    if unit > MAX_ADDRESS:
        raise ConfigError(f"the capacity unit stacks x channels x subarrays_per_channel x "
                          f"erase block ({unit} B) exceeds the 64-bit address space")
    return geometry_capacity(unit, _profile_capacity(profile))


def build_config(values: dict) -> HbfConfig:
    """Build and validate an :class:`HbfConfig` from canonical key names."""
    kwargs = {}
    for name, value in values.items():
        if name not in KEYS:
            raise ConfigError(f"unknown configuration key {name!r}")
        checked = _check_type(name, value)
        kwargs[name] = value if checked is None else checked
    cfg = HbfConfig(**kwargs)
    _validate(cfg)
    return cfg


def load_config(path: str | Path | None = None, profile: str | None = None,
                base: dict | None = None, **overrides) -> HbfConfig:
    """Load a configuration: the defaults, then ``base`` (for example a workload's study
    settings), then the named profile's values, then the TOML file, then ``overrides``, so a
    profile the user names wins over a workload's settings (and the file over both).

    Raises
    ------
    ConfigError
        For an unreadable file, bad TOML, an unknown key or an invalid value.
    """
    file_values: dict = {}
    if path is not None:
        from hbfsim.textfile import read_text

        p = Path(path)
        text = read_text(p, "configuration", ConfigError)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: not valid TOML: {e}") from None
        for k, v in data.items():
            if isinstance(v, dict):
                raise ConfigError(f"{p}: configuration is flat; unexpected table [{k}]")
        file_values = _normalise(data, str(p))
    over = _normalise(overrides, "overrides")
    name = over.get("profile") or profile or file_values.get("profile") or "reference"
    if not isinstance(name, str) or name not in PROFILES:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}, not {name!r}")
    base_values = _normalise(base or {}, "workload defaults")
    values = {"profile": name} | base_values | PROFILES[name] | file_values | over
    values["profile"] = name
    if "capacity_bytes" not in file_values and "capacity_bytes" not in over \
            and "capacity_bytes" not in base_values:
        # not set by the user: the capacity follows the geometry (docs/flashaccel.md)
        values["capacity_bytes"] = _derived_capacity(values, name)
    if not any("pools" in v for v in (base_values, PROFILES[name], file_values, over)):
        # not set by the user: the pools follow the host-port shape (§4.5)
        values["pools"] = shape_pools(values.get("host_ports", HbfConfig.host_ports))
    return build_config(values)
