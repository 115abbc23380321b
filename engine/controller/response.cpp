// The response side of every port: DP7's registered choice (C1, C2 and the drain cursor per
// table, then R), K's launch under the link credit (§8) and E, the egress queue, with its
// handshake (docs/timing-contract.md; model/controller/response.py respond_stages,
// _port_stages, _launch_port, _form_response, handshake).
#include "controller/stack_controller.hpp"
#include "mutants.hpp"

namespace hbf {

namespace {
// C1's pick from a port's RETURN heap: the lowest index (the mutant: the highest).
int pop_ret(MinHeap<int>& heap) {
    if (mutant(CTRL_C1_HIGHEST)) {
        std::vector<int> all;
        while (!heap.empty()) { all.push_back(heap.top()); heap.pop(); }
        int best = all.back();
        all.pop_back();
        for (int v : all) heap.push(v);
        return best;
    }
    int v = heap.top();
    heap.pop();
    return v;
}
}  // namespace

// Every response port in cycle t: K launches (§8), R moves to K and takes a table's offer,
// then each table's C2 and C1 (DP7), from the start-of-t registers. Entries that entered
// RETURN before t first go to the port that serves them.
bool StackController::respond_stages_work(int64_t t) {
    bool one = P == 1;
    while (!ret_r.empty()) {
        int idx = ret_r.top();
        ret_r.pop();
        int64_t p = one ? 0 : mshr[idx].ch;
        inp[p].ret[MSHR_T].push(idx);
        resp_live_set |= bit(p);
    }
    while (!ret_w.empty()) {
        int idx = ret_w.top();
        ret_w.pop();
        int64_t p = one ? 0 : wb[idx].ch;
        inp[p].ret[WB_T].push(idx);
        resp_live_set |= bit(p);
    }
    bool changed = false, any = resp_live_set != 0;
    int64_t wait = -1;
    bool rev = mutant(CTRL_RESP_PORTS_REVERSED);
    for (uint64_t live = resp_live_set; live; ) {   // the live ports, ascending
        int64_t p = rev ? highest(live) : lowest(live);
        live &= ~bit(p);
        Port& port = inp[p];
        changed |= port_stages(port, t);
        if (!port.k_has && !port.r_has && port.idle()) {
            resp_live_set &= ~bit(p);
        } else if (port.blocked >= 0 && port.k_has) {
            int64_t w = link.wait(entry(port.k_e).ch);
            if (wait < 0 || w < wait) wait = w;
        }
    }
    credit_wait = any ? wait : -1;
    return changed;
}

// K, R, then C2 and C1 of both tables on `port` in cycle t (DP7).
bool StackController::port_stages(Port& port, int64_t t) {
    bool changed = launch_port(port, t);
    bool k_free = !port.k_has;
    bool r_takes = !port.r_has;
    if (!r_takes && k_free) {
        port.k_has = true;                 // at least one cycle in R (DP7)
        port.k_e = port.r_e;
        port.k_i = port.r_i;
        port.r_has = false;
        r_takes = changed = true;
    }
    bool first_taken[2] = {false, false};
    if (r_takes) {
        // the table whose cursor holds an entry, else MSHR, else write buffer (§8)
        int tb = port.cur_e[MSHR_T] >= 0 ? MSHR_T
               : port.cur_e[WB_T] >= 0   ? WB_T
               : port.c2[MSHR_T] >= 0    ? MSHR_T
               : port.c2[WB_T] >= 0      ? WB_T
                                         : -1;
        if (tb >= 0) {
            int ei, i;
            if (port.cur_e[tb] >= 0) {
                ei = port.cur_e[tb];
                i = port.cur_i[tb];
            } else {
                ei = port.c2[tb];
                i = 0;
                first_taken[tb] = true;
            }
            Entry& e = tb == MSHR_T ? mshr[ei] : wb[ei];
            port.r_has = true;
            port.r_e = tb == MSHR_T ? ei : ~ei;
            port.r_i = i;
            // K reads its record a cycle or more later: fetch both of its cache lines now
            const Req* rec = &reqs[e.waiters[i]];
            __builtin_prefetch(rec);
            __builtin_prefetch(reinterpret_cast<const char*>(rec) + 64);
            if (i + 1 < static_cast<int>(e.waiters.size())) {
                port.cur_e[tb] = ei;
                port.cur_i[tb] = i + 1;
            } else {
                port.cur_e[tb] = -1;
            }
            changed = true;
        }
    }
    // C2 and C1 of table tb (a constant in each call: the two tables unrolled)
    auto c_stages = [&port, &changed, &first_taken](int tb) {
        int a = port.c1[tb];
        if (a < 0 && port.c2[tb] < 0 && port.ret[tb].empty()) return;
        bool moves = port.c2[tb] < 0 || first_taken[tb];
        if (moves && (a >= 0 || port.c2[tb] >= 0)) {
            port.c2[tb] = a;               // reads the entry's head, tail and flags
            changed = true;
        }
        if (a < 0 || moves) {              // C1 empty, or its entry moved to C2
            if (!port.ret[tb].empty()) {
                port.c1[tb] = pop_ret(port.ret[tb]);
                changed = true;
            } else if (a >= 0) {
                port.c1[tb] = -1;
                changed = true;
            }
        }
    };
    c_stages(MSHR_T);
    c_stages(WB_T);
    return changed;
}

// K of `port` in cycle t (§8): launch its waiter if E held fewer than EGRESS_DEPTH responses
// at the start of t and the channel's credit is positive, charging the credit.
bool StackController::launch_port(Port& port, int64_t t) {
    if (!port.k_has) return false;
    Entry& e = entry(port.k_e);
    Req& req = reqs[e.waiters[port.k_i]];
    int64_t ch = e.ch;
    if (port.egress.size() + (port.hs_t == t ? 1 : 0) >= EGRESS_DEPTH)
        return false;                      // E full: no credit is charged (§8)
    if (!link.launch(ch, t, req.nbytes)) {
        if (port.blocked < 0) port.blocked = t;
        return false;
    }
    if (port.blocked >= 0) {
        ch_link_stall[ch] += t - port.blocked;
        port.blocked = -1;
    }
    form_response(e, port.k_i, req, port);
    port.k_has = false;
    return true;
}

// Fill req's response flags from its entry and append it to E; after the entry's last
// waiter the entry joins this cycle's frees (DP4).
void StackController::form_response(Entry& e, int64_t i, Req& req, Port& port) {
    req.error = e.flags & FLAG_ERROR;
    if (e.kind == 0) {
        req.buffer_hit = e.flags & FLAG_BUFFER_HIT;
        req.cache_hit = e.cache;
    }
    req.tq = e.tq;
    req.ti = e.ti;
    req.tc = e.tc;
    req.edepth = static_cast<int32_t>(e.depth);
    port.egress.push_back(e.waiters[i]);
    egress_set |= bit(port_index(port));
    if (i + 1 == static_cast<int64_t>(e.waiters.size())) {
        if (e.kind == 0) free_r.push_back(e.idx);
        else free_w.push_back(e.idx);
    }
}

// The ports whose E holds a response (resp[p].valid).
std::vector<int64_t> StackController::egress_heads() const {
    std::vector<int64_t> out;
    for (int64_t p = 0; p < P; ++p)
        if (!inp[p].egress.empty()) out.push_back(p);
    return out;
}

// The resp[port] handshake of its E head in cycle t; it releases the admission slot, usable
// from t + 1 (§8, §4.1). The request answered is returned: the caller, the system's egress,
// hands it on at once (System::responded, the model's on_response), with no callback.
int64_t StackController::handshake(int64_t t, int64_t port) {
    Port& out = inp[port];
    int64_t r = out.egress.front();
    out.egress.pop_front();
    if (out.egress.empty()) egress_set &= ~bit(port);
    out.hs_t = t;
    reqs[r].t_done = t;
    ++released;
    return r;
}

}  // namespace hbf
