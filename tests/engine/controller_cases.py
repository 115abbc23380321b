"""Random cases for the differential tests of the compiled controller (tests/engine/).

A case is a configuration of the one timing contract (docs/timing-contract.md) and an
open-loop request stream. :func:`check_controller` runs it through the golden model
(:class:`hbfsim.model.system.HbfSystem`, whose reference loop steps the contract's
controller) and through the compiled engine (:func:`hbfsim.engine.run_compiled`), and asserts
every request's event ticks and flags, the response order and every counter equal.
test_mutants.py reuses the strategies and the check to show that broken variants fail them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, HbfConfig, load_config
from hbfsim.engine import REQUEST_COLUMNS, run_compiled
from hbfsim.model.controller import Request
from hbfsim.model.system import HbfSystem

def contract_config(**kw) -> HbfConfig:
    """``load_config(**kw)``: the one timing contract is the only controller."""
    return load_config(**kw)


# ------------------------------------------------------------------------------ cases
@st.composite
def controller_configs(draw, multiplane=None):
    """A small configuration of the one contract: every shape and mode, tables small enough
    that stalls, pressure flushes, credit stalls and queue-full cycles happen."""
    shape = draw(st.sampled_from(["stack", "channel"]))
    stacks = draw(st.sampled_from([1, 1, 2, 4]))
    channels = draw(st.sampled_from([1, 2, 4]))
    subs = draw(st.sampled_from([1, 2, 4]))
    mp = multiplane or draw(st.sampled_from(["off", "off", "off", "page", "megaplane"]))
    kw = {}
    if mp != "off":
        subs = draw(st.sampled_from([2, 4]))
        kw.update(megaplane_planes=draw(st.sampled_from([1, 2] if subs == 2 else [2, 4])))
        if mp == "megaplane":
            kw.update(hyperpage_window_ticks=draw(st.sampled_from([-1, 0, 3, 30])))
    scheds = ["fcfs", "read-priority", "write-drain"]
    if channels == 4:
        scheds += ["partition-1r3w", "partition-2r2w"]
    sched = draw(st.sampled_from(scheds))
    if sched == "write-drain":
        kw.update(write_drain_high_water=draw(st.integers(1, 4)),
                  write_drain_window_ticks=draw(st.sampled_from([5, 40, 400])))
    read_mode = draw(st.sampled_from(["demand", "demand", "aggregation"]))
    if read_mode == "aggregation":
        kw.update(read_agg_window_ticks=draw(st.sampled_from([0, 1, 2, 5, 40])),
                  read_agg_threshold_bytes=draw(st.sampled_from([32, 128, 4096])))
    pc = draw(st.sampled_from([0, 0, 0, 1, 4]))
    if pc:
        kw.update(page_cache_pages=pc, cache_hit_ticks=draw(st.integers(1, 20)))
    t_read, t_prog, t_erase = draw(st.sampled_from([(0.05, 0.1, 0.2), (0.02, 0.2, 0.05),
                                                    (0.2, 0.05, 0.1)]))
    mshrs = draw(st.sampled_from([1, 2, 3, 16]))
    wbs = draw(st.sampled_from([1, 2, 3, 8]))
    kw.update(pools="stack")
    if shape == "channel" and channels > 1 and draw(st.sampled_from([0, 1, 1])):
        # §4.5: a pool per channel (the channel shape's default), 1-4 MSHR and 1-2
        # write-buffer entries each
        kw.update(pools="channel")
        mshrs = channels * draw(st.sampled_from([1, 2, 4]))
        wbs = channels * draw(st.sampled_from([1, 2]))
    return contract_config(
        host_ports=shape, stacks=stacks, channels=channels, subarrays_per_channel=subs,
        active_per_channel=draw(st.integers(1, subs)),
        active_total=draw(st.sampled_from([0, 0, 1, 3])),
        admission=draw(st.sampled_from([1, 2, 3, 8, 256])),
        mshr_entries=mshrs, write_buffer_entries=wbs,
        queue_depth=draw(st.sampled_from([1, 2, 64])),
        mshr_merge=draw(st.booleans()), read_mode=read_mode, scheduler=sched,
        placement=draw(st.sampled_from(["interleave", "grouped", "contiguous"])),
        stack_select=draw(st.sampled_from(["interleave", "contiguous"])),
        page_buffers=draw(st.integers(0, 2)), buffer_hit_ticks=draw(st.integers(1, 12)),
        write_deadline_ticks=draw(st.sampled_from([1, 2, 5, 60, 1000])),
        write_timeout_policy=draw(st.sampled_from(["strict", "partial"])),
        channel_bw_gbps=draw(st.sampled_from([192.0, 20.0, 2.0])),
        media_mode=draw(st.sampled_from(["hbf", "hbf", "ssd"])),
        multiplane=mp, t_read_us=t_read, t_prog_us=t_prog, t_erase_us=t_erase,
        pages_per_block=draw(st.sampled_from([4, 256])), **kw)


@st.composite
def streams(draw, cfg, max_requests=48):
    """``(arrival, op, addr, nbytes)``: bursty or spaced arrivals, a few pages hammered or
    many spread, reads, writes or both, sector to whole-page sizes."""
    n = draw(st.integers(1, max_requests))
    npages = draw(st.sampled_from([1, 2, 5, 40]))
    stride = draw(st.sampled_from([1, 1, 3, cfg.channels * cfg.stacks]))
    wfrac = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    gaps = draw(st.sampled_from(["burst", "mixed", "spaced"]))
    t = 0
    arrival, op, addr, nbytes = [], [], [], []
    for _ in range(n):
        if gaps == "spaced" or (gaps == "mixed" and draw(st.booleans())):
            t += draw(st.integers(0, 60))
        page = draw(st.integers(0, npages - 1)) * stride
        size = draw(st.sampled_from([32, 32, 128, 1024, PAGE_BYTES]))
        off = draw(st.integers(0, (PAGE_BYTES - size) // 32)) * 32
        arrival.append(t)
        op.append(1 if draw(st.floats(0, 1)) < wfrac else 0)
        addr.append(cfg.base_address + page * PAGE_BYTES + off)
        nbytes.append(size)
    return (np.array(arrival, np.int64), np.array(op, np.int8), np.array(addr, np.int64),
            np.array(nbytes, np.int64))


@st.composite
def controller_cases(draw, multiplane=None, max_requests=48):
    """``(cfg, stream)``: a configuration and a stream on it."""
    cfg = draw(controller_configs(multiplane))
    return cfg, draw(streams(cfg, max_requests))


# ------------------------------------------------------------------------------ runs
def golden_run(cfg, stream) -> dict:
    """The golden model on ``stream``: the compiled run's columns, order and counters."""
    arrival, op, addr, nbytes = stream
    system = HbfSystem(cfg)
    reqs = [Request(i, "W" if op[i] else "R", int(addr[i]), int(nbytes[i]),
                    arrival=int(arrival[i])) for i in range(len(arrival))]
    for r in reqs:
        system.submit(r)
    system.close_input()
    system.run()
    return _system_outputs(system, reqs)


def _system_outputs(system, reqs=None) -> dict:
    """A finished golden system's outputs in the compiled run's form; ``reqs`` in
    submission order (default: the completed requests in a closed loop's submission order:
    by grant tick, then port, at most one grant per port per tick, G5 / G5')."""
    cfg = system.cfg
    end = system.t
    if reqs is None:
        reqs = sorted(system.completed, key=lambda r: (r.arrival, r.stack, r.ch))
    out = {}
    for col in REQUEST_COLUMNS:
        if col in ("tq", "ti", "tc", "entry_depth"):
            k = ("tq", "ti", "tc", "entry_depth").index(col)
            out[col] = np.array([r.entry_info[k] if r.entry_info else -1 for r in reqs])
        else:
            attr = {"stack": "stack", "channel": "ch", "subarray": "sub"}.get(col, col)
            out[col] = np.array([getattr(r, attr) for r in reqs])
    index = {id(r): i for i, r in enumerate(reqs)}
    out["order"] = np.array([index[id(r)] for r in system.completed])
    st_ = system.stats
    c = {k: st_[k] for k in ("page_cache_hits", "raw_events", "partial_programs",
                             "padding_bytes", "strict_errors", "media_errors",
                             "coverage_new_bytes", "page_programs_ok")}
    for cause in ("full", "raw", "pressure", "deadline", "drain"):
        c["flush_" + cause] = st_["flush_" + cause]
    stacks = system.stacks
    media = [s.media for s in stacks]
    c["mshr_hits"] = sum(s.mshr_hits for s in stacks)
    c["aggregation_wait_ticks"] = sum(s.agg_wait for s in stacks)
    c["mp_commands"] = sum(s.mp.commands for s in stacks if s.mp is not None)
    c["mp_grouped"] = sum(s.mp.grouped for s in stacks if s.mp is not None)
    for k in ("page_reads", "buffer_hits", "page_programs", "block_erases", "gc_relocations",
              "capacity_errors", "busy_ticks"):
        c[k] = sum(getattr(m, k) for m in media)
    c["valid_pages"] = sum(m.valid_pages() for m in media)
    c["completions"] = system.n_done
    c["last_completion_tick"] = system.last_completion
    c["first_arrival_tick"] = system.first_arrival or 0
    c["errors"] = system.errors
    c["steps"] = system.steps
    c["end_tick"] = end
    c["per_channel"] = [(s.stack, ch, s.ch_requests[ch], s.ch_ops[ch], s.ch_link_stall[ch])
                        for s in stacks for ch in range(cfg.channels)]
    out["counters"] = c
    return out


def compare_runs(want: dict, got: dict) -> None:
    """Assert two runs equal; the message names the first request or counter that differs."""
    for col in REQUEST_COLUMNS:
        w, g = np.asarray(want[col]).astype(np.int64), np.asarray(got[col]).astype(np.int64)
        diff = np.nonzero(w != g)[0]
        if len(diff):
            i = int(diff[0])
            raise AssertionError(f"request {i}: {col} golden {w[i]}, compiled {g[i]} "
                                 f"({len(diff)} requests differ)")
    w, g = np.asarray(want["order"]), np.asarray(got["order"])
    assert len(w) == len(g), f"{len(w)} golden responses, {len(g)} compiled"
    diff = np.nonzero(w != g)[0]
    if len(diff):
        i = int(diff[0])
        raise AssertionError(f"response {i}: golden request {w[i]}, compiled {g[i]}")
    wc, gc = want["counters"], dict(got["counters"])
    gc["per_channel"] = [tuple(r) for r in gc["per_channel"]]
    for k in wc:
        assert wc[k] == gc[k], f"counter {k}: golden {wc[k]}, compiled {gc[k]}"


def check_controller(case) -> None:
    """The golden model and the compiled engine on one case: every event equal."""
    cfg, stream = case
    compare_runs(golden_run(cfg, stream), run_compiled(cfg, *stream))


@st.composite
def port_race_cases(draw, max_requests=32):
    """``(cfg, stream)`` in the channel shape where the ports race for shared state in one
    cycle: bursts over pages of different channels (one page per channel, or one page read
    and written under a partition scheduler), pools of 1-3 entries, so that several ports
    allocate, stall, choose a pressure victim among entries allocated in one cycle, and free
    entries in one cycle (§4.2.3, §4.2.4, DP4, DP5)."""
    channels = draw(st.sampled_from([2, 4]))
    sched = draw(st.sampled_from(["fcfs", "read-priority"] + (
        ["partition-2r2w", "partition-1r3w"] if channels == 4 else [])))
    read_mode = draw(st.sampled_from(["demand", "aggregation"]))
    pools = draw(st.sampled_from(["stack", "stack", "channel"]))     # §4.5
    per = channels if pools == "channel" else 1
    cfg = contract_config(
        host_ports="channel", stacks=1, channels=channels, pools=pools,
        subarrays_per_channel=draw(st.sampled_from([1, 2])), active_per_channel=2,
        admission=256, mshr_entries=per * draw(st.integers(1, 3)),
        write_buffer_entries=per * draw(st.integers(1, 3)), scheduler=sched,
        read_mode=read_mode,
        read_agg_window_ticks=draw(st.sampled_from([0, 3, 10])),
        read_agg_threshold_bytes=draw(st.sampled_from([64, 4096])),
        mshr_merge=draw(st.booleans()), page_buffers=draw(st.integers(0, 1)),
        write_deadline_ticks=draw(st.sampled_from([1, 8, 1000])),
        write_timeout_policy=draw(st.sampled_from(["strict", "partial"])),
        t_read_us=0.02, t_prog_us=0.05, t_erase_us=0.05)
    n = draw(st.integers(2, max_requests))
    pages = draw(st.integers(1, 2 * channels))
    ops = draw(st.sampled_from([[0, 1], [0, 0, 1], [1]]))
    t = 0
    arrival, op, addr, nbytes = [], [], [], []
    for _ in range(n):
        if draw(st.integers(0, 3)) == 0:
            t += draw(st.integers(1, 30))
        arrival.append(t)
        op.append(draw(st.sampled_from(ops)))
        size = draw(st.sampled_from([32, 1024, PAGE_BYTES]))
        addr.append(cfg.base_address + draw(st.integers(0, pages - 1)) * PAGE_BYTES
                    + draw(st.integers(0, (PAGE_BYTES - size) // 1024)) * 1024)
        nbytes.append(size)
    return cfg, (np.array(arrival, np.int64), np.array(op, np.int8),
                 np.array(addr, np.int64), np.array(nbytes, np.int64))


# ------------------------------------------------------------------------------ directed
def _stream(cfg, requests):
    """``(op, logical page, offset, bytes, arrival)`` rows (the conformance suite's form) as
    a stream."""
    op = np.array([0 if r[0] == "R" else 1 for r in requests], np.int8)
    addr = np.array([cfg.base_address + r[1] * PAGE_BYTES + r[2] for r in requests], np.int64)
    return (np.array([r[4] for r in requests], np.int64), op, addr,
            np.array([r[3] for r in requests], np.int64))


#: Directed cases for orders that random streams rarely reach: (name, rule, configuration,
#: requests as (op, logical page, offset, bytes, arrival)).
DIRECTED = [
    ("frees-of-one-cycle-in-port-order", "DP4: ascending response port; DP2a: OR_c lowest index",
     dict(host_ports="channel", pools="stack", channels=2, subarrays_per_channel=1,
          mshr_entries=2,
          read_mode="aggregation", read_agg_window_ticks=3, read_agg_threshold_bytes=4096,
          t_read_us=0.02),
     (("R", 0, 0, 32, 0), ("R", 1, 0, 32, 0), ("R", 2, 0, 32, 200), ("R", 4, 0, 4096, 201))),
    ("same-page-read-and-write-in-one-cycle", "§4.2.4: reads dispatch before writes",
     dict(host_ports="channel", channels=4, scheduler="partition-2r2w", t_read_us=0.02,
          t_prog_us=0.05),
     (("R", 0, 0, 32, 0), ("W", 0, 0, 32, 0), ("R", 0, 64, 32, 1), ("W", 0, 64, 32, 1))),
    ("return-order-by-lowest-index", "DP7: C1 takes the lowest-index entry in RETURN",
     dict(host_ports="stack", channels=1, subarrays_per_channel=1, admission=8,
          mshr_entries=16, mshr_merge=False, queue_depth=1, page_buffers=0,
          channel_bw_gbps=2.0, t_read_us=0.05),
     (("R", 0, 0, 1024, 0),) + (("R", 0, 0, 32, 0),) * 6),
    ("a-channel-waits-for-its-own-pool", "§4.5 B2: a pool per channel, one head each",
     dict(host_ports="channel", channels=4, pools="channel", mshr_entries=4,
          write_buffer_entries=4, t_read_us=0.02, t_prog_us=0.05),
     (("R", 0, 0, 32, 0), ("R", 4, 0, 32, 0), ("R", 1, 0, 32, 0), ("R", 8, 0, 32, 1),
      ("W", 12, 0, 32, 1), ("W", 5, 0, 32, 2))),
    ("victims-of-two-pools-in-one-cycle", "§4.5 B3: one pressure victim per pool and cycle",
     dict(host_ports="channel", channels=4, pools="channel", write_buffer_entries=4,
          t_prog_us=0.05),
     (("W", 0, 0, 32, 0), ("W", 1, 0, 32, 0), ("W", 4, 0, 32, 3), ("W", 5, 0, 32, 3),
      ("W", 8, 0, 32, 3), ("W", 2, 0, 32, 3))),
    ("victim-among-entries-of-one-cycle", "DP5: the entry allocated first is the older",
     dict(host_ports="channel", pools="stack", channels=4, write_buffer_entries=2,
          t_prog_us=0.05),
     (("W", 0, 0, 32, 0), ("W", 1, 0, 32, 0), ("W", 2, 0, 32, 0), ("W", 3, 0, 32, 0))),
]


def directed_case(i: int):
    """``(cfg, stream)`` of :data:`DIRECTED` entry ``i``."""
    _name, _rule, kw, requests = DIRECTED[i]
    cfg = contract_config(**kw)
    return cfg, _stream(cfg, requests)


def directed_cases():
    """The directed cases as a strategy (for test_mutants.py's search)."""
    return st.sampled_from(range(len(DIRECTED))).map(directed_case)


def conformance_case(case):
    """``(cfg, stream)`` of a conformance case (tests/conformance/cases.py)."""
    cfg = case.cfg()
    return cfg, _stream(cfg, case.requests)


def conformance_cases():
    """The conformance suite's cases as a strategy (for test_mutants.py's search)."""
    from tests.conformance.cases import CASES

    return st.sampled_from(CASES).map(conformance_case)


# ------------------------------------------------------------------------------ closed loop
@st.composite
def closed_loop_cases(draw):
    """``(cfg, gpu, make)``: test_gpu_port.py's GPU programs and configurations (both
    shapes, 1-2 stacks, every placement, the partition schedulers) on the one contract, with
    small tables and slow links so that the controller's stalls feed back into the GPU."""
    from .cases import gpu_cases

    cfg, gpu, make, _delays = draw(gpu_cases())
    kw = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(HbfConfig)}
    kw.update(admission=draw(st.sampled_from([1, 2, 4, 256])),
              mshr_entries=draw(st.sampled_from([1, 2, 16])),
              write_buffer_entries=draw(st.sampled_from([1, 2, 8])),
              write_deadline_ticks=draw(st.sampled_from([2, 40, 1000])),
              channel_bw_gbps=draw(st.sampled_from([192.0, 4.0])),
              read_mode=draw(st.sampled_from(["demand", "aggregation"])),
              read_agg_window_ticks=draw(st.sampled_from([0, 5])),
              t_read_us=0.05, t_prog_us=0.1, t_erase_us=0.2)
    # §4.5: a pool per channel (the channel shape's default) where the counts split evenly
    C = kw["channels"]
    split = kw["mshr_entries"] % C == 0 and kw["write_buffer_entries"] % C == 0
    kw.update(pools="channel" if kw["host_ports"] == "channel" and C > 1 and split
              and draw(st.booleans()) else "stack")
    kw.pop("pipeline", None)
    return contract_config(**kw), gpu, make


def check_closed_loop(case) -> None:
    """The golden closed loop stepped tick by tick (``run_stepped``) and the compiled one,
    stepped tick by tick and skipping idle ticks: every request (in grant order) equal, the
    response order, the counters (the skipping run's evaluated cycles aside) and the GPU's
    result figures."""
    from hbfsim.engine import run_compiled_closed_loop
    from hbfsim.engine_standin import gpu_figures
    from hbfsim.model.gpu import GpuProgram
    from hbfsim.model.gpu_port import run_stepped

    cfg, gpu, make = case
    result = run_stepped(cfg, GpuProgram(make), gpu, keep=True)
    want = _system_outputs(result.system)
    for skip in (False, True):
        got = run_compiled_closed_loop(cfg, GpuProgram(make), gpu, skip=skip)
        if skip:
            got["counters"]["steps"] = want["counters"]["steps"]
        compare_runs(want, got)
        assert gpu_figures(result) == got["gpu"], f"GPU result figures (skip {skip})"
