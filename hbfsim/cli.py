"""The ``hbfsim`` command.

    hbfsim run [--config F.toml] [--profile P] [--requests F.csv | --workload NAME]
               [--model M] [--param K=V ...] [--trace T.csv] [--trace-level N]
               [--stats-json S.json] [--engine compiled|reference] [--no-progress]
    hbfsim run --list-workloads
    hbfsim config show [--profile P] [--config F.toml] [--provenance]
    hbfsim trace validate F [--config F.toml] [--profile P]
    hbfsim replay F [--config F.toml] [--profile P] [--trace T.csv] [--stats-json S.json]
                    [--engine compiled|reference] [--no-progress]
    hbfsim rtl emit [--config F.toml] -o controller.v
    hbfsim rtl stats [--config F.toml] [--sector-bytes N] [--abc]
    hbfsim rtl timing [--config F.toml] [--sector-bytes N] [--wrapper auto|always|never]
    hbfsim rtl prove [--block B] [--depth N] [--mutation M]
    hbfsim study NAME [--quick] [--out DIR] [--workers N]
    hbfsim sweep GRID.toml [--out DIR] [--backend local|ray] [--address A] [--workers N]
    hbfsim cosim run --scenario NAME --seed S --requests N --sim verilator|icarus [--waves]
    hbfsim cosim soak --requests N
    hbfsim waves list F | request F --id N | check F --trace T

Bad input: one line on stderr naming what is wrong, exit code 2, no traceback, and no output
file left half-written: every output is resolved and checked before work starts, and written
through a hidden temporary renamed when complete (:mod:`hbfsim.outputs`). An environment
failure mid-run (a full disk) or a lost request is one line and exit code 1; SIGINT and
SIGTERM exit 130 and 143 without leaving a temporary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from hbfsim.config import ConfigError, load_config

__all__ = ["main"]


class UsageError(Exception):
    """Bad command-line usage or input: exit 2 with one line."""


class RunError(Exception):
    """The simulation itself went wrong (a bug, not bad input): exit 1 with one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message)
        raise UsageError(f"{self.prog}: {message}")


#: The deepest bounded proof ``rtl prove --depth`` accepts (docs/formal.md's measured times).
MAX_PROOF_DEPTH = 64

def _reject_empty(ap: argparse.ArgumentParser, argv) -> None:
    """An empty argument (``--requests ''``) is a mistake, never "use the default"."""
    args = [str(t) for t in (sys.argv[1:] if argv is None else argv)]
    for i, tok in enumerate(args):
        if tok.strip() == "":
            where = f"after {args[i - 1]}" if i else "as the first argument"
            raise UsageError(f"empty argument {where}")
        if tok.startswith("--") and "=" in tok and tok.partition("=")[2].strip() == "":
            raise UsageError(f"empty value in {tok!r}")


def _add_config_args(p):
    p.add_argument("--config", metavar="F.toml", help="TOML configuration file")
    p.add_argument("--profile", help="named profile: reference, ocp-grade1, ocp-grade2, "
                   "ocp-grade3, flashaccel, hbf-serving")


def _add_engine_args(p):
    from hbfsim.config import ENGINES

    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="compiled (the C++ engine, the default: the configuration's engine "
                        "key) or reference (the Python golden model); both give the same "
                        "events, trace and statistics (docs/engine.md). The reference runs, "
                        "with one line saying why, where the compiled engine is not built")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (one is drawn on stderr, when it is a terminal, "
                        "for runs longer than a few seconds)")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="hbfsim", description="High-Bandwidth Flash simulator")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="simulate a request file or the embedded default workload")
    _add_config_args(run)
    src = run.add_mutually_exclusive_group()
    src.add_argument("--requests", metavar="F.csv",
                     help="request CSV (tick,op,address,bytes,source); default: embedded")
    src.add_argument("--workload", metavar="NAME",
                     help="a named workload run closed loop through the GPU model "
                          "(hbfsim run --list-workloads)")
    run.add_argument("--model", metavar="M", help="LLM shape for llm-decode: a preset "
                     "(qwen3-1.7b), a Hugging Face config.json or a TOML file")
    run.add_argument("--param", metavar="KEY=VALUE", action="append", default=[],
                     help="workload parameter (repeatable), e.g. --param scale=64")
    run.add_argument("--list-workloads", action="store_true", help="list workloads and exit")
    run.add_argument("--trace", metavar="T.csv", help="write an hbf-trace-v1 trace")
    run.add_argument("--trace-level", type=int, choices=(1, 2), default=None,
                     help="1 = Ingress/Completed rows, 2 = every state (default 2)")
    run.add_argument("--stats-json", metavar="S.json", help="write statistics as JSON")
    _add_engine_args(run)
    cfg = sub.add_parser("config", help="configuration commands")
    csub = cfg.add_subparsers(dest="config_cmd", required=True, parser_class=_Parser)
    show = csub.add_parser("show", help="print the resolved configuration as TOML")
    _add_config_args(show)
    show.add_argument("--provenance", action="store_true",
                      help="name each value's source (OCP HBF v0.7, the HBF-Sim paper or its "
                           "configuration, FlashAccel, your file, or our assumption)")
    tr = sub.add_parser("trace", help="trace commands")
    tsub = tr.add_subparsers(dest="trace_cmd", required=True, parser_class=_Parser)
    val = tsub.add_parser("validate", help="check that a file is hbf-trace-v1")
    val.add_argument("file")
    _add_config_args(val)  # the HBF address range the addresses must fall in
    rtl = sub.add_parser("rtl", help="controller RTL commands")
    rsub = rtl.add_subparsers(dest="rtl_cmd", required=True, parser_class=_Parser)
    emit = rsub.add_parser("emit", help="write the controller as Verilog")
    _add_config_args(emit)
    emit.add_argument("-o", "--output", required=True, metavar="controller.v")
    emit.add_argument("--sector-bytes", type=int, default=1,
                      help="write-coverage granularity in bytes (1 = byte-exact, default)")
    rst = rsub.add_parser("stats", help="cells, flip-flops and memory bits per block (Yosys)")
    _add_config_args(rst)
    rst.add_argument("--sector-bytes", type=int, default=1)
    rst.add_argument("--abc", action="store_true", help="technology-map through ABC (slow)")
    rst.add_argument("--json", metavar="S.json", help="also write the figures as JSON")
    tim = rsub.add_parser("timing", help="Fmax, resources and critical path on an ECP5-85k "
                          "(yosys synth_ecp5 + nextpnr-ecp5)")
    _add_config_args(tim)
    tim.add_argument("--sector-bytes", type=int, default=32,
                     help="write-coverage granularity in bytes (default 32: GPU sectors)")
    tim.add_argument("--wrapper", choices=("auto", "always", "never"), default="auto",
                     help="scan wrapper around the ports (auto: only when they outnumber "
                          "the package's pins)")
    tim.add_argument("--freq", type=float, default=100.0, help="nextpnr target in MHz")
    tim.add_argument("--seed", type=int, default=1, help="nextpnr placer seed")
    tim.add_argument("--keep", metavar="DIR", help="keep Verilog, netlist and logs in DIR")
    tim.add_argument("--json", metavar="T.json", help="also write the figures as JSON")
    prv = rsub.add_parser("prove", help="bounded model checks and k-induction per block "
                          "(yosys-smtbmc + z3)")
    from hbfsim.rtl.mutations import MUTATIONS

    prv.add_argument("--block", action="append",
                     help="block to check (repeatable; default: every block; --list names "
                          "them with their properties)")
    prv.add_argument("--depth", type=int, help="steps (default: each block's own)")
    prv.add_argument("--no-covers", action="store_true", help="skip the cover goals")
    prv.add_argument("--mutation", choices=tuple(MUTATIONS), action="append", default=[],
                     help="inject a deliberate fault (repeatable), to see it caught")
    prv.add_argument("--waves-dir", default="waves", metavar="DIR",
                     help="where a counterexample VCD goes (default waves/)")
    prv.add_argument("--list", action="store_true",
                     help="list each block's properties (assert, assume, cover) and exit")
    rp = sub.add_parser("replay", help="device-only replay of an hbf-trace-v1 file")
    rp.add_argument("file")
    _add_config_args(rp)
    rp.add_argument("--trace", metavar="T.csv", help="write the replay's own trace")
    rp.add_argument("--trace-level", type=int, choices=(1, 2), default=None)
    rp.add_argument("--stats-json", metavar="S.json", help="write statistics as JSON")
    _add_engine_args(rp)
    from hbfsim import studies
    from hbfsim.cosim import cli as cosim_cli
    from hbfsim.serve import cli as serve_cli

    from hbfsim.sweep import cli as sweep_cli

    studies.register(sub)
    sweep_cli.register(sub)
    cosim_cli.register(sub, _Parser)
    serve_cli.register(sub)
    return ap


def _say_big_input(path) -> None:
    """Announce the load of a big input file (about 2 s per 100 MB of request CSV)."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # the reader reports it
    if size >= 64 << 20:
        _say(f"reading {path} ({size / 1e6:,.0f} MB) ...")


def _say(text: str) -> None:
    """Tell the user what a long step is doing, on stdout (stderr is for the one error
    line), flushed so it shows before the work starts."""
    print(text, flush=True)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def _outputs(a, cfg, **outputs) -> dict:
    """Resolve the command's outputs against every file it reads (hbfsim.outputs), before
    any work starts. ``outputs`` maps an option name to a path (or None)."""
    from hbfsim.outputs import resolve_outputs

    inputs = {"--config": getattr(a, "config", None),
              "--requests": getattr(a, "requests", None),
              "trace file": getattr(a, "file", None)}
    model = getattr(a, "model", None)
    if model and Path(model).exists():
        inputs["--model"] = model
    for item in getattr(a, "param", None) or []:  # --param model=FILE is an input too
        key, _, val = item.partition("=")
        if key.strip() == "model" and Path(val.strip()).exists():
            inputs["--param model"] = val.strip()
    return resolve_outputs(outputs, inputs)


def _run_outputs(a, cfg) -> dict:
    """The trace and statistics outputs of run / replay (``trace_file`` from the
    configuration when no --trace is given)."""
    trace = a.trace if a.trace is not None else (cfg.trace_file or None)
    label = "--trace" if a.trace is not None else "trace_file"
    outs = _outputs(a, cfg, **{label: trace, "--stats-json": a.stats_json})
    return {"trace": outs[label], "stats": outs["--stats-json"]}


def _traced_run(cfg, outs, trace_level, run):
    """Run ``run(trace) -> Finished`` (hbfsim.simulate) with the trace file opened (and
    removed on failure).

    Returns ``(finished, host_seconds, trace, level)``."""
    from hbfsim.model.trace import TraceWriter

    level = trace_level or cfg.trace_level or 2
    trace = TraceWriter(outs["trace"], level) if outs["trace"] is not None else None
    t0 = time.perf_counter()
    try:
        out = run(trace)
    except BaseException:
        if trace is not None:
            trace.abort()
        raise
    host = time.perf_counter() - t0
    if out.n_done != out.submitted:
        # an accepted request must complete; never report (or keep) a run that lost one
        if trace is not None:
            trace.abort()
        raise RunError(f"{out.submitted - out.n_done:,} of {out.submitted:,} "
                       f"accepted requests never completed (simulation stopped at tick "
                       f"{out.end_tick:,}); no output written")
    if trace is not None:
        trace.close()
    return out, host, trace, level


def _engine(a, cfg, needs=()):
    """The engine ``a`` (``--engine``) and ``cfg`` ask for and that can run; says in one line
    why the reference runs instead, where it does (hbfsim.simulate.choose_engine)."""
    from hbfsim.simulate import choose_engine

    engine, note = choose_engine(cfg, getattr(a, "engine", None), needs)
    if note:
        _say(f"hbfsim: {note}")
    return engine


def _progress(a, engine):
    from hbfsim.progress import Progress, progress_wanted

    return Progress(None, f"hbfsim ({engine} engine)",
                    progress_wanted(getattr(a, "no_progress", False)))


def _report(header, fin, host, trace, level, outs, extra_stats=None, extra_lines=()):
    from hbfsim.model.stats import format_table

    stats = dict(fin.stats)
    stats["engine"] = fin.engine
    if extra_stats:
        stats.update(extra_stats)
    stats["host_seconds"] = host
    print(header)
    print(format_table(stats))
    for line in extra_lines:
        print(line)
    print(f"  host time: {host:.3f} s ({stats['requests'] / max(host, 1e-9):,.0f} requests/s)")
    print("  (ticks are memory-clock cycles; latency is arrival to response; every line is "
          "defined in docs/model.md#statistics)")
    if trace is not None:
        print(f"  trace: {trace.path} ({trace.rows:,} rows, level {level})")
    if outs["stats"] is not None:
        outs["stats"].write_text(json.dumps(stats, indent=2) + "\n")
        print(f"  statistics: {outs['stats'].path}")
    return 0


def _simulate(a, cfg, requests, outs, title, extra="", total=None) -> int:
    from hbfsim.simulate import run_open

    engine = _engine(a, cfg)

    def run(trace):
        with _progress(a, engine) as bar:
            return run_open(cfg, requests, engine, trace, bar, total)

    fin, host, trace, level = _traced_run(cfg, outs, a.trace_level, run)
    header = (f"hbfsim {title}: profile {cfg.profile}, {cfg.stacks} stack(s) x {cfg.channels} "
              f"channels x {cfg.subarrays_per_channel} subarrays, tR {cfg.t_read_us} us, "
              f"scheduler {cfg.scheduler}, {cfg.read_mode} reads, "
              f"{cfg.write_timeout_policy} writes, {_clocks(cfg)}, {fin.engine} engine{extra}")
    return _report(header, fin, host, trace, level, outs)


def _param_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


#: Hugging Face config.json keys of the model shape and their largest accepted value
#: (far beyond any published dense model; they bound the generated request count).
_MODEL_KEYS = {"num_hidden_layers": 1 << 10, "hidden_size": 1 << 20,
               "num_attention_heads": 1 << 12, "num_key_value_heads": 1 << 12,
               "head_dim": 1 << 14, "intermediate_size": 1 << 22, "vocab_size": 1 << 24}
_MODEL_NULLABLE = {"num_key_value_heads", "head_dim"}  # null = derived from the others


def _check_model_file(spec: str) -> None:
    """Check a ``--model`` config.json before the shape is built from it: readable UTF-8,
    valid JSON (no NaN/Infinity), an object, and every shape key a positive integer."""
    p = Path(spec)
    if not p.exists() or p.suffix.lower() == ".toml":
        return  # a preset name (checked by the workload) or a TOML shape
    from hbfsim.textfile import read_text

    text = read_text(p, "model config", UsageError)

    def constant(name):
        raise ValueError(f"{name} is not a JSON number")
    try:
        data = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise UsageError(f"{p} line {e.lineno}: not valid JSON: {e.msg}") from None
    except ValueError as e:
        raise UsageError(f"{p}: not valid JSON: {e}") from None
    except RecursionError:   # untrusted nesting: a message, not a traceback
        raise UsageError(f"{p}: not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise UsageError(f"model config {str(p)!r} must be a JSON object, not "
                         f"{type(data).__name__}")
    for key, hi in _MODEL_KEYS.items():
        if key not in data or (data[key] is None and key in _MODEL_NULLABLE):
            continue
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise UsageError(f"{p}: {key} must be an integer in 1..{hi}, not {v!r}")


def load_workload(a, cfg):
    """The workload named by ``a.workload`` with ``a.param`` (and ``a.model``), and the
    configuration it runs under: its study settings (``work.config``) sit above the defaults
    and under the user's profile and file (``load_config(base=...)``). Shared by
    ``run --workload`` and ``cosim run --workload``.

    Returns ``(cfg, work)``; raises UsageError naming a bad parameter.
    """
    from hbfsim.model.gpu import GpuError
    from hbfsim.model.workload_params import check_params, cli_name, registry_name
    from hbfsim.model.workloads import WORKLOADS, get_workload

    name = registry_name(a.workload)
    if name not in WORKLOADS:
        raise UsageError(f"--workload must be one of "
                         f"{', '.join(cli_name(n) for n in WORKLOADS)}, not {a.workload!r}")
    params = {}
    for item in a.param:
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise UsageError(f"--param must be KEY=VALUE, not {item!r}")
        key = key.strip().replace("-", "_")
        if key in params:
            raise UsageError(f"--param {key} given twice")
        params[key] = _param_value(val.strip())
    if getattr(a, "model", None):
        if name != "llm_decode":
            raise UsageError(f"--model goes with --workload llm-decode, not {a.workload!r}")
        _check_model_file(a.model)
        params["model"] = a.model
    try:
        check_params(name, params)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if isinstance(params.get("model"), str) and not getattr(a, "model", None):
        _check_model_file(params["model"])  # --param model=FILE is checked like --model
    try:
        work = get_workload(name, cfg, **params)
        if getattr(work, "config", None):
            cfg = load_config(a.config, a.profile, base=work.config)
            work = get_workload(name, cfg, **params)
    except (GpuError, ValueError, OSError) as e:
        raise UsageError(str(e)) from None
    return cfg, work


def _clocks(cfg) -> str:
    """The controller's ports, then the clocks: what every tick figure means."""
    shape = "a port per channel" if cfg.host_ports == "channel" else "one port per stack"
    if cfg.host_ports == "channel":   # docs/timing-contract.md §4.5
        shape += ", a pool per channel" if cfg.pools == "channel" else ", shared pools"
    return (f"registered pipeline ({shape}), memory clock {cfg.memory_clock_mhz:g} MHz, "
            f"GPU clock {cfg.gpu_clock_mhz:g} MHz")


def _workload_settings(work) -> str:
    """The workload's own configuration settings, as applied (the header must show every
    setting its figures depend on)."""
    if not getattr(work, "config", None):
        return ""
    items = ", ".join(f"{k}={_toml_value(v)}" for k, v in work.config.items())
    return f"\n  workload settings (under --profile and --config): {items}"


def _run_workload(a, cfg) -> int:
    from hbfsim.model.workloads import DeviceStream
    from hbfsim.simulate import run_closed

    cfg, work = load_workload(a, cfg)
    outs = _run_outputs(a, cfg)
    if isinstance(work, DeviceStream):
        return _simulate(a, cfg, iter(work), outs,
                         f"run --workload {a.workload} (device stream)",
                         _workload_settings(work), work.expected.get("requests"))
    engine = _engine(a, cfg)

    def run(trace):
        with _progress(a, engine) as bar:
            return run_closed(cfg, work, engine, trace=trace, progress=bar,
                              total=work.expected.get("requests"))

    fin, host, trace, level = _traced_run(cfg, outs, a.trace_level, run)
    result = fin.result
    header = (f"hbfsim run --workload {a.workload} (closed loop): profile {cfg.profile}, "
              f"{cfg.channels} channels x {cfg.subarrays_per_channel} subarrays, "
              f"tR {cfg.t_read_us} us, {len(result.kernels)} kernels, "
              f"{_clocks(cfg)}, {fin.engine} engine{_workload_settings(work)}")
    return _report(header, fin, host, trace, level, outs, {"gpu": result.summary()},
                   [f"  GPU span: {result.span_gpu_cycles:,} GPU cycles "
                    f"({result.span_us:.3f} us)"])


def _cmd_run(a) -> int:
    from hbfsim.model.requests import default_workload, load_requests_csv

    if a.list_workloads:
        from hbfsim.model.workload_params import list_workloads

        print(list_workloads())
        return 0
    cfg = load_config(a.config, a.profile)
    if a.workload:
        return _run_workload(a, cfg)
    if a.model or a.param:
        raise UsageError("--model and --param need --workload")
    outs = _run_outputs(a, cfg)
    if a.requests is not None:
        _say_big_input(a.requests)
        reqs = load_requests_csv(a.requests, cfg)
        title = f"run {a.requests}"
    else:
        reqs = default_workload(cfg)
        title = "run (embedded default workload)"
    return _simulate(a, cfg, reqs, outs, title)


def _cmd_replay(a) -> int:
    from hbfsim.model.trace_columns import load_trace, replay_list

    cfg = load_config(a.config, a.profile)
    outs = _run_outputs(a, cfg)
    _say_big_input(a.file)
    # validated as `trace validate` does (addresses in this configuration's HBF range)
    _, data = load_trace(a.file, cfg, "trace")
    reqs = replay_list(data)
    return _simulate(a, cfg, reqs, outs, f"replay {a.file}")


#: Trailing comments ``config show`` prints after a key whose value has no effect yet (or
#: only under another key).
_SHOW_NOTES = {
    "megaplane_planes": "  # a name only under multiplane = off; shared command logic "
                        "otherwise (docs/timing-contract.md §7a)",
    "plane_sram_bytes": "  # the SRAM prefetch queue's plane staging (model/prefetch.py)",
    "base_die_sram_bytes": "  # the SRAM prefetch queue's capacity per stack (model/prefetch.py)",
}


def _cmd_config_show(a) -> int:
    cfg = load_config(a.config, a.profile)
    if not a.provenance:
        for k, v in cfg.as_dict().items():
            print(f"{k} = {_toml_value(v)}{_SHOW_NOTES.get(k, '')}")
        return 0
    from hbfsim.provenance import provenance

    src = provenance(cfg, a.config)
    print(f"# profile {cfg.profile}: each value with its source (docs/provenance.md)")
    for k, v in cfg.as_dict().items():
        source, note = src[k]
        print(f"{k + ' = ' + _toml_value(v):<40} # {source}: {note}")
    return 0


def _cmd_trace_validate(a) -> int:
    from hbfsim.model.trace_columns import load_trace

    cfg = load_config(a.config, a.profile)
    _say_big_input(a.file)
    summary, _ = load_trace(a.file, cfg, a.file)
    print(f"{a.file}: valid hbf-trace-v1, level {summary['level']}, {summary['rows']:,} rows, "
          f"{summary['requests']:,} requests")
    for check in summary["checks"]:
        print(f"  checked: {check}")
    return 0


def _rtl_options(a):
    if a.sector_bytes < 1 or a.sector_bytes > 4096 or a.sector_bytes & (a.sector_bytes - 1):
        raise UsageError(f"--sector-bytes must be a power of two in 1..4096, "
                         f"not {a.sector_bytes}")


def _cmd_rtl_prove(a) -> int:
    from hbfsim.rtl.formal import BLOCKS, FormalError, check_block

    if a.depth is not None and a.depth < 1:
        raise UsageError(f"--depth must be a positive integer, not {a.depth}")
    # BMC time grows faster than the depth: the channel-shape controller 8 steps 997 s, the
    # stack-shape one 12 steps 522 s on this 2-core machine (docs/formal.md); 64 steps are
    # days already
    if a.depth is not None and a.depth > MAX_PROOF_DEPTH:
        raise UsageError(f"--depth {a.depth} is more than {MAX_PROOF_DEPTH}: bounded model "
                         f"checking at 11-12 steps already takes 6-9 minutes here "
                         f"(docs/formal.md), and each step costs more than the last")
    if not a.list:   # where a counterexample goes, checked before the first proof
        from hbfsim.outputs import check_output_folder

        check_output_folder("--waves-dir", a.waves_dir)
    blocks = a.block or list(BLOCKS)
    for b in blocks:
        if b not in BLOCKS:
            raise UsageError(f"--block must be one of {', '.join(BLOCKS)}, not {b!r}")
    if a.list:
        from hbfsim.rtl.formal import block_properties

        for b in blocks:
            for flavor, msg in block_properties(b):
                print(f"{b}\t{flavor}\t{msg}")
        return 0
    failed = 0
    print(f"  {'block':<14} {'result':<22} {'asserts':>7} {'assumes':>7} {'covers':>7} "
          f"{'seconds':>8}")
    for b in blocks:
        try:   # a mutation changes only the block it names (and the blocks holding it)
            r = check_block(b, depth=a.depth, covers=not a.no_covers, mutations=a.mutation,
                            vcd_dir=a.waves_dir)
        except FormalError as e:
            raise UsageError(str(e)) from None
        reached = sum(v is not None for v in r.covers.values())
        proved = f"proved (k={r.k})" if r.k == r.depth else f"proved (k={r.k}, BMC {r.depth})"
        what = {"proved": proved, "passed": f"no failure in {r.depth} steps",
                "failed": "FAILED"}[r.status]
        covers = f"{reached}/{len(r.covers)}" if r.covers else "-"
        print(f"  {b:<14} {what:<22} {r.asserts:>7} {r.assumes:>7} {covers:>7} "
              f"{sum(r.seconds.values()):>8.1f}")
        for msg in r.failed:
            print(f"    assertion failed: {msg}")
        if r.vcd:
            print(f"    counterexample: {r.vcd}")
        for msg, step in r.covers.items():
            if step is None:
                print(f"    cover not reached in {r.cover_depth} steps: {msg}")
        failed += r.status == "failed" or any(v is None for v in r.covers.values())
    return 1 if failed else 0


#: nextpnr's target frequency: an ECP5's fabric tops out near 400 MHz; 1 GHz is no target.
MAX_FREQ_MHZ = 1000.0


def _timing_options(a) -> None:
    """``rtl timing``'s numbers and folder, checked before the elaboration and synthesis."""
    import math

    if not (math.isfinite(a.freq) and 0 < a.freq <= MAX_FREQ_MHZ):
        raise UsageError(f"--freq must be a finite frequency in (0, {MAX_FREQ_MHZ:g}] MHz, "
                         f"not {a.freq:g}")
    if not 0 <= a.seed < 1 << 31:
        raise UsageError(f"--seed must be a non-negative integer below 2**31 (nextpnr's "
                         f"seed), not {a.seed}")
    if a.keep is not None:
        from hbfsim.outputs import check_output_folder

        check_output_folder("--keep", a.keep)


def _cmd_rtl_timing(a, cfg) -> int:
    from hbfsim.rtl.timing import PACKAGE_IOS, TimingError, timing_report

    json_out = _outputs(a, cfg, **{"--json": a.json})["--json"]   # before synthesis
    try:
        r = timing_report(cfg, sector_bytes=a.sector_bytes, wrapper=a.wrapper,
                          freq_mhz=a.freq, seed=a.seed, keep=a.keep,
                          log=lambda s: print(f"  ... {s}", file=sys.stderr, flush=True))
    except TimingError as e:
        raise UsageError(str(e)) from None
    print(f"hbfsim rtl timing: {r['device']}, profile {cfg.profile}, {cfg.stacks} stack(s) x "
          f"{cfg.channels} channels x {cfg.subarrays_per_channel} subarrays, "
          f"{cfg.mshr_entries} MSHRs, {cfg.write_buffer_entries} write-buffer entries, "
          f"admission {cfg.admission}, queue depth {cfg.queue_depth}, "
          f"coverage granularity {a.sector_bytes} B")
    if r["wrapped"]:
        print(f"  placed inside a scan wrapper: the controller's ports take {r['port_pins']} "
              f"pins, the package has {PACKAGE_IOS}; every port is a register of the wrapper "
              f"({r['wrapper_ffs']:,} flip-flops of the FF count are the wrapper's)")
    else:
        print(f"  placed as is: {r['port_pins']} of {PACKAGE_IOS} I/O pins")
    print(f"  Fmax {r['fmax_mhz']:.2f} MHz (post-route, nextpnr target {r['target_mhz']:g} MHz, "
          f"seed {r['seed']})")
    res = r["resources"]
    print("  " + ", ".join(f"{k} {res.get(k, 0):,}" for k in
                           ("LUT4", "TRELLIS_FF", "TRELLIS_DPR16X4", "DP16KD", "MULT18X18D",
                            "CCU2C")).replace("TRELLIS_FF", "FF").replace("TRELLIS_", ""))
    cp = r["critical_path"]
    print(f"  critical path {cp['ns']:.2f} ns ({cp['logic_ns']:.2f} logic, "
          f"{cp['routing_ns']:.2f} routing): from {cp['from']} to {cp['to']}")
    ep = r["endpoints"]
    print(f"  register inputs later than {ep['period_ns']:g} ns (the target): {ep['late']:,} of "
          f"{ep['endpoints']:,}" + ("" if r["wrapped"] else " (arrivals include paths from "
                                     "input pins; --wrapper always: register to register)"))
    for g in ep["groups"]:
        print(f"    {g['worst_ns']:6.2f} ns  {g['late']:>5,} of {g['endpoints']:<5,} {g['signal']}")
    print(f"  yosys {r['yosys_s']:.0f} s, nextpnr {r['nextpnr_s']:.0f} s")
    if json_out is not None:
        json_out.write_text(json.dumps(r, indent=2) + "\n")
    return 0


def _cmd_rtl(a) -> int:
    if a.rtl_cmd == "prove":
        return _cmd_rtl_prove(a)
    if a.rtl_cmd == "timing":
        _timing_options(a)
    cfg = load_config(a.config, a.profile)
    _rtl_options(a)
    try:
        from hbfsim.rtl.controller import check_supported
        check_supported(cfg)
    except ValueError as e:
        raise UsageError(f"the RTL does not implement {e}") from None
    if a.rtl_cmd == "timing":
        return _cmd_rtl_timing(a, cfg)
    if a.rtl_cmd == "emit":
        from hbfsim.rtl.emit import EmitError, emit_verilog

        out = _outputs(a, cfg, **{"-o": a.output})["-o"]  # before the elaboration
        _say(f"elaborating the controller RTL for profile {cfg.profile} ({cfg.channels} "
             f"channels, {cfg.mshr_entries} MSHRs, admission {cfg.admission}): about a "
             "minute on the reference profile, longer for bigger tables ...")
        try:
            text = emit_verilog(cfg, sector_bytes=a.sector_bytes)
        except EmitError as e:
            raise RunError(str(e)) from None
        out.write_text(text)
        kind = "stack controller" if cfg.stacks == 1 else f"system of {cfg.stacks} stacks"
        print(f"wrote {a.output} ({len(text):,} bytes, top module hbf_controller, {kind})")
        return 0
    from hbfsim.rtl.synth import SynthError, synth_stats

    json_out = _outputs(a, cfg, **{"--json": a.json})["--json"]
    _say(f"elaborating and synthesizing with Yosys{' and ABC' if a.abc else ''}: several "
         "minutes (more than five on the reference profile; the first run also compiles "
         "Yosys, about 40 s) ...")
    try:
        rows = synth_stats(cfg, sector_bytes=a.sector_bytes, abc=a.abc)
    except SynthError as e:
        raise UsageError(str(e)) from None
    print(f"hbfsim rtl stats: profile {cfg.profile}, {cfg.stacks} stack(s) x "
          f"{cfg.channels} channels, "
          f"{cfg.mshr_entries} MSHRs, {cfg.write_buffer_entries} write-buffer entries, "
          f"admission {cfg.admission}, coverage granularity {a.sector_bytes} B")
    print(f"  {'block':<34} {'cells':>10} {'flip-flops':>11} {'memory bits':>12}")
    for name, r in sorted(rows.items(), key=lambda kv: (kv[0] == "total", kv[0])):
        short = name.replace("hbf_controller.", "") if name != "hbf_controller" else "(top)"
        print(f"  {short:<34} {r['cells']:>10,} {r['flip_flops']:>11,} {r['memory_bits']:>12,}")
    if json_out is not None:
        json_out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def main(argv=None) -> int:
    from hbfsim.model.mapping import AddressError
    from hbfsim.model.requests import InputError

    from hbfsim.outputs import Terminated, install_signal_cleanup

    install_signal_cleanup()
    try:
        ap = _parser()
        _reject_empty(ap, argv)
        a = ap.parse_args(None if argv is None else [str(t) for t in argv])
        if a.cmd == "run":
            return _cmd_run(a)
        if a.cmd == "replay":
            return _cmd_replay(a)
        if a.cmd == "config":
            return _cmd_config_show(a)
        if a.cmd == "trace":
            return _cmd_trace_validate(a)
        if a.cmd == "rtl":
            return _cmd_rtl(a)
        if hasattr(a, "func"):  # study, cosim, waves: sub-commands registered by their modules
            return a.func(a)
    except (UsageError, ConfigError, InputError, AddressError) as e:
        print(f"hbfsim: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"hbfsim: error: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"hbfsim: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader went away (``hbfsim run --list-workloads | head -1``): not an error of
        # ours; point stdout at /dev/null so the interpreter's final flush stays quiet
        import os

        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as e:
        # the environment failed mid-run (a full disk, a vanished folder): not bad input;
        # an output being written was a temporary and is gone
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(f"hbfsim: error: {e.strerror or e}{where} (no output file is left "
              "half-written)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hbfsim: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("hbfsim: terminated", file=sys.stderr)
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
