"""Where every configuration value comes from (``hbfsim config show --provenance``).

Each default and each profile value names its source, so a researcher can tell published
numbers from our guesses:

* ``OCP HBF v0.7``: the OCP High Bandwidth Flash base-die specification, version 0.7;
* ``HBF-Sim paper``: the HBF-Sim paper (section given);
* ``HBF-Sim configuration``: the defaults of the public HBF-Sim release's configuration;
* ``FlashAccel paper``: the FlashAccel design (XL-Flash timings);
* ``serving paper``: the HBM-HBF-host serving hierarchy (its Table 1 per-stack figures);
* ``assumption``: our own choice, with the reason.

The facts behind each entry are in docs/provenance.md. A value set by a configuration file
is attributed to that file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["DEFAULT_SOURCES", "PROFILE_SOURCES", "SOURCES", "provenance"]

OCP, PAPER, CONF, FLASHACCEL, SERVING, OURS = (
    "OCP HBF v0.7", "HBF-Sim paper", "HBF-Sim configuration", "FlashAccel paper",
    "serving paper", "assumption")
SOURCES = (OCP, PAPER, CONF, FLASHACCEL, SERVING, OURS)

#: key -> (source, note) for the defaults (the ``reference`` profile).
DEFAULT_SOURCES = {
    "profile": (OURS, "the named profile the values start from (reference = the defaults)"),
    "stacks": (PAPER, "§4: one or more stacks; every experiment uses one"),
    "channels": (CONF, "its experiments' default; 1, 2, 4, 8, 16: OCP HBF v0.7, paper §4"),
    "subarrays_per_channel": (PAPER, "§5.4: 32 subarrays per channel"),
    "planes_per_die": (OURS, "0: one die per channel (its subarrays); the HBF-Sim sources "
                             "name no die size"),
    "megaplane_planes": (OURS, "1: every plane alone; a name only under multiplane = off "
                               "(docs/flashaccel.md)"),
    "plane_sram_bytes": (OURS, "0: no per-plane SRAM in the HBF-Sim sources (the "
                               "SRAM prefetch queue refuses it)"),
    "base_die_sram_bytes": (OURS, "0: the HBF-Sim base die has only the page cache "
                                  "(page_cache_pages); no SRAM prefetch"),
    "active_per_channel": (PAPER, "§5.4: 32 active slots per channel"),
    "active_total": (OURS, "no stack-wide cap; the HBF-Sim configuration has 64 "
                           "(hbf_max_active = 64)"),
    "admission": (CONF, "256 outstanding requests; studies use 32..4096"),
    "mshr_entries": (OURS, "one per admission slot"),
    "mshr_merge": (PAPER, "§4.2: page-keyed MSHR merging, on in every study"),
    "queue_depth": (OURS, "per-channel issue queue; the HBF-Sim configuration allows 64 "
                          "outstanding writes per channel"),
    "placement": (CONF, "channel map: interleave"),
    "group_pages": (PAPER, "§6.1: grouped placement rotates after every two pages"),
    "explicit_map": (OURS, "empty; used only with placement = explicit"),
    "stack_select": (OURS, "paper §4 offers interleave or contiguous; no default stated"),
    "read_mode": (PAPER, "§4.2: demand; aggregation is optional"),
    "read_agg_window_ticks": (OURS, "paper §4.2 names the window but no default"),
    "read_agg_threshold_bytes": (PAPER, "§4.2: default threshold one 4 KiB page"),
    "page_buffers": (PAPER, "§4.2: two NAND page buffers per subarray"),
    "buffer_hit_ticks": (CONF, "buffer-hit latency 10 ticks"),
    "page_cache_pages": (OURS, "off: the HBF-Sim configuration has 256 pages, but its studies "
                               "disable it and the RTL lacks it"),
    "cache_hit_ticks": (CONF, "page-cache hit latency 50 ticks"),
    "write_buffer_entries": (CONF, "32 entries, forced flush beyond"),
    "write_deadline_ticks": (CONF, "1,000 ticks (about 1.18 us)"),
    "write_timeout_policy": (PAPER, "§4.2: strict is the default"),
    "scheduler": (CONF, "FCFS"),
    "write_drain_high_water": (CONF, "write drain at 8 entries"),
    "write_drain_window_ticks": (CONF, "write-drain window at most 20,000 ticks"),
    "channel_bw_gbps": (OCP, "grade 3: 3.072 TB/s over 16 channels; also the HBF-Sim "
                             "configuration and paper §5.3"),
    "host_ports": (OURS, "channel: one request and one response port per host channel (OCP "
                         "HBF's independent channels); stack: one of each"),
    "pools": (OURS, "stack: the MSHR pool and the write buffer shared by every port; channel: "
                    "1/C of each per channel (docs/timing-contract.md §4.5)"),
    "multiplane": (OURS, "off: every subarray has its own command logic "
                         "(docs/timing-contract.md §7a)"),
    "hyperpage_window_ticks": (OURS, "-1 = megaplane_planes ticks, the enqueue arbiter's time "
                                     "for one megapage (docs/timing-contract.md §7a, "
                                     "MP4)"),
    "memory_clock_mhz": (CONF, "850 MHz DRAM clock; paper §5.2 (0.850 GHz)"),
    "gpu_clock_mhz": (CONF, "1132 MHz core clock; paper §5.2 (1.132 GHz)"),
    "t_read_us": (PAPER, "§4.2: default profile tR 15 us"),
    "t_prog_us": (PAPER, "§4.2: default profile tPROG 200 us"),
    "t_erase_us": (PAPER, "§4.2: default profile tBERS 2 ms"),
    "media_mode": (CONF, "hbf: no GC, host zone remapping"),
    "pages_per_block": (OURS, "a common NAND block size; the sources give none"),
    "blocks_per_zone": (CONF, "64 blocks per zone"),
    "overprovisioning": (CONF, "0.15, ssd mode only"),
    "base_address": (CONF, "HBF base 256 GiB"),
    "capacity_bytes": (CONF, "HBF size 512 GiB (paper §1: 512 GiB of density); an unset "
                             "capacity is the largest multiple of the geometry's unit up "
                             "to it"),
    "experimental_channels": (PAPER, "§4: more than 16 channels is experimental"),
    "trace_file": (OURS, "no trace unless asked (HBF-Sim's hbf_trace_file)"),
    "trace_level": (OURS, "no trace unless asked (HBF-Sim's hbf_trace_level)"),
    "engine": (OURS, "compiled: the C++ engine, equal event for event to the Python golden "
                     "model (reference); it changes no result, only the speed"),
}

#: profile -> key -> (source, note) for the values a profile changes.
PROFILE_SOURCES = {
    "reference": {},
    "ocp-grade1": {
        "channels": (OCP, "grade 1: 0.384 TB/s per stack = 2 channels x 192 GB/s (the "
                          "channel split is our reading)"),
        "admission": (OURS, "256 per channel, as ocp-grade3"),
        "mshr_entries": (OURS, "64 per channel, as ocp-grade3"),
    },
    "ocp-grade2": {
        "channels": (OCP, "grade 2: 1.536 TB/s per stack = 8 channels x 192 GB/s (the "
                          "channel split is our reading)"),
        "admission": (OURS, "256 per channel, as ocp-grade3"),
        "mshr_entries": (OURS, "64 per channel, as ocp-grade3"),
    },
    "ocp-grade3": {
        "channels": (OCP, "16 host channels per stack"),
        "admission": (PAPER, "§5.4: 4,096 admission entries"),
        "mshr_entries": (OURS, "sized for a 16-channel stack"),
    },
    "flashaccel": {  # docs/flashaccel.md explains the mapping onto channels x subarrays
        "channels": (OURS, "8: one channel per die of the stack's 8 SLC dies (FlashAccel)"),
        "subarrays_per_channel": (FLASHACCEL, "96 planes per die, one die per channel"),
        "planes_per_die": (FLASHACCEL, "a die is split into 96 planes"),
        "megaplane_planes": (FLASHACCEL, "planes grouped 32-wide into a megaplane (M = 32); "
                                         "a name only under multiplane = off"),
        "active_per_channel": (FLASHACCEL, "all planes fire together (hyperpage read)"),
        "channel_bw_gbps": (FLASHACCEL, "768 GB/s per stack over 8 channels"),
        "capacity_bytes": (FLASHACCEL, "192 GB NAND per stack, read as 192 GiB (256 MiB "
                                       "per plane)"),
        "plane_sram_bytes": (FLASHACCEL, "32 KB SRAM per plane (model/prefetch.py)"),
        "base_die_sram_bytes": (FLASHACCEL, "32 MB base-die SRAM (model/prefetch.py)"),
        "admission": (OURS, "two waves of page reads (2 x 768 planes)"),
        "mshr_entries": (OURS, "two waves of page reads (2 x 768 planes)"),
        "queue_depth": (OURS, "each channel queue sees all of its 96 planes"),
        "write_buffer_entries": (OURS, "one entry per plane"),
        "t_read_us": (FLASHACCEL, "XL-Flash tR 4 us"),
        "t_prog_us": (FLASHACCEL, "XL-Flash tProg 75 us"),
    },
    "hbf-serving": {  # docs/serving-hbf-tier.md explains the sizing
        "channels": (OCP, "16 host channels per stack"),
        "subarrays_per_channel": (OURS, "256: 4096 x 4 KiB / tR 15 us = 1,118 GB/s, the "
                                        "power of two nearest above the serving paper's "
                                        "1,000 GB/s (Table 1)"),
        "active_per_channel": (OURS, "every subarray may be active"),
        "admission": (OURS, "two waves of page reads (bandwidth-delay product, doubled)"),
        "mshr_entries": (OURS, "two waves of page reads (bandwidth-delay product, doubled)"),
        "queue_depth": (OURS, "each channel queue sees all of its subarrays"),
        "write_buffer_entries": (OURS, "one entry per subarray"),
        "scheduler": (SERVING, "reads dominate serving traffic (Table 1 note): read priority"),
        "capacity_bytes": (SERVING, "375 GB per stack (Table 1), rounded up to 352 GiB, a "
                                    "multiple of the capacity unit"),
    },
}


def provenance(cfg, config_path=None) -> dict:
    """``key -> (source, note)`` for every key of the resolved configuration ``cfg``.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration as resolved by ``load_config(config_path, profile)``.
    config_path : str or Path, optional
        The TOML file it was loaded from; its keys are attributed to it.
    """
    from hbfsim.config import _normalise

    from_file = set()
    if config_path is not None:
        data = tomllib.loads(Path(config_path).read_text(encoding="utf-8-sig"))
        from_file = set(_normalise(data, str(config_path)))
    prof = PROFILE_SOURCES.get(cfg.profile, {})
    out = {}
    for key in cfg.as_dict():
        if key in from_file and key != "profile":
            out[key] = (f"file {config_path}", "set in the configuration file")
        elif key in prof:
            out[key] = prof[key]
        else:
            out[key] = DEFAULT_SOURCES[key]
    return out
