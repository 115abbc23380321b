// The records of the requests inside the system (accepted, not yet answered), in slots that
// are reused once their request is answered: the memory follows the requests in flight (at
// most every stack's admission slots and the route stage), and the next accepted request's
// record lands in the slot the last answered one left, still in cache. A request's slot is
// its index in the controller (Q, M, the entries' waiters, E); the request's number in
// submission order travels in its record. Not a mechanism of the model: the golden model's
// Python objects are freed by the garbage collector when the last reference goes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hbf {

template <class T>
class SlotTable {
    static_assert(std::is_trivially_copyable<T>::value, "records are plain data");

public:
    // overwrite a released slot (tests: a record read after its request was answered shows)
    bool poison = false;

    T& operator[](int64_t i) { return v_[static_cast<size_t>(i)]; }
    const T& operator[](int64_t i) const { return v_[static_cast<size_t>(i)]; }

    // a slot for a new record, the last released first; its index. The storage may move:
    // no reference to a record is held across acquire()
    int64_t acquire() {
        if (free_.empty()) {
            v_.emplace_back();
            return static_cast<int64_t>(v_.size()) - 1;
        }
        int64_t i = free_.back();
        free_.pop_back();
        return i;
    }
    // slot i's request is answered; nothing reads its record again
    void release(int64_t i) {
        if (poison) std::memset(static_cast<void*>(&v_[static_cast<size_t>(i)]), 0xA5, sizeof(T));
        free_.push_back(i);
    }
    // records held now, and the slots ever used (the most requests in flight at once)
    int64_t held() const { return static_cast<int64_t>(v_.size() - free_.size()); }
    int64_t slots() const { return static_cast<int64_t>(v_.size()); }

private:
    std::vector<T> v_;
    std::vector<int64_t> free_;
};

}  // namespace hbf
