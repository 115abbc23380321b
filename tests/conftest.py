import os

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.controller import Request
from hbfsim.model.system import HbfSystem


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
    if config.getoption("--waves"):
        os.environ["HBFSIM_WAVES"] = "1"
