// The GPU side of the closed loop: kernel launch, warp issue into the memory sub-partition
// FIFOs, the response return path and what a run produces. The C++ mirror of
// model/gpu_issue.py's _GpuCore as the stepped port (gpu_port.cpp) uses it; ClosedLoop's
// chunked driver (model/gpu.py) needs the controller and waits for it (docs/engine.md).
// docs/gpu.md G1-G6.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fifo.hpp"
#include "gpu_config.hpp"
#include "gpu_program.hpp"
#include "mapping.hpp"
#include "retiring_table.hpp"

namespace hbf {

constexpr int64_t LAUNCH = 0;   // heap event kind 0 launches; n > 0 lets a producer issue n

// One GPU event (tick, seq, kind, producer), in (tick, seq) order as gpu_issue.py's heap.
struct GpuEvent {
    int64_t tick, seq, kind, producer;
};

// The GPU's pending events in (tick, seq) order, as gpu_issue.py's heap pops them: a binary
// heap, beside a FIFO that takes every event pushed at or after the tick of the last one it
// holds (seq grows with each push, so the FIFO stays in order: a closed loop's releases,
// pushed as responses come, in tick order). A pop takes the earlier of the two heads, so
// the order is the one heap's; most pushes and pops cost O(1) instead of O(log n).
class EventQueue {
public:
    bool empty() const { return heap_.empty() && fifo_.empty(); }
    int64_t front_tick() const { return first().tick; }    // only when !empty()
    void push(const GpuEvent& e) {                          // e.seq above every queued one
        if (fifo_.empty() || e.tick >= fifo_.back().tick) {
            fifo_.push_back(e);
        } else {
            heap_.push_back(e);
            std::push_heap(heap_.begin(), heap_.end(), later);
        }
    }
    GpuEvent pop() {                                        // only when !empty()
        if (!fifo_.empty() && (heap_.empty() || !later(fifo_.front(), heap_.front()))) {
            GpuEvent e = fifo_.front();
            fifo_.pop_front();
            return e;
        }
        std::pop_heap(heap_.begin(), heap_.end(), later);
        GpuEvent e = heap_.back();
        heap_.pop_back();
        return e;
    }

private:
    static bool later(const GpuEvent& a, const GpuEvent& b) {
        return a.tick != b.tick ? a.tick > b.tick : a.seq > b.seq;
    }
    const GpuEvent& first() const {
        if (heap_.empty()) return fifo_.front();
        if (fifo_.empty()) return heap_.front();
        return later(fifo_.front(), heap_.front()) ? heap_.front() : fifo_.front();
    }
    Fifo<GpuEvent> fifo_;
    std::vector<GpuEvent> heap_;
};

struct KernelResult {
    int64_t launch = -1, end = -1, requests = 0, producers = 0;
};

// GpuResult's integer figures (the Python wrapper adds the clock conversions).
struct GpuResultFigures {
    int64_t start_tick, end_tick, span_ticks, requests, reads, writes;
    int64_t gpu_latency_sum, gpu_latency_max, partition_wait_sum, partition_wait_max;
    int64_t peak_outstanding, bound_violations;
    std::vector<KernelResult> kernels;
};

// A program pulled one kernel at a time, for a long run in bounded memory: has_next() says
// whether another kernel follows (asked when a kernel launches, as _GpuCore pulls its next
// kernel), load(into) fills `into` with that kernel alone (offsets from 0). The accesses of
// the kernels before are dropped when the next launches (its barrier answered them all).
struct ProgramFeed {
    std::function<bool()> has_next;
    std::function<void(GpuProgram&)> load;
};

// One GPU request from its grant to its response: what the response path reads (ids in
// creation order). The request's access fields travel in its partition FIFO entry and its
// grant (Queued, Grant), so the record stays small and nothing re-reads the program.
struct GpuReq {
    int64_t created;
    int32_t producer;
    bool open;
};

// One grant of a tick (G5, G5'): the system port, the request and the fields the system's
// submission takes (the access's op, address and size, the request's sub-partition).
struct Grant {
    int64_t port, id, created, addr;
    int32_t nbytes, part;
    int8_t op;
};

class GpuCore {
public:
    // channel_shape: G5' (one grant per system port per tick; the channel shape, host_ports =
    // channel); mapper: the system's mapping, used for G5' only; ports = stacks * channels.
    // With a feed, `program` must be empty and the kernels come from the feed.
    GpuCore(const GpuConfig& gpu, GpuProgram program, bool channel_shape,
            const MapperConfig& mapper, ProgramFeed feed = {});

    // ---- per request (ids in creation order)
    int64_t requests() const { return next_id_; }
    // the accesses of the kernels loaded (a program given whole: all its requests)
    int64_t accesses() const { return prog_.producer_accesses.back(); }
    // an access of a kernel loaded now (every access of a program given whole)
    int64_t acc_op(int64_t a) const { return prog_.access_op[a - acc_base_]; }
    int64_t acc_addr(int64_t a) const { return prog_.access_addr[a - acc_base_]; }
    int64_t acc_nbytes(int64_t a) const { return prog_.access_nbytes[a - acc_base_]; }
    // retire each request's state once it is answered (Retire::Free; block size 2**shift)
    void retire_requests(Retire mode, int shift) {
        reqs_.set_block_shift(shift);
        reqs_.mode = mode;
    }
    int64_t request_blocks_held() const { return reqs_.blocks_held(); }
    const GpuConfig& gpu() const { return gpu_; }
    bool channel_shape() const { return channel_shape_; }
    int64_t ret_ticks() const { return ret_; }
    int64_t producer_cticks(int64_t p) const { return p_cticks_[p]; }

    GpuResultFigures result(int64_t start) const;

    // With keep_answered, every answered request's record (creation tick, producer) is
    // appended to `answered` in response order (the reference's record=True RequestRecords,
    // built by the caller, which empties it).
    bool keep_answered = false;
    std::vector<GpuReq> answered;

protected:
    void grant_ports(int64_t x, std::vector<Grant>& out);

    void on_response(int64_t id, int64_t t);
    void kernel_end(int64_t k, int64_t t);
    void launch(int64_t now);
    bool inputs_exhausted() const;
    void issue(int64_t p, int64_t n, int64_t x);
    void heap_push(int64_t tick, int64_t kind, int64_t p);
    GpuEvent heap_pop();
    int64_t port_of(int64_t access) const;
    // kernels known: loaded, and the next one if the feed has it
    int64_t known_kernels() const { return prog_.kernels() + (next_exists_ ? 1 : 0); }
    void load_kernel();

    GpuConfig gpu_;
    GpuProgram prog_;
    ProgramFeed feed_;
    bool next_exists_ = false;        // the feed has a kernel after the loaded ones
    int64_t acc_base_ = 0;            // prog_.access_* hold the accesses from this one on
    bool channel_shape_;
    Mapper mapper_;
    int64_t C_;
    int64_t ret_, launch_gap_;
    EventQueue heap_;
    int64_t seq_ = 0;
    // the partition FIFOs: each request with its system port (G5' reads each head's port
    // every tick) and the fields its grant hands on (not read from a record)
    struct Queued {
        int64_t id, created, addr;
        int32_t port, nbytes;
        int8_t op;
    };
    // partition i's head granted on system port k in tick x (both shapes)
    void grant_head(int64_t i, int64_t k, int64_t x, std::vector<Grant>& out);
    std::vector<Fifo<Queued>> parts_;
    int64_t queued_ = 0, rr_ = 0;
    std::vector<int64_t> prr_;
    int64_t next_id_ = 0;
    int64_t cur_ = -1;            // the running kernel, -1 before the first launch
    int64_t next_kernel_ = 0;     // the kernel the next launch starts (kernels(): none)
    int64_t n_kernels_ = 0;
    bool closed_ = false;
    int64_t reads_ = 0, writes_ = 0, lat_sum_ = 0, lat_max_ = 0, pw_sum_ = 0, pw_max_ = 0;
    int64_t peak_ = 0, violations_ = 0, end_tick_ = -1;
    // producers
    std::vector<int64_t> p_out_, p_peak_, p_issued_, p_cticks_, p_nxt_, p_kernel_;
    // kernels
    std::vector<KernelResult> k_res_;
    std::vector<int64_t> k_live_, k_feeding_;
    // requests
    RetiringTable<GpuReq> reqs_;
    // grant_ports scratch: per port the best partition of this tick (-1: none) and its
    // distance from the port's pointer; the ports with a candidate, as bits (64 a word)
    std::vector<int64_t> g_best_, g_dist_;
    std::vector<uint64_t> g_ports_;
};

}  // namespace hbf
