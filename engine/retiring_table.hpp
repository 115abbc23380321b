// Per-request records indexed by a request's number, held in blocks; a long run may retire
// each record once its request is answered, and a block whose records are all retired is
// freed, so the memory follows the requests in flight, not the requests of the run
// (docs/engine.md, Memory). Not a mechanism of the model: the golden model's Python objects
// are freed by the garbage collector when the last reference goes.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace hbf {

// What retire() does with a block whose records are all retired.
enum class Retire { Keep, Free, Poison };   // Poison: overwrite it (tests: a stale read shows)

// Blocks are raw storage: a record is written once, when it is appended (no block is
// constructed whole ahead of its records), and a block freed by retire() is kept as the
// next block to fill (at most one such spare), so a long run's steady state allocates and
// page-faults no memory. T must be trivially copyable (a plain record).
template <class T>
class RetiringTable {
    static_assert(std::is_trivially_copyable<T>::value, "records are plain data");
    struct FreeBlock {
        void operator()(T* p) const { std::free(p); }
    };
    using Block = std::unique_ptr<T[], FreeBlock>;

public:
    explicit RetiringTable(int shift = 16) { set_block_shift(shift); }

    // before the first push_back: 2**shift records per block
    void set_block_shift(int shift) {
        shift_ = shift;
        mask_ = (int64_t{1} << shift) - 1;
    }
    Retire mode = Retire::Keep;

    T& operator[](int64_t i) { return blocks_[i >> shift_][i & mask_]; }
    const T& operator[](int64_t i) const { return blocks_[i >> shift_][i & mask_]; }
    int64_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    // blocks holding records now (a block is 2**shift records; the one spare not counted)
    int64_t blocks_held() const { return held_; }

    void push_back(const T& v) { new (&slot()) T(v); }
    // a fresh record appended, default-initialised in place (members with an initialiser
    // get it, the others are left for the caller to write: no zeroing of the whole record
    // first, as value-initialisation, T(), would do); its reference
    T& emplace_back() { return *new (&slot()) T; }

    // record i is no longer read; its block goes once every record of it is retired
    void retire(int64_t i) {
        if (mode == Retire::Keep) return;
        int64_t b = i >> shift_;
        if (--live_[b] != 0 || ((b + 1) << shift_) > n_) return;   // in use, or still filling
        if (mode == Retire::Free) {
            if (!spare_) spare_ = std::move(blocks_[b]);           // the next block to fill
            else blocks_[b].reset();
            --held_;
        } else {
            T poison;
            poison_fill(poison);
            for (int64_t k = 0; k <= mask_; ++k) blocks_[b][k] = poison;
        }
    }

private:
    // the slot of record n_ (a new block when the last is full), counted live
    T& slot() {
        if ((n_ & mask_) == 0) {
            if (spare_) {
                blocks_.push_back(std::move(spare_));
            } else {
                void* p = std::malloc(sizeof(T) * static_cast<size_t>(mask_ + 1));
                if (!p) throw std::bad_alloc();
                blocks_.emplace_back(static_cast<T*>(p));
            }
            live_.push_back(0);
            ++held_;
        }
        T& s = blocks_.back()[n_ & mask_];
        ++live_.back();
        ++n_;
        return s;
    }

    static void poison_fill(T& v) {
        auto* p = reinterpret_cast<unsigned char*>(&v);
        for (size_t k = 0; k < sizeof(T); ++k) p[k] = 0xA5;
    }

    int shift_ = 16;
    int64_t mask_ = 0;
    int64_t n_ = 0, held_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> live_;
    Block spare_;
};

}  // namespace hbf
