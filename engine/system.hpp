// The system layer and the run loop of the one timing contract (docs/timing-contract.md §2,
// §16, C3): stack routing, the system's request and response ports in both host-port shapes
// and the reference loop in §16's phase order with event skipping. The C++ mirror of
// model/system.py's HbfSystem (submit, _responded, _next_tick) and model/loop.py's
// run_pipelined, _ingress, _egress, _ingress_ports, _egress_ports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "controller/megaplane.hpp"
#include "controller/stack_controller.hpp"
#include "fifo.hpp"
#include "mapping.hpp"
#include "retiring_table.hpp"

namespace hbf {

struct DeadlockError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A submitted request until the system accepts it (its record is written then): what the
// submission gave, by submission number. The mapping is computed again at the accept.
struct Pending {
    int64_t id, addr;
    int32_t nbytes, source;
    int8_t op;
};

// Requests waiting at a system request port, in arrival order, each with its arrival tick
// (read every cycle without touching the request's record): an array read from a head
// index, compacted once the read part dominates (a deque's chunks cost more per cycle). The
// array is plain memory grown by realloc (a large one is remapped, not copied) and the push
// is inline, its growth out of line.
class ArrivalQueue {
public:
    ArrivalQueue() = default;
    ArrivalQueue(ArrivalQueue&& o) noexcept { swap(o); }
    ArrivalQueue& operator=(ArrivalQueue&& o) noexcept { swap(o); return *this; }
    ArrivalQueue(const ArrivalQueue&) = delete;
    ArrivalQueue& operator=(const ArrivalQueue&) = delete;
    ~ArrivalQueue() { std::free(v_); }

    bool empty() const { return head_ == n_; }
    int64_t front() const { return v_[head_].seq; }          // the submission number
    int64_t front_arrival() const { return v_[head_].arrival; }
    void push_back(int64_t arrival, int64_t r) {
        if (n_ == cap_) grow();
        v_[n_++] = Item{arrival, r};
    }
    void pop_front() {
        if (++head_ == n_) {
            head_ = n_ = 0;
        } else if (head_ >= 4096 && 2 * head_ >= n_) {
            std::memmove(v_, v_ + head_, (n_ - head_) * sizeof(Item));
            n_ -= head_;
            head_ = 0;
        }
    }

private:
    struct Item { int64_t arrival, seq; };
    [[gnu::noinline]] void grow() {
        size_t cap = cap_ ? 2 * cap_ : 64;
        void* p = std::realloc(v_, cap * sizeof(Item));
        if (!p) throw std::bad_alloc();
        v_ = static_cast<Item*>(p);
        cap_ = cap;
    }
    void swap(ArrivalQueue& o) noexcept {
        std::swap(v_, o.v_);
        std::swap(n_, o.n_);
        std::swap(cap_, o.cap_);
        std::swap(head_, o.head_);
    }

    Item* v_ = nullptr;
    size_t n_ = 0, cap_ = 0, head_ = 0;
};

struct SystemConfig {
    int64_t stacks, channels, capacity_bytes, base_address;
    bool channel_ports;          // host_ports = "channel": S * C ports, k = stack * C + ch
};

class System {
public:
    System(const SystemConfig& scfg, const ControllerConfig& ccfg, const MediaConfig& mcfg,
           const MapperConfig& mapcfg);

    // Queue a request (arrival order); std::invalid_argument names it if bad. In the
    // channel shape a port >= 0 given is checked against the request's mapped port.
    // `source` is carried to the outputs (the trace's source column).
    void submit(int64_t id, int8_t op, int64_t addr, int64_t nbytes, int64_t arrival,
                int64_t port = -1, int64_t source = 0);
    void close_input() { inputs_done = true; }
    // to completion, or through tick `until` (>= 0); returns the tick it stopped at
    int64_t run(int64_t until = -1);
    // called with (slot, tick) after each response, before the slot is reused
    // (HbfSystem's on_response)
    std::function<void(int64_t, int64_t)> user_cb;
    // called with the count of responses after every `progress_every`-th response (0: never):
    // the caller's progress bar; it observes the run and changes no event
    std::function<void(int64_t)> progress;
    int64_t progress_every = 0;
    // The outputs: every answered request's record is copied, in response order, into
    // `answered` and handed to `sink` each time it holds sink_every of them (and by the
    // caller at the end: flush()); its slot is then reused. The caller sets both.
    std::function<void(std::vector<Req>&)> sink;
    int64_t sink_every = 1;
    std::vector<Req> answered;
    void flush();

    SystemConfig cfg;
    Mapper mapper;
    ReqTable reqs;                  // the accepted requests' records, by slot
    RetiringTable<Pending> pending; // the submitted ones until accepted, by submission number
    std::vector<std::unique_ptr<StackController>> stacks;
    // after run(until): the next cycle that can change state (-1: none); HbfSystem.t_resume
    int64_t t_resume = -1;
    int64_t t = 0, rr = 0, drain_at = -1, last_arrival = 0, first_arrival = -1;
    int64_t n_done = 0, last_completion = 0, errors = 0, steps = 0, submitted = 0;
    bool inputs_done = false;

private:
    int64_t take(int64_t seq, int64_t arrival, int64_t t);
    void responded(int64_t r, int64_t t);
    bool ingress(int64_t t);
    bool egress(int64_t t);
    bool ingress_ports(int64_t t);
    bool egress_ports(int64_t t);
    int64_t next_tick(int64_t t);

    std::vector<StackController*> stack_ptrs_;   // stacks[i].get(), for the run loop
    ArrivalQueue ingress_;
    Fifo<int64_t> route_;
    std::vector<ArrivalQueue> port_in_;
    std::vector<uint64_t> port_in_set_;     // per stack, the ports whose queue holds one
    int64_t port_in_count_ = 0;
};

}  // namespace hbf
