"""Bad configuration files and model configs (--model), and odd configurations that are
valid (the corpus: tests/bad_input/harness.py)."""

from __future__ import annotations

import pytest

from tests.bad_input.harness import MODEL_OK, _case, _run

# ---------------------------------------------------------------- configuration files
CONFIG_BAD = [
    ("channels = 5", r"channels must be 1, 2, 4, 8 or 16, not 5"),
    ("channels = 0", r"channels must be 1, 2, 4, 8 or 16"),
    ("channels = -2", r"channels must be"),
    ("channels = 2.0", r"channels must be an integer, not 2.0"),
    ("channels = '2'", r"channels must be an integer, not '2'"),
    ("channels = true", r"channels must be an integer, not True"),
    ("channels = [2]", r"channels must be an integer"),
    ("channels = 64", r"set experimental_channels"),
    ("experimental_channels = true\nchannels = 65", r"channels must be 1..64"),
    ("stacks = 0", r"stacks must be positive, not 0"),
    ("stacks = 99999999999999999999", r"stacks must be at most"),
    ("subarrays_per_channel = 0", r"subarrays_per_channel must be positive"),
    ("active_per_channel = -1", r"active_per_channel must be positive"),
    ("active_total = -1", r"active_total must be non-negative"),
    ("admission = 0", r"admission must be positive"),
    ("admission = 100000000000000000000", r"admission must be at most"),
    ("mshr_entries = 0", r"mshr_entries must be positive"),
    ("mshr_merge = 1", r"mshr_merge must be true or false, not 1"),
    ("mshr_merge = 'yes'", r"mshr_merge must be true or false"),
    ("queue_depth = 0", r"queue_depth must be positive"),
    ("placement = 'diagonal'", r"placement must be one of"),
    ("placement = 7", r"placement must be a string, not 7"),
    ("placement = 'explicit'", r"explicit_map must list"),
    ("placement = 'explicit'\nexplicit_map = [[0, 10, 5]]", r"explicit_map channel 5"),
    ("placement = 'explicit'\nexplicit_map = [[10, 0, 0]]", r"explicit_map range \[10, 0\]"),
    ("explicit_map = 3", r"explicit_map must be a list"),
    ("explicit_map = [[0, 1]]", r"explicit_map entries must be"),
    ("explicit_map = [[0, 1, 'a']]", r"explicit_map entries must be"),
    ("explicit_map = [[0, 1, 100000000000000000000000]]", r"explicit_map entry .* range"),
    ("group_pages = 0", r"group_pages must be positive"),
    ("stack_select = 'random'", r"stack_select must be one of"),
    ("read_mode = 'eager'", r"read_mode must be one of"),
    ("read_agg_window_ticks = -5", r"read_agg_window_ticks must be non-negative"),
    ("read_agg_window_ticks = 1000000000000000000", r"read_agg_window_ticks must be at most"),
    ("read_agg_threshold_bytes = 0", r"read_agg_threshold_bytes must be positive"),
    ("page_buffers = -1", r"page_buffers must be non-negative"),
    ("buffer_hit_ticks = -1", r"buffer_hit_ticks must be non-negative"),
    ("page_cache_pages = -1", r"page_cache_pages must be non-negative"),
    ("cache_hit_ticks = 1e3", r"cache_hit_ticks must be an integer"),
    ("write_buffer_entries = 0", r"write_buffer_entries must be positive"),
    ("write_deadline_ticks = 0", r"write_deadline_ticks must be positive"),
    ("write_deadline_ticks = 1000000000000000000", r"write_deadline_ticks must be at most"),
    ("write_timeout_policy = 'lenient'", r"write_timeout_policy must be strict or partial"),
    ("scheduler = 'lifo'", r"scheduler must be one of"),
    ("scheduler = 'partition-1r3w'", r"needs channels divisible by 4"),
    ("write_drain_high_water = 0", r"write_drain_high_water must be positive"),
    ("write_drain_window_ticks = 0", r"write_drain_window_ticks must be positive"),
    ("channel_bw_gbps = 0", r"channel_bw_gbps must be positive"),
    ("channel_bw_gbps = inf", r"channel_bw_gbps must be a finite number, not inf"),
    ("channel_bw_gbps = nan", r"channel_bw_gbps must be a finite number, not nan"),
    ("channel_bw_gbps = 1e300", r"channel_bw_gbps must be at most"),
    ("channel_bw_gbps = 'fast'", r"channel_bw_gbps must be a number"),
    # the retired controllers' keys (docs/history.md)
    ("contract = 1", r"configuration key 'contract' in .* is retired \(the cycle contract\): "
                     r"hbfsim has one controller, docs/timing-contract.md; contract 1 and the "
                     r"standard pipeline are at commit e5ad083 \(docs/history.md\)"),
    ("contract = 2", r"configuration key 'contract' in .* is retired"),
    ("pipeline = 'deep'", r"configuration key 'pipeline' in .* is retired"),
    ("link_burst_bytes = 4096", r"configuration key 'link_burst_bytes' in .* is retired "
                                r"\(contract 1's link-credit bucket\)"),
    ("host_ports = 'bank'", r"host_ports must be stack or channel, not 'bank'"),
    ("pools = 'bank'", r"pools must be stack or channel, not 'bank'"),
    ("pools = 'channel'\nhost_ports = 'stack'", r"pools = 'channel' needs host_ports = 'channel'"),
    ("pools = 'channel'\nmshr_entries = 9",
     r"mshr_entries must be a multiple of channels \(2\) under pools = 'channel' \(the channel "
     r"shape's default\), not 9; set pools = 'stack'"),
    ("pools = 'channel'\nwrite_buffer_entries = 5",
     r"write_buffer_entries must be a multiple of channels \(2\)"),
    # docs/timing-contract.md §7a, Configuration
    ("multiplane = 1", r"multiplane must be a string, not 1"),
    ("multiplane = 'hyper'", r"multiplane must be off, page or megaplane"),
    ("multiplane = 'megaplane'\nhyperpage_window_ticks = 1.5",
     r"hyperpage_window_ticks must be an integer, not 1.5"),
    ("hyperpage_window_ticks = 4",
     r"hyperpage_window_ticks is used by multiplane = 'megaplane' only"),
    ("memory_clock_mhz = 0", r"memory_clock_mhz must be positive"),
    ("memory_clock_mhz = -850", r"memory_clock_mhz must be positive"),
    ("memory_clock_mhz = inf", r"memory_clock_mhz must be a finite number"),
    ("memory_clock_mhz = 1e9", r"memory_clock_mhz must be at most"),
    ("gpu_clock_mhz = nan", r"gpu_clock_mhz must be a finite number"),
    ("gpu_clock_mhz = 0", r"gpu_clock_mhz must be positive"),
    ("t_read_us = inf", r"t_read_us must be a finite number, not inf"),
    ("t_read_us = -inf", r"t_read_us must be a finite number"),
    ("t_read_us = nan", r"t_read_us must be a finite number"),
    ("t_read_us = 1e300", r"t_read_us must be at most"),
    ("t_read_us = 0", r"t_read_us must be positive"),
    ("t_read_us = 0.0001", r"t_read_us 0.0001 rounds to 0 ticks"),
    ("t_read_us = 900000000\nmemory_clock_mhz = 900000", r"t_read_us .* more than"),
    ("t_prog_us = -1", r"t_prog_us must be positive"),
    ("t_erase_us = inf", r"t_erase_us must be a finite number"),
    ("media_mode = 'zns'", r"media_mode must be hbf or ssd"),
    ("pages_per_block = 0", r"pages_per_block must be positive"),
    ("blocks_per_zone = 0", r"blocks_per_zone must be positive"),
    ("overprovisioning = 1.0", r"overprovisioning must be"),
    ("overprovisioning = -0.1", r"overprovisioning must be in \[0, 1\)"),
    ("overprovisioning = nan", r"overprovisioning must be a finite number"),
    ("base_address = 4097", r"base_address must be 4 KiB aligned"),
    ("base_address = -4096", r"base_address must be non-negative"),
    ("base_address = 18446744073709547520\ncapacity_bytes = 536870912",
     r"must fit in 64 bits"),
    ("capacity_bytes = 0", r"capacity_bytes must be a positive multiple"),
    ("capacity_bytes = 12345", r"capacity_bytes must be a positive multiple"),
    ("capacity_bytes = 36893488147419103232", r"capacity_bytes must be at most"),
    # geometry (docs/flashaccel.md): dies and megaplanes partition a channel's subarrays
    ("subarrays_per_channel = 5\ncapacity_bytes = 549755813888",
     r"capacity_bytes must be a positive multiple .*\(10485760 B\), not 549755813888"),
    ("planes_per_die = 7", r"planes_per_die must divide subarrays_per_channel \(32\)"),
    ("planes_per_die = -96", r"planes_per_die must be non-negative, not -96"),
    ("planes_per_die = 96.0", r"planes_per_die must be an integer, not 96.0"),
    ("planes_per_die = 100000000000000000000", r"planes_per_die must be at most"),
    ("subarrays_per_channel = 96\nplanes_per_die = 64",
     r"planes_per_die must divide subarrays_per_channel \(96\).* not 64"),
    ("megaplane_planes = 0", r"megaplane_planes must be positive, not 0"),
    ("megaplane_planes = 3", r"megaplane_planes must divide the planes of a die \(32\), "
                             r"not 3"),
    ("subarrays_per_channel = 96\nplanes_per_die = 96\nmegaplane_planes = 64",
     r"megaplane_planes must divide the planes of a die \(96\), not 64"),
    ("megaplane_planes = 'wide'", r"megaplane_planes must be an integer, not 'wide'"),
    ("megaplane_planes = inf", r"megaplane_planes must be an integer, not inf"),
    ("plane_sram_bytes = -1", r"plane_sram_bytes must be non-negative, not -1"),
    ("plane_sram_bytes = nan", r"plane_sram_bytes must be an integer, not nan"),
    ("base_die_sram_bytes = 1e6", r"base_die_sram_bytes must be an integer, not 1000000.0"),
    ("base_die_sram_bytes = 100000000000000000000", r"base_die_sram_bytes must be at most"),
    ("subarrays_per_channel = 4294967296\npages_per_block = 4294967296",
     r"capacity unit .* exceeds the 64-bit address space"),
    ("trace_level = 3", r"trace_level must be 0, 1 or 2, not 3"),
    ("trace_file = 5", r"trace_file must be a string, not 5"),
    ("profile = 'fast'", r"profile must be one of"),
    ("profile = [1]", r"profile must be one of"),
    ("hbf_tR = -1", r"hbf_tR must be a tick count"),
    ("hbf_tR = 1.5", r"hbf_tR must be a tick count"),
    ("hbf_tR = 1000000000000000000", r"hbf_tR must be a tick count in"),
    ("memory_clock_mhz = 0\nhbf_tR = 5", r"memory_clock_mhz must be positive, not 0"),
    ("memory_clock_mhz = 'a'\nhbf_tPROG = 5", r"memory_clock_mhz must be a number"),
    ("hbf_num_channels = 3", r"channels must be 1, 2, 4, 8 or 16, not 3"),
    ("channels = 2\nhbf_num_channels = 2",
     r"'channels' given twice in c.toml \(as 'hbf_num_channels'\)"),
    ("hbf_scheduler = 9", r"scheduler must be a string, not 9"),
    ("hbf_mshr_enabled = 2", r"mshr_merge must be true or false"),
    ("hbf_profile = 'x'", r"unknown configuration key 'hbf_profile'"),
    ("chanels = 2", r"unknown configuration key 'chanels'"),
    ("'' = 1", r"unknown configuration key ''"),
    ("[controller]\nchannels = 2", r"configuration is flat; unexpected table \[controller\]"),
    ("channels = ", r"not valid TOML"),
    ("channels = 2\nchannels = 4", r"not valid TOML"),
    ("channels 2", r"not valid TOML"),
    ("channels = 0x", r"not valid TOML"),
    ('trace_file = "unterminated', r"not valid TOML"),
]

CONFIG_BAD_BYTES = [
    (b"channels = 2\n# \xff\xfe comment\n", r"c.toml line 2: not UTF-8 text \(byte 0xff"),
    (b"\xc3\x28 = 1\n", r"c.toml line 1: not UTF-8 text"),
    (b"channels = 2\x00\n", r"c.toml line 1: NUL byte"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", r"c.toml line 1: not UTF-8 text"),
]


@pytest.mark.parametrize("text,match", CONFIG_BAD, ids=[c[0][:40] for c in CONFIG_BAD])
def test_bad_config(tmp_path, monkeypatch, capsys, text, match):
    _case(tmp_path, monkeypatch, capsys, ["config", "show", "--config", "c.toml"],
          {"c.toml": text + "\n"}, match)


@pytest.mark.parametrize("data,match", CONFIG_BAD_BYTES)
def test_bad_config_bytes(tmp_path, monkeypatch, capsys, data, match):
    _case(tmp_path, monkeypatch, capsys, ["run", "--config", "c.toml"], {"c.toml": data},
          match)


@pytest.mark.parametrize("argv,files,match", [
    (["run", "--config", "missing.toml"], {}, r"cannot read configuration 'missing.toml'"),
    (["run", "--config", "d"], {"d": None}, r"cannot read configuration 'd': it is a dir"),
    (["run", "--config", "c.toml", "--stats-json", "s.json"], {"c.toml": "channels = 5\n"},
     r"channels must be"),
    (["run", "--profile", "nope"], {}, r"profile must be one of"),
    (["config", "show", "--profile", "Reference"], {}, r"profile must be one of"),
])
def test_bad_config_files(tmp_path, monkeypatch, capsys, argv, files, match):
    _case(tmp_path, monkeypatch, capsys, argv, files, match)


# ---------------------------------------------------------------- model configs (--model)
MODEL_BAD = [
    ("[1, 2]", r"model config .* must be a JSON object"),
    ('"qwen"', r"model config .* must be a JSON object"),
    ("{", r"m.json line 1: not valid JSON"),
    ("", r"m.json line 1: not valid JSON"),
    ('{"hidden_size": NaN}', r"not valid JSON: NaN is not a JSON number"),
    ("{}", r"model config .* lacks key"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": "256"'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 0'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": -256'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 2.5'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 1e400'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": 1e3'), r"hidden_size"),
    (MODEL_OK.replace('"hidden_size": 256', '"hidden_size": true'), r"hidden_size"),
    (MODEL_OK.replace('"num_hidden_layers": 1', '"num_hidden_layers": 100000000000'),
     r"num_hidden_layers"),
    (MODEL_OK.replace('"vocab_size": 1024', '"vocab_size": null'), r"vocab_size"),
    (MODEL_OK.replace('"num_attention_heads": 2', '"num_attention_heads": 0'),
     r"num_attention_heads"),
    (MODEL_OK.replace('"bfloat16"', '"bfloat17"'), r"torch_dtype must be one of .* not 'bfloat17'"),
    (MODEL_OK.replace('"intermediate_size": 512, ', ''), r"lacks key 'intermediate_size'"),
    (MODEL_OK.replace('"head_dim": 128', '"head_dim": []'), r"head_dim"),
]


@pytest.mark.parametrize("text,match", MODEL_BAD, ids=[f"model{i}" for i in range(len(MODEL_BAD))])
def test_bad_model_config(tmp_path, monkeypatch, capsys, text, match):
    _case(tmp_path, monkeypatch, capsys,
          ["run", "--workload", "llm-decode", "--model", "m.json", "--param", "layers=1",
           "--stats-json", "s.json"], {"m.json": text}, match)


def test_bad_model_config_through_param(tmp_path, monkeypatch, capsys):
    _case(tmp_path, monkeypatch, capsys, ["run", "--workload", "llm-decode", "--param",
                                          "model=m.json"], {"m.json": "[1]"},
          r"must be a JSON object")


def test_bad_model_config_bytes(tmp_path, monkeypatch, capsys):
    _case(tmp_path, monkeypatch, capsys, ["run", "--workload", "llm-decode", "--model",
                                          "m.json"], {"m.json": b'{"a": "\xff"}'},
          r"m.json line 1: not UTF-8 text")


def test_small_model_config_runs(tmp_path, monkeypatch, capsys):
    rc, _, err, _, _ = _run(tmp_path, monkeypatch, capsys,
                            ["run", "--workload", "llm-decode", "--model", "m.json"],
                            {"m.json": MODEL_OK})
    assert rc == 0 and err == "", err


# ---------------------------------------------------------------- configs that are valid
CONFIG_ODD_BUT_VALID = [
    "subarrays_per_channel = 5\n",            # any plane count: the capacity follows
    "subarrays_per_channel = 96\nplanes_per_die = 96\nmegaplane_planes = 32\n",
    "profile = 'flashaccel'\nsubarrays_per_channel = 48\nplanes_per_die = 48\n"
    "megaplane_planes = 16\n",
    "",
    "# only a comment\n",
    "channels = 4 # trailing comment\r\n",
    "\ufeffchannels = 2\n",
    "hbf_num_channels = 4\nhbf_tR = 12750\n",
    "hbf_mshr_enabled = 0\n",
    "hbf_channel_map = 1\n",
    "channels = 16\nscheduler = 'partition-2r2w'\n",
    "t_read_us = 1e-2\n",
    "profile = 'ocp-grade3'\n",
]


@pytest.mark.parametrize("text", CONFIG_ODD_BUT_VALID)
def test_odd_config_is_accepted(tmp_path, monkeypatch, capsys, text):
    rc, out, err, _, _ = _run(tmp_path, monkeypatch, capsys,
                              ["config", "show", "--config", "c.toml"], {"c.toml": text})
    assert rc == 0 and err == "" and "channels = " in out

