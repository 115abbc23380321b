"""The HBF stack controller of the golden model, one file per pipeline stage
(docs/timing-contract.md, the registered pipeline, in both host-port shapes and every mode).

========================  ===========================================================
``request.py``            :class:`Request`, the table :class:`Entry`, states, constants
``ports.py``              :class:`Port`: Q, M, C1/C2/cursor, R, K, E of one port
``ingress.py``            §4.1: admission term, ready, accept, Q -> M
``dispatch.py``           §4.2, DP1, DP4: M's decisions, W, allocation, merges, DP2a
``write_buffer.py``       DP5: flush decisions, pressure victim; §7's write-drain window
``enqueue.py``            DP2, DP2a, DP3, §6: offers and the enqueue arbiter
``issue.py``              §7, §7a: media completions release, issue decisions
``completion.py``         DP6, §4.4, MP7: completions into RETURN
``response.py``           DP7, §8: C1, C2, cursor, R, K with the link credit, E
``stack_controller.py``   :class:`StackController`: the stages composed, its state,
                          end of cycle, timers (C3)
========================  ===========================================================

:func:`hbfsim.model.loop.run_cycles` steps the controllers in the phase order of §16.
"Reading N" in a stage's comments cites the N-th reading of the contract listed in
:class:`StackController`'s notes (where the contract's text leaves a choice).
"""

from hbfsim.model.controller.ports import EGRESS_DEPTH, INGRESS_DEPTH, Port
from hbfsim.model.controller.request import (CAUSES, FLUSH, FREE, FULL_MASK, ISSUED, OPEN,
                                             QUEUED, RETURN, W_DELAY, WAIT, Entry, Request)
from hbfsim.model.controller.stack_controller import StackController

__all__ = ["CAUSES", "EGRESS_DEPTH", "FLUSH", "FREE", "FULL_MASK", "INGRESS_DEPTH", "ISSUED",
           "OPEN", "QUEUED", "RETURN", "W_DELAY", "WAIT", "Entry", "Port", "Request",
           "StackController"]
