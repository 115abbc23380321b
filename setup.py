"""Build of the compiled engine, hbfsim._engine (docs/engine.md).

Everything else about the package is in pyproject.toml; this file only adds the C++17
extension (pybind11), built by the ordinary install line (``pip install -e .``, which
``make run`` and ``make test`` run). It is optional: where no C++ compiler is found, pip
warns and installs the package without it, and ``hbfsim.engine.engine_status()`` says so
and how to build it. The sources' hash is compiled in, so a stale build is reported too.
"""

import hashlib
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ROOT = Path(__file__).resolve().parent
ENGINE = ROOT / "engine"


def source_hash() -> str:
    """Hash of engine/**/*.cpp and *.hpp (paths and contents): hbfsim/engine.py compares it."""
    h = hashlib.sha256()
    for p in sorted(ENGINE.rglob("*.[ch]pp")):
        h.update(p.relative_to(ENGINE).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


# one compiler process per core (the sources are one file per mechanism)
ParallelCompile("HBFSIM_BUILD_JOBS", default=0).install()

engine = Pybind11Extension(
    "hbfsim._engine",
    sorted(str(p.relative_to(ROOT)) for p in ENGINE.rglob("*.cpp")),
    include_dirs=[str(ENGINE.relative_to(ROOT))],
    cxx_std=17,
    define_macros=[("HBF_SOURCE_HASH", f'"{source_hash()}"')],
    extra_compile_args=["-g0", "-flto"],   # no debug information; link-time inlining
    extra_link_args=["-flto"],
    optional=True,            # no compiler: install without it (hbfsim.engine says so)
)

setup(ext_modules=[engine], cmdclass={"build_ext": build_ext})
