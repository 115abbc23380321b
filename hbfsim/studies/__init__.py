"""``hbfsim study NAME``: the source's studies as parallel parameter sweeps.

    hbfsim study NAME [--quick] [--out DIR] [--workers N] [--no-progress]
    python -m hbfsim.studies NAME [...]          (the same, without the hbfsim command)

Studies (the HBF-Sim paper §5.2-§6.2; figures in docs/sources.md):

=================  ==========================================================================
media-saturation   §5.4: 1-16 channels x 256/512/1024/2048 producers, fixed 32-slot control
mshr-feedback      §5.2: merging on/off, closed loop vs open-loop replay of the recorded ingress
placement          §6.1: interleave/grouped/contiguous; active-page striping vs interleave
rw-isolation       §6.2: FCFS, read priority, write drain, 1R/3W, 2R/2W, 3R/1W vs read start
page-service       §5.3: 64 pages, 1/4 channels, tR 1/15 us, burst and isolated arrivals
=================  ==========================================================================

Every study runs its runs in parallel processes (``ProcessPoolExecutor``, default one
worker per core) behind a tqdm progress bar and writes to ``results/<name>/`` (or
``--out``): ``runs.csv`` (one row per simulation), ``plot.png`` (matplotlib, Agg),
``summary.md`` (our figures beside the published ones) and ``summary.json``.
``--quick`` runs a reduced sweep in seconds (CI runs all five). :func:`run_study` is the
Python entry point; :func:`register` adds the ``study`` sub-command to a parser.
docs/results.md discusses every figure against the source.

One module per study implements :class:`~hbfsim.studies.base.Study` (its instance is the
module's ``STUDY``); :mod:`hbfsim.studies.registry` names the modules, so that ``hbfsim
--help`` lists the studies without importing them. A new study is a module and one line in
the registry.
"""

from __future__ import annotations

from hbfsim.studies.base import Study
from hbfsim.studies.cli import main, register, run_cli
from hbfsim.studies.registry import STUDIES, study_names
from hbfsim.studies.runner import run_study

__all__ = ["STUDIES", "Study", "main", "register", "run_cli", "run_study", "study_names"]
