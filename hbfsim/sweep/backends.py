"""Where sweep points run: local worker processes, or tasks on an existing Ray cluster.

Both backends yield ``(point, row)`` as points finish, in completion order; the caller
records each at once (resumability) and orders the table by grid position at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from hbfsim.sweep.grid import GridError, Point
from hbfsim.sweep.points import run_point

__all__ = ["BACKENDS", "run_local", "run_ray"]

BACKENDS = ("local", "ray")


def run_local(points: list[Point], workers: int | None = None) -> Iterator[tuple[Point, dict]]:
    """Run ``points`` in ``workers`` processes (default: one per core; 1 runs in-process)."""
    n = min(workers or os.cpu_count() or 1, max(len(points), 1))
    if n <= 1:
        for p in points:
            yield p, run_point(p)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=n) as pool:
        futs = {pool.submit(run_point, p): p for p in points}
        try:
            for f in as_completed(futs):
                yield futs[f], f.result()
        except BaseException:
            for f in futs:
                f.cancel()
            raise


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
    return _ray_tasks(ray, points, workers)


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


def _ray_tasks(ray, points, workers):
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
