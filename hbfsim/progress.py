"""Progress bars for long runs: requests answered and the estimated rest (tqdm, on stderr).

A bar is drawn only when stderr is a terminal and ``--no-progress`` was not given, and only
once a run has lasted :data:`DELAY_S` seconds, so short runs, pipes and logs stay as they
were. Both engines report through :class:`Progress`: the reference from its response
callback, the compiled engine from a callback it makes every :data:`COMPILED_EVERY`
responses (docs/engine.md). Neither changes an event.
"""

from __future__ import annotations

import sys
import time

__all__ = ["COMPILED_EVERY", "DELAY_S", "Progress", "progress_wanted"]

#: Seconds a run lasts before its bar appears (issue 24: "any run longer than a few seconds").
DELAY_S = 2.0

#: The compiled engine reports every this many responses (about 20 reports a second at
#: its speed; a report costs one call into Python).
COMPILED_EVERY = 1 << 15

#: The reference engine's response callback updates the bar every this many responses.
REFERENCE_EVERY = 1 << 10


def progress_wanted(no_progress: bool = False, stream=None) -> bool:
    """True when a bar should be drawn: not turned off, and ``stream`` (stderr) a terminal."""
    stream = sys.stderr if stream is None else stream
    if no_progress:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A bar of requests answered out of ``total`` (None: unknown, no estimate of the rest).

    Parameters
    ----------
    total : int or None
        Requests the run will answer.
    desc : str
        The bar's label (the engine that runs).
    enabled : bool
        False: every method does nothing.
    stream : file, optional
        Where the bar goes (default stderr).
    """

    def __init__(self, total: int | None, desc: str, enabled: bool = True, stream=None):
        self.bar = None
        self.t0 = time.monotonic()
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="req", unit_scale=True,
                            file=sys.stderr if stream is None else stream, delay=DELAY_S,
                            mininterval=0.5, dynamic_ncols=True, leave=False)

    @property
    def enabled(self) -> bool:
        return self.bar is not None

    def to(self, done: int) -> None:
        """``done`` requests have been answered so far."""
        if self.bar is not None and done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def kernel(self, name: str) -> None:
        """Kernel ``name`` launches: the compiled engine generates its accesses, then runs it
        (shown beside the bar, which stands still while a large kernel is generated)."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"kernel {name}", refresh=False)
            if time.monotonic() - self.t0 >= DELAY_S:   # a short run stays quiet
                self.bar.refresh()

    def write(self, line: str, stream=None) -> None:
        """Print ``line`` to ``stream`` (default stdout), above the bar when one is drawn."""
        stream = sys.stdout if stream is None else stream
        if self.bar is not None:
            self.bar.write(line, file=stream)
        else:
            print(line, file=stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def hook(self, system) -> None:
        """Report a reference :class:`~hbfsim.model.system.HbfSystem`'s responses: wrap its
        response callback (called after the one it had, so the run's order is unchanged)."""
        if self.bar is None:
            return
        inner = system.user_cb
        every = REFERENCE_EVERY - 1

        def responded(req, t):
            if inner is not None:
                inner(req, t)
            n = system.n_done
            if not n & every:
                self.to(n)

        system.user_cb = responded
