// The GPU's shape and clocks: the C++ mirror of model/gpu_config.py.
#include "gpu_config.hpp"

#include "mapping.hpp"
#include "mutants.hpp"

namespace hbf {

void GpuConfig::check() const {
    if (sms < 1) throw GpuError("sms must be a positive integer, not " + std::to_string(sms));
    if (partitions < 1)
        throw GpuError("partitions must be a positive integer, not " +
                       std::to_string(partitions));
    if (return_cycles < 0)
        throw GpuError("return_cycles must be a non-negative integer, not " +
                       std::to_string(return_cycles));
    if (launch_cycles < 0)
        throw GpuError("launch_cycles must be a non-negative integer, not " +
                       std::to_string(launch_cycles));
    if (partition_bytes < 32 || (partition_bytes & (partition_bytes - 1)))
        throw GpuError("partition_bytes must be a power of two >= 32, not " +
                       std::to_string(partition_bytes));
    if (memory_clock_khz < 1 || gpu_clock_khz < 1)
        throw GpuError("memory_clock_khz and gpu_clock_khz must be positive");
}

int64_t gpu_cycles_to_ticks(int64_t cycles, const GpuConfig& g) {
    if (cycles <= 0) return 0;
    __int128 num = static_cast<__int128>(cycles) * g.memory_clock_khz;
    return static_cast<int64_t>((num + g.gpu_clock_khz - 1) / g.gpu_clock_khz);
}

int64_t partition_of(int64_t addr, const GpuConfig& g) {
    int64_t rel = addr - g.base_address;
    if (mutant(GPU_NO_PAGE_ROTATION))
        return floormod(floordiv(rel, g.partition_bytes), g.partitions);
    return floormod(floordiv(rel, g.partition_bytes) + floordiv(rel, PAGE_BYTES), g.partitions);
}

}  // namespace hbf
