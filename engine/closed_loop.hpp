// The closed loop stepped one tick at a time: the GPU request injection (GpuPort) against
// the compiled system of the one timing contract. The C++ mirror of model/gpu_port.py's
// run_stepped (the reference ClosedLoop must equal; docs/gpu.md).
#pragma once

#include "gpu_port.hpp"
#include "system.hpp"

namespace hbf {

// Run `port`'s program against `sys` to its last barrier, as run_stepped steps it: each
// tick's grants are submitted on their ports, then the system runs through that tick;
// responses reach the port in the tick of their handshake. With `skip`, the ticks in which
// neither the port nor the system has an event are skipped (C3): after a tick with a
// response the next tick is stepped (the port may close its input there); else the next
// tick is the earlier of the port's next_tick and the system's next event. Every event is
// the same as without; only the system's count of evaluated cycles (`steps`) differs.
// Throws GpuError if the GPU waits for a response that no event will bring.
void run_stepped(System& sys, GpuPort& port, bool skip = true);

}  // namespace hbf
