"""The streamed compiled closed loop (hbfsim/engine_stream.py) against the golden ClosedLoop.

Records are retired in blocks of 8 requests and poisoned instead of freed, so a record read
after its request was answered would change the results; the trace (level 2) and the
statistics must still be the golden model's. A run that frees them must hold no block but
the last at the end. With ``record=True`` the RequestRecords are the golden ones. The
latency histogram's percentiles equal the array's.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import load_config
from hbfsim.engine_stream import run_streamed
from hbfsim.model.gpu import run_closed_loop
from hbfsim.model.stats import LatencyCounts, collect_stats, percentiles
from hbfsim.model.trace import TraceWriter
from hbfsim.model.workloads import get_workload

CASES = {
    "conservation": ("conservation", {}, {}),
    "mshr-grid-stack": ("mshr_grid", {"pages": 4}, {"host_ports": "stack"}),
    "rw-isolation-two-stacks": ("rw_isolation", {}, {"stacks": 2, "channels": 4,
                                                     "subarrays_per_channel": 4,
                                                     "channel_bw_gbps": 4.0}),
    "llm-decode": ("llm_decode", {"scale": 128, "layers": 1}, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_streamed_equals_the_golden_closed_loop(tmp_path, case):
    name, params, keys = CASES[case]
    cfg = load_config(**keys)
    work = get_workload(name, cfg, **params)
    if work.config:
        cfg = load_config(**{**work.config, **keys})
        work = get_workload(name, cfg, **params)
    golden = TraceWriter(tmp_path / "golden.csv", 2)
    res = run_closed_loop(cfg, work, trace=golden, record=True)
    golden.close()
    mine = TraceWriter(tmp_path / "mine.csv", 2)
    seen = []
    stats, fig, names, held, c, records = run_streamed(
        cfg, work, trace=mine, progress=seen.append, every=7, block_shift=3, poison=True,
        record=True)
    mine.close()
    n = res.requests
    assert (tmp_path / "mine.csv").read_bytes() == (tmp_path / "golden.csv").read_bytes()
    # record=True: the golden RequestRecords, field for field, in completion order
    assert len(records) == n and records == res.records
    assert [tuple(map(type, r)) for r in records] == [tuple(map(type, r)) for r in res.records]
    assert stats == collect_stats(res.system)
    assert names == [k["name"] for k in res.kernels]
    assert fig["end_tick"] == res.end_tick and fig["requests"] == n
    assert seen == [min(k, n) for k in range(7, n + 7, 7)]
    # freed, not poisoned: only the last, partly filled block of each table is left
    stats2, _, _, held, _, none = run_streamed(cfg, work, every=5, block_shift=3)
    assert stats2 == stats and none is None
    assert held == (int(n % 8 != 0), int(n % 8 != 0)) and n > 16


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=300), st.integers(1, 3))
def test_latency_counts_give_the_arrays_percentiles(values, split):
    cfg = load_config()
    counts = LatencyCounts()
    for part in np.array_split(np.array(values, dtype=np.int64), split):
        counts.add(part)
    assert len(counts) == len(values)
    assert percentiles(counts, cfg) == percentiles(values, cfg)


def test_latency_counts_mean_is_numpys_on_large_values():
    cfg = load_config()
    rng = np.random.default_rng(5)
    values = rng.integers(0, 1 << 30, size=200_000)
    counts = LatencyCounts()
    counts._MIN_MERGE = 8                  # merge often
    for part in np.array_split(values, 50):
        counts.add(part)
    got = percentiles(counts, cfg)
    assert got == percentiles(values, cfg)
    assert math.isclose(got["mean"], float(values.mean()), rel_tol=0)


OPEN = {
    "channel": {},
    "stack-shape": {"host_ports": "stack"},
    "two-stacks-slow-link": {"stacks": 2, "channels": 4, "subarrays_per_channel": 4,
                             "write_buffer_entries": 4, "channel_bw_gbps": 4.0,
                             "mshr_entries": 8, "admission": 16},
    "aggregation": {"read_mode": "aggregation", "read_agg_window_ticks": 30},
}


def _stream(seed, n=300):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.choice([0, 0, 1, 3, 200, 5000], size=n))
    size = rng.choice([32, 64, 128], size=n)
    off = rng.integers(0, 4096 // 128, size=n) * 128
    addr = (256 << 30) + rng.integers(0, 24, size=n) * 4096 + off
    op = (rng.random(n) < 0.25).astype(np.int8)
    return arrival.astype(np.int64), op, addr.astype(np.int64), size.astype(np.int64)


@pytest.mark.parametrize("case", OPEN)
@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_streamed_open_loop_equals_the_golden_system(tmp_path, case, chunk):
    from hbfsim.engine_stream import run_open_streamed
    from hbfsim.model.controller import Request
    from hbfsim.model.system import HbfSystem

    cfg = load_config(**OPEN[case])
    arrival, op, addr, size = _stream(len(case) + chunk)
    n = len(arrival)
    ids = np.arange(n) * 3 + 1
    source = np.arange(n) % 5
    golden = TraceWriter(tmp_path / "golden.csv", 2)
    system = HbfSystem(cfg, trace=golden, keep=False)
    for i in range(n):
        system.submit(Request(int(ids[i]), "W" if op[i] else "R", int(addr[i]), int(size[i]),
                              int(source[i]), int(arrival[i])))
    system.close_input()
    system.run()
    golden.close()
    mine = TraceWriter(tmp_path / "mine.csv", 2)
    stats, c, _ = run_open_streamed(cfg, ids, op, addr, size, arrival, source, trace=mine,
                                    every=3, chunk=chunk, block_shift=2, poison=True)
    mine.close()
    assert (tmp_path / "mine.csv").read_bytes() == (tmp_path / "golden.csv").read_bytes()
    assert stats == collect_stats(system)
    assert c["end_tick"] == system.t
    _, _, held = run_open_streamed(cfg, ids, op, addr, size, arrival, source, chunk=chunk,
                                   block_shift=2)
    assert held == int(n % 4 != 0)
