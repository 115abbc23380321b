"""One output-safety rule for every command that writes a file.

A command names all of its outputs and inputs *before* any work starts::

    from hbfsim.outputs import resolve_outputs

    outs = resolve_outputs({"--trace": trace_path, "--stats-json": stats_path},
                           inputs={"--requests": csv_path, "--config": cfg_path})
    ...                                    # the long simulation
    outs["--stats-json"].write_text(json.dumps(stats))
    with outs["--trace"].open("w", newline="") as fh:   # streamed output
        fh.write(...)
    with outs["plot"].temp_path() as tmp:                # a library that wants a file name
        fig.savefig(tmp)

:func:`resolve_outputs` raises :class:`OutputError` (one line naming the option and the path;
the command exits 2) for an output that

* is empty, is a directory, or lies in a folder that does not exist or cannot be written;
* is the same file as an input or as another output (by resolved path, and by inode where
  both exist, so hard links and symbolic links are caught);
* exists but is neither a regular file, a character device (``/dev/null``) nor a FIFO.

Regular files are written through a temporary file created with :func:`tempfile.mkstemp` in
the destination's folder (a hidden name, ``.STEM.XXXXXXXX.hbfsim-tmp.SUFFIX``, that never
collides with a user's file) and renamed over the destination only when complete. A destination that
is a symbolic link keeps its link: the link's target is replaced. Character devices and FIFOs
are written in place: renaming over them would replace the device node with a regular file.

Every live temporary is registered; :func:`install_signal_cleanup` makes SIGTERM raise
:class:`Terminated` (SIGINT already raises :class:`KeyboardInterrupt`) so that the ``with``
blocks unwind and remove their temporaries, and an :mod:`atexit` hook removes any left.
``hbfsim serve`` and the study runner use the same two calls.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import stat
import tempfile
from pathlib import Path

__all__ = ["OutputError", "Target", "Terminated", "install_signal_cleanup", "resolve_outputs"]

#: Marker in the name of every temporary this module creates, before the output's own
#: suffix (``.t.k2j4x9ab.hbfsim-tmp.csv``); these are the only files it ever removes.
TEMP_SUFFIX = ".hbfsim-tmp"

_live: set[str] = set()


class OutputError(ValueError):
    """An output path is refused; the message names the option and the path."""


class Terminated(BaseException):
    """Raised by the SIGTERM handler so that cleanup code runs (see
    :func:`install_signal_cleanup`)."""


def _cleanup_all() -> None:
    for p in list(_live):
        with contextlib.suppress(OSError):
            os.unlink(p)
        _live.discard(p)


atexit.register(_cleanup_all)


def install_signal_cleanup() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread, so an interrupted command
    unwinds its ``with`` blocks and leaves no temporary file (SIGINT raises
    KeyboardInterrupt already). Does nothing outside the main thread."""
    def _term(signum, frame):
        raise Terminated(signum)

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        signal.signal(signal.SIGTERM, _term)


class Target:
    """One resolved, checked output.

    Members
    -------
    label : str
        The option or role that named it (used in messages), e.g. ``"--trace"``.
    path : Path
        The path as the user gave it (for messages).
    real : Path
        The file actually written: ``path`` with symbolic links resolved.
    in_place : bool
        True for a character device or FIFO: written directly, never renamed over.
    """

    def __init__(self, label: str, path: Path, real: Path, in_place: bool, text: str = ""):
        self.label, self.path, self.real, self.in_place = label, path, real, in_place
        self.text = text or str(path)  # as the user typed it, for messages

    def __repr__(self):
        return f"Target({self.label!r}, {str(self.path)!r})"

    @contextlib.contextmanager
    def temp_path(self):
        """Yield a path to write; on success it becomes the output, on any exception (or
        SIGINT/SIGTERM) it is removed. The temporary keeps the output's suffix so libraries
        that choose a format by extension (matplotlib) choose the right one."""
        if self.in_place:
            yield self.real
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{self.real.stem}.",
                                   suffix=f"{TEMP_SUFFIX}{self.real.suffix}",
                                   dir=self.real.parent)
        _live.add(tmp)
        try:
            os.close(fd)
            yield Path(tmp)
            _set_mode(tmp, self.real)
            os.replace(tmp, self.real)
        finally:
            _live.discard(tmp)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    @contextlib.contextmanager
    def open(self, mode: str = "w", **kw):
        """Open the output for writing (``"w"`` or ``"wb"``); committed when the block ends
        without an exception, removed otherwise."""
        with self.temp_path() as tmp, open(tmp, mode, **kw) as fh:
            yield fh

    def opener(self, mode: str = "w", **kw):
        """Open for writing outside a ``with`` block: returns ``(fh, commit, abort)``."""
        cm = self.open(mode, **kw)
        fh = cm.__enter__()

        def commit():
            cm.__exit__(None, None, None)

        def abort():
            # closing may fail again (a full disk): the temporary is removed all the same
            with contextlib.suppress(OutputError, OSError):
                cm.__exit__(OutputError, OutputError("aborted"), None)
        return fh, commit, abort

    def write_text(self, text: str) -> None:
        with self.open("w", newline="") as fh:
            fh.write(text)

    def write_bytes(self, data: bytes) -> None:
        with self.open("wb") as fh:
            fh.write(data)


def _set_mode(tmp: str, real: Path) -> None:
    """Give the new file the old file's mode, or the mode a plain ``open`` would give
    (mkstemp creates 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_one(label: str, raw) -> Target:
    text = os.fspath(raw)
    if not text.strip():
        raise OutputError(f"{label}: an empty path is not an output file")
    path = Path(text)
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{label} {text!r}: {e.strerror}") from None
    in_place = False
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{label} {text!r} is a directory, not a file")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            in_place = True
        elif not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{label} {text!r} exists and is not a regular file, a "
                              "character device or a FIFO")
        if not os.access(real, os.W_OK):  # a read-only file is kept, as cp keeps it
            raise OutputError(f"{label} {text!r} exists and is not writable")
    parent = real.parent
    if not in_place:
        if not parent.is_dir():
            raise OutputError(f"{label} {text!r}: directory {str(parent)!r} does not exist")
        _probe(label, text, parent)
    return Target(label, path, real, in_place, text)


def _probe(label: str, text: str, parent: Path) -> None:
    """Create and remove one temporary in ``parent``: the only test that answers truly for
    root, read-only mounts, ACLs and pseudo file systems alike (``os.access`` does not)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".probe.", suffix=TEMP_SUFFIX, dir=parent)
    except OSError as e:
        raise OutputError(f"{label} {text!r}: directory {str(parent)!r} is not writable "
                          f"({e.strerror})") from None
    os.close(fd)
    os.unlink(tmp)


def resolve_outputs(outputs: dict, inputs: dict | None = None) -> dict:
    """Check every output of a command before it starts; see the module docstring.

    Parameters
    ----------
    outputs : dict
        ``label -> path`` (``None`` = that output is not requested; kept as ``None``).
    inputs : dict, optional
        ``label -> path`` of every file the command reads (``None`` entries are ignored).

    Returns
    -------
    dict
        ``label -> Target`` (or ``None``), in the order given.

    Raises
    ------
    OutputError
        The first refused output, naming its label and path.
    """
    ins = [(k, Path(os.path.realpath(os.fspath(v)))) for k, v in (inputs or {}).items()
           if v is not None and os.fspath(v) != ""]
    out: dict = {}
    seen: list[Target] = []
    for label, raw in outputs.items():
        if raw is None:
            out[label] = None
            continue
        t = _check_one(label, raw)
        for ilabel, ipath in ins:
            if not t.in_place and _same(t.real, ipath):
                raise OutputError(f"{label} {t.text!r} is the same file as the input "
                                  f"{ilabel}; refusing to overwrite it")
        for o in seen:
            if _same(t.real, o.real) and not (t.in_place and o.in_place):
                raise OutputError(f"{label} {t.text!r} is the same file as {o.label}; "
                                  "each output needs its own file")
        seen.append(t)
        out[label] = t
    return out


def check_output_folder(label: str, raw) -> Path:
    """Check, before any work, a folder a command will write into (created if missing):
    an existing path must be a folder, and the folder (or, if it does not exist yet, its
    nearest existing ancestor, where it will be created) must be writable (one hidden
    temporary created and removed). Nothing is created.

    Raises
    ------
    OutputError
        Naming ``label`` and the path.
    """
    text = os.fspath(raw)
    if not text.strip():
        raise OutputError(f"{label}: an empty path is not a folder")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{label} {text!r} is a file, not a folder")
    probe = path
    while not probe.exists():
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if not probe.is_dir():
        raise OutputError(f"{label} {text!r}: {str(probe)!r} is a file, not a folder")
    _probe(label, text, probe)
    return path
