"""The serving level's HBF characterization (serve/characterize.py measure, measure_mixed)
is the same on both engines: bulk, closed windows of 1 to 32 requests and mixed transfers
(window_cases.py)."""

import pytest

from hbfsim.engine_stream import run_window_streamed

from .window_cases import CASES, check_measure, config


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:6])))
def test_measure_is_the_same_on_both_engines(case):
    check_measure(case)


def test_window_must_be_positive():
    import numpy as np

    one = np.ones(1, np.int64)
    with pytest.raises(ValueError, match="window must be >= 1, not 0"):
        run_window_streamed(config("channel"), one, one.astype(np.int8), one * 0 +
                            config("channel").base_address, one, one * 0, 0)
