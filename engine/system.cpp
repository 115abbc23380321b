// The system layer and the reference loop of the one timing contract (§2, §16, C3):
// model/system.py and model/loop.py, function for function.
#include "system.hpp"

#include <new>
#include <string>

#include "mutants.hpp"

namespace hbf {

constexpr size_t ROUTE_DEPTH = 2;   // the system's ingress queue in front of the route stage

System::System(const SystemConfig& scfg, const ControllerConfig& ccfg, const MediaConfig& mcfg,
               const MapperConfig& mapcfg)
    : cfg(scfg), mapper(mapcfg) {
    pending.mode = Retire::Free;
    for (int s = 0; s < cfg.stacks; ++s) {
        stacks.push_back(std::make_unique<StackController>(ccfg, mcfg, s, reqs));
        stack_ptrs_.push_back(stacks.back().get());
    }
    if (cfg.channel_ports) {
        port_in_.resize(cfg.stacks * cfg.channels);
        port_in_set_.assign(cfg.stacks, 0);
    }
}

namespace {
// submit()'s checks of one request: its op, its address inside the HBF range (rel, from the
// base address, below `capacity`), its size inside its page and its arrival not before
// `last`; std::invalid_argument names it by the id that `id_of()` gives (read on an error).
template <class IdOf>
[[gnu::always_inline]] inline void check_request(IdOf id_of, int8_t op, int64_t addr,
                                                 int64_t rel, int64_t capacity, int64_t nbytes,
                                                 int64_t arrival, int64_t last) {
    auto who = [&id_of]() { return "request " + std::to_string(id_of()) + ": "; };
    if (op != OP_R && op != OP_W) throw std::invalid_argument(who() + "op must be R or W");
    int64_t off = floormod(rel, PAGE_BYTES);
    if (!(0 <= rel && rel < capacity))
        throw std::invalid_argument(who() + "address " + std::to_string(addr)
                                    + " is outside the HBF range");
    if (!(1 <= nbytes && nbytes <= PAGE_BYTES - off))
        throw std::invalid_argument(who() + "size " + std::to_string(nbytes)
                                    + " is not 1.." + std::to_string(PAGE_BYTES - off)
                                    + " bytes inside its page");
    if (arrival < last)
        throw std::invalid_argument(who() + "arrival tick " + std::to_string(arrival)
                                    + " is earlier than the previous request's "
                                    + std::to_string(last));
}
}  // namespace

// submit()'s body: the checks, then the request queued at its port (its submission number
// and arrival); a stream's rows are queued by submit_stream instead.
void System::submit(int64_t id, int8_t op, int64_t addr, int64_t nbytes, int64_t arrival,
                    int64_t port, int64_t source) {
    int64_t rel = addr - cfg.base_address;
    check_request([id]() { return id; }, op, addr, rel, cfg.capacity_bytes, nbytes, arrival,
                  last_arrival);
    if (inputs_done) throw std::invalid_argument("submit() after close_input()");
    auto [stack, q] = mapper.stack_of(floordiv(rel, PAGE_BYTES));
    auto [ch, local, sub] = mapper.channel_of(q, op == OP_W);
    if (cfg.channel_ports) {
        int64_t k = stack * cfg.channels + ch;
        if (port >= 0 && port != k)
            throw std::invalid_argument("request " + std::to_string(id) + ": presented on port "
                                        + std::to_string(port) + ", but its page maps to port "
                                        + std::to_string(k) + " (stack " + std::to_string(stack)
                                        + ", channel " + std::to_string(ch) + ")");
    } else if (port > 0) {
        throw std::invalid_argument("request " + std::to_string(id) + ": presented on port "
                                    + std::to_string(port) + " of a system with one request port");
    }
    last_arrival = arrival;
    if (first_arrival < 0) first_arrival = arrival;
    pending.push_back(Pending{id, addr, static_cast<int32_t>(nbytes),
                              static_cast<int32_t>(source), op});
    enqueue_submitted(stack, ch, arrival, submitted++);
}

// A submitted request into its system request port's queue (the channel shape: port
// stack * C + ch) or the one ingress queue.
[[gnu::always_inline]] inline void System::enqueue_submitted(int64_t stack, int64_t ch,
                                                             int64_t arrival, int64_t seq) {
    ++stacks[stack]->ch_requests[ch];
    if (cfg.channel_ports) {
        port_in_[stack * cfg.channels + ch].push_back(arrival, seq);
        port_in_set_[stack] |= bit(ch);
        ++port_in_count_;
    } else {
        ingress_.push_back(arrival, seq);
    }
}

// Every row of a stream, as submit() one by one would take them, in two passes: the checks
// of all rows first (the first refused row is named as submit() names it, and nothing is
// queued then), then the queueing, which has nothing left to refuse (a stream names no
// port). Each pass holds fewer values than one loop doing both would, so fewer of them
// leave the registers (docs/engine.md, tenth round).
void System::submit_stream(const StreamColumns& columns, const int64_t* arrival, int64_t n) {
    const int64_t base = cfg.base_address, capacity = cfg.capacity_bytes;
    int64_t last = last_arrival;
    for (int64_t i = 0; i < n; ++i) {
        int64_t addr = columns.addr[i];
        check_request([&columns, i]() { return columns.id ? columns.id[i] : i; },
                      columns.op[i], addr, addr - base, capacity, columns.nbytes[i], arrival[i],
                      last);
        last = arrival[i];
    }
    if (n > 0 && inputs_done) throw std::invalid_argument("submit() after close_input()");
    stream = &columns;
    const int64_t seq0 = submitted;
    mapper.map_rows(columns.addr, columns.op, n,
                    [this, arrival, seq0](int64_t i, int64_t stack, int64_t, int64_t ch,
                                          int64_t, int64_t) {
                        enqueue_submitted(stack, ch, arrival[i], seq0 + i);
                    });
    submitted = seq0 + n;
    if (n > 0) {
        if (first_arrival < 0) first_arrival = arrival[0];
        last_arrival = last;
    }
}

// The system accepts submitted request `seq` in cycle t: its record is written, in a free
// slot, from what the submission gave and its mapping; the slot's index. Inline in the
// ingress (once per request). Two kinds of field are left unwritten, as nothing reads them:
// a whole run's stream keeps each request's id, address, arrival and source in its own
// columns (the run's rows are the outputs alone: WholeOutputs(n, false)); and the fields
// that a stage writes before the response (t_map at dispatch, tq, ti, tc, entry_depth and
// the error at K, t_done at the handshake, depth at the accept) keep what the slot held.
[[gnu::always_inline]] inline int64_t System::take(int64_t seq, int64_t arrival, int64_t t) {
    int64_t i = reqs.acquire();
    Req& r = reqs[i];
    int64_t addr;
    int8_t op;
    if (stream) {
        addr = stream->addr[seq];
        op = stream->op[seq];
        r.nbytes = static_cast<int16_t>(stream->nbytes[seq]);
    } else {
        const Pending& p = pending[seq];
        addr = p.addr;
        op = p.op;
        r.nbytes = static_cast<int16_t>(p.nbytes);
        r.id = p.id;
        r.addr = p.addr;
        r.arrival = arrival;
        r.source = p.source;
        pending.retire(seq);               // nothing reads it again
    }
    int64_t rel = addr - cfg.base_address;
    int64_t page = floordiv(rel, PAGE_BYTES);
    auto [stack, q] = mapper.stack_of(page);
    auto [ch, local, sub] = mapper.channel_of(q, op == OP_W);
    r.seq = seq;
    r.op = op;
    r.off = static_cast<int16_t>(floormod(rel, PAGE_BYTES));
    r.stack = static_cast<int32_t>(stack);
    r.q = q;
    r.ch = static_cast<int32_t>(ch);
    r.local = local;
    r.sub = static_cast<int32_t>(sub);
    r.t_accept = t;
    r.mshr_hit = r.buffer_hit = r.cache_hit = r.error = false;   // set only when true
    return i;
}

// responded()'s observers of an answered request: the callback, then the progress call.
void System::observe(int64_t r, int64_t tk) {
    if (user_cb) user_cb(r, tk);
    if (progress_every > 0 && ++since_progress_ == progress_every) {   // no division
        since_progress_ = 0;
        progress(n_done);
    }
}

// responded()'s record to the sink's batch (a run without rows).
void System::to_sink(int64_t r) {
    answered.push_back(reqs[r]);
    reqs.release(r);
    if (static_cast<int64_t>(answered.size()) >= sink_every) flush();
}

void System::flush() {
    if (answered.empty()) return;
    sink(answered);
    answered.clear();
}

// run_pipelined: one cycle in §16's order; a cycle in which nothing changed is followed by
// the next tick at which something can (C3).
int64_t System::run(int64_t until) {
    t_resume = -1;
    observed_ = user_cb || progress_every > 0;
    // the stacks as plain pointers, held in locals: the loop's calls cannot change them
    StackController* const* const s0 = stack_ptrs_.data();
    StackController* const* const s1 = s0 + stack_ptrs_.size();
    while (true) {
        if (until >= 0 && t > until) {
            t_resume = t;                // busy through until: resume in the next cycle
            break;
        }
        ++steps;
        // 1. E handshakes, one per system response port
        bool busy = egress(t);
        // the drain input of this cycle, raised at the end of an earlier cycle
        bool drain = drain_at >= 0 && t >= drain_at;
        for (auto* sp = s0; sp != s1; ++sp) {
            StackController* s = *sp;
            // 2. K launches, R, C2, C1; completions free their subarrays for the issue
            // decisions of this cycle; enqueue
            s->drain_in = drain;
            busy |= s->respond_stages(t);
            busy |= s->release_media(t);
            busy |= s->issue(t);
            busy |= s->enqueue(t);
        }
        // 3. dispatch from every M
        for (auto* sp = s0; sp != s1; ++sp) busy |= (*sp)->dispatch(t, drain);
        // 4. accepts from start-of-cycle occupancy, then queue heads into M
        busy |= ingress(t);
        for (auto* sp = s0; sp != s1; ++sp) busy |= (*sp)->advance(t);
        // (the cheapest test that fails while requests wait comes first)
        if (port_in_count_ == 0 && ingress_.empty() && inputs_done && drain_at < 0
                && route_.empty()) {
            bool holds = false;
            for (auto* sp = s0; sp != s1; ++sp) holds = holds || (*sp)->holds_requests();
            if (!holds) drain_at = t + 1;
        }
        // 5. flush decisions, MSHR completions into RETURN, end of cycle
        for (auto* sp = s0; sp != s1; ++sp) {
            StackController* s = *sp;
            busy |= s->wb_triggers(t, drain);
            busy |= s->complete_entries(t);
            s->end_cycle(t);
        }
        if (busy) {
            ++t;
            continue;
        }
        int64_t nxt = next_tick(t);
        if (nxt < 0) break;
        if (until >= 0 && nxt > until) {
            // the cycles until + 1 .. nxt - 1 are no-ops (C3): a driver resumes at until + 1,
            // or at nxt unless an event of its own comes first (model/loop.py)
            t = until + 1;
            t_resume = nxt;
            break;
        }
        t = nxt;
    }
    return t;
}

// The request side in cycle t (§2, §4.1): one stack, a wire; several, the 2-entry ingress
// queue and the route stage.
bool System::ingress(int64_t tk) {
    if (cfg.channel_ports) return ingress_ports(tk);
    if (stacks.size() == 1) {
        if (!ingress_.empty() && ingress_.front_arrival() <= tk && stacks[0]->ready()) {
            int64_t r = take(ingress_.front(), ingress_.front_arrival(), tk);
            ingress_.pop_front();
            stacks[0]->accept(r, tk, 0);
            return true;
        }
        return false;
    }
    bool changed = false;
    bool ready = route_.size() < ROUTE_DEPTH;          // occupancy at the start of the cycle
    if (!route_.empty()) {
        auto& s = stacks[reqs[route_.front()].stack];
        if (s->ready()) {
            s->accept(route_.front(), tk, 0);
            route_.pop_front();
            changed = true;
        }
    }
    if (ready && !ingress_.empty() && ingress_.front_arrival() <= tk) {
        int64_t r = take(ingress_.front(), ingress_.front_arrival(), tk);
        ingress_.pop_front();
        route_.push_back(r);
        changed = true;
    }
    return changed;
}

// The response side in cycle t: E's head handshakes (resp.ready is high in an open-loop
// run); with several stacks in the stack shape, round robin over the non-empty Es.
bool System::egress(int64_t tk) {
    if (cfg.channel_ports) return egress_ports(tk);
    size_t n = stacks.size();
    if (n == 1) {
        if (stacks[0]->inp[0].egress.empty()) return false;
        responded(stacks[0]->handshake(tk, 0), tk);
        return true;
    }
    for (size_t k = 0, i = static_cast<size_t>(rr); k < n; ++k, i = i + 1 == n ? 0 : i + 1) {
        if (!stacks[i]->inp[0].egress.empty()) {       // from rr on, wrapping (no division)
            responded(stacks[i]->handshake(tk, 0), tk);
            rr = static_cast<int64_t>(i + 1 == n ? 0 : i + 1);
            return true;
        }
    }
    return false;
}

// The channel shape's request side: system port k = stack * C + p is port p of its stack;
// each accepts its head if it has arrived and the port is ready from start-of-cycle state.
bool System::ingress_ports(int64_t tk) {
    if (port_in_count_ == 0) return false;     // no port holds a request
    int64_t C = cfg.channels;
    bool changed = false;
    for (auto& s : stacks) {
        // the admission slots free at the start of the cycle (before the first accept):
        // while they admit no port, no head is looked at (an admission-bound stream's
        // every other cycle)
        int64_t free = s->cfg.admission - s->inflight;
        if (s->admits_none(free)) continue;
        int64_t base = s->stack * C;
        uint64_t& held = port_in_set_[s->stack];
        for (uint64_t ps = held; ps; ps &= ps - 1) {   // the ports holding a request
            int64_t p = lowest(ps);
            auto& q = port_in_[base + p];
            if (q.front_arrival() > tk) continue;
            if (s->ready_port(p, tk, free)) {
                int64_t r = take(q.front(), q.front_arrival(), tk);
                q.pop_front();
                if (q.empty()) held &= ~bit(p);
                --port_in_count_;
                s->accept(r, tk, p);
                changed = true;
            }
        }
    }
    return changed;
}

bool System::egress_ports(int64_t tk) {
    bool changed = false;
    for (auto& s : stacks) {
        for (uint64_t ps = s->egress_set; ps; ps &= ps - 1) {   // the ports whose E holds one
            responded(s->handshake(tk, lowest(ps)), tk);
            changed = true;
        }
    }
    return changed;
}

// After a cycle that changed nothing: the next tick at which something can (C3); -1 when
// nothing is left; DeadlockError when work is left that no event can release.
int64_t System::next_tick(int64_t tk) {
    int64_t nxt = -1;
    auto take = [&nxt](int64_t v) { if (v >= 0 && (nxt < 0 || v < nxt)) nxt = v; };
    for (auto& s : stacks) take(s->next_timer(tk));
    if (!ingress_.empty() && ingress_.front_arrival() > tk) take(ingress_.front_arrival());
    int64_t C = cfg.channels;
    for (size_t s = 0; port_in_count_ > 0 && s < port_in_set_.size(); ++s) {
        for (uint64_t ps = port_in_set_[s]; ps; ps &= ps - 1) {
            int64_t p = lowest(ps);
            int64_t a = port_in_[s * C + p].front_arrival();
            take(a > tk ? a : stacks[s]->rank_tick(tk, p));
        }
    }
    if (drain_at >= 0 && drain_at > tk) take(drain_at);
    if (nxt < 0 && (!ingress_.empty() || n_done < submitted || port_in_count_ > 0))
        throw DeadlockError("deadlock at tick " + std::to_string(tk) + ": "
                            + std::to_string(submitted - n_done)
                            + " requests open");
    return nxt;
}

}  // namespace hbf
