// Stand-in drivers for the differential tests and the benchmark: the C++ mirror of
// hbfsim/engine_standin.py. They are not part of the model; they drive one component the
// way a controller would, so that the Python and C++ components can be compared (and
// timed) with no controller: a media command stream replayed call by call, and a GPU port
// answered by a controller that responds after given delays.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu_port.hpp"
#include "media.hpp"

namespace hbf {

// Media stream rows: kind (0 issue, 1 deliver, 2 backlog, 3 next_due), t, ch, sub, op,
// local, tag. Log rows (6 wide): issue [0, t, latency, 0, 0, 0]; one per delivered
// completion [1, t, ch, sub, tag, flags]; backlog [2, t, 0/1, 0, 0, 0];
// next_due [3, t, due or -1, 0, 0, 0].
constexpr int MEDIA_LOG_WIDTH = 6;
void media_replay(Media& m, int64_t n, const int64_t* kind, const int64_t* t,
                  const int64_t* ch, const int64_t* sub, const int64_t* op,
                  const int64_t* local, const int64_t* tag, std::vector<int64_t>& log);

// GPU stand-in controller: every granted request is answered delays[id % n] ticks after
// its grant; the responses of one tick go in (tick, grant order). Log rows (9 wide):
// grant [0, t, port, id, created, partition, op, addr, nbytes]; response [1, t, id, 0, ...].
constexpr int GPU_LOG_WIDTH = 9;
void gpu_standin(GpuPort& port, const std::vector<int64_t>& delays,
                 std::vector<int64_t>& log);

}  // namespace hbf
