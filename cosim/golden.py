"""The golden side of a co-simulation: the model's events at the controller's ports.

:func:`run_golden` runs :class:`hbfsim.model.system.HbfSystem` on a :class:`Scenario` and
returns what a monitor on the four interfaces would see (docs/history.md §1): the
accept cycle of every request, every media command, every response with its flags. The
RTL testbench records the same three streams; :mod:`hbfsim.cosim.scoreboard` compares them.
"""

from __future__ import annotations

__all__ = ["Events", "cpl_masks", "run_golden", "summary"]

from dataclasses import dataclass, field

from hbfsim.model.gpu import ClosedLoop
from hbfsim.model.media import FLAG_BUFFER_HIT, FLAG_ERROR
from hbfsim.model.system import HbfSystem
from hbfsim.model.trace import TraceWriter

from hbfsim.cosim.scenario import Scenario

#: Integer codes of the event fields (contract §1; ``ReqOp`` and ``CmdOp`` of rtl/layouts.py,
#: READ/PROGRAM of model/media.py).
OPS = {"R": 0, "W": 1}


@dataclass
class Events:
    """The three observable streams, each in the order a monitor sees them.

    Members
    -------
    accepts : list of (cycle, id)
        ``req`` handshakes.
    cmds : list of (cycle, channel, subarray, op, page, tag)
        Media commands, by cycle then channel (``stack * channels + channel``); ``op`` 0 =
        READ, 1 = PROGRAM; ``tag`` = index * 2 + kind (docs/rtl.md "Command tag"). Under
        multi-plane commands (docs/timing-contract.md §7a MP2) each is
        ``(cycle, channel, op, megaplane, planes, row)``.
    cpls : list of (cycle, channel, megaplane, planes, buffer_hit, error)
        Multi-plane commands only (MP7): the media's completions, the last three as masks
        over the megaplane's planes; empty otherwise.
    multiplane : bool
        The events are of a ``multiplane`` run (the command tuples above).
    resps : list of (cycle, id, op, source, mshr_hit, buffer_hit, cache_hit, error)
        ``resp`` handshakes; ``op`` 0 = read, 1 = write.
    kernels : list of dict or None
        A closed-loop GPU scenario: per kernel its name, launch and end tick, requests and
        producers (``GpuResult.kernels``); the RTL side's GPU must report the same.
    """

    accepts: list = field(default_factory=list)
    cmds: list = field(default_factory=list)
    resps: list = field(default_factory=list)
    kernels: list | None = None
    cpls: list = field(default_factory=list)
    multiplane: bool = False

    def count(self) -> int:
        return len(self.accepts) + len(self.cmds) + len(self.resps) + len(self.cpls)


def run_golden(sc: Scenario, trace_path=None) -> tuple[Events, HbfSystem]:
    """Run the golden model on ``sc``; write an hbf-trace-v1 level-1 trace if asked.

    A request-list scenario is replayed with its arrival ticks; a GPU-program scenario runs
    closed loop (:class:`~hbfsim.model.gpu.ClosedLoop`) with the scenario's ``resp.ready``.

    Returns the events and the finished system (for its statistics).
    """
    cfg = sc.cfg(golden=True)
    trace = TraceWriter(trace_path, 1) if trace_path else None
    loop = None
    if sc.program is not None:
        # the GPU program runs closed loop on the model, as `hbfsim run --workload` does
        loop = ClosedLoop(cfg, sc.gpu_program(), keep=True, trace=trace,
                          resp_ready=sc.ready())
        system = loop.system
    else:
        system = HbfSystem(cfg, trace=trace, keep=True)
        system.resp_ready = sc.ready()
    cmds = []

    def logger(media, off):
        issue = media.issue

        def logged(t, ch, sub, op, local, tag):
            cmds.append((t, off + ch, sub, op, local, tag))
            return issue(t, ch, sub, op, local, tag)

        return logged

    cpls = []
    multi = cfg.multiplane != "off"

    def group_logger(media, off):
        issue_group, deliver = media.issue_group, media.deliver
        M, S = cfg.megaplane_planes, cfg.subarrays_per_channel

        held = {}       # (channel, megaplane) -> the planes of its command, in ops order

        def logged(t, ch, g, ops):
            planes = [sub % M for sub, _op, _local, _tag in ops]
            held[ch, g] = planes
            cmds.append((t, off + ch, ops[0][1], g, sum(1 << p for p in planes),
                         ops[0][2] // S))
            return issue_group(t, ch, g, ops)

        def delivered(t):
            out = deliver(t)
            for ch, g, _tags, flags in out:
                cpls.append((t, off + ch) + cpl_masks(g, held.pop((ch, g)), flags))
            return out

        return logged, delivered

    for s, stack in enumerate(system.stacks):
        # media ports are numbered stack * channels + channel (rtl/system.py)
        if multi:
            stack.media.issue_group, stack.media.deliver = group_logger(stack.media,
                                                                        s * cfg.channels)
        else:
            stack.media.issue = logger(stack.media, s * cfg.channels)
    try:
        if loop is not None:
            gpu = loop.run()
        else:
            system.run_requests(sc.model_requests())
    except BaseException:
        if trace is not None:
            trace.abort()
        raise
    if trace is not None:
        trace.close()
    ev = Events(multiplane=multi)
    done = system.completed
    ev.accepts = sorted((r.t_accept, r.id) for r in done)
    ev.cmds = sorted(cmds)
    ev.cpls = sorted(cpls)
    ev.resps = [(r.t_done, r.id, OPS[r.op], r.source, int(r.mshr_hit), int(r.buffer_hit),
                 int(r.cache_hit), int(r.error)) for r in done]
    ev.resps.sort(key=lambda e: e[0])
    if loop is not None:
        ev.kernels = gpu.kernels
    return ev, system


def cpl_masks(g: int, planes, flags) -> tuple:
    """``(megaplane, planes, buffer_hit, error)`` of a multi-plane completion (MP7): the
    masks over the megaplane's planes from the used planes ``planes`` and their flag words
    ``flags``, in the order of the command's operations (:meth:`Media.issue_group
    <hbfsim.model.media.Media.issue_group>`)."""
    mask = hit = err = 0
    for p, f in zip(planes, flags):
        mask |= 1 << p
        hit |= (1 << p) if f & FLAG_BUFFER_HIT else 0
        err |= (1 << p) if f & FLAG_ERROR else 0
    return g, mask, hit, err


def summary(ev: Events) -> dict:
    """Functional counts derived from observed events (the same on both sides on a pass).

    Keys: ``requests``, ``responses``, ``answered_once`` (every accepted id answered exactly
    once), ``page_reads``, ``page_programs``, ``mshr_hits``, ``buffer_hits``, ``errors``,
    ``reads``, ``writes``, ``first_accept``, ``last_response``, ``window``.
    """
    ids = [e[1] for e in ev.resps]
    if ev.multiplane:
        # multi-plane commands (MP2): (cycle, channel, op, megaplane, planes, row)
        reads = sum(bin(c[4]).count("1") for c in ev.cmds if c[2] == 0)
        programs = sum(bin(c[4]).count("1") for c in ev.cmds if c[2] == 1)
    else:
        reads = sum(1 for c in ev.cmds if c[3] == 0)
        programs = sum(1 for c in ev.cmds if c[3] == 1)
    out = {
        "requests": len(ev.accepts),
        "responses": len(ev.resps),
        "answered_once": int(sorted(ids) == sorted(a[1] for a in ev.accepts)
                             and len(set(ids)) == len(ids)),
        "page_reads": reads,
        "page_programs": programs,
        "mshr_hits": sum(e[4] for e in ev.resps),
        "buffer_hits": sum(e[5] for e in ev.resps),
        "errors": sum(e[7] for e in ev.resps),
        "reads": sum(1 for e in ev.resps if e[2] == 0),
        "writes": sum(1 for e in ev.resps if e[2] == 1),
        "first_accept": ev.accepts[0][0] if ev.accepts else -1,
        "last_response": ev.resps[-1][0] if ev.resps else -1,
    }
    out["window"] = out["last_response"] - out["first_accept"] if ev.resps else 0
    return out
