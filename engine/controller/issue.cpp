// §7 issue: per channel one decision per cycle, the command on cmd[c] a cycle later, the
// completions of the cycle released first (the media side's forwarding), the schedulers and
// the stack-wide active cap; multi-plane commands through Megaplanes (§7a)
// (docs/timing-contract.md; model/controller/issue.py issue, release_media).
#include "controller/megaplane.hpp"
#include "controller/stack_controller.hpp"

namespace hbf {

// Deliver the completions of cycle t and free their subarrays and active slots for the
// issue decision of the same cycle (§7).
bool StackController::release_media_work(int64_t t) {
    if (mp) return mp->release(t);
    if (!media.has_due() || media.next_due() > t) return false;
    media.deliver(t, delivered);
    for (auto& d : delivered) {
        busy[d.ch][d.unit] = 0;
        --active[d.ch];
        --active_sum;
        add_issue_check(d.ch);
    }
    return true;
}

// The issue decisions of cycle t (§7; with multiplane, MP1-MP5).
bool StackController::issue_work(int64_t t) {
    if (mp) return mp->issue(t, drain_in);
    return issue_plain(t);
}

// model/controller/issue.py issue with the command register (cmd_delay 1): per channel the oldest
// candidate (fcfs) or the oldest of the wanted kind, else the oldest (read-priority,
// write-drain, partition-*); with active_total, lower channels first.
bool StackController::issue_plain(int64_t t) {
    bool changed = false;
    if (cfg.scheduler == Scheduler::WriteDrain) changed = drain_fsm(t);
    bool rp = cfg.scheduler != Scheduler::Fcfs;
    bool want_prog = drain_open;
    int64_t room = total_cap - active_sum;
    for (uint64_t chs = issue_check_set; chs; chs &= chs - 1) {
        int64_t ch = lowest(chs);
        if (active[ch] >= cfg.active_per_channel) {
            issue_check_set &= ~bit(ch);
            continue;
        }
        if (room <= 0) break;
        auto& bq = busy[ch];
        auto& qu = queue[ch];
        int64_t pick = -1, alt = -1;
        for (size_t i = 0; i < qu.size(); ++i) {
            Entry& e = entry(qu[i]);
            if (bq[e.sub]) continue;
            if (!rp) { pick = static_cast<int64_t>(i); break; }
            if ((e.kind == 1) == want_prog) { pick = static_cast<int64_t>(i); break; }
            if (alt < 0) alt = static_cast<int64_t>(i);
        }
        if (pick < 0) pick = alt;
        if (pick < 0) {
            issue_check_set &= ~bit(ch);
            continue;
        }
        Entry& e = entry(qu[pick]);
        qu.erase(qu.begin() + pick);
        bq[e.sub] = 1;
        ++active[ch];
        --room;
        e.state = ISSUED;
        int64_t ti = t + 1;
        e.ti = ti;
        ++active_sum;
        ++ch_ops[ch];
        if (e.kind == 1) {
            --queued_programs;
            media.issue(ti, ch, e.sub, PROGRAM, e.local, e.idx * 2 + 1);
        } else {
            media.issue(ti, ch, e.sub, READ, e.local, e.idx * 2);
        }
        issued_at[ch] = t;
        changed = true;
    }
    return changed;
}

}  // namespace hbf
