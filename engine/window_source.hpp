// A closed window of requests against the compiled system: the request source of the serving
// level's HBF characterization (serve/characterize.py measure(outstanding=k)). At most
// `window` requests are open: the first `window` of the list are submitted with their own
// arrival ticks, and each response (in the cycle of its handshake, §16 1) submits the next
// request of the list with arrival = the response's tick, as measure()'s response callback
// does in the golden model; a response after the list is exhausted closes the input (its
// callback's close_input). A window as long as the list is the open loop: every request
// submitted, the input closed, then the run.
#pragma once

#include <cstdint>

#include "system.hpp"

namespace hbf {

// The request list, in submission order (op 0 = R, 1 = W).
struct RequestList {
    const int64_t *id, *addr, *nbytes, *arrival, *source;
    const int8_t* op;
    int64_t n;
};

// Run `reqs` through `sys` to completion with at most `window` (>= 1) open. The system's
// user_cb is the source's for the run (reset after it).
void run_window(System& sys, const RequestList& reqs, int64_t window);

}  // namespace hbf
