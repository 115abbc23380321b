"""A fixed-concurrency client: ``users`` users, each sending its next request the moment its
previous one completes (closed loop, no think time), every request of exactly ``input``
prompt and ``output`` generated tokens, with a prompt of its own (no prefix shared with any
other request).

This is what a benchmark client in concurrency mode does (AIPerf and genai-perf
``--concurrency N``, ``vllm bench serve --max-concurrency N`` with fixed lengths): at most
``users`` requests are in flight, and a request's time to first token includes its wait
behind the others. As a ``--workload`` spec::

    closed-loop:users=5,requests=10,input=5000,output=500

``requests`` is per user; every user's first request arrives at time 0.
"""

from __future__ import annotations

from hbfsim.serve.workload import Turn, Workload, WorkloadError

__all__ = ["NAME", "PARAMS", "closed_loop"]

#: The spec's name in ``--workload NAME:key=value,...``.
NAME = "closed-loop"
#: Its parameters, all integers >= 1.
PARAMS = ("users", "requests", "input", "output")


def closed_loop(users: int, requests: int, input: int, output: int,
                block_tokens: int = 512) -> Workload:
    """The closed-loop workload: one session per user, ``requests`` turns each.

    Every turn has ``input`` prompt tokens of its own (fresh block hashes: the engine reuses
    nothing between them) and ``output`` output tokens; a user's first turn arrives at 0,
    each later one when the previous completes (``arrival_s`` None, ``think_s`` 0).

    Raises
    ------
    WorkloadError
        One line naming the parameter and its value.
    """
    values = {"users": users, "requests": requests, "input": input, "output": output}
    for key, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkloadError(f"workload {NAME!r}: parameter {key!r} must be an integer "
                                f">= 1, not {v!r}")
    blocks = -(-input // block_tokens)
    turns, next_hash = [], 0
    for u in range(users):
        for k in range(requests):
            hashes = tuple(range(next_hash, next_hash + blocks))
            next_hash += blocks
            turns.append(Turn(u, k, input, output, hashes, 0.0 if k == 0 else None, 0.0))
    name = f"{NAME}:users={users},requests={requests},input={input},output={output}"
    return Workload(name, block_tokens, tuple(turns)).validate()
