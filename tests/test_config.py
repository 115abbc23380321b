"""Configuration: profiles, TOML, aliases, validation naming key and value."""

import pytest

from hbfsim.config import PROFILES, ConfigError, load_config, us_to_ticks


def test_reference_defaults_and_tick_rounding():
    c = load_config()
    assert (c.t_read_ticks, c.t_prog_ticks, c.t_erase_ticks) == (12750, 170000, 1700000)
    assert c.ticks_to_gpu_cycles(850) == 1132
    assert c.ticks_to_gpu_cycles(1) == 2  # ceil(1132/850)
    assert us_to_ticks(1.18, 850) == 1003  # 1003.0
    assert us_to_ticks(0.0005882, 850) == 0 and us_to_ticks(0.000589, 850) == 1


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profiles_load(name):
    c = load_config(profile=name)
    assert c.profile == name


def test_profile_values():
    assert load_config(profile="ocp-grade3").channels == 16
    fa = load_config(profile="flashaccel")
    assert (fa.t_read_us, fa.t_prog_us) == (4.0, 75.0)


@pytest.mark.parametrize("profile,tbs", [("ocp-grade1", 0.384), ("ocp-grade2", 1.536),
                                         ("ocp-grade3", 3.072)])
def test_ocp_speed_grades_have_their_link_bandwidth(profile, tbs):
    c = load_config(profile=profile)
    assert c.channels * c.channel_bw_gbps / 1000 == pytest.approx(tbs)
    assert c.admission // c.channels == 256 and c.mshr_entries // c.channels == 64


def test_flashaccel_profile_is_its_stack():
    """FlashAccel (docs/flashaccel.md): 8 dies x 96 planes in megaplanes of 32, 192 GB,
    768 GB/s, 32 KB SRAM per plane, 32 MB base-die SRAM, tR 4 us, tPROG 75 us."""
    c = load_config(profile="flashaccel")
    assert (c.dies_per_stack, c.die_planes, c.megaplane_planes) == (8, 96, 32)
    assert c.subarrays_per_stack == 768 and c.megaplanes_per_stack == 24
    assert c.capacity_bytes == 192 << 30
    assert c.channels * c.channel_bw_gbps == 768.0
    assert (c.plane_sram_bytes, c.base_die_sram_bytes) == (32 << 10, 32 << 20)
    # every plane may be active, so the media ceiling 768 x 4 KiB / 4 us is reachable
    assert c.active_per_channel == c.subarrays_per_channel


@pytest.mark.parametrize("kw", [dict(subarrays_per_channel=5), dict(subarrays_per_channel=96),
                                dict(subarrays_per_channel=96, planes_per_die=96,
                                     megaplane_planes=32),
                                dict(channels=8, subarrays_per_channel=192, planes_per_die=96,
                                     megaplane_planes=32, stacks=3),
                                dict(profile="flashaccel", subarrays_per_channel=100,
                                     planes_per_die=0, megaplane_planes=4)])
def test_an_unset_capacity_follows_the_geometry(kw):
    """The largest multiple of the unit (stacks x channels x subarrays x erase block) not
    above the profile's capacity: any plane count works without a hand-made capacity."""
    c = load_config(**kw)
    unit = c.stacks * c.channels * c.subarrays_per_channel * c.pages_per_block * 4096
    target = PROFILES[c.profile].get("capacity_bytes", 512 << 30)
    assert c.capacity_bytes % unit == 0
    assert target - unit < c.capacity_bytes <= target


def test_default_capacities_are_unchanged_where_the_geometry_divides_them():
    assert load_config().capacity_bytes == 512 << 30
    assert load_config(profile="hbf-serving").capacity_bytes == 352 << 30
    assert load_config(channels=16).capacity_bytes == 512 << 30


def test_a_capacity_smaller_than_one_unit_is_one_unit():
    c = load_config(subarrays_per_channel=1 << 20)  # unit 2 x 2**20 x 1 MiB = 2 TiB
    assert c.capacity_bytes == 2 << 40


def test_replace_rederives_a_derived_capacity_and_keeps_an_explicit_one():
    c = load_config(subarrays_per_channel=96)
    assert c.replace(subarrays_per_channel=5).capacity_bytes == \
        load_config(subarrays_per_channel=5).capacity_bytes
    explicit = load_config(capacity_bytes=1 << 30)
    assert explicit.replace(channels=4).capacity_bytes == 1 << 30
    with pytest.raises(ConfigError, match=r"capacity_bytes must be a positive multiple .* "
                                          r"not 1073741824"):
        explicit.replace(subarrays_per_channel=5)


def test_an_explicit_capacity_is_still_checked():
    with pytest.raises(ConfigError, match=r"capacity_bytes must be a positive multiple of "
                                          r"stacks x channels x subarrays x erase block "
                                          r"\(10485760 B\), not 549755813888"):
        load_config(subarrays_per_channel=5, capacity_bytes=512 << 30)


def test_megaplanes_and_dies_partition_the_subarrays():
    c = load_config(channels=2, subarrays_per_channel=96, planes_per_die=48,
                    megaplane_planes=16)
    assert (c.dies_per_stack, c.megaplanes_per_stack) == (4, 12)
    ref = load_config()
    assert (ref.die_planes, ref.dies_per_stack, ref.megaplanes_per_stack) == (32, 2, 64)


def test_toml_file_and_aliases(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('profile = "ocp-grade3"\nhbf_tR = 3400\nhbf_scheduler = 1\n'
                 'hbf_channel_map = 1\nmshr_entries = 64\n')
    c = load_config(f)
    assert c.channels == 16 and c.t_read_ticks == 3400 and c.scheduler == "read-priority"
    assert c.placement == "contiguous" and c.mshr_entries == 64


@pytest.mark.parametrize("kw,match", [
    (dict(channels=3), r"channels must be 1, 2, 4, 8 or 16, not 3"),
    (dict(scheduler="lifo"), r"scheduler must be one of .*'lifo'"),
    (dict(mshr_entries=0), r"mshr_entries must be positive, not 0"),
    (dict(admission="many"), r"admission must be an integer, not 'many'"),
    (dict(placement="explicit"), r"explicit_map"),
    (dict(explicit_map=[[0, 10, 5]], placement="explicit"), r"channel 5"),
    (dict(scheduler="partition-1r3w", channels=2), r"divisible by 4"),
    (dict(write_timeout_policy="lenient"), r"write_timeout_policy .*'lenient'"),
    (dict(t_read_us=0.0001), r"t_read_us 0.0001 rounds to 0 ticks"),
    (dict(base_address=123), r"base_address must be 4 KiB aligned"),
    (dict(bogus_key=1), r"unknown configuration key 'bogus_key'"),
    (dict(planes_per_die=7), r"planes_per_die must divide subarrays_per_channel \(32\).*not 7"),
    (dict(megaplane_planes=5), r"megaplane_planes must divide the planes of a die \(32\), "
                               r"not 5"),
])
def test_invalid_values_name_key_and_value(kw, match):
    with pytest.raises(ConfigError, match=match):
        load_config(**kw)


def test_bad_toml_and_tables(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("channels = = 2\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(f)
    f.write_text("[controller]\nchannels = 2\n")
    with pytest.raises(ConfigError, match="unexpected table"):
        load_config(f)
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize("text,match", [
    ("t_read_us = inf", "t_read_us must be a finite number, not inf"),
    ("t_read_us = nan", "t_read_us must be a finite number, not nan"),
    ("t_read_us = 1e300", "t_read_us must be at most"),
    ("channel_bw_gbps = inf", "channel_bw_gbps must be a finite number"),
    ("gpu_clock_mhz = -inf", "gpu_clock_mhz must be a finite number"),
    ("memory_clock_mhz = 1e7", "memory_clock_mhz must be at most"),
    ("admission = 100000000000000000000", "admission must be at most"),
    ("write_deadline_ticks = 1000000000000000000", "write_deadline_ticks must be at most"),
    ("hbf_tR = 1000000000000000000", "hbf_tR must be a tick count"),
    ("memory_clock_mhz = 0\nhbf_tR = 5", "memory_clock_mhz must be positive, not 0"),
    ("memory_clock_mhz = 'x'\nhbf_tR = 5", "memory_clock_mhz must be a number"),
    ("t_erase_us = 900000000\nmemory_clock_mhz = 900000", "more than"),
    ("base_address = 4096\ncapacity_bytes = 18446744073709551616", "must fit in 64 bits"),
    ("profile = [1]", "profile must be one of"),
])
def test_numbers_are_checked_before_arithmetic(tmp_path, text, match):
    f = tmp_path / "c.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=match):
        load_config(f)


def test_a_request_that_never_completes_fails_the_run(tmp_path):
    # the input checks keep such ticks out; this is the last line of defence behind them
    from hbfsim.cli import RunError, _traced_run
    from hbfsim.model.controller import Request
    from hbfsim.model.system import HbfSystem
    from hbfsim.simulate import Finished

    # a run that stops early (the loop itself runs every request to completion)
    cfg = load_config()

    def run(trace):
        s = HbfSystem(cfg, trace=trace, keep=False)
        s.submit(Request(0, "R", cfg.base_address, 32, 0, 0))
        s.submit(Request(1, "R", cfg.base_address + 4096, 32, 0, 0))
        s.close_input()
        s.run(until=cfg.t_read_ticks)      # before any response (an isolated read: tR + 13)
        return Finished("reference", {}, s.submitted, s.n_done, s.t)

    with pytest.raises(RunError, match="2 of 2 accepted requests never completed"):
        _traced_run(cfg, {"trace": None, "stats": None}, 2, run)


def test_every_key_and_profile_value_has_a_source():
    from hbfsim.config import KEYS
    from hbfsim.provenance import DEFAULT_SOURCES, PROFILE_SOURCES, SOURCES

    assert set(DEFAULT_SOURCES) == set(KEYS)
    assert set(PROFILE_SOURCES) == set(PROFILES)
    for name, values in PROFILES.items():
        assert set(values) == set(PROFILE_SOURCES[name]), name
    for table in [DEFAULT_SOURCES, *PROFILE_SOURCES.values()]:
        for key, (source, note) in table.items():
            assert source in SOURCES and note, key


@pytest.mark.parametrize("profile", list(PROFILES))
def test_config_show_provenance_names_every_source_and_round_trips(tmp_path, capsys, profile):
    import tomllib

    from hbfsim.cli import main

    f = tmp_path / "c.toml"
    f.write_text("channels = 4\n")
    assert main(["config", "show", "--provenance", "--profile", profile, "--config",
                 str(f)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert len(lines) == len(load_config().as_dict())
    assert all(" # " in ln for ln in lines)
    assert f"# file {f}: set in the configuration file" in out
    if profile == "flashaccel":
        assert "# FlashAccel paper: XL-Flash tR 4 us" in out
    assert load_config(**{k: v for k, v in tomllib.loads(out).items()}) == \
        load_config(f, profile)


def test_a_named_profile_wins_over_workload_settings():
    assert load_config(base={"channels": 4}).channels == 4
    assert load_config(profile="ocp-grade3", base={"channels": 4}).channels == 16
    assert load_config(profile="ocp-grade3", base={"subarrays_per_channel": 1}) \
        .subarrays_per_channel == 1


@pytest.mark.parametrize("argv", [["run"], ["run", "--workload", "media-saturation"]])
def test_the_flashaccel_profile_runs(capsys, argv):
    from hbfsim.cli import main

    assert main([*argv, "--profile", "flashaccel"]) == 0
    out = capsys.readouterr().out
    assert "profile flashaccel" in out and "8 channels x 96 subarrays" in out


def test_config_show_says_megaplanes_act_only_under_multiplane(capsys):
    from hbfsim.cli import main

    assert main(["config", "show", "--profile", "flashaccel"]) == 0
    out = capsys.readouterr().out
    assert "megaplane_planes = 32  # a name only under multiplane = off; shared command " \
           "logic otherwise" in out
    assert "multiplane = 'off'" in out or 'multiplane = "off"' in out
    assert main(["config", "show", "--provenance", "--profile", "flashaccel"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("megaplane_planes")][0]
    assert "FlashAccel paper" in line and "a name only under multiplane = off" in line
