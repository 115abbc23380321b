"""The serving loop: continuous batching over a workload, event-driven, one replica at a time.

Each iteration (vLLM's continuous batching with chunked prefill) runs every decoding
sequence for one token and fills the rest of a token budget with prefill chunks, in
admission order. New KV pages are allocated as sequences grow; when a step's pages do not
fit, the most recently admitted running request is preempted by *recompute* (its own pages
are freed, its pinned prefix blocks stay cached, and it is re-prefilled with its prompt plus
the tokens it had generated, as vLLM's recompute preemption).

Speed: a run of decode-only iterations with nothing to admit is costed in one vectorized
call (serve/cost.py) and applied at once, up to the next completion, the next arrival that
could be admitted, or the first step whose new KV pages would not fit. Per-event work is
O(batch) Python; per-token work is none. Turns of a session arrive closed loop
(``arrival_s`` None: ``think_s`` after the previous turn completes) or at their time.

Replicas (``gpus / tp``) serve disjoint sets of sessions (session ``s`` on replica
``s mod replicas``) and are simulated one after the other; the run's clock is the latest.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

import numpy as np

from hbfsim.serve.cost import CostModel, CostParams
from hbfsim.serve.energy import Tally
from hbfsim.serve.hardware import HOST_LINK_BW, HOST_LINK_LATENCY_S, Node
from hbfsim.serve.kv_cache import HBF, HBM, KVCache
from hbfsim.serve.models import ModelCosts
from hbfsim.serve.scheduler import Scheduler
from hbfsim.serve.workload import Workload

__all__ = ["EngineConfig", "ReplicaResult", "RunResult", "simulate", "kv_pages"]


@dataclass(frozen=True)
class EngineConfig:
    """Batching limits (vLLM names in brackets) and memory reserves.

    Members
    -------
    max_batch : int
        Running sequences at most, per scheduler [max_num_seqs = 256]. Under data-parallel
        attention every attention rank schedules its own batch (vLLM runs one engine core
        per data-parallel rank), so a replica of ``tp`` DPA ranks runs up to
        ``tp * max_batch`` (:func:`simulate`).
    max_tokens : int
        Query tokens per iteration, decode + prefill chunks, per scheduler
        [max_num_batched_tokens = 8192]; ``tp * max_tokens`` per replica under DPA.
    page_tokens : int
        Tokens per KV page [block_size = 16].
    activation_reserve_bytes : float
        HBM per GPU kept for activations and workspace, not for KV (4 GB; an assumption).
    max_jump : int
        Most decode iterations costed in one vectorized call (bounds memory, not results).
    reserve_output : bool
        Admit a request only if the device can also hold the KV of every output token it
        may still generate, and of those of the running requests (TensorRT-LLM's default
        GUARANTEED_NO_EVICT capacity policy): no preemption, smaller batches early on.
        ``False``: vLLM's admission by prompt pages, with recompute preemption.
    max_backlog_s : float
        Background KV moves (cooling to HBF and to the host, DRAM -> SSD) queue on their
        channels while iterations run; an iteration does not end while a channel is more
        than this far behind (a finite staging buffer; 1 s, an assumption).
    """

    max_batch: int = 256
    max_tokens: int = 8192
    page_tokens: int = 16
    activation_reserve_bytes: float = 4e9
    max_jump: int = 4096
    max_backlog_s: float = 1.0
    reserve_output: bool = False

    def __post_init__(self):
        for k in ("max_batch", "max_tokens", "page_tokens", "max_jump"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive integer, not {v!r}")
        if not (math.isfinite(self.max_backlog_s) and self.max_backlog_s >= 0):
            raise ValueError(f"max_backlog_s must be >= 0, not {self.max_backlog_s!r}")
        if not (math.isfinite(self.activation_reserve_bytes)
                and self.activation_reserve_bytes >= 0):
            raise ValueError(f"activation_reserve_bytes must be >= 0, "
                             f"not {self.activation_reserve_bytes!r}")


def kv_pages(node: Node, cost: CostModel, cfg: EngineConfig) -> list:
    """KV pages of one replica per tier [HBM, HBF, DRAM, SSD] (exact; docs/serving.md).

    A page holds ``page_tokens`` tokens of KV on every GPU of the replica, so a tier's page
    count is its per-GPU free bytes over the per-GPU bytes of one page."""
    page_gpu = cfg.page_tokens * cost.kv_token_gpu
    wh, wf = cost.weights_resident()
    hbm_free = node.hbm.capacity - wh - cfg.activation_reserve_bytes
    hbf_free = node.hbf.capacity - wf if node.hbf.stacks else 0.0
    if hbm_free < page_gpu:
        raise ValueError(f"model {cost.model.name!r} does not fit: {wh / 1e9:.1f} GB of weights "
                         f"per GPU + {cfg.activation_reserve_bytes / 1e9:.1f} GB reserve in "
                         f"{node.hbm.capacity / 1e9:.0f} GB of HBM leaves no KV page")
    if node.hbf.stacks and hbf_free < 0:
        raise ValueError(f"weights need {wf / 1e9:.1f} GB of HBF per GPU; the GPU has "
                         f"{node.hbf.capacity / 1e9:.0f} GB")
    pages = [int(hbm_free // page_gpu), int(max(hbf_free, 0.0) // page_gpu)]
    for t in (node.dram, node.ssd):
        pages.append(int(t.capacity // page_gpu) if t.stacks else 0)
    return pages


class _Req:
    __slots__ = ("i", "session", "index", "n_in", "n_out", "hashes", "arrival", "prompt",
                 "generated", "out_left", "pref_left", "ctx", "pinned", "hit_tok", "hit_f",
                 "own_h", "own_f", "first_s", "seq", "in_run", "preempted", "ready",
                 "final_own")

    def __init__(self, i, turn, arrival):
        self.i, self.session, self.index = i, turn.session, turn.index
        self.n_in, self.n_out, self.hashes = turn.input_tokens, turn.output_tokens, \
            turn.block_hashes
        self.arrival = arrival
        self.generated = 0
        self.out_left = turn.output_tokens
        self.first_s = None
        self.in_run = False
        self.preempted = 0
        self.pinned = ()
        self.own_h = self.own_f = 0
        self.final_own = 0
        self.ready = arrival


@dataclass
class ReplicaResult:
    """What one replica did (engine internals; :class:`RunResult` aggregates)."""

    turns: list
    arrival: np.ndarray
    first: np.ndarray
    done: np.ndarray
    completions: np.ndarray
    rejected: np.ndarray
    tally: Tally
    pages: list
    clock_s: float = 0.0
    iterations: int = 0
    admitted_tokens: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    sampled_tokens: int = 0
    preemptions: int = 0
    max_running: int = 0
    kv_written_tokens: list = field(default_factory=lambda: [0, 0, 0, 0])


@dataclass
class RunResult:
    """A whole run: per-turn timings and the summed tallies of its replicas.

    Members
    -------
    replicas : list of ReplicaResult
    tally : Tally
    clock_s : float
        Completion time of the last turn.
    """

    replicas: list
    tally: Tally
    clock_s: float


class _Replica:
    """The serving loop of one replica (module docstring)."""

    def __init__(self, turns, block_tokens, cost: CostModel, sched: Scheduler,
                 cfg: EngineConfig, pages, check=False, progress=None):
        self.turns = turns
        self.cost, self.sched, self.cfg = cost, sched, cfg
        self.P, self.B = cfg.page_tokens, block_tokens
        if block_tokens % cfg.page_tokens:
            raise ValueError(f"workload block_tokens ({block_tokens}) must be a multiple of "
                             f"page_tokens ({cfg.page_tokens})")
        self.kv = KVCache(pages, cfg.page_tokens, block_tokens)
        self.check = check
        self.progress = progress
        n = len(turns)
        self.next_of = [None] * n
        last = {}
        for i, tr in enumerate(turns):
            if tr.session in last:
                self.next_of[last[tr.session]] = i
            last[tr.session] = i
        self.sess_blocks = {}
        self.res = ReplicaResult(turns, np.full(n, np.nan), np.full(n, np.nan),
                                 np.full(n, np.nan), np.zeros(n, np.int64),
                                 np.zeros(n, bool), Tally(), list(pages))
        m = cost.model
        self.tp = cost.tp
        self.kvb = cost.kv_token_gpu * cost.tp  # KV bytes of one token over the replica
        self.layers, self.qh = m.layers, m.q_heads
        self.pair_macs = m.pair_flops * m.layers / 2
        self.pair_exps = m.pair_exps * m.layers
        self.link_per_token = cost.link_bytes_per_token()
        node = cost.node
        self.mig_kvb = cost.kv_token_gpu  # moves run on every GPU's share in parallel
        ssd = (node.ssd.read_bw, node.ssd.timing.read_latency_s) if node.ssd.stacks else (1, 0)
        self.chan = {"hbf_write": (cost.wbw_f, cost.wlat_f), "hbf_read": (cost.bw_f, cost.lat_f),
                     "link_in": (HOST_LINK_BW, HOST_LINK_LATENCY_S),
                     "link_out": (HOST_LINK_BW, HOST_LINK_LATENCY_S), "ssd": ssd}
        self.busy = dict.fromkeys(self.chan, 0.0)
        self.now = 0.0

    # ------------------------------------------------------------------ helpers
    def _queue_moves(self, t):
        """Queue the KV moves made since the last call on their channels (FIFO, from ``t``)."""
        b, busy = self.mig_kvb, self.busy
        for ch, tok in self.kv.take_pending().items():
            if tok:
                bw, lat = self.chan[ch]
                busy[ch] = max(t, busy[ch]) + lat + tok * b / bw

    def _throttle(self, t_end):
        """An iteration ends no earlier than the most backlogged channel allows."""
        return max(t_end, max(self.busy.values()) - self.cfg.max_backlog_s)

    def _kvf(self, r):
        """KV tokens of ``r`` on HBF (pinned HBF blocks + its own pages' HBF share)."""
        own = r.own_h + r.own_f
        return r.hit_f + ((r.ctx - r.hit_tok) * r.own_f / own if own else 0.0)

    def _gf(self, r):
        own = r.own_h + r.own_f
        return r.own_f / own if own else 0.0

    def _resident(self, r):
        """Is ``r``'s prefix on the device? Probe one block: the last one its session
        registered (tail blocks cool first, so residency is prefix-closed), else the first."""
        maxb = r.n_in // self.B
        if not maxb:
            return False
        n = self.sess_blocks.get(r.session, 0)
        idx = min(n, maxb) - 1 if n else 0
        return self.kv.on_device(r.hashes[idx])

    def _tally(self, k, tokens, pre_tokens, pairs, pre_pairs, kvh, kvf, nh, nf, logits,
               pre_logits):
        t, c, tp = self.res.tally, self.cost, self.tp
        wh, wf = c.weight_read_bytes(tokens)
        t.weight_read[0] += k * wh * tp
        t.weight_read[1] += k * wf * tp
        t.kv_read[0] += kvh * self.kvb
        t.kv_read[1] += kvf * self.kvb
        t.written[HBM] += nh * self.kvb
        t.written[HBF] += nf * self.kvb
        self.res.kv_written_tokens[HBM] += nh
        self.res.kv_written_tokens[HBF] += nf
        lin = c.linear_flops(1) / 2
        lm = c.lm_head_flops(1) / 2
        t.macs_prefill += pre_tokens * lin + pre_pairs * self.pair_macs + pre_logits * lm
        t.macs_decode += (k * tokens - pre_tokens) * lin + (pairs - pre_pairs) * self.pair_macs \
            + (logits - pre_logits) * lm
        t.exps += pairs * self.pair_exps
        t.divs += k * tokens * self.qh * self.layers
        t.sqrts += k * tokens * (2 * self.layers + 1)
        t.link_bytes += k * tokens * self.link_per_token

    # ------------------------------------------------------------------ admission
    def _future_pages(self):
        """Pages the running requests may still allocate (``reserve_output``)."""
        return sum(max(0, r.final_own - r.own_h - r.own_f) for r in self.running)

    def _try_admit(self, r, empty, future=0):
        kv, B, P = self.kv, self.B, self.P
        prompt = r.n_in + r.generated
        maxb = min(r.n_in // B, (prompt - 1) // B)
        hits = kv.lookup(r.hashes, maxb)
        idle_dev = host = 0
        for b in hits:
            if b.tier <= HBF:
                if b.ref == 0:
                    idle_dev += 1
            else:
                host += 1
        hit_tok = len(hits) * B
        own = -(-(prompt - hit_tok) // P)
        need = own + (idle_dev + host) * kv.bp
        final_own = -(-(prompt - hit_tok + r.out_left) // P)
        if self.cfg.reserve_output and \
                kv.dev_busy + future + need + (final_own - own) > kv.dev_cap:
            return False
        # Watermark: keep one free page per running sequence so that admitting ``r`` cannot
        # force the next decode step to preempt it straight away (vLLM keeps a watermark too).
        if empty:
            if kv.dev_busy + need > kv.dev_cap:
                return False
        else:
            # A returning turn whose context left the device (some of it on the host, or
            # none cached any more) must bring it back as a newcomer brings its prompt.
            lost = host > 0 or len(hits) < min(self.sess_blocks.get(r.session, 0), maxb)
            mine = kv.owner_dev.get(r.session, 0)  # not protected against itself
            if not self.sched.admits(r, need, kv.dev_busy, kv.protected_dev - mine,
                                     kv.dev_cap - len(self.running), lost=lost):
                return False
        for b in hits:
            kv.pin(b)
        hit_f = 0
        for b in hits:
            if b.tier > HBF:
                kv.reload(b)
            if b.tier == HBF:
                hit_f += B
        r.own_h, r.own_f = kv.alloc(own)
        r.final_own = final_own
        kv.unprotect(r.session)
        self._queue_moves(self.now)
        # A host hit is usable once its reload has crossed PCIe (and left the SSD).
        r.ready = max(self.busy["link_in"], self.busy["ssd"]) if host else self.now
        r.pinned, r.hit_tok, r.hit_f = hits, hit_tok, hit_f
        r.prompt, r.ctx, r.pref_left = prompt, hit_tok, prompt - hit_tok
        res = self.res
        res.admitted_tokens += prompt
        res.host_hit_tokens += host * B
        res.device_hit_tokens += hit_tok - host * B
        return True

    def _kept(self):
        """Waiting requests whose session keeps its whole context on the device (arrival
        order), dropping those that lost it since they arrived."""
        own, kept = self.kv.owner_dev, self.kept
        stale = []
        try:
            for i, r in kept.items():
                if r.session in own:
                    yield r
                else:
                    stale.append(i)
        finally:
            for i in stale:
                del kept[i]

    def _schedule(self, empty):
        run, cfg = self.running, self.cfg
        admitted = False
        future = self._future_pages() if cfg.reserve_output else 0
        for r in self.sched.candidates(self.waiting, self._resident, self._kept()):
            if len(run) >= cfg.max_batch:
                break
            if not self._try_admit(r, empty and not run, future):
                break
            if cfg.reserve_output:
                future += max(0, r.final_own - r.own_h - r.own_f)
            r.in_run, r.seq = True, self.seq
            self.kept.pop(r.i, None)
            self.seq += 1
            run.append(r)
            admitted = True
        if admitted:
            self.waiting = [r for r in self.waiting if not r.in_run]
            self.res.max_running = max(self.res.max_running, len(run))

    # ------------------------------------------------------------------ lifecycle
    def _after(self, i, t):
        j = self.next_of[i]
        if j is not None and self.turns[j].arrival_s is None:
            heapq.heappush(self.heap, (t + self.turns[j].think_s, j))

    def _complete(self, r, t):
        kv, B, bp = self.kv, self.B, self.kv.bp
        full = r.ctx // B
        nin_full = r.n_in // B
        j = self.next_of[r.i]
        nxt = self.turns[j].block_hashes if j is not None else ()
        consistent = j is not None and len(nxt) >= nin_full and \
            (nin_full == 0 or nxt[nin_full - 1] == r.hashes[nin_full - 1])
        oh, of = r.own_h, r.own_f
        new = []
        hs = r.hashes
        for bi in range(len(r.pinned), full):
            if bi < nin_full:
                h = hs[bi]
            elif consistent and bi < len(nxt):
                h = nxt[bi]
            else:
                break
            if oh >= bp:
                tier = HBM
            elif of >= bp:
                tier = HBF
            else:
                break
            b = kv.register(h, tier)
            if b is None:
                continue
            if tier == HBM:
                oh -= bp
            else:
                of -= bp
            new.append(b)
        kv.free(oh, of)
        kv.release(list(r.pinned) + new)
        self.sess_blocks[r.session] = len(r.pinned) + len(new)
        if j is not None:
            kv.protect(r.session, list(r.pinned) + new)
        r.in_run = False
        res = self.res
        res.done[r.i] = t
        res.first[r.i] = r.first_s
        res.completions[r.i] += 1
        self.n_done += 1
        if self.progress is not None:
            self.progress(1)
        self._after(r.i, t)

    def _preempt(self, r):
        self.running.remove(r)
        self.kv.free(r.own_h, r.own_f)
        self.kv.release(list(r.pinned))
        r.pinned, r.own_h, r.own_f, r.in_run = (), 0, 0, False
        r.preempted += 1
        self.res.preemptions += 1
        self.waiting.insert(0, r)

    # ------------------------------------------------------------------ the loop
    def run(self):
        cfg, kv, P = self.cfg, self.kv, self.P
        res = self.res
        self.heap = [(tr.arrival_s, i) for i, tr in enumerate(self.turns)
                     if tr.arrival_s is not None]
        heapq.heapify(self.heap)
        self.waiting, self.running = [], []
        self.kept = {}  # waiting requests of sessions that keep their context: see _kept
        self.seq = 0
        self.n_done = 0
        t = 0.0
        dirty = True
        while self.heap or self.waiting or self.running:
            while self.heap and self.heap[0][0] <= t:
                a, i = heapq.heappop(self.heap)
                tr = self.turns[i]
                res.arrival[i] = a
                if -(-(tr.input_tokens + tr.output_tokens) // P) > kv.dev_cap:
                    res.rejected[i] = True  # can never fit, even alone
                    if self.progress is not None:
                        self.progress(1)
                    self._after(i, a)
                    continue
                req = _Req(i, tr, a)
                self.waiting.append(req)
                if tr.session in kv.owner_dev:
                    self.kept[i] = req
                dirty = True
            if not self.running and not self.waiting:
                if not self.heap:
                    break
                t = max(t, self.heap[0][0])
                continue
            if dirty and self.waiting and len(self.running) < cfg.max_batch:
                self.now = t
                # Nothing running and nothing due: admit regardless of any headroom, so that
                # a policy can delay work but never stall the replica.
                self._schedule(not self.running and not self.heap)
                dirty = False
            if not self.running:
                if self.heap and not (self.waiting and dirty):
                    t = max(t, self.heap[0][0])  # the headroom holds a newcomer back
                    continue
                raise RuntimeError("nothing admitted on an empty replica")  # excluded above
            if any(r.pref_left and r.ready <= t for r in self.running):
                t, dirty = self._iteration(t, dirty)
            elif any(not r.pref_left for r in self.running):
                t, dirty = self._jump(t, dirty)
            else:  # every running request waits for its reload from the host
                t = min(r.ready for r in self.running)
            if self.check:
                kv.check()
                assert len(self.running) <= cfg.max_batch
            res.iterations += 1
        res.clock_s = t
        for i in range(4):
            res.tally.written[i] += kv.written[i] * self.mig_kvb * self.tp
            res.tally.moved_out[i] += kv.moved_out[i] * self.mig_kvb * self.tp
            res.kv_written_tokens[i] += kv.written[i]
        return res

    def _fit_growth(self, dec):
        """Preempt (recompute) until every decoding sequence's next KV slot fits."""
        kv, P = self.kv, self.P
        while True:
            need = sum(1 for r in dec if r.ctx % P == 0)
            if need <= kv.dev_cap - kv.dev_busy:
                return dec
            victim = self.running[-1]
            self._preempt(victim)
            dec = [r for r in dec if r is not victim]

    def _iteration(self, t, dirty):
        """One mixed iteration: decode tokens + prefill chunks."""
        cfg, kv, P = self.cfg, self.kv, self.P
        dec = [r for r in self.running if not r.pref_left]
        before = self.res.preemptions
        dec = self._fit_growth(dec)
        if self.res.preemptions != before:
            dirty = True
        for r in dec:
            if r.ctx % P == 0:
                h, f = kv.alloc(1)
                r.own_h += h
                r.own_f += f
        n = len(dec)
        tokens, pairs, kvf, logits = n, 0.0, 0.0, n
        ctx_sum, nf = 0, 0.0
        for r in dec:
            ctx_sum += r.ctx
            kvf += self._kvf(r)
            nf += self._gf(r)
        pairs = ctx_sum + n
        budget = cfg.max_tokens - n
        chunks = []
        pre_tokens, pre_pairs, pre_logits = 0, 0.0, 0
        for r in self.running:
            if budget <= 0:
                break
            if not r.pref_left or r.ready > t:
                continue
            c = min(r.pref_left, budget)
            budget -= c
            p = r.ctx
            pp = c * p + c * (c + 1) / 2
            pairs += pp
            pre_pairs += pp
            f = self._kvf(r)
            kvf += f
            ctx_sum += p
            nf += c * self._gf(r)
            tokens += c
            pre_tokens += c
            if c == r.pref_left:
                logits += 1
                pre_logits += 1
            chunks.append((r, c))
        kvh = ctx_sum - kvf
        nh = tokens - nf
        dt = float(self.cost.iteration_seconds(tokens, pairs, kvh, kvf, nh, nf, logits))
        self._queue_moves(t)
        t = self._throttle(t + dt)
        self._tally(1, tokens, pre_tokens, pairs, pre_pairs, kvh, kvf, nh, nf, logits,
                    pre_logits)
        res = self.res
        res.prefill_tokens += pre_tokens
        res.decode_tokens += n
        res.sampled_tokens += logits
        finished = []
        for r in dec:
            r.ctx += 1
            r.generated += 1
            r.out_left -= 1
            if not r.out_left:
                finished.append(r)
        for r, c in chunks:
            r.ctx += c
            r.pref_left -= c
            if not r.pref_left:
                r.generated += 1
                r.out_left -= 1
                if r.first_s is None:
                    r.first_s = t
                if not r.out_left:
                    finished.append(r)
        if finished:
            for r in finished:
                self._complete(r, t)
            self.running = [r for r in self.running if r.in_run]
            dirty = True
        return t, dirty

    def _jump(self, t, dirty):
        """``k`` identical-shape decode iterations at once (module docstring)."""
        cfg, kv, P = self.cfg, self.kv, self.P
        dec = [r for r in self.running if not r.pref_left]
        ctx = np.fromiter((r.ctx for r in dec), np.int64, len(dec))
        free = kv.dev_cap - kv.dev_busy
        base = (ctx + P - 1) // P

        def need(k):
            return int(((ctx + k + P - 1) // P - base).sum())

        if need(1) > free:
            self._fit_growth(dec)
            return t, True
        k = min(min(r.out_left for r in dec), cfg.max_jump)
        if need(k) > free:
            lo, hi = 1, k  # need(lo) fits, need(hi) does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if need(mid) <= free:
                    lo = mid
                else:
                    hi = mid
            k = lo
        n = len(dec)
        S = int(ctx.sum())
        Sf = sum(self._kvf(r) for r in dec)
        g = sum(self._gf(r) for r in dec) / n
        i = np.arange(k, dtype=np.float64)
        kv_tok = S + i * n
        kvf = Sf + i * (n * g)
        times = self.cost.iteration_seconds(n, kv_tok + n, kv_tok - kvf, kvf, n * (1 - g),
                                            n * g, n)
        times = np.broadcast_to(times, (k,)).astype(np.float64, copy=True)
        cum = np.cumsum(times)
        # Stop at the first event that can change the batch: an arrival (when a slot is
        # free) or a reload that lets a waiting prefill start.
        stop = min((r.ready for r in self.running if r.pref_left), default=math.inf)
        if self.heap and len(self.running) < cfg.max_batch:
            stop = min(stop, self.heap[0][0])
        if t + cum[-1] > stop:
            k = min(int(np.searchsorted(cum, stop - t, side="left")) + 1, len(cum))
        t0 = t
        t += float(cum[k - 1])
        grow = (ctx + k + P - 1) // P - base
        for r, gpages in zip(dec, grow.tolist()):
            if gpages:
                h, f = kv.alloc(gpages)
                r.own_h += h
                r.own_f += f
        self._queue_moves(t0)
        t = self._throttle(t)
        kvt_sum = float(kv_tok[:k].sum())
        kvf_sum = float(kvf[:k].sum())
        self._tally(k, n, 0, kvt_sum + k * n, 0.0, kvt_sum - kvf_sum, kvf_sum,
                    k * n * (1 - g), k * n * g, k * n, 0)
        self.res.decode_tokens += k * n
        self.res.sampled_tokens += k * n
        finished = []
        for r in dec:
            r.ctx += k
            r.generated += k
            r.out_left -= k
            if not r.out_left:
                finished.append(r)
        if finished:
            for r in finished:
                self._complete(r, t)
            self.running = [r for r in self.running if r.in_run]
            dirty = True
        return t, dirty


def simulate(workload: Workload, node: Node, model: ModelCosts, scheduler: Scheduler,
             *, tp: int = 1, ep: int | None = None, weights: str = "hbm",
             params: CostParams | None = None, config: EngineConfig | None = None,
             dpa: bool = False, check: bool = False, progress=None) -> RunResult:
    """Serve ``workload`` on ``node`` and return the :class:`RunResult`.

    Parameters
    ----------
    tp, ep, weights, params, dpa
        As for :class:`~hbfsim.serve.cost.CostModel`.
    check : bool
        Verify the KV accounting invariants after every event (tests; slow).
    progress : callable or None
        Called with a count as turns complete or are rejected (a progress bar's update).
    """
    cfg = config or EngineConfig()
    cost = CostModel(node, model, tp=tp, ep=ep, weights=weights, params=params, dpa=dpa)
    if cost.dpa:  # one scheduler per attention rank (EngineConfig)
        cfg = replace(cfg, max_batch=cfg.max_batch * tp, max_tokens=cfg.max_tokens * tp)
    pages = kv_pages(node, cost, cfg)
    replicas = node.gpus // tp
    groups = [[] for _ in range(replicas)]
    for tr in workload.turns:
        groups[tr.session % replicas].append(tr)
    out, tally = [], Tally()
    for g in groups:
        r = _Replica(g, workload.block_tokens, cost, scheduler, cfg, pages, check,
                     progress).run()
        tally.add(r.tally)
        out.append(r)
    return RunResult(out, tally, max((r.clock_s for r in out), default=0.0))
