// Address mapping: HBF address -> stack, channel, channel-local page, subarray.
// The C++ mirror of model/mapping.py (A1-A4 of docs/sources.md; timing-contract-v1.md §2-§3).
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

namespace hbf {

constexpr int64_t PAGE_BYTES = 4096;
// Request ops (a write maps to its own channels under a partition-* scheduler).
constexpr int8_t OP_R = 0, OP_W = 1;

// Python's floor division and modulo (the model's integer arithmetic), for any signs. A
// positive power-of-two divisor (channels, subarrays, partitions, page bytes as usually
// configured) takes a shift and a mask, which are floor division and modulo for any sign of
// a; other divisors a hardware division.
inline bool pow2(int64_t b) { return b > 0 && (b & (b - 1)) == 0; }
inline int64_t floordiv(int64_t a, int64_t b) {
    if (pow2(b)) return a >> __builtin_ctzll(static_cast<uint64_t>(b));
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) {
    if (pow2(b)) return a & (b - 1);
    return a - floordiv(a, b) * b;
}

enum class Placement { Interleave, Grouped, Contiguous, Explicit };

struct MapperConfig {
    int64_t base_address;
    int64_t stacks, pages_per_stack, subarrays_per_channel, channels;
    Placement placement;
    int64_t group_pages, read_channels;
    bool partitioned;            // scheduler partition-*: reads and writes on their own channels
    bool stack_interleave;       // stack_select == "interleave"
    std::vector<std::tuple<int64_t, int64_t, int64_t>> explicit_map;   // (first, last, ch)
};

class Mapper {
public:
    explicit Mapper(const MapperConfig& cfg);
    int64_t page(int64_t addr) const { return floordiv(addr - cfg_.base_address, PAGE_BYTES); }
    // (stack, q): the stack and the page's index in it
    std::pair<int64_t, int64_t> stack_of(int64_t page) const {
        if (cfg_.stacks == 1) return {0, page};
        return stack_of_any(page);
    }
    // (channel, local page, subarray) of page q of a stack; the interleave over a power of two
    // of channels and subarrays (every shipped configuration) is a mask and a shift
    std::tuple<int64_t, int64_t, int64_t> channel_of(int64_t q, bool write) const {
        if (pow2_interleave_) return interleave(q, ch_shift_, ch_mask_, sub_mask_);
        return channel_of_any(q, write);
    }
    // Rows 0 .. n-1 of a stream mapped in order, each handed to
    // each(i, stack, q, channel, local, subarray). Equal to page(), stack_of() and
    // channel_of() row by row; the masks and shifts are read once into locals, so a loop
    // whose body stores 64-bit values (which could alias this mapper's fields) does not read
    // them again per row (docs/engine.md, eleventh round).
    template <class Each>
    void map_rows(const int64_t* addr, const int8_t* op, int64_t n, Each&& each) const {
        if (!(pow2_interleave_ && cfg_.stacks == 1)) {
            for (int64_t i = 0; i < n; ++i) {
                auto [stack, q] = stack_of(page(addr[i]));
                auto [ch, local, sub] = channel_of(q, op[i] == OP_W);
                each(i, stack, q, ch, local, sub);
            }
            return;
        }
        const int64_t base = cfg_.base_address, shift = ch_shift_, mask = ch_mask_,
                      sub_mask = sub_mask_;
        for (int64_t i = 0; i < n; ++i) {
            int64_t q = floordiv(addr[i] - base, PAGE_BYTES);
            auto [ch, local, sub] = interleave(q, shift, mask, sub_mask);
            each(i, int64_t{0}, q, ch, local, sub);
        }
    }

private:
    // the interleave over 2**shift channels and a power of two of subarrays: (channel,
    // local page, subarray) as a mask and a shift (floormod and floordiv by a power of two,
    // exact for any sign)
    static std::tuple<int64_t, int64_t, int64_t> interleave(int64_t q, int64_t shift,
                                                            int64_t mask, int64_t sub_mask) {
        int64_t local = q >> shift;
        return {q & mask, local, local & sub_mask};
    }
    std::pair<int64_t, int64_t> stack_of_any(int64_t page) const;
    std::tuple<int64_t, int64_t, int64_t> channel_of_any(int64_t q, bool write) const;

    MapperConfig cfg_;
    std::vector<int64_t> ex_first_;
    // the interleave without partitions over 2**ch_shift_ channels and a power of two of
    // subarrays: channel_of's arithmetic as masks and shifts (floormod and floordiv by a
    // power of two are exact for any sign)
    bool pow2_interleave_ = false;
    int64_t ch_shift_ = 0, ch_mask_ = 0, sub_mask_ = 0;
};

}  // namespace hbf
