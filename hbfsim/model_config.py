"""Reading a Hugging Face ``config.json`` (or a TOML shape file) into a
:class:`~hbfsim.shapes.ModelShape`: the keys each ``model_type`` carries, checked one by one
(every error names the file and the key). :func:`hbfsim.shapes.model_shape` calls it for a
path or a dict of config.json keys; docs/models.md lists the keys read.
"""

from __future__ import annotations

from dataclasses import MISSING
from pathlib import Path

from hbfsim.shapes import DTYPE_BYTES, ModelShape, ShapeError

__all__ = ["from_hf", "read_model_file"]

_DENSE_TYPES = ("qwen3", "qwen2", "llama", "mistral")
_MOE_TYPES = ("qwen3_moe", "mixtral", "deepseek_v2", "deepseek_v3", "glm4_moe", "glm_moe_dsa")
_MOE_HINTS = ("num_experts", "n_routed_experts", "num_local_experts", "kv_lora_rank")


class _Config:
    """Typed access to a config.json dict; errors name the source and the key."""

    def __init__(self, spec: dict, src: str, note: str = ""):
        self.spec, self.src, self.note = spec, src, note

    def integer(self, key: str, default=MISSING, minimum: int = 1, null=MISSING) -> int:
        if key not in self.spec:
            if default is MISSING:
                raise ShapeError(f"{self.src} lacks key {key!r}{self.note}")
            return default
        v = self.spec[key]
        if v is None and null is not MISSING:
            return null
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            kind = "a positive integer" if minimum == 1 else "a non-negative integer"
            raise ShapeError(f"{self.src}: {key} must be {kind}, not {v!r}")
        return v

    def flag(self, key: str, default: bool) -> bool:
        v = self.spec.get(key, default)
        if not isinstance(v, bool):
            raise ShapeError(f"{self.src}: {key} must be true or false, not {v!r}")
        return v


def _dtype_bytes(c: _Config) -> tuple[int, int]:
    """(weight bytes, KV bytes) per element from torch_dtype / dtype and quantization_config."""
    key = "torch_dtype" if "torch_dtype" in c.spec else "dtype"
    dtype = c.spec.get(key, "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise ShapeError(f"{c.src}: {key} must be one of {', '.join(DTYPE_BYTES)}, not "
                         f"{dtype!r}")
    act = DTYPE_BYTES[dtype]
    q = c.spec.get("quantization_config")
    if q is None:
        return act, act
    method = q.get("quant_method") if isinstance(q, dict) else q
    if method != "fp8":
        raise ShapeError(f"{c.src}: quantization_config.quant_method must be fp8 (the only "
                         f"quantization modelled), not {method!r}")
    return 1, act                  # FP8 weights; the KV cache stays in torch_dtype


def _moe_fields(c: _Config, mt: str, layers: int) -> dict:
    if mt == "qwen3_moe":
        step = c.integer("decoder_sparse_step", 1)
        only = c.spec.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(type(i) is int and 0 <= i < layers
                                                 for i in only):
            raise ShapeError(f"{c.src}: mlp_only_layers must be a list of layer indices "
                             f"0..{layers - 1}, not {only!r}")
        moe = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
        return dict(experts=c.integer("num_experts"),
                    active_experts=c.integer("num_experts_per_tok"),
                    moe_intermediate=c.integer("moe_intermediate_size"),
                    dense_layers=layers - moe)
    if mt == "mixtral":              # every layer MoE; intermediate_size is the expert width
        return dict(experts=c.integer("num_local_experts"),
                    active_experts=c.integer("num_experts_per_tok"),
                    moe_intermediate=c.integer("intermediate_size"))
    # DeepSeek-V2/V3, GLM-4.5, GLM-5: leading dense layers, shared experts.
    out = dict(experts=c.integer("n_routed_experts"),
               active_experts=c.integer("num_experts_per_tok"),
               shared_experts=c.integer("n_shared_experts", 0, minimum=0),
               moe_intermediate=c.integer("moe_intermediate_size"))
    types = c.spec.get("mlp_layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers \
                or not set(types) <= {"dense", "sparse"}:
            raise ShapeError(f"{c.src}: mlp_layer_types must list 'dense' or 'sparse' for each "
                             f"of the {layers} layers, not {types!r}")
        out["dense_layers"] = types.count("dense")
    else:
        first = c.integer("first_k_dense_replace", 0, minimum=0)
        freq = c.integer("moe_layer_freq", 1)
        out["dense_layers"] = layers - sum(1 for i in range(first, layers) if i % freq == 0)
    return out


def _mla_fields(c: _Config) -> dict:
    return dict(kv_lora_rank=c.integer("kv_lora_rank"),
                q_lora_rank=c.integer("q_lora_rank", 0, minimum=0, null=0),
                qk_rope_head_dim=c.integer("qk_rope_head_dim"),
                qk_nope_head_dim=c.integer("qk_nope_head_dim"), v_head_dim=c.integer("v_head_dim"))


def from_hf(spec: dict, src: str) -> ModelShape:
    """A :class:`ModelShape` from a Hugging Face config.json dict (see :func:`model_shape`)."""
    mt = spec.get("model_type", "")
    if not isinstance(mt, str):
        raise ShapeError(f"{src}: model_type must be a string, not {mt!r}")
    known = _DENSE_TYPES + _MOE_TYPES
    note = ""
    if mt not in known:
        hint = next((k for k in _MOE_HINTS if k in spec), None)
        if hint:
            raise ShapeError(f"{src}: model_type {mt!r} is not one of {', '.join(known)}, and "
                             f"its key {hint!r} marks an MoE or MLA model the generic reader "
                             f"cannot place")
        note = (f" (model_type {mt!r} is not one of {', '.join(known)}: read as a generic "
                f"dense decoder)")
    c = _Config(spec, src, note)
    layers = c.integer("num_hidden_layers")
    hidden = c.integer("hidden_size")
    heads = c.integer("num_attention_heads")
    kv = c.integer("num_key_value_heads", None, null=None) or heads
    mla = mt in ("deepseek_v2", "deepseek_v3", "glm_moe_dsa")
    if mla:
        f = _mla_fields(c)
        head_dim = f["qk_nope_head_dim"] + f["qk_rope_head_dim"]
    else:
        f = {}
        head_dim = c.integer("head_dim", None, null=None)
        if head_dim is None:
            if hidden % heads:
                raise ShapeError(f"{src} lacks key 'head_dim' and hidden_size ({hidden}) is not "
                                 f"a multiple of num_attention_heads ({heads})")
            head_dim = hidden // heads
    if mt in _MOE_TYPES:
        f.update(_moe_fields(c, mt, layers))
        k_key = "num_experts_per_tok"
        if f["active_experts"] > f["experts"]:
            raise ShapeError(f"{src}: {k_key} must be at most the {f['experts']} routed "
                             f"experts, not {f['active_experts']!r}")
        if f.get("dense_layers", 0) >= layers:
            raise ShapeError(f"{src}: the dense-layer keys (first_k_dense_replace, "
                             f"mlp_layer_types, mlp_only_layers, decoder_sparse_step) leave no "
                             f"MoE layer of {layers}")
    if mt == "glm_moe_dsa":
        f.update(index_heads=c.integer("index_n_heads"), index_head_dim=c.integer("index_head_dim"),
                 index_topk=c.integer("index_topk"))
    wbytes, kvbytes = _dtype_bytes(c)
    if "qk_norm" in spec or "use_qk_norm" in spec:
        qk_norm = c.flag("qk_norm" if "qk_norm" in spec else "use_qk_norm", False)
    else:
        qk_norm = mt in ("qwen3", "qwen3_moe")
    name = spec.get("name", spec.get("_name_or_path", mt or "model"))
    try:
        return ModelShape(
            name=str(name), layers=layers, hidden=hidden, q_heads=heads, kv_heads=kv,
            head_dim=head_dim, intermediate=c.integer("intermediate_size"),
            vocab=c.integer("vocab_size"),
            tied_embeddings=c.flag("tie_word_embeddings", False), dtype_bytes=wbytes,
            kv_dtype_bytes=kvbytes, qk_norm=qk_norm and not mla,
            attention_bias=c.flag("attention_bias", False) and not mla, **f)
    except ShapeError as e:
        raise ShapeError(f"{src}: {e}") from None


def read_model_file(p: Path) -> dict:
    """A model file's object: TOML (``.toml``: ModelShape fields or config.json keys, flat)
    or JSON, read as UTF-8 with an optional BOM; untrusted JSON cannot crash the parser."""
    from hbfsim.textfile import loads_untrusted, read_text

    text = read_text(p, "model config", ShapeError)
    try:
        if p.suffix.lower() == ".toml":
            import tomllib

            spec = tomllib.loads(text)
        else:
            spec = loads_untrusted(text)
    except ValueError as e:
        raise ShapeError(f"cannot read model config {str(p)!r}: "
                         f"{' '.join(str(e).split())}") from None
    if not isinstance(spec, dict):
        raise ShapeError(f"model config {str(p)!r} must hold a JSON object, not "
                         f"{type(spec).__name__}")
    return spec
