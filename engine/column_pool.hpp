// Memory for the per-request output columns (binding.cpp's Columns, a whole run's response
// order), kept between runs. A caller that holds one result while it makes the next call
// (`out = run_compiled(...)` in a loop) got the new columns at the heap's top, which glibc
// trims again when the previous result is freed there, so every other call faulted in all
// of its pages, about 5,000 for 200,000 requests (docs/engine.md, eleventh round). Here an
// array's memory returns to the pool when the array is freed (its capsule), and the next
// column of that size takes it; at most CAP bytes are kept, the rest is freed. The GIL
// guards the pool: the arrays are made and freed with it held. Not model.
#pragma once

#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <vector>

namespace hbf {

class ColumnPool {
public:
    static constexpr size_t CAP = size_t{256} << 20;     // bytes kept at most
    static constexpr size_t HEADER = 16;                  // the block's size, before its data

    // never destroyed: an array freed at the interpreter's exit still returns its memory here
    static ColumnPool& get() {
        static ColumnPool* pool = new ColumnPool();
        return *pool;
    }
    // a block of `bytes` (its size in its header), a kept one if there is one
    void* take(size_t bytes) {
        auto it = kept_.find(bytes);
        if (it != kept_.end() && !it->second.empty()) {
            void* p = it->second.back();
            it->second.pop_back();
            held_ -= bytes;
            return p;
        }
        void* p = std::malloc(bytes);
        if (!p) throw std::bad_alloc();
        *static_cast<size_t*>(p) = bytes;
        return p;
    }
    void give(void* p) {
        size_t bytes = *static_cast<size_t*>(p);
        if (held_ + bytes > CAP) {
            std::free(p);
            return;
        }
        kept_[bytes].push_back(p);
        held_ += bytes;
    }

private:
    std::unordered_map<size_t, std::vector<void*>> kept_;
    size_t held_ = 0;
};

// A numpy array of n T's (uninitialized, as np.empty) whose memory comes from the pool and
// returns to it when the array is freed.
template <class T>
pybind11::array_t<T> pooled_array(pybind11::ssize_t n) {
    static_assert(ColumnPool::HEADER % alignof(T) == 0, "the data stays aligned");
    char* block = static_cast<char*>(
        ColumnPool::get().take(ColumnPool::HEADER + sizeof(T) * static_cast<size_t>(n)));
    T* data = reinterpret_cast<T*>(block + ColumnPool::HEADER);
    pybind11::capsule owner(data, [](void* d) {
        ColumnPool::get().give(static_cast<char*>(d) - ColumnPool::HEADER);
    });
    return pybind11::array_t<T>(n, data, owner);
}

}  // namespace hbf
