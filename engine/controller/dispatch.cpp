// DP1 dispatch from M with W's write seen a cycle later, §4.2's read and write rules, DP4's
// free lists with one head per allocating port and §4.2.4's reads-before-writes order
// (docs/timing-contract.md; model/controller/dispatch.py dispatch, _dispatch_one,
// _agg_ready, _new_read_entry, _new_write_entry; write_buffer.py _pressure).
#include <algorithm>

#include "controller/stack_controller.hpp"
#include "mutants.hpp"

namespace hbf {

// Every port's M decides in cycle t by §4.2 from M's view (DP1): the reads first, then the
// writes (§4.2.4), each kind's ports in order from its pool's pointer (§4.2.3: the k-th
// allocating port takes the k-th head of the free list). With a pool per channel (§4.5)
// each port allocates from its own pool, no pointer, the ports in ascending order (B4).
bool StackController::dispatch_work(int64_t t, bool /*drain*/) {
    if (P == 1) {
        Port& port = inp[0];
        return port.m >= 0 && dispatch_one(port, t);
    }
    // the ports holding each kind at the start of the phase: a port's M only empties here
    // (its Q head moves in later, phase 4), so a port holds the kind it held or nothing
    uint64_t reads = m_set & ~m_write_set, writes = m_write_set;
    bool changed = false;
    bool wf = mutant(CTRL_WRITES_FIRST);
    for (int k = 0; k < 2; ++k) {
        int8_t kind = (k == 0) != wf ? OP_R : OP_W;
        bool read = kind == OP_R;
        uint64_t held = read ? reads : writes;
        if (!held) continue;
        if (cfg.pools > 1) {
            for (; held; held &= held - 1) changed |= dispatch_one(inp[lowest(held)], t);
            continue;
        }
        int64_t ap = read ? ap_r : ap_w;
        auto& free = read ? mshr_free[0] : wb_free[0];
        int64_t last = -1;
        // the ports from the pool's pointer on: ap .. P - 1, then 0 .. ap - 1
        uint64_t from_ap = ~uint64_t{0} << ap;
        for (uint64_t part : {held & from_ap, held & ~from_ap}) {
            for (; part; part &= part - 1) {
                int64_t p = lowest(part);
                size_t n_free = free.size();
                changed |= dispatch_one(inp[p], t);
                if (free.size() < n_free) last = p;
            }
        }
        if (last >= 0) (read ? ap_r : ap_w) = last + 1 == P ? 0 : last + 1;
    }
    return changed;
}

// M of `port` in cycle t (§4.2, DP1); W's write is seen by every other rule from t + 2.
bool StackController::dispatch_one(Port& port, int64_t t) {
    Req& m = reqs[port.m];
    if (m.t_accept >= t) return false;
    int64_t q = m.q;
    m.t_map = t;
    if (m.op == OP_R) {
        auto wp = wb_page.empty() ? wb_page.end() : wb_page.find(q);   // no writes held: no lookup
        if (wp != wb_page.end() && !wp->second.empty()) {
            // read-after-write ordering: stall (§4.2 read step 1); DP5 raw only for an entry
            // OPEN for the decisions with none pending (reading 1)
            auto o = wb_open.find(q);
            if (o != wb_open.end()) {
                Entry& oe = wb[o->second];
                if (oe.cause == NO_CAUSE && oe.alloc <= t - W_DELAY
                        && std::find(raw_.begin(), raw_.end(), oe.idx) == raw_.end()) {
                    raw_.push_back(oe.idx);
                    ++dp5_items_;
                    ++st.raw_events;
                    return true;
                }
            }
            return false;
        }
        int ei = -1;
        PageReads* pg = mshr_page.find(q);
        if (cfg.mshr_merge) {
            if (pg) ei = pg->open;
            if (ei >= 0 && mutant(CTRL_W_FORWARD_OFF) && mshr[ei].alloc == t - 1) ei = -1;
        }
        if (ei >= 0) {
            Entry& e = mshr[ei];
            m.mshr_hit = true;
            e.waiters.push_back(port.m);
            e.bytes += m.nbytes;
            ++mshr_hits;
            if (!cfg.demand && e.state == WAIT && e.bytes >= cfg.agg_threshold
                    && t + W_DELAY < e.ready_at)
                agg_ready(e, t + W_DELAY);                  // DP2a, reading 11
        } else {
            int64_t pool = mutant(CTRL_POOL_FIRST) ? 0 : m.ch % cfg.pools;
            auto& free = mshr_free[pool];                  // the read channel's (§4.5 B2)
            if (free.empty()) return false;
            Entry& e = mshr[free.front()];                 // DP4: the next head
            free.pop_front();
            new_read_entry(e, m, t);
            e.waiters.push_back(port.m);
            if (!pg) pg = &mshr_page.insert(q);
            if (cfg.mshr_merge) pg->open = e.idx;
            ++pg->pend;
            auto pc = cfg.page_cache_pages ? pc_map.find(q) : pc_map.end();
            if (pc != pc_map.end()) {
                pc_order.splice(pc_order.end(), pc_order, pc->second);   // move to end
                e.state = ISSUED;
                e.cache = true;
                e.tq = e.ti = t;
                ++st.page_cache_hits;
                cache_due.emplace(t + cfg.cache_hit_ticks, e.idx);
            } else if (cfg.demand) {
                // DP2: joins its channel's offer queue at the end of t + 1 (W's write)
                e.state = WAIT;
                e.ready_at = t + W_DELAY;
                offer_q[e.ch].push_back(e.idx);
                add_busy_ch(e.ch);
                wake_at(t + W_DELAY);
            } else {
                // DP2a: ready by its bytes from t + 2, else by the window (reading 11)
                e.state = WAIT;
                int64_t window = cfg.agg_window + (mutant(CTRL_AGG_WINDOW_PLUS1) ? 1 : 0);
                agg_ready(e, e.bytes >= cfg.agg_threshold ? t + W_DELAY
                                                          : t + std::max(window, W_DELAY));
            }
        }
    } else {
        auto it = wb_open.find(q);
        Entry* ep;
        if (it == wb_open.end()) {
            int64_t pool = m.ch % cfg.pools;               // the write channel's (§4.5 B2)
            auto& free = wb_free[pool];
            if (free.empty()) return pressure(t, pool);
            Entry& e = wb[free.front()];                   // DP4: the next head
            free.pop_front();
            new_write_entry(e, m, t);
            e.w_merge = -1;
            e.te = -1;
            e.open_seq = open_seq++;
            wb_open[q] = e.idx;
            wb_open_order[e.open_seq] = e.idx;
            wb_page[q].push_back(e.idx);
            ++wb_used;
            if (wb_alloc_t == t) {
                ++wb_alloc_k;
            } else {
                wb_alloc_t = t;
                wb_alloc_k = 1;
            }
            // DP5: OPEN for the decisions (deadline, drain, raw, victim) from t + 2
            wb_deadlines.emplace(std::max(e.deadline, t + W_DELAY), t, e.idx);
            wake_at(t + W_DELAY);
            ep = &e;
        } else {
            ep = &wb[it->second];
            ep->w_merge = t;                               // in W during t + 1 (DP3, DP5)
            wake_at(t + W_DELAY);
        }
        Entry& e = *ep;
        e.waiters.push_back(port.m);
        bool was_full = e.cov_count == PAGE_BYTES;
        int64_t added = e.cov.cover(m.off, m.nbytes);
        e.cov_count += added;
        st.coverage_new_bytes += added;
        if (e.cov_count == PAGE_BYTES && !was_full) {
            e.full_at = t + W_DELAY;                       // DP5 full: merges up to t - 2
            full_pending.push_back(e.idx);
            ++dp5_items_;
        }
    }
    port.m = -1;
    int64_t p = port_index(port);
    m_set &= ~bit(p);
    m_write_set &= ~bit(p);
    return true;
}

// DP2a: entry e is ready from ready_at (reading 11), a candidate for OR_c from ready_at + 1.
void StackController::agg_ready(Entry& e, int64_t ready_at) {
    e.ready_at = ready_at;
    agg_timer.emplace(ready_at, e.idx, e.alloc);
    wake_at(ready_at + 1);
}

// A write stalls for want of a free entry of `pool` in t: DP5's pressure victim is the pool's
// oldest entry OPEN at the start of t (reading 3, §4.5 B3); one per pool and cycle, and none
// while a victim of the pool is pending.
bool StackController::pressure(int64_t t, int64_t pool) {
    if (pressure_live[pool]) return false;
    auto it = wb_open_order.begin();
    if (cfg.pools > 1 && !mutant(CTRL_POOL_VICTIM_ANY))
        while (it != wb_open_order.end() && it->second / wb_k != pool) ++it;
    if (it == wb_open_order.end()) return false;
    if (mutant(CTRL_VICTIM_TIE_REVERSED)) {
        auto nx = std::next(it);
        if (nx != wb_open_order.end() && wb[nx->second].alloc == wb[it->second].alloc) it = nx;
    }
    Entry& o = wb[it->second];                             // smallest alloc (M's view)
    if (o.alloc > t - W_DELAY) return false;               // still in W
    o.pressure = true;
    pressure_live[pool] = 1;
    if (o.cause == NO_CAUSE) {
        pressure_now.push_back(o.idx);                     // decided in wb_triggers of t
        ++dp5_items_;
    }
    return true;
}

// Fill MSHR entry e, allocated in t for read m (§4.2 read step 3); the caller sets its
// state and readiness and appends m as its first waiter.
void StackController::new_read_entry(Entry& e, const Req& m, int64_t t) {
    e.q = m.q;
    e.ch = m.ch;
    e.sub = m.sub;
    e.local = m.local;
    e.waiters.clear();
    e.bytes = m.nbytes;
    e.alloc = t;
    e.flags = 0;
    e.cache = false;
    e.tq = e.ti = e.tc = -1;
    e.depth = 0;
}

// Fill write-buffer entry e, allocated OPEN in t for write m (§4.2 write step 2, W1); the
// caller merges m into it.
void StackController::new_write_entry(Entry& e, const Req& m, int64_t t) {
    e.q = m.q;
    e.ch = m.ch;
    e.sub = m.sub;
    e.local = m.local;
    e.state = OPEN;
    e.waiters.clear();
    e.cov.clear();
    e.cov_count = 0;
    e.alloc = t;
    e.deadline = t + cfg.write_deadline;
    e.cause = NO_CAUSE;
    e.pressure = false;
    e.full_at = -1;
    e.flags = 0;
    e.tq = e.ti = e.tc = -1;
    e.depth = 0;
}

}  // namespace hbf
