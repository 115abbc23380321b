"""Multi-plane (hyperpage) commands on a stack controller: shared command logic per
megaplane, grouping at the issue decision, the gather window and one completion per command
(docs/timing-contract.md §7a, MP1-MP9).

:class:`Megaplanes` replaces the issue decision (timing-contract.md §7) and the media side
of the completions (§7's forwarding, §4b) of a
:class:`~hbfsim.model.controller.StackController` (in both host-port shapes) when
``multiplane`` is not ``off``. Everything else (queues, enqueue,
tables, responses) is the controller's, unchanged: a completed group's entries follow §4.3 /
§4.4 one by one (MP7).
"""

from __future__ import annotations

import heapq

from hbfsim.model.controller.request import ISSUED
from hbfsim.model.media import PROGRAM, READ

__all__ = ["Megaplanes"]


class Megaplanes:
    """The per-megaplane busy and group state of one stack controller (MP1, MP2).

    Parameters
    ----------
    ctrl : StackController
        The controller whose issue decisions and media completions this object takes.

    Members
    -------
    M : int
        Planes per megaplane (``megaplane_planes``): megaplane ``g`` of a channel is its
        subarrays ``g*M .. g*M + M - 1``.
    gather : bool
        ``multiplane = "megaplane"``: commands group operations (MP3-MP5); ``page``: every
        command takes one operation.
    window : int
        MP4's gather window in ticks (``hyperpage_window``).
    busy : list of set of int
        Per channel: the megaplanes holding a command (MP1), from the decision to the
        completion's delivery.
    commands, grouped : int
        Commands issued and operations they served (the mean group size is their ratio).
    """

    def __init__(self, ctrl):
        cfg = ctrl.cfg
        self.c = ctrl
        self.M = cfg.megaplane_planes
        self.S = cfg.subarrays_per_channel
        self.gather = cfg.multiplane == "megaplane"
        self.window = cfg.hyperpage_window
        self.busy: list[set[int]] = [set() for _ in range(cfg.channels)]
        self.wake: list[tuple[int, int]] = []   # (tick, channel): an MP4 window runs out
        self.drained = False
        self.delivered: list = []
        self.commands = self.grouped = 0

    # ================================================================= MP3-MP5 issue (§7)
    def issue(self, t: int, drain: bool) -> bool:
        """The issue decisions of cycle ``t`` on every channel (§7 with MP1, MP3-MP5).

        The candidate test, the policy's choice and the active-slot accounting are §7's
        with three changes: a candidate's megaplane must be free (MP1); under ``megaplane``
        it must also head a full megapage, have waited ``window`` ticks since its enqueue,
        or see ``drain`` high (MP4); and the command takes the candidate's whole megapage
        from the queue as it stood at the start of ``t``, cut to the free active slots
        (MP3, MP5). The queue seen here is the start-of-cycle one: enqueue runs after issue
        (§16: issue before enqueue)."""
        c = self.c
        changed = False
        if c.policy == "write-drain":
            changed = c._drain_fsm(t)
        wake = self.wake
        while wake and wake[0][0] <= t:
            c.issue_check.add(heapq.heappop(wake)[1])
        if drain and not self.drained:
            # MP4: drain high makes every waiting operation a candidate
            self.drained = True
            c.issue_check.update(ch for ch in range(c.C) if c.queue[ch])
        if not c.issue_check:
            return changed
        rp = c.policy != "fcfs"
        want_prog = c.drain_open
        capped = c.total_cap < 1 << 30
        order = sorted(c.issue_check) if capped else c.issue_check
        room = c.total_cap - c.active_sum
        M, S, gather, window = self.M, self.S, self.gather, self.window
        done = []
        for ch in order:
            free = c.active_cap - c.active[ch]
            if free <= 0:
                done.append(ch)
                continue
            if room <= 0:
                break
            busy = self.busy[ch]
            queue = c.queue[ch]
            full = self._megapages(queue) if gather else None
            pick = alt = None
            later = -1
            for e in queue:
                g = e.sub // M
                if g in busy:
                    continue
                if gather and not drain and t - e.tq < window \
                        and len(full[(e.kind, g, e.local // S)]) < M:
                    if later < 0:
                        later = e.tq + window   # the oldest waiter's window ends first
                    continue
                if not rp:
                    pick = e
                    break
                if (e.kind == 1) == want_prog:
                    pick = e
                    break
                if alt is None:
                    alt = e
            if pick is None:
                pick = alt
            if pick is None:
                done.append(ch)
                if later >= 0:
                    heapq.heappush(wake, (later, ch))
                continue
            group = self._group(pick, queue, min(free, room)) if gather else [pick]
            k = len(group)
            members = set(map(id, group))
            queue[:] = [e for e in queue if id(e) not in members]
            g = pick.sub // M
            busy.add(g)
            c.active[ch] += k
            c.active_sum += k
            room -= k
            c.ch_ops[ch] += k
            ti = t + c.cmd_delay
            ops = []
            for e in group:
                e.state = ISSUED
                e.ti = ti
                if e.kind == 1:
                    c.queued_programs -= 1
                    ops.append((e.sub, PROGRAM, e.local, e.idx * 2 + 1))
                else:
                    ops.append((e.sub, READ, e.local, e.idx * 2))
            c.media.issue_group(ti, ch, g, ops)
            c.issued_at[ch] = t
            c.issued_k[ch] = k      # the enqueue arbiter's start-of-cycle occupancy (§6)
            self.commands += 1
            self.grouped += k
            changed = True
        for ch in done:
            c.issue_check.discard(ch)
        return changed

    def _megapages(self, queue) -> dict:
        """MP4's count: for every (op, megaplane, row) of ``queue``, the subarrays it holds."""
        M, S = self.M, self.S
        out: dict = {}
        for e in queue:
            key = (e.kind, e.sub // M, e.local // S)
            subs = out.get(key)
            if subs is None:
                out[key] = {e.sub}
            else:
                subs.add(e.sub)
        return out

    def _group(self, pick, queue, slots: int) -> list:
        """MP3 and MP5: ``pick`` and the queued operations of its op, megaplane and row, the
        oldest first, at most one per subarray (a command's ``planes`` mask has one bit per
        plane; two reads of one page on one plane occur only with ``mshr_merge`` off), cut
        to ``slots`` operations."""
        M, S = self.M, self.S
        kind, g, row = pick.kind, pick.sub // M, pick.local // S
        group = [pick]
        subs = {pick.sub}
        for e in queue:
            if len(group) >= slots:
                break
            if e.kind == kind and e.sub not in subs and e.sub // M == g \
                    and e.local // S == row:
                group.append(e)
                subs.add(e.sub)
        return group

    # ============================================================ MP1, MP7 completions
    def release(self, t: int) -> bool:
        """Deliver the commands completing in ``t`` (one per channel, MP7) and free their
        megaplanes and active slots for the decision of ``t`` (MP1 with §7's forwarding)."""
        c = self.c
        due = c.media._due
        if not due or due[0][0] > t:
            return False
        self.delivered = c.media.deliver(t)
        for ch, g, tags, _flags in self.delivered:
            k = len(tags)
            self.busy[ch].discard(g)
            c.active[ch] -= k
            c.active_sum -= k
            c.issue_check.add(ch)
        return True

    def next_wake(self) -> int | None:
        """The earliest tick at which an MP4 window runs out on a channel left waiting."""
        return self.wake[0][0] if self.wake else None
