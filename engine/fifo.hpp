// A first-in first-out queue in one ring of slots that doubles when full (the GPU's partition
// FIFOs): unlike std::deque, a steady queue reuses the same memory, with no chunk allocated
// or freed as it moves and no chunk map to follow for the head. Not a mechanism of the
// model (model/gpu_issue.py uses deques).
#pragma once

#include <cstddef>
#include <vector>

namespace hbf {

template <class T>
class Fifo {
public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    const T& front() const { return v_[head_]; }
    const T& back() const { return v_[(head_ + n_ - 1) & (v_.size() - 1)]; }
    void push_back(const T& x) {
        if (n_ == v_.size()) grow();
        v_[(head_ + n_) & (v_.size() - 1)] = x;
        ++n_;
    }
    void pop_front() {
        head_ = (head_ + 1) & (v_.size() - 1);
        --n_;
    }

private:
    // twice the slots (a power of two), the queue moved to the front in order
    void grow() {
        std::vector<T> w(v_.empty() ? 16 : 2 * v_.size());
        for (size_t i = 0; i < n_; ++i) w[i] = v_[(head_ + i) & (v_.size() - 1)];
        v_.swap(w);
        head_ = 0;
    }

    std::vector<T> v_;
    size_t head_ = 0, n_ = 0;
};

}  // namespace hbf
