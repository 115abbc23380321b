// Media completions into the entries: a write-buffer entry completed in t is in RETURN from
// t + 1 (§4.4), an MSHR entry completed in tc from tc + 2 (DP6), applied in tc + 1 after
// that cycle's dispatch; a multi-plane command completes each entry of its group so (MP7);
// the model-only page cache (R4) (docs/timing-contract.md; model/controller/completion.py
// complete_entries, _complete_tag, _write_done, _read_done).
#include "controller/stack_controller.hpp"
#include "mutants.hpp"

namespace hbf {

bool StackController::complete_entries_work(int64_t t) {
    bool changed = false;
    while (!late_.empty() && late_.front().at <= t) {
        Late l = late_.front();
        late_.pop_front();
        read_done(mshr[l.idx], l.tc, l.flags);
        changed = true;
    }
    for (auto& d : delivered) {
        if (d.is_group) {
            for (size_t i = 0; i < d.tags.size(); ++i) complete_tag(t, d.tags[i], d.group_flags[i]);
        } else {
            complete_tag(t, d.tag, d.flags);
        }
        changed = true;
    }
    delivered.clear();
    while (!cache_due.empty() && cache_due.top().first <= t) {
        auto [tc, idx] = cache_due.top();
        cache_due.pop();
        late_.push_back({t + 1, static_cast<int>(idx), tc, 0});   // reading 7
        wake_at(t + 1);
        changed = true;
    }
    return changed;
}

// The completion of operation `tag` delivered in t: a write-buffer entry now, an MSHR entry
// in t + 1 (DP6).
void StackController::complete_tag(int64_t t, int64_t tag, int64_t flags) {
    if (tag & 1) {
        cpl_entry(t, tag, flags);
    } else if (mutant(CTRL_RETURN_TC_PLUS1)) {
        read_done(mshr[tag >> 1], t, flags);
    } else {
        late_.push_back({t + 1, static_cast<int>(tag >> 1), t, flags});
        wake_at(t + 1);
    }
}

// A write-buffer entry's completion delivered in t: RETURN from t + 1.
void StackController::cpl_entry(int64_t t, int64_t tag, int64_t flags) {
    Entry& e = wb[tag >> 1];
    e.state = RETURN;
    e.tc = t;
    e.flags = flags;
    if (!(flags & FLAG_ERROR)) ++st.page_programs_ok;
    else ++st.media_errors;
    if (cfg.page_cache_pages) {
        auto it = pc_map.find(e.q);
        if (it != pc_map.end()) {
            pc_order.erase(it->second);
            pc_map.erase(it);
        }
    }
    ret_w.push(e.idx);
}

// An MSHR entry's completion of tc: RETURN, no longer mergeable nor blocking a write of its
// page; the page enters the page cache (R4).
void StackController::read_done(Entry& e, int64_t tc, int64_t flags) {
    e.state = RETURN;
    e.tc = tc;
    e.flags = flags;
    PageReads* pg = mshr_page.find(e.q);
    if (pg->open == e.idx) pg->open = -1;                 // no longer mergeable
    if (--pg->pend == 0) mshr_page.erase(e.q);
    if (cfg.page_cache_pages && !e.cache) {
        auto pc = pc_map.find(e.q);
        if (pc != pc_map.end()) {
            pc_order.splice(pc_order.end(), pc_order, pc->second);
        } else {
            pc_order.push_back(e.q);
            pc_map[e.q] = std::prev(pc_order.end());
            if (static_cast<int64_t>(pc_order.size()) > cfg.page_cache_pages) {
                pc_map.erase(pc_order.front());
                pc_order.pop_front();
            }
        }
    }
    ret_r.push(e.idx);
}

}  // namespace hbf
