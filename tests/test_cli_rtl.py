"""hbfsim rtl emit / rtl stats."""

import json
import subprocess
import sys

import pytest

SMALL = ("channels = 2\nsubarrays_per_channel = 4\nmshr_entries = 8\nwrite_buffer_entries = 4\n"
         "admission = 16\nqueue_depth = 4\ncapacity_bytes = 33554432\n")


def hbfsim(*args):
    return subprocess.run([sys.executable, "-m", "hbfsim.cli", *args], capture_output=True,
                          text=True)


def test_rtl_emit_and_stats(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "controller.v"
    p = hbfsim("rtl", "emit", "--config", str(cfg), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "module hbf_controller" in out.read_text()
    js = tmp_path / "area.json"
    p = hbfsim("rtl", "stats", "--config", str(cfg), "--sector-bytes", "32", "--json", str(js))
    assert p.returncode == 0, p.stderr
    rows = json.loads(js.read_text())
    assert rows["total"]["cells"] > 1000 and rows["total"]["flip_flops"] > 100
    assert {"hbf_controller.mshr", "hbf_controller.write_buffer"} <= rows.keys()


def test_rtl_emit_several_stacks(tmp_path):
    """stacks > 1: the system layer is the top, under the same module name (contract §2)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL.replace("capacity_bytes = 33554432", "capacity_bytes = 67108864")
                   + "stacks = 2\n")
    out = tmp_path / "system.v"
    p = hbfsim("rtl", "emit", "--config", str(cfg), "--sector-bytes", "32", "-o", str(out))
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "module hbf_controller(" in text and "cmd__3" in text and "cmd__4" not in text


@pytest.mark.parametrize("extra,key", [
    ("page_cache_pages = 16\n", "page_cache_pages"),
    ('media_mode = "ssd"\n', "media_mode")])
def test_rtl_rejects_model_only_config(tmp_path, extra, key):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL + extra)
    p = hbfsim("rtl", "emit", "--config", str(cfg), "-o", str(tmp_path / "d.v"))
    assert p.returncode == 2 and key in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "d.v").exists()


def test_rtl_emits_multiplane_commands(tmp_path):
    # multi-plane commands are RTL under contract 2 (docs/rtl.md "Multi-plane commands"):
    # the media port carries the megaplane and planes mask instead of subarray and tag
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL + 'multiplane = "megaplane"\nmegaplane_planes = 2\n')
    out = tmp_path / "d.v"
    p = hbfsim("rtl", "emit", "--config", str(cfg), "-o", str(out))
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    from hbfsim.config import load_config
    from hbfsim.rtl.layouts import Widths, cmd_layout

    c = load_config(channels=2, subarrays_per_channel=4, mshr_entries=8, write_buffer_entries=4,
                    admission=16, queue_depth=4, capacity_bytes=33554432,
                    multiplane="megaplane", megaplane_planes=2)
    layout = cmd_layout(Widths.of(c))
    assert "planes" in layout.members and "tag" not in layout.members
    assert f"output [{layout.size - 1}:0] cmd__0;" in text


def test_rtl_emit_backend_trap_is_one_line(tmp_path, monkeypatch, capsys):
    """Yosys's WebAssembly runtime stopping on the design (the 16-channel default reaches
    it, docs/rtl.md "Emission on the one contract") ends the command with one line that
    names the configuration and the trap, exit 1, and no output file."""
    from amaranth.back import verilog

    from hbfsim import cli
    from hbfsim.rtl import emit

    trap = type("Trap", (Exception,), {"__module__": "wasmtime._trap"})

    def convert(design, *args, **kwargs):
        raise trap("error while executing at wasm backtrace:\n    0: 0x1234 - yosys\n\n"
                   "Caused by:\n    wasm trap: wasm `unreachable` instruction executed")

    monkeypatch.setattr(verilog, "convert", convert)
    # no design is built (an Elaboratable never elaborated warns when it is collected, in
    # whichever test runs then)
    monkeypatch.setattr(emit, "top", lambda cfg, **kwargs: object())
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "controller.v"
    rc = cli.main(["rtl", "emit", "--config", str(cfg), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert "2 channels, 8 MSHRs" in err and "wasm trap: wasm `unreachable`" in err, err
    assert not out.exists()


def test_rtl_emit_other_backend_errors_are_not_hidden(tmp_path, monkeypatch):
    """Only the runtime's own exceptions become that line; any other error still raises."""
    from amaranth.back import verilog

    from hbfsim.config import load_config
    from hbfsim.rtl import emit
    from hbfsim.rtl.emit import emit_verilog

    def convert(design, *args, **kwargs):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(verilog, "convert", convert)
    monkeypatch.setattr(emit, "top", lambda cfg, **kwargs: object())   # as above
    cfg = load_config(channels=2, subarrays_per_channel=4, mshr_entries=8,
                      write_buffer_entries=4, admission=16, queue_depth=4,
                      capacity_bytes=33554432)
    with pytest.raises(KeyError):
        emit_verilog(cfg)
