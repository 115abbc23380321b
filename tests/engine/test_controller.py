"""The compiled controller (engine/controller/, engine/system.cpp) against the golden model
(model/controller/, stepped by model/loop.py), event for event:
every request's accept, dispatch, enqueue, command, completion and response ticks, its
flags, the response order and every statistics counter."""


import numpy as np
import pytest
from hypothesis import given, settings


from hbfsim.engine import run_compiled
from tests.conformance.cases import CASES

from .controller_cases import (DIRECTED, check_controller, conformance_case,
                               contract_config, controller_cases, directed_case,
                               port_race_cases)


@settings(max_examples=80, deadline=None)
@given(controller_cases())
def test_controller_equal_event_for_event(case):
    check_controller(case)


@settings(max_examples=40, deadline=None)
@given(port_race_cases())
def test_channel_shape_port_races_equal(case):
    check_controller(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance_cases_equal(case):
    check_controller(conformance_case(case))


@pytest.mark.parametrize("i", range(len(DIRECTED)), ids=lambda i: DIRECTED[i][0])
def test_directed_cases_equal(i):
    check_controller(directed_case(i))




@pytest.mark.parametrize("column, value, message", [
    ("op", "X", "request 1: op must be R or W, not 'X'"),
    ("addr", 0, "request 1: address 0 is outside the HBF range"),
    ("nbytes", 0, "request 1: size 0 is not 1..4096 bytes inside its page"),
    ("arrival", -1, "request 1: arrival tick -1 is earlier than the previous request's 0"),
])
def test_bad_request_is_named(column, value, message):
    cfg = contract_config()
    stream = {"arrival": [0, 0], "op": ["R", "R"], "addr": [cfg.base_address] * 2,
              "nbytes": [32, 32]}
    stream[column] = list(stream[column])
    stream[column][1] = value
    with pytest.raises(ValueError) as e:
        run_compiled(cfg, stream["arrival"], np.array(stream["op"]), stream["addr"],
                     stream["nbytes"])
    assert str(e.value) == message


def test_ids_name_requests_and_come_back_only_when_given():
    # ids name a refused request; without them it is named by its row, and the result holds
    # the stream's columns given, no id column made up and no source (docs/engine.md)
    cfg = contract_config()
    addr = [cfg.base_address, 0]
    with pytest.raises(ValueError) as e:
        run_compiled(cfg, [0, 0], [0, 0], addr, [32, 32], ids=[100, 101])
    assert str(e.value) == "request 101: address 0 is outside the HBF range"
    ok = [cfg.base_address] * 2
    given = run_compiled(cfg, [0, 0], [0, 0], ok, [32, 32], ids=[100, 101])
    assert given["id"].tolist() == [100, 101] and "source" not in given
    plain = run_compiled(cfg, [0, 0], [0, 0], ok, [32, 32])
    assert "id" not in plain and "source" not in plain
    assert plain["addr"].tolist() == ok and plain["t_done"].tolist() == given["t_done"].tolist()


@pytest.mark.parametrize("code", [2, -1, 256, 257])
def test_bad_op_code_is_named(code):
    # numeric op codes are 0 (R) and 1 (W); one that an int8 would wrap into them (256 -> 0,
    # 257 -> 1) is refused too, not run as a read or a write
    cfg = contract_config()
    op = np.array([0, code], np.int64)
    with pytest.raises(ValueError) as e:
        run_compiled(cfg, [0, 0], op, [cfg.base_address] * 2, [32, 32])
    assert str(e.value) == f"request 1: op must be R or W, not {code}"
