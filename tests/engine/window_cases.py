"""The serving level's HBF characterization on both engines: the cases and the check.

``serve/characterize.py``'s ``measure`` (bulk: every request at tick 0; a closed window:
each response submits the next request with arrival = its tick, ``engine/window_source.cpp``
on the compiled engine) and ``measure_mixed`` (reads and writes interleaved, open loop) run
each case on the golden model and on the compiled engine; every figure they return must be
equal. test_window_source.py runs the cases, test_mutants.py the window source's variants.
"""

from hypothesis import strategies as st

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.serve import characterize as ch

#: small stacks (2 channels, W = 64 pages), the modes where a window's refill tick and its
#: close (drain, W2) show: both host-port shapes, aggregation reads, the write-drain
#: scheduler, a short write deadline with a small write buffer
CONFIGS = {
    "channel": {},
    "stack": {"host_ports": "stack"},
    "aggregation": {"read_mode": "aggregation", "read_agg_window_ticks": 30},
    "write-drain": {"scheduler": "write-drain"},
    "short-deadline": {"write_buffer_entries": 2, "write_deadline_ticks": 200},
}

#: window sizes: None is the bulk transfer, 10**6 a window longer than the transfer (bulk)
WINDOWS = (None, 1, 2, 7, 32, 10**6)

#: (pattern, op, transfer in waves)
PATTERNS = (("stream", "R", 1), ("kv", "R", 1), ("kv", "W", 1 / 2))


def config(name):
    return load_config(profile="reference", channels=2, **CONFIGS[name])


def _runs(cfg, pattern, waves):
    nbytes = max(1, round(waves * ch.wave_pages(cfg))) * PAGE_BYTES
    return ch.stream_runs(nbytes) if pattern == "stream" else ch.kv_runs(cfg, nbytes, 16384)


def _cases():
    out = []
    for name in CONFIGS:
        for pattern, op, waves in PATTERNS:
            for i, window in enumerate(WINDOWS):
                # whole pages, or a page cut into 4 KiB, 1 KiB ... in rotation
                sizes = PAGE_BYTES if i % 2 == 0 else (PAGE_BYTES, 1024, 512)
                out.append(("measure", name, pattern, op, waves, window, sizes))
        out.append(("mixed", name, "stream+kv", None, 1, None, PAGE_BYTES))
    return out


CASES = _cases()


def check_measure(case):
    """Run ``case`` on both engines; every figure must be equal."""
    kind, name, pattern, op, waves, window, sizes = case
    cfg = config(name)
    if kind == "mixed":
        reads, writes = _runs(cfg, "stream", 2 * waves), _runs(cfg, "kv", waves)
        got = [ch.measure_mixed(cfg, reads, writes, request_bytes=sizes, engine=e)
               for e in ("reference", "compiled")]
    else:
        runs = _runs(cfg, pattern, waves)
        got = [ch.measure(cfg, op, runs, request_bytes=sizes, outstanding=window, engine=e)
               for e in ("reference", "compiled")]
    assert got[1] == got[0], f"{case}: compiled {got[1]} != reference {got[0]}"


def window_cases():
    """The cases as a strategy (test_mutants' search)."""
    return st.sampled_from(CASES)
