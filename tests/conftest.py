import os

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.controller import Request
from hbfsim.model.system import HbfSystem


#: Co-simulation builds of the test suite compile the design at -O0 (cosim/runner.py
#: OPT_ENV): the shared scenarios simulate 31,019 cycles in all (1.9 s at -Os, 4.4 s at -O0,
#: measured) while -O0 takes ~15 s off each Verilator build (docs/cosim.md "Build"). A level
#: set by the caller is kept.
os.environ.setdefault("HBFSIM_COSIM_OPT", "-O0")


def stack_config(**kw):
    """``load_config`` in the stack shape (one request and one response port per stack,
    docs/timing-contract.md §1), for tests whose requests or expectations are one port's;
    a ``host_ports`` given in ``kw`` wins."""
    return load_config(**({"host_ports": "stack"} | kw))


def make_reqs(spec, cfg):
    """Build requests from ``(op, page, offset, nbytes, tick[, data])`` tuples."""
    out = []
    for i, s in enumerate(spec):
        op, page, off, n, tick = s[:5]
        data = s[5] if len(s) > 5 else (bytes([(i % 255) + 1]) * n if op == "W" else None)
        out.append(Request(i, op, cfg.base_address + page * PAGE_BYTES + off, n, 0, tick,
                           data))
    return out


def run_model(cfg, reqs):
    system = HbfSystem(cfg)
    system.run_requests(reqs)
    return system


@pytest.fixture
def small_cfg():
    """A small, fast configuration: 1 stack, 2 channels, 4 subarrays each."""
    return load_config(channels=2, subarrays_per_channel=4, active_per_channel=4,
                       capacity_bytes=2 * 4 * 256 * PAGE_BYTES * 16)


def pytest_addoption(parser):
    parser.addoption("--waves", action="store_true",
                     help="write a VCD and GTKWave save file per RTL test under waves/")


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs on one "
                            "worker (tests/conftest.py, pytest_collection_modifyitems)")
    if config.getoption("--waves"):
        os.environ["HBFSIM_WAVES"] = "1"


def _shared_scope(item) -> str | None:
    """The group of tests ``item`` must run with: those sharing its widest fixture.

    A session-scoped fixture groups every test that uses it (``cosim_results``: the shared
    co-simulation builds); a module-scoped one groups its module. None: no such fixture.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    session, module = [], False
    for name in item.fixturenames:
        for d in info.name2fixturedefs.get(name, ()):
            if not d.baseid:    # pytest's own (tmp_path_factory) and plugins' fixtures
                continue
            if d.scope == "session":
                session.append(name)
            elif d.scope in ("package", "module"):
                module = True
    if session:
        return "session:" + "+".join(sorted(set(session)))
    return "module:" + item.nodeid.split("::")[0] if module else None


def pytest_collection_modifyitems(config, items):
    """``make test`` runs the suite on every core (pytest-xdist, ``--dist loadgroup``): the
    tests that share a session- or module-scoped fixture go to one worker, so that the
    fixture (the co-simulation builds above all) runs once; every other test is scheduled
    on its own."""
    for item in items:
        group = _shared_scope(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
