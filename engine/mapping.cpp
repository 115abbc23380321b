// Address mapping: the C++ mirror of model/mapping.py (A2 stack select, A4 placement).
#include "mapping.hpp"

#include <algorithm>

namespace hbf {

Mapper::Mapper(const MapperConfig& cfg) : cfg_(cfg) {
    std::sort(cfg_.explicit_map.begin(), cfg_.explicit_map.end());
    for (auto& r : cfg_.explicit_map) ex_first_.push_back(std::get<0>(r));
    if (cfg_.placement == Placement::Interleave && !cfg_.partitioned && pow2(cfg_.channels)
            && pow2(cfg_.subarrays_per_channel)) {
        pow2_interleave_ = true;
        ch_shift_ = __builtin_ctzll(static_cast<uint64_t>(cfg_.channels));
        ch_mask_ = cfg_.channels - 1;
        sub_mask_ = cfg_.subarrays_per_channel - 1;
    }
}

std::pair<int64_t, int64_t> Mapper::stack_of_any(int64_t page) const {
    if (cfg_.stacks == 1) return {0, page};
    if (cfg_.stack_interleave)
        return {floormod(page, cfg_.stacks), floordiv(page, cfg_.stacks)};
    return {floordiv(page, cfg_.pages_per_stack), floormod(page, cfg_.pages_per_stack)};
}

std::tuple<int64_t, int64_t, int64_t> Mapper::channel_of_any(int64_t q, bool write) const {
    int64_t n, off;
    if (cfg_.partitioned) {
        if (write) {
            n = cfg_.channels - cfg_.read_channels;
            off = cfg_.read_channels;
        } else {
            n = cfg_.read_channels;
            off = 0;
        }
    } else {
        n = cfg_.channels;
        off = 0;
    }
    int64_t ch, local;
    switch (cfg_.placement) {
    case Placement::Interleave:
        ch = floormod(q, n);
        local = floordiv(q, n);
        break;
    case Placement::Grouped: {
        int64_t g = cfg_.group_pages;
        ch = floormod(floordiv(q, g), n);
        local = floordiv(q, g * n) * g + floormod(q, g);
        break;
    }
    case Placement::Contiguous: {
        int64_t region = floordiv(cfg_.pages_per_stack, n);
        ch = std::min(floordiv(q, region), n - 1);
        local = q - ch * region;
        break;
    }
    default: {   // explicit: the map names the channel, the local index is q itself (§6.1)
        auto it = std::upper_bound(ex_first_.begin(), ex_first_.end(), q);
        int64_t i = static_cast<int64_t>(it - ex_first_.begin()) - 1;
        if (i >= 0 && q <= std::get<1>(cfg_.explicit_map[i]))
            ch = std::get<2>(cfg_.explicit_map[i]);
        else
            ch = floormod(q, n);
        local = q;
    }
    }
    return {ch + off, local, floormod(local, cfg_.subarrays_per_channel)};
}

}  // namespace hbf
