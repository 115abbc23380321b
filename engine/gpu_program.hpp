// What the GPU runs: the C++ mirror of model/gpu_program.py, as flat arrays.
// A program crosses the boundary as numpy arrays (hbfsim/engine.py program_arrays): kernels
// in order, each a range of producers, each a range of accesses. Kernel names stay in Python.
#pragma once

#include <cstdint>
#include <vector>

namespace hbf {

constexpr int64_t COMPUTE_OF_KERNEL = -1;   // a producer's compute None: the kernel's value

struct GpuProgram {
    std::vector<int64_t> kernel_compute;       // [kernels] GPU cycles
    std::vector<int64_t> kernel_producers;     // [kernels + 1] offsets into the producers
    std::vector<int64_t> producer_bound;       // [producers]
    std::vector<int64_t> producer_start;       // [producers] GPU cycles after the launch
    std::vector<int64_t> producer_compute;     // [producers] GPU cycles, or COMPUTE_OF_KERNEL
    std::vector<int64_t> producer_sm;          // [producers] (statistics only)
    std::vector<int64_t> producer_accesses;    // [producers + 1] offsets into the accesses
    std::vector<uint8_t> access_op;            // [accesses] 0 = R, 1 = W
    std::vector<int64_t> access_addr;          // [accesses] byte address
    std::vector<int64_t> access_nbytes;        // [accesses]

    int64_t kernels() const { return static_cast<int64_t>(kernel_compute.size()); }
    int64_t producers() const { return static_cast<int64_t>(producer_bound.size()); }
    // Producer's and Kernel's field checks (GpuError naming the field, index and value)
    void check() const;
};

}  // namespace hbf
