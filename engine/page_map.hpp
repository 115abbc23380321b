// A page-keyed map of small values with a bound on the keys held at once (the MSHR's pages:
// at most one per entry), in one flat array: open addressing, linear probing, deletion by
// backward shift (no tombstones). A lookup hashes the page by a multiply and a shift (not
// std::unordered_map's prime modulo, a division) and reads the slot array in place (no
// node per key: no allocation when a page is inserted, no free when it is erased). Only
// find / insert / erase / contains are offered: nothing iterates, so the order of the
// slots decides no event. Not a mechanism of the model (the golden model's dict).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace hbf {

template <class V>
class PageMap {
    static constexpr int64_t EMPTY = INT64_MIN;   // no page number is negative
    struct Slot {
        int64_t key = EMPTY;
        V val{};
    };

public:
    // room for `most` keys at once, the table at most half full
    void reserve(int64_t most) {
        int bits = 3;
        while ((int64_t{1} << bits) < 2 * most) ++bits;
        slots_.assign(size_t{1} << bits, Slot{});
        mask_ = (uint64_t{1} << bits) - 1;
        shift_ = 64 - bits;
        limit_ = most;
    }
    // the value of page k, or nullptr
    V* find(int64_t k) {
        for (uint64_t i = home(k);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.key == k) return &s.val;
            if (s.key == EMPTY) return nullptr;
        }
    }
    bool contains(int64_t k) { return find(k) != nullptr; }
    // page k, not held, with a default value; its value (valid until the next insert or
    // erase)
    V& insert(int64_t k) {
        if (size_ == limit_) throw std::logic_error("internal: a page map held too many keys");
        ++size_;
        uint64_t i = home(k);
        while (slots_[i].key != EMPTY) i = (i + 1) & mask_;
        slots_[i].key = k;
        slots_[i].val = V{};
        return slots_[i].val;
    }
    // page k, held, removed: the keys after it in its probe run move back into the gap
    void erase(int64_t k) {
        uint64_t i = home(k);
        while (slots_[i].key != k) i = (i + 1) & mask_;
        --size_;
        for (uint64_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
            if (slots_[j].key == EMPTY) break;
            uint64_t h = home(slots_[j].key);
            // slot j's key may fill the gap at i if its home is not in (i, j] (cyclically)
            if (((j - h) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].key = EMPTY;
    }
    int64_t size() const { return size_; }

private:
    uint64_t home(int64_t k) const {
        return (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) >> shift_;   // Fibonacci
    }
    std::vector<Slot> slots_;
    uint64_t mask_ = 0;
    int shift_ = 64;
    int64_t size_ = 0, limit_ = 0;
};

}  // namespace hbf
