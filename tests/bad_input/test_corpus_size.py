"""The corpus holds at least the 250 cases issue 11 asks for."""

from tests.bad_input.test_configs import (
    CONFIG_BAD,
    CONFIG_BAD_BYTES,
    CONFIG_ODD_BUT_VALID,
    MODEL_BAD,
)
from tests.bad_input.test_output_paths import OUT_BAD
from tests.bad_input.test_requests import CSV_BAD, CSV_BAD_BYTES, CSV_ODD_BUT_VALID
from tests.bad_input.test_serve_traces import SERVE_TRACE_BAD
from tests.bad_input.test_traces import TRACE_BAD, TRACE_HEADER_BAD
from tests.bad_input.test_usage import PARAM_BAD, USAGE_BAD


def test_corpus_is_big_enough():
    n = (len(CONFIG_BAD) + len(CONFIG_BAD_BYTES) + len(CSV_BAD) + len(CSV_BAD_BYTES)
         + 2 * len(TRACE_BAD) + 2 * len(TRACE_HEADER_BAD) + len(MODEL_BAD) + len(USAGE_BAD)
         + len(PARAM_BAD) + len(OUT_BAD) + len(CSV_ODD_BUT_VALID) + len(CONFIG_ODD_BUT_VALID)
         + len(SERVE_TRACE_BAD))
    assert n >= 250, n
