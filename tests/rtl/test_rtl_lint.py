"""The emitted Verilog lints clean under Verilator with the documented flags (issue 3)."""

import subprocess

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.cosim.toolchain import LINT_FLAGS, verilator_bin
from hbfsim.rtl.emit import emit_verilog


@pytest.mark.parametrize("over", [
    # the stack shape
    dict(),
    dict(scheduler="write-drain", read_mode="aggregation"),
    dict(channels=4, scheduler="partition-1r3w", placement="contiguous"),
    dict(channels=4, active_per_channel=2, active_total=5, mshr_entries=32,
         scheduler="write-drain", write_timeout_policy="partial", mshr_merge=False,
         channel_bw_gbps=0.85),
    dict(stacks=2),                                      # the system layer (rtl/system.py)
    dict(stacks=3, stack_select="contiguous", capacity_bytes=3 * 2 * 4 * 256 * PAGE_BYTES),
    # the channel shape (docs/timing-contract.md §1, §14)
    dict(host_ports="channel"),
    dict(host_ports="channel", channels=4, scheduler="partition-2r2w", read_mode="aggregation",
         mshr_merge=False, write_timeout_policy="partial", active_per_channel=2,
         active_total=5),
    dict(host_ports="channel", multiplane="megaplane", megaplane_planes=2, stacks=2),
    # multi-plane commands (docs/timing-contract.md §7a)
    dict(multiplane="megaplane", megaplane_planes=2),
    dict(multiplane="page", megaplane_planes=4),
    dict(multiplane="megaplane", subarrays_per_channel=6, planes_per_die=6,
         megaplane_planes=3, active_per_channel=4, active_total=5, mshr_merge=False,
         scheduler="write-drain", capacity_bytes=2 * 6 * 256 * PAGE_BYTES * 4),
])
def test_verilator_lint_clean(tmp_path, over):
    cfg = load_config(**({"host_ports": "stack", "channels": 2,
                          "subarrays_per_channel": 4, "mshr_entries": 8,
                          "write_buffer_entries": 4, "admission": 16, "queue_depth": 4,
                          "capacity_bytes": 4 * 4 * 256 * PAGE_BYTES * 4} | over))
    v = tmp_path / "controller.v"
    v.write_text(emit_verilog(cfg, sector_bytes=32))
    p = subprocess.run([str(verilator_bin()), *LINT_FLAGS, "--top-module", "hbf_controller",
                        str(v)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "%Warning" not in p.stderr and "%Error" not in p.stderr
