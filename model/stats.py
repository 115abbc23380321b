"""Statistics of the HBF-Sim paper (docs/sources.md), in both clock units, as a dict and a table.

Definitions (docs/model.md, statistics):

* window = ``last_completion_tick - first_arrival_tick`` (+1 tick, so one-tick runs are
  not empty);
* ``media_bytes`` = (NAND array page reads + page programs) x 4096; page-buffer and
  page-cache hits move no array data;
* ``read_amplification`` = array read bytes / requested read bytes (R5);
* ``media_utilization`` = summed service ticks of all media commands / (active-operation
  slots x window), slots = stacks x channels x min(subarrays, active_per_channel);
* ``array_bandwidth_gbs`` = array page reads x 4096 B / window (GB = 1e9 B);
* ``first_request_latency_ticks``: latency of the reads that allocated their MSHR entry;
  ``aggregation_wait_ticks``: summed ticks read entries waited to enqueue beyond demand mode;
* percentiles are nearest-rank: the value at rank ceil(p/100 x N) of the sorted latencies.
"""

from __future__ import annotations

import math

import numpy as np

from hbfsim.config import PAGE_BYTES

__all__ = ["LatencyCounts", "collect_stats", "format_table", "percentiles"]


class LatencyCounts:
    """Latencies held as their distinct values and how often each occurs, so that a long
    run's statistics need memory for the distinct latencies, not one number per request
    (the compiled engine's streamed runs, hbfsim/engine_stream.py). :func:`percentiles`
    reads it as it reads the latencies themselves, with the same figures."""

    _MIN_MERGE = 1 << 16

    def __init__(self):
        self._parts: list = []        # (sorted distinct values, counts) per block
        self._size = 0                # distinct values summed over the parts
        self._merged = 0              # distinct values after the last merge

    def add(self, values) -> None:
        """Count ``values`` (non-negative integers)."""
        values = np.asarray(values, dtype=np.int64)
        if values.size == 0:
            return
        lo, hi = int(values.min()), int(values.max())
        if lo < 0:
            raise ValueError(f"a latency must be non-negative, not {lo}")
        if hi - lo < 1 << 20:            # a narrow range: counted densely (faster than a sort)
            b = np.bincount(values - lo)
            v = np.flatnonzero(b)
            c = b[v]
            v = v + lo
        else:
            v, c = np.unique(values, return_counts=True)
        self._parts.append((v.astype(np.int64), c.astype(np.int64)))
        self._size += v.size
        if self._size > 2 * max(self._merged, self._MIN_MERGE):   # amortized: O(n log n)
            self._merge()

    def _merge(self) -> None:
        if len(self._parts) > 1:
            v = np.concatenate([p[0] for p in self._parts])
            c = np.concatenate([p[1] for p in self._parts])
            u, inv = np.unique(v, return_inverse=True)
            total = np.zeros(u.size, dtype=np.int64)
            np.add.at(total, inv, c)
            self._parts = [(u, total)]
        self._size = self._merged = self._parts[0][0].size if self._parts else 0

    def distinct(self):
        """``(values, counts)``: the distinct latencies, ascending, and their counts."""
        self._merge()
        if not self._parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self._parts[0]

    def __len__(self) -> int:
        return int(sum(int(p[1].sum()) for p in self._parts))


def _exact_sum(values, counts=None) -> int:
    """The exact integer sum of ``values`` (each taken ``counts`` times): int64 arithmetic
    while it cannot overflow, Python integers beyond."""
    values = np.asarray(values, dtype=np.int64)
    if counts is None:
        if float(np.abs(values).sum(dtype=np.float64)) < 2.0 ** 62:
            return int(values.sum())
        return sum(values.tolist())
    if float(np.dot(np.abs(values).astype(np.float64), counts.astype(np.float64))) < 2.0 ** 62:
        return int(np.dot(values, counts))
    return sum(v * c for v, c in zip(values.tolist(), counts.tolist()))


def _percentiles_of_counts(values, counts, cfg) -> dict:
    # percentiles()'s figures from distinct values and counts: the nearest rank is the
    # first value whose cumulative count reaches it; the mean is the exact sum divided once
    # (Python's int / int rounds correctly), as percentiles() computes it
    n = int(counts.sum())
    cum = np.cumsum(counts)
    out = {"count": n, "mean": _exact_sum(values, counts) / n}
    for p in (50, 95, 99):
        v = int(values[np.searchsorted(cum, max(0, math.ceil(p / 100 * n) - 1) + 1)])
        out[f"p{p}"] = v
        out[f"p{p}_gpu_cycles"] = cfg.ticks_to_gpu_cycles(v)
    return out


def percentiles(values, cfg) -> dict:
    if len(values) == 0:
        return {"count": 0, "p50": None, "p95": None, "p99": None,
                "p50_gpu_cycles": None, "p95_gpu_cycles": None, "p99_gpu_cycles": None,
                "mean": None}
    if isinstance(values, LatencyCounts):
        return _percentiles_of_counts(*values.distinct(), cfg)
    a = np.sort(np.asarray(values, dtype=np.int64))
    # the exact sum divided once (equal to np.mean's figure while the sum is below 2**53,
    # exact beyond, where a float accumulator would round)
    out = {"count": int(a.size), "mean": _exact_sum(a) / a.size}
    for p in (50, 95, 99):
        v = int(a[max(0, math.ceil(p / 100 * a.size) - 1)])
        out[f"p{p}"] = v
        out[f"p{p}_gpu_cycles"] = cfg.ticks_to_gpu_cycles(v)
    return out


def collect_stats(system) -> dict:
    """Return the statistics dictionary of a finished :class:`HbfSystem` run."""
    cfg = system.cfg
    st = system.stats
    stacks = system.stacks
    media = [s.media for s in stacks]
    reads = sum(m.page_reads for m in media)
    buf = sum(m.buffer_hits for m in media)
    progs = sum(m.page_programs for m in media)
    erases = sum(m.block_erases for m in media)
    busy = sum(m.busy_ticks for m in media)
    first = system.first_arrival if system.first_arrival is not None else 0
    last = system.last_completion
    window = max(1, last - first + 1) if system.n_done else 0
    seconds = window / (cfg.memory_clock_khz * 1000) if window else 0.0
    slots = cfg.stacks * cfg.channels * min(cfg.subarrays_per_channel, cfg.active_per_channel)
    req_r, req_w = system.requested["R"], system.requested["W"]
    zone = {}
    for m in media:
        for k, v in m.zone_pec().items():
            zone[k] = zone.get(k, 0) + v
    total_zones = (cfg.stacks * cfg.subarrays_per_stack
                   * max(1, (media[0].blocks + cfg.blocks_per_zone - 1) // cfg.blocks_per_zone))
    pec_max = max(zone.values(), default=0)
    pec_min = min(zone.values(), default=0) if len(zone) == total_zones else 0
    per_channel = []
    for s in stacks:
        for ch in range(cfg.channels):
            per_channel.append({"stack": s.stack, "channel": ch,
                                "requests": s.ch_requests[ch], "media_ops": s.ch_ops[ch],
                                "link_stall_ticks": s.ch_link_stall[ch]})
    lat_r = percentiles(system.lat["R"], cfg)
    lat_w = percentiles(system.lat["W"], cfg)
    valid = sum(m.valid_pages() for m in media)
    out = {
        "profile": cfg.profile,
        "requests": system.submitted,
        "completions": system.n_done,
        "read_requests": system.n_req["R"],
        "write_requests": system.n_req["W"],
        "page_reads": reads,
        "page_programs": progs,
        "block_erases": erases,
        "mshr_hits": sum(s.mshr_hits for s in stacks),
        "page_buffer_hits": buf,
        "page_cache_hits": st["page_cache_hits"],
        "page_services": reads + buf + st["page_cache_hits"],
        "requested_bytes": req_r + req_w,
        "requested_read_bytes": req_r,
        "requested_write_bytes": req_w,
        "media_bytes": (reads + progs) * PAGE_BYTES,
        "read_amplification": (reads * PAGE_BYTES / req_r) if req_r else 0.0,
        "first_arrival_tick": first,
        "last_completion_tick": last,
        "window_ticks": window,
        "window_us": cfg.ticks_to_us(window),
        "window_gpu_cycles": cfg.ticks_to_gpu_cycles(window),
        "tick_us": 1000 / cfg.memory_clock_khz,
        "memory_clock_mhz": cfg.memory_clock_mhz,
        "gpu_clock_mhz": cfg.gpu_clock_mhz,
        "media_utilization": busy / (slots * window) if window else 0.0,
        "array_bandwidth_gbs": reads * PAGE_BYTES / seconds / 1e9 if seconds else 0.0,
        "read_latency_ticks": lat_r,
        "write_latency_ticks": lat_w,
        "first_request_latency_ticks": percentiles(system.lat_first, cfg),
        "aggregation_wait_ticks": sum(s.agg_wait for s in stacks),
        "flushes": {c: st["flush_" + c] for c in ("full", "raw", "pressure", "deadline",
                                                  "drain")},
        "timeout_flushes": st["flush_deadline"],
        "idle_drains": st["flush_drain"],
        "read_after_write_events": st["raw_events"],
        "partial_programs": st["partial_programs"],
        "padding_bytes": st["padding_bytes"],
        "strict_errors": st["strict_errors"],
        "media_errors": st["media_errors"],
        "gc_relocations": sum(m.gc_relocations for m in media),
        "errors": system.errors,
        "capacity_utilization": valid / cfg.pages if cfg.pages else 0.0,
        "zone_pec_max": pec_max,
        "zone_pec_spread": pec_max - pec_min,
        "per_channel": per_channel,
    }
    return out


def format_table(s: dict) -> str:
    """A readable summary of :func:`collect_stats` output."""
    def lat(d):
        if not d["count"]:
            return "-"
        return (f"p50 {d['p50']:,} / p95 {d['p95']:,} / p99 {d['p99']:,} ticks  "
                f"(p95 {d['p95_gpu_cycles']:,} GPU cycles)")

    rows = [
        ("requests (read / write)", f"{s['requests']:,} ({s['read_requests']:,} / "
                                    f"{s['write_requests']:,})"),
        ("completions", f"{s['completions']:,}  errors {s['errors']:,}"
                        + (" (responses with the error flag: the writes of pages left "
                           "incomplete at their deadline under the strict policy, or out of "
                           "capacity)" if s["errors"] else "")),
        ("page reads / buffer hits / cache hits", f"{s['page_reads']:,} / "
         f"{s['page_buffer_hits']:,} / {s['page_cache_hits']:,}"),
        ("MSHR hits", f"{s['mshr_hits']:,}"),
        ("page programs / block erases", f"{s['page_programs']:,} / {s['block_erases']:,}"),
        ("write flushes full/raw/pressure/deadline/drain",
         "/".join(str(s["flushes"][k]) for k in ("full", "raw", "pressure", "deadline",
                                                 "drain"))),
        ("incomplete pages (strict) / partial programs / padding B",
         f"{s['strict_errors']} / {s['partial_programs']} / {s['padding_bytes']}"),
        ("requested / media bytes", f"{s['requested_bytes']:,} / {s['media_bytes']:,}"),
        ("read amplification", f"{s['read_amplification']:.2f}"),
        ("window", f"{s['window_ticks']:,} ticks = {s['window_us']:.3f} us = "
                   f"{s['window_gpu_cycles']:,} GPU cycles"),
        ("media utilization", f"{s['media_utilization']:.4f}"),
        ("array bandwidth", f"{s['array_bandwidth_gbs']:.3f} GB/s"),
        ("read latency", lat(s["read_latency_ticks"])),
        ("write latency", lat(s["write_latency_ticks"])),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)
