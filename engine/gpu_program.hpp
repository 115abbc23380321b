// What the GPU runs: the C++ mirror of model/gpu_program.py, as flat arrays.
// A program crosses the boundary as numpy arrays (hbfsim/engine.py program_arrays): kernels
// in order, each a range of producers, each a range of accesses. Kernel names stay in Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace hbf {

constexpr int64_t COMPUTE_OF_KERNEL = -1;   // a producer's compute None: the kernel's value

// One of the access arrays (one entry per access, read-only once built): its own vector, or
// memory the caller keeps alive through `owner` (a kernel's numpy array, read in place
// instead of copied: the accesses are the largest arrays of a run, 17 bytes each).
template <class T>
class AccessColumn {
public:
    AccessColumn() = default;
    AccessColumn(std::vector<T> v) {                       // NOLINT: a vector converts
        auto own = std::make_shared<std::vector<T>>(std::move(v));
        data_ = own->data();
        n_ = own->size();
        owner_ = std::move(own);
    }
    AccessColumn(const T* data, size_t n, std::shared_ptr<void> owner)
        : data_(data), n_(n), owner_(std::move(owner)) {}
    const T& operator[](size_t i) const { return data_[i]; }
    size_t size() const { return n_; }

private:
    const T* data_ = nullptr;
    size_t n_ = 0;
    std::shared_ptr<void> owner_;
};

struct GpuProgram {
    std::vector<int64_t> kernel_compute;       // [kernels] GPU cycles
    std::vector<int64_t> kernel_producers;     // [kernels + 1] offsets into the producers
    std::vector<int64_t> producer_bound;       // [producers]
    std::vector<int64_t> producer_start;       // [producers] GPU cycles after the launch
    std::vector<int64_t> producer_compute;     // [producers] GPU cycles, or COMPUTE_OF_KERNEL
    std::vector<int64_t> producer_sm;          // [producers] (statistics only)
    std::vector<int64_t> producer_accesses;    // [producers + 1] offsets into the accesses
    AccessColumn<uint8_t> access_op;          // [accesses] 0 = R, 1 = W
    AccessColumn<int64_t> access_addr;        // [accesses] byte address
    AccessColumn<int64_t> access_nbytes;      // [accesses]

    int64_t kernels() const { return static_cast<int64_t>(kernel_compute.size()); }
    int64_t producers() const { return static_cast<int64_t>(producer_bound.size()); }
    // Producer's and Kernel's field checks (GpuError naming the field, index and value)
    void check() const;
};

}  // namespace hbf
