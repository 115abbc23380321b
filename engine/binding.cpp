// hbfsim._engine: the Python binding of the compiled engine's components (pybind11).
// Configurations are read from the Python objects (HbfConfig, GpuConfig) field by field;
// programs and streams cross as numpy arrays, never one Python object per request.
// hbfsim/engine.py is the Python-side entry point (status, constructors).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <type_traits>
#include <string>

#include "column_pool.hpp"
#include "engine_standin.hpp"
#include "gpu_port.hpp"
#include "media.hpp"
#include "mutants.hpp"
#include "closed_loop.hpp"
#include "system.hpp"
#include "window_source.hpp"

#ifndef HBF_SOURCE_HASH
#define HBF_SOURCE_HASH "unknown"
#endif

namespace py = pybind11;
using namespace hbf;

namespace hbf {
int g_mutant = 0;
}

namespace {

template <class T>
T attr(const py::object& o, const char* name) {
    return o.attr(name).cast<T>();
}

MediaConfig media_config(const py::object& cfg) {
    MediaConfig m;
    m.t_read = attr<int64_t>(cfg, "t_read_ticks");
    m.t_prog = attr<int64_t>(cfg, "t_prog_ticks");
    m.t_erase = attr<int64_t>(cfg, "t_erase_ticks");
    m.t_hit = attr<int64_t>(cfg, "buffer_hit_ticks");
    m.page_buffers = attr<int64_t>(cfg, "page_buffers");
    m.pages_per_block = attr<int64_t>(cfg, "pages_per_block");
    m.pages_per_stack = attr<int64_t>(cfg, "pages_per_stack");
    m.subarrays_per_stack = attr<int64_t>(cfg, "subarrays_per_stack");
    m.subarrays_per_channel = attr<int64_t>(cfg, "subarrays_per_channel");
    m.channels = attr<int64_t>(cfg, "channels");
    m.blocks_per_zone = attr<int64_t>(cfg, "blocks_per_zone");
    m.ssd = attr<std::string>(cfg, "media_mode") == "ssd";
    m.overprovisioning = attr<double>(cfg, "overprovisioning");
    return m;
}

MapperConfig mapper_config(const py::object& cfg) {
    MapperConfig m;
    m.base_address = attr<int64_t>(cfg, "base_address");
    m.stacks = attr<int64_t>(cfg, "stacks");
    m.pages_per_stack = attr<int64_t>(cfg, "pages_per_stack");
    m.subarrays_per_channel = attr<int64_t>(cfg, "subarrays_per_channel");
    m.channels = attr<int64_t>(cfg, "channels");
    auto pl = attr<std::string>(cfg, "placement");
    if (pl == "interleave") m.placement = Placement::Interleave;
    else if (pl == "grouped") m.placement = Placement::Grouped;
    else if (pl == "contiguous") m.placement = Placement::Contiguous;
    else if (pl == "explicit") m.placement = Placement::Explicit;
    else throw std::invalid_argument("placement must be interleave, grouped, contiguous or "
                                     "explicit, not '" + pl + "'");
    m.group_pages = attr<int64_t>(cfg, "group_pages");
    m.read_channels = attr<int64_t>(cfg, "read_channels");
    m.partitioned = attr<std::string>(cfg, "scheduler").rfind("partition-", 0) == 0;
    m.stack_interleave = attr<std::string>(cfg, "stack_select") == "interleave";
    for (auto r : cfg.attr("explicit_map")) {
        auto t = py::reinterpret_borrow<py::sequence>(r);
        m.explicit_map.emplace_back(t[0].cast<int64_t>(), t[1].cast<int64_t>(),
                                    t[2].cast<int64_t>());
    }
    return m;
}

GpuConfig gpu_config(const py::object& cfg, const py::object& gpu) {
    GpuConfig g;
    g.sms = attr<int64_t>(gpu, "sms");
    g.partitions = attr<int64_t>(gpu, "partitions");
    g.partition_bytes = attr<int64_t>(gpu, "partition_bytes");
    g.return_cycles = attr<int64_t>(gpu, "return_cycles");
    g.launch_cycles = attr<int64_t>(gpu, "launch_cycles");
    g.memory_clock_khz = attr<int64_t>(cfg, "memory_clock_khz");
    g.gpu_clock_khz = attr<int64_t>(cfg, "gpu_clock_khz");
    g.base_address = attr<int64_t>(cfg, "base_address");
    return g;
}

template <class T>
std::vector<T> vec(const py::dict& d, const char* key) {
    if (!d.contains(key)) throw GpuError(std::string("program arrays: missing '") + key + "'");
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(d[key]);
    if (!a || a.ndim() != 1)
        throw GpuError(std::string("program arrays: '") + key + "' must be a 1-D array");
    return std::vector<T>(a.data(), a.data() + a.size());
}

// An access column read in place from its numpy array (converted first where its dtype or
// layout differs), the array kept alive with the program: the GIL is taken to let it go.
template <class T>
AccessColumn<T> borrowed(const py::dict& d, const char* key) {
    if (!d.contains(key)) throw GpuError(std::string("program arrays: missing '") + key + "'");
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(d[key]);
    if (!a || a.ndim() != 1)
        throw GpuError(std::string("program arrays: '") + key + "' must be a 1-D array");
    const T* data = a.data();
    auto n = static_cast<size_t>(a.size());
    std::shared_ptr<void> owner(new py::object(std::move(a)), [](void* o) {
        py::gil_scoped_acquire gil;
        delete static_cast<py::object*>(o);
    });
    return AccessColumn<T>(data, n, std::move(owner));
}

// The program's arrays; with `borrow`, the access arrays are read in place (a kernel's
// arrays from the feed, which nothing else holds) instead of copied.
GpuProgram program_from_arrays(const py::dict& d, bool borrow = false) {
    GpuProgram p;
    p.kernel_compute = vec<int64_t>(d, "kernel_compute");
    p.kernel_producers = vec<int64_t>(d, "kernel_producers");
    p.producer_bound = vec<int64_t>(d, "producer_bound");
    p.producer_start = vec<int64_t>(d, "producer_start");
    p.producer_compute = vec<int64_t>(d, "producer_compute");
    p.producer_sm = vec<int64_t>(d, "producer_sm");
    p.producer_accesses = vec<int64_t>(d, "producer_accesses");
    if (borrow) {
        p.access_op = borrowed<uint8_t>(d, "access_op");
        p.access_addr = borrowed<int64_t>(d, "access_addr");
        p.access_nbytes = borrowed<int64_t>(d, "access_nbytes");
    } else {
        p.access_op = vec<uint8_t>(d, "access_op");
        p.access_addr = vec<int64_t>(d, "access_addr");
        p.access_nbytes = vec<int64_t>(d, "access_nbytes");
    }
    return p;
}

py::array_t<int64_t> log_array(std::vector<int64_t>&& log, int width) {
    auto* heap = new std::vector<int64_t>(std::move(log));
    py::capsule owner(heap, [](void* v) { delete static_cast<std::vector<int64_t>*>(v); });
    py::ssize_t rows = static_cast<py::ssize_t>(heap->size()) / width;
    return py::array_t<int64_t>({rows, static_cast<py::ssize_t>(width)}, heap->data(), owner);
}

py::object delivered_tuple(const Delivered& d) {
    if (!d.is_group) return py::make_tuple(d.ch, d.unit, d.tag, d.flags);
    return py::make_tuple(d.ch, d.unit, py::tuple(py::cast(d.tags)),
                          py::tuple(py::cast(d.group_flags)));
}

py::dict result_dict(const GpuResultFigures& r) {
    py::dict d;
    d["start_tick"] = r.start_tick;
    d["end_tick"] = r.end_tick;
    d["span_ticks"] = r.span_ticks;
    d["requests"] = r.requests;
    d["reads"] = r.reads;
    d["writes"] = r.writes;
    d["gpu_latency_sum"] = r.gpu_latency_sum;
    d["gpu_latency_max"] = r.gpu_latency_max;
    d["partition_wait_sum"] = r.partition_wait_sum;
    d["partition_wait_max"] = r.partition_wait_max;
    d["peak_outstanding"] = r.peak_outstanding;
    d["bound_violations"] = r.bound_violations;
    py::list ks;
    for (auto& k : r.kernels) {
        py::dict kd;
        kd["launch"] = k.launch;
        kd["end"] = k.end;
        kd["requests"] = k.requests;
        kd["producers"] = k.producers;
        ks.append(kd);
    }
    d["kernels"] = ks;
    return d;
}


ControllerConfig controller_config(const py::object& cfg) {
    ControllerConfig c;
    c.channels = attr<int64_t>(cfg, "channels");
    c.ports = attr<std::string>(cfg, "host_ports") == "channel" ? c.channels : 1;
    c.pools = attr<std::string>(cfg, "pools") == "channel" ? c.channels : 1;   // §4.5
    c.admission = attr<int64_t>(cfg, "admission");
    c.mshr_entries = attr<int64_t>(cfg, "mshr_entries");
    c.write_buffer_entries = attr<int64_t>(cfg, "write_buffer_entries");
    c.mshr_merge = attr<bool>(cfg, "mshr_merge");
    c.demand = attr<std::string>(cfg, "read_mode") == "demand";
    c.strict = attr<std::string>(cfg, "write_timeout_policy") == "strict";
    c.agg_window = attr<int64_t>(cfg, "read_agg_window_ticks");
    c.agg_threshold = attr<int64_t>(cfg, "read_agg_threshold_bytes");
    c.write_deadline = attr<int64_t>(cfg, "write_deadline_ticks");
    c.queue_depth = attr<int64_t>(cfg, "queue_depth");
    c.active_per_channel = attr<int64_t>(cfg, "active_per_channel");
    c.active_total = attr<int64_t>(cfg, "active_total");
    auto sch = attr<std::string>(cfg, "scheduler");
    if (sch == "fcfs") c.scheduler = Scheduler::Fcfs;
    else if (sch == "write-drain") c.scheduler = Scheduler::WriteDrain;
    else if (sch == "read-priority" || sch.rfind("partition-", 0) == 0)
        c.scheduler = Scheduler::ReadPriority;
    else throw std::invalid_argument("scheduler = '" + sch + "' is not known to the compiled "
                                     "engine");
    c.drain_high_water = attr<int64_t>(cfg, "write_drain_high_water");
    c.drain_window = attr<int64_t>(cfg, "write_drain_window_ticks");
    c.page_cache_pages = attr<int64_t>(cfg, "page_cache_pages");
    c.cache_hit_ticks = attr<int64_t>(cfg, "cache_hit_ticks");
    c.link_byte_cost = attr<int64_t>(cfg, "link_byte_cost");
    c.link_gain = attr<int64_t>(cfg, "link_gain");
    auto mp = attr<std::string>(cfg, "multiplane");
    c.multiplane = mp == "off" ? Multiplane::Off : mp == "page" ? Multiplane::Page
                                                                : Multiplane::Megaplane;
    c.megaplane_planes = attr<int64_t>(cfg, "megaplane_planes");
    c.subarrays_per_channel = attr<int64_t>(cfg, "subarrays_per_channel");
    c.hyperpage_window = attr<int64_t>(cfg, "hyperpage_window");
    return c;
}

SystemConfig system_config(const py::object& cfg) {
    SystemConfig s;
    s.stacks = attr<int64_t>(cfg, "stacks");
    s.channels = attr<int64_t>(cfg, "channels");
    s.capacity_bytes = attr<int64_t>(cfg, "capacity_bytes");
    s.base_address = attr<int64_t>(cfg, "base_address");
    s.channel_ports = attr<std::string>(cfg, "host_ports") == "channel";
    return s;
}

template <class T>
using Col = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Per-request columns of n rows (numpy arrays by name): the stream as submitted (id, op,
// addr, nbytes, arrival, source; left out with inputs = false, where the caller has them)
// and what the run gave each request, or only the columns named in `only` (a caller that
// reads a few: the others are neither allocated nor written); `rows` writes them (without
// the GIL: the arrays are allocated, and owned by `cols`, before).
class Columns {
public:
    explicit Columns(py::ssize_t n, bool inputs = true,
                     const std::vector<std::string>* only = nullptr) {
        auto want = [only](const char* name) {
            return !only || std::find(only->begin(), only->end(), name) != only->end();
        };
        auto add = [&](auto*& col, const char* name, bool input = false) {
            using T = std::remove_pointer_t<std::remove_reference_t<decltype(col)>>;
            if ((inputs || !input) && want(name)) col = column<T>(name, n);
        };
        RequestRows& w = rows;
        add(w.id, "id", true), add(w.arrival, "arrival", true), add(w.addr, "addr", true);
        add(w.nbytes, "nbytes", true), add(w.source, "source", true), add(w.op, "op", true);
        add(w.t_accept, "t_accept"), add(w.t_map, "t_map"), add(w.t_done, "t_done");
        add(w.depth, "depth"), add(w.tq, "tq"), add(w.ti, "ti"), add(w.tc, "tc");
        add(w.edepth, "entry_depth"), add(w.stack, "stack"), add(w.ch, "channel");
        add(w.sub, "subarray"), add(w.mshr_hit, "mshr_hit"), add(w.buffer_hit, "buffer_hit");
        add(w.cache_hit, "cache_hit"), add(w.error, "error");
        w.given();
    }
    // rows[j] into row row_of(rows[j]) of every column (row_of called once per row, in order)
    template <class RowOf>
    void write(const std::vector<Req>& reqs, RowOf row_of) {
        for (const Req& r : reqs) rows.put(row_of(r), r);
    }
    py::dict cols;
    RequestRows rows;                  // the columns' data; `order` is the caller's

private:
    template <class T>
    T* column(const char* name, py::ssize_t n) {
        py::array_t<T> a = pooled_array<T>(n);
        cols[name] = a;
        return a.mutable_data();
    }
};

py::dict system_counters(System& sys);

// The outputs of a run kept whole (hbfsim/engine.py run_compiled, run_compiled_closed_loop):
// every answered request's record written, as it is answered, into its row (its submission
// number) of `n` rows, and its submission number into the response order.
struct WholeOutputs {
    Columns cols;
    py::array_t<int64_t> order;
    RequestRows rows;
    WholeOutputs(py::ssize_t n, bool inputs)
        : cols(n, inputs), order(pooled_array<int64_t>(n)), rows(cols.rows) {
        rows.order = order.mutable_data();
        rows.map_later = true;         // finish() maps every row's address
    }
    void attach(System& sys) { sys.rows = &rows; }
    // the columns, the response order and the counters of the finished system
    py::dict finish(System& sys) {
        if (rows.order != order.data() + order.size())
            throw std::logic_error("internal: " + std::to_string(rows.order - order.data())
                                   + " of " + std::to_string(order.size())
                                   + " requests answered");
        // every row is answered: its address and op are the stream's, or the written inputs'
        const int64_t* addr = sys.stream ? sys.stream->addr : rows.addr;
        const int8_t* op = sys.stream ? sys.stream->op : rows.op;
        if (!addr || !op) throw std::logic_error("internal: no addresses to map the rows");
        rows.fill_mapping(sys.mapper, addr, op, static_cast<int64_t>(order.size()));
        py::dict d = cols.cols;
        d["order"] = order;
        d["counters"] = system_counters(sys);
        return d;
    }
};

// The counters of a finished system (model/stats.py reads them from the system, the stacks
// and the media).
py::dict system_counters(System& sys) {
    py::dict c;
    const char* causes[] = {"full", "raw", "pressure", "deadline", "drain"};
    StackCounters tot;
    int64_t mshr_hits = 0, agg_wait = 0, commands = 0, grouped = 0;
    int64_t reads = 0, hits = 0, progs = 0, erases = 0, gc = 0, cap_err = 0, busy = 0, valid = 0;
    py::list per_channel, per_stack;
    for (auto& s : sys.stacks) {
        auto& st = s->st;
        tot.page_cache_hits += st.page_cache_hits;
        tot.raw_events += st.raw_events;
        for (int k = 0; k < N_CAUSES; ++k) tot.flushes[k] += st.flushes[k];
        tot.partial_programs += st.partial_programs;
        tot.padding_bytes += st.padding_bytes;
        tot.strict_errors += st.strict_errors;
        tot.media_errors += st.media_errors;
        tot.coverage_new_bytes += st.coverage_new_bytes;
        tot.page_programs_ok += st.page_programs_ok;
        mshr_hits += s->mshr_hits;
        agg_wait += s->agg_wait;
        if (s->mp) {
            commands += s->mp->commands;
            grouped += s->mp->grouped;
        }
        auto& md = s->media;
        reads += md.page_reads;
        hits += md.buffer_hits;
        progs += md.page_programs;
        erases += md.block_erases;
        gc += md.gc_relocations;
        cap_err += md.capacity_errors;
        busy += md.busy_ticks;
        valid += md.valid_pages();
        for (int64_t ch = 0; ch < s->C; ++ch)
            per_channel.append(py::make_tuple(s->stack, ch, s->ch_requests[ch], s->ch_ops[ch],
                                              s->ch_link_stall[ch]));
        // per stack, what model/stats.py reads from each stack and its media
        py::dict sd;
        sd["mshr_hits"] = s->mshr_hits;
        sd["agg_wait"] = s->agg_wait;
        sd["page_reads"] = md.page_reads;
        sd["buffer_hits"] = md.buffer_hits;
        sd["page_programs"] = md.page_programs;
        sd["block_erases"] = md.block_erases;
        sd["busy_ticks"] = md.busy_ticks;
        sd["gc_relocations"] = md.gc_relocations;
        sd["valid_pages"] = md.valid_pages();
        sd["blocks"] = md.blocks();
        py::dict zone;
        for (auto& [k, v] : md.zone_pec())
            zone[py::make_tuple(std::get<0>(k), std::get<1>(k), std::get<2>(k))] = v;
        sd["zone_pec"] = zone;
        per_stack.append(sd);
    }
    c["page_cache_hits"] = tot.page_cache_hits;
    c["raw_events"] = tot.raw_events;
    for (int k = 0; k < N_CAUSES; ++k) c[(std::string("flush_") + causes[k]).c_str()] =
        tot.flushes[k];
    c["partial_programs"] = tot.partial_programs;
    c["padding_bytes"] = tot.padding_bytes;
    c["strict_errors"] = tot.strict_errors;
    c["media_errors"] = tot.media_errors;
    c["coverage_new_bytes"] = tot.coverage_new_bytes;
    c["page_programs_ok"] = tot.page_programs_ok;
    c["mshr_hits"] = mshr_hits;
    c["aggregation_wait_ticks"] = agg_wait;
    c["mp_commands"] = commands;
    c["mp_grouped"] = grouped;
    c["page_reads"] = reads;
    c["buffer_hits"] = hits;
    c["page_programs"] = progs;
    c["block_erases"] = erases;
    c["gc_relocations"] = gc;
    c["capacity_errors"] = cap_err;
    c["busy_ticks"] = busy;
    c["valid_pages"] = valid;
    c["completions"] = sys.n_done;
    c["last_completion_tick"] = sys.last_completion;
    c["first_arrival_tick"] = sys.first_arrival < 0 ? 0 : sys.first_arrival;
    c["errors"] = sys.errors;
    c["steps"] = sys.steps;
    c["end_tick"] = sys.t;
    c["per_channel"] = per_channel;
    c["per_stack"] = per_stack;
    c["submitted"] = sys.submitted;
    return c;
}

// Report progress to `callback(responses)` every `every` responses (a progress bar), with
// the GIL taken for the call; a pending signal (Ctrl-C) raises there and ends the run.
// `callback` is an argument of the caller, so it outlives the system.
void attach_progress(System& sys, const py::object& callback, int64_t every) {
    if (callback.is_none() || every <= 0) return;
    py::handle cb = callback;
    sys.progress_every = every;
    sys.progress = [cb](int64_t n) {
        py::gil_scoped_acquire gil;
        cb(n);
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
}

// The open-loop run (hbfsim/engine.py run_compiled); without ids a request is named by its
// row.
py::dict run_open_loop(const py::object& cfg, std::optional<Col<int64_t>> id, Col<int8_t> op,
                       Col<int64_t> addr, Col<int64_t> nbytes, Col<int64_t> arrival,
                       const py::object& progress, int64_t every) {
    py::ssize_t n = arrival.size();
    if (op.size() != n || addr.size() != n || nbytes.size() != n || (id && id->size() != n))
        throw std::invalid_argument("the request arrays must have one length");
    System sys(system_config(cfg), controller_config(cfg), media_config(cfg),
               mapper_config(cfg));
    const int64_t *pid = id ? id->data() : nullptr, *paddr = addr.data(),
                  *pn = nbytes.data(), *pa = arrival.data();
    const int8_t* pop = op.data();
    StreamColumns stream{pid, paddr, pn, nullptr, pop};   // alive through the run
    sys.submit_stream(stream, pa, n);
    sys.close_input();
    attach_progress(sys, progress, every);
    WholeOutputs out(n, false);        // the stream's own columns are the caller's
    out.attach(sys);
    {
        py::gil_scoped_release nogil;
        sys.run();
    }
    return out.finish(sys);
}

// The closed loop stepped tick by tick (hbfsim/engine.py run_compiled_closed_loop): the
// system's outputs and the GPU's result figures.
py::dict run_closed_loop(const py::object& cfg, const py::object& gpu, const py::dict& arrays,
                         bool channel_shape, int64_t start, bool skip,
                         const py::object& progress, int64_t every) {
    GpuPort port(gpu_config(cfg, gpu), program_from_arrays(arrays), channel_shape,
                 mapper_config(cfg), start);
    System sys(system_config(cfg), controller_config(cfg), media_config(cfg),
               mapper_config(cfg));
    attach_progress(sys, progress, every);
    WholeOutputs out(static_cast<py::ssize_t>(port.accesses()), true);
    out.attach(sys);
    {
        py::gil_scoped_release nogil;
        run_stepped(sys, port, skip);
    }
    py::dict d = out.finish(sys);   // source: each request's memory sub-partition (A5)
    d["gpu"] = result_dict(port.result());
    return d;
}

// The sink of a streamed run: every `every` answered requests as columns to `sink` (with
// the GIL; a pending Ctrl-C raises there). The submitted requests wait in a table of blocks
// of 2**block_shift, freed once accepted (Retire::Free), or poisoned (Poison, for tests:
// and the answered requests' slots too). With `gpu` (a closed loop's port keeping its
// answered requests, keep_answered), the columns add each request's GPU creation tick and
// producer (`created`, `producer`): the port answered the same requests in the same order.
void stream_outputs(System& sys, const py::object& sink, int64_t every, int block_shift,
                    Retire mode, const py::object& columns, GpuCore* gpu = nullptr) {
    if (every < 1) throw std::invalid_argument("every must be >= 1");
    py::handle sh = sink;
    // the columns the sink reads (None: all), copied for the run
    std::shared_ptr<std::vector<std::string>> only;
    if (!columns.is_none())
        only = std::make_shared<std::vector<std::string>>(
            columns.cast<std::vector<std::string>>());
    sys.pending.set_block_shift(block_shift);
    sys.pending.mode = mode;
    sys.reqs.poison = mode == Retire::Poison;
    sys.sink_every = every;
    sys.sink = [sh, gpu, only](std::vector<Req>& rows) {
        py::gil_scoped_acquire gil;
        auto n = static_cast<py::ssize_t>(rows.size());
        Columns c(n, true, only.get());
        py::ssize_t i = 0;
        c.write(rows, [&i](const Req&) { return i++; });
        if (gpu != nullptr) {
            if (static_cast<py::ssize_t>(gpu->answered.size()) != n)
                throw std::logic_error("internal: the GPU answered " +
                                       std::to_string(gpu->answered.size()) +
                                       " requests, the system " + std::to_string(n));
            py::array_t<int64_t> created(n), producer(n);
            int64_t *pc = created.mutable_data(), *pp = producer.mutable_data();
            for (py::ssize_t i = 0; i < n; ++i) {
                pc[i] = gpu->answered[i].created;
                pp[i] = gpu->answered[i].producer;
            }
            gpu->answered.clear();
            c.cols["created"] = created;
            c.cols["producer"] = producer;
        }
        sh(c.cols);
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
}

// The open loop in bounded memory (hbfsim/engine_stream.py run_open_streamed): requests are
// submitted `chunk` at a time (with every request of the last one's tick) and the system
// runs through that tick before the next are submitted, as run_stepped submits each tick's
// grants (the same events; only the count of evaluated cycles may differ); answered
// requests go to `sink` as in the streamed closed loop.
py::dict run_open_loop_streamed(const py::object& cfg, Col<int64_t> id, Col<int8_t> op,
                                Col<int64_t> addr, Col<int64_t> nbytes, Col<int64_t> arrival,
                                Col<int64_t> source, const py::object& sink, int64_t every,
                                int64_t chunk, int block_shift, bool poison,
                                const py::object& columns) {
    py::ssize_t n = id.size();
    if (op.size() != n || addr.size() != n || nbytes.size() != n || arrival.size() != n
            || source.size() != n)
        throw std::invalid_argument("the request arrays must have one length");
    if (chunk < 1) throw std::invalid_argument("chunk must be >= 1");
    if (block_shift < 0 || block_shift > 30)
        throw std::invalid_argument("block_shift must be in 0..30");
    System sys(system_config(cfg), controller_config(cfg), media_config(cfg),
               mapper_config(cfg));
    stream_outputs(sys, sink, every, block_shift, poison ? Retire::Poison : Retire::Free,
                   columns);
    const int64_t *pid = id.data(), *pad = addr.data(), *pnb = nbytes.data(),
                  *par = arrival.data(), *psrc = source.data();
    const int8_t* pop = op.data();
    {
        py::gil_scoped_release nogil;
        int64_t i = 0;
        while (true) {
            int64_t j = std::min<int64_t>(i + chunk, n);
            int64_t until = j > 0 ? par[j - 1] : 0;
            while (j < n && par[j] <= until) ++j;        // the rest of that tick's requests
            for (; i < j; ++i) sys.submit(pid[i], pop[i], pad[i], pnb[i], par[i], -1, psrc[i]);
            if (i == n) {
                sys.close_input();
                sys.run();
                break;
            }
            sys.run(until);
            if (sys.t <= until) sys.t = until + 1;        // idle through until (C3)
        }
    }
    sys.flush();
    py::dict d;
    d["counters"] = system_counters(sys);
    d["blocks_held"] = sys.pending.blocks_held();
    return d;
}

// A request list with at most `window` requests open (hbfsim/engine_stream.py
// run_window_streamed; serve/characterize.py measure): answered requests go to `sink` as in
// the streamed open loop.
py::dict run_window_streamed(const py::object& cfg, Col<int64_t> id, Col<int8_t> op,
                             Col<int64_t> addr, Col<int64_t> nbytes, Col<int64_t> arrival,
                             Col<int64_t> source, int64_t window, const py::object& sink,
                             int64_t every, int block_shift, bool poison,
                             const py::object& columns) {
    py::ssize_t n = id.size();
    if (op.size() != n || addr.size() != n || nbytes.size() != n || arrival.size() != n
            || source.size() != n)
        throw std::invalid_argument("the request arrays must have one length");
    if (block_shift < 0 || block_shift > 30)
        throw std::invalid_argument("block_shift must be in 0..30");
    System sys(system_config(cfg), controller_config(cfg), media_config(cfg),
               mapper_config(cfg));
    stream_outputs(sys, sink, every, block_shift, poison ? Retire::Poison : Retire::Free,
                   columns);
    RequestList reqs{id.data(), addr.data(), nbytes.data(), arrival.data(), source.data(),
                     op.data(), static_cast<int64_t>(n)};
    {
        py::gil_scoped_release nogil;
        run_window(sys, reqs, window);
    }
    sys.flush();
    py::dict d;
    d["counters"] = system_counters(sys);
    d["blocks_held"] = sys.pending.blocks_held();
    return d;
}

// The closed loop in bounded memory (hbfsim/engine_stream.py): the program pulled kernel by
// kernel from `feed` (has_next() -> bool, load() -> one kernel's program arrays), every
// answered request handed to `sink(columns)` in response order, `every` at a time, and its
// records retired (freed in blocks of 2**block_shift; poisoned instead with `poison`, for
// tests). Returns the counters, the GPU's figures and the blocks still held; the run keeps
// no per-request arrays.
py::dict run_closed_loop_streamed(const py::object& cfg, const py::object& gpu,
                                  const py::object& feed, bool channel_shape, int64_t start,
                                  bool skip, const py::object& sink, int64_t every,
                                  int block_shift, bool poison, bool record,
                                  const py::object& columns) {
    if (block_shift < 0 || block_shift > 30)
        throw std::invalid_argument("block_shift must be in 0..30");
    py::handle fh = feed;
    ProgramFeed f;
    f.has_next = [fh]() {
        py::gil_scoped_acquire gil;
        return fh.attr("has_next")().cast<bool>();
    };
    f.load = [fh](GpuProgram& into) {
        py::gil_scoped_acquire gil;
        into = program_from_arrays(fh.attr("load")().cast<py::dict>(), true);
    };
    GpuProgram empty;
    empty.kernel_producers = {0};
    empty.producer_accesses = {0};
    Retire mode = poison ? Retire::Poison : Retire::Free;
    GpuPort port(gpu_config(cfg, gpu), std::move(empty), channel_shape, mapper_config(cfg),
                 start, std::move(f));
    port.retire_requests(mode, block_shift);
    System sys(system_config(cfg), controller_config(cfg), media_config(cfg),
               mapper_config(cfg));
    port.keep_answered = record;
    stream_outputs(sys, sink, every, block_shift, mode, columns, record ? &port : nullptr);
    {
        py::gil_scoped_release nogil;
        run_stepped(sys, port, skip);
    }
    sys.flush();
    py::dict d;
    d["counters"] = system_counters(sys);
    d["gpu"] = result_dict(port.result());
    d["blocks_held"] = py::make_tuple(sys.pending.blocks_held(), port.request_blocks_held());
    return d;
}

}  // namespace

PYBIND11_MODULE(_engine, m) {
    m.doc() = "hbfsim's compiled engine: the stack controller and system loop, NAND media and "
              "GPU request injection in C++, mirrors of model/ (docs/engine.md)";
    m.attr("SOURCE_HASH") = HBF_SOURCE_HASH;
    m.attr("N_MUTANTS") = static_cast<int>(N_MUTANTS);

    static py::exception<GpuError> gpu_error_fallback(m, "GpuError", PyExc_ValueError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const GpuError& e) {
            // the golden model's GpuError where it can be imported, so callers catch one type
            py::object cls = py::module_::import("hbfsim.model.gpu_config").attr("GpuError");
            PyErr_SetString(cls.ptr(), e.what());
        }
    });

    m.def("_set_mutant", [](int k) {
        if (k < 0 || k >= N_MUTANTS)
            throw std::invalid_argument("mutant must be in 0.." + std::to_string(N_MUTANTS - 1) +
                                        ", not " + std::to_string(k));
        g_mutant = k;
    }, "Select a deliberately broken variant (0: none); for the differential tests only.");
    m.def("_get_mutant", []() { return g_mutant; });

    // ---- the controller and the system loop (engine/controller/, engine/system.cpp)
    static py::exception<DeadlockError> deadlock(m, "DeadlockError", PyExc_RuntimeError);
    m.def("run_open_loop", &run_open_loop, py::arg("cfg"), py::arg("id"), py::arg("op"),
          py::arg("addr"), py::arg("nbytes"), py::arg("arrival"),
          py::arg("progress") = py::none(), py::arg("every") = 0,
          "Run an open-loop request stream through the compiled HbfSystem (the one timing "
          "contract) to completion: what the run gave each request (arrays, not the stream's "
          "own columns), the response order, the counters. id may be None (a request is "
          "then named by its row).");
    m.def("run_open_loop_streamed", &run_open_loop_streamed, py::arg("cfg"), py::arg("id"),
          py::arg("op"), py::arg("addr"), py::arg("nbytes"), py::arg("arrival"),
          py::arg("source"), py::arg("sink"), py::arg("every") = 1 << 15,
          py::arg("chunk") = 1 << 16, py::arg("block_shift") = 16, py::arg("poison") = false,
          py::arg("columns") = py::none(),
          "run_open_loop in bounded memory: requests submitted chunk at a time as the run "
          "reaches them, answered requests handed to sink(columns) in response order (the "
          "columns named in `columns`, or all) and "
          "retired; returns the counters and blocks_held.");
    m.def("run_window_streamed", &run_window_streamed, py::arg("cfg"), py::arg("id"),
          py::arg("op"), py::arg("addr"), py::arg("nbytes"), py::arg("arrival"),
          py::arg("source"), py::arg("window"), py::arg("sink"), py::arg("every") = 1 << 15,
          py::arg("block_shift") = 16, py::arg("poison") = false,
          py::arg("columns") = py::none(),
          "Run a request list with at most window requests open (each response submits the "
          "next with arrival = its tick; window >= len: the open loop), answered requests "
          "handed to sink(columns) in response order (the columns named in `columns`, or all) "
          "and retired; returns the counters and "
          "blocks_held.");
    m.def("run_closed_loop_streamed", &run_closed_loop_streamed, py::arg("cfg"), py::arg("gpu"),
          py::arg("feed"), py::arg("channel_shape"), py::arg("start") = 0,
          py::arg("skip") = true, py::arg("sink"), py::arg("every") = 1 << 15,
          py::arg("block_shift") = 16, py::arg("poison") = false, py::arg("record") = false,
          py::arg("columns") = py::none(),
          "run_closed_loop in bounded memory: kernels pulled from feed (has_next, load), "
          "answered requests handed to sink(columns) in response order (the columns named in "
          "`columns`, or all) and retired (with "
          "record, each with its GPU creation tick and producer); returns the counters, the "
          "GPU's figures and blocks_held (requests, GPU requests).");
    m.def("run_closed_loop", &run_closed_loop, py::arg("cfg"), py::arg("gpu"),
          py::arg("arrays"), py::arg("channel_shape"), py::arg("start") = 0,
          py::arg("skip") = true, py::arg("progress") = py::none(), py::arg("every") = 0,
          "Run a GPU program (program_arrays) closed loop against the compiled system, one "
          "tick at a time (model/gpu_port.py run_stepped): the run_open_loop outputs and "
          "the GPU's result figures under 'gpu'.");

    // ---- media (model/media.py)
    py::class_<Media>(m, "Media", "The NAND side of one stack (model/media.py's Media).")
        .def(py::init([](const py::object& cfg) { return new Media(media_config(cfg)); }),
             py::arg("cfg"))
        .def("issue", &Media::issue, py::arg("t"), py::arg("ch"), py::arg("sub"),
             py::arg("op"), py::arg("local"), py::arg("tag"))
        .def("issue_group", [](Media& self, int64_t t, int64_t ch, int64_t megaplane,
                               const py::iterable& ops) {
            std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> v;
            for (auto o : ops) {
                auto s = py::reinterpret_borrow<py::sequence>(o);
                v.emplace_back(s[0].cast<int64_t>(), s[1].cast<int64_t>(),
                               s[2].cast<int64_t>(), s[3].cast<int64_t>());
            }
            return self.issue_group(t, ch, megaplane, v);
        }, py::arg("t"), py::arg("ch"), py::arg("megaplane"), py::arg("ops"))
        .def("next_due", [](const Media& self) -> py::object {
            if (!self.has_due()) return py::none();
            return py::int_(self.next_due());
        })
        .def("deliver", [](Media& self, int64_t t) {
            std::vector<Delivered> out;
            self.deliver(t, out);
            py::list l;
            for (auto& d : out) l.append(delivered_tuple(d));
            return l;
        }, py::arg("t"))
        .def("backlog", &Media::backlog, py::arg("t"))
        .def("zone_pec", [](const Media& self) {
            py::dict d;
            for (auto& [k, v] : self.zone_pec())
                d[py::make_tuple(std::get<0>(k), std::get<1>(k), std::get<2>(k))] = v;
            return d;
        })
        .def("valid_pages", &Media::valid_pages)
        .def("replay", [](Media& self, py::array_t<int64_t, py::array::c_style |
                                                          py::array::forcecast> rows) {
            if (rows.ndim() != 2 || rows.shape(1) != 7)
                throw std::invalid_argument("replay: rows must be an (n, 7) array of kind, t, "
                                            "ch, sub, op, local, tag");
            int64_t n = rows.shape(0);
            std::vector<int64_t> cols(7 * n);
            auto r = rows.unchecked<2>();
            for (int64_t i = 0; i < n; ++i)
                for (int c = 0; c < 7; ++c) cols[c * n + i] = r(i, c);
            std::vector<int64_t> log;
            log.reserve(6 * n);
            {
                py::gil_scoped_release nogil;
                media_replay(self, n, &cols[0], &cols[n], &cols[2 * n], &cols[3 * n],
                             &cols[4 * n], &cols[5 * n], &cols[6 * n], log);
            }
            return log_array(std::move(log), MEDIA_LOG_WIDTH);
        }, py::arg("rows"),
             "Replay a command stream (hbfsim/engine_standin.py replay_media); the log.")
        .def_readonly("page_reads", &Media::page_reads)
        .def_readonly("buffer_hits", &Media::buffer_hits)
        .def_readonly("page_programs", &Media::page_programs)
        .def_readonly("block_erases", &Media::block_erases)
        .def_readonly("gc_relocations", &Media::gc_relocations)
        .def_readonly("capacity_errors", &Media::capacity_errors)
        .def_readonly("busy_ticks", &Media::busy_ticks)
        .def_property_readonly("blocks", &Media::blocks)
        .def_property_readonly("reserve", &Media::reserve);

    // ---- GPU request injection (model/gpu_port.py)
    py::class_<GpuPort>(m, "GpuPort",
                        "The closed-loop GPU stepped one tick at a time (model/gpu_port.py).")
        .def(py::init([](const py::object& cfg, const py::object& gpu, const py::dict& arrays,
                         bool channel_shape, int64_t start) {
            return new GpuPort(gpu_config(cfg, gpu), program_from_arrays(arrays),
                               channel_shape, mapper_config(cfg), start);
        }), py::arg("cfg"), py::arg("gpu"), py::arg("arrays"), py::arg("channel_shape"),
             py::arg("start") = 0)
        .def_property_readonly("exhausted", &GpuPort::exhausted)
        .def_property_readonly("finished", &GpuPort::finished)
        .def_property_readonly("channel_shape", &GpuPort::channel_shape)
        .def_property_readonly("start_tick", &GpuPort::start_tick)
        .def_property_readonly("t", &GpuPort::last_tick)
        .def("next_tick", [](const GpuPort& self) -> py::object {
            int64_t t = self.next_tick();
            if (t == NO_TICK) return py::none();
            return py::int_(t);
        })
        .def("grants", [](GpuPort& self, int64_t t) {
            std::vector<Grant> out;
            self.grants(t, out);
            auto n = static_cast<py::ssize_t>(out.size());
            const char* names[] = {"port", "id", "created", "source", "op", "addr", "nbytes"};
            py::dict d;
            std::vector<int64_t*> col;
            for (const char* name : names) {
                py::array_t<int64_t> a(n);
                col.push_back(a.mutable_data());
                d[name] = a;
            }
            for (py::ssize_t i = 0; i < n; ++i) {
                const Grant& g = out[i];
                int64_t v[] = {g.port, g.id, g.created, g.part, g.op, g.addr, g.nbytes};
                for (size_t c = 0; c < col.size(); ++c) col[c][i] = v[c];
            }
            return d;
        }, py::arg("t"),
             "Tick t's grants as arrays by name: port, id, created, source (the request's "
             "sub-partition), op (0 R, 1 W), addr, nbytes.")
        .def("respond", &GpuPort::respond, py::arg("id"), py::arg("t"))
        .def("result", [](const GpuPort& self) { return result_dict(self.result()); })
        .def("run_standin", [](GpuPort& self, py::array_t<int64_t, py::array::c_style |
                                                                 py::array::forcecast> delays) {
            if (delays.ndim() != 1 || delays.size() == 0)
                throw std::invalid_argument("delays must be a non-empty 1-D array");
            std::vector<int64_t> d(delays.data(), delays.data() + delays.size());
            for (auto v : d)
                if (v < 0)
                    throw std::invalid_argument("delays must be >= 0, not " + std::to_string(v));
            std::vector<int64_t> log;
            {
                py::gil_scoped_release nogil;
                gpu_standin(self, d, log);
            }
            return log_array(std::move(log), GPU_LOG_WIDTH);
        }, py::arg("delays"),
             "Run against the stand-in controller (hbfsim/engine_standin.py run_gpu); the log.");
}
