"""Where sweep points run: local worker processes, or tasks on an existing Ray cluster.

Both backends yield ``(point, row)`` as points finish, in completion order; the caller
records each at once (resumability) and orders the table by grid position at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from hbfsim.sweep.grid import GridError, Point
from hbfsim.sweep.points import run_point

__all__ = ["BACKENDS", "connect_ray", "ray_tasks", "run_local", "run_ray"]

BACKENDS = ("local", "ray")


def die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the sweep's process ends, however it ends.

    On Linux the kernel sends SIGKILL when the parent dies (``PR_SET_PDEATHSIG``, through
    ctypes); elsewhere a daemon thread polls the parent. Ctrl-C reaches the whole process
    group: a worker ignores it and the main process stops the pool; SIGTERM ends a worker
    at once (the main process's handler, inherited by fork, would raise in it)."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0     # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:           # the parent died before the line above
        os._exit(1)
    if not armed:
        import threading
        import time

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()


def _run_one(item):
    i, point = item
    return i, run_point(point)


def run_local(points: list[Point], workers: int | None = None) -> Iterator[tuple[Point, dict]]:
    """Run ``points`` in ``workers`` processes (default: one per core; 1 runs in-process).

    The workers end with this process whatever ends it (:func:`die_with_parent`); when the
    iteration stops early (an error, Ctrl-C, SIGTERM) they are terminated, not waited for.
    """
    n = min(workers or os.cpu_count() or 1, max(len(points), 1))
    if n <= 1:
        for p in points:
            yield p, run_point(p)
        return
    import multiprocessing

    pool = multiprocessing.Pool(n, initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        for i, result in pool.imap_unordered(_run_one, enumerate(points)):
            yield points[i], result
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def run_ray(points: list[Point], address: str,
            workers: int | None = None) -> Iterator[tuple[Point, dict]]:
    """Connect to the Ray cluster at ``address`` (``auto``: the one this machine belongs
    to) now, and return an iterator that runs ``points`` there as tasks. Every node must
    have this hbfsim installed (docs/sweep.md).

    ``workers`` bounds the tasks in flight (default: all points at once; Ray's scheduler
    then places one task per free CPU).

    Raises
    ------
    GridError
        Ray is not installed, or no cluster answers at ``address``.
    """
    return ray_tasks(connect_ray(address), points, workers)


def connect_ray(address: str):
    """Connect to the Ray cluster at ``address`` and return the ``ray`` module.

    Raises
    ------
    GridError
        Ray is not installed, or no cluster answers at ``address``.
    """
    # Ray's C++ core logs reconnection attempts to stderr; a failed connection must stay
    # one line (the caller's error), so keep only its errors.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    try:
        import ray
    except ImportError:
        raise GridError("--backend ray needs Ray: pip install 'hbfsim[cluster]'") from None
    import logging

    _probe(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, ignore_reinit_error=True)
    except (ConnectionError, RuntimeError, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GridError(f"--address {address!r}: cannot connect to a Ray cluster: {msg}") \
            from None
    return ray


def _probe(address: str, timeout: float = 5.0) -> None:
    """Refuse an address where nothing listens within ``timeout`` seconds: Ray itself
    retries a dead address for minutes."""
    import socket

    if address == "auto":
        return                          # Ray reads the local cluster's address file
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GridError(f"--address must be host:port, ray://host:port or auto, "
                        f"not {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise GridError(f"--address {address!r}: no Ray cluster answers "
                        f"({e.strerror or type(e).__name__})") from None


def ray_tasks(ray, points, workers):
    """Run ``points`` as tasks of the connected cluster; yield ``(point, result)``."""
    try:
        task = ray.remote(num_cpus=1)(run_point)
        todo = list(points)
        limit = workers or len(todo)
        pending: dict = {}
        while todo or pending:
            while todo and len(pending) < limit:
                p = todo.pop(0)
                pending[task.remote(p)] = p
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                p = pending.pop(ref)
                yield p, ray.get(ref)
    finally:
        ray.shutdown()
