// NAND media of one stack: the C++ mirror of model/media.py (read the two side by side; the
// Python file is the specification and states the semantics, M1, R3, W5 of docs/sources.md).
#include "media.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "mutants.hpp"

namespace hbf {

Media::Media(const MediaConfig& cfg) : cfg_(cfg) {
    if (cfg.subarrays_per_stack < 1 || cfg.pages_per_block < 1 || cfg.channels < 1
        || cfg.subarrays_per_channel < 1 || cfg.blocks_per_zone < 1)
        throw std::invalid_argument("media: channels, subarrays and pages_per_block must be "
                                    "positive");
    blocks_ = cfg.pages_per_stack / (cfg.subarrays_per_stack * cfg.pages_per_block);
    reserve_ = 0;
    if (cfg.ssd)
        reserve_ = std::max<int64_t>(1, static_cast<int64_t>(blocks_ * cfg.overprovisioning));
    S_ = cfg.subarrays_per_channel;
    subs_.resize(cfg.channels * S_);
    seen_.assign(cfg.channels, false);
}

// ---- the heap: media.py's tuples (due, ch, sub, tag, flags), earliest first ---------------
namespace {
template <class V>
int lex(const V& a, const V& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        if (a[i] < b[i]) return -1;
        if (b[i] < a[i]) return 1;
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}
}  // namespace

bool Media::after(const Due& a, const Due& b) const {
    // "a after b": std::*_heap keep the greatest first, so the order is reversed
    if (a.due != b.due) return a.due > b.due;
    if (a.ch != b.ch) return a.ch > b.ch;
    if (a.unit != b.unit)
        return mutant(MEDIA_TIE_HIGHEST_SUB) ? a.unit < b.unit : a.unit > b.unit;
    // Python compares an int tag with a tuple of tags by raising TypeError; the model never
    // mixes single- and multi-plane commands on one unit, so any fixed order will do
    if ((a.group < 0) != (b.group < 0)) return a.group >= 0;
    if (a.group < 0) return a.tag != b.tag ? a.tag > b.tag : a.flags > b.flags;
    int c = lex(groups_[a.group].first, groups_[b.group].first);
    if (c) return c > 0;
    return lex(groups_[a.group].second, groups_[b.group].second) > 0;
}

void Media::push(const Due& d) {
    due_.push_back(d);
    std::push_heap(due_.begin(), due_.end(),
                   [this](const Due& a, const Due& b) { return after(a, b); });
}

Due Media::pop() {
    std::pop_heap(due_.begin(), due_.end(),
                  [this](const Due& a, const Due& b) { return after(a, b); });
    Due d = due_.back();
    due_.pop_back();
    return d;
}

// ---- the command interface ------------------------------------------------------------
int64_t Media::issue(int64_t t, int64_t ch, int64_t sub, int64_t op, int64_t local,
                     int64_t tag) {
    auto [lat, flags] = serve(ch, sub, op, local);
    push(Due{t + lat, ch, sub, tag, flags, -1});
    return lat;
}

std::vector<int64_t> Media::issue_group(
        int64_t t, int64_t ch, int64_t megaplane,
        const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>& ops) {
    if (ops.empty()) throw std::invalid_argument("issue_group: ops must name at least one plane");
    std::vector<int64_t> lats, tags, flags;
    for (auto& [sub, op, local, tag] : ops) {
        auto [lat, f] = serve(ch, sub, op, local);
        lats.push_back(lat);
        tags.push_back(tag);
        flags.push_back(f);
    }
    int64_t slow = mutant(MEDIA_GROUP_FASTEST) ? *std::min_element(lats.begin(), lats.end())
                                               : *std::max_element(lats.begin(), lats.end());
    int64_t g;
    if (!free_groups_.empty()) {
        g = free_groups_.back();
        free_groups_.pop_back();
        groups_[g] = {std::move(tags), std::move(flags)};
    } else {
        g = static_cast<int64_t>(groups_.size());
        groups_.emplace_back(std::move(tags), std::move(flags));
    }
    push(Due{t + slow, ch, megaplane, 0, 0, g});
    return lats;
}

Subarray& Media::subarray(int64_t ch, int64_t sub) {
    if (ch < 0 || ch >= cfg_.channels)
        throw std::invalid_argument("media: channel must be in 0.." +
                                    std::to_string(cfg_.channels - 1) + ", not " +
                                    std::to_string(ch));
    if (sub < 0 || sub >= S_)
        throw std::invalid_argument("media: subarray must be in 0.." + std::to_string(S_ - 1) +
                                    ", not " + std::to_string(sub));
    auto& p = subs_[ch * S_ + sub];
    if (!p) {                                   // nothing is allocated before first use (C3)
        p = std::make_unique<Subarray>();   // its block arrays come with its first program
        used_order_.push_back(ch * S_ + sub);
    }
    return *p;
}

std::pair<int64_t, int64_t> Media::serve(int64_t ch, int64_t sub, int64_t op, int64_t local) {
    Subarray& s = subarray(ch, sub);
    int64_t lat, flags = 0;
    if (op == READ) {
        auto& bufs = s.buffers;
        auto it = std::find(bufs.begin(), bufs.end(), local);
        if (it != bufs.end()) {
            if (!mutant(MEDIA_HIT_NO_LRU)) {
                bufs.erase(it);
                bufs.push_back(local);
            }
            lat = cfg_.t_hit;
            flags = FLAG_BUFFER_HIT;
            buffer_hits += 1;
        } else {
            lat = cfg_.t_read + (mutant(MEDIA_READ_PLUS_ONE) ? 1 : 0);
            page_reads += 1;
            if (cfg_.page_buffers) {
                bufs.push_back(local);
                if (static_cast<int64_t>(bufs.size()) > cfg_.page_buffers) bufs.erase(bufs.begin());
            }
        }
    } else {
        auto [l, ok] = program(s, local);
        lat = l;
        if (!ok) flags = FLAG_ERROR;
    }
    busy_ticks += lat;
    return {lat, flags};
}

void Media::deliver(int64_t t, std::vector<Delivered>& out) {
    out.clear();
    if (due_.empty() || due_.front().due > t) return;
    later_.clear();
    bool two = mutant(MEDIA_TWO_PER_CHANNEL);
    while (!due_.empty() && due_.front().due <= t) {
        Due d = pop();
        if (seen_[d.ch] && !two) {
            later_.push_back(d);
            continue;
        }
        seen_[d.ch] = true;
        Delivered r{d.ch, d.unit, d.tag, d.flags, d.group >= 0, {}, {}};
        if (d.group >= 0) {
            r.tags = std::move(groups_[d.group].first);
            r.group_flags = std::move(groups_[d.group].second);
            free_groups_.push_back(d.group);
        }
        out.push_back(std::move(r));
    }
    for (auto& d : later_) push(d);
    for (auto& r : out) seen_[r.ch] = false;
}

bool Media::backlog(int64_t t) const {
    if (due_.empty()) return false;
    return mutant(MEDIA_BACKLOG_STRICT) ? due_.front().due < t : due_.front().due <= t;
}

// ---- programs, erase-before-write, GC ----------------------------------------------------
std::pair<int64_t, bool> Media::program(Subarray& s, int64_t local) {
    if (!mutant(MEDIA_PROGRAM_KEEPS_BUF)) {
        auto it = std::find(s.buffers.begin(), s.buffers.end(), local);
        if (it != s.buffers.end()) s.buffers.erase(it);
    }
    int64_t lat = cfg_.t_prog;
    if (s.valid.empty()) {                      // the first program: blocks are used from now
        s.valid.assign(blocks_, 0);
        s.pec.assign(blocks_, 0);
    }
    auto old = s.map.find(local);
    if (old != s.map.end()) {
        int64_t blk = old->second.first;
        s.map.erase(old);
        invalidate(s, blk);
    }
    if (s.active < 0 || s.wp == cfg_.pages_per_block) {
        int64_t extra = 0;
        if (!open_block(s, extra)) {
            capacity_errors += 1;
            return {lat, false};
        }
        lat += extra;
    }
    s.map[local] = {s.active, s.wp};
    s.valid[s.active] += 1;
    s.wp += 1;
    page_programs += 1;
    return {lat, true};
}

void Media::invalidate(Subarray& s, int64_t block) {
    int64_t v = --s.valid[block];
    if (v == 0 && block != s.active) {
        s.full.erase(block);
        s.free.push_back(block);
    }
}

bool Media::open_block(Subarray& s, int64_t& extra) {
    // Close the active block and open the next one; extra: the added latency.
    if (s.active >= 0) {
        if (s.valid[s.active] == 0)
            s.free.push_back(s.active);
        else
            s.full.insert(s.active);
    }
    extra = 0;
    if (cfg_.ssd && static_cast<int64_t>(s.free.size()) + (blocks_ - s.fresh) <= reserve_
        && !s.full.empty()) {
        extra += gc(s);
        if (s.wp < cfg_.pages_per_block) return true;   // the compacted victim is active
    }
    int64_t blk;
    if (!s.free.empty()) {
        blk = s.free.front();
        s.free.pop_front();
        s.pec[blk] += 1;
        s.erases += 1;
        block_erases += 1;
        if (!mutant(MEDIA_ERASE_FREE)) extra += cfg_.t_erase;
    } else if (s.fresh < blocks_) {
        blk = s.fresh;
        s.fresh += 1;
    } else {
        s.active = -1;
        return false;
    }
    s.active = blk;
    s.wp = 0;
    return true;
}

int64_t Media::gc(Subarray& s) {
    // Greedy GC (ssd mode): relocate the least-valid closed block, then free it.
    int64_t victim = -1;
    for (int64_t b : s.full) {            // ascending block: ties go to the lowest block
        if (victim < 0) {
            victim = b;
        } else if (mutant(MEDIA_GC_MOST_VALID) ? s.valid[b] > s.valid[victim]
                                               : s.valid[b] < s.valid[victim]) {
            victim = b;
        }
    }
    s.full.erase(victim);
    std::vector<int64_t> movers;
    for (auto& [lp, loc] : s.map)
        if (loc.first == victim) movers.push_back(lp);
    std::sort(movers.begin(), movers.end());
    s.pec[victim] += 1;
    s.erases += 1;
    block_erases += 1;
    int64_t n = static_cast<int64_t>(movers.size());
    gc_relocations += n;
    for (int64_t i = 0; i < n; ++i) s.map[movers[i]] = {victim, i};
    s.valid[victim] = n;
    int64_t cost = n * (cfg_.t_read + cfg_.t_prog) + cfg_.t_erase;
    if (n < cfg_.pages_per_block) {
        s.active = victim;                 // the compacted victim continues after the movers
        s.wp = n;
    } else {
        s.full.insert(victim);
    }
    return cost;
}

// ---- statistics ---------------------------------------------------------------------------
std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> Media::zone_pec() const {
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> out;
    for (int64_t key : used_order_) {
        const Subarray& s = *subs_[key];
        if (s.erases == 0) continue;            // every block's count is 0
        int64_t ch = key / S_, sub = key % S_;
        for (int64_t blk = 0; blk < blocks_; ++blk)
            if (s.pec[blk]) out[{ch, sub, blk / cfg_.blocks_per_zone}] += s.pec[blk];
    }
    return out;
}

int64_t Media::valid_pages() const {
    int64_t n = 0;
    for (int64_t key : used_order_) n += static_cast<int64_t>(subs_[key]->map.size());
    return n;
}

}  // namespace hbf
