"""Host-link credit of the response ports under timing contract 2 (docs/timing-contract-v2.md
§8, decision in §15).

Contract 1 keeps its bucket inside :class:`hbfsim.model.controller.StackController` (and the
fused loop); this module serves the launch stage ``K`` of
:class:`hbfsim.model.controller_v2.PipelinedStackController`, which charges a response in
the cycle it is launched, not at its handshake (v2 §19 item 8).
"""

from __future__ import annotations

from hbfsim.config import HbfConfig

__all__ = ["BucketCredit"]


class BucketCredit:
    """Contract 1's credit bucket per channel (v1 §8), tested and charged at launch.

    A response of ``n`` bytes needs ``credit(t) >= n * memory_clock_khz``; with ``gain =
    channel_bw_gbps * 10**6`` and ``cap = link_burst_bytes * memory_clock_khz``,
    ``credit(t+1) = min(cap, credit(t) - cost(t) + gain)``, ``credit(0) = cap``. The level is
    kept lazily: the value at the start of the cycle after the last launch, and that cycle.

    Parameters
    ----------
    cfg : HbfConfig
        Supplies the rate, the bucket and the clock.
    """

    def __init__(self, cfg: HbfConfig):
        self.khz = cfg.memory_clock_khz
        self.gain = cfg.link_gain_per_tick
        self.cap = cfg.link_cap
        self.credit = [self.cap] * cfg.channels
        self.credit_t = [0] * cfg.channels

    def level(self, ch: int, t: int) -> int:
        """Credit of channel ``ch`` at the start of cycle ``t`` (no launch since the last)."""
        c = self.credit[ch] + self.gain * (t - self.credit_t[ch])
        return c if c < self.cap else self.cap

    def allows(self, ch: int, t: int, nbytes: int) -> bool:
        """Whether a response of ``nbytes`` may launch on channel ``ch`` in cycle ``t``."""
        return self.level(ch, t) >= nbytes * self.khz

    def charge(self, ch: int, t: int, nbytes: int) -> None:
        """Launch a response of ``nbytes`` on channel ``ch`` in cycle ``t``."""
        c = self.level(ch, t) - nbytes * self.khz + self.gain
        self.credit[ch] = c if c < self.cap else self.cap
        self.credit_t[ch] = t + 1

    def wait(self, ch: int, nbytes: int) -> int:
        """The first cycle in which a response of ``nbytes`` may launch on channel ``ch``."""
        need = nbytes * self.khz - self.credit[ch]
        return self.credit_t[ch] + -(-need // self.gain)
