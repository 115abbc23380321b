// Stand-in drivers: the C++ mirror of hbfsim/engine_standin.py (see the header).
#include "engine_standin.hpp"

#include <algorithm>
#include <tuple>

namespace hbf {

void media_replay(Media& m, int64_t n, const int64_t* kind, const int64_t* t,
                  const int64_t* ch, const int64_t* sub, const int64_t* op,
                  const int64_t* local, const int64_t* tag, std::vector<int64_t>& log) {
    std::vector<Delivered> out;
    for (int64_t i = 0; i < n; ++i) {
        switch (kind[i]) {
        case 0: {
            int64_t lat = m.issue(t[i], ch[i], sub[i], op[i], local[i], tag[i]);
            log.insert(log.end(), {0, t[i], lat, 0, 0, 0});
            break;
        }
        case 1:
            m.deliver(t[i], out);
            for (auto& d : out) log.insert(log.end(), {1, t[i], d.ch, d.unit, d.tag, d.flags});
            break;
        case 2:
            log.insert(log.end(), {2, t[i], m.backlog(t[i]) ? 1 : 0, 0, 0, 0});
            break;
        default:
            log.insert(log.end(), {3, t[i], m.has_due() ? m.next_due() : -1, 0, 0, 0});
        }
    }
}

void gpu_standin(GpuPort& port, const std::vector<int64_t>& delays,
                 std::vector<int64_t>& log) {
    // pending responses (tick, seq, id), earliest first
    std::vector<std::tuple<int64_t, int64_t, int64_t>> pending;
    auto later = [](const auto& a, const auto& b) { return a > b; };
    std::vector<Grant> granted;
    int64_t seq = 0, nd = static_cast<int64_t>(delays.size());
    while (true) {
        int64_t nt = port.next_tick();
        int64_t nr = pending.empty() ? NO_TICK : std::get<0>(pending.front());
        if (nt == NO_TICK && nr == NO_TICK) break;
        int64_t t = nt == NO_TICK ? nr : (nr == NO_TICK ? nt : std::min(nt, nr));
        if (nt == t) {
            port.grants(t, granted);
            for (const Grant& g : granted) {
                log.insert(log.end(), {0, t, g.port, g.id, g.created, g.part, g.op, g.addr,
                                       g.nbytes});
                pending.emplace_back(t + delays[g.id % nd], seq++, g.id);
                std::push_heap(pending.begin(), pending.end(), later);
            }
        }
        while (!pending.empty() && std::get<0>(pending.front()) == t) {
            std::pop_heap(pending.begin(), pending.end(), later);
            int64_t id = std::get<2>(pending.back());
            pending.pop_back();
            port.respond(id, t);
            log.insert(log.end(), {1, t, id, 0, 0, 0, 0, 0, 0});
        }
    }
}

}  // namespace hbf
