// The closed-loop GPU stepped one tick at a time: the C++ mirror of model/gpu_port.py.
#include "gpu_port.hpp"

#include <string>

#include "mutants.hpp"

namespace hbf {

GpuPort::GpuPort(const GpuConfig& gpu, GpuProgram program, bool channel_shape,
                 const MapperConfig& mapper, int64_t start, ProgramFeed feed)
    : GpuCore(gpu, std::move(program), channel_shape, mapper, std::move(feed)), start_(start),
      t_(start - 1) {
    if (known_kernels() == 0)
        closed_ = true;
    else
        heap_push(start, LAUNCH, -1);
}

bool GpuPort::finished() const {
    return closed_ && heap_.empty() && next_kernel_ >= known_kernels() &&
           (cur_ < 0 || k_live_[cur_] == 0);
}

int64_t GpuPort::next_tick() const {
    if (queued_) return t_ + 1;
    return heap_.empty() ? NO_TICK : heap_.front_tick();
}

void GpuPort::grants(int64_t t, std::vector<Grant>& out) {
    out.clear();
    int64_t nxt = next_tick();
    if (t <= t_ || (nxt != NO_TICK && nxt < t))
        throw GpuError("internal: GPU port stepped to tick " + std::to_string(t) +
                       " after tick " + std::to_string(t_) + " with tick " +
                       (nxt == NO_TICK ? std::string("None") : std::to_string(nxt)) +
                       " pending");
    t_ = t;
    while (!heap_.empty() && heap_.front_tick() <= t) {
        GpuEvent e = heap_pop();
        if (e.kind == LAUNCH)
            launch(t);
        else
            issue(e.producer, e.kind, t);
    }
    if (queued_ && channel_shape_) {
        grant_ports(t, out);
    } else if (queued_) {
        // G5: one grant per tick, round-robin over the partitions
        int64_t n = gpu_.partitions, i = rr_;
        while (parts_[i].empty()) i = i + 1 < n ? i + 1 : 0;
        rr_ = mutant(GPU_RR_STAYS) ? i : (i + 1 < n ? i + 1 : 0);
        grant_head(i, 0, t, out);
    }
    if (!closed_ && inputs_exhausted()) closed_ = true;
}

void GpuPort::respond(int64_t id, int64_t t) {
    if (t < t_)
        throw GpuError("internal: a response of tick " + std::to_string(t) +
                       " reported after GPU tick " + std::to_string(t_) + " was handled");
    on_response(id, t);
}

}  // namespace hbf
