"""Host-link credit of the response ports (docs/timing-contract.md §8; the choice of rule
in §15).

This module serves the launch stage ``K`` of the stack controller
(:mod:`hbfsim.model.controller.response`), which charges a response in the cycle it is
launched, not at its handshake (§19 question 5).
"""

from __future__ import annotations

from hbfsim.config import HbfConfig

__all__ = ["DeficitCredit"]


class DeficitCredit:
    """The deficit credit of every channel of a stack (§8).

    In units of ``g = gcd(G, F)`` (``G = channel_bw_gbps * 10**6``, ``F =
    memory_clock_khz``) a byte costs ``b = F / g`` and a tick adds ``γ = G / g``::

        x(0) = γ;  launch allowed in t iff x(t) > 0;  x(t+1) = min(γ, x(t) - cost(t) + γ)

    ``cost(t)`` is ``bytes * b`` of the response launched in ``t``, else 0. The golden model
    keeps ``x`` as a plain integer (the RTL's bytes-plus-remainder form is the same number),
    lazily: its value at the start of the cycle after the last launch, and that cycle.

    Parameters
    ----------
    cfg : HbfConfig
        Supplies ``link_byte_cost`` (``b``) and ``link_gain`` (``γ``).

    Members
    -------
    credit, credit_t : list of int
        Per channel: ``x`` at the start of cycle ``credit_t`` (the cycle after its last
        launch, 0 before any).
    """

    def __init__(self, cfg: HbfConfig):
        self.b = cfg.link_byte_cost
        self.gain = cfg.link_gain
        self.credit = [self.gain] * cfg.channels
        self.credit_t = [0] * cfg.channels

    def level(self, ch: int, t: int) -> int:
        """``x`` of channel ``ch`` at the start of cycle ``t`` (no launch since the last):
        the refill of the idle ticks, capped at one tick's refill ``γ``."""
        x = self.credit[ch] + self.gain * (t - self.credit_t[ch])
        return x if x < self.gain else self.gain

    def allows(self, ch: int, t: int, nbytes: int) -> bool:
        """Whether a response may launch on channel ``ch`` in cycle ``t``: ``x(t) > 0``,
        whatever its size (``nbytes`` is not looked at: a response may drive ``x``
        negative)."""
        return self.level(ch, t) > 0

    def charge(self, ch: int, t: int, nbytes: int) -> None:
        """Launch a response of ``nbytes`` on channel ``ch`` in cycle ``t``."""
        x = self.level(ch, t) - nbytes * self.b + self.gain
        self.credit[ch] = x if x < self.gain else self.gain
        self.credit_t[ch] = t + 1

    def launch(self, ch: int, t: int, nbytes: int) -> bool:
        """:meth:`allows` and, if it does, :meth:`charge`, reading the credit once."""
        x = self.credit[ch] + self.gain * (t - self.credit_t[ch])
        if x > self.gain:
            x = self.gain
        if x <= 0:
            return False
        x += self.gain - nbytes * self.b
        self.credit[ch] = x if x < self.gain else self.gain
        self.credit_t[ch] = t + 1
        return True

    def wait(self, ch: int, nbytes: int) -> int:
        """The first cycle in which channel ``ch`` may launch again: its credit positive."""
        return self.credit_t[ch] + -(-(1 - self.credit[ch]) // self.gain)
