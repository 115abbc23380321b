// NAND media of one stack: subarray timing, page buffers, block allocation, erase and GC.
// The C++ mirror of model/media.py (docs/engine.md); the rules, their order and the
// tie-breaks are that file's, function for function. docs/timing-contract.md §1 (media
// promise), docs/timing-contract-multiplane.md MP6-MP8.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace hbf {

constexpr int READ = 0;
constexpr int PROGRAM = 1;
// Completion flags (contract §1, cpl payload).
constexpr int FLAG_BUFFER_HIT = 1;
constexpr int FLAG_ERROR = 2;

// What Media needs of HbfConfig (binding.cpp reads it from the Python object).
struct MediaConfig {
    int64_t t_read, t_prog, t_erase, t_hit;
    int64_t page_buffers, pages_per_block;
    int64_t pages_per_stack, subarrays_per_stack, subarrays_per_channel;
    int64_t channels, blocks_per_zone;
    bool ssd;
    double overprovisioning;
};

// Block allocation state of one subarray, created on first use (media.py _Subarray).
struct Subarray {
    std::vector<int64_t> buffers;                                   // LRU, oldest first
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> map;   // local -> (block, page)
    std::vector<int64_t> valid;      // block -> valid pages (sized at the first program)
    std::vector<int64_t> pec;        // block -> P/E cycles (sized at the first program)
    int64_t erases = 0;              // blocks erased here (zone_pec skips a subarray without)
    int64_t active = -1;                                            // block being programmed
    int64_t wp = 0;                                                 // next page in it
    int64_t fresh = 0;                                              // next never-used block
    std::deque<int64_t> free;                                       // fully invalid blocks
    std::set<int64_t> full;                                         // closed, valid data
};

// One undelivered completion: a single-plane command (group < 0) or a multi-plane one
// (its tags and flags in Media::groups_[group]). Ordered as media.py's heap tuples
// (due, channel, subarray or megaplane, tag(s), flags).
struct Due {
    int64_t due;
    int64_t ch;
    int64_t unit;
    int64_t tag;
    int64_t flags;
    int64_t group;
};

// A delivered completion: tags and flags of a multi-plane command in tags/flags.
struct Delivered {
    int64_t ch, unit, tag, flags;
    bool is_group;
    std::vector<int64_t> tags, group_flags;
};

class Media {
public:
    explicit Media(const MediaConfig& cfg);

    // ---- the command interface (media.py issue, issue_group, next_due, deliver, backlog)
    int64_t issue(int64_t t, int64_t ch, int64_t sub, int64_t op, int64_t local, int64_t tag);
    // ops: (subarray, op, local, tag) per used plane; returns each plane's latency
    std::vector<int64_t> issue_group(int64_t t, int64_t ch, int64_t megaplane,
                                     const std::vector<std::tuple<int64_t, int64_t, int64_t,
                                                                  int64_t>>& ops);
    bool has_due() const { return !due_.empty(); }
    int64_t next_due() const { return due_.front().due; }   // only when has_due()
    void deliver(int64_t t, std::vector<Delivered>& out);
    bool backlog(int64_t t) const;

    // ---- statistics
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> zone_pec() const;
    int64_t valid_pages() const;

    int64_t page_reads = 0, buffer_hits = 0, page_programs = 0;
    int64_t block_erases = 0, gc_relocations = 0, capacity_errors = 0;
    int64_t busy_ticks = 0;
    int64_t blocks() const { return blocks_; }
    int64_t reserve() const { return reserve_; }

private:
    std::pair<int64_t, int64_t> serve(int64_t ch, int64_t sub, int64_t op, int64_t local);
    std::pair<int64_t, bool> program(Subarray& s, int64_t local);
    void invalidate(Subarray& s, int64_t block);
    bool open_block(Subarray& s, int64_t& extra);   // false: out of blocks (media.py None)
    int64_t gc(Subarray& s);
    Subarray& subarray(int64_t ch, int64_t sub);
    bool after(const Due& a, const Due& b) const;
    void push(const Due& d);
    Due pop();

    MediaConfig cfg_;
    int64_t blocks_, reserve_, S_;
    std::vector<std::unique_ptr<Subarray>> subs_;   // ch * S + sub, null until first used
    std::vector<int64_t> used_order_;               // first-use order (media.py's dict order)
    std::vector<Due> due_;                          // a binary heap, earliest first
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> groups_;
    std::vector<int64_t> free_groups_;
    std::vector<Due> later_;
    std::vector<bool> seen_;
};

}  // namespace hbf
