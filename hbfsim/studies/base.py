"""The interface every study implements: its sweep, one run, the summary, the outputs.

A study reproduces the figures of one section of a source document as a parameter sweep.
:mod:`hbfsim.studies.runner` runs the sweep in parallel and writes what the study returns;
:mod:`hbfsim.studies.cli` prints its headline. Adding a study is one file with one
:class:`Study` subclass and one line in the registry (``hbfsim/studies/__init__.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

__all__ = ["Study"]


class Study(ABC):
    """One study of a source document, run as a parallel parameter sweep.

    A subclass sets the four descriptive members as class attributes and implements the six
    methods. One instance, named ``STUDY``, lives in the study's module and is what the
    registry returns. :meth:`run` executes in worker processes, so a study keeps no state
    between calls: every method works only from its arguments, and tasks and rows are plain
    dictionaries (picklable, one CSV row per row dictionary).

    Members
    -------
    name : str
        Registry key and command-line name, lower case with hyphens (``"rw-isolation"``);
        also the default output folder ``results/<name>``.
    title : str
        One-line title, the heading of ``summary.md``.
    source : str
        The section of :attr:`document` whose figures the study reproduces (``"§6.2"``).
    document : str
        The source document the figures come from, by name, as ``summary.md`` cites it
        (docs/sources.md lists them); default ``"the HBF-Sim paper"``.
    reference : str
        Further published figures cited beside :attr:`document` in ``summary.md``, inside
        the repository; default the figures of docs/sources.md, empty for none.
    results_page : str
        The docs page that discusses the results beside the published ones
        (default ``"docs/results.md"``).
    tasks_take_engine : bool
        True for a study that runs no ``HbfConfig`` of its own per task (no ``--set``) but
        runs fixed device configurations all the same (an HBF tier characterized on the
        device model): ``hbfsim study --engine E`` (or ``--set engine=E``, its only key)
        reaches it as :meth:`tasks`'s ``engine`` argument, and the study carries it to every
        device run. Default False: a device study takes the engine with its other ``--set``
        keys through :meth:`config_kwargs`.

    Methods
    -------
    tasks(quick) -> list[dict]
        The sweep: one dictionary per independent simulation task; ``quick`` asks for the
        reduced sweep that runs in seconds (what CI runs). A study with
        :attr:`tasks_take_engine` implements ``tasks(quick, engine=None)``: ``engine`` is
        ``compiled``, ``reference`` or None (the configurations' own ``engine`` key).
    run(task) -> list[dict]
        Simulate one task and return its rows (one or more; each becomes a ``runs.csv``
        line, columns in first-seen order, ``None`` written as an empty field). The runner
        adds ``host_seconds``.
    summarize(rows, quick) -> dict
        Reduce all rows (in task order) to the summary; it is written as ``summary.json``
        (keys become strings) after the runner adds ``study``, ``quick``, ``runs``,
        ``tasks``, ``workers``, ``host_seconds`` and ``files``.
    plot(rows, summary, path) -> None
        Draw the figure and save it as a PNG to ``path`` (the summary is the dictionary
        :meth:`summarize` returned, before the JSON conversion).
    report(rows, summary) -> str
        The Markdown body of ``summary.md``: our figures beside the published ones.
    headline(summary) -> list[str]
        The few lines the command prints after a run (the summary here is the JSON-ready
        one :func:`~hbfsim.studies.runner.run_study` returns); default none.
    config_kwargs(task) -> dict or None
        The ``load_config`` keywords of a task's device configuration, so that the runner
        can apply ``hbfsim study --set KEY=VALUE`` and refuse, before any work, a key the
        study sets itself (its sweep or its workload); ``None`` (the default): the study
        runs no ``HbfConfig`` of its own and takes no ``--set``.
    """

    name: str
    title: str
    source: str
    document: str = "the HBF-Sim paper"
    reference: str = "docs/sources.md (figures to compare against)"
    results_page: str = "docs/results.md"
    tasks_take_engine: bool = False

    @abstractmethod
    def tasks(self, quick: bool) -> list[dict]:
        """Return the sweep's tasks, the reduced sweep when ``quick`` (and, with
        :attr:`tasks_take_engine`, an ``engine`` keyword)."""

    @abstractmethod
    def run(self, task: dict) -> list[dict]:
        """Simulate one task and return its rows."""

    @abstractmethod
    def summarize(self, rows: list[dict], quick: bool) -> dict:
        """Reduce every row of the sweep to the summary dictionary."""

    @abstractmethod
    def plot(self, rows: list[dict], summary: dict, path: Path) -> None:
        """Draw the study's figure and save it as a PNG to ``path``."""

    @abstractmethod
    def report(self, rows: list[dict], summary: dict) -> str:
        """Return the Markdown body of ``summary.md``."""

    def headline(self, summary: dict) -> list[str]:
        """Return the lines printed after a run (none by default)."""
        return []

    def cites(self) -> str:
        """Return the published sources as ``summary.md`` names them."""
        also = f" and {self.reference}" if self.reference else ""
        return f"{self.document} {self.source}{also}"

    def config_kwargs(self, task: dict) -> dict | None:
        """The task's ``load_config`` keywords (device studies), or None (no ``--set``)."""
        return None
