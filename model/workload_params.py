"""Every workload's parameters: name, default and one line of meaning, and their checking.

The defaults come from the workload functions' signatures (so they cannot drift); the
meanings are written here once and listed by ``hbfsim run --list-workloads``. Workload
names are spelled in kebab case (``shared-staging``) everywhere a user sees them; the
registry keys are their snake-case Python names. Details: docs/gpu.md.
"""

from __future__ import annotations

import inspect

__all__ = ["PARAM_HELP", "WORKLOAD_HELP", "check_params", "cli_name", "list_workloads",
           "registry_name", "workload_params"]

#: One line per workload: what it generates; § numbers are sections of the HBF-Sim paper
#: (docs/gpu.md §4 describes each workload in full).
WORKLOAD_HELP = {
    "conservation": "routing test (HBF-Sim paper §5.1): one load per warp, each to its own page",
    "shared_staging": "warps load distinct lines of one page: 1 page read + MSHR hits (§5.1)",
    "burst_page_service": "device stream: bursts of sector reads per page (§5.3)",
    "media_saturation": "producers stream sector loads over distinct pages (§5.4)",
    "mshr_grid": "a pages x entries grid of line loads, MSHR merging under pressure (§5.2)",
    "placement": "active pages at a stride under a channel mapping (§6.1)",
    "rw_isolation": "writer warps fill pages while reader warps load others (§6.2)",
    "llm_decode": "one decode step of a dense transformer with its weights in HBF (§5.5)",
    "layout_decode": "one MoE decode step's weight reads under a FlashAccel layout "
                     "(docs/flashaccel.md)",
}

_COMMON = {
    "sms": "GPU streaming multiprocessors the warps are spread over",
    "bound": "loads outstanding per warp",
    "nbytes": "bytes per load (32, 64 or 128)",
    "entry_bytes": "bytes per load (32, 64 or 128)",
    "entries": "loads per page",
    "pages": "pages touched",
}

#: Meaning of each parameter, per workload (a key missing here falls back to _COMMON).
PARAM_HELP = {
    "conservation": {"requests": "warps, one load each", "page_stride": "page of warp i is "
                     "i x page_stride"},
    "shared_staging": {"requests": "warps, one line each", "page": "the page they share"},
    "burst_page_service": {"gap_us": "microseconds between the bursts of consecutive pages "
                           "(50 = isolated)", "partitions": "memory sub-partitions the "
                           "requests come from"},
    "media_saturation": {"producers": "producer warps", "pages_per_producer": "pages each "
                         "producer loads"},
    "mshr_grid": {"order": "page-major (array walk) or entry-major", "warps": "warps sharing "
                  "the loads (0 = one warp per load)"},
    "placement": {"stride": "active page i is i x stride", "mapping": "interleave, grouped, "
                  "contiguous, modulo or striping", "channels": "channels the mapping spreads "
                  "over"},
    "rw_isolation": {"read_sectors": "sector loads of the readers", "read_pages": "pages the "
                     "readers load", "write_pages": "pages the writers fill",
                     "write_sectors": "sector stores per written page", "read_delay_us":
                     "microseconds before the readers start", "read_bound": "loads "
                     "outstanding per reader warp", "write_bound": "stores outstanding per "
                     "writer warp", "write_page_base": "first written page"},
    "llm_decode": {
        "model": "preset (qwen3-1.7b), Hugging Face config.json or TOML shape (also --model)",
        "scale": "divide hidden, intermediate, vocab and head counts (tests run small)",
        "layers": "override the layer count (default: the model's)",
        "warps_per_sm": "warps per SM of each GEMV kernel",
        "bound": "loads outstanding per warp",
        "store_bound": "stores outstanding per warp",
        "line_bytes": "bytes of the line each warp walks (32, 64 or 128)",
        "request_bytes": "bytes per request (32 = sectors)",
        "align": "byte alignment of every tensor in HBF",
        "token_id": "token whose embedding row is read",
        "norm_per_head": "every head re-reads its norm vector",
        "compute": "GPU cycles of compute per access",
        "kv_append": "store the new token's K/V to HBF",
        "kv_in_hbf": "attention reads the context's K/V from HBF",
        "context_tokens": "tokens already in the context",
        "max_tokens": "KV slots reserved per sequence",
        "batch": "sequences decoded together",
        "prefix_tokens": "context tokens shared by all sequences (one copy)",
        "rag_vectors": "vectors gathered from a RAG store first (0 = none)",
        "rag_vector_bytes": "bytes per RAG vector",
        "rag_store_vectors": "vectors in the RAG store",
        "seed": "random seed of the RAG gather",
    },
    "layout_decode": {
        "model": "preset or config.json of a GQA model, dense or MoE (qwen3-235b-a22b)",
        "scale": "divide hidden, intermediate, vocab and head counts (expert count kept)",
        "layers": "layers placed and read (an MoE model keeps at least one MoE layer)",
        "layout": "declaration (tensors as declared, back to back) or execution "
                  "(megapages in execution order, round-robin over megaplanes)",
        "batch": "tokens routed; each picks the model's top-k experts uniformly",
        "seed": "random seed of the routing",
        "align": "byte alignment of every tensor in the layout's stream",
        "token_id": "token whose embedding row is read",
        "issue": "stream (a kernel's pages in layout order) or hyperpage (row, plane in "
                 "megaplane, megaplane: as a hyperpage command fires them)",
    },
}


def cli_name(name: str) -> str:
    """The user-facing spelling of a workload or parameter name (kebab case)."""
    return name.replace("_", "-")


def registry_name(text: str) -> str:
    """The registry key of a user-typed workload name (either spelling)."""
    return text.strip().replace("-", "_")


def workload_params(name: str) -> list[tuple[str, object, str]]:
    """``(parameter, default, meaning)`` for every parameter of workload ``name``."""
    from hbfsim.model.workloads import WORKLOADS

    sig = inspect.signature(WORKLOADS[name])
    out = []
    for p in list(sig.parameters.values())[1:]:  # the first is the HBF configuration
        meaning = PARAM_HELP.get(name, {}).get(p.name) or _COMMON.get(p.name, "")
        out.append((p.name, p.default, meaning))
    return out


#: The parameters that count requests, warps, pages or tokens: each multiplies the requests
#: a run simulates. Their bound comes from time: the golden model's reference loop runs
#: 15,000-45,000 requests a second on the 2-core development machine (docs/benchmarks.md),
#: so 10^8 of one count is already 40 minutes to 2 hours; a larger value is a typo or a run
#: that cannot finish (issue 26: ``--param requests=10^12`` ran without end).
COUNT_PARAMS = frozenset((
    "requests", "producers", "pages_per_producer", "pages", "entries", "warps", "sms",
    "read_sectors", "read_pages", "write_pages", "write_sectors", "warps_per_sm", "batch",
    "context_tokens", "max_tokens", "prefix_tokens", "rag_vectors", "rag_store_vectors",
    "layers"))
MAX_COUNT = 10**8


def check_params(name: str, params: dict) -> None:
    """Refuse a parameter that workload ``name`` does not take, naming the valid ones, and a
    count above :data:`MAX_COUNT`.

    Raises
    ------
    ValueError
        One line: the unknown key and the workload's parameters, or the count and its bound.
    """
    valid = [p for p, _, _ in workload_params(name)]
    for key in params:
        if key not in valid:
            raise ValueError(f"workload {cli_name(name)} has no parameter {key!r}; its "
                             f"parameters are {', '.join(valid)}")
    for key, v in params.items():
        if key in COUNT_PARAMS and isinstance(v, int) and not isinstance(v, bool) \
                and v > MAX_COUNT:
            raise ValueError(f"{cli_name(key)} = {v:,} is more than {MAX_COUNT:,}, the most "
                             f"the golden model simulates in a few hours (15,000-45,000 "
                             f"requests a second, docs/benchmarks.md)")


def _default(v) -> str:
    if v is None:
        return "(model's)"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def list_workloads() -> str:
    """The text of ``hbfsim run --list-workloads``: each workload, then its parameters."""
    from hbfsim.model.workloads import WORKLOADS

    lines = []
    for name in WORKLOADS:
        lines.append(f"{cli_name(name)}: {WORKLOAD_HELP.get(name, '')}")
        for key, default, meaning in workload_params(name):
            lines.append(f"    --param {key + '=' + _default(default):<28} {meaning}")
    return "\n".join(lines)
