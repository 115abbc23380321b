"""Named co-simulation scenarios: the golden model's functional checks and seeded random mixes.

Every scenario is a function ``f(seed, n) -> Scenario`` (``n``: how many requests, where the
scenario has a size). The configurations are small and use short NAND timings (tR 9 ticks)
so that a run takes thousands of cycles, not millions; scenarios share a few RTL parameter
sets (:data:`RTL_SETS`) so that they share Verilator builds. ``expect`` holds the functional
property each one demonstrates (tests/model/test_controller.py), checked on the events both
sides produced.
"""

from __future__ import annotations

__all__ = ["RTL_SETS", "SCENARIOS", "config", "gpu_program", "make", "random_config",
           "soak_configs", "workload"]

import random

from hbfsim.config import PAGE_BYTES, SCHEDULERS, HbfConfig, load_config
from hbfsim.cosim.scenario import Scenario
from hbfsim.model import workloads
from hbfsim.model.gpu import GpuConfig, GpuProgram, Kernel, Producer

#: Short NAND timings (tR 9, tPROG 17, tBERS 43 ticks), as tests/rtl/test_rtl_controller.py.
FAST = dict(t_read_us=0.01, t_prog_us=0.02, t_erase_us=0.05, buffer_hit_ticks=2,
            pages_per_block=4)
#: The small controller of the RTL tests (tests/rtl/rtl_helpers.small_config), with 32
#: request slots so that a page's 32 sector reads can all merge (§5.3). The stack shape
#: unless the RTL set says otherwise; :func:`make` runs any scenario in the channel shape
#: (``-ch``).
BASE = dict(host_ports="stack", channels=2, subarrays_per_channel=4,
            active_per_channel=4, admission=32, mshr_entries=8, queue_depth=4,
            write_buffer_entries=4, write_deadline_ticks=40, read_agg_window_ticks=6,
            read_agg_threshold_bytes=2048, write_drain_high_water=2, write_drain_window_ticks=30)
#: RTL parameter sets; scenarios on the same set share one build.
RTL_SETS = {
    "A": dict(),
    "B": dict(channels=4, scheduler="write-drain", read_mode="aggregation",
              write_timeout_policy="partial", active_per_channel=2),
    "C": dict(channels=4, scheduler="partition-2r2w", mshr_merge=False),
    "read-priority": dict(scheduler="read-priority"),
    "partition-1r3w": dict(channels=4, scheduler="partition-1r3w"),
    "partition-3r1w": dict(channels=4, scheduler="partition-3r1w", read_mode="aggregation"),
    "tiny": dict(mshr_entries=2, write_buffer_entries=2, admission=4, queue_depth=2,
                 active_per_channel=1),
    "link": dict(channel_bw_gbps=60.0),
    "1ch": dict(channels=1),
    "16ch": dict(channels=16),
    "active-total": dict(channels=4, active_per_channel=4, active_total=3,
                         scheduler="read-priority"),
    # the system layer (§2): stacks behind one request and one response port
    "2stacks": dict(stacks=2),
    "3stacks-contiguous": dict(stacks=3, stack_select="contiguous", scheduler="read-priority",
                               read_mode="aggregation"),
    # multi-plane commands (docs/timing-contract.md §7a): two megaplanes of two
    # planes per channel, three active slots (so a second megaplane's group can be cut,
    # MP5); the same geometry with multiplane off for comparison
    "mp-off": dict(megaplane_planes=2, active_per_channel=3),
    "mp-page": dict(megaplane_planes=2, active_per_channel=3, multiplane="page"),
    "mp-megaplane": dict(megaplane_planes=2, active_per_channel=3,
                         multiplane="megaplane"),
    # ... and with the rest of the controller's options: merging off, the write-drain
    # policy, aggregation and a stack-wide cap; four planes a megaplane and a longer window;
    # two stacks; the page stream on the smallest tables
    "mp-rich": dict(megaplane_planes=2, channels=4, multiplane="megaplane",
                    scheduler="write-drain", mshr_merge=False, active_total=5,
                    read_mode="aggregation", write_timeout_policy="partial"),
    "mp-m4": dict(megaplane_planes=4, subarrays_per_channel=8, queue_depth=6,
                  active_per_channel=8, scheduler="read-priority", multiplane="megaplane",
                  hyperpage_window_ticks=5),
    "mp-2stacks": dict(megaplane_planes=2, stacks=2, active_per_channel=3,
                       multiplane="megaplane"),
    "mp-tiny-page": dict(megaplane_planes=4, mshr_entries=2,
                         write_buffer_entries=2, admission=4, queue_depth=2,
                         active_per_channel=1, multiplane="page"),
    # the channel shape (timing-contract.md §1, §4.1, §4.2.3, §4.2.4): two ports over
    # small shared pools and fewer admission slots than a burst needs (the CI build, kept
    # small); four ports under a partition scheduler, where a page's reads enter a read port
    # and its writes a write port; four interleaved fcfs ports on larger tables
    # (these three share their pools across the ports: pools = "stack", §4.2.3)
    "ports": dict(host_ports="channel", pools="stack", channels=2, admission=5, mshr_entries=3,
                  write_buffer_entries=2, queue_depth=2, active_per_channel=2,
                  write_deadline_ticks=25),
    "ports-partition": dict(host_ports="channel", pools="stack", channels=4,
                            scheduler="partition-2r2w", subarrays_per_channel=2,
                            active_per_channel=2, admission=6, mshr_entries=3,
                            write_buffer_entries=2, queue_depth=2, write_deadline_ticks=25),
    "ports-fcfs": dict(host_ports="channel", pools="stack", channels=4, admission=12,
                       mshr_entries=4, write_buffer_entries=3, active_per_channel=2),
    # a pool per channel (docs/timing-contract.md §4.5): two MSHR entries and one
    # write-buffer entry per channel (a victim per pool); and under a partition scheduler
    "ports-pools": dict(host_ports="channel", channels=2, pools="channel", admission=5,
                        mshr_entries=4, write_buffer_entries=2, queue_depth=2,
                        active_per_channel=2, write_deadline_ticks=25),
    "ports-pools-partition": dict(host_ports="channel", channels=4, pools="channel",
                                  scheduler="partition-2r2w", subarrays_per_channel=2,
                                  active_per_channel=2, admission=8, mshr_entries=8,
                                  write_buffer_entries=4, queue_depth=2,
                                  write_deadline_ticks=25),
}


def config(rtl: str = "A", **over) -> HbfConfig:
    """The configuration of RTL set ``rtl`` with ``over`` applied."""
    v = BASE | RTL_SETS[rtl] | FAST | over
    if "capacity_bytes" not in v:
        # Eight erase blocks per subarray (small page numbers, a valid split).
        v["capacity_bytes"] = (v.get("stacks", 1) * v["channels"] * v["subarrays_per_channel"]
                               * v["pages_per_block"] * PAGE_BYTES * 8)
    return load_config(**v)


def _rows(cfg: HbfConfig, spec) -> list:
    """``[id, op, addr, bytes, 0, arrival]`` from ``(op, page, offset, bytes, arrival)``."""
    b = cfg.base_address
    return [[i, op, b + page * PAGE_BYTES + off, n, 0, a]
            for i, (op, page, off, n, a) in enumerate(spec)]


def workload(rng: random.Random, n: int, *, pages: int, reads: float = 0.6, gap: int = 3,
             sizes=(32, 128, 512, 4096)) -> list[tuple]:
    """``n`` random requests ``(op, page, offset, bytes, arrival)`` over ``pages`` pages.

    Writes are whole quarter pages half of the time (so pages can complete), else aligned
    fragments; arrivals come in bursts with gaps up to ``gap`` ticks.
    """
    out, t = [], 0
    for _ in range(n):
        t += rng.choice([0, 0, 0, rng.randint(0, gap)])
        op = "R" if rng.random() < reads else "W"
        page = rng.randrange(pages)
        if op == "W" and rng.random() < 0.5:
            off, size = 1024 * rng.randrange(4), 1024
        else:
            size = rng.choice(sizes)
            off = size * rng.randrange(PAGE_BYTES // size)
        out.append((op, page, off, size, t))
    return out


def _pages(cfg: HbfConfig) -> int:
    return cfg.pages_per_stack


# ---- the golden model's functional checks (tests/model/test_controller.py) -----------------

def conservation(seed: int, n: int = 64, channels: int = 2) -> Scenario:
    """Every request answered exactly once (routing at 1..16 channels)."""
    cfg = config(channels=channels)
    spec = [("R" if i % 3 else "W", (i * 7) % _pages(cfg), 0,
             PAGE_BYTES if i % 3 == 0 else 64, i) for i in range(n)]
    return Scenario(f"conservation-{channels}ch", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"requests": n, "responses": n, "answered_once": 1})


def shared_staging(seed: int, n: int = 32) -> Scenario:
    """One page read serves every merged request (R1): 1 READ, n-1 MSHR hits (tR 85 ticks,
    longer than the accepts take)."""
    cfg = config(t_read_us=0.1)
    n = max(2, min(n, PAGE_BYTES // 128))
    spec = [("R", 5, 128 * i, 128, i) for i in range(n)]
    return Scenario("shared-staging", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_reads": 1, "mshr_hits": n - 1, "responses": n})


def merging_off(seed: int, n: int = 32) -> Scenario:
    """With ``mshr_merge = false`` every read is its own page operation."""
    cfg = config("C")
    n = max(2, min(n, PAGE_BYTES // 128))
    spec = [("R", 5, 128 * i, 128, i) for i in range(n)]
    return Scenario("merging-off", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_reads": n, "mshr_hits": 0, "responses": n})


def burst(seed: int, n: int = 512) -> Scenario:
    """Burst page service (§5.3): pages of 32 merged 128 B reads, all at once. tR is 85
    ticks here (0.1 us), longer than a page's 32 accepts, so every read of a page merges."""
    cfg = config(t_read_us=0.1)
    pages = max(1, n // 32)
    spec = [("R", p, 128 * k, 128, 0) for p in range(pages) for k in range(32)]
    return Scenario("burst", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_reads": pages, "mshr_hits": pages * 31})


def saturation(seed: int, n: int = 96) -> Scenario:
    """Reads of distinct pages, all at tick 0: admission, MSHRs, queues and subarrays full."""
    cfg = config()
    n = min(n, _pages(cfg))
    spec = [("R", p, 0, 64, 0) for p in range(n)]
    return Scenario("saturation", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_reads": n, "mshr_hits": 0, "responses": n})


def coverage(seed: int, n: int = 0) -> Scenario:
    """Coverage union: overlapping fragments and the page's last byte complete a page (W1);
    repeated fragments alone never do (strict error at the idle drain)."""
    cfg = config()
    spec = [("W", 4, 0, 100, 0), ("W", 4, 50, 100, 1), ("W", 4, 0, 150, 2),
            ("W", 4, 4095, 1, 3), ("W", 4, 150, 3945, 4),
            ("W", 6, 0, 2048, 10), ("W", 6, 0, 2048, 11), ("W", 6, 1, 2047, 12)]
    return Scenario("coverage", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_programs": 1, "errors": 3, "responses": 8})


def _half_pages(cfg: HbfConfig, n: int) -> list[tuple]:
    pages = max(1, n // 8)
    return [("W", 3 + p, 256 * k, 256, 20 * p + k) for p in range(pages) for k in range(8)]


def strict(seed: int, n: int = 32) -> Scenario:
    """Half-written pages at their deadline: strict policy answers every write with an
    incomplete-page error and programs nothing (W3)."""
    cfg = config()
    spec = _half_pages(cfg, n)
    return Scenario("strict", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_programs": 0, "errors": len(spec)})


def partial(seed: int, n: int = 32) -> Scenario:
    """The same half pages under the partial policy: padded and programmed, no error."""
    cfg = config("B")
    spec = _half_pages(cfg, n)
    return Scenario("partial", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_programs": len(spec) // 8, "errors": 0})


def read_after_write(seed: int, n: int = 0) -> Scenario:
    """A read of a page with an OPEN write entry stalls and flushes it (``raw``), then reads
    the programmed page; a read of a half-written page gets the write's strict error first."""
    cfg = config()
    spec = [("W", 2, 128 * k, 128, k) for k in range(32)]
    spec.append(("R", 2, 0, 256, 33))
    spec += [("W", 9, 0, 128, 60), ("R", 9, 0, 64, 70)]
    return Scenario("read-after-write", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"page_programs": 1, "errors": 1, "responses": len(spec)})


def scheduler(name: str, rtl: str):
    def make_one(seed: int, n: int = 120) -> Scenario:
        cfg = config(rtl)
        rng = random.Random(seed)
        spec = workload(rng, n, pages=10, reads=0.6)
        return Scenario(f"sched-{name}", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                        expect={"responses": n, "answered_once": 1})
    make_one.__doc__ = f"A read/write mix under the {name} scheduler (§7)."
    return make_one


def mix_on(rtl: str, tag: str, resp_ready: float, sector_bytes: int = 1, **load):
    def make_one(seed: int, n: int = 200) -> Scenario:
        cfg = config(rtl)
        rng = random.Random(seed)
        spec = workload(rng, n, **({"pages": 8} | load))
        return Scenario(f"mix-{tag}", cfg.as_dict(), _rows(cfg, spec), resp_ready=resp_ready,
                        seed=seed, sector_bytes=sector_bytes,
                        expect={"responses": n, "answered_once": 1})
    make_one.__doc__ = (f"Seeded random traffic on RTL set {rtl!r}, resp.ready high with "
                        f"probability {resp_ready}{_coverage_note(sector_bytes)}")
    return make_one


def _coverage_note(sector_bytes: int) -> str:
    return f", {sector_bytes}-byte write coverage." if sector_bytes > 1 else "."


# ---- the channel shape (timing-contract.md §1, §4.1, §4.2.3, §4.2.4, §11.6) -----------

def _on_port(cfg: HbfConfig, port: int, k: int, op: str = "R") -> tuple[str, int]:
    """``(op, page)``: the ``k``-th stack-local page whose requests of kind ``op`` enter
    port ``port`` (§1: the port of the mapped channel). Under a partition scheduler the
    port decides the kind (the first ``R`` ports take reads, the others writes)."""
    from hbfsim.model.mapping import Mapper

    if cfg.scheduler.startswith("partition-"):
        op = "W" if port >= cfg.read_channels else "R"
    mapper = Mapper(cfg)
    pages = (q for q in range(cfg.pages_per_stack)
             if mapper.channel_of(q, op == "W")[0] == port)
    for _ in range(k):
        next(pages)
    return op, next(pages)


def ports_same_cycle(rtl: str):
    def make_one(seed: int, n: int = 96) -> Scenario:
        cfg = config(rtl)
        rng = random.Random(seed)
        spec = []
        for k in range(max(1, n // cfg.channels)):
            for p in range(cfg.channels):
                op, page = _on_port(cfg, p, rng.randrange(3), rng.choice("RRW"))
                size = rng.choice([128, 1024, 4096]) if op == "W" else 128
                off = size * rng.randrange(PAGE_BYTES // size)
                spec.append((op, page, off, size, 2 * k))
        return Scenario(f"ports-same-cycle-{rtl}", cfg.as_dict(), _rows(cfg, spec),
                        seed=seed, expect={"responses": len(spec), "answered_once": 1})
    make_one.__doc__ = (f"Every port of RTL set {rtl!r} presents a request in the same "
                        "cycles (§4.1): reads, sector and whole-page writes of a few pages "
                        "each, so that merges, pool stalls and RAW stalls on one port meet the "
                        "other ports' accepts and dispatches.")
    return make_one


def pool_fairness(rtl: str):
    def make_one(seed: int, n: int = 64) -> Scenario:
        cfg = config(rtl)
        per = max(1, n // (2 * cfg.channels))
        reads = [_on_port(cfg, p, k, "R") for k in range(per) for p in range(cfg.channels)]
        writes = [_on_port(cfg, p, per + k, "W") for k in range(per)
                  for p in range(cfg.channels)]
        reads = [r for r in reads if r[0] == "R"]
        writes = [w for w in writes if w[0] == "W"]
        spec = [(op, page, 0, 64, 0) for op, page in reads]
        spec += [(op, page, 1024 * j, 1024, 1) for op, page in writes for j in range(2)]
        return Scenario(f"pool-fairness-{rtl}", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                        expect={"responses": len(spec), "page_reads": len(reads)})
    make_one.__doc__ = (f"Shared pools exhausted by every port at once on RTL set {rtl!r} "
                        "(§4.2.3, §11.6): read misses of distinct pages at tick 0 against "
                        "the few MSHR entries, then half-page writes of distinct pages against "
                        "the write buffer (pressure victims, one per cycle); each pool's "
                        "pointer rotates.")
    return make_one


def admission_full(rtl: str):
    def make_one(seed: int, n: int = 48) -> Scenario:
        cfg = config(rtl)
        rng = random.Random(seed)
        spec = [(op, page, 0, 256, 0) for _ in range(max(1, n // cfg.channels))
                for op, page in (_on_port(cfg, p, rng.randrange(4), rng.choice("RW"))
                                 for p in range(cfg.channels))]
        return Scenario(f"admission-full-{rtl}", cfg.as_dict(), _rows(cfg, spec),
                        resp_ready=0.6, seed=seed,
                        expect={"responses": len(spec), "answered_once": 1})
    make_one.__doc__ = (f"Admission full on RTL set {rtl!r} (§4.1): every port keeps "
                        "presenting requests of its pages against fewer admission slots; "
                        "``req[p].ready`` follows ``free >= P`` (the rotating rank below P "
                        "slots), with backpressure on every response port.")
    return make_one


def pressure_raw(seed: int, n: int = 0) -> Scenario:
    """The oldest OPEN entry flushed by a read of another port in the cycle a write stalls
    for a write-buffer entry (§4.2 write step 2, §4.2.4): the golden model chooses no
    pressure victim in that cycle and the next oldest OPEN entry in the next one
    (docs/rtl.md "Channel shape": the contract's text would count the raw-flushed entry as
    the pending victim). Two entries, ports 0 and 1."""
    cfg = config("ports")
    spec = [("W", 0, 0, 128, 0), ("W", 1, 0, 128, 0), ("R", 0, 0, 128, 1),
            ("W", 3, 0, 128, 1)]
    return Scenario("pressure-raw", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"responses": 4, "errors": 3, "page_reads": 1})


def partition_same_page(seed: int, n: int = 64) -> Scenario:
    """A page on two ports under ``partition-2r2w`` (§4.2.4): its reads enter a read
    port, its writes a write port, in the same cycles; a read and a write of one page
    dispatched together (the write's PROGRAM waits for the read's entry), a read after a
    write of its page (RAW across ports), and a write that waits for an entry while a
    read of its page allocates."""
    cfg = config("ports-partition")
    rng = random.Random(seed)
    spec = []
    t = 0
    for _ in range(max(1, n // 2)):
        page = rng.randrange(6)
        wsize = rng.choice([1024, 4096])
        spec.append(("R", page, 0, 128, t))
        spec.append(("W", page, wsize * rng.randrange(PAGE_BYTES // wsize), wsize,
                     t + rng.choice([0, 0, 1, 3])))
        t += rng.choice([0, 1, 2, 6])
    spec.sort(key=lambda r: r[4])
    return Scenario("partition-same-page", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                    expect={"responses": len(spec), "answered_once": 1})


# ---- the closed-loop GPU model on the RTL (issue 4 item 1) --------------------------------

def gpu_program(rng: random.Random, cfg: HbfConfig, n: int, *, pages: int = 8,
                reads: float = 0.7, kernels: int | None = None,
                warps: int | None = None) -> GpuProgram:
    """A seeded random closed-loop GPU program of ``n`` accesses over ``pages`` pages.

    Kernels (1-3) of warps (2-12) with random bounds (1-8 outstanding), compute delays,
    start offsets and SMs; reader warps load 32/64/128 B sectors and lines, walking a page
    line by line and jumping to another now and then; writer warps store a page in 128 B
    lines from the start (sometimes stopping short: an incomplete page) or scattered
    sectors. GPU side: 1-8 memory partitions, a return delay, a kernel launch gap.
    """
    B = cfg.base_address
    nk = kernels if kernels is not None else rng.choice([1, 1, 2, 3])
    data = []
    left = n
    for k in range(nk):
        share = left if k == nk - 1 else max(1, n // nk)
        left -= share
        nw = warps if warps is not None else rng.randint(2, 12)
        streams = [[] for _ in range(nw)]
        writer = [rng.random() > reads for _ in range(nw)]
        pos = [(rng.randrange(pages), 0) for _ in range(nw)]
        for i in range(share):
            w = i % nw
            page, line = pos[w]
            if rng.random() < 0.15 or line >= 32:
                page, line = rng.randrange(pages), 0
            if writer[w]:
                if rng.random() < 0.85:
                    streams[w].append(("W", B + page * PAGE_BYTES + 128 * line, 128))
                else:
                    sz = rng.choice([32, 64])
                    streams[w].append(("W", B + page * PAGE_BYTES
                                       + sz * rng.randrange(PAGE_BYTES // sz), sz))
            else:
                sz = rng.choice([32, 64, 128])
                streams[w].append(("R", B + page * PAGE_BYTES + 128 * line
                                   + rng.choice([0, 32, 64]) % (128 - sz + 32), sz))
            pos[w] = (page, line + 1)
        prods = [(s, rng.choice([1, 1, 2, 4, 8]), rng.choice([0, 0, 0, 7]),
                  rng.choice([None, 0, 3, 25]), w % 4) for w, s in enumerate(streams) if s]
        data.append((f"k{k}", rng.choice([0, 2]), prods))
    gpu = GpuConfig(sms=4, partitions=rng.choice([1, 2, 4, 8]),
                    return_cycles=rng.choice([0, 0, 5]), launch_cycles=rng.choice([0, 12]))

    def make():
        return [Kernel(name, [Producer(list(acc), bound=b, start=st, compute=c, sm=sm)
                              for acc, b, st, c, sm in prods], compute=kc)
                for name, kc, prods in data]

    return GpuProgram(make, "gpu-random", gpu=gpu)


def gpu_mix_on(rtl: str, tag: str, resp_ready: float, sector_bytes: int = 1, **load):
    def make_one(seed: int, n: int = 200) -> Scenario:
        cfg = config(rtl)
        rng = random.Random(seed)
        prog = gpu_program(rng, cfg, n, **({"pages": 8} | load))
        return Scenario.from_program(f"gpu-{tag}", cfg, prog, resp_ready=resp_ready,
                                     seed=seed, sector_bytes=sector_bytes,
                                     expect={"responses": n, "answered_once": 1})
    make_one.__doc__ = (f"A seeded random closed-loop GPU program on RTL set {rtl!r}, "
                        f"resp.ready high with probability {resp_ready}"
                        f"{_coverage_note(sector_bytes)}")
    return make_one


def gpu_mshr_grid(seed: int, n: int = 256) -> Scenario:
    """The MSHR study's kernel (§5.2), closed loop on the RTL: 16 warps x 2 outstanding
    128 B loads over pages of 16 entries; merging depends on the RTL's response timing."""
    cfg = config(t_read_us=0.1)
    pages = max(1, n // 16)
    if pages > _pages(cfg):
        raise ValueError(f"gpu-mshr-grid holds at most {16 * _pages(cfg)} requests, not {n}")
    prog = workloads.mshr_grid(cfg, pages=pages, entries=16, warps=16, bound=2, sms=4)
    return Scenario.from_program("gpu-mshr-grid", cfg, prog, seed=seed,
                                 expect={"responses": pages * 16, "answered_once": 1})


def gpu_rw_isolation(seed: int, n: int = 320) -> Scenario:
    """The read/write isolation kernel (§6.2), closed loop on the RTL under the
    read-priority scheduler: one writer warp stores a whole page in 128 sectors, all
    outstanding (stores are acknowledged after PROGRAM, so admission holds them: 160
    request slots), and reader warps (4 or more, at most 128 sectors each) start later."""
    cfg = config("read-priority", write_deadline_ticks=400, admission=160)
    rpages = max(4, -(-(n - 128) // 128))          # at most 128 sectors per read page
    if rpages > 200:
        raise ValueError(f"gpu-rw-isolation holds at most {128 + 200 * 128} requests, not {n}")
    reads = max(1, (n - 128) // rpages) * rpages
    prog = workloads.rw_isolation(cfg, read_sectors=reads, read_pages=rpages, write_pages=1,
                                  write_sectors=128, read_delay_us=0.05, read_bound=4,
                                  write_bound=128, write_page_base=200, sms=4)
    return Scenario.from_program("gpu-rw-isolation", cfg, prog, seed=seed,
                                 expect={"responses": reads + 128, "page_programs": 1,
                                         "errors": 0})


def gpu_mix(seed: int, n: int = 200) -> Scenario:
    """Seeded random everything, closed loop: configuration (1-16 channels, every policy),
    GPU program and backpressure."""
    rng = random.Random(seed)
    cfg = random_config(rng)
    p = rng.choice([1.0, 0.8, 0.5])
    prog = gpu_program(rng, cfg, n, pages=rng.choice([4, 8, 16]),
                       reads=rng.choice([0.5, 0.7, 0.9]))
    return Scenario.from_program(f"gpu-mix-s{seed}", cfg, prog, resp_ready=p, seed=seed,
                                 expect={"responses": n, "answered_once": 1})


# ---- multi-plane (hyperpage) commands (docs/timing-contract.md §7a) ----------------

MP_MODES = ("off", "page", "megaplane")


def _megapage(cfg: HbfConfig, ch: int, g: int, row: int, planes=None) -> list[int]:
    """Stack-local pages of megapage ``row`` of megaplane ``g`` on channel ``ch``: one per
    plane (``planes``: the plane indices, default all), under the interleaved mapping (a
    page's channel is ``q mod channels``, its channel-local page ``q div channels``, its
    subarray the local page mod ``subarrays_per_channel``; MP2's row is local div S)."""
    M, S = cfg.megaplane_planes, cfg.subarrays_per_channel
    planes = range(M) if planes is None else planes
    return [(row * S + g * M + p) * cfg.channels + ch for p in planes]


def _mp_full(cfg):
    """Every megaplane of both channels reads one whole megapage (8 page reads), the pages
    presented back to back from tick 0; on each channel the second megaplane's group is cut
    to the one active slot the first left (MP5), its other page a second command."""
    spec = [("R", q, 0, PAGE_BYTES, 0) for row in (1,) for g in (0, 1) for ch in (0, 1)
            for q in _megapage(cfg, ch, g, row)]
    return spec, {"page_reads": 8, "responses": 8}


def _mp_partial(cfg):
    """Partial megapages: one plane of a megapage alone (it issues at the window, MP4), its
    other plane 40 ticks later (a second command), and a megapage whose second page comes
    after the window (two commands)."""
    a, b = _megapage(cfg, 0, 1, 2)
    c, d = _megapage(cfg, 1, 0, 3)
    e, f = _megapage(cfg, 0, 0, 5)
    spec = [("R", a, 0, 512, 0), ("R", c, 0, PAGE_BYTES, 1), ("R", e, 0, 256, 2),
            ("R", f, 0, 256, 6), ("R", b, 0, 128, 40), ("R", d, 0, PAGE_BYTES, 41)]
    return spec, {"page_reads": 6, "responses": 6}


def _mp_two_rows(cfg):
    """Two megapages of one megaplane in a row (MP1: the second waits for the first's
    completion), with 128-byte reads merging into their pages' MSHR entries, and a third
    megapage on the other megaplane meanwhile."""
    rows = [_megapage(cfg, 0, 1, 1), _megapage(cfg, 0, 1, 4), _megapage(cfg, 0, 0, 6)]
    spec = [("R", q, 128 * k, 128, i) for i, q in enumerate(rows[0] + rows[1])
            for k in range(2)]
    spec += [("R", q, 0, 2048, 3) for q in rows[2]]
    return spec, {"page_reads": 6, "mshr_hits": 4, "responses": len(spec)}


def _mp_program(cfg):
    """PROGRAM groups (MP9): whole-page writes of a megapage on both megaplanes of channel
    0 (each flushed ``full`` at once), a megapage of channel 1 written in quarter pages
    (flushed ``full`` on their last quarters), then reads of the programmed pages."""
    full = _megapage(cfg, 0, 0, 2) + _megapage(cfg, 0, 1, 2)
    spec = [("W", q, 0, PAGE_BYTES, i) for i, q in enumerate(full)]
    spec += [("W", q, 1024 * k, 1024, 4 + k) for q in _megapage(cfg, 1, 1, 3)
             for k in range(4)]
    spec.sort(key=lambda r: r[4])
    spec += [("R", q, 0, 64, 120) for q in full]
    return spec, {"page_programs": 6, "errors": 0, "responses": len(spec)}


def _mp_mix(cfg, rng, n):
    """Seeded random megapage traffic over the first three rows of every megaplane of every
    stack: bursts that walk a megapage's planes (in random order, sometimes stopping short
    or skipping a plane), reads of random sizes or whole-page writes (flushed ``full`` at
    once: PROGRAM groups) and quarter-page writes, with random gaps."""
    G = cfg.subarrays_per_channel // cfg.megaplane_planes
    M = cfg.megaplane_planes
    # stack-local page q of stack s is page q * stacks + s (stack_select = "interleave")
    megapages = [[q * cfg.stacks + s for q in _megapage(cfg, ch, g, row)]
                 for s in range(cfg.stacks) for row in range(3) for g in range(G)
                 for ch in range(cfg.channels)]
    out, t = [], 0
    while len(out) < n:
        pages = list(rng.choice(megapages))
        rng.shuffle(pages)
        pages = pages[:rng.choice([M, M, M, max(1, M - 1), 1])]
        kind = rng.random()
        for q in pages:
            t += rng.choice([0, 0, 1, 1, 2, rng.randint(0, 12)])
            if kind < 0.6:
                size = rng.choice([64, 512, PAGE_BYTES])
                out.append(("R", q, size * rng.randrange(PAGE_BYTES // size), size, t))
            elif kind < 0.85:
                out.append(("W", q, 0, PAGE_BYTES, t))
            else:
                for k in range(4):
                    out.append(("W", q, 1024 * k, 1024, t + k))
                t += 3
    out = sorted(out[:n], key=lambda r: r[4])
    return out


def multiplane(kind: str, mode: str):
    build = {"full": _mp_full, "partial": _mp_partial, "two-rows": _mp_two_rows,
             "program": _mp_program}[kind]

    def make_one(seed: int, n: int = 0) -> Scenario:
        cfg = config(f"mp-{mode}")
        spec, expect = build(cfg)
        return Scenario(f"mp-{kind}-{mode}", cfg.as_dict(), _rows(cfg, spec), seed=seed,
                        expect=expect)
    make_one.__doc__ = (f"{build.__doc__.split('.')[0]}, multiplane = {mode!r} "
                        "(docs/timing-contract.md §7a).")
    return make_one


def multiplane_mix(mode: str, resp_ready: float = 0.8):
    def make_one(seed: int, n: int = 200) -> Scenario:
        cfg = config(f"mp-{mode}")
        spec = _mp_mix(cfg, random.Random(seed), n)   # arrival order: sorted, stable
        return Scenario(f"mp-mix-{mode}", cfg.as_dict(), _rows(cfg, spec),
                        resp_ready=resp_ready, seed=seed,
                        expect={"responses": n, "answered_once": 1})
    make_one.__doc__ = (f"Seeded random traffic on the megapages of RTL set 'mp-{mode}', "
                        f"resp.ready high with probability {resp_ready}.")
    return make_one


# ---- random configurations --------------------------------------------------------------

def random_config(rng: random.Random, **fixed) -> HbfConfig:
    """A random small configuration the RTL implements (``fixed`` keys win)."""
    ch = fixed.get("channels", rng.choice([1, 2, 4, 8, 16]))
    subs = rng.choice([1, 2, 4])
    scheds = ["fcfs", "read-priority", "write-drain"]
    if ch % 4 == 0:  # a partition splits the channels in quarters (config validation)
        scheds += [s for s in SCHEDULERS if s.startswith("partition-")]
    v = dict(channels=ch, subarrays_per_channel=subs,
             active_per_channel=rng.choice([1, 2, subs]),
             admission=rng.choice([4, 8, 16]), mshr_entries=rng.choice([2, 4, 8]),
             mshr_merge=rng.random() < 0.7, queue_depth=rng.choice([2, 4]),
             write_buffer_entries=rng.choice([2, 4]),
             write_deadline_ticks=rng.choice([12, 40, 200]),
             write_timeout_policy=rng.choice(["strict", "partial"]),
             read_mode=rng.choice(["demand", "aggregation"]),
             read_agg_window_ticks=rng.choice([3, 6, 20]),
             read_agg_threshold_bytes=rng.choice([256, 2048]),
             scheduler=rng.choice(scheds), write_drain_high_water=rng.choice([1, 2]),
             write_drain_window_ticks=rng.choice([10, 30]),
             channel_bw_gbps=rng.choice([192.0, 192.0, 60.0]))
    if rng.random() < 0.3:   # a stack-wide active cap below the channels' sum (§7)
        v["active_total"] = rng.randint(1, max(1, ch * v["active_per_channel"] - 1))
    v |= fixed
    return config(**v)


def mix(seed: int, n: int = 200) -> Scenario:
    """Seeded random everything: configuration (1-16 channels, every policy), traffic,
    backpressure."""
    rng = random.Random(seed)
    cfg = random_config(rng)
    p = rng.choice([1.0, 0.8, 0.5])
    spec = workload(rng, n, pages=rng.choice([4, 8, 16]), reads=rng.choice([0.3, 0.6, 0.9]),
                    gap=rng.choice([1, 3, 10]))
    return Scenario(f"mix-s{seed}", cfg.as_dict(), _rows(cfg, spec), resp_ready=p, seed=seed,
                    expect={"responses": n, "answered_once": 1})


def soak_configs() -> list[HbfConfig]:
    """The soak's eighteen configurations (``cosim soak``): six that together use every
    scheduler, read mode, write policy and merging setting, at 1, 2, 4, 8 and 16 channels,
    one with a stack-wide active cap and one with two stacks, in the stack shape; the
    multi-plane sets ``mp-rich`` and ``mp-m4`` (megaplane commands; their runs use megapage
    traffic, :func:`soak_traffic`) and ``mp-tiny-page`` (the page stream); and the same
    nine in the channel shape (``host_ports = "channel"``, §1, §2; the two-stack row with
    ``S * C`` ports), there with a pool per channel (the shape's default, §4.5) where the
    tables split evenly over the channels (1, 2 and 4 channels) and shared pools at 8 and 16.
    """
    rows = [
        dict(channels=1, scheduler="fcfs", read_mode="demand", write_timeout_policy="strict"),
        dict(channels=2, scheduler="read-priority", read_mode="aggregation",
             write_timeout_policy="partial", mshr_merge=False, stacks=2),
        dict(channels=4, scheduler="write-drain", read_mode="demand",
             write_timeout_policy="partial", active_per_channel=2),
        dict(channels=4, scheduler="partition-1r3w", read_mode="aggregation",
             write_timeout_policy="strict"),
        dict(channels=8, scheduler="partition-2r2w", read_mode="demand",
             write_timeout_policy="strict", mshr_merge=False, channel_bw_gbps=60.0,
             active_total=6),
        dict(channels=16, scheduler="partition-3r1w", read_mode="aggregation",
             write_timeout_policy="partial", subarrays_per_channel=2),
    ]
    mp = ("mp-rich", "mp-m4", "mp-tiny-page")
    return [config(**r) for r in rows] + [config(k) for k in mp] + \
        [config(**r, host_ports="channel", **_pools(r)) for r in rows] + \
        [config(k, host_ports="channel", **_pools(RTL_SETS[k])) for k in mp]


def _pools(over: dict) -> dict:
    """``pools = "stack"`` where the channel shape's default, a pool per channel (§4.5),
    would not split the tables of ``over`` (on :data:`BASE`) evenly; else nothing."""
    v = BASE | over
    even = v["mshr_entries"] % v["channels"] == 0 \
        and v["write_buffer_entries"] % v["channels"] == 0
    return {} if even else {"pools": "stack"}


def soak_traffic(rng: random.Random, cfg: HbfConfig, n: int) -> list[tuple]:
    """One soak run's requests ``(op, page, offset, bytes, arrival)``: megapage bursts
    (:func:`_mp_mix`) on a multi-plane configuration, so that commands group; otherwise
    :func:`workload` over a random number of pages."""
    if getattr(cfg, "multiplane", "off") != "off":
        return _mp_mix(cfg, rng, n)
    return workload(rng, n, pages=rng.choice([4, 8, 16, 32]), reads=rng.choice([0.3, 0.6, 0.9]),
                    gap=rng.choice([1, 3, 10]))


SCENARIOS = {
    "conservation": conservation,
    "shared-staging": shared_staging,
    "merging-off": merging_off,
    "burst": burst,
    "saturation": saturation,
    "coverage": coverage,
    "strict": strict,
    "partial": partial,
    "read-after-write": read_after_write,
    "sched-fcfs": scheduler("fcfs", "A"),
    "sched-read-priority": scheduler("read-priority", "read-priority"),
    "sched-write-drain": scheduler("write-drain", "B"),
    "sched-partition-1r3w": scheduler("partition-1r3w", "partition-1r3w"),
    "sched-partition-2r2w": scheduler("partition-2r2w", "C"),
    "sched-partition-3r1w": scheduler("partition-3r1w", "partition-3r1w"),
    "mix-backpressure": mix_on("A", "backpressure", 0.6),
    "mix-aggregation": mix_on("B", "aggregation", 0.8, reads=0.7),
    "mix-merge-off": mix_on("C", "merge-off", 1.0, reads=0.8),
    "mix-tiny": mix_on("tiny", "tiny", 0.7, pages=6),
    "mix-link": mix_on("link", "link", 1.0, pages=10, reads=0.8),
    "mix-1ch": mix_on("1ch", "1ch", 0.7, pages=6, reads=0.5),
    "mix-16ch": mix_on("16ch", "16ch", 0.8, pages=40, reads=0.7),
    "mix-active-total": mix_on("active-total", "active-total", 0.8, pages=16, reads=0.7),
    "mix-sectors": mix_on("A", "sectors", 0.8, sector_bytes=32, reads=0.4),
    "mix-2stacks": mix_on("2stacks", "2stacks", 0.7, pages=16, reads=0.6),
    "mix": mix,
    "partition-same-page": partition_same_page,
    "pressure-raw": pressure_raw,
    "mix-ports": mix_on("ports", "ports", 0.7, pages=8, reads=0.6),
    "mix-ports-partition": mix_on("ports-partition", "ports-partition", 0.8, pages=8,
                                  reads=0.6),
    "mix-ports-fcfs": mix_on("ports-fcfs", "ports-fcfs", 0.8, pages=12, reads=0.6),
    "gpu-mshr-grid": gpu_mshr_grid,
    "gpu-rw-isolation": gpu_rw_isolation,
    "gpu-backpressure": gpu_mix_on("A", "backpressure", 0.6),
    "gpu-aggregation": gpu_mix_on("B", "aggregation", 0.8, reads=0.8),
    "gpu-16ch": gpu_mix_on("16ch", "16ch", 0.9, pages=40),
    "gpu-sectors": gpu_mix_on("A", "sectors", 0.8, sector_bytes=32, reads=0.5),
    # 3 x 256 pages per stack, selected contiguously: pages 0..767 reach every stack
    "gpu-3stacks": gpu_mix_on("3stacks-contiguous", "3stacks", 0.8, pages=768, reads=0.7),
    "gpu-mix": gpu_mix,
    # the channel shape's closed loop (G5': one grant per port per tick) on the CI's two-port
    # build (RTL set 'ports', shared with mix-ports)
    "gpu-ports": gpu_mix_on("ports", "ports", 0.7, pages=8),
    # pools per channel (§4.5)
    "mix-ports-pools": mix_on("ports-pools", "ports-pools", 0.7, pages=8, reads=0.6),
    "mix-ports-pools-partition": mix_on("ports-pools-partition", "ports-pools-partition", 0.8,
                                        pages=8, reads=0.6),
    "gpu-ports-pools": gpu_mix_on("ports-pools", "ports-pools", 0.7, pages=8),
}
for _mode in MP_MODES:
    for _kind in ("full", "partial", "two-rows", "program"):
        SCENARIOS[f"mp-{_kind}-{_mode}"] = multiplane(_kind, _mode)
    SCENARIOS[f"mp-mix-{_mode}"] = multiplane_mix(_mode)
for _set, _p in (("rich", 0.8), ("m4", 1.0), ("2stacks", 0.7), ("tiny-page", 0.5)):
    SCENARIOS[f"mp-mix-{_set}"] = multiplane_mix(_set, _p)
# the channel shape's directed scenarios (and on pools per channel, §4.5)
for _set in ("ports", "ports-partition", "ports-pools", "ports-pools-partition"):
    SCENARIOS[f"ports-same-cycle-{_set}"] = ports_same_cycle(_set)
    SCENARIOS[f"pool-fairness-{_set}"] = pool_fairness(_set)
    SCENARIOS[f"admission-full-{_set}"] = admission_full(_set)
for _c in (1, 4, 8, 16):
    SCENARIOS[f"conservation-{_c}ch"] = (lambda c: lambda seed, n=64: conservation(seed, n, c))(_c)


def make(name: str, seed: int = 1, n: int | None = None,
         host_ports: str | None = None) -> Scenario:
    """Build scenario ``name`` (``n`` requests where it has a size).

    The scenario runs in the shape of its RTL set (the stack shape, or the channel shape of
    a ``ports`` set); ``host_ports = "channel"`` runs the same requests, media and
    ``resp.ready`` pattern in the channel shape (§1: a request port and a response port per
    channel) with its default pools where the tables split evenly over the channels (a pool
    per channel, §4.5; else shared), named ``<name>-ch`` (its own RTL build: the Verilog
    differs).

    Raises
    ------
    ValueError
        Unknown name (the message lists the known ones), a bad size or shape.
    """
    if host_ports not in (None, "channel"):
        raise ValueError(f"host_ports must be channel (or the scenario's own shape), not "
                         f"{host_ports!r}")
    f = SCENARIOS.get(name)
    if f is None:
        raise ValueError(f"--scenario must be one of {', '.join(sorted(SCENARIOS))}, "
                         f"not {name!r}")
    if n is not None and n < 1:
        raise ValueError(f"--requests must be at least 1, not {n}")
    sc = f(seed) if n is None else f(seed, n)
    if host_ports == "channel":
        # the shape's default pools, a pool per channel (§4.5), where the tables split evenly
        c = sc.config
        even = c["mshr_entries"] % c["channels"] == 0 \
            and c["write_buffer_entries"] % c["channels"] == 0
        sc.config = dict(c, host_ports="channel", pools="channel" if even else "stack")
        sc.name = f"{sc.name}-ch"
    return sc
