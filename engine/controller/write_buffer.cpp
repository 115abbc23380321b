// The write buffer's flush decisions (DP5: registered, FLUSH two cycles after the decision,
// cause by §4.4's priority full, raw, pressure, deadline, drain) and §7's write-drain window
// with DP1's visibility (docs/timing-contract.md; model/controller/write_buffer.py
// wb_triggers, _flush, _pressure, _drain_fsm).
#include <algorithm>

#include "controller/stack_controller.hpp"

namespace hbf {

// Apply the flush decisions of t - 1 (FLUSH from t + 1), then take those of t from the
// start-of-t state (DP5), cause by §4.4's priority.
bool StackController::wb_triggers_work(int64_t t, bool drain) {
    bool changed = false;
    if (!decided_.empty()) {
        for (int idx : decided_) flush(wb[idx], wb[idx].cause);   // decided in t - 1
        decided_.clear();
        changed = true;
    }
    bool dl_due = !wb_deadlines.empty() && std::get<0>(wb_deadlines.top()) <= t;
    if (full_pending.empty() && raw_.empty() && pressure_now.empty() && !dl_due
            && !(drain && !wb_open.empty())) {
        dp5_items_ = 0;
        return changed;
    }
    // §4.4's priority: full, raw, pressure, deadline, drain (the first cause found wins)
    // the decisions of t in the order found (the model's insertion-ordered dict); an entry
    // keeps the first cause found for it
    std::vector<Cause> causes;
    std::vector<int> order;
    auto pend = [&](Entry& e, Cause c) {
        if (std::find(order.begin(), order.end(), e.idx) != order.end()) return;
        order.push_back(e.idx);
        causes.push_back(c);
    };
    if (!full_pending.empty()) {
        std::vector<int> keep;
        for (int idx : full_pending) {
            Entry& e = wb[idx];
            if (e.state != OPEN || e.cause != NO_CAUSE) continue;
            if (e.full_at <= t) pend(e, CAUSE_FULL);
            else keep.push_back(idx);
        }
        full_pending.swap(keep);
    }
    for (int idx : raw_) {
        Entry& e = wb[idx];
        if (e.state == OPEN && e.cause == NO_CAUSE) pend(e, CAUSE_RAW);
    }
    for (int idx : pressure_now) {                         // one per pool (§4.5 B3)
        Entry& e = wb[idx];
        if (e.state == OPEN && e.cause == NO_CAUSE) pend(e, CAUSE_PRESSURE);
    }
    raw_.clear();
    pressure_now.clear();
    while (!wb_deadlines.empty() && std::get<0>(wb_deadlines.top()) <= t) {
        auto [tick, alloc, idx] = wb_deadlines.top();
        wb_deadlines.pop();
        Entry& e = wb[idx];
        if (e.state == OPEN && e.alloc == alloc && e.cause == NO_CAUSE && t >= e.deadline)
            pend(e, CAUSE_DEADLINE);
    }
    if (drain) {
        for (auto& [seq, idx] : wb_open_order) {
            Entry& e = wb[idx];
            if (e.cause == NO_CAUSE && e.alloc <= t - W_DELAY) pend(e, CAUSE_DRAIN);
        }
    }
    for (size_t i = 0; i < order.size(); ++i) {
        wb[order[i]].cause = causes[i];   // pending: OPEN through t + 1, FLUSH from t + 2
        decided_.push_back(order[i]);
        changed = true;
    }
    dp5_items_ = static_cast<int64_t>(decided_.size() + full_pending.size());
    return changed;
}

// OPEN -> FLUSH with its cause (model/controller/write_buffer.py _flush); counted now.
void StackController::flush(Entry& e, Cause cause) {
    e.state = FLUSH;
    e.cause = cause;
    wb_open.erase(e.q);
    wb_open_order.erase(e.open_seq);
    wb_flush.push_back(e.idx);
    ++st.flushes[cause];
}

// §7's write-drain window with DP1's visibility: entries allocated in t - 1 are still in W
// and not yet counted among the occupied entries (reading 10).
bool StackController::drain_fsm(int64_t t) {
    if (wb_alloc_t == t - 1 && !drain_open) {
        wb_used -= wb_alloc_k;
        bool r = drain_fsm_base(t);
        wb_used += wb_alloc_k;
        return r;
    }
    return drain_fsm_base(t);
}

// model/controller/write_buffer.py _drain_fsm: closed -> open at the high water with a PROGRAM queued after
// the cooldown; open -> closed with no PROGRAM queued or at the window's end.
bool StackController::drain_fsm_base(int64_t t) {
    if (!drain_open) {
        if (wb_used >= cfg.drain_high_water && queued_programs && t >= drain_cooldown) {
            drain_open = true;
            drain_start = t;
            for (int64_t ch = 0; ch < C; ++ch)
                if (!queue[ch].empty()) add_issue_check(ch);
            return true;
        }
    } else if (queued_programs == 0 || t >= drain_start + cfg.drain_window) {
        drain_open = false;
        drain_cooldown = t + cfg.drain_window;
        for (int64_t ch = 0; ch < C; ++ch)
            if (!queue[ch].empty()) add_issue_check(ch);
        return true;
    }
    return false;
}

}  // namespace hbf
