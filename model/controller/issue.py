"""Issue: the media completions of the cycle release their subarrays and active slots,
then per channel one issue decision, its command on ``cmd[c]`` a cycle later
(docs/timing-contract.md §7, M2, L2; the media promise of §1; multi-plane commands of §7a,
MP1-MP9, through :class:`hbfsim.model.megaplane.Megaplanes`).

No rule of the registered pipeline touches this stage (§7): the decision, its completion
forwarding and the pacing (``tR + 1`` per read of one subarray) are the same in every shape
and mode. The write-drain window it consults is the write buffer's
(:mod:`~hbfsim.model.controller.write_buffer`).
"""

from __future__ import annotations

from hbfsim.model.controller.request import ISSUED
from hbfsim.model.media import PROGRAM, READ

__all__ = ["Issue"]


class Issue:
    """The media side of every channel: completions released, issue decisions (a stage of
    :class:`~hbfsim.model.controller.StackController`)."""

    def release_media(self, t: int) -> bool:
        """Deliver the completions of cycle ``t`` and free their subarrays and active slots
        for the issue decision of the same cycle (§7, the media side's forwarding; with
        ``multiplane``, MP1 and MP7)."""
        if self.mp is not None:
            return self.mp.release(t)
        due = self.media._due
        if not due or due[0][0] > t:
            return False
        self._delivered = self.media.deliver(t)
        for ch, sub, _tag, _flags in self._delivered:
            self.busy[ch].discard(sub)
            self.active[ch] -= 1
            self.active_sum -= 1
            self.issue_check.add(ch)
        return True

    def issue(self, t: int) -> bool:
        """The issue decisions of cycle ``t`` (§7): per channel the policy's choice among the
        queued operations whose subarray is free and whose channel (and stack, with
        ``active_total``) has an active slot; the command is on ``cmd[c]`` in ``t + 1``.
        With ``multiplane`` not ``off`` the decisions are
        :class:`~hbfsim.model.megaplane.Megaplanes`'s (§7a, MP1-MP5)."""
        if self.mp is not None:
            return self.mp.issue(t, self.drain_in)
        changed = False
        if self.policy == "write-drain":
            changed = self._drain_fsm(t)
        if not self.issue_check:
            return changed
        drain = self.drain_open
        rp = self.policy != "fcfs"
        media = self.media
        done = []
        capped = self.total_cap < 1 << 30
        # with a stack-wide cap, lower channels issue first (contract §7)
        order = sorted(self.issue_check) if capped else self.issue_check
        room = self.total_cap - self.active_sum
        for ch in order:
            if self.active[ch] >= self.active_cap:
                done.append(ch)
                continue
            if room <= 0:
                break
            busy = self.busy[ch]
            pick = None
            alt = None
            for e in self.queue[ch]:
                if e.sub in busy:
                    continue
                if not rp:
                    pick = e
                    break
                want_prog = drain
                if (e.kind == 1) == want_prog:
                    pick = e
                    break
                if alt is None:
                    alt = e
            if pick is None:
                pick = alt
            if pick is None:
                done.append(ch)
                continue
            self.queue[ch].remove(pick)
            busy.add(pick.sub)
            self.active[ch] += 1
            room -= 1
            pick.state = ISSUED
            ti = t + self.cmd_delay
            pick.ti = ti
            self.active_sum += 1
            self.ch_ops[ch] += 1
            if pick.kind == 1:
                self.queued_programs -= 1
                media.issue(ti, ch, pick.sub, PROGRAM, pick.local, pick.idx * 2 + 1)
            else:
                media.issue(ti, ch, pick.sub, READ, pick.local, pick.idx * 2)
            self.issued_at[ch] = t
            changed = True
        for ch in done:
            self.issue_check.discard(ch)
        return changed
