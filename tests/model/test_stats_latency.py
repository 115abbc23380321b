"""The latency statistics' mean is the exact sum divided once, whatever the sum's size
(a saturated 10 M-request run sums past 2**52; model/stats.py ``_exact_sum``)."""

from fractions import Fraction

import numpy as np
import pytest

from hbfsim.config import load_config
from hbfsim.model.stats import LatencyCounts, percentiles


@pytest.mark.parametrize("values", [
    [3, 5, 8],                                       # small: np.mean's figure
    [(1 << 50) + k for k in range(100)],             # sum past 2**53, below 2**62
    [(1 << 61) + 1, (1 << 61), (1 << 61) + 7, 3],    # sum past 2**63: Python integers
])
def test_mean_is_exact_for_arrays_and_counts(values):
    cfg = load_config()
    exact = float(Fraction(sum(values), len(values)))   # correctly rounded
    counts = LatencyCounts()
    counts.add(values[:2])
    counts.add(values[2:])
    assert percentiles(values, cfg)["mean"] == exact
    assert percentiles(counts, cfg) == percentiles(values, cfg)
    if sum(values) < 2 ** 53:
        assert exact == float(np.mean(np.array(values, dtype=np.int64)))
