"""Shared simulation helpers for the RTL tests (one place, STYLE "Tests").

Waveforms only on request: ``pytest --waves`` (or ``HBFSIM_WAVES=1``) makes each simulation
write ``waves/<test id>.vcd`` and a ``.gtkw`` save file that shows the block's ports first
(never committed, see waves/README.md).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from amaranth.sim import Simulator

__all__ = ["CLOCK_PERIOD", "BackEnd", "apply_backend", "check_groups", "idle_backend",
           "read_backend", "simulate", "small_config"]

#: Any period will do: the contract counts cycles, not seconds.
CLOCK_PERIOD = 1e-9

_WAVES = Path(__file__).resolve().parents[2] / "waves"


def _wave_stem() -> str:
    """``<test module>.<test name and parameters>`` of the running test, file-name safe."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "sim").split(" ")[0]
    module, _, name = test.rpartition("::")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{Path(module).stem}.{name}")[:150]


def simulate(dut, *testbenches, background=(), deadline=None) -> None:
    """Run ``dut`` with a clock, the given testbenches and background testbenches.

    Parameters
    ----------
    dut : Elaboratable
        The design under test.
    *testbenches : async callables ``tb(ctx)``
        Run to completion; the simulation ends when all of them return.
    background : iterable of async callables
        Device models and monitors that run while the testbenches do.
    deadline : float, optional
        Stop after this many simulated seconds (guards against a hung testbench).
    """
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD, if_exists=True)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)

    def go():
        if deadline is None:
            sim.run()
        else:
            sim.run_until(deadline)

    if os.environ.get("HBFSIM_WAVES"):
        _WAVES.mkdir(exist_ok=True)
        stem = _WAVES / _wave_stem()
        with sim.write_vcd(f"{stem}.vcd", f"{stem}.gtkw", traces=key_signals(dut)):
            go()
    else:
        go()


def key_signals(dut) -> list:
    """The ports a GTKWave save file should show first: the component's interface members
    (for the Controller: req, resp, cmd[c], cpl[c], drain, m_valid)."""
    sig = getattr(dut, "signature", None)
    if sig is None:
        return []
    out = []
    for name in sig.members:
        member = getattr(dut, name, None)
        if member is not None:
            out.append(member)
    return out


def small_config(**overrides):
    """A small, valid stack configuration for unit tests (overrides win)."""
    from hbfsim.config import load_config

    v = dict(channels=2, subarrays_per_channel=4, active_per_channel=4, admission=16,
             mshr_entries=8, queue_depth=4, write_buffer_entries=4, pages_per_block=256)
    v.update(overrides)
    if "capacity_bytes" not in v:
        # Eight erase blocks per subarray: small page numbers, and a valid split (config.py).
        v["capacity_bytes"] = (v.get("stacks", 1) * v["channels"] * v["subarrays_per_channel"]
                               * v["pages_per_block"] * 4096 * 8)
    return load_config(**v)


# ------------------------------------------------------------------------------------------
# The back end of an entry table (MSHR or write buffer): channel queues, media and the
# response arbiter, as seen through the table's enq / issue / done / ret ports. Shared by the
# MSHR and write-buffer tests, which add their own request side.

def idle_backend(cfg) -> dict:
    """Back-end inputs of a cycle in which nothing happens."""
    c = cfg.channels
    return dict(enq_ready=[0] * c, issue=[(0, 0)] * c, done=[(0, 0, 0, 0)] * c, ret_sel=0,
                ret_ready=0)


def apply_backend(ctx, dut, inp: dict) -> None:
    """Drive the back-end inputs of ``dut`` from ``inp`` (see :func:`idle_backend`)."""
    for c, ready in enumerate(inp["enq_ready"]):
        ctx.set(dut.enq[c].ready, ready)
    for c, (valid, index) in enumerate(inp["issue"]):
        ctx.set(dut.issue[c], {"valid": valid, "index": index})
    for c, (valid, index, buffer_hit, error) in enumerate(inp["done"]):
        ctx.set(dut.done[c], {"valid": valid, "index": index, "buffer_hit": buffer_hit,
                              "error": error})
    ctx.set(dut.ret_sel, inp["ret_sel"])
    ctx.set(dut.ret.ready, inp["ret_ready"])


def read_backend(ctx, dut, kind: str) -> dict:
    """Back-end outputs: ``enq`` offers as (index, subarray, page), ``ret`` as a tuple."""
    enq = []
    for port in dut.enq:
        if ctx.get(port.valid):
            p = ctx.get(port.payload)
            assert p.tag.kind.name == kind
            enq.append((p.tag.index, p.subarray, p.page))
        else:
            enq.append(None)
    if ctx.get(dut.ret.valid):
        p = ctx.get(dut.ret.payload)
        ret = (p.index, p.slot, p.channel, p.last, p.buffer_hit, p.error)
    else:
        ret = None
    return {"enq": enq, "ret": ret, "ret_locked": ctx.get(dut.ret_locked)}


class BackEnd:
    """Channel queues, media and response arbiter around a table, randomised by ``rng``.

    Each channel queue takes an offer with probability ``p_enq`` while it has room; each
    cycle it issues a random queued entry with probability ``p_issue``; the media completes it
    after a latency drawn from ``latency`` and delivers at most one completion per channel per
    cycle (earliest due first). The arbiter selects the table with probability ``p_sel``
    (always while it is locked) and takes the response with probability ``p_ready``.
    """

    def __init__(self, cfg, rng, *, p_enq=0.7, p_issue=0.5, latency=(1, 12), p_sel=0.8,
                 p_ready=0.8, p_error=0.1):
        self.cfg, self.rng = cfg, rng
        self.p_enq, self.p_issue, self.latency = p_enq, p_issue, latency
        self.p_sel, self.p_ready, self.p_error = p_sel, p_ready, p_error
        self.queues = [[] for _ in range(cfg.channels)]
        self.inflight = [[] for _ in range(cfg.channels)]

    def inputs(self, now: int, ret_locked: int) -> dict:
        cfg, rng = self.cfg, self.rng
        inp = {"enq_ready": [int(rng.random() < self.p_enq and len(q) < cfg.queue_depth)
                             for q in self.queues]}
        issue, done = [], []
        for c in range(cfg.channels):
            q = self.queues[c]
            if q and rng.random() < self.p_issue:
                index = q.pop(rng.randrange(len(q)))
                self.inflight[c].append((now + rng.randint(*self.latency), index))
                issue.append((1, index))
            else:
                issue.append((0, 0))
            due = sorted(x for x in self.inflight[c] if x[0] <= now)
            if due:
                self.inflight[c].remove(due[0])
                done.append((1, due[0][1], rng.randrange(2), int(rng.random() < self.p_error)))
            else:
                done.append((0, 0, 0, 0))
        inp["issue"], inp["done"] = issue, done
        sel = int(ret_locked or rng.random() < self.p_sel)
        inp["ret_sel"], inp["ret_ready"] = sel, int(sel and rng.random() < self.p_ready)
        return inp

    def observe(self, inp: dict, out: dict):
        """Take the enqueued offers; return the slot of the response handshaken, if any."""
        for c, offer in enumerate(out["enq"]):
            if offer is not None and inp["enq_ready"][c]:
                self.queues[c].append(offer[0])
        if out["ret"] is not None and inp["ret_ready"]:
            return out["ret"][1]
        return None


def check_groups(n: int, dispatched, responses) -> None:
    """Each request answered once; the requests an entry served answer together, in order.

    ``dispatched`` lists (request, entry, joined) in dispatch order, ``joined`` true when
    the request joined an existing entry; ``responses`` lists requests in response order.
    """
    assert sorted(responses) == list(range(n))
    open_group: dict[int, list[int]] = {}
    groups = []
    for req, entry, joined in dispatched:
        if joined:
            open_group[entry].append(req)
        else:
            open_group[entry] = [req]
            groups.append(open_group[entry])
    for g in groups:
        start = responses.index(g[0])
        assert responses[start:start + len(g)] == g, f"group {g} answered as {responses}"
