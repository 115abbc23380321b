// serve/characterize.py measure()'s request source, line for line: the bulk submission or
// the closed window refilled from the response callback.
#include "window_source.hpp"

#include <stdexcept>
#include <string>

#include "mutants.hpp"

namespace hbf {

void run_window(System& sys, const RequestList& reqs, int64_t window) {
    if (window < 1)
        throw std::invalid_argument("window must be >= 1, not " + std::to_string(window));
    const int64_t n = reqs.n;
    auto submit = [&](int64_t i, int64_t arrival) {
        sys.submit(reqs.id[i], reqs.op[i], reqs.addr[i], reqs.nbytes[i], arrival, -1,
                   reqs.source[i]);
    };
    if (window >= n) {                     // bulk: every request ready (open loop)
        for (int64_t i = 0; i < n; ++i) submit(i, reqs.arrival[i]);
        sys.close_input();
        sys.run();
        return;
    }
    for (int64_t i = 0; i < window; ++i) submit(i, reqs.arrival[i]);
    int64_t next = window;
    // in the handshake of a response in tick t (§16 1): the next request arrives in t, so
    // the ingress of the same cycle (§16 4) may accept it
    sys.user_cb = [&](int64_t, int64_t t) {
        if (next < n) {
            submit(next++, mutant(WINDOW_ARRIVAL_LATE) ? t + 1 : t);
            if (mutant(WINDOW_CLOSE_EARLY) && next == n) sys.close_input();
        } else if (sys.submitted == n) {
            sys.close_input();
        }
    };
    try {
        sys.run();
    } catch (...) {
        sys.user_cb = nullptr;
        throw;
    }
    sys.user_cb = nullptr;
}

}  // namespace hbf
