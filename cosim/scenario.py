"""One co-simulation input: a configuration, a request source and a ``resp.ready`` pattern.

The request source is either a fixed list of requests with arrival ticks (CSV, trace
replay, device streams, the named scenarios) or a closed-loop GPU program
(:func:`hbfsim.model.gpu.program_spec`), which the testbench runs through a
:class:`hbfsim.model.gpu.GpuPort` fed by the RTL's own responses.

A :class:`Scenario` is plain data. It travels to the simulator process as JSON in a file named
by the environment variable :data:`SCENARIO_ENV` (issue 4 item 2), and both sides of the
comparison are built from it: the golden model (:class:`hbfsim.model.system.HbfSystem`) and
the RTL testbench (:mod:`hbfsim.cosim.testbench`) get the same requests, the same media
timing (:class:`hbfsim.model.media.Media`) and the same consumer ``ready`` per tick.
"""

from __future__ import annotations

__all__ = ["SCENARIO_ENV", "Batch", "Scenario", "ready_function"]

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hbfsim.config import HbfConfig, build_config
from hbfsim.model.controller import Request
from hbfsim.model.gpu import GpuProgram, program_from_spec, program_spec
from hbfsim.model.mapping import Mapper
from hbfsim.model.requests import write_pattern

#: Environment variable naming the batch file the cocotb test module reads.
SCENARIO_ENV = "HBFSIM_COSIM_BATCH"

_M64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    # splitmix64 finaliser: a cheap, well-spread hash of (seed, tick), the same in any process.
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def ready_function(p: float, seed: int):
    """``f(tick) -> bool``: the consumer's ``resp.ready``, high with probability ``p``.

    A pure function of ``(seed, tick)``, so the golden model (which asks only in ticks with a
    response candidate) and the RTL testbench (which drives it in every cycle it is awake)
    see the same value in every tick. Returns None for ``p >= 1`` (always ready).
    """
    if p >= 1.0:
        return None
    if p <= 0.0:
        raise ValueError(f"resp_ready must be in (0, 1], not {p!r}")
    threshold = int(p * (1 << 64))
    base = (seed & 0xFFFFFFFF) << 40

    def ready(t: int) -> bool:
        return _mix64(base + t) < threshold

    return ready


@dataclass
class Scenario:
    """Inputs of one co-simulation run.

    Members
    -------
    name : str
        Identifier (file names of traces and waves derive from it).
    config : dict
        ``HbfConfig.as_dict()`` of the configuration.
    requests : list of [id, op, addr, nbytes, source, arrival]
        In presentation order (non-decreasing arrival); ``addr`` is an HBF address. Empty
        when ``program`` is given.
    resp_ready : float
        Probability that the consumer is ready in a tick (1.0: always, contract §8).
    seed : int
        Seed of the ``resp.ready`` pattern (and a record of how the requests were drawn).
    sector_bytes : int
        Write-coverage granularity of the RTL (``emit_verilog`` option; 1 is exact). Above 1
        the RTL equals the byte-exact golden model only when every write starts and ends on
        a ``sector_bytes`` boundary, which :meth:`validate` requires.
    expect : dict
        Functional checks, ``{summary key: value}`` (see :func:`hbfsim.cosim.golden.summary`),
        asserted on both sides' observed events.
    golden_overrides : dict
        Configuration changes applied to the golden model only. Empty in every real run; a
        test sets one to prove that the scoreboard reports a disagreement.
    program : dict or None
        A closed-loop GPU program (:func:`hbfsim.model.gpu.program_spec`) instead of a
        request list: request ids are its creation order, sources its memory partitions,
        arrivals its port grants, and its next requests depend on the responses.
    """

    name: str
    config: dict
    requests: list
    resp_ready: float = 1.0
    seed: int = 0
    sector_bytes: int = 1
    expect: dict = field(default_factory=dict)
    golden_overrides: dict = field(default_factory=dict)
    program: dict | None = None

    # ---- construction ----------------------------------------------------------------
    @classmethod
    def from_requests(cls, name: str, cfg: HbfConfig, requests, **kw) -> "Scenario":
        """Build from :class:`Request` objects (e.g. ``load_requests_csv``), in the order
        given; arrivals must not go backwards."""
        rows = [[r.id, r.op, r.addr, r.nbytes, r.source, r.arrival] for r in requests]
        sc = cls(name, cfg.as_dict(), rows, **kw)
        sc.validate()
        return sc

    @classmethod
    def from_program(cls, name: str, cfg: HbfConfig, program: GpuProgram, gpu=None,
                     limit: int | None = None, **kw) -> "Scenario":
        """Build from a closed-loop GPU program (its first ``limit`` accesses, see
        :func:`~hbfsim.model.gpu.program_spec`)."""
        sc = cls(name, cfg.as_dict(), [], program=program_spec(program, gpu, limit), **kw)
        sc.validate()
        return sc

    def gpu_program(self) -> GpuProgram:
        """A fresh, re-runnable :class:`GpuProgram` (closed-loop scenarios only)."""
        return program_from_spec(self.program)

    @property
    def n_requests(self) -> int:
        """Requests the scenario presents (a GPU program: its accesses)."""
        if self.program is None:
            return len(self.requests)
        return sum(len(p["accesses"]) for k in self.program["kernels"]
                   for p in k["producers"])

    def cfg(self, golden: bool = False) -> HbfConfig:
        values = dict(self.config)
        values["explicit_map"] = tuple(tuple(r) for r in values.get("explicit_map", ()))
        if golden and self.golden_overrides:
            values |= self.golden_overrides
        return build_config(values)

    def validate(self, id_bits: int = 32, source_bits: int = 8) -> None:
        """Raise ValueError naming the first request the co-simulation cannot present."""
        cfg = self.cfg()
        mapper = Mapper(cfg)
        if self.program is not None:
            self._validate_program(mapper, id_bits, source_bits)
            return
        last = 0
        seen = set()
        if not self.requests:
            raise ValueError(f"scenario {self.name!r} has no requests")
        for rid, op, addr, n, src, arrival in self.requests:
            if op not in ("R", "W"):
                raise ValueError(f"request {rid}: op must be R or W, not {op!r}")
            mapper.check(addr, n)
            if op == "W":
                self._check_sectors(f"request {rid}", addr, n, cfg)
            if arrival < last:
                raise ValueError(f"request {rid}: arrival {arrival} is earlier than the "
                                 f"previous request's {last}")
            last = arrival
            if not 0 <= rid < 1 << id_bits:
                raise ValueError(f"request id {rid} does not fit the RTL's {id_bits}-bit id")
            if rid in seen:
                raise ValueError(f"request id {rid} appears twice")
            seen.add(rid)
            if not 0 <= src < 1 << source_bits:
                raise ValueError(f"request {rid}: source {src} does not fit the RTL's "
                                 f"{source_bits}-bit source")

    def _check_sectors(self, what: str, addr: int, n: int, cfg: HbfConfig) -> None:
        sb = self.sector_bytes
        if sb > 1 and ((addr - cfg.base_address) % sb or n % sb):
            raise ValueError(f"{what}: a {n}-byte write at {addr:#x} is not aligned to "
                             f"sector_bytes = {sb} (the RTL's coverage granularity)")

    def _validate_program(self, mapper: Mapper, id_bits: int, source_bits: int) -> None:
        if self.requests:
            raise ValueError(f"scenario {self.name!r}: give requests or a program, not both")
        prog = self.gpu_program()       # raises GpuError (a ValueError) naming the field
        if prog.gpu.partitions > 1 << source_bits:
            raise ValueError(f"GPU partitions {prog.gpu.partitions} do not fit the RTL's "
                             f"{source_bits}-bit source")
        n = 0
        for op, addr, nb in prog.accesses():
            mapper.check(addr, nb)
            if op == "W":
                self._check_sectors(f"GPU access {n}", addr, nb, mapper.cfg)
            n += 1
        if n == 0:
            raise ValueError(f"scenario {self.name!r}: the GPU program has no accesses")
        if n > 1 << id_bits:
            raise ValueError(f"{n} GPU accesses do not fit the RTL's {id_bits}-bit id")

    def model_requests(self) -> list[Request]:
        """Fresh :class:`Request` objects (writes carry ``write_pattern`` data)."""
        return [Request(rid, op, addr, n, src, arrival,
                        write_pattern(rid, n) if op == "W" else None)
                for rid, op, addr, n, src, arrival in self.requests]

    def ready(self):
        return ready_function(self.resp_ready, self.seed)

    # ---- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Scenario":
        return cls(**d)


@dataclass
class Batch:
    """Scenarios that share one RTL build, run in one simulator process.

    Members
    -------
    scenarios : list of Scenario
    out_dir : str
        Where each scenario's traces and result JSON go.
    tail_cycles : int
        Cycles watched after the last expected event for anything unexpected.
    """

    scenarios: list
    out_dir: str
    tail_cycles: int = 32

    def write(self, path: Path) -> None:
        data = {"scenarios": [s.to_dict() for s in self.scenarios], "out_dir": self.out_dir,
                "tail_cycles": self.tail_cycles}
        Path(path).write_text(json.dumps(data))

    @classmethod
    def read(cls, path) -> "Batch":
        data = json.loads(Path(path).read_text())
        return cls([Scenario.from_dict(s) for s in data["scenarios"]], data["out_dir"],
                   data.get("tail_cycles", 32))
