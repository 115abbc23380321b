"""The fused single-stack loop must match the phase-by-phase reference loop event for event."""

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, SCHEDULERS, load_config
from hbfsim.model.controller import Request
from hbfsim.model.requests import default_workload
from hbfsim.model.stats import collect_stats
from hbfsim.model.system import HbfSystem

FIELDS = ("t_accept", "t_map", "t_done", "mshr_hit", "buffer_hit", "cache_hit", "error",
          "data")


def both(cfg, reqs):
    out = []
    for engine in ("reference", "fused"):
        rs = copy.deepcopy(reqs)
        system = HbfSystem(cfg, keep=False)
        system.engine = engine
        system.run_requests(rs)
        s = collect_stats(system)
        s.pop("per_channel")
        out.append(([tuple(getattr(r, f) for f in FIELDS) for r in rs], s, system.steps))
    return out


def test_default_workload_identical():
    cfg = load_config()
    (a, sa, na), (b, sb, nb) = both(cfg, default_workload(cfg))
    assert a == b and sa == sb and na == nb


sectors = st.lists(st.tuples(st.sampled_from("RRRW"), st.integers(0, 40), st.integers(0, 127),
                             st.integers(0, 30), st.sampled_from([32, 64, 128, 4096])),
                   min_size=1, max_size=120)


@settings(max_examples=50, deadline=None)
@given(ops=sectors, sched=st.sampled_from(SCHEDULERS), agg=st.booleans(),
       merge=st.booleans(), cache=st.sampled_from([0, 4]), adm=st.sampled_from([4, 64]),
       tot=st.sampled_from([0, 3]))
def test_random_identical(ops, sched, agg, merge, cache, adm, tot):
    cfg = load_config(channels=4, subarrays_per_channel=4, active_per_channel=2,
                      active_total=tot,
                      admission=adm, mshr_entries=8, write_buffer_entries=3, queue_depth=3,
                      scheduler=sched, read_mode="aggregation" if agg else "demand",
                      read_agg_window_ticks=40, mshr_merge=merge, page_cache_pages=cache,
                      write_timeout_policy="partial", write_deadline_ticks=300,
                      channel_bw_gbps=8.0, t_read_us=0.5, t_prog_us=2.0, t_erase_us=4.0,
                      pages_per_block=4, capacity_bytes=4 * 4 * 4 * PAGE_BYTES * 8)
    reqs, t = [], 0
    for i, (op, page, sector, gap, n) in enumerate(ops):
        t += gap
        off = 0 if n == PAGE_BYTES else (32 * sector) % (PAGE_BYTES - n + 1)
        reqs.append(Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, t,
                            bytes([i % 200 + 1]) * n if op == "W" else None))
    (a, sa, na), (b, sb, nb) = both(cfg, reqs)
    assert a == b
    assert sa == sb
    assert na == nb


def test_closed_loop_callbacks_identical():
    """Requests submitted from the response callback see the same timing in both loops."""
    cfg = load_config(channels=2, subarrays_per_channel=2, admission=8, page_buffers=2)
    results = []
    for engine in ("reference", "fused"):
        system = HbfSystem(cfg, keep=False)
        system.engine = engine
        issued = []

        def cb(req, t, system=system, issued=issued):
            i = len(issued)
            if i < 200:
                r = Request(i, "R", cfg.base_address + ((i * 7) % 23) * PAGE_BYTES + 32 * (i % 5),
                            32, 0, t + 1)
                issued.append(r)
                system.submit(r)
                if len(issued) == 200:
                    system.close_input()

        system.user_cb = cb
        for k in range(4):
            r = Request(10_000 + k, "R", cfg.base_address + k * PAGE_BYTES, 32, 0, 0)
            system.submit(r)
        system.run()
        results.append([(r.t_accept, r.t_done, r.mshr_hit, r.buffer_hit) for r in issued])
    assert results[0] == results[1] and len(results[0]) == 200
