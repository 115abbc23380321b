"""A compiled open-loop run's outputs as the golden model's: hbf-trace-v1 at levels 1 and 2
byte for byte (hbfsim.engine.trace_compiled, through the golden TraceWriter) and the
statistics dict (hbfsim.engine.compiled_stats, through the golden collect_stats)."""

import pytest
from hypothesis import HealthCheck, given, settings

from hbfsim.engine import run_compiled, trace_compiled
from hbfsim.model.controller import Request
from hbfsim.model.system import HbfSystem
from hbfsim.model.trace import TraceWriter

from .controller_cases import controller_cases


@pytest.mark.parametrize("level", [1, 2])
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=controller_cases(max_requests=24))
def test_trace_byte_for_byte(tmp_path, level, case):
    cfg, (arrival, op, addr, nbytes) = case
    golden, compiled = tmp_path / "golden.csv", tmp_path / "compiled.csv"
    for p in (golden, compiled):
        p.unlink(missing_ok=True)
    tw = TraceWriter(golden, level)
    system = HbfSystem(cfg, trace=tw)
    for i in range(len(arrival)):
        system.submit(Request(i, "W" if op[i] else "R", int(addr[i]), int(nbytes[i]),
                              source=i % 3, arrival=int(arrival[i])))
    system.close_input()
    system.run()
    tw.close()
    tw = TraceWriter(compiled, level)
    trace_compiled(tw, cfg, run_compiled(cfg, arrival, op, addr, nbytes), op, addr, nbytes,
                   arrival, source=[i % 3 for i in range(len(arrival))])
    tw.close()
    assert compiled.read_bytes() == golden.read_bytes()


@settings(max_examples=25, deadline=None)
@given(case=controller_cases(max_requests=24))
def test_statistics_equal(case):
    """collect_stats of a compiled run (hbfsim.engine.compiled_stats) is the golden model's
    dict, every figure and per-channel row."""
    from hbfsim.engine import compiled_stats
    from hbfsim.model.stats import collect_stats

    cfg, (arrival, op, addr, nbytes) = case
    system = HbfSystem(cfg)
    for i in range(len(arrival)):
        system.submit(Request(i, "W" if op[i] else "R", int(addr[i]), int(nbytes[i]),
                              arrival=int(arrival[i])))
    system.close_input()
    system.run()
    run = run_compiled(cfg, arrival, op, addr, nbytes)
    assert compiled_stats(cfg, run, op, nbytes, arrival) == collect_stats(system)


def test_results_keep_their_columns_across_calls():
    # the output columns' memory is reused by later calls once a result is freed
    # (engine/column_pool.hpp); a result still held keeps its values through them
    import numpy as np

    from hbfsim.engine import REQUEST_COLUMNS

    from .controller_cases import contract_config
    cfg = contract_config()
    n = 4096
    i = np.arange(n, dtype=np.int64)

    def stream(pages):
        return (i, (i % 5 == 0).astype(np.int8), cfg.base_address + (i // 8 % pages) * 4096
                + 32 * (i % 8), np.full(n, 32, np.int64))

    held = run_compiled(cfg, *stream(512))
    kept = {k: held[k].copy() for k in REQUEST_COLUMNS + ("order",)}
    for pages in (7, 64, 3):          # each call frees the one before: its memory returns
        other = run_compiled(cfg, *stream(pages))
        assert not np.array_equal(other["t_done"], kept["t_done"])
    for k, v in kept.items():
        assert np.array_equal(held[k], v), k
