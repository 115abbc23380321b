import math

import pytest

from hbfsim.serve.energy import TABLE2_PJ, Tally, energy_breakdown, hbf_lifetime_years, \
    table7_contributions
from hbfsim.serve.hardware import make_node


# The serving paper's Table 4, 4 HBM + 4 HBF rows: HBF KV writes (TB), clock (s), published
# life (years).
@pytest.mark.parametrize("tb,clock,life", [(147.15, 23228.20, 0.75), (93.00, 20821.73, 1.06),
                                           (7.48, 16614.28, 10.57)])
def test_lifetime_equation_reproduces_table4(tb, clock, life):
    """Table 4 prints writes to 0.01 TB: the life from any volume that rounds to the printed
    one must bracket the printed life (to its own 0.005 rounding)."""
    hi = hbf_lifetime_years((tb - 0.005) * 1e12, clock, 4 * 375e9, 100_000)
    lo = hbf_lifetime_years((tb + 0.005) * 1e12, clock, 4 * 375e9, 100_000)
    assert lo - 0.005 <= life <= hi + 0.005
    assert abs(hbf_lifetime_years(tb * 1e12, clock, 4 * 375e9, 100_000) - life) < 0.01


def test_lifetime_scales_with_write_amplification_and_edges():
    y1 = hbf_lifetime_years(1e12, 3600, 1.5e12, 1e5)
    assert hbf_lifetime_years(1e12, 3600, 1.5e12, 1e5, write_amplification=2) == \
        pytest.approx(y1 / 2)
    assert y1 == pytest.approx(1.5e12 * 1e5 / (1e12 * 365 * 86400 / 3600))
    assert hbf_lifetime_years(0, 10, 1.5e12, 1e5) == math.inf
    assert math.isnan(hbf_lifetime_years(1e12, 10, 0, None))


def test_energy_is_bits_times_pj_plus_ops_times_pj():
    node = make_node(hbm_stacks=4, hbf_stacks=4)
    t = Tally()
    t.weight_read = [1e12, 2e12]
    t.kv_read = [3e12, 0.0]
    t.written = [1e9, 2e9, 0.0, 0.0]
    t.macs_prefill, t.macs_decode, t.exps, t.divs, t.sqrts = 1e15, 2e15, 1e12, 1e11, 1e10
    e = energy_breakdown(t, node)
    assert e["weight_reads"] == pytest.approx(8 * (1e12 * 3.4 + 2e12 * 6.8) * 1e-12)
    assert e["kv_reads"] == pytest.approx(8 * 3e12 * 3.4e-12)
    assert e["kv_writes"] == pytest.approx(8 * (1e9 * 3.4 + 2e9 * 6.8) * 1e-12)
    assert e["compute_prefill"] == pytest.approx(1e15 * TABLE2_PJ["fp16_mac"] * 1e-12)
    assert e["special_functions"] == pytest.approx((1e12 * 7.4 + 1e11 * 5.6 + 1e10 * 11.1)
                                                   * 1e-12)
    assert e["total"] == pytest.approx(sum(v for k, v in e.items() if k != "total"))


def test_table7_rows_sum_to_net():
    base = dict(weight_reads=50.0, kv_reads=10.0, kv_moves=0.0, compute_prefill=30.0,
                kv_writes=5, compute_decode=5.0, special_functions=0, interconnect=0)
    base["total"] = sum(base.values())
    run = dict(base, weight_reads=30.0, kv_reads=15.0, compute_prefill=10.0)
    run["total"] = sum(v for k, v in run.items() if k != "total")
    c = table7_contributions(run, base)
    assert c["reduced_weight_reads"] == pytest.approx(20.0)
    assert c["increased_kv_reads"] == pytest.approx(-5.0)
    assert c["avoided_prefill"] == pytest.approx(20.0)
    assert c["net"] == pytest.approx(35.0) and c["other"] == pytest.approx(0.0)
