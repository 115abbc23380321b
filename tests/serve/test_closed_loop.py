"""The fixed-concurrency client workload (serve/closed_loop.py) and its --workload spec."""

import pytest

from hbfsim.serve.closed_loop import closed_loop
from hbfsim.serve.run import run_serving
from hbfsim.serve.traces import load_workload
from hbfsim.serve.workload import WorkloadError

RUN = dict(model="llama-3.1-8b", gpu="h100", gpus=1, hbm=5, hbf=0, hbm_stack="hbm3",
           dtype="fp8", scheduler="fcfs", max_batch=64, max_tokens=8192)


def test_users_send_back_to_back_with_prompts_of_their_own():
    with pytest.raises(WorkloadError, match="parameter 'output' must be an integer >= 1"):
        closed_loop(1, 1, 10, 0)
    w = load_workload("closed-loop:users=3,requests=4,input=1000,output=7")
    assert w == closed_loop(3, 4, 1000, 7)
    assert len(w.turns) == 12 and w.sessions == 3
    for t in w.turns:
        assert (t.input_tokens, t.output_tokens, t.think_s) == (1000, 7, 0.0)
        assert t.arrival_s == (0.0 if t.index == 0 else None)
    hashes = [h for t in w.turns for h in t.block_hashes]
    assert len(hashes) == len(set(hashes)) == 12 * 2


def test_one_user_runs_its_requests_one_after_the_other():
    """One user: each request starts when the previous completes, so the run lasts R single
    requests and every request has the lone request's first-token latency."""
    one = run_serving(dict(RUN, workload="closed-loop:users=1,requests=1,input=300,output=20"))
    four = run_serving(dict(RUN, workload="closed-loop:users=1,requests=4,input=300,output=20"))
    assert four["completion_s"] == pytest.approx(4 * one["completion_s"], rel=1e-9)
    assert four["ttft_s"]["p99"] == pytest.approx(one["ttft_s"]["p50"], rel=1e-9)
    assert four["max_running"] == 1


def test_never_more_requests_in_flight_than_users():
    r = run_serving(dict(RUN, workload="closed-loop:users=5,requests=3,input=300,output=20"))
    assert r["max_running"] == 5 and r["completed"] == 15


@pytest.mark.parametrize("spec, word", [
    ("closed-loop:users=0,requests=1,input=10,output=1", "parameter 'users' must be an "
                                                         "integer >= 1, not '0'"),
    ("closed-loop:users=2,requests=1,input=10", "missing parameter 'output'"),
    ("closed-loop:users=2,requests=1,input=10,output=1,seed=3", "unknown parameter 'seed'"),
    ("closed-loop:users=2.5,requests=1,input=10,output=1", "'users' must be an integer "
                                                           ">= 1, not '2.5'"),
    ("closed-loop:users=2,requests,input=10,output=1", "'requests' must be key=value"),
])
def test_bad_specs_are_one_line_naming_the_parameter(spec, word):
    with pytest.raises(WorkloadError, match=word) as e:
        load_workload(spec)
    assert "\n" not in str(e.value) and spec in str(e.value)
