"""Characterize one HBF stack on the device model: the serving level's HBF tier timing.

Implements issue 9 item 2 (docs/serving-hbf-tier.md). The configured stack is driven with
synthetic transfers of ``B`` bytes: streaming reads (weights: consecutive pages, spread
over channels by the configured placement), KV-block reads (runs of one KV block at
scattered block-aligned pages) and KV-block writes (stores that fill whole pages, so each
page is one full-page PROGRAM). A transfer's time is the device window, first request
arrival to last response. Each pattern gets a line ``t(B) = latency + B / bw`` (``bw`` the
steady-state throughput of the largest transfer, ``latency`` the least-squares intercept
over the sizes of at least one media wave) and its measured curve, which
:class:`~hbfsim.serve.tier_timing.TierTiming` interpolates below the largest size.

The result is cached under ``$XDG_CACHE_HOME/hbfsim/`` keyed by the configuration's hash.

    python -m hbfsim.serve.characterize [--config F.toml] [--profile P] [--no-cache]
                                        [--engine compiled|reference]

The transfers run on the configuration's engine (``engine``, ``--engine``; docs/engine.md):
the compiled engine or the golden model, which give the same figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path


from hbfsim.config import ENGINES, PAGE_BYTES, ConfigError, HbfConfig, load_config
from hbfsim.serve.tier_timing import TierTiming
from hbfsim.serve.transfer import DEFAULT_REQUEST_BYTES, _engine, measure, measure_mixed

__all__ = [
    "CHARACTERIZATION_VERSION",
    "CHECKS",
    "DEFAULT_KV_BLOCK_BYTES",
    "DEFAULT_REQUEST_BYTES",
    "cache_key",
    "cache_path",
    "characterize",
    "check_against_device",
    "default_cache_dir",
    "entry_engine",
    "format_checks",
    "format_table",
    "kv_runs",
    "measure",
    "measure_mixed",
    "stream_runs",
    "wave_pages",
]

#: Bump when the method changes, so cached results of an older method are not reused.
CHARACTERIZATION_VERSION = 1

#: One vLLM KV block of one layer: 16 tokens x 4096 B/token (8 KV heads x 128 head dim x
#: K and V x 2 B), the GQA shape of Qwen3-32B and Llama-3.1 (serving paper Table 3 models, TP1).
DEFAULT_KV_BLOCK_BYTES = 16 * 4096


# Transfer sizes in media waves (W pages = every active slot busy once, wave_pages); None
# is one request. Off-wave sizes (1.5, 3, 6) sit mid-step of the staircase an idle device
# shows (docs/serving-hbf-tier.md), so the fitted latency averages it. KV reads and writes
# stop earlier: scattered blocks leave subarrays blocked, and the scheduler's scans of the
# queues cost host time per tick.
_STREAM_WAVES = (None, 1 / 16, 1 / 4, 1 / 2, 1, 1.5, 2, 3, 4, 6, 8)
_KV_WAVES = (None, 1 / 4, 1 / 2, 1, 1.5, 2, 3, 4, 6)
_WRITE_WAVES = (None, 1 / 4, 1, 1.5, 2, 3, 4)
# Outstanding-request sweep (stream, 4 waves): GPU-side windows in waves, beside the
# controller's own bound (admission).
_OUTSTANDING_WAVES = (1 / 16, 1 / 4, 1)
_SEED = 9  # KV block placement (issue 9); fixed: the characterization is reproducible


# ----------------------------------------------------------------------------- patterns
def wave_pages(cfg: HbfConfig) -> int:
    """Page operations the stack can run at once: its read channels x active subarrays.

    ``channels`` (the read channels under a partition scheduler) x ``min(subarrays,
    active_per_channel)``, capped by ``active_total`` when set. Transfer sizes are chosen in
    these units so that every configuration is measured across its knee.
    """
    w = cfg.read_channels * min(cfg.subarrays_per_channel, cfg.active_per_channel)
    if cfg.active_total:
        w = min(w, cfg.active_total)
    return max(1, w)


def stream_runs(nbytes: int) -> list[tuple[int, int]]:
    """One run ``(first_page, bytes)`` of consecutive pages from page 0 (weights)."""
    return [(0, nbytes)]


def kv_runs(cfg: HbfConfig, nbytes: int, kv_block_bytes: int,
            seed: int = _SEED) -> list[tuple[int, int]]:
    """Runs of one KV block each at distinct block-aligned pages, in a seeded order.

    Blocks are the first ``ceil(nbytes / kv_block_bytes)`` of one seeded permutation of the
    stack's block slots, so a larger transfer contains a smaller one's blocks; the last
    block is shortened to the transfer's size.
    """
    if nbytes < 1:
        raise ValueError(f"a KV transfer needs at least one byte, not {nbytes!r}")
    block_pages = -(-kv_block_bytes // PAGE_BYTES)
    slots = cfg.pages_per_stack // block_pages
    n = -(-nbytes // kv_block_bytes)
    if n > slots:
        raise ValueError(f"a {nbytes}-byte KV transfer needs {n} blocks, more than the "
                         f"stack's {slots} (capacity_bytes {cfg.capacity_bytes})")
    rng = random.Random(seed)
    blocks = rng.sample(range(slots), n)
    runs = [(b * block_pages, kv_block_bytes) for b in blocks]
    runs[-1] = (runs[-1][0], nbytes - (n - 1) * kv_block_bytes)
    return runs


def _fit(rows, bw: float) -> float:
    """Least-squares latency of ``t = latency + B / bw`` over ``rows`` at a fixed ``bw``.

    With the slope fixed the least-squares intercept is the mean of ``t - B / bw``; it is
    clamped at zero (a negative startup is an artefact, not a latency).
    """
    return max(0.0, sum(r["seconds"] - r["bytes"] / bw for r in rows) / len(rows))


# ----------------------------------------------------------------------------- the method
def _one_stack(cfg: HbfConfig) -> HbfConfig:
    """The configuration of one stack of ``cfg`` (TierTiming is per stack)."""
    if cfg.stacks == 1:
        return cfg
    # The serving level's stacks are separate devices, each with its own port; HbfConfig's
    # stacks share one port (A2), so one stack of it is what one serving stack is.
    return cfg.replace(stacks=1, capacity_bytes=cfg.capacity_bytes // cfg.stacks)


def _sizes(waves, w: int, first: int) -> list[int]:
    """Transfer sizes in bytes: ``first`` for None, else the nearest whole pages."""
    out = []
    for f in waves:
        b = first if f is None else max(1, round(f * w)) * PAGE_BYTES
        if not out or b > out[-1]:
            out.append(b)
    return out


def _run_characterization(cfg: HbfConfig, kv_block_bytes: int, request_bytes: int,
                          progress: bool) -> dict:
    cfg = _one_stack(cfg)
    if kv_block_bytes % PAGE_BYTES and cfg.write_timeout_policy == "strict":
        raise ValueError(f"kv_block_bytes {kv_block_bytes} leaves a partial last page, which "
                         f"write_timeout_policy = 'strict' refuses to program; use a "
                         f"multiple of {PAGE_BYTES} or the 'partial' policy")
    w = wave_pages(cfg)
    rows = []
    engine = _engine(cfg)
    if progress:
        print(f"  on the {engine} engine", file=sys.stderr)

    def run(kind, pattern, nbytes, op, runs, outstanding=None, fit=True):
        t0 = time.perf_counter()
        r = measure(cfg, op, runs, request_bytes=request_bytes, outstanding=outstanding,
                    engine=engine)
        if r["errors"]:
            raise RuntimeError(f"{kind} {pattern} {nbytes} B: {r['errors']} error responses")
        r.update(kind=kind, pattern=pattern, outstanding=outstanding or cfg.admission,
                 fit=fit, host_s=time.perf_counter() - t0)
        rows.append(r)
        if progress:
            print(f"  {kind:<5} {pattern:<6} {nbytes:>12,} B  {r['seconds'] * 1e6:>10.2f} us"
                  f"  ({r['host_s']:.2f} s)", file=sys.stderr)
        return r

    for b in _sizes(_STREAM_WAVES, w, request_bytes):
        run("read", "stream", b, "R", stream_runs(b))
    for b in _sizes(_KV_WAVES, w, request_bytes):
        run("read", "kv", b, "R", kv_runs(cfg, b, kv_block_bytes))
    # the smallest write is one full page: stores that fill whole pages (W1)
    for b in _sizes(_WRITE_WAVES, w, PAGE_BYTES):
        run("write", "kv", b, "W", kv_runs(cfg, b, kv_block_bytes))
    b_out = 4 * w * PAGE_BYTES
    for f in _OUTSTANDING_WAVES:
        k = max(1, round(f * w))
        if k < cfg.admission:
            run("read", "stream", b_out, "R", stream_runs(b_out), outstanding=k, fit=False)
    # Reads while KV writes program: where the schedulers differ (M2). Not in the fit; the
    # stream row of the same size is the reference.
    t0 = time.perf_counter()
    m = measure_mixed(cfg, stream_runs(b_out), kv_runs(cfg, w * PAGE_BYTES, kv_block_bytes),
                      request_bytes=request_bytes, engine=engine)
    rows.append({"kind": "mixed", "pattern": "stream+kv", "bytes": m["bytes"],
                 "seconds": m["read_s"], "write_bytes": m["write_bytes"],
                 "write_seconds": m["write_s"], "outstanding": cfg.admission, "fit": False,
                 "host_s": time.perf_counter() - t0})
    if progress:
        print(f"  mixed  {b_out:>12,} B read + {w * PAGE_BYTES:,} B written: reads "
              f"{m['read_s'] * 1e6:.2f} us, writes {m['write_s'] * 1e6:.2f} us", file=sys.stderr)
    return {"cfg": cfg, "rows": rows, "wave_pages": w, "engine": engine}


def _figures(kind, pattern, rows, w):
    """Bandwidth = the steady-state throughput of the largest transfer; latency = the
    least-squares intercept at that bandwidth over the sizes of at least one wave; curve =
    every fit row."""
    sel = [r for r in rows if r["kind"] == kind and r["pattern"] == pattern and r["fit"]]
    lin = [r for r in sel if r["bytes"] >= w * PAGE_BYTES]
    bw = sel[-1]["steady_bw"]
    if bw is None:
        raise RuntimeError(f"{kind} {pattern}: the largest transfer is too short for a "
                           f"steady-state bandwidth")
    lat = _fit(lin, bw)
    for r in sel:
        r["line_s"] = lat + r["bytes"] / bw
        r["residual"] = (r["line_s"] - r["seconds"]) / r["seconds"]
    curve = tuple((r["bytes"], r["seconds"]) for r in sel)
    return bw, lat, curve


def _timing(res: dict, kv_block_bytes: int, key: str) -> TierTiming:
    cfg, rows, w = res["cfg"], res["rows"], res["wave_pages"]
    bw, lat, curve = _figures("read", "stream", rows, w)
    kbw, klat, kcurve = _figures("read", "kv", rows, w)
    wbw, wlat, wcurve = _figures("write", "kv", rows, w)
    for r in rows:
        # the model's own accounting: a page is programmed whole, padding included (W3)
        if r["kind"] == "write" and r["page_programs"] * PAGE_BYTES != r["bytes"] + \
                r["padding_bytes"]:
            raise RuntimeError(f"write of {r['bytes']} B: {r['page_programs']} programs but "
                               f"{r['padding_bytes']} padding bytes")
    written = sum(r["bytes"] for r in rows if r["kind"] == "write")
    programmed = sum(r["page_programs"] for r in rows if r["kind"] == "write") * PAGE_BYTES
    # W3: a padded page is programmed whole, so media bytes = host bytes + padding
    wa = programmed / written
    if wa < 1:
        raise RuntimeError(f"{programmed} bytes programmed for {written} written")
    return TierTiming(
        name=f"hbf-device:{key[:12]}", read_bw=bw, read_latency_s=lat,
        write_bw=wbw, write_latency_s=wlat, kv_read_bw=kbw, kv_read_latency_s=klat,
        write_amplification=wa,
        source=(f"device model, {res['engine']} engine: {cfg.channels} ch x "
                f"{cfg.subarrays_per_channel} subarrays, tR {cfg.t_read_us:g} us, "
                f"tPROG {cfg.t_prog_us:g} us, {cfg.scheduler}; KV block {kv_block_bytes} B "
                f"(characterization v{CHARACTERIZATION_VERSION})"),
        points=tuple(rows), read_curve=curve, kv_read_curve=kcurve, write_curve=wcurve)


# ----------------------------------------------------------------------------- the cache
def _canonical(cfg: HbfConfig) -> str:
    """The device-defining keys of ``cfg`` as ``key = value`` TOML lines, in field order.

    The same rendering as ``hbfsim config show``, without ``profile`` (a label) and the
    trace output keys and the engine (they change no timing).
    """
    lines = []
    for k, v in _one_stack(cfg).as_dict().items():
        if k in ("profile", "trace_file", "trace_level", "engine"):
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def cache_key(cfg: HbfConfig, kv_block_bytes: int = DEFAULT_KV_BLOCK_BYTES,
              request_bytes: int = DEFAULT_REQUEST_BYTES) -> str:
    """sha256 of the canonical configuration, the method version and its parameters."""
    text = (_canonical(cfg) + f"# characterization v{CHARACTERIZATION_VERSION} "
            f"kv_block_bytes={kv_block_bytes} request_bytes={request_bytes}\n")
    return hashlib.sha256(text.encode()).hexdigest()


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hbfsim`` (default ``~/.cache/hbfsim``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "hbfsim"


def cache_path(cfg: HbfConfig, cache_dir=None, kv_block_bytes: int = DEFAULT_KV_BLOCK_BYTES,
               request_bytes: int = DEFAULT_REQUEST_BYTES) -> Path:
    """The cache file of ``cfg``'s characterization."""
    d = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return d / f"hbf-tier-{cache_key(cfg, kv_block_bytes, request_bytes)}.json"


_FIELDS = ("name", "read_bw", "read_latency_s", "write_bw", "write_latency_s", "kv_read_bw",
           "kv_read_latency_s", "write_amplification", "source")


def _to_json(t: TierTiming, key: str, cfg: HbfConfig, params: dict) -> str:
    d = {"key": key, "version": CHARACTERIZATION_VERSION, "params": params,
         "config": _canonical(cfg)}
    d["timing"] = {k: getattr(t, k) for k in _FIELDS}
    d["timing"] |= {k: [list(p) for p in getattr(t, k)]
                    for k in ("read_curve", "kv_read_curve", "write_curve")}
    d["timing"]["points"] = list(t.points)
    return json.dumps(d, indent=1, sort_keys=True)


class CacheEntryError(ValueError):
    """A cache entry that must not be used; the message says why, in a few words."""


def _number(where: str, v, low: float = 0.0, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or v < low or (strict and v == low):
        rel = ">" if strict else ">="
        raise CacheEntryError(f"{where} = {v!r:.40} is not a finite number {rel} {low:g}")
    return v


def _curve(where: str, v) -> tuple:
    if not isinstance(v, list) or not v:
        raise CacheEntryError(f"{where} must be a non-empty list of [bytes, seconds]")
    out = []
    for i, p in enumerate(v):
        if not isinstance(p, list) or len(p) != 2:
            raise CacheEntryError(f"{where}[{i}] must be [bytes, seconds], not {p!r:.40}")
        b = _number(f"{where}[{i}] bytes", p[0], strict=True)
        t = _number(f"{where}[{i}] seconds", p[1], strict=True)
        if out and b <= out[-1][0]:
            raise CacheEntryError(f"{where}[{i}] bytes {b!r} do not increase")
        out.append((b, t))
    return tuple(out)


_ENTRY = {"key", "version", "params", "config", "timing"}
_TIMING = set(_FIELDS) | {"read_curve", "kv_read_curve", "write_curve", "points"}


def _from_json(text: str, key: str, cfg: HbfConfig | None = None,
               params: dict | None = None) -> TierTiming:
    """Rebuild a TierTiming from a cache entry checked against its schema.

    Every field must be present (and no other), every figure finite and in range (a
    bandwidth > 0, a latency >= 0, write amplification >= 1, curves of increasing sizes),
    the entry's key and version this one's, and, given ``cfg`` and ``params``, the
    configuration and parameters it was made for equal to these by content.

    Raises
    ------
    CacheEntryError
        Naming the first field that fails (the caller recomputes, never uses the entry).
    """
    from hbfsim.textfile import loads_untrusted

    try:
        d = loads_untrusted(text)
    except ValueError as e:
        raise CacheEntryError(f"not JSON ({str(e)[:60]})") from None
    if not isinstance(d, dict) or set(d) != _ENTRY:
        what = sorted(_ENTRY - set(d)) if isinstance(d, dict) else None
        raise CacheEntryError("not an object" if what is None else
                              f"field {what[0]!r} missing" if what else
                              f"unknown field {sorted(set(d) - _ENTRY)[0]!r}")
    if d["key"] != key or d["version"] != CHARACTERIZATION_VERSION:
        raise CacheEntryError("entry for another key or version")
    if cfg is not None and d["config"] != _canonical(cfg):
        raise CacheEntryError("entry made for another configuration (compared by content)")
    p = d["params"]
    if not isinstance(p, dict) or set(p) != {"kv_block_bytes", "request_bytes", "wave_pages"}:
        raise CacheEntryError("params must hold kv_block_bytes, request_bytes, wave_pages")
    if params is not None and any(p[k] != v for k, v in params.items()):
        raise CacheEntryError("entry made with other parameters")
    if isinstance(p["wave_pages"], bool) or not isinstance(p["wave_pages"], int) \
            or p["wave_pages"] < 1:
        raise CacheEntryError(f"params.wave_pages = {p['wave_pages']!r:.40} is not a "
                              f"positive integer")
    t = d["timing"]
    if not isinstance(t, dict) or set(t) != _TIMING:
        what = sorted(_TIMING - set(t)) if isinstance(t, dict) else None
        raise CacheEntryError("timing is not an object" if what is None else
                              f"timing.{what[0]} missing" if what else
                              f"unknown field timing.{sorted(set(t) - _TIMING)[0]}")
    if t["name"] != f"hbf-device:{key[:12]}":
        raise CacheEntryError(f"timing.name = {t['name']!r:.40} is not this entry's")
    if not isinstance(t["source"], str) or not t["source"]:
        raise CacheEntryError(f"timing.source = {t['source']!r:.40} is not a description")
    kw = {"name": t["name"], "source": t["source"]}
    for k in ("read_bw", "write_bw", "kv_read_bw"):          # a device entry has all three
        kw[k] = _number(f"timing.{k}", t[k], strict=True)
    for k in ("read_latency_s", "write_latency_s", "kv_read_latency_s"):
        kw[k] = _number(f"timing.{k}", t[k])
    kw["write_amplification"] = _number("timing.write_amplification",
                                        t["write_amplification"], low=1.0)
    for k in ("read_curve", "kv_read_curve", "write_curve"):
        kw[k] = _curve(f"timing.{k}", t[k])
    if not isinstance(t["points"], list) or not t["points"]:
        raise CacheEntryError("timing.points must be a non-empty list of measurements")
    for i, r in enumerate(t["points"]):
        if not (isinstance(r, dict) and r.get("kind") in ("read", "write", "mixed")):
            raise CacheEntryError(f"timing.points[{i}] is not a measurement")
        _number(f"timing.points[{i}].bytes", r.get("bytes"), strict=True)
        _number(f"timing.points[{i}].seconds", r.get("seconds"), strict=True)
    try:
        return TierTiming(points=tuple(t["points"]), **kw)
    except ValueError as e:
        raise CacheEntryError(str(e)) from None


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def entry_engine(source: str) -> str | None:
    """The engine a characterization ran on, from its ``source`` (``device model, E engine:
    ...``); None for an entry made before the source named its engine (``golden model:
    ...``) or any other text."""
    m = re.match(r"device model, (\w+) engine:", source)
    return m.group(1) if m else None


def characterize(cfg: HbfConfig, *, cache: bool = True, cache_dir=None,
                 progress: bool = False, kv_block_bytes: int = DEFAULT_KV_BLOCK_BYTES,
                 request_bytes: int = DEFAULT_REQUEST_BYTES,
                 same_engine: bool = False) -> TierTiming:
    """Characterize one stack of ``cfg`` on the device model (docs/serving-hbf-tier.md), on
    the configuration's engine (``cfg.engine``; the reference where the compiled engine is not
    built, saying so once; both give the same figures).

    Parameters
    ----------
    cfg : HbfConfig
        The HBF configuration; with ``stacks > 1`` one stack of it is characterized.
    cache : bool
        Reuse a cached result and store a new one; False recomputes (``--no-cache``) and
        still stores the result.
    cache_dir : path, optional
        Cache folder; default ``$XDG_CACHE_HOME/hbfsim`` (``~/.cache/hbfsim``).
    progress : bool
        Print one line per measured transfer on stderr.
    kv_block_bytes : int
        Bytes of one KV block (the ``kv`` pattern's run length); default
        :data:`DEFAULT_KV_BLOCK_BYTES`.
    request_bytes : int
        Request size, a power of two from 32 to 4096; default one page.
    same_engine : bool
        Reuse a cached entry only if it ran on the engine this call runs on (``cfg.engine``
        as :func:`~hbfsim.simulate.choose_engine` resolves it); else it is recomputed and
        replaced. For a caller asked for an engine by name (``--engine``): the engine is no
        part of the cache key, because both give the same figures, but a user who names
        one wants it to have run (the time and the ``source`` say which did).

    Returns
    -------
    TierTiming
        Per-stack figures, the measured curves, and every measurement in ``points``; its
        ``source`` names the engine that ran (``device model, compiled engine: ...``). A
        cached result is the entry's, whichever engine made it unless ``same_engine``.

    Raises
    ------
    ValueError
        For a bad ``kv_block_bytes`` or ``request_bytes``, or a KV block size the write
        policy cannot program.
    """
    for name, v in (("kv_block_bytes", kv_block_bytes), ("request_bytes", request_bytes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    if request_bytes > PAGE_BYTES or request_bytes < 32 or request_bytes & (request_bytes - 1):
        raise ValueError(f"request_bytes must be a power of two from 32 to {PAGE_BYTES}, "
                         f"not {request_bytes!r}")
    key = cache_key(cfg, kv_block_bytes, request_bytes)
    path = cache_path(cfg, cache_dir, kv_block_bytes, request_bytes)
    if cache:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raw = None
        except OSError as e:
            raw = None
            print(f"hbfsim: note: characterization cache {str(path)!r} unreadable "
                  f"({e.strerror}); recomputing", file=sys.stderr)
        if raw is not None:
            try:
                timing = _from_json(raw.decode("utf-8"), key, cfg,
                                    {"kv_block_bytes": kv_block_bytes,
                                     "request_bytes": request_bytes})
                made_on = entry_engine(timing.source)
                if same_engine and made_on != _engine(cfg):
                    if progress:
                        print(f"  cached on the {made_on or 'unnamed'} engine, recomputing "
                              f"on the {_engine(cfg)} one: {path}", file=sys.stderr)
                else:
                    if progress:
                        print(f"  cached: {path}", file=sys.stderr)
                    return timing
            except (CacheEntryError, UnicodeDecodeError) as e:
                # never trusted: recomputed and overwritten, in one line
                why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else str(e)
                print(f"hbfsim: note: characterization cache {str(path)!r} not used "
                      f"({why}); recomputing", file=sys.stderr)
    res = _run_characterization(cfg, kv_block_bytes, request_bytes, progress)
    timing = _timing(res, kv_block_bytes, key)
    params = {"kv_block_bytes": kv_block_bytes, "request_bytes": request_bytes,
              "wave_pages": res["wave_pages"]}
    try:
        _write_atomic(path, _to_json(timing, key, cfg, params))
    except OSError as e:
        print(f"hbfsim: cannot write characterization cache {str(path)!r}: {e.strerror}",
              file=sys.stderr)
    return timing


# ----------------------------------------------------------------------------- the check
#: Transfers that the characterization does not run, for checking its prediction against
#: direct device runs: (label, kind, pattern, waves, extra bytes, request sizes,
#: tolerance). Off-grid sizes, sizes that are not a multiple of a page or of a KV block, a
#: size beyond each measured curve, and a transfer issued as a mix of request sizes. The
#: tolerance is the largest |predicted / measured - 1| accepted (tests enforce it): an idle
#: device's time is a staircase of media steps (tR, tPROG) that interpolation cannot follow
#: within a few waves; scattered blocks add steps where their subarrays collide, and for
#: writes the hottest subarray governs (docs/serving-hbf-tier.md).
CHECKS = (
    ("stream 3/4 wave + 1000 B", "read", "stream", 0.75, 1000, None, 0.20),
    ("stream 2.5 waves + 1000 B", "read", "stream", 2.5, 1000, None, 0.20),
    ("stream 5 waves, 4/2/1 KiB requests", "read", "stream", 5, 0, (4096, 2048, 1024), 0.20),
    ("stream 12 waves (beyond the curve)", "read", "stream", 12, 0, None, 0.08),
    ("kv 3/4 wave", "read", "kv", 0.75, 0, None, 0.25),
    ("kv 2.5 waves + 20000 B", "read", "kv", 2.5, 20000, None, 0.25),
    ("kv 8 waves (beyond the curve)", "read", "kv", 8, 0, None, 0.25),
    ("write kv 2.5 waves", "write", "kv", 2.5, 0, None, 0.35),
    ("write kv 6 waves (beyond the curve)", "write", "kv", 6, 0, None, 0.35),
)


def check_against_device(cfg: HbfConfig, timing: TierTiming,
                         kv_block_bytes: int = DEFAULT_KV_BLOCK_BYTES,
                         request_bytes: int = DEFAULT_REQUEST_BYTES, checks=CHECKS,
                         progress: bool = False) -> list[dict]:
    """Compare ``timing``'s prediction with direct device runs of :data:`CHECKS` (on
    ``cfg``'s engine).

    Returns one row per check: ``label``, ``bytes``, ``measured_s`` (the device window),
    ``predicted_s`` (``read_seconds`` / ``write_seconds``), ``error`` (predicted /
    measured - 1) and the check's ``tolerance``.
    """
    cfg = _one_stack(cfg)
    w = wave_pages(cfg)
    out = []
    for label, kind, pattern, waves, extra, sizes, tol in checks:
        nbytes = round(waves * w) * PAGE_BYTES + extra
        runs = stream_runs(nbytes) if pattern == "stream" else \
            kv_runs(cfg, nbytes, kv_block_bytes)
        r = measure(cfg, "R" if kind == "read" else "W", runs,
                    request_bytes=sizes or request_bytes)
        pred = timing.read_seconds(nbytes, pattern) if kind == "read" else \
            timing.write_seconds(nbytes)
        out.append({"label": label, "kind": kind, "pattern": pattern, "bytes": nbytes,
                    "measured_s": r["seconds"], "predicted_s": pred,
                    "error": pred / r["seconds"] - 1, "tolerance": tol})
        if progress:
            print(f"  check {label}: {r['seconds'] * 1e6:.2f} us", file=sys.stderr)
    return out


def format_checks(rows) -> str:
    """The rows of :func:`check_against_device` as text."""
    out = [f"{'transfer (not in the fit)':<36} {'bytes':>13} {'device us':>11} "
           f"{'predicted us':>12} {'error':>7} {'tol.':>5}"]
    for r in rows:
        out.append(f"{r['label']:<36} {r['bytes']:>13,} {r['measured_s'] * 1e6:>11.2f} "
                   f"{r['predicted_s'] * 1e6:>12.2f} {r['error']:>+7.1%} "
                   f"{r['tolerance']:>5.0%}")
    return "\n".join(out)


# ----------------------------------------------------------------------------- the table
def format_table(t: TierTiming) -> str:
    """The measurements and the fitted figures of a characterized tier, as text."""
    out = [f"{t.name}: {t.source}",
           f"{'kind':<5} {'pattern':<9} {'bytes':>13} {'outst.':>6} {'measured us':>12} "
           f"{'line us':>10} {'resid.':>7} {'GB/s':>8}"]
    for r in t.points:
        line = f"{r['line_s'] * 1e6:>10.2f} {r['residual']:>+7.1%}" if "line_s" in r \
            else f"{'-':>10} {'-':>7}"
        extra = (f"  (reads; with {r['write_bytes']:,} B of KV writes done at "
                 f"{r['write_seconds'] * 1e6:.2f} us)") if r["kind"] == "mixed" else ""
        out.append(f"{r['kind']:<5} {r['pattern']:<9} {r['bytes']:>13,} {r['outstanding']:>6} "
                   f"{r['seconds'] * 1e6:>12.2f} {line} {r['bytes'] / r['seconds'] / 1e9:>8.2f}"
                   + extra)
    kv_lat = t.kv_read_latency_s if t.kv_read_latency_s is not None else t.read_latency_s
    kv_bw = t.kv_read_bw if t.kv_read_bw is not None else t.read_bw
    out += ["fit t(B) = latency + B / bw: bw = steady state of the largest transfer, latency ="
            " least squares over sizes of >= 1 wave",
            f"  {'':<12} {'bw':>9}       {'latency':>8}      {'one request':>11}"]
    for what, bw, lat, curve in (("read stream", t.read_bw, t.read_latency_s, t.read_curve),
                                 ("read kv", kv_bw, kv_lat, t.kv_read_curve),
                                 ("write kv", t.write_bw, t.write_latency_s, t.write_curve)):
        first = f"{curve[0][1] * 1e6:8.2f} us" if curve else "-"
        out.append(f"  {what:<12} {bw / 1e9:9.2f} GB/s  {lat * 1e6:8.2f} us   {first:>11}")
    out.append(f"  write amplification {t.write_amplification:.4f}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hbfsim.serve.characterize",
                                 description="Characterize one HBF stack on the device "
                                             "model and print the serving tier's figures.")
    ap.add_argument("--config", metavar="F.toml", help="TOML configuration file")
    ap.add_argument("--profile", help="configuration profile (default: hbf-serving unless "
                                      "--config names one)")
    ap.add_argument("--no-cache", action="store_true", help="recompute (and store) the result")
    ap.add_argument("--kv-block-bytes", type=int, default=DEFAULT_KV_BLOCK_BYTES,
                    metavar="N", help=f"bytes of one KV block (default {DEFAULT_KV_BLOCK_BYTES})")
    ap.add_argument("--cache-dir", metavar="DIR", help="cache folder (default "
                                                       "$XDG_CACHE_HOME/hbfsim)")
    ap.add_argument("--check", action="store_true",
                    help="also compare the prediction with direct device-model runs of "
                         "transfers the fit did not use")
    ap.add_argument("--engine", choices=ENGINES,
                    help="the engine the transfers run on (the engine key: compiled by "
                         "default; the same figures; docs/engine.md)")
    a = ap.parse_args(argv)
    try:
        profile = a.profile or (None if a.config else "hbf-serving")
        cfg = load_config(a.config, profile)
        if a.engine:
            cfg = cfg.replace(engine=a.engine)
        t0 = time.perf_counter()
        t = characterize(cfg, cache=not a.no_cache, cache_dir=a.cache_dir,
                         kv_block_bytes=a.kv_block_bytes, progress=True,
                         same_engine=a.engine is not None)
    except (ConfigError, ValueError) as e:
        print(f"hbfsim: {e}", file=sys.stderr)
        return 2
    print(format_table(t))
    print(f"({time.perf_counter() - t0:.2f} s host time)")
    if a.check:
        t0 = time.perf_counter()
        print(format_checks(check_against_device(cfg, t, a.kv_block_bytes)))
        print(f"({time.perf_counter() - t0:.2f} s host time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
