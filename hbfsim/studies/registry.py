"""The registry of studies: name -> :class:`~hbfsim.studies.base.Study`, imported on use.

Registration is explicit (one line per study in ``_MODULES``) and costs nothing until a study
is looked up: ``hbfsim --help`` and argument parsing need only the names, and a study module
(with its model imports) loads when it runs.
"""

from collections.abc import Iterator, Mapping
from importlib import import_module

from hbfsim.studies.base import Study

__all__ = ["STUDIES", "study_names"]

# name -> module under hbfsim.studies; the order is the order of --help and of CI
_MODULES = {
    "media-saturation": "media_saturation",
    "mshr-feedback": "mshr_feedback",
    "placement": "placement",
    "rw-isolation": "rw_isolation",
    "page-service": "page_service",
    "serving": "serving",
    "flashaccel": "flashaccel",
}


class _Registry(Mapping):
    """The studies by name; a study's module is imported when the study is first looked up."""

    def __init__(self, modules: dict[str, str]):
        self._modules = modules

    def __getitem__(self, name: str) -> Study:
        study = import_module(f"hbfsim.studies.{self._modules[name]}").STUDY
        if study.name != name:
            raise RuntimeError(f"study module {self._modules[name]!r} defines "
                               f"{study.name!r}, not {name!r}")
        return study

    def __contains__(self, name) -> bool:        # the names alone: no import
        return name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


STUDIES: Mapping[str, Study] = _Registry(_MODULES)


def study_names() -> list[str]:
    """Return the registered study names in order."""
    return list(STUDIES)
