"""The RoPE-family encoding a transformers config describes (its ``config.json``, as a dict).

Both formats Hugging Face writes are read:

* transformers 4: ``rope_theta`` and ``rope_scaling`` (``{"type" | "rope_type": …, "factor": …}``, or
  ``null``) at the top level, ``partial_rotary_factor`` beside them;
* transformers 5: ``rope_parameters`` holds ``rope_theta``, ``rope_type`` and the type's keys (and may
  hold ``partial_rotary_factor``), possibly nested by layer type,
  ``{"full_attention": {…}, "sliding_attention": {…}}``. One encoding serves every layer here, so a
  nested config gives the layer type to read (``layer_type``); with several and none given it is
  refused in one line naming them, and with one that one is read.

``rope_type`` ``default`` is :class:`~posbench.encodings.rope.Rope` with ``base`` and
``rotary_fraction``; ``linear``, ``dynamic``, ``yarn``, ``llama3`` and ``longrope`` add the
``scaling`` of that type with HF's keys; ``proportional`` (Gemma 4's) is p-RoPE
(:class:`~posbench.encodings.p_rope.PRope`), its ``partial_rotary_factor`` the kept fraction, its
``factor`` a linear scaling. Where a config leaves a length to the model, HF's rule fills it:
``original_max_position_embeddings`` from the top level (Phi-3) or else ``max_position_embeddings``
(what ``dynamic`` always reads), and a missing ``longrope`` / ``yarn`` ``factor`` as
``max_position_embeddings / original_max_position_embeddings``.

A key of the rope section this module does not read is refused in one line naming it and the allowed
ones, as is a top-level key about rotation it does not read (one naming ``rope`` or ``rotary``, such as
Gemma 3's ``rope_local_base_freq``): ignoring it would build another encoding than the model's. Other
top-level keys (``vocab_size``, ``intermediate_size``, …) describe the rest of the model and are left
alone.
"""

from __future__ import annotations

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import build
from posbench.encodings.rope import ROPE_BASE, SCALING_KEYS

COMMON_KEYS = {"rope_type", "rope_theta", "partial_rotary_factor"}  # any rope section may hold these
TYPE_KEYS = {"default": set(), "proportional": {"factor"},
             **{kind: required | optional for kind, (required, optional) in SCALING_KEYS.items()}}
TOP_LEVEL_ROTARY_KEYS = {"rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor"}


def from_hf_config(config: dict, *, layer_type: str | None = None, max_len: int | None = None,
                   causal: bool = False) -> PositionalEncoding:
    """The encoding at the config's own width: ``num_attention_heads`` heads of ``head_dim`` (else
    ``hidden_size / num_attention_heads``), for ``max_len`` positions (default: ``max_position_embeddings``)."""
    name, options = hf_encoding_options(config, layer_type)
    heads = _required(config, "num_attention_heads")
    head_dim = config.get("head_dim") or _required(config, "hidden_size") // heads
    max_len = max_len or _required(config, "max_position_embeddings")
    return build(name, d_model=heads * head_dim, n_heads=heads, max_len=max_len, causal=causal, **options)


def hf_encoding_options(config: dict, layer_type: str | None = None) -> tuple[str, dict]:
    """``(registered name, family options)`` of the config's RoPE, for a model of any width: ``rope`` or
    ``p_rope`` with ``base``, ``rotary_fraction`` / ``kept_fraction`` and ``scaling``."""
    if not isinstance(config, dict):
        raise ValueError(f"a transformers config is a JSON object, got {type(config).__name__}")
    rotary = [key for key in config if "rope" in key or "rotary" in key]
    if unread := sorted(set(rotary) - TOP_LEVEL_ROTARY_KEYS):
        raise ValueError(f"config key {unread[0]!r} is not read here; allowed rotary keys: "
                         f"{', '.join(sorted(TOP_LEVEL_ROTARY_KEYS))}")
    where, section = _rope_section(config, layer_type)
    kind = section.get("rope_type", section.get("type", "default"))
    if kind not in TYPE_KEYS:
        raise ValueError(f"{where}.rope_type {kind!r} is not allowed; allowed: {', '.join(TYPE_KEYS)}")
    allowed = COMMON_KEYS | TYPE_KEYS[kind] | ({"type"} if "type" in section else set())
    if unknown := sorted(set(section) - allowed):
        raise ValueError(f"{where} key {unknown[0]!r} is not allowed for rope_type {kind!r}; allowed: "
                         f"{', '.join(sorted(allowed))}")
    base = section.get("rope_theta", config.get("rope_theta", ROPE_BASE))
    fraction = section.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if kind == "default":
        return "rope", _without_defaults(base=base, rotary_fraction=fraction)
    if kind == "proportional":
        factor = section.get("factor", 1.0)
        scaling = {"rope_type": "linear", "factor": factor} if factor != 1 else None
        return "p_rope", _without_defaults(base=base, kept_fraction=fraction, scaling=scaling)
    scaling = {"rope_type": kind, **{key: section[key] for key in TYPE_KEYS[kind] if key in section}}
    _fill_lengths(scaling, config, where)
    return "rope", _without_defaults(base=base, rotary_fraction=fraction, scaling=scaling)


def _rope_section(config: dict, layer_type: str | None) -> tuple[str, dict]:
    """The rope dict to read and its name for messages: ``rope_parameters`` (one layer type's, if
    nested), else ``rope_scaling`` (``null``: plain RoPE)."""
    if "rope_parameters" in config and config.get("rope_scaling") is not None:
        raise ValueError("config has both rope_parameters and rope_scaling; allowed: one of them "
                         "(transformers 5 writes rope_parameters, 4 rope_scaling)")
    where = "rope_parameters" if "rope_parameters" in config else "rope_scaling"
    section = config.get(where) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be an object, got {section!r}")
    nested = bool(section) and all(isinstance(value, dict) for value in section.values())
    if not nested:
        if layer_type is not None:
            raise ValueError(f"layer type {layer_type!r} given, but {where} is one set for every layer; "
                             f"allowed: no layer type")
        return where, section
    types = sorted(section)
    if layer_type is None and len(types) > 1:
        raise ValueError(f"{where} is per layer type ({', '.join(types)}); one encoding serves every layer "
                         f"here: choose one (layer_type, --hf-layer-type)")
    layer_type = layer_type if layer_type is not None else types[0]
    if layer_type not in section:
        raise ValueError(f"layer type {layer_type!r} is not in {where}; allowed: {', '.join(types)}")
    return f"{where}.{layer_type}", section[layer_type]


def _fill_lengths(scaling: dict, config: dict, where: str) -> None:
    """HF's defaults for the lengths a config may leave to the model (see the module's docstring)."""
    needed = SCALING_KEYS[scaling["rope_type"]][0]
    top_level = ("max_position_embeddings",) if scaling["rope_type"] == "dynamic" else (
        "original_max_position_embeddings", "max_position_embeddings")
    if "original_max_position_embeddings" in needed and "original_max_position_embeddings" not in scaling:
        found = [config[key] for key in top_level if key in config]
        if not found:
            raise ValueError(f"{where} ({scaling['rope_type']}) needs original_max_position_embeddings, in it "
                             f"or at the top level; allowed there: {', '.join(top_level)}")
        scaling["original_max_position_embeddings"] = found[0]
    if "factor" in needed and "factor" not in scaling:
        if "max_position_embeddings" not in config:
            raise ValueError(f"{where} ({scaling['rope_type']}) needs factor, or max_position_embeddings at the "
                             f"top level to derive it from")
        scaling["factor"] = config["max_position_embeddings"] / scaling["original_max_position_embeddings"]


def _without_defaults(**options) -> dict:
    """The family options that differ from the family's defaults (base 10000, fraction 1, no scaling)."""
    defaults = {"base": ROPE_BASE, "rotary_fraction": 1.0, "scaling": None}
    return {key: value for key, value in options.items() if key not in defaults or value != defaults[key]}


def _required(config: dict, key: str):
    if key not in config:
        raise ValueError(f"config needs {key!r} to build the encoding at the model's own width")
    return config[key]
