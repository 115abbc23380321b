"""The compiled GPU port (engine/gpu_port.cpp, gpu_issue.cpp) against model/gpu_port.py,
event for event, under a stand-in controller that answers after random delays."""

import numpy as np
import pytest
from hypothesis import given, settings

from hbfsim.config import load_config
from hbfsim.engine import compiled_gpu_port, program_arrays
from hbfsim.model.gpu import GpuConfig, GpuError, GpuProgram, Kernel, Producer

from .cases import check_gpu, gpu_cases


@settings(max_examples=120, deadline=None)
@given(gpu_cases())
def test_gpu_port_equal_event_for_event(case):
    check_gpu(case)


def test_empty_program_is_finished_at_once():
    cfg = load_config()
    port = compiled_gpu_port(cfg, GpuProgram([]))
    assert port.exhausted and port.finished and port.next_tick() is None
    assert port.result()["requests"] == 0


def test_stepping_back_raises_the_models_error():
    cfg = load_config(host_ports="stack")
    prog = GpuProgram(lambda: [Kernel("k", [Producer([("R", cfg.base_address, 32)] * 3)])])
    port = compiled_gpu_port(cfg, prog)
    port.grants(0)
    with pytest.raises(GpuError, match="stepped to tick 0 after tick 0"):
        port.grants(0)
    with pytest.raises(GpuError, match="request 5, which is not outstanding"):
        port.respond(5, 1)


def test_bad_program_arrays_name_the_field():
    cfg = load_config()
    arrays = program_arrays(GpuProgram([Kernel("k", [Producer([("R", cfg.base_address, 32)])])]))
    arrays["producer_bound"] = np.array([0])
    with pytest.raises(GpuError, match="producer 0: bound must be a positive integer, not 0"):
        compiled_gpu_port(cfg, arrays, GpuConfig())
