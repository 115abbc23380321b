// Multi-plane commands (docs/timing-contract.md §7a): model/megaplane.py, function for
// function. The delivered commands stay in the controller's `delivered` for
// complete_entries (DP6, MP7).
#include "controller/megaplane.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "controller/stack_controller.hpp"

namespace hbf {

Megaplanes::Megaplanes(StackController& ctrl) : c(ctrl) {
    M = c.cfg.megaplane_planes;
    S = c.cfg.subarrays_per_channel;
    gather = c.cfg.multiplane == Multiplane::Megaplane;
    window = c.cfg.hyperpage_window;
    busy.assign(c.C, std::vector<char>(S / M + 1, 0));
}

// The issue decisions of cycle t on every channel: §7's with a free megaplane (MP1), under
// megaplane a full megapage, the window run out or drain high (MP4), and the candidate's
// megapage from the start-of-cycle queue cut to the free active slots (MP3, MP5).
bool Megaplanes::issue(int64_t t, bool drain) {
    bool changed = false;
    if (c.cfg.scheduler == Scheduler::WriteDrain) changed = c.drain_fsm(t);
    while (!wake.empty() && wake.top().first <= t) {
        c.add_issue_check(wake.top().second);
        wake.pop();
    }
    if (drain && !drained) {
        drained = true;   // MP4: drain high makes every waiting operation a candidate
        for (int64_t ch = 0; ch < c.C; ++ch)
            if (!c.queue[ch].empty()) c.add_issue_check(ch);
    }
    bool rp = c.cfg.scheduler != Scheduler::Fcfs;
    bool want_prog = c.drain_open;
    int64_t room = c.total_cap - c.active_sum;
    for (uint64_t chs = c.issue_check_set; chs; chs &= chs - 1) {
        int64_t ch = lowest(chs);
        int64_t free = c.cfg.active_per_channel - c.active[ch];
        if (free <= 0) {
            c.issue_check_set &= ~bit(ch);
            continue;
        }
        if (room <= 0) break;
        auto& bq = busy[ch];
        auto& queue = c.queue[ch];
        // MP4's count: for every (op, megaplane, row) the subarrays the queue holds
        std::map<std::tuple<int, int64_t, int64_t>, std::vector<int64_t>> full;
        if (gather) {
            for (int code : queue) {
                Entry& e = c.entry(code);
                auto& subs = full[{e.kind, e.sub / M, e.local / S}];
                if (std::find(subs.begin(), subs.end(), e.sub) == subs.end())
                    subs.push_back(e.sub);
            }
        }
        int64_t pick = -1, alt = -1, later = -1;
        for (size_t i = 0; i < queue.size(); ++i) {
            Entry& e = c.entry(queue[i]);
            int64_t g = e.sub / M;
            if (bq[g]) continue;
            if (gather && !drain && t - e.tq < window
                    && static_cast<int64_t>(full[{e.kind, g, e.local / S}].size()) < M) {
                if (later < 0) later = e.tq + window;   // the oldest waiter's window ends first
                continue;
            }
            if (!rp) { pick = static_cast<int64_t>(i); break; }
            if ((e.kind == 1) == want_prog) { pick = static_cast<int64_t>(i); break; }
            if (alt < 0) alt = static_cast<int64_t>(i);
        }
        if (pick < 0) pick = alt;
        if (pick < 0) {
            c.issue_check_set &= ~bit(ch);
            if (later >= 0) wake.emplace(later, ch);
            continue;
        }
        // MP3, MP5: the pick and the queued operations of its op, megaplane and row, the
        // oldest first, at most one per subarray, cut to the free slots
        std::vector<int> group{queue[pick]};
        Entry& p = c.entry(queue[pick]);
        int64_t g = p.sub / M, row = p.local / S;
        if (gather) {
            int64_t slots = std::min(free, room);
            std::vector<int64_t> subs{p.sub};
            for (int code : queue) {
                if (static_cast<int64_t>(group.size()) >= slots) break;
                Entry& e = c.entry(code);
                if (e.kind == p.kind && std::find(subs.begin(), subs.end(), e.sub) == subs.end()
                        && e.sub / M == g && e.local / S == row) {
                    group.push_back(code);
                    subs.push_back(e.sub);
                }
            }
        }
        int64_t k = static_cast<int64_t>(group.size());
        queue.erase(std::remove_if(queue.begin(), queue.end(), [&](int code) {
                        return std::find(group.begin(), group.end(), code) != group.end();
                    }), queue.end());
        bq[g] = 1;
        c.active[ch] += k;
        c.active_sum += k;
        room -= k;
        c.ch_ops[ch] += k;
        int64_t ti = t + 1;
        std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> ops;
        for (int code : group) {
            Entry& e = c.entry(code);
            e.state = ISSUED;
            e.ti = ti;
            if (e.kind == 1) {
                --c.queued_programs;
                ops.emplace_back(e.sub, PROGRAM, e.local, e.idx * 2 + 1);
            } else {
                ops.emplace_back(e.sub, READ, e.local, e.idx * 2);
            }
        }
        c.media.issue_group(ti, ch, g, ops);
        c.issued_at[ch] = t;
        c.issued_k[ch] = k;    // the enqueue arbiter's start-of-cycle occupancy (§6)
        ++commands;
        grouped += k;
        changed = true;
    }
    return changed;
}

// Deliver the commands completing in t (one per channel, MP7) and free their megaplanes and
// active slots for the decision of t (MP1 with §7's forwarding).
bool Megaplanes::release(int64_t t) {
    if (!c.media.has_due() || c.media.next_due() > t) return false;
    c.media.deliver(t, c.delivered);
    for (auto& d : c.delivered) {
        int64_t k = static_cast<int64_t>(d.tags.size());
        busy[d.ch][d.unit] = 0;
        c.active[d.ch] -= k;
        c.active_sum -= k;
        c.add_issue_check(d.ch);
    }
    return true;
}

}  // namespace hbf
