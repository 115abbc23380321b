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
#include <initializer_list>
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
// (read every cycle without touching the request's record): blocks of 4,096 items in a
// chain, read from a head pointer and written at a tail pointer held beside the chain, so
// that a push or a pop is a pointer step and a compare. Nothing is moved: no block is
// copied as the queue grows (a grown array was) and no head is compacted away (an array's
// read part was moved down once it dominated); an emptied block is kept as the next one
// to fill (one spare), so a steady queue allocates nothing.
class ArrivalQueue {
public:
    ArrivalQueue() = default;
    ArrivalQueue(ArrivalQueue&& o) noexcept { swap(o); }
    ArrivalQueue& operator=(ArrivalQueue&& o) noexcept { swap(o); return *this; }
    ArrivalQueue(const ArrivalQueue&) = delete;
    ArrivalQueue& operator=(const ArrivalQueue&) = delete;
    ~ArrivalQueue() {
        while (head_blk_) {
            Block* next = head_blk_->next;
            std::free(head_blk_);
            head_blk_ = next;
        }
        std::free(spare_);
    }

    bool empty() const { return head_ == tail_; }
    int64_t front() const { return head_->seq; }          // the submission number
    int64_t front_arrival() const { return head_->arrival; }
    void push_back(int64_t arrival, int64_t r) {
        if (tail_ == tail_end_) link_block();
        *tail_++ = Item{arrival, r};
    }
    void pop_front() {
        ++head_;
        if (head_ == head_end_ && head_ != tail_) next_block();   // the head block is read
    }

private:
    struct Item { int64_t arrival, seq; };
    static constexpr size_t N = 4096;
    struct Block {
        Block* next;
        Item items[N];
    };
    // the tail block is full (or there is none): a block joins the chain, the spare if
    // there is one; an empty queue reads from it too (its head block is read through)
    [[gnu::noinline]] void link_block() {
        Block* b = spare_;
        spare_ = nullptr;
        if (!b) {
            b = static_cast<Block*>(std::malloc(sizeof(Block)));
            if (!b) throw std::bad_alloc();
        }
        b->next = nullptr;
        bool was_empty = empty();
        if (tail_blk_) tail_blk_->next = b;
        else head_blk_ = b;
        tail_blk_ = b;
        tail_ = b->items;
        tail_end_ = b->items + N;
        if (was_empty) {
            if (head_blk_ != b) retire_head();   // now head_blk_ == b
            head_ = b->items;
            head_end_ = b->items + N;
        }
    }
    // the head block is read through and another follows it
    [[gnu::noinline]] void next_block() {
        retire_head();
        head_ = head_blk_->items;
        head_end_ = head_ + N;
    }
    void retire_head() {
        Block* done = head_blk_;
        head_blk_ = done->next;
        if (spare_) std::free(done);
        else spare_ = done;
    }
    void swap(ArrivalQueue& o) noexcept {
        std::swap(head_blk_, o.head_blk_);
        std::swap(tail_blk_, o.tail_blk_);
        std::swap(spare_, o.spare_);
        std::swap(head_, o.head_);
        std::swap(head_end_, o.head_end_);
        std::swap(tail_, o.tail_);
        std::swap(tail_end_, o.tail_end_);
    }

    Block *head_blk_ = nullptr, *tail_blk_ = nullptr, *spare_ = nullptr;
    Item *head_ = nullptr, *head_end_ = nullptr, *tail_ = nullptr, *tail_end_ = nullptr;
};

// The per-request output columns (run_compiled's REQUEST_COLUMNS and the stream's own):
// `put(i, r)` writes request r's fields into row i of every column given (a null column is
// left out: a whole run leaves out the stream's own, a streamed run's caller may name a
// few). A whole run (run_compiled, run_compiled_closed_loop) writes each answered request
// into its row `seq` (its submission number) as it is answered, and `seq` into the response
// order (`write`); its mapping columns (stack, channel, subarray: functions of the address
// and op alone) are filled after the run in one pass over the addresses (`map_later`,
// `fill_mapping`), not copied from each answered record: make bench's streams ran 1-4 %
// faster so (docs/engine.md, ninth round). Not model: the golden model keeps its Request
// objects; the rows hold the same fields.
struct RequestRows {
    int64_t *t_accept = nullptr, *t_map = nullptr, *t_done = nullptr, *depth = nullptr,
            *tq = nullptr, *ti = nullptr, *tc = nullptr, *edepth = nullptr, *stack = nullptr,
            *ch = nullptr, *sub = nullptr;
    bool *mshr_hit = nullptr, *buffer_hit = nullptr, *cache_hit = nullptr, *error = nullptr;
    int64_t *id = nullptr, *arrival = nullptr, *addr = nullptr, *nbytes = nullptr,
            *source = nullptr;
    int8_t* op = nullptr;
    int64_t* order = nullptr;                  // the response order's next row (write)
    // Which groups of columns are all given (`given`, once the columns are set): such a
    // group is written without a test per column, as a whole run's outputs are (its one
    // writer, once per answered request); a group with a column left out tests each.
    enum Group : uint8_t { NONE, SOME, ALL };
    Group outputs = SOME, inputs = SOME;
    bool map_later = false;                    // put() leaves stack, channel, subarray out
    void given() {
        auto group = [](std::initializer_list<const void*> cols) {
            size_t n = 0;
            for (const void* c : cols) n += c != nullptr;
            return n == 0 ? NONE : n == cols.size() ? ALL : SOME;
        };
        outputs = group({t_accept, t_map, t_done, depth, tq, ti, tc, edepth, stack, ch, sub,
                         mshr_hit, buffer_hit, cache_hit, error});
        inputs = group({id, arrival, addr, nbytes, source, op});
    }
    void put(int64_t i, const Req& r) const {
        if (outputs == ALL) put_outputs<false>(i, r);
        else if (outputs == SOME) put_outputs<true>(i, r);
        if (inputs == ALL) put_inputs<false>(i, r);
        else if (inputs == SOME) put_inputs<true>(i, r);
    }
    void write(const Req& r) {
        const int64_t i = r.seq;
        *order++ = i;
        put(i, r);
    }
    // rows 0 .. n-1's mapping columns from their addresses and ops (take()'s mapping)
    void fill_mapping(const Mapper& mapper, const int64_t* addr, const int8_t* op, int64_t n) {
        int64_t *const st = stack, *const c = ch, *const sb = sub;
        mapper.map_rows(addr, op, n, [st, c, sb](int64_t i, int64_t s, int64_t, int64_t k,
                                                  int64_t, int64_t u) {
            if (st) st[i] = s;
            if (c) c[i] = k;
            if (sb) sb[i] = u;
        });
    }

private:
    template <bool Test, class T, class V>
    static void set(T* col, int64_t i, V v) {
        if (!Test || col) col[i] = v;
    }
    // The flags are read before any store: a bool column's store may alias the record's bool
    // flags, so a flag read after one is read again (docs/engine.md, eleventh round).
    template <bool Test>
    void put_outputs(int64_t i, const Req& r) const {
        const bool m = r.mshr_hit, b = r.buffer_hit, c = r.cache_hit, e = r.error;
        set<Test>(t_accept, i, r.t_accept);
        set<Test>(t_map, i, r.t_map);
        set<Test>(t_done, i, r.t_done);
        set<Test>(depth, i, r.depth);
        set<Test>(tq, i, r.tq);
        set<Test>(ti, i, r.ti);
        set<Test>(tc, i, r.tc);
        set<Test>(edepth, i, r.edepth);
        if (!map_later) {
            set<Test>(stack, i, r.stack);
            set<Test>(ch, i, r.ch);
            set<Test>(sub, i, r.sub);
        }
        set<Test>(mshr_hit, i, m);
        set<Test>(buffer_hit, i, b);
        set<Test>(cache_hit, i, c);
        set<Test>(error, i, e);
    }
    template <bool Test>
    void put_inputs(int64_t i, const Req& r) const {
        set<Test>(id, i, r.id);
        set<Test>(arrival, i, r.arrival);
        set<Test>(addr, i, r.addr);
        set<Test>(nbytes, i, r.nbytes);
        set<Test>(source, i, r.source);
        set<Test>(op, i, r.op);
    }
};

// A whole stream the caller holds for the run (run_compiled's arrays): request `seq` is row
// `seq` of each column, so the system reads a request's fields there when it accepts it
// instead of keeping a copy from its submission (Pending). `source` may be null (zeros),
// `id` too (a refused request is then named by its row).
struct StreamColumns {
    const int64_t *id, *addr, *nbytes, *source;
    const int8_t* op;
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
    // Queue every row of a whole stream, as submit() would one by one (`stream`: the
    // system reads the rows again at each accept; they stay alive through the run).
    void submit_stream(const StreamColumns& columns, const int64_t* arrival, int64_t n);
    void close_input() { inputs_done = true; }
    // to completion, or through tick `until` (>= 0); returns the tick it stopped at
    int64_t run(int64_t until = -1);
    // called with (slot, tick) after each response, before the slot is reused
    // (HbfSystem's on_response)
    std::function<void(int64_t, int64_t)> user_cb;
    // called with the count of responses after every `progress_every`-th response (0: never):
    // the caller's progress bar; it observes the run and changes no event
    std::function<void(int64_t)> progress;
    int64_t progress_every = 0;     // set before the run
    // The outputs: with `rows` set, every answered request's record is written into its
    // row as it is answered; else it is copied, in response order, into `answered` and
    // handed to `sink` each time that holds sink_every of them (and by the caller at the
    // end: flush()). Its slot is then reused. The caller sets `rows`, or `sink` and
    // `sink_every`.
    RequestRows* rows = nullptr;
    std::function<void(std::vector<Req>&)> sink;
    int64_t sink_every = 1;
    std::vector<Req> answered;
    void flush();

    SystemConfig cfg;
    Mapper mapper;
    ReqTable reqs;                  // the accepted requests' records, by slot
    RetiringTable<Pending> pending; // the submitted ones until accepted, by submission number
    // set before the first submit: the submitted requests are the stream's rows, in order
    // (submit checks them and queues their numbers; nothing is copied into `pending`)
    const StreamColumns* stream = nullptr;
    std::vector<std::unique_ptr<StackController>> stacks;
    // after run(until): the next cycle that can change state (-1: none); HbfSystem.t_resume
    int64_t t_resume = -1;
    int64_t t = 0, rr = 0, drain_at = -1, last_arrival = 0, first_arrival = -1;
    int64_t n_done = 0, last_completion = 0, errors = 0, steps = 0, submitted = 0;
    bool inputs_done = false;

private:
    // a submitted request into its port's queue (submit, submit_stream's loop)
    void enqueue_submitted(int64_t stack, int64_t ch, int64_t arrival, int64_t seq);
    int64_t take(int64_t seq, int64_t arrival, int64_t t);
    // HbfSystem._responded: the response order and the latency bookkeeping; the record goes
    // to the outputs and its slot is free for the next accept. Inline, its observers and
    // the sink out of line: a whole run with none (make bench's) makes no call here.
    void responded(int64_t r, int64_t tk) {
        ++n_done;
        if (tk > last_completion) last_completion = tk;
        if (reqs[r].error) ++errors;
        if (observed_) observe(r, tk);
        if (!rows) {
            to_sink(r);
            return;
        }
        rows->write(reqs[r]);
        reqs.release(r);                   // nothing reads an answered request again
    }
    void observe(int64_t r, int64_t tk);
    void to_sink(int64_t r);
    bool ingress(int64_t t);
    bool egress(int64_t t);
    bool ingress_ports(int64_t t);
    bool egress_ports(int64_t t);
    int64_t next_tick(int64_t t);

    std::vector<StackController*> stack_ptrs_;   // stacks[i].get(), for the run loop
    int64_t since_progress_ = 0;                 // responses since the last progress call
    ArrivalQueue ingress_;
    Fifo<int64_t> route_;
    std::vector<ArrivalQueue> port_in_;
    std::vector<uint64_t> port_in_set_;     // per stack, the ports whose queue holds one
    int64_t port_in_count_ = 0;
    bool observed_ = false;     // a user_cb or a progress call (run() sets it)
};

}  // namespace hbf
