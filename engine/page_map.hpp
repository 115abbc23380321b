// PageMap: a small hash map from a page number (int64) to a value, for the controller's
// page-keyed tables on the read path (mshr_open, mshr_pend). std::unordered_map pays a
// prime modulo and a pointer chase per lookup; this is open addressing in one array of a
// power-of-two size (a multiplicative hash, the top bits as the slot), linear probing,
// deletion by backward shift (no tombstones), doubled when more than half full. Only the
// operations the controller uses; iteration order is not offered (nothing may depend on it).
// No hash-map library is available to the offline build (docs/engine.md, Build).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace hbf {

template <class V>
class PageMap {
public:
    explicit PageMap(size_t expected = 16) { rehash(capacity_for(expected)); }

    // The value of `key`, or nullptr.
    V* find(int64_t key) {
        for (size_t i = slot(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.key == key) return &s.value;
        }
    }
    bool contains(int64_t key) { return find(key) != nullptr; }

    // The value of `key`, inserted value-initialised if absent (std::unordered_map's []).
    V& operator[](int64_t key) {
        size_t i = slot(key);
        for (;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) break;
            if (s.key == key) return s.value;
        }
        if (2 * (size_ + 1) > slots_.size()) {
            rehash(slots_.size() * 2);
            return (*this)[key];
        }
        Slot& s = slots_[i];
        s.used = true;
        s.key = key;
        s.value = V();
        ++size_;
        return s.value;
    }

    // Remove `key` if present; the entries after it in its probe run shift back.
    void erase(int64_t key) {
        size_t i = slot(key);
        for (;; i = (i + 1) & mask_) {
            if (!slots_[i].used) return;
            if (slots_[i].key == key) break;
        }
        size_t hole = i;
        for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
            size_t home = slot(slots_[j].key);
            // j's entry may fill the hole unless its home lies cyclically in (hole, j]
            bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
            if (stays) continue;
            slots_[hole] = std::move(slots_[j]);
            hole = j;
        }
        slots_[hole].used = false;
        --size_;
    }

    // Room for `n` keys without growing.
    void reserve(size_t n) {
        if (capacity_for(n) > slots_.size()) rehash(capacity_for(n));
    }

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

private:
    struct Slot {
        int64_t key = 0;
        V value{};
        bool used = false;
    };

    static size_t capacity_for(size_t n) {
        size_t c = 16;
        while (c < 2 * n) c *= 2;
        return c;
    }

    size_t slot(int64_t key) const {
        return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    void rehash(size_t cap) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(cap, Slot());
        mask_ = cap - 1;
        shift_ = 64;
        for (size_t c = cap; c > 1; c >>= 1) --shift_;
        size_ = 0;
        for (Slot& s : old)
            if (s.used) (*this)[s.key] = std::move(s.value);
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0, size_ = 0;
    int shift_ = 64;
};

}  // namespace hbf
