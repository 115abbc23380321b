"""Time of the tensor- and expert-parallel collectives over NVLink: latency plus bytes.

NCCL's ring algorithms (its own cost model, and the one nccl-tests' "bus bandwidth" is
defined by): an all-reduce of ``B`` bytes per GPU over ``p`` GPUs takes ``2 (p-1)`` steps,
each paying a startup ``L`` and moving ``B / p`` bytes; an all-to-all ``p - 1`` steps of
``B / p``:

    t_allreduce = 2 (p-1) L + 2 (p-1)/p x B / (bw x eta_link)
    t_alltoall  =   (p-1) L +   (p-1)/p x B / (bw x eta_link)

The *bus bandwidth* nccl-tests reports, ``2 (p-1)/p x B / t``, therefore depends on the
message: it approaches ``bw x eta_link`` for large messages and is latency-bound for the
small ones of decode steps (a TP8 decode all-reduce of a few hundred KB runs far below the
link rate). ``bw`` is the GPU's unidirectional NVLink bandwidth.
"""

from __future__ import annotations

__all__ = ["allreduce_seconds", "alltoall_seconds", "bus_bandwidth"]


def allreduce_seconds(nbytes, p: int, bw: float, latency_s: float, eta: float = 1.0):
    """Ring all-reduce of ``nbytes`` per GPU over ``p`` GPUs (0 when ``p == 1`` or no bytes)."""
    if p == 1:
        return 0.0 * nbytes
    return (nbytes > 0) * 2 * (p - 1) * latency_s + 2 * (p - 1) / p * nbytes / (bw * eta)


def alltoall_seconds(nbytes, p: int, bw: float, latency_s: float, eta: float = 1.0):
    """All-to-all of ``nbytes`` per GPU over ``p`` GPUs (0 when ``p == 1`` or no bytes)."""
    if p == 1:
        return 0.0 * nbytes
    return (nbytes > 0) * (p - 1) * latency_s + (p - 1) / p * nbytes / (bw * eta)


def bus_bandwidth(nbytes, p: int, bw: float, latency_s: float, eta: float = 1.0):
    """nccl-tests' all-reduce bus bandwidth ``2 (p-1)/p x B / t`` for ``nbytes`` per GPU."""
    return 2 * (p - 1) / p * nbytes / allreduce_seconds(nbytes, p, bw, latency_s, eta)
