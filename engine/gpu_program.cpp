// What the GPU runs: the checks of model/gpu_program.py's Producer and Kernel, on the arrays.
#include "gpu_program.hpp"

#include <string>

#include "gpu_config.hpp"

namespace hbf {

namespace {
void need(bool ok, const char* msg) {
    if (!ok) throw GpuError(msg);
}
[[noreturn]] void fail(const std::string& msg) { throw GpuError(msg); }
}  // namespace

void GpuProgram::check() const {
    int64_t nk = kernels(), np = producers();
    int64_t na = static_cast<int64_t>(access_op.size());
    need(static_cast<int64_t>(kernel_producers.size()) == nk + 1,
         "kernel_producers must have kernels + 1 offsets");
    need(static_cast<int64_t>(producer_start.size()) == np &&
         static_cast<int64_t>(producer_compute.size()) == np &&
         static_cast<int64_t>(producer_sm.size()) == np &&
         static_cast<int64_t>(producer_accesses.size()) == np + 1,
         "producer arrays must all have one entry per producer (accesses: producers + 1)");
    need(static_cast<int64_t>(access_addr.size()) == na &&
         static_cast<int64_t>(access_nbytes.size()) == na,
         "access arrays must all have one entry per access");
    need(nk == 0 || (kernel_producers[0] == 0 && kernel_producers[nk] == np),
         "kernel_producers must run from 0 to the number of producers");
    need(producer_accesses[0] == 0 && producer_accesses[np] == na,
         "producer_accesses must run from 0 to the number of accesses");
    // the messages are built only for a failing check (this runs over every access)
    for (int64_t k = 0; k < nk; ++k) {
        if (kernel_producers[k] > kernel_producers[k + 1])
            fail("kernel_producers must not decrease, at kernel " + std::to_string(k));
        if (kernel_compute[k] < 0)
            fail("kernel " + std::to_string(k) + ": compute must be a non-negative integer of "
                 "GPU cycles, not " + std::to_string(kernel_compute[k]));
    }
    for (int64_t p = 0; p < np; ++p) {
        if (producer_accesses[p] > producer_accesses[p + 1])
            fail("producer_accesses must not decrease, at producer " + std::to_string(p));
        if (producer_bound[p] < 1)
            fail("producer " + std::to_string(p) + ": bound must be a positive integer, not " +
                 std::to_string(producer_bound[p]));
        if (producer_start[p] < 0)
            fail("producer " + std::to_string(p) + ": start must be a non-negative integer of "
                 "GPU cycles, not " + std::to_string(producer_start[p]));
        if (producer_compute[p] < COMPUTE_OF_KERNEL)
            fail("producer " + std::to_string(p) + ": compute must be a non-negative integer "
                 "of GPU cycles or -1 (the kernel's), not " +
                 std::to_string(producer_compute[p]));
    }
    for (int64_t a = 0; a < na; ++a)
        if (access_op[a] > 1)
            fail("access " + std::to_string(a) + ": op must be 0 (R) or 1 (W), not " +
                 std::to_string(access_op[a]));
}

}  // namespace hbf
