// The HBF stack controller under the one timing contract, the registered pipeline
// (docs/timing-contract.md, DP1-DP7, MP1-MP9), P request/response ports per stack: the C++
// mirror of model/controller/stack_controller.py's StackController (its stage mixins in
// model/controller/*.py). The class's state is declared
// here; its phases are defined one stage per file, as the golden model's package splits
// them (ingress.cpp, dispatch.cpp, write_buffer.cpp, enqueue.cpp, issue.cpp,
// completion.cpp, response.cpp; stack_controller.cpp: construction, end of cycle, the
// timers). engine/system.cpp steps them in §16's order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "../fifo.hpp"
#include "../min_heap.hpp"
#include "../page_map.hpp"
#include "../slot_table.hpp"

#include "controller/link.hpp"
#include "mapping.hpp"
#include "media.hpp"

namespace hbf {

// Entry states (contract §4.3, §4.4; model/controller/request.py's FREE .. FLUSH).
enum EntryState : int8_t { FREE, WAIT, QUEUED, ISSUED, RETURN, OPEN, FLUSH };
// Flush causes in §4.4's priority order (model/controller/request.py CAUSES); -1 = no decision.
enum Cause : int8_t { NO_CAUSE = -1, CAUSE_FULL, CAUSE_RAW, CAUSE_PRESSURE, CAUSE_DEADLINE,
                      CAUSE_DRAIN, N_CAUSES };
// Cycles from M's decision to the cycle every rule but M sees it (DP1).
constexpr int64_t W_DELAY = 2;
// Entries of a port's ingress queue Q and egress queue E (§4.1, §8).
constexpr size_t INGRESS_DEPTH = 2, EGRESS_DEPTH = 2;
// DP7's tables, in R's priority order.
constexpr int MSHR_T = 0, WB_T = 1;

enum class Scheduler { Fcfs, ReadPriority, WriteDrain };
enum class Multiplane { Off, Page, Megaplane };

// What the controller needs of HbfConfig (binding.cpp reads it).
struct ControllerConfig {
    int64_t channels, ports;                   // C; P = C (channel shape) or 1 (stack)
    int64_t pools;                             // 1 (pools = stack) or C (pools = channel, §4.5)
    int64_t admission, mshr_entries, write_buffer_entries;
    bool mshr_merge, demand, strict;
    int64_t agg_window, agg_threshold, write_deadline;
    int64_t queue_depth, active_per_channel, active_total;
    Scheduler scheduler;
    int64_t drain_high_water, drain_window;
    int64_t page_cache_pages, cache_hit_ticks;
    int64_t link_byte_cost, link_gain;
    Multiplane multiplane;
    int64_t megaplane_planes, subarrays_per_channel, hyperpage_window;
};

// One request and what happened to it (model/controller/request.py Request): the per-request
// outputs. Written when the system accepts the request, in a slot of the ReqTable, and by
// the stages it passes (System::take says which fields wait for them); `seq` is its number
// in submission order (the outputs' row). Two cache lines, aligned: K prefetches
// both (response.cpp); sizes and offsets are at most a page (checked at submission).
struct alignas(64) Req {
    int64_t seq, id, arrival, addr, q, local;
    int64_t t_accept = -1, t_map = -1, t_done = -1;
    int64_t tq = -1, ti = -1, tc = -1;           // entry_info: the entry's tq, ti, tc
    int32_t stack, ch, sub;
    int32_t depth = 0;                           // requests inside the stack at its accept
    int32_t edepth = 0;                          // entry_info: the entry's queue depth
    int32_t source = 0;                          // the trace's source (a GPU sub-partition)
    int16_t nbytes, off;
    int8_t op;
    bool mshr_hit : 1, buffer_hit : 1, cache_hit : 1, error : 1;
    Req() : mshr_hit(false), buffer_hit(false), cache_hit(false), error(false) {}
};
static_assert(sizeof(Req) == 128, "a request record is two cache lines");

// The requests inside the system, by slot (engine/slot_table.hpp).
using ReqTable = SlotTable<Req>;

// An entry's waiters, request slots in list order: the first eight in the entry itself,
// the others in a vector (make bench's read stream merges eight sector reads per page),
// so that R and K read a waiter from the entry's own cache lines and a merge appends one
// without a call (a std::vector kept them in heap memory of its own, its push_back out of
// line).
class Waiters {
public:
    size_t size() const { return n_; }
    int64_t operator[](size_t i) const { return i < K ? in_[i] : more_[i - K]; }
    void push_back(int64_t r) {
        if (n_ < K) in_[n_] = r;
        else more_.push_back(r);
        ++n_;
    }
    void clear() {
        n_ = 0;
        more_.clear();
    }

private:
    static constexpr size_t K = 8;
    int64_t in_[K] = {};
    size_t n_ = 0;
    std::vector<int64_t> more_;
};

// A write-buffer entry's coverage (model/controller/request.py Entry.cov): one bit per byte
// of the page (512 bytes), set by the merged writes; `cover` sets a byte range a 64-bit word
// at a time and returns how many of its bytes were new.
class Coverage {
public:
    void clear() { w_.fill(0); }
    int64_t cover(int64_t off, int64_t n) {
        int64_t added = 0;
        for (int64_t b = off, end = off + n; b < end;) {
            int64_t k = b >> 6, lo = b & 63, hi = std::min<int64_t>(64, lo + (end - b));
            uint64_t mask = (hi - lo == 64 ? ~uint64_t{0} : ((uint64_t{1} << (hi - lo)) - 1))
                            << lo;
            added += __builtin_popcountll(mask & ~w_[k]);
            w_[k] |= mask;
            b += hi - lo;
        }
        return added;
    }

private:
    std::array<uint64_t, PAGE_BYTES / 64> w_{};
};

// One MSHR (kind 0) or write-buffer (kind 1) entry (model/controller/request.py Entry).
// The write coverage (written by writes only) comes last, so that the fields every entry
// reads lie together in its first cache lines.
struct Entry {
    int kind = 0, idx = 0;
    EntryState state = FREE;
    int64_t q = 0, ch = 0, sub = 0, local = 0;
    Waiters waiters;                            // request slots, in list order
    int64_t bytes = 0, alloc = 0, ready_at = 0, deadline = 0;
    int64_t cov_count = 0;
    Cause cause = NO_CAUSE;
    int64_t tq = -1, ti = -1, tc = -1, flags = 0, full_at = -1, depth = 0;
    bool pressure = false, cache = false;
    int64_t w_merge = -1, te = -1;              // DP3, DP5 (write buffer)
    int64_t open_seq = 0;                       // wb_open's insertion order
    Coverage cov;                               // write coverage
};

// A queue of at most N entries (Q and E hold two, §4.1, §8): a ring in the port itself, no
// heap memory; a push beyond N is an engine error (the stages check the room first).
template <class T, size_t N>
class Ring {
public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    const T& front() const { return v_[head_]; }
    void push_back(const T& x) {
        if (n_ == N) throw std::logic_error("internal: a port queue of " + std::to_string(N)
                                            + " entries overflowed");
        v_[(head_ + n_) % N] = x;
        ++n_;
    }
    void pop_front() {
        head_ = (head_ + 1) % N;
        --n_;
    }

private:
    T v_[N] = {};
    size_t head_ = 0, n_ = 0;
};

// A set of ports or channels of one stack (at most 64 of each: HbfConfig's limit) as bits,
// so that a stage visits only the members, in ascending order (not model: the golden model
// scans its lists; the order of the visits is the same).
inline uint64_t bit(int64_t i) { return uint64_t{1} << i; }
inline int64_t lowest(uint64_t set) { return __builtin_ctzll(set); }
inline int64_t highest(uint64_t set) { return 63 - __builtin_clzll(set); }

// One request port and its response port (model/controller/ports.py Port).
struct Port {
    Ring<std::pair<int64_t, int64_t>, INGRESS_DEPTH> qin;   // Q: (request, accept cycle)
    int64_t m = -1;                                // M: a request or -1
    MinHeap<int> ret[2];
    int c1[2] = {-1, -1}, c2[2] = {-1, -1};
    int cur_e[2] = {-1, -1}, cur_i[2] = {0, 0};    // the drain cursor: (entry, next waiter)
    // R and K: (entry code, waiter index); entry codes as StackController::entry
    bool r_has = false, k_has = false;
    int r_e = 0, r_i = 0, k_e = 0, k_i = 0;
    Ring<int64_t, EGRESS_DEPTH> egress;            // E: launched responses
    int64_t hs_t = -1, blocked = -1;
    int64_t index = 0;                             // p: the port's place in `inp`
    bool idle() const {
        return c1[0] < 0 && c1[1] < 0 && c2[0] < 0 && c2[1] < 0 && cur_e[0] < 0
               && cur_e[1] < 0 && ret[0].empty() && ret[1].empty();
    }
};

// Counters the system sums into the statistics (model/stats.py's st Counter).
struct StackCounters {
    int64_t page_cache_hits = 0, raw_events = 0, flushes[N_CAUSES] = {0, 0, 0, 0, 0};
    int64_t partial_programs = 0, padding_bytes = 0, strict_errors = 0, media_errors = 0;
    int64_t coverage_new_bytes = 0, page_programs_ok = 0;
};

class Megaplanes;

class StackController {
public:
    StackController(const ControllerConfig& cfg, const MediaConfig& mcfg, int stack,
                    ReqTable& reqs);
    ~StackController();

    // The stages, in the files named. A stage that has nothing to do in most cycles is
    // called through an inline test of its own pending work and timers (what its first
    // lines would find): an idle stage costs a few compares, not a call; the stage itself
    // is `<stage>_work` in its file, unchanged.
    // ---- ingress.cpp (§4.1, Q, M)
    bool ready() const;                            // stack shape (P = 1)
    bool ready_port(int64_t p, int64_t t, int64_t free) const;
    bool admits_none(int64_t free) const;          // no ready_port(p, t, free) is true
    bool admits_by_count() const;
    int64_t rank_tick(int64_t t, int64_t p) const;   // -1: none
    // Accept request r on `port` in cycle t; it is in that port's Q from t + 1. The
    // admission slot is the stack's (one count for all ports). Inline: the system's ingress
    // calls it once per request.
    void accept(int64_t r, int64_t t, int64_t port) {
        reqs[r].depth = static_cast<int32_t>(inflight);
        ++inflight;
        inp[port].qin.push_back({r, t});
        qin_set |= bit(port);
    }
    bool advance(int64_t t) {                      // a Q head with its M free
        return (qin_set & ~m_set) != 0 && advance_work(t);
    }
    bool holds_requests() const;
    // ---- dispatch.cpp (DP1, §4.2, DP4 allocation)
    bool dispatch(int64_t t, bool drain) {         // some M holds a request
        return m_set != 0 && dispatch_work(t, drain);
    }
    // ---- write_buffer.cpp (DP5)
    bool wb_triggers(int64_t t, bool drain) {      // decisions to apply or to take
        if (dp5_items_ == 0 && (wb_deadlines.empty() || std::get<0>(wb_deadlines.top()) > t)
                && !(drain && !wb_open.empty()))
            return false;
        return wb_triggers_work(t, drain);
    }
    // ---- enqueue.cpp (DP2, DP2a, DP3, §6)
    bool enqueue(int64_t t) {                      // flushing entries, offers, DP2a timers
        if (wb_flush.empty() && busy_ch_set == 0
                && (cfg.demand || agg_timer.empty() || std::get<0>(agg_timer.top()) >= t))
            return false;
        return enqueue_work(t);
    }
    // ---- issue.cpp (§7, and MP1-MP5 through Megaplanes)
    bool release_media(int64_t t) {                // a completion due
        return media.has_due() && media.next_due() <= t && release_media_work(t);
    }
    bool issue(int64_t t) {                        // channels to decide on (or megaplanes)
        if (!mp && issue_check_set == 0 && cfg.scheduler != Scheduler::WriteDrain)
            return false;
        return issue_work(t);
    }
    // ---- completion.cpp (DP6)
    bool complete_entries(int64_t t) {             // completions delivered or due
        if ((late_.empty() || late_.front().at > t) && delivered.empty()
                && (cache_due.empty() || cache_due.top().first > t))
            return false;
        return complete_entries_work(t);
    }
    // ---- response.cpp (DP7, §8)
    bool respond_stages(int64_t t) {               // entries entering RETURN, live ports
        if (resp_live_set == 0 && ret_r.empty() && ret_w.empty()) {
            credit_wait = -1;
            return false;
        }
        return respond_stages_work(t);
    }
    std::vector<int64_t> egress_heads() const;
    int64_t handshake(int64_t t, int64_t port);
    // ---- stack_controller.cpp (DP4 end of cycle, C3 timers)
    void end_cycle(int64_t t) {                    // releases; frees, landed wake ticks
        inflight -= released;                      // the handshakes' admission slots (DP4)
        released = 0;
        if (!free_r.empty() || !free_w.empty() || (!wake.empty() && wake.top() <= t))
            end_cycle_work(t);
    }
    int64_t next_timer(int64_t t);                 // -1: none

    // state read by the system and the statistics
    ControllerConfig cfg;
    int stack;
    int64_t C, P;
    ReqTable& reqs;
    Media media;
    std::vector<Port> inp;
    // the ports whose Q holds a request, whose M holds one (and of those, a write), whose
    // E holds a response
    uint64_t qin_set = 0, m_set = 0, m_write_set = 0, egress_set = 0;
    int64_t inflight = 0, released = 0;
    bool drain_in = false;
    StackCounters st;
    int64_t mshr_hits = 0, agg_wait = 0;
    std::vector<int64_t> ch_requests, ch_ops, ch_link_stall;
    std::unique_ptr<Megaplanes> mp;

    // ---- the tables (model/controller/request.py, stack_controller.py)
    std::vector<Entry> mshr, wb;
    // DP4's free lists, one per pool (§4.5 B1: channel c's entries c*k .. c*k + k - 1)
    std::vector<Fifo<int>> mshr_free, wb_free;
    int64_t mshr_k = 0, wb_k = 0;                        // entries per pool
    int64_t ap_r = 0, ap_w = 0;
    // page -> its mergeable MSHR entry (-1: none) and its MSHR entries before completion;
    // a page is held while it has one (one lookup serves the merge and the allocation);
    // a flat table (page_map.hpp), at most one page per entry
    struct PageReads { int open = -1; int32_t pend = 0; };
    PageMap<PageReads> mshr_page;
    std::unordered_map<int64_t, int> wb_open;            // page -> OPEN entry
    std::map<int64_t, int> wb_open_order;                // open_seq -> entry (by age)
    int64_t open_seq = 0;
    std::unordered_map<int64_t, std::vector<int>> wb_page;   // page -> non-FREE, by age
    int64_t wb_used = 0;
    MinHeap<std::tuple<int64_t, int64_t, int64_t>, std::greater<>>
        wb_deadlines;                                    // (tick, alloc, idx)
    std::vector<int> wb_flush;                           // entries in FLUSH, in order
    std::vector<int> full_pending;
    std::vector<int> pressure_now;                       // this cycle's victims (one per pool)
    std::vector<char> pressure_live;                     // per pool: a victim pending
    std::vector<int> raw_, decided_;                     // DP5
    // the items of decided_, full_pending, raw_ and pressure_now: wb_triggers' idle test
    // reads this one word, not the four lists' ends (docs/engine.md, tenth round)
    int64_t dp5_items_ = 0;
    // DP2, DP2a, DP3
    std::vector<Fifo<int>> offer_q;
    std::vector<int> offer_r, offer_wb;
    uint64_t busy_ch_set = 0;                            // channels with offers to make
    MinHeap<std::tuple<int64_t, int64_t, int64_t>, std::greater<>>
        agg_timer;                                       // (ready_at, idx, alloc)
    std::vector<std::priority_queue<int, std::vector<int>, std::greater<int>>> agg_cand;
    // DP6
    struct Late { int64_t at; int idx; int64_t tc, flags; };
    Fifo<Late> late_;
    MinHeap<std::pair<int64_t, int64_t>, std::greater<>> cache_due;   // (tick, idx)
    // §7 write drain, with DP1's visibility (reading 10)
    int64_t wb_alloc_t = -1, wb_alloc_k = 0;
    // channels, queues, subarrays (§6, §7)
    std::vector<std::vector<int>> queue;                 // write-buffer entries as ~idx
    std::vector<std::vector<char>> busy;                 // per channel per subarray
    std::vector<int64_t> active;
    int64_t active_sum = 0, total_cap;
    uint64_t issue_check_set = 0;                        // channels to decide on
    std::vector<int64_t> issued_at, issued_k;
    int64_t queued_programs = 0;
    bool drain_open = false;
    int64_t drain_start = 0, drain_cooldown = 0;
    std::vector<Delivered> delivered;
    // responses (§8)
    MinHeap<int> ret_r, ret_w;
    uint64_t resp_live_set = 0;                          // ports with response work
    int64_t credit_wait = -1;
    DeficitCredit link;
    std::vector<int> free_r, free_w;
    // model-only page cache (R4): LRU, oldest first
    std::list<int64_t> pc_order;
    std::unordered_map<int64_t, std::list<int64_t>::iterator> pc_map;
    // scratch space reused every cycle (no allocation per cycle)
    std::vector<std::pair<int64_t, int>> cands_;
    std::vector<int> keep_;
    // C3
    MinHeap<int64_t> wake;

    // helpers
    Entry& entry(int code) { return code >= 0 ? mshr[code] : wb[~code]; }
    void wake_at(int64_t t) { wake.push(t); }
    void add_issue_check(int64_t ch) { issue_check_set |= bit(ch); }
    void add_busy_ch(int64_t ch) { busy_ch_set |= bit(ch); }
    static int64_t port_index(const Port& port) { return port.index; }
    bool drain_fsm(int64_t t);
    bool drain_fsm_base(int64_t t);
    bool issue_plain(int64_t t);

private:
    bool advance_work(int64_t t);
    bool dispatch_work(int64_t t, bool drain);
    bool wb_triggers_work(int64_t t, bool drain);
    bool enqueue_work(int64_t t);
    bool release_media_work(int64_t t);
    bool issue_work(int64_t t);
    bool complete_entries_work(int64_t t);
    bool respond_stages_work(int64_t t);
    void end_cycle_work(int64_t t);
    bool dispatch_one(Port& port, int64_t t);
    bool pressure(int64_t t, int64_t pool);
    void agg_ready(Entry& e, int64_t ready_at);
    void new_read_entry(Entry& e, const Req& m, int64_t t);
    void new_write_entry(Entry& e, const Req& m, int64_t t);
    void flush(Entry& e, Cause cause);
    void enqueue_one(Entry& e, int64_t t);
    void complete_tag(int64_t t, int64_t tag, int64_t flags);
    void cpl_entry(int64_t t, int64_t tag, int64_t flags);
    void read_done(Entry& e, int64_t tc, int64_t flags);
    bool port_stages(Port& port, int64_t t);
    bool launch_port(Port& port, int64_t t);
    void form_response(Entry& e, int64_t i, Req& req, Port& port);
};

}  // namespace hbf
