"""The HBF tier from the device model (serve/characterize.py, docs/serving-hbf-tier.md)."""

import json
import math

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.serve import characterize as ch
from hbfsim.serve.tier_timing import TierTiming


def small(**changes):
    """A fast stack: the reference profile with 4 channels (128 subarrays, W = 128 pages)."""
    return load_config(profile="reference", **({"channels": 4} | changes))


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return ch.characterize(small(), cache_dir=tmp_path_factory.mktemp("base"))


def media_ceiling(cfg):
    """Closed form: every active subarray reads one page per tR (sources.md §figures)."""
    return ch.wave_pages(cfg) * PAGE_BYTES / (cfg.t_read_ticks / (cfg.memory_clock_khz * 1e3))


# ----------------------------------------------------------------------------- figures
def test_stream_bandwidth_is_the_media_ceiling(base):
    assert base.read_bw == pytest.approx(media_ceiling(small()), rel=0.01)
    # a transfer smaller than one wave costs one tR plus the pipeline's ticks (contract §10:
    # an isolated read responds tR + 13 ticks after its accept)
    tr = small().t_read_us * 1e-6
    assert tr < base.read_seconds(PAGE_BYTES) < tr + 16 / 850e6


def test_kv_pattern_and_writes(base):
    cfg = small()
    # KV blocks collide on subarrays: below the streaming figure, but same order
    assert 0.3 * base.read_bw < base.kv_read_bw < base.read_bw
    # a write is acknowledged after its PROGRAM (W6): at most one write-buffer entry's page
    # per tPROG each, and the collisions of scattered blocks cost some of it
    bound = cfg.write_buffer_entries * PAGE_BYTES / (cfg.t_prog_us * 1e-6)
    assert 0.5 * bound < base.write_bw <= bound
    assert base.write_seconds(PAGE_BYTES) == pytest.approx(cfg.t_prog_us * 1e-6, rel=0.01)
    assert base.write_amplification == 1.0  # full pages: programmed bytes = written bytes


def test_every_measurement_is_recorded(base):
    rows = base.points
    assert {(r["kind"], r["pattern"]) for r in rows} == {
        ("read", "stream"), ("read", "kv"), ("write", "kv"), ("mixed", "stream+kv")}
    fit = [r for r in rows if r["fit"]]
    assert [(b, t) for b, t in base.read_curve] == [
        (r["bytes"], r["seconds"]) for r in fit if r["pattern"] == "stream"]
    # bandwidth against outstanding requests: a GPU window of k pages gives k pages per tR
    sweep = [r for r in rows if not r["fit"] and r["kind"] == "read"]
    assert [r["outstanding"] for r in sweep] == [8, 32, 128]
    for r in sweep:
        bw = r["bytes"] / r["seconds"]
        assert bw == pytest.approx(r["outstanding"] * PAGE_BYTES / 15e-6, rel=0.02)


def test_partial_kv_blocks_measure_write_amplification(tmp_path):
    cfg = small(write_timeout_policy="partial")
    t = ch.characterize(cfg, cache_dir=tmp_path, kv_block_bytes=9216)   # 2.25 pages
    # every block ends in a padded page: 3 pages programmed per 9216 B (W3)
    assert t.write_amplification == pytest.approx(3 * PAGE_BYTES / 9216, rel=0.02)
    with pytest.raises(ValueError, match="kv_block_bytes 9216 .* 'strict'"):
        ch.characterize(small(), cache_dir=tmp_path, kv_block_bytes=9216)


@pytest.mark.parametrize("name, value", [("kv_block_bytes", 0), ("request_bytes", 100),
                                         ("request_bytes", 8192)])
def test_bad_parameters_are_rejected(tmp_path, name, value):
    with pytest.raises(ValueError, match=f"{name} must be .*{value}"):
        ch.characterize(small(), cache_dir=tmp_path, **{name: value})


# ----------------------------------------------------------------------------- controller
# Each change must move the figures the way the hardware says, not merely change them.
def _changed(tmp_path, **changes):
    return ch.characterize(small(**changes), cache_dir=tmp_path)


def test_fewer_channels_lower_read_bandwidth(base, tmp_path):
    t = _changed(tmp_path, channels=2)
    assert t.read_bw == pytest.approx(base.read_bw / 2, rel=0.02)
    assert t.kv_read_bw < base.kv_read_bw
    assert t.read_seconds(64 << 20) > 1.8 * base.read_seconds(64 << 20)


def test_fewer_mshr_entries_lower_read_bandwidth(base, tmp_path):
    t = _changed(tmp_path, mshr_entries=16)
    # 16 pages in flight: 16 x 4 KiB per tR
    assert t.read_bw == pytest.approx(16 * PAGE_BYTES / 15e-6, rel=0.02)
    assert t.kv_read_bw < 0.5 * base.kv_read_bw
    assert t.write_bw == pytest.approx(base.write_bw, rel=0.01)    # writes use no MSHR


def test_longer_tr_lowers_bandwidth_and_raises_latency(base, tmp_path):
    t = _changed(tmp_path, t_read_us=30.0)
    assert t.read_bw == pytest.approx(base.read_bw / 2, rel=0.02)
    assert t.read_seconds(PAGE_BYTES) == pytest.approx(2 * base.read_seconds(PAGE_BYTES),
                                                       rel=0.01)
    assert t.read_seconds(PAGE_BYTES, "kv") > base.read_seconds(PAGE_BYTES, "kv")


def test_partition_scheduler_halves_read_channels(base, tmp_path):
    t = _changed(tmp_path, scheduler="partition-2r2w")
    # reads only on channels 0-1 (M2, contract §3)
    assert t.read_bw == pytest.approx(base.read_bw / 2, rel=0.02)
    assert t.read_seconds(16 << 20) > 1.8 * base.read_seconds(16 << 20)


def _mixed(t):
    (m,) = [r for r in t.points if r["kind"] == "mixed"]
    return m["seconds"], m["write_seconds"]


@pytest.mark.parametrize("shape", [dict(host_ports="stack"), dict()], ids=["stack", "default"])
def test_schedulers_order_reads_and_writes_under_mixed_traffic(tmp_path, shape):
    """Reads while KV writes program, 8 active slots per channel so the scheduler chooses
    (M2): read priority finishes the reads sooner than FCFS, and the writes later through
    one port per stack (contract 1). With a port per channel (the default) FCFS already
    takes the reads early (they are accepted beside the writes, not behind them), and the
    writes end at the same tick under both policies (measured: 415.08 us each; contract 1:
    400.08 us under FCFS, 415.08 under read priority), so only "not sooner" holds there."""
    def mixed(scheduler):
        return _mixed(ch.characterize(small(active_per_channel=8, scheduler=scheduler,
                                            **shape), cache_dir=tmp_path))
    fcfs, rp = mixed("fcfs"), mixed("read-priority")
    assert rp[0] < 0.6 * fcfs[0]
    assert rp[1] > fcfs[1] if shape else rp[1] >= fcfs[1]


def test_smaller_write_buffer_lowers_write_bandwidth(base, tmp_path):
    t = _changed(tmp_path, write_buffer_entries=8)
    assert t.write_bw < 0.35 * base.write_bw
    assert t.read_bw == base.read_bw


# ----------------------------------------------------------------------------- error
@pytest.mark.parametrize("profile", ["reference", "hbf-serving"])
def test_prediction_agrees_with_direct_device_runs(tmp_path, profile):
    """Transfers not in the fit, each within its stated tolerance (ch.CHECKS)."""
    cfg = load_config(profile=profile)
    t = ch.characterize(cfg, cache_dir=tmp_path)
    rows = ch.check_against_device(cfg, t)
    assert [r["tolerance"] for r in rows] == [c[-1] for c in ch.CHECKS]
    for row in rows:
        assert abs(row["error"]) <= row["tolerance"], row


# ----------------------------------------------------------------------------- cache
def test_cache_hit_reuses_the_file(cache_dir, monkeypatch):
    first = ch.characterize(small(), cache_dir=cache_dir)
    files = list(cache_dir.iterdir())
    assert [f.name for f in files] == [ch.cache_path(small(), cache_dir).name]
    monkeypatch.setattr(ch, "_run_characterization",
                        lambda *a: pytest.fail("recomputed despite a cache entry"))
    again = ch.characterize(small(), cache_dir=cache_dir)
    assert again == first and again.points == first.points


def test_no_cache_recomputes_and_is_deterministic(cache_dir, monkeypatch):
    first = ch.characterize(small(), cache_dir=cache_dir)
    calls = []
    real = ch._run_characterization
    monkeypatch.setattr(ch, "_run_characterization", lambda *a: calls.append(1) or real(*a))
    again = ch.characterize(small(), cache_dir=cache_dir, cache=False)
    assert calls == [1]
    assert again == first     # every figure and curve, bit for bit


def test_same_engine_uses_only_an_entry_made_on_that_engine(cache_dir, monkeypatch):
    """``same_engine`` (what ``--engine`` asks): a cached entry serves only if its source
    names the engine this call runs on; the other engine's entry, or one from before sources
    named their engine, is recomputed and replaced. Without it any entry serves."""
    from hbfsim.simulate import choose_engine

    if choose_engine(small(engine="compiled"))[0] != "compiled":
        pytest.skip("the compiled engine is not built: one engine only")
    first = ch.characterize(small(engine="compiled"), cache_dir=cache_dir)
    assert ch.entry_engine(first.source) == "compiled"
    ran = []
    real = ch._run_characterization
    monkeypatch.setattr(ch, "_run_characterization",
                        lambda cfg, *a: ran.append(cfg.engine) or real(cfg, *a))
    ref = small(engine="reference")
    assert ch.characterize(ref, cache_dir=cache_dir) == first and ran == []
    again = ch.characterize(ref, cache_dir=cache_dir, same_engine=True)
    assert ran == ["reference"] and ch.entry_engine(again.source) == "reference"
    assert (again.read_bw, again.write_bw, again.kv_read_bw) == \
        (first.read_bw, first.write_bw, first.kv_read_bw)        # the same figures
    assert ch.characterize(ref, cache_dir=cache_dir, same_engine=True) == again
    assert ran == ["reference"]                                  # now the entry is its own
    path = ch.cache_path(ref, cache_dir)
    d = json.loads(path.read_text())
    d["timing"]["source"] = "golden model: 4 ch x 32 subarrays"  # an entry of 2026-12-02
    path.write_text(json.dumps(d))
    assert ch.entry_engine(d["timing"]["source"]) is None
    assert ch.characterize(ref, cache_dir=cache_dir).source.startswith("golden model")
    ch.characterize(ref, cache_dir=cache_dir, same_engine=True)
    assert ran == ["reference", "reference"]


@pytest.mark.parametrize("damage", ["", "{not json", '{"key": "x"}', "truncate", "negative"])
def test_corrupt_cache_is_recomputed(cache_dir, damage):
    first = ch.characterize(small(), cache_dir=cache_dir)
    path = ch.cache_path(small(), cache_dir)
    text = path.read_text()
    if damage == "truncate":
        text = text[: len(text) // 2]
    elif damage == "negative":
        d = json.loads(text)
        d["timing"]["read_bw"] = -1.0
        text = json.dumps(d)
    else:
        text = damage
    path.write_text(text)
    assert ch.characterize(small(), cache_dir=cache_dir) == first
    assert json.loads(path.read_text())["timing"]["read_bw"] == first.read_bw  # rewritten
    assert [p.name for p in cache_dir.iterdir()] == [path.name]               # no temp left


def test_cache_key_follows_the_device_not_its_label():
    ref = load_config(profile="reference")
    same = load_config(profile="ocp-grade3", channels=2, admission=256, mshr_entries=256)
    assert ch.cache_key(ref) == ch.cache_key(same)
    assert ch.cache_key(ref) == ch.cache_key(ref.replace(trace_level=1))
    keys = {ch.cache_key(ref), ch.cache_key(ref.replace(t_read_us=20.0)),
            ch.cache_key(ref.replace(scheduler="read-priority")),
            ch.cache_key(ref, kv_block_bytes=32768), ch.cache_key(ref, request_bytes=128)}
    assert len(keys) == 5


def test_cache_dir_default_is_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ch.cache_path(small()).parent == tmp_path / "hbfsim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ch.cache_path(small()).parent == tmp_path / "home" / ".cache" / "hbfsim"


def test_several_stacks_characterize_one(tmp_path, base):
    cfg = small(stacks=2, capacity_bytes=1024 << 30)
    assert ch.cache_key(cfg) == ch.cache_key(small())
    assert ch.characterize(cfg, cache_dir=tmp_path) == base


def test_cli_prints_the_table(tmp_path, capsys):
    assert ch.main(["--profile", "reference", "--cache-dir", str(tmp_path), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "read  stream" in out and "write amplification 1.0000" in out
    assert ch.main(["--profile", "nope", "--cache-dir", str(tmp_path)]) == 2
    assert "profile must be one of" in capsys.readouterr().err


# ----------------------------------------------------------------------------- TierTiming
def test_curve_interpolates_and_extends_at_the_line_bandwidth():
    t = TierTiming("t", read_bw=1e9, read_latency_s=1e-6, write_bw=1e8, write_latency_s=0,
                   read_curve=((4096, 10e-6), (8192, 20e-6)))
    assert t.read_seconds(100) == 10e-6                 # below the first size: one request
    assert t.read_seconds(6144) == pytest.approx(15e-6)
    assert t.read_seconds(8192) == 20e-6
    assert t.read_seconds(8192 + 1000) == pytest.approx(20e-6 + 1000 / 1e9)
    assert t.read_seconds(8192, "kv") == 20e-6          # kv without its own figures
    assert t.write_seconds(1000) == pytest.approx(1000 / 1e8)     # no curve: the line


@pytest.mark.parametrize("curve, msg", [(((8192, 1e-6), (4096, 2e-6)), "bytes must increase"),
                                        (((4096, -1.0),), "must be positive"),
                                        (((4096, math.nan),), "must be positive")])
def test_bad_curves_are_rejected(curve, msg):
    with pytest.raises(ValueError, match=msg):
        TierTiming("t", 1e9, 0, 1e9, 0, read_curve=curve)
