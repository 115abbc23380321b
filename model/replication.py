"""Straggler replication: megaplanes loaded above the average copy their excess megapages
into HBM before a step, and those reads are redirected (FlashAccel paper, KV layout section:
"before a step, overloaded megaplanes copy excess megapages into HBM and redirect those
reads. HBF can then issue hyperpage reads at the average load"; docs/flashaccel.md).

Plain Python on top of the layouts (model/layout.py). A kernel's reads are logical HBF
pages; each belongs to one megapage (a megaplane and a row, :class:`PlaneMap`). The load of
a megaplane is the number of distinct megapages the kernel reads from it (one hyperpage
command each). The target is the average load rounded up, ``ceil(megapages / K)`` over the
K megaplanes of the system; every megaplane above it keeps its first ``target`` megapages
(in the kernel's order) and the rest are redirected to the HBM copy. After that no
megaplane serves more than ``target`` megapages, so no plane serves more than ``target``
pages, and a kernel whose span is its most loaded plane's pages x tR (the straggler) lasts
about ``target`` x tR.

What it costs: the redirected pages are copied into HBM before the step (``copied_bytes``,
read once from HBF and written once to HBM) and occupy HBM while the step runs
(``hbm_bytes``: every kernel's copies, since a step's kernels are planned together before
it). The HBM reads themselves are not in the golden model (it simulates HBF only); the
serving level charges them to HBM bandwidth (serve/flashaccel/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hbfsim.config import PAGE_BYTES, HbfConfig
from hbfsim.model.gpu import GpuProgram, Kernel, Producer
from hbfsim.model.layout import PlaneMap

__all__ = ["KernelReplication", "megapage_of", "plan_kernel", "replicate_program"]


def megapage_of(planes: PlaneMap, page: int) -> tuple[int, int]:
    """``(megaplane, row)`` of logical page ``page``: the megapage that holds it."""
    st, q = planes.mapper.stack_of(page)
    _, local, _ = planes.mapper.channel_of(q)
    return planes.megaplane_of(page), local // planes.subarrays


@dataclass
class KernelReplication:
    """The replication plan of one kernel's reads.

    Members
    -------
    hbf_pages : list of int
        Pages still read from HBF, in the kernel's order.
    hbm_pages : list of int
        Pages redirected to their HBM copy.
    megaplanes : int
        K, the system's megaplanes.
    megapages : int
        Distinct megapages the kernel reads.
    target : int
        ``ceil(megapages / K)``: the most megapages any megaplane serves after replication.
    max_before : int
        The most megapages one megaplane served before.
    max_plane_before, max_plane_after : int
        The most pages one plane served before and after (the straggler).
    """

    hbf_pages: list = field(default_factory=list)
    hbm_pages: list = field(default_factory=list)
    megaplanes: int = 0
    megapages: int = 0
    target: int = 0
    max_before: int = 0
    max_plane_before: int = 0
    max_plane_after: int = 0

    @property
    def copied_bytes(self) -> int:
        """Bytes copied into HBM (and read from there instead of HBF)."""
        return len(self.hbm_pages) * PAGE_BYTES

    def as_dict(self) -> dict:
        return {"pages": len(self.hbf_pages) + len(self.hbm_pages),
                "hbf_pages": len(self.hbf_pages), "hbm_pages": len(self.hbm_pages),
                "copied_bytes": self.copied_bytes, "megapages": self.megapages,
                "target": self.target, "max_megapages_before": self.max_before,
                "max_plane_pages_before": self.max_plane_before,
                "max_plane_pages_after": self.max_plane_after}


def _max_plane(planes: PlaneMap, pages) -> int:
    load: dict[int, int] = {}
    for p in pages:
        q = planes.plane_of(p)
        load[q] = load.get(q, 0) + 1
    return max(load.values(), default=0)


def plan_kernel(planes: PlaneMap, pages: list[int], enabled: bool = True) -> KernelReplication:
    """Plan one kernel: which of ``pages`` stay on HBF and which go to the HBM copy.

    Parameters
    ----------
    planes : PlaneMap
    pages : list of int
        The kernel's logical pages, in issue order (each read once).
    enabled : bool
        False plans nothing (every page stays on HBF) but still reports the loads.
    """
    rows: dict[int, dict[int, list[int]]] = {}   # megaplane -> megapage row -> pages
    for p in pages:
        mp, row = megapage_of(planes, p)
        rows.setdefault(mp, {}).setdefault(row, []).append(p)
    n = sum(len(r) for r in rows.values())
    K = planes.megaplanes
    target = -(-n // K) if n else 0
    out = KernelReplication(megaplanes=K, megapages=n, target=target,
                            max_before=max((len(r) for r in rows.values()), default=0),
                            max_plane_before=_max_plane(planes, pages))
    redirected = set()
    if enabled:
        for mp_rows in rows.values():
            for k, row in enumerate(mp_rows):   # rows in the order the kernel first reads
                if k >= target:
                    redirected.update(mp_rows[row])
    out.hbf_pages = [p for p in pages if p not in redirected]
    out.hbm_pages = [p for p in pages if p in redirected]
    out.max_plane_after = _max_plane(planes, out.hbf_pages)
    return out


def replicate_program(cfg: HbfConfig, program: GpuProgram, enabled: bool = True,
                      min_pages: int = 0) -> GpuProgram:
    """``program`` with straggler replication applied to every kernel of one-page reads.

    Each kernel's page reads (accesses ``("R", address, PAGE_BYTES)`` of one warp each, as
    ``layout-decode`` builds them) are planned by :func:`plan_kernel`; the kernel keeps one
    warp per page still on HBF (the redirected ones are HBM reads, outside the golden
    model). ``expected["replication"]`` lists every kernel's plan (:meth:`as_dict`) and
    ``expected["hbm_bytes"]`` the HBM the step's copies occupy.

    Parameters
    ----------
    cfg : HbfConfig
        The configuration the program runs on (its mapping decides the planes).
    enabled : bool
        False keeps every read on HBF (the same program, with the plans reported).
    min_pages : int
        Kernels with fewer pages are left alone (replicating a small kernel buys nothing:
        its span is one tR whatever the balance).

    Raises
    ------
    ValueError
        For an access that is not a one-page read.
    """
    planes = PlaneMap(cfg)
    plans, kernels = [], []
    sms = (program.gpu.sms if program.gpu else 8)
    for kernel in program:
        prods = kernel.producers
        pages = []
        for prod in (prods() if callable(prods) else prods):
            for op, addr, nbytes in prod.accesses:
                off = addr - cfg.base_address
                if op != "R" or nbytes != PAGE_BYTES or off % PAGE_BYTES:
                    raise ValueError(f"replication needs one-page reads, not access "
                                     f"({op!r}, {addr:#x}, {nbytes})")
                pages.append(off // PAGE_BYTES)
        plan = plan_kernel(planes, pages, enabled and len(pages) >= min_pages)
        plans.append(dict(name=kernel.name, **plan.as_dict()))
        kernels.append((kernel.name, plan.hbf_pages))

    def gen():
        for name, kept in kernels:
            yield Kernel(name, [Producer([("R", cfg.base_address + p * PAGE_BYTES,
                                           PAGE_BYTES)], sm=w % sms)
                                for w, p in enumerate(kept)])

    expected = dict(program.expected)
    expected["replication"] = plans
    expected["hbm_bytes"] = sum(p["copied_bytes"] for p in plans)
    expected["requests"] = sum(p["hbf_pages"] for p in plans)
    params = dict(program.params, replication=bool(enabled))
    return GpuProgram(gen, program.name + (":replicated" if enabled else ""),
                      config=program.config, gpu=program.gpu, expected=expected,
                      params=params)
