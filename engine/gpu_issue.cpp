// The GPU side of the closed loop: the C++ mirror of model/gpu_issue.py's _GpuCore (the
// stepped path: every released access goes through the event heap; ClosedLoop's direct
// chunks are a driver optimization of model/gpu.py and wait for the compiled controller).
#include "gpu_issue.hpp"

#include <algorithm>
#include <string>

#include "mutants.hpp"

namespace hbf {

GpuCore::GpuCore(const GpuConfig& gpu, GpuProgram program, bool channel_shape,
                 const MapperConfig& mapper, ProgramFeed feed)
    : gpu_(gpu), prog_(std::move(program)), feed_(std::move(feed)),
      channel_shape_(channel_shape), mapper_(mapper), C_(mapper.channels) {
    gpu_.check();
    prog_.check();
    ret_ = gpu_cycles_to_ticks(gpu_.return_cycles, gpu_);
    launch_gap_ = gpu_cycles_to_ticks(gpu_.launch_cycles, gpu_);
    parts_.resize(gpu_.partitions);
    prr_.assign(mapper.stacks * mapper.channels, 0);
    g_best_.assign(prr_.size(), -1);
    g_dist_.assign(prr_.size(), 0);
    g_ports_.assign((prr_.size() + 63) / 64, 0);
    int64_t np = prog_.producers(), nk = prog_.kernels();
    p_out_.assign(np, 0);
    p_peak_.assign(np, 0);
    p_issued_.assign(np, 0);
    p_cticks_.assign(np, 0);
    p_nxt_.assign(np, 0);
    p_kernel_.assign(np, 0);
    for (int64_t k = 0; k < nk; ++k)
        for (int64_t p = prog_.kernel_producers[k]; p < prog_.kernel_producers[k + 1]; ++p)
            p_kernel_[p] = k;
    k_res_.resize(nk);
    k_live_.assign(nk, 0);
    k_feeding_.assign(nk, 0);
    if (feed_.has_next) {
        if (nk != 0) throw GpuError("a program fed kernel by kernel must start empty");
        next_exists_ = feed_.has_next();
    }
}

// The feed's next kernel appended as kernel prog_.kernels(), its producers and accesses
// numbered on from the ones before; the accesses before it are dropped.
void GpuCore::load_kernel() {
    GpuProgram kp;
    feed_.load(kp);
    kp.check();
    if (kp.kernels() != 1) throw GpuError("the program feed must load one kernel at a time");
    int64_t k = prog_.kernels(), p0 = prog_.producers();
    acc_base_ = prog_.producer_accesses.back();
    prog_.kernel_compute.push_back(kp.kernel_compute[0]);
    prog_.kernel_producers.push_back(p0 + kp.producers());
    for (int64_t i = 0; i < kp.producers(); ++i) {
        prog_.producer_bound.push_back(kp.producer_bound[i]);
        prog_.producer_start.push_back(kp.producer_start[i]);
        prog_.producer_compute.push_back(kp.producer_compute[i]);
        prog_.producer_sm.push_back(kp.producer_sm[i]);
        prog_.producer_accesses.push_back(acc_base_ + kp.producer_accesses[i + 1]);
    }
    prog_.access_op = std::move(kp.access_op);
    prog_.access_addr = std::move(kp.access_addr);
    prog_.access_nbytes = std::move(kp.access_nbytes);
    size_t np = static_cast<size_t>(prog_.producers());
    p_out_.resize(np, 0);
    p_peak_.resize(np, 0);
    p_issued_.resize(np, 0);
    p_cticks_.resize(np, 0);
    p_nxt_.resize(np, 0);
    p_kernel_.resize(np, k);
    k_res_.emplace_back();
    k_live_.push_back(0);
    k_feeding_.push_back(0);
}

void GpuCore::heap_push(int64_t tick, int64_t kind, int64_t p) {
    heap_.push(GpuEvent{tick, seq_++, kind, p});
}

GpuEvent GpuCore::heap_pop() { return heap_.pop(); }

int64_t GpuCore::port_of(int64_t access) const {
    // the system port stack * C + channel a request's page maps to (v2 §1, §2)
    auto [stack, q] = mapper_.stack_of(mapper_.page(acc_addr(access)));
    return stack * C_ + std::get<0>(mapper_.channel_of(q, acc_op(access) == 1));
}

void GpuCore::grant_ports(int64_t x, std::vector<Grant>& out) {
    // G5' (docs/gpu.md, timing-contract.md §14): each partition FIFO offers its head; each
    // port grants the first partition at or after its own pointer whose head maps to it.
    // One pass keeps each port's best; the grants go out by ascending port (the ports with
    // a candidate marked as bits, visited in order: no sort)
    int64_t nparts = gpu_.partitions;
    for (int64_t i = 0; i < nparts; ++i) {
        if (parts_[i].empty()) continue;
        int64_t k = parts_[i].front().port;
        int64_t d = i - prr_[k];                 // floormod(i - ptr, nparts): both in [0, nparts)
        if (d < 0) d += nparts;
        if (g_best_[k] < 0) {
            g_ports_[k >> 6] |= uint64_t{1} << (k & 63);
            g_best_[k] = i;
            g_dist_[k] = d;
        } else if (d < g_dist_[k]) {
            g_best_[k] = i;
            g_dist_[k] = d;
        }
    }
    for (size_t w = 0; w < g_ports_.size(); ++w) {
        for (uint64_t ks = g_ports_[w]; ks; ks &= ks - 1) {
            int64_t k = static_cast<int64_t>(w * 64) + __builtin_ctzll(ks);
            int64_t best = g_best_[k];
            g_best_[k] = -1;
            if (!mutant(GPU_PORT_PTR_STAYS)) prr_[k] = best + 1 < nparts ? best + 1 : 0;
            else prr_[k] = best;
            grant_head(best, k, x, out);
        }
        g_ports_[w] = 0;
    }
}

// Partition i's head leaves its FIFO, granted on system port k in tick x: its partition
// wait counted, its fields handed on in `out`.
void GpuCore::grant_head(int64_t i, int64_t k, int64_t x, std::vector<Grant>& out) {
    const Queued& q = parts_[i].front();
    int64_t w = x - q.created;
    pw_sum_ += w;
    if (w > pw_max_) pw_max_ = w;
    if (mutant(GPU_LATENCY_FROM_GRANT)) reqs_[q.id].created = x;   // latency from the grant
    out.push_back(Grant{k, q.id, q.created, q.addr, q.nbytes, static_cast<int32_t>(i), q.op});
    parts_[i].pop_front();
    queued_ -= 1;
}

// ------------------------------------------------------------------ response callback
void GpuCore::on_response(int64_t id, int64_t t) {
    if (id < 0 || id >= next_id_ || !reqs_[id].open)
        throw GpuError("a response names request " + std::to_string(id) +
                       ", which is not outstanding");
    GpuReq& rq = reqs_[id];
    rq.open = false;
    if (keep_answered) answered.push_back(rq);
    int64_t p = rq.producer;
    p_out_[p] -= 1;
    int64_t lat = t - rq.created;
    reqs_.retire(id);                      // nothing reads an answered request again
    lat_sum_ += lat;
    if (lat > lat_max_) lat_max_ = lat;
    if (p_nxt_[p] == prog_.producer_accesses[p + 1]) {        // the stream is exhausted
        if (p_out_[p] == 0) {
            int64_t k = p_kernel_[p];
            k_live_[k] -= 1;
            if (k_live_[k] == 0) kernel_end(k, t);
        }
        return;
    }
    // the released slot issues the next access after the return path and compute
    int64_t c = t + (mutant(GPU_RELEASE_EARLY) ? 0 : 1) + ret_ + p_cticks_[p];
    heap_push(c, 1, p);
}

void GpuCore::kernel_end(int64_t k, int64_t t) {
    k_res_[k].end = t;
    end_tick_ = t;
    if (next_kernel_ < known_kernels())
        heap_push(t + (mutant(GPU_LAUNCH_EARLY) ? 0 : 1) + ret_ + launch_gap_, LAUNCH, -1);
}

// ------------------------------------------------------------------ GPU events
void GpuCore::launch(int64_t now) {
    int64_t k = next_kernel_;
    if (k >= known_kernels()) return;
    if (k == prog_.kernels()) {          // fed: pull it now, and ask whether one follows
        load_kernel();
        next_exists_ = feed_.has_next();
    }
    next_kernel_ = k + 1;
    n_kernels_ += 1;
    k_res_[k].launch = now;
    cur_ = k;
    int64_t p0 = prog_.kernel_producers[k], p1 = prog_.kernel_producers[k + 1];
    k_res_[k].producers = p1 - p0;
    int64_t live = 0;
    for (int64_t p = p0; p < p1; ++p) {
        int64_t c = prog_.producer_compute[p];
        p_cticks_[p] = gpu_cycles_to_ticks(c == COMPUTE_OF_KERNEL ? prog_.kernel_compute[k] : c,
                                           gpu_);
        p_nxt_[p] = prog_.producer_accesses[p];
        if (p_nxt_[p] == prog_.producer_accesses[p + 1]) continue;
        live += 1;
        heap_push(now + gpu_cycles_to_ticks(prog_.producer_start[p], gpu_),
                  prog_.producer_bound[p], p);
    }
    k_live_[k] = k_feeding_[k] = live;
    if (live == 0) kernel_end(k, now);
}

bool GpuCore::inputs_exhausted() const {
    // a pending launch always has next_kernel set, so no heap scan is needed
    return next_kernel_ >= known_kernels() && !queued_ && (cur_ < 0 || k_feeding_[cur_] == 0);
}

void GpuCore::issue(int64_t p, int64_t n, int64_t x) {
    // producer p creates up to n accesses in tick x (within its bound) into the FIFOs
    int64_t acc = p_nxt_[p], end = prog_.producer_accesses[p + 1];
    if (acc == end) return;
    int64_t k = p_kernel_[p];
    int64_t out0 = p_out_[p], out = out0;
    if (mutant(GPU_START_ONE)) n = 1;
    int64_t pb = prog_.producer_bound[p];
    int64_t bound = out + n >= pb ? pb : out + n;
    while (out < bound && acc != end) {
        int64_t addr = acc_addr(acc);
        int8_t op = static_cast<int8_t>(acc_op(acc));
        int64_t part = partition_of(addr, gpu_);
        int64_t rid = next_id_++;
        if (op == 0) reads_ += 1;
        else writes_ += 1;
        int64_t port = channel_shape_ ? port_of(acc) : 0;
        reqs_.push_back(GpuReq{x, static_cast<int32_t>(p), true});
        parts_[part].push_back(Queued{rid, x, addr, static_cast<int32_t>(port),
                                      static_cast<int32_t>(acc_nbytes(acc)), op});
        out += 1;
        acc += 1;
    }
    queued_ += out - out0;
    k_res_[k].requests += out - out0;
    p_issued_[p] += out - out0;
    p_out_[p] = out;
    p_nxt_[p] = acc;
    if (acc == end) k_feeding_[k] -= 1;
    if (out > p_peak_[p]) {
        p_peak_[p] = out;
        if (out > peak_) peak_ = out;
    }
}

GpuResultFigures GpuCore::result(int64_t start) const {
    GpuResultFigures r;
    int64_t end = end_tick_ >= 0 ? end_tick_ : start;
    r.start_tick = start;
    r.end_tick = end;
    r.span_ticks = end - start + 1;
    r.requests = next_id_;
    r.reads = reads_;
    r.writes = writes_;
    r.gpu_latency_sum = lat_sum_;
    r.gpu_latency_max = lat_max_;
    r.partition_wait_sum = pw_sum_;
    r.partition_wait_max = pw_max_;
    r.peak_outstanding = peak_;
    r.bound_violations = violations_;
    r.kernels.assign(k_res_.begin(), k_res_.begin() + n_kernels_);
    return r;
}

}  // namespace hbf
