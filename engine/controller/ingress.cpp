// §4.1 ingress and admission, the ingress queue Q and the dispatch register M
// (docs/timing-contract.md; model/controller/ingress.py room, ready, rank_tick,
// accept, advance, holds_requests, per port; accept is inline in stack_controller.hpp).
#include "controller/stack_controller.hpp"

#include "mapping.hpp"
#include "mutants.hpp"

namespace hbf {

// req.ready of the stack shape (P = 1): Q below 2 and inflight below admission.
bool StackController::ready() const {
    return inp[0].qin.size() < INGRESS_DEPTH && inflight < cfg.admission;
}

// §4.1's rule with admission >= P: every port or none, by the count of free slots (else, and
// under the old rule's mutant, the rotating rank).
bool StackController::admits_by_count() const {
    return cfg.admission >= P && !mutant(CTRL_ADMISSION_OLD_RANK);
}

// req[p].ready in cycle t from start-of-cycle state (§4.1), given the free admission slots
// at the start of t: every port while admission - inflight >= P (admission >= P), else the
// ports whose rotating rank (p - t) mod P is below the free slots.
bool StackController::ready_port(int64_t p, int64_t t, int64_t free) const {
    if (inp[p].qin.size() >= INGRESS_DEPTH) return false;
    if (admits_by_count()) return free >= P;
    return floormod(p - t, P) < free;
}

// No port is ready by its admission term in a cycle that starts with `free` slots free
// (ready_port's two rules): none free, or fewer than P while admission >= P. The system's
// ingress then looks at none of the stack's port heads.
bool StackController::admits_none(int64_t free) const {
    if (free <= 0) return true;
    return admits_by_count() && free < P;
}

// After cycle t: the first cycle in which port p is ready by its admission term, if Q has
// room and a slot is free; -1 otherwise (an accept or a handshake, a busy cycle, comes first).
int64_t StackController::rank_tick(int64_t t, int64_t p) const {
    int64_t free = cfg.admission - inflight;
    if (free <= 0 || inp[p].qin.size() >= INGRESS_DEPTH) return -1;
    if (admits_by_count()) return free >= P ? t + 1 : -1;
    for (int64_t u = t + 1; u < t + 1 + P; ++u)
        if (floormod(p - u, P) < free) return u;
    return -1;
}

// Move each port's Q head into its M at the end of cycle t if that M is free.
bool StackController::advance_work(int64_t t) {
    bool changed = false;
    for (uint64_t ps = qin_set & ~m_set; ps; ps &= ps - 1) {   // Q holds one, M is free
        int64_t p = lowest(ps);
        Port& port = inp[p];
        if (port.qin.front().second < t) {
            port.m = port.qin.front().first;
            port.qin.pop_front();
            if (port.qin.empty()) qin_set &= ~bit(p);
            m_set |= bit(p);
            if (reqs[port.m].op == OP_W) m_write_set |= bit(p);
            changed = true;
        }
    }
    return changed;
}

// m_valid: some port's Q or M holds a request (§1, for drain).
bool StackController::holds_requests() const {
    return (m_set | qin_set) != 0;
}

}  // namespace hbf
