// The enqueue stage: strict errors (§4.4 W3), the write buffer's registered eligibility and
// offer registers O_c (DP3), the aggregation candidates and OR_c (DP2a), DP2's offer queues,
// and per channel the arbiter: the MSHR candidate first, else O_c (§6)
// (docs/timing-contract.md; model/controller/enqueue.py enqueue, _enqueue_one).
#include <algorithm>

#include "controller/stack_controller.hpp"
#include "mutants.hpp"

namespace hbf {

bool StackController::enqueue_work(int64_t t) {
    bool changed = false;
    // per channel the write-buffer candidates of t, in wb_flush order
    auto& cands = cands_;
    cands.clear();
    if (!wb_flush.empty()) {
        auto& keep = keep_;
        keep.clear();
        for (int idx : wb_flush) {
            Entry& e = wb[idx];
            if (e.te < 0) {
                if (e.w_merge == t - 1 && !mutant(CTRL_STRICT_IN_W)) {
                    // DP5: a merge in W: neither eligible nor errored in t
                    keep.push_back(idx);
                    wake_at(t + 1);
                    continue;
                }
                if (e.cov_count != PAGE_BYTES && cfg.strict) {
                    e.state = RETURN;                      // §4.4 W3, RETURN from t + 1
                    e.flags = FLAG_ERROR;
                    e.tc = t;
                    ++st.strict_errors;
                    ret_w.push(e.idx);
                    changed = true;
                    continue;
                }
                if (e.w_merge == t - 1) {                  // (mutant only: in W, not errored)
                    keep.push_back(idx);
                    wake_at(t + 1);
                    continue;
                }
                auto& lst = wb_page[e.q];
                if (lst.front() == e.idx && !mshr_page.contains(e.q)) {
                    e.te = t;                              // eligible: a candidate from t + 1
                    changed = true;
                }
            } else if (e.te < t) {
                cands.emplace_back(e.ch, idx);
                add_busy_ch(e.ch);
            }
            keep.push_back(idx);
        }
        wb_flush.swap(keep);
    }
    bool agg = !cfg.demand;
    if (agg) {
        while (!agg_timer.empty() && std::get<0>(agg_timer.top()) < t) {
            auto [ready_at, idx, alloc] = agg_timer.top();   // ready in t - 1 or before
            agg_timer.pop();
            Entry& e = mshr[idx];
            if (e.state == WAIT && e.alloc == alloc && e.ready_at == ready_at) {
                agg_cand[e.ch].push(static_cast<int>(idx));
                add_busy_ch(e.ch);
            }
        }
    }
    for (uint64_t chs = busy_ch_set; chs; chs &= chs - 1) {
        int64_t ch = lowest(chs);
        int head = -1;
        if (agg) {
            head = offer_r[ch];
        } else if (!offer_q[ch].empty()) {
            head = offer_q[ch].front();
            if (mshr[head].ready_at > t) head = -1;        // still in W (DP2)
        }
        int held = offer_wb[ch];
        bool took_r = false, took_held = false;
        int64_t occ = static_cast<int64_t>(queue[ch].size())
                      + (issued_at[ch] == t ? issued_k[ch] : 0);
        if (occ < cfg.queue_depth) {
            if (head >= 0) {
                if (agg) offer_r[ch] = -1;
                else offer_q[ch].pop_front();
                enqueue_one(mshr[head], t);
                took_r = changed = true;
            } else if (held >= 0) {
                wb_flush.erase(std::find(wb_flush.begin(), wb_flush.end(), held));
                enqueue_one(wb[held], t);
                took_held = changed = true;
            }
        }
        if (agg && (head < 0 || took_r) && !agg_cand[ch].empty()) {
            // OR_c takes the lowest-index candidate (DP2a); its own entry left the heap
            offer_r[ch] = agg_cand[ch].top();
            agg_cand[ch].pop();
            changed = true;
        }
        if (held < 0 || took_held) {
            // O_c takes the lowest-index candidate other than its own (DP3)
            int best = -1;
            for (auto& [c, idx] : cands)
                if (c == ch && idx != held && (best < 0 || idx < best)) best = idx;
            if (best != held) {
                offer_wb[ch] = best;
                changed = true;
            }
        }
        if (offer_q[ch].empty() && offer_r[ch] < 0 && offer_wb[ch] < 0 && agg_cand[ch].empty())
            busy_ch_set &= ~bit(ch);
    }
    return changed;
}

// Put e into its channel's queue in t (§6).
void StackController::enqueue_one(Entry& e, int64_t t) {
    int64_t ch = e.ch;
    if (e.kind == 0) {
        agg_wait += t - e.alloc - W_DELAY;                 // reading 9
    } else {
        ++queued_programs;
        if (e.cov_count != PAGE_BYTES) {
            ++st.partial_programs;
            st.padding_bytes += PAGE_BYTES - e.cov_count;
        }
    }
    e.state = QUEUED;
    e.tq = t;
    queue[ch].push_back(e.kind == 0 ? e.idx : ~e.idx);
    e.depth = static_cast<int64_t>(queue[ch].size());
    add_issue_check(ch);
}

}  // namespace hbf
