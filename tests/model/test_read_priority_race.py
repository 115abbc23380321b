"""The race behind rw-isolation's read-priority flip (docs/results.md, "Re-run on the one
timing contract"): a full page's PROGRAM and a read of another page on the same channel.

Under the registered pipeline (timing-contract.md §10) a full-page write accepted in ``ta``
is enqueued in ``ta + 8`` (DP5's registered full decision in ``ta + 4``, FLUSH ``ta + 6``,
DP3's ``O_c`` ``ta + 7``) and an isolated read accepted in ``ta_r`` in ``ta_r + 4`` (DP2).
The enqueue arbiter takes the MSHR candidate before ``O_c`` (§6), and an operation is a
candidate for the issue decision from the cycle after its enqueue (§6), so the read's
READ reaches the media first whenever ``ta_r <= ta + 4`` (the retired standard pipeline,
write enqueued ``ta + 4``, read ``ta_r + 3``: only when ``ta_r <= ta + 1``, docs/history.md).
With one subarray
the loser waits a whole ``tR`` or ``tPROG``, and read priority keeps a PROGRAM behind
every READ queued on its channel.
"""

from __future__ import annotations

import pytest

from hbfsim.config import PAGE_BYTES, load_config
from hbfsim.model.gpu import ClosedLoop
from hbfsim.model.media import PROGRAM
from hbfsim.model.system import HbfSystem
from hbfsim.model.workloads import rw_isolation
from tests.conftest import make_reqs


def _log_commands(system) -> list:
    """Wrap every stack's media so that each command is logged as ``(ti, ch, "P"/"R")``."""
    log = []
    for s in system.stacks:
        def issue(ti, ch, sub, op, local, tag, orig=s.media.issue):
            log.append((ti, ch, "P" if op == PROGRAM else "R"))
            return orig(ti, ch, sub, op, local, tag)
        s.media.issue = issue
    return log


def _race(shape: str, k: int):
    """A 4096 B write of page 4 accepted in 100 and a read of page 0 (the same channel,
    one subarray) arriving in ``100 + k``, ``k >= 1`` (both enter one port); return
    (commands, write, read)."""
    cfg = load_config(host_ports=shape, channels=4,
                      subarrays_per_channel=1, active_per_channel=1,
                      scheduler="read-priority", page_cache_pages=0)
    system = HbfSystem(cfg)
    log = _log_commands(system)
    system.run_requests(make_reqs([("W", 4, 0, PAGE_BYTES, 100), ("R", 0, 0, 32, 100 + k)],
                                  cfg))
    done = {r.id: r for r in system.completed}
    return log, done[0], done[1]


@pytest.mark.parametrize("shape", ["stack", "channel"])
@pytest.mark.parametrize("k", range(1, 8))
def test_registered_pipeline_read_wins_within_four_cycles(shape, k):
    """The one contract, both shapes: the READ is the first command exactly for k <= 4."""
    log, w, r = _race(shape, k)
    assert w.t_accept == 100 and r.t_accept == 100 + k
    tq_w, tq_r = w.entry_info[0], r.entry_info[0]
    assert tq_r == r.t_accept + 4
    # k = 4: both offered in 108; the arbiter takes the MSHR candidate, O_c waits a cycle
    assert tq_w == (109 if k == 4 else 108)
    assert [op for _, _, op in log] == (["R", "P"] if k <= 4 else ["P", "R"])


@pytest.mark.parametrize("scheduler, program_position", [("read-priority", 32),
                                                         ("fcfs", 1)])
def test_rw_isolation_flip_in_the_stack_shape(scheduler, program_position):
    """The study's case (4 written pages, 0 us read delay, stack shape, registered
    pipeline): page 1027's last store is accepted in 511 and channel 3's first read in 515
    (4 cycles later, one port), so the read's READ goes first; read priority then keeps the
    PROGRAM behind all 32 READs of channel 3 (4 pages x 8 entries), FCFS behind one."""
    base = rw_isolation().config
    cfg = load_config(**(base | dict(scheduler=scheduler, host_ports="stack")))
    program = rw_isolation(cfg, write_pages=4, read_delay_us=0)
    loop = ClosedLoop(cfg, program, program.gpu, record=True)
    cmds = _log_commands(loop.system)
    res = loop.run()
    ch3 = [op for _, ch, op in sorted(cmds) if ch == 3]
    assert ch3.index("P") == program_position
    stores = sorted(r.t_accept for r in res.records
                    if r.op == "W" and (r.addr - cfg.base_address) // PAGE_BYTES == 1027)
    reads3 = sorted(r.t_accept for r in res.records
                    if r.op == "R" and (r.addr - cfg.base_address) // PAGE_BYTES % 4 == 3)
    assert reads3[0] - stores[-1] == 4
