// The closed loop stepped one tick at a time: the GPU request injection (GpuPort) against
// the compiled system of the one timing contract. The C++ mirror of model/gpu_port.py's
// run_stepped (the reference ClosedLoop must equal; docs/gpu.md).
#pragma once

#include "gpu_port.hpp"
#include "system.hpp"

namespace hbf {

// Run `port`'s program against `sys` to its last barrier, one tick at a time: each tick's
// grants are submitted on their ports, then the system runs through that tick; responses
// reach the port in the tick of their handshake. Throws GpuError if the GPU waits for a
// response that no event will bring.
void run_stepped(System& sys, GpuPort& port);

}  // namespace hbf
