"""The corpus holds at least the 250 cases issue 11 asks for."""

from tests.bad_input.test_configs import (
    CONFIG_BAD,
    CONFIG_BAD_BYTES,
    CONFIG_ODD_BUT_VALID,
    MODEL_BAD,
)
from tests.bad_input.test_output_paths import OUT_BAD
from tests.bad_input.test_requests import CSV_BAD, CSV_BAD_BYTES, CSV_ODD_BUT_VALID
from tests.bad_input.test_traces import TRACE_BAD, TRACE_HEADER_BAD
from tests.bad_input.test_usage import PARAM_BAD, USAGE_BAD


def test_corpus_is_big_enough():
    n = (len(CONFIG_BAD) + len(CONFIG_BAD_BYTES) + len(CSV_BAD) + len(CSV_BAD_BYTES)
         + 2 * len(TRACE_BAD) + 2 * len(TRACE_HEADER_BAD) + len(MODEL_BAD) + len(USAGE_BAD)
         + len(PARAM_BAD) + len(OUT_BAD) + len(CSV_ODD_BUT_VALID) + len(CONFIG_ODD_BUT_VALID))
    assert n >= 250, n


def test_issue_26_added_at_least_60_cases():
    """Issue 26 (trust, second pass): checks before work, sizes, odd but valid input, the
    characterization cache and the sweep journal (tests/sweep/test_resume.py holds the
    interrupted, grown and concurrent sweeps on top of these)."""
    from tests.bad_input.test_cache import CACHE_BAD
    from tests.bad_input.test_checks_first import CHECK_FIRST_BAD, ODD_BUT_VALID
    from tests.sweep.test_resume import JOURNAL_BAD

    n = len(CHECK_FIRST_BAD) + len(ODD_BUT_VALID) + len(CACHE_BAD) + len(JOURNAL_BAD)
    assert n >= 60, n
