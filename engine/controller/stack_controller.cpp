// The stack controller's state and the end of its cycle: construction, DP4's frees and the
// admission releases, and the timers of event skipping (C3) (docs/timing-contract.md;
// model/controller/stack_controller.py __init__, end_cycle, next_timer).
#include "controller/stack_controller.hpp"

#include <stdexcept>
#include <string>

#include "controller/megaplane.hpp"

namespace hbf {

StackController::StackController(const ControllerConfig& c, const MediaConfig& mcfg, int stack,
                                 ReqTable& requests)
    : cfg(c), stack(stack), C(c.channels), P(c.ports), reqs(requests), media(mcfg), inp(c.ports),
      ch_requests(c.channels, 0), ch_ops(c.channels, 0), ch_link_stall(c.channels, 0),
      total_cap(c.active_total ? c.active_total : int64_t(1) << 30),
      link(c.link_byte_cost, c.link_gain, c.channels) {
    if (C > 64 || P > 64)
        throw std::invalid_argument("the compiled controller takes at most 64 channels, not "
                                    + std::to_string(C));
    if (cfg.pools < 1 || cfg.mshr_entries % cfg.pools || cfg.write_buffer_entries % cfg.pools)
        throw std::invalid_argument("the pools must split the MSHR and write-buffer entries "
                                    "evenly (docs/timing-contract.md §4.5)");
    mshr_k = cfg.mshr_entries / cfg.pools;
    wb_k = cfg.write_buffer_entries / cfg.pools;
    mshr_free.resize(cfg.pools);
    wb_free.resize(cfg.pools);
    pressure_live.assign(cfg.pools, 0);
    mshr.resize(cfg.mshr_entries);
    for (int i = 0; i < static_cast<int>(mshr.size()); ++i) {
        mshr[i].kind = 0;
        mshr[i].idx = i;
        mshr_free[i / mshr_k].push_back(i);
    }
    wb.resize(cfg.write_buffer_entries);
    for (int i = 0; i < static_cast<int>(wb.size()); ++i) {
        wb[i].kind = 1;
        wb[i].idx = i;
        wb_free[i / wb_k].push_back(i);
    }
    for (int64_t p = 0; p < P; ++p) inp[p].index = p;
    offer_q.resize(C);
    offer_r.assign(C, -1);
    offer_wb.assign(C, -1);
    agg_cand.resize(C);
    queue.resize(C);
    busy.assign(C, std::vector<char>(cfg.subarrays_per_channel, 0));
    active.assign(C, 0);
    issued_at.assign(C, -1);
    issued_k.assign(C, 1);
    if (cfg.multiplane != Multiplane::Off) mp = std::make_unique<Megaplanes>(*this);
    // the page-keyed tables hold at most one key per entry: no rehash while running
    mshr_page.reserve(mshr.size());
    wb_open.reserve(wb.size());
    wb_page.reserve(wb.size());
}

StackController::~StackController() = default;

// The frees of this cycle (its admission releases are end_cycle's, inline: one in most
// cycles of a saturated stream, where a call for them cost more than the work); a freed
// entry joins its pool's free list at the tail (DP4), allocatable from the next cycle, in
// the order the ports launched.
void StackController::end_cycle_work(int64_t t) {
    // delayed effects that have landed: next_timer drops them too (the heap stays small)
    while (!wake.empty() && wake.top() <= t) wake.pop();
    for (int idx : free_r) {
        mshr[idx].state = FREE;
        mshr[idx].waiters.clear();
        mshr_free[idx / mshr_k].push_back(idx);
    }
    free_r.clear();
    for (int idx : free_w) {
        Entry& e = wb[idx];
        e.state = FREE;
        auto it = wb_page.find(e.q);
        auto& lst = it->second;
        for (size_t i = 0; i < lst.size(); ++i)
            if (lst[i] == idx) { lst.erase(lst.begin() + i); break; }
        if (lst.empty()) wb_page.erase(it);
        if (e.pressure) pressure_live[idx / wb_k] = 0;
        e.waiters.clear();
        --wb_used;
        wb_free[idx / wb_k].push_back(idx);
    }
    free_w.clear();
}

// The earliest future tick at which a time-driven condition can change state (model/controller/stack_controller.py
// next_timer, the gather window of megaplane.py, and every delayed effect of DP1-DP6).
int64_t StackController::next_timer(int64_t t) {
    int64_t n = -1;
    auto take = [&n](int64_t v) { if (n < 0 || v < n) n = v; };
    if (media.has_due()) take(media.next_due());
    if (!wb_deadlines.empty()) take(std::get<0>(wb_deadlines.top()));
    if (!cache_due.empty()) take(cache_due.top().first);
    if (credit_wait >= 0) take(credit_wait);
    if (cfg.scheduler == Scheduler::WriteDrain) {
        if (drain_open && queued_programs)
            take(drain_start + cfg.drain_window);
        else if (!drain_open && wb_used >= cfg.drain_high_water && queued_programs)
            take(drain_cooldown);
    }
    if (n >= 0 && n < t + 1) n = t + 1;
    if (mp) {
        int64_t w = mp->next_wake();
        if (w >= 0) {
            if (w < t + 1) w = t + 1;
            if (n < 0 || w < n) n = w;
        }
    }
    while (!wake.empty() && wake.top() <= t) wake.pop();
    if (!wake.empty() && (n < 0 || wake.top() < n)) n = wake.top();
    return n;
}

}  // namespace hbf
