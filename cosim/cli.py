"""``hbfsim cosim ...`` and ``hbfsim waves ...``: the co-simulation commands.

    hbfsim cosim run  [--scenario NAME] [--seed S] [--requests N] [--sim verilator|icarus]
                      [--waves [--window A:B]] [--csv F.csv [--config F.toml] [--profile P]]
    hbfsim cosim soak [--requests N] [--seed S] [--shape stack|channel] [--sim verilator|icarus] [--no-checks]
    hbfsim waves list F.vcd
    hbfsim waves request F.vcd --id N
    hbfsim waves check F.vcd --trace T.csv

:func:`register` adds them to the ``hbfsim`` parser; every handler is stored as the parsed
namespace's ``func`` and returns the exit status (0 agree, 1 a mismatch). Bad input raises
:class:`ValueError` with one line naming what is wrong (``hbfsim.cli`` prints it and exits 2).
"""

from __future__ import annotations

__all__ = ["register"]

import random
import sys
import time

from hbfsim.cosim import scenarios


def register(subparsers, parser_class=None) -> None:
    """Add ``cosim`` and ``waves`` to ``subparsers`` (an ``add_subparsers()`` result).

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
    parser_class : type, optional
        Parser class of the nested sub-commands (default: the one ``subparsers`` uses).
    """
    pc = parser_class or getattr(subparsers, "_parser_class", None)
    kw = {"parser_class": pc} if pc is not None else {}
    cos = subparsers.add_parser("cosim", help="co-simulate the RTL against the golden model")
    csub = cos.add_subparsers(dest="cosim_cmd", required=True, **kw)
    run = csub.add_parser("run", help="one scenario, every event compared")
    run.add_argument("--scenario", default="mix", metavar="NAME",
                     help="one of: " + ", ".join(sorted(scenarios.SCENARIOS)) + " (default mix)")
    run.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    run.add_argument("--requests", type=int, default=None, metavar="N",
                     help="number of requests, where the scenario has a size")
    run.add_argument("--sim", default="verilator", help="verilator (default) or icarus")
    run.add_argument("--no-checks", action="store_true",
                     help="build without the RTL's assertions (on by default with Verilator)")
    run.add_argument("--waves", action="store_true",
                     help="write waves/NAME.vcd and a GTKWave save file beside it")
    run.add_argument("--window", metavar="A:B", help="with --waves: keep cycles A..B only")
    run.add_argument("--csv", metavar="F.csv", help="requests from a CSV file instead of a "
                     "named scenario (tick,op,address,bytes,source)")
    run.add_argument("--replay", metavar="T.csv", help="requests from the Ingress rows of an "
                     "hbf-trace-v1 trace (device-only replay) instead of a named scenario")
    run.add_argument("--workload", metavar="NAME", help="a named workload (hbfsim run "
                     "--list-workloads): device streams as they are; a GPU program runs "
                     "closed loop on each side, in the testbench on the RTL's own responses "
                     "(--requests N: its first N accesses)")
    run.add_argument("--param", metavar="KEY=VALUE", action="append", default=[],
                     help="with --workload: workload parameter (repeatable)")
    run.add_argument("--config", metavar="F.toml",
                     help="with --csv/--replay/--workload: configuration file")
    run.add_argument("--profile", help="with --csv/--replay/--workload: named profile")
    run.add_argument("--resp-ready", type=float, default=None, metavar="P",
                     help="with --csv/--replay/--workload: probability that resp.ready is "
                          "high (default 1)")
    run.set_defaults(func=_cmd_run)
    soak = csub.add_parser("soak", help="seeded random traffic across every policy (every "
                           "other run a closed-loop GPU program)")
    soak.add_argument("--requests", type=int, default=20000, metavar="N",
                      help="requests in total (default 20000)")
    soak.add_argument("--seed", type=int, default=1)
    soak.add_argument("--sim", default="verilator", help="verilator (default) or icarus")
    soak.add_argument("--shape", choices=("stack", "channel"), default=None,
                      help="only the configurations of one host-port shape (default both)")
    soak.add_argument("--no-checks", action="store_true",
                      help="build without the RTL's assertions (on by default with Verilator)")
    soak.add_argument("--no-progress", action="store_true",
                      help="no progress bar on stderr (each configuration's line is still "
                           "printed as it finishes)")
    soak.set_defaults(func=_cmd_soak)

    wav = subparsers.add_parser("waves", help="read a co-simulation VCD back")
    wsub = wav.add_subparsers(dest="waves_cmd", required=True, **kw)
    ls = wsub.add_parser("list", help="ports, cycles and every request seen in a VCD")
    ls.add_argument("file")
    ls.set_defaults(func=_cmd_waves_list)
    rq = wsub.add_parser("request", help="one request's lifecycle from the VCD")
    rq.add_argument("file")
    rq.add_argument("--id", type=int, required=True, metavar="N")
    rq.set_defaults(func=_cmd_waves_request)
    ck = wsub.add_parser("check", help="the VCD and an hbf-trace-v1 trace agree")
    ck.add_argument("file")
    ck.add_argument("--trace", required=True, metavar="T.csv")
    ck.set_defaults(func=_cmd_waves_check)


#: Most requests one co-simulation command accepts: about two hours at the best rate the
#: co-simulation reaches, 1,521 requests/s (16 channels, docs/cosim.md "Speed").
MAX_REQUESTS = 10_000_000
#: Seeds are non-negative and fit the 64-bit seed of the testbench's generators.
MAX_SEED = (1 << 63) - 1


def _check_counts(a) -> None:
    """The seed and request count, checked before anything is built or generated."""
    if a.seed is not None and not 0 <= a.seed <= MAX_SEED:
        raise ValueError(f"--seed must be a non-negative integer below 2**63, not {a.seed}")
    if a.requests is not None:
        if a.requests < 1:   # a negative N would slice from the end
            raise ValueError(f"--requests must be at least 1, not {a.requests}")
        if a.requests > MAX_REQUESTS:
            raise ValueError(f"--requests {a.requests:,} is more than {MAX_REQUESTS:,} (about "
                             f"two hours at the co-simulation's best 1,521 requests/s)")


def _sim(name: str) -> str:
    from hbfsim.cosim.runner import SIMULATORS, skip_reason

    if name not in SIMULATORS:
        raise ValueError(f"--sim must be one of {', '.join(SIMULATORS)}, not {name!r}")
    reason = skip_reason(name)
    if reason:
        raise ValueError(f"--sim {name}: {reason}")
    return name


def _window(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    a, sep, b = text.partition(":")
    try:
        lo, hi = int(a), int(b)
    except ValueError:
        lo = hi = -1
    if not sep or lo < 0 or hi < lo:
        raise ValueError(f"--window must be A:B with 0 <= A <= B (cycles), not {text!r}")
    return lo, hi


def _scenario(a):
    from pathlib import Path

    from hbfsim.config import load_config
    from hbfsim.cosim.scenario import Scenario

    if a.requests is not None and a.requests < 1:  # a negative N would slice from the end
        raise ValueError(f"--requests must be at least 1, not {a.requests}")
    sources = [x for x in (a.csv, a.replay, a.workload) if x is not None]
    if len(sources) > 1:
        raise ValueError("give at most one of --csv, --replay and --workload")
    if a.param and a.workload is None:
        raise ValueError("--param goes with --workload")
    if not sources:
        if a.config or a.profile or a.resp_ready is not None:
            raise ValueError("--config, --profile and --resp-ready go with --csv, --replay "
                             "or --workload")
        return scenarios.make(a.scenario, a.seed, a.requests)
    cfg = load_config(a.config, a.profile)
    if a.csv is not None:
        from hbfsim.model.requests import load_requests_csv

        reqs, name = load_requests_csv(a.csv, cfg), Path(a.csv).stem
    elif a.replay is not None:
        from hbfsim.model.trace import read_trace, replay_requests

        reqs, name = replay_requests(read_trace(a.replay), cfg), Path(a.replay).stem
    else:
        from hbfsim.cli import load_workload
        from hbfsim.model.workloads import DeviceStream

        cfg, work = load_workload(a, cfg)
        name = a.workload
        if not isinstance(work, DeviceStream):
            # the GPU program runs closed loop on both sides: on the golden model, and in
            # the testbench on the RTL's own responses (--requests: its first N accesses)
            _check_rtl(cfg)
            return Scenario.from_program(name, cfg, work, limit=a.requests,
                                         resp_ready=_ready(a), seed=a.seed)
        reqs = list(work)
    _check_rtl(cfg)
    if a.requests is not None:
        reqs = reqs[:a.requests]
    return Scenario.from_requests(name, cfg, reqs, resp_ready=_ready(a), seed=a.seed)


def _check_rtl(cfg) -> None:
    from hbfsim.rtl.controller import check_supported

    try:
        check_supported(cfg)
    except ValueError as e:
        raise ValueError(f"the RTL does not implement {e}") from None


def _ready(a) -> float:
    p = 1.0 if a.resp_ready is None else a.resp_ready
    if not 0.0 < p <= 1.0:
        raise ValueError(f"--resp-ready must be in (0, 1], not {p}")
    return p


def _cmd_run(a) -> int:
    from hbfsim.cosim import runner

    _check_counts(a)
    sim = _sim(a.sim)
    window = _window(a.window)
    if window and not a.waves:
        raise ValueError("--window goes with --waves")
    sc = _scenario(a)
    if a.waves:  # the wave files are checked before the build (hbfsim.outputs)
        runner.waves_outputs(sc.name, sim, {"--csv": a.csv, "--replay": a.replay,
                                            "--config": a.config})
    print(f"hbfsim cosim run {sc.name}: building the RTL simulation (cached; a first build "
          "takes one to a few minutes) and running it ...", flush=True)
    t0 = time.perf_counter()
    try:
        (r,) = runner.run([sc], sim=sim, waves=a.waves, window=window,
                          checks=False if a.no_checks else None)
    except RuntimeError as e:  # a failed build: the message names its log
        print(f"hbfsim: {e}", file=sys.stderr)
        return 1
    total = time.perf_counter() - t0
    cfg = sc.cfg()
    stacks = f"{cfg.stacks} stacks x " if cfg.stacks > 1 else ""
    print(f"hbfsim cosim run {sc.name}: {sim}, {stacks}{cfg.channels} channels, scheduler "
          f"{cfg.scheduler}, {cfg.read_mode} reads, {cfg.write_timeout_policy} writes, "
          f"{sc.n_requests} requests{' (closed-loop GPU)' if sc.program else ''}, "
          f"resp.ready {sc.resp_ready:g}, RTL assertions {'on' if r.get('checks') else 'off'}")
    if r.get("cycles") is not None:
        print(f"  {r['cycles']:,} cycles in {r.get('wall_s', 0):.2f} s "
              f"({r.get('cycles_per_s', 0):,.0f} cycles/s), build {r.get('build_s', 0):.1f} s, "
              f"total {total:.1f} s")
    if r.get("golden_trace"):
        print(f"  traces: {r['golden_trace']} (golden), {r['rtl_trace']} (RTL), "
              f"{'identical' if r.get('traces_identical') else 'DIFFERENT'}")
    if r.get("vcd"):
        print(f"  waves: {r['vcd']} (GTKWave: {r['gtkw']})")
    if not r["passed"]:
        print(r["diff"])
    print(f"cosim run {sc.name}: {r['events_compared']:,} events compared, "
          f"{r['mismatches']} mismatches")
    return 0 if r["passed"] else 1


def _cmd_soak(a) -> int:
    from hbfsim.cosim import runner
    from hbfsim.cosim.scenario import Scenario
    from hbfsim.progress import Progress, progress_wanted

    _check_counts(a)
    sim = _sim(a.sim)
    cfgs = [c for c in scenarios.soak_configs() if a.shape in (None, c.host_ports)]
    rng = random.Random(a.seed)
    per = 400  # requests per run: several seeds per configuration, each run short
    total = a.requests
    chunks = max(len(cfgs), -(-total // per)) if total >= len(cfgs) else total
    scs, sizes = [], {}
    for i in range(chunks):
        cfg = cfgs[i % len(cfgs)]
        n = total // chunks + (1 if i < total % chunks else 0)
        seed = rng.randrange(1 << 30)
        r2 = random.Random(seed)
        ready = r2.choice([1.0, 0.9, 0.6])
        name = f"soak-{i}-c{i % len(cfgs)}"
        sizes[name] = n
        if (i // len(cfgs) + i % len(cfgs)) % 2:
            # every other run: a random closed-loop GPU program on the RTL's responses, in
            # the channel shape too (the stepped GPU port's grants there are G5', one per
            # port per tick, docs/gpu.md); the parity flips every round of the
            # configurations, so that with an even number of them each configuration gets
            # both kinds of run (with ``i % 2`` alone, configurations 0, 2, 4 of six never
            # ran a GPU program)
            prog = scenarios.gpu_program(r2, cfg, n, pages=r2.choice([4, 8, 16, 32]),
                                         reads=r2.choice([0.3, 0.6, 0.9]))
            scs.append(Scenario.from_program(name + "-gpu", cfg, prog, resp_ready=ready,
                                             seed=seed))
            continue
        spec = scenarios.soak_traffic(r2, cfg, n)
        b = cfg.base_address
        rows = [[j, op, b + page * 4096 + off, size, 0, t]
                for j, (op, page, off, size, t) in enumerate(spec)]
        scs.append(Scenario(name, cfg.as_dict(), rows, resp_ready=ready, seed=seed))
    print(f"hbfsim cosim soak: {len(scs)} runs over {len(cfgs)} configurations; building "
          "each configuration's RTL simulation (cached; one to a few minutes each the first "
          "time); a line per configuration as it finishes ...", flush=True)
    programs = {s.name for s in scs if s.program}

    def config_of(name: str) -> int:
        # names are soak-<run>-c<k>[-gpu]: the configuration field exactly ("-c1" is also a
        # prefix of "-c10" ... "-c14")
        return int(name.split("-")[2][1:])

    bar = Progress(a.requests, "cosim soak", enabled=progress_wanted(a.no_progress))
    answered = [0]   # requests of the finished runs, for the bar

    def finished(rs: list[dict]) -> None:
        """One configuration's runs are done (one build, one simulator): its line now."""
        by_cfg: dict[int, list[dict]] = {}
        for r in rs:
            by_cfg.setdefault(config_of(r["name"]), []).append(r)
            answered[0] += sizes[r["name"].removesuffix("-gpu")]
        bar.to(answered[0])
        for i, mine in sorted(by_cfg.items()):
            cfg = cfgs[i]
            line = (f"  {cfg.stacks} x {cfg.channels:2d} ch {cfg.host_ports:7s} "
                    f"{cfg.scheduler:15s} {cfg.read_mode:11s} "
                    f"{cfg.write_timeout_policy:7s} merge={str(cfg.mshr_merge):5s}"
                    f" pools={cfg.pools:7s}"
                    + (f" multiplane={cfg.multiplane}" if cfg.multiplane != "off" else "")
                    + f": {sum(r['events_compared'] for r in mine):,} events, "
                    f"{sum(1 for r in mine if not r['passed'])} failing of {len(mine)} runs "
                    f"({sum(1 for r in mine if r['name'] in programs)} closed-loop GPU)")
            bar.write(line)

    t0 = time.perf_counter()
    try:
        results = runner.run(scs, sim=sim, checks=False if a.no_checks else None,
                             on_group=finished)
    except RuntimeError as e:
        bar.close()
        print(f"hbfsim: {e}", file=sys.stderr)
        return 1
    bar.close()
    total = time.perf_counter() - t0
    events = sum(r["events_compared"] for r in results)
    bad = [r for r in results if not r["passed"]]
    for r in bad[:3]:
        print(r["diff"])
    print(f"cosim soak: {events:,} events compared, {len(bad)} mismatches, {total:.1f} s "
          f"({len(scs)} runs, {sum(1 for s in scs if s.program)} of them closed-loop GPU, "
          f"{a.requests:,} requests, seed {a.seed})")
    return 0 if not bad else 1


def _cmd_waves_list(a) -> int:
    from hbfsim.cosim.waves import WaveFile

    w = WaveFile(a.file)
    sc = w.scenario
    print(f"{a.file}: scenario {sc.name!r}, {w.cfg.channels} channels, cycles "
          f"{w.first_cycle}..{w.last_cycle} (cycle 0 at {w.cycle0} ns, {w.period} ns/cycle)")
    acc = {f["id"]: (t, f) for t, f in w.accepts()}
    res = {f["id"]: (t, f) for t, f in w.responses()}
    cmds = w.commands()
    print(f"  {len(acc)} requests accepted, {len(res)} answered, {len(cmds)} media commands "
          "in these cycles")
    print(f"  {'id':>6} {'op':>2} {'addr':>14} {'bytes':>5} {'accept':>8} {'response':>8} "
          f"{'mshr_hit':>8} {'buf_hit':>7} {'error':>5}")
    rows = {r[0]: r for r in w.requests}
    for rid in sorted(set(acc) | set(res)):
        _, op, addr, nbytes, _, _ = rows.get(rid, (rid, "?", 0, 0, 0, 0))
        t = acc[rid][0] if rid in acc else "-"
        r = res.get(rid)
        cols = (f"{r[0]:>8} {r[1]['mshr_hit']:>8} {r[1]['buffer_hit']:>7} {r[1]['error']:>5}"
                if r else f"{'-':>8} {'-':>8} {'-':>7} {'-':>5}")
        print(f"  {rid:>6} {op:>2} {addr:>#14x} {nbytes:>5} {t:>8} {cols}")
    return 0


def _cmd_waves_request(a) -> int:
    from hbfsim.cosim.waves import WaveFile

    w = WaveFile(a.file)
    life = w.lifecycle(a.id)
    op = "read" if life["op"] == "R" else "write"
    print(f"request {life['id']}: {op} of {life['bytes']} B at {life['addr']:#x} "
          f"(channel {life['channel']}, subarray {life['subarray']}, local page "
          f"{life['local_page']}), arrival cycle {life['arrival']}")
    print(f"  accept:     cycle {life['accept']} ({life['accept_ns']} ns)")
    resp = life["response"]
    if resp is not None and life["op"] == "R":
        hit = "MSHR hit (merged into a pending read)" if resp["mshr_hit"] else \
            "MSHR miss (allocated an entry)"
        print(f"  dispatch:   {hit}")
    c = life["command"]
    if c is not None:
        if "tag" in c:
            print(f"  media:      {c['op']} issued cycle {c['cycle']} ({c['ns']} ns), tag "
                  f"{c['tag']}, subarray {c['subarray']}")
        else:                                # a multi-plane command (MP2)
            print(f"  media:      {c['op']} issued cycle {c['cycle']} ({c['ns']} ns), "
                  f"megaplane {c['megaplane']}, planes {c['planes']:#x}, row {c['row']} "
                  f"(subarray {c['subarray']})")
        d = life["completion"]
        if d is not None:
            print(f"  completion: cycle {d['cycle']} ({d['ns']} ns), buffer_hit "
                  f"{d['buffer_hit']}, error {d['error']}")
    else:
        print("  media:      no command (" + ("strict-policy error, never programmed"
                                            if resp and resp["error"] else
                                            "none seen in the recorded cycles") + ")")
    if resp is not None:
        print(f"  response:   cycle {resp['cycle']} ({resp['ns']} ns), mshr_hit "
              f"{resp['mshr_hit']}, buffer_hit {resp['buffer_hit']}, error {resp['error']}; "
              f"latency {resp['cycle'] - life['arrival']} ticks from arrival")
    else:
        print("  response:   none in the recorded cycles")
    return 0


def _cmd_waves_check(a) -> int:
    from hbfsim.cosim.waves import WaveFile
    from hbfsim.model.trace import read_trace

    w = WaveFile(a.file)
    rows = read_trace(a.trace)
    n, why = w.check_trace(rows)
    if why is None:
        print(f"{a.file} and {a.trace} agree: {n} requests (accept and response cycles, "
              "flags)")
        return 0
    print(f"{a.file} and {a.trace} disagree: {why}")
    return 1
