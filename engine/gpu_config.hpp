// The GPU's shape and clocks: the C++ mirror of model/gpu_config.py (docs/gpu.md G1, G4).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace hbf {

// A malformed GPU program or configuration, or a driver stepping the port wrongly; raised
// in Python as hbfsim.model.gpu_config.GpuError (binding.cpp).
struct GpuError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct GpuConfig {
    int64_t sms = 8, partitions = 8, partition_bytes = 256;
    int64_t return_cycles = 0, launch_cycles = 0;
    // from HbfConfig: the two clocks of G1 and the interleave's base
    int64_t memory_clock_khz = 1, gpu_clock_khz = 1, base_address = 0;

    void check() const;   // GpuConfig.__post_init__'s checks
};

// G1: ceil(cycles * memory_clock_khz / gpu_clock_khz); zero and negative delays cost 0.
int64_t gpu_cycles_to_ticks(int64_t cycles, const GpuConfig& g);

// G4: (rel // partition_bytes + rel // 4096) mod partitions, rel = addr - base_address.
int64_t partition_of(int64_t addr, const GpuConfig& g);

}  // namespace hbf
