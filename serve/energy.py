"""Energy of a serving run and the HBF write lifetime (serving paper Tables 1, 2, 7).

docs/serving.md, "Energy and lifetime", gives the equations:

    E = sum over tiers x of 8 (R_x e^read_x + W_x e^write_x)           (bytes -> bits)
      + MACs e_MAC + exps e_exp + divisions e_div + square roots e_sqrt
      + 8 L e_link

with R_x / W_x the bytes read from / written to tier ``x`` (weights, KV reads, KV writes,
cooling and reload traffic), e_x the tier's pJ/bit, the arithmetic energies of the serving
paper's Table 2 (4 nm) and L the bytes of TP / EP collectives. Static power is not modeled
(the source's energy is dynamic: its Table 4 reports ~0.1 kW average for a GPU-hour-scale
run).

HBF lifetime in years (the serving paper's Equation 8 is not in the text we have; this is ours):

    life = C_hbf x PE / (W_hbf x WA x Y / T)

C_hbf HBF capacity of the GPUs whose stacks take the writes, PE the P/E endurance, W_hbf
bytes written into HBF during a run of T seconds, WA the device model's write amplification
and Y seconds per year (365 days). With WA = 1 it reproduces Table 4's "Life" column from
Table 4's own write volumes and clock times (tests/serve/test_energy.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TABLE2_PJ", "SECONDS_PER_YEAR", "Tally", "energy_breakdown", "hbf_lifetime_years",
           "table7_contributions"]

#: the serving paper's Table 2: arithmetic energy at 4 nm, pJ per operation.
TABLE2_PJ = {"fp16_mac": 0.38, "fp32_add": 0.22, "fp32_mul": 0.71, "fp32_exp": 7.4,
             "fp32_div": 5.6, "fp32_sqrt": 11.1}
# A 365-day year: with it the equation brackets all three Table 4 lifetimes within the
# rounding of Table 4's write volumes (a 365.25-day year misses the buffered row's 10.57).
SECONDS_PER_YEAR = 365 * 86400


@dataclass
class Tally:
    """What a run moved and computed (whole replica, summed over its GPUs).

    Members
    -------
    weight_read : list of float
        Weight bytes read from [HBM, HBF].
    kv_read : list of float
        KV bytes read by attention from [HBM, HBF].
    written : list of float
        KV bytes written into [HBM, HBF, DRAM, SSD] (compute writes, cooling, reloads).
    moved_out : list of float
        KV bytes read out of each tier by cooling or reload.
    link_bytes : float
        Bytes of collectives over the interconnect.
    macs_prefill, macs_decode : float
        Multiply-accumulates of prefill tokens and of decode tokens.
    exps, divs, sqrts : float
        Softmax exponentials and normalising divisions, RMSNorm square roots.
    """

    weight_read: list = field(default_factory=lambda: [0.0, 0.0])
    kv_read: list = field(default_factory=lambda: [0.0, 0.0])
    written: list = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    moved_out: list = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    link_bytes: float = 0.0
    macs_prefill: float = 0.0
    macs_decode: float = 0.0
    exps: float = 0.0
    divs: float = 0.0
    sqrts: float = 0.0

    def add(self, other: "Tally") -> None:
        """Accumulate ``other`` into this tally (replicas of one run)."""
        for k in ("weight_read", "kv_read", "written", "moved_out"):
            a, b = getattr(self, k), getattr(other, k)
            for i in range(len(a)):
                a[i] += b[i]
        for k in ("link_bytes", "macs_prefill", "macs_decode", "exps", "divs", "sqrts"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def energy_breakdown(t: Tally, node) -> dict:
    """Joules by category: ``weight_reads``, ``kv_reads``, ``kv_writes``, ``kv_moves``,
    ``compute_prefill``, ``compute_decode``, ``special_functions``, ``interconnect`` and
    ``total``."""
    tiers = (node.hbm, node.hbf, node.dram, node.ssd)
    rd = [x.read_pj_per_bit for x in tiers]
    wr = [x.write_pj_per_bit for x in tiers]
    pj = 1e-12
    e = {
        "weight_reads": 8 * pj * (t.weight_read[0] * rd[0] + t.weight_read[1] * rd[1]),
        "kv_reads": 8 * pj * (t.kv_read[0] * rd[0] + t.kv_read[1] * rd[1]),
        "kv_writes": 8 * pj * sum(t.written[i] * wr[i] for i in range(4)),
        "kv_moves": 8 * pj * sum(t.moved_out[i] * rd[i] for i in range(4)),
        "compute_prefill": pj * t.macs_prefill * TABLE2_PJ["fp16_mac"],
        "compute_decode": pj * t.macs_decode * TABLE2_PJ["fp16_mac"],
        "special_functions": pj * (t.exps * TABLE2_PJ["fp32_exp"] + t.divs * TABLE2_PJ["fp32_div"]
                                   + t.sqrts * TABLE2_PJ["fp32_sqrt"]),
        "interconnect": 8 * pj * t.link_bytes * node.link.pj_per_bit,
    }
    e["total"] = sum(e.values())
    return e


def hbf_lifetime_years(hbf_bytes_written: float, run_seconds: float, hbf_capacity: float,
                       pe_cycles: float, write_amplification: float = 1.0) -> float:
    """Years until ``pe_cycles`` full-capacity programs at the run's HBF write rate.

    ``inf`` when nothing is written; ``nan`` without HBF."""
    if hbf_capacity <= 0 or not pe_cycles:
        return math.nan
    if hbf_bytes_written <= 0:
        return math.inf
    if run_seconds <= 0:
        raise ValueError(f"run_seconds must be positive, not {run_seconds!r}")
    per_year = hbf_bytes_written * write_amplification * SECONDS_PER_YEAR / run_seconds
    return hbf_capacity * pe_cycles / per_year


def table7_contributions(run: dict, base: dict) -> dict:
    """The serving paper's Table 7: savings of ``run`` relative to the HBM-only ``base``
    (energy breakdowns from :func:`energy_breakdown`), in percentage points of the base's
    total; positive saves.

    ``other`` is the residual, so the four rows sum to ``net``."""
    tot = base["total"]
    pct = lambda k: 100.0 * (base[k] - run[k]) / tot  # noqa: E731
    kv = lambda e: e["kv_reads"] + e["kv_moves"]  # noqa: E731
    out = {"reduced_weight_reads": pct("weight_reads"),
           "increased_kv_reads": 100.0 * (kv(base) - kv(run)) / tot,
           "avoided_prefill": pct("compute_prefill"),
           "net": 100.0 * (tot - run["total"]) / tot}
    out["other"] = out["net"] - out["reduced_weight_reads"] - out["increased_kv_reads"] \
        - out["avoided_prefill"]
    return out
