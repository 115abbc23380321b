// A priority queue whose emptiness is one word: std::priority_queue's empty() compares the
// vector's two ends, and the controller's idle tests and C1 read several heaps' emptiness
// every cycle (docs/engine.md, eleventh round). Top is the least element under Less's
// reverse, as std::priority_queue<T, std::vector<T>, Greater> orders it. Not model: the
// golden model's heapq lists.
#pragma once

#include <cstddef>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

namespace hbf {

template <class T, class Greater = std::greater<T>>
class MinHeap {
public:
    bool empty() const { return n_ == 0; }
    const T& top() const { return h_.top(); }
    void push(const T& v) {
        h_.push(v);
        ++n_;
    }
    template <class... A>
    void emplace(A&&... a) {
        h_.emplace(std::forward<A>(a)...);
        ++n_;
    }
    void pop() {
        h_.pop();
        --n_;
    }

private:
    std::priority_queue<T, std::vector<T>, Greater> h_;
    size_t n_ = 0;
};

}  // namespace hbf
