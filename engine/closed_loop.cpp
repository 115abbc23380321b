// model/gpu_port.py run_stepped, line for line, and the skip of idle ticks (C3).
#include "closed_loop.hpp"

#include <string>

namespace hbf {

void run_stepped(System& sys, GpuPort& port, bool skip) {
    sys.user_cb = [&](int64_t r, int64_t t) { port.respond(sys.reqs[r].id, t); };
    std::vector<Grant> grants;
    int64_t t = port.start_tick();
    while (true) {
        port.grants(t, grants);
        for (const Grant& g : grants)
            sys.submit(g.id, g.op ? OP_W : OP_R, g.addr, g.nbytes, t,
                       port.channel_shape() ? g.port : -1, g.part);
        sys.t = t;
        if (port.exhausted()) {
            sys.close_input();
            sys.run();
            break;
        }
        int64_t done = sys.n_done;
        sys.run(t);
        int64_t nt = port.next_tick();
        if (nt == NO_TICK && sys.n_done == sys.submitted)
            throw GpuError("closed loop: the GPU waits at tick " + std::to_string(t)
                           + " for a response that no request in the controller will bring");
        if (!skip || sys.n_done != done) {
            ++t;
            continue;
        }
        int64_t next = nt;
        if (sys.t_resume >= 0 && (next == NO_TICK || sys.t_resume < next)) next = sys.t_resume;
        t = next > t + 1 ? next : t + 1;
    }
    sys.user_cb = nullptr;
}

}  // namespace hbf
