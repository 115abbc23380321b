// The closed-loop GPU stepped one tick at a time, for any controller: the C++ mirror of
// model/gpu_port.py's GpuPort. The narrow event API the compiled controller will call:
// next_tick, grants(t), respond(id, t), exhausted, finished, result.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gpu_issue.hpp"

namespace hbf {

constexpr int64_t NO_TICK = -1;   // next_tick's None

class GpuPort : public GpuCore {
public:
    GpuPort(const GpuConfig& gpu, GpuProgram program, bool channel_shape,
            const MapperConfig& mapper, int64_t start, ProgramFeed feed = {});

    bool exhausted() const { return closed_; }
    bool finished() const;
    int64_t next_tick() const;            // NO_TICK while waiting only for responses
    // G5 / G5' grants of tick t, ascending port
    void grants(int64_t t, std::vector<Grant>& out);
    void respond(int64_t id, int64_t t);
    int64_t start_tick() const { return start_; }
    int64_t last_tick() const { return t_; }
    GpuResultFigures result() const { return GpuCore::result(start_); }

private:
    int64_t start_, t_;
};

}  // namespace hbf
