"""The compiled closed loop (engine/closed_loop.cpp: the compiled GpuPort stepped tick by tick
against the compiled system) against the golden one (model/gpu_port.py run_stepped, which
the reference ClosedLoop equals): every request in grant order, the response order, every
counter and the GPU's result figures."""

from hypothesis import given, settings

from .controller_cases import check_closed_loop, closed_loop_cases


@settings(max_examples=30, deadline=None)
@given(closed_loop_cases())
def test_closed_loop_equal_event_for_event(case):
    check_closed_loop(case)
