// Address mapping: HBF address -> stack, channel, channel-local page, subarray.
// The C++ mirror of model/mapping.py (A1-A4 of docs/sources.md; timing-contract-v1.md §2-§3).
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

namespace hbf {

constexpr int64_t PAGE_BYTES = 4096;

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
    std::pair<int64_t, int64_t> stack_of(int64_t page) const;                 // (stack, q)
    std::tuple<int64_t, int64_t, int64_t> channel_of(int64_t q, bool write) const;

private:
    MapperConfig cfg_;
    std::vector<int64_t> ex_first_;
};

}  // namespace hbf
