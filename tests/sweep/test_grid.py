"""hbfsim/sweep/grid.py: parsing, validation and expansion of grid files."""

import pytest

from hbfsim.sweep.grid import GridError, parse_grid
from hbfsim.sweep.points import identify

GRID = """
[sweep]
name = "g"
workloads = ["conservation", "default"]
[base]
profile = "reference"
[params]
[grid]
channels = [1, 2]
t_read_us = [5, 15, 25]
"""


def test_points_are_the_product_times_workloads_in_file_order():
    pts = parse_grid(GRID).points()
    assert len(pts) == 2 * 3 * 2
    assert [p.index for p in pts] == list(range(12))
    assert [(p.values["channels"], p.values["t_read_us"], p.workload) for p in pts[:4]] == [
        (1, 5, "conservation"), (1, 5, "default"), (1, 15, "conservation"),
        (1, 15, "default")]
    assert pts[0].settings == {"profile": "reference", "channels": 1, "t_read_us": 5}
    assert len({identify(p)[0].id for p in pts}) == 12


def test_ids_depend_on_what_defines_a_point_not_on_its_neighbours():
    a = {(p.workload, p.values["channels"], p.values["t_read_us"]): identify(p)[0].id
         for p in parse_grid(GRID).points()}
    smaller = parse_grid(GRID.replace("[5, 15, 25]", "[15]")).points()
    for p in smaller:
        assert a[(p.workload, p.values["channels"], 15)] == identify(p)[0].id
    other_base = parse_grid(GRID.replace('"reference"', '"ocp-grade3"')).points()
    assert not {identify(p)[0].id for p in other_base} & set(a.values())


def test_param_prefix_addresses_workload_parameters():
    g = parse_grid('[sweep]\nworkloads = ["media-saturation"]\n[params]\nchannels_max = 2\n'
                   '[grid]\n"param.producers" = [8, 16]\n')
    pts = g.points()
    assert [p.params for p in pts] == [{"channels_max": 2, "producers": 8},
                                       {"channels_max": 2, "producers": 16}]
    assert all(p.settings == {} for p in pts)


def test_no_grid_table_is_one_point_per_workload():
    pts = parse_grid('[sweep]\nworkloads = ["default"]\n').points()
    assert len(pts) == 1 and pts[0].values == {}


@pytest.mark.parametrize("text, needle", [
    ("[sweep\n", "not valid TOML"),
    ("[other]\n", "unknown table or key 'other'"),
    ("x = 1\n", "unknown table or key 'x'"),
    ("sweep = 3\n", "'sweep' must be a table"),
    ("[sweep]\nkind = 'fpga'\n", "kind must be one of device"),
    ("[sweep]\nbogus = 1\n", "unknown key 'bogus'"),
    ("[sweep]\nname = '../x'\n", "plain folder name"),
    ("[sweep]\nname = ''\n", "plain folder name"),
    ("[sweep]\nworkloads = []\n", "non-empty list"),
    ("[sweep]\nworkloads = [1]\n", "non-empty list"),
    ("[sweep]\nworkloads = ['a', 'a']\n", "lists a name twice"),
    ("[grid]\nchannels = 2\n", "'channels' must be a non-empty list"),
    ("[grid]\nchannels = []\n", "'channels' must be a non-empty list"),
    ("[grid]\nchannels = [1, 1]\n", "lists a value twice"),
    ("[grid]\nchannels = [[1], [2]]\n", "single values"),
    ("[grid]\nt_read_us = [inf]\n", "not finite"),
    ("[grid]\nt_read_us = [nan]\n", "not finite"),
    ("[base]\nt_read_us = inf\n", "not finite"),
    ("[base]\nx = {a = 1}\n", "must be a value, not a table"),
    ("[base]\nchannels = 2\n[grid]\nchannels = [1]\n", "also fixed in [base]"),
    ("[params]\np = 2\n[grid]\n'param.p' = [1]\n", "also fixed in [params]"),
    ("[grid]\n'param.' = [1]\n", "names no parameter"),
])
def test_bad_grids_are_refused_naming_the_key(text, needle):
    with pytest.raises(GridError) as e:
        parse_grid(text, "g.toml")
    msg = str(e.value)
    assert needle in msg and msg.startswith("g.toml") and "\n" not in msg
