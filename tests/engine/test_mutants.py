"""The differential checks can fail: every deliberately broken variant of the engine
(engine/mutants.hpp, selected at run time) must fail the checks of its component.

Each variant flips one rule of the golden model (a tie-break, one tick, a bound, an
interleave); the checks and strategies are the ones test_media.py and test_gpu_port.py run,
searched without shrinking and with a fixed seed. ``HBFSIM_ENGINE_MUTANT=k`` runs the
ordinary differential tests against variant ``k`` instead (they must then fail).
"""

import pytest
from hypothesis import Phase, given, settings

from hbfsim.engine import require_compiled

from .cases import check_gpu, check_media, check_media_groups, gpu_cases, media_cases, \
    media_group_cases
from .controller_cases import check_controller, conformance_cases, controller_cases, \
    directed_cases, port_race_cases
from .window_cases import check_measure, window_cases

MEDIA = [(check_media, media_cases), (check_media_groups, media_group_cases)]
GROUPS = MEDIA[::-1]      # a rule of multi-plane commands: their check first
GPU = [(check_gpu, gpu_cases)]
# the controller: the conformance suite's and the directed cases first (a few dozen), then
# the port races, then every mode
CONTROLLER = [(check_controller, conformance_cases), (check_controller, directed_cases),
              (check_controller, port_race_cases), (check_controller, controller_cases)]
# the serving level's characterization on both engines (the window source)
WINDOW = [(check_measure, window_cases)]

#: engine/mutants.hpp's variants and the checks of the component each one breaks
MUTANTS = {
    1: ("deliver ties by highest subarray", MEDIA),
    2: ("READ costs tR + 1", MEDIA),
    3: ("a buffer hit does not refresh the LRU order", MEDIA),
    4: ("PROGRAM keeps the page in the page buffers", MEDIA),
    5: ("reusing a free block costs no tBERS", MEDIA),
    6: ("ssd GC picks the most-valid block", MEDIA),
    7: ("deliver returns two completions of one channel", MEDIA),
    8: ("a multi-plane command is due after its fastest plane", GROUPS),
    9: ("backlog(t) ignores completions due at t", MEDIA),
    10: ("G5 pointer stays on the granted partition", GPU),
    11: ("G3 release one tick early", GPU),
    12: ("G3 a producer starts with one access, not up to its bound", GPU),
    13: ("G4 interleave without page rotation", GPU),
    14: ("G2 next kernel launches one tick early", GPU),
    15: ("G5' port pointer stays on its grant", GPU),
    16: ("latency counted from the grant", GPU),
    17: ("DP1 no W forwarding: M misses the allocations of tm - 1", CONTROLLER),
    18: ("DP5 victim tie: the later of two entries allocated in one cycle", CONTROLLER),
    19: ("DP2a aggregation window one tick longer", CONTROLLER),
    20: ("§8 link credit charged one tick late", CONTROLLER),
    21: ("§4.1 admission by the rotating rank whenever free < P (the old rule)", CONTROLLER),
    22: ("DP4 frees of one cycle in descending response port", CONTROLLER),
    23: ("DP6 MSHR entry in RETURN from tc + 1", CONTROLLER),
    24: ("§4.2.4 writes dispatch before reads", CONTROLLER),
    25: ("DP7 C1 takes the highest-index entry in RETURN", CONTROLLER),
    26: ("§4.4 strict error taken while a merge is in W", CONTROLLER),
    29: ("§4.5 B3 the victim from any pool", CONTROLLER),
    30: ("§4.5 B2 every read allocates from channel 0's pool", CONTROLLER),
    27: ("window: the next request arrives a tick after the response", WINDOW),
    28: ("window: the input closes with the last submission", WINDOW),
}


def caught(check, strategy, examples: int = 300) -> bool:
    """True when a search of ``examples`` cases finds one that ``check`` rejects."""

    @settings(max_examples=examples, phases=[Phase.generate], database=None, deadline=None,
              derandomize=True, report_multiple_bugs=False)
    @given(strategy())
    def prop(case):
        check(case)

    try:
        prop()
    except Exception:       # a mismatch (AssertionError) or the variant's own failure
        return True
    return False


def test_every_variant_is_listed():
    assert sorted(MUTANTS) == list(range(1, require_compiled().N_MUTANTS))


@pytest.mark.parametrize("mutant", sorted(MUTANTS), ids=lambda m: f"{m}-{MUTANTS[m][0]}")
def test_broken_variant_is_caught(mutant):
    engine = require_compiled()
    engine._set_mutant(mutant)
    try:
        assert any(caught(check, strategy) for check, strategy in MUTANTS[mutant][1]), \
            f"variant {mutant} ({MUTANTS[mutant][0]}) passed the differential checks"
    finally:
        engine._set_mutant(0)
