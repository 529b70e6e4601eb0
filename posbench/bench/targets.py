"""Which encodings the bench times against ``none`` (``overhead``: a forward, ``scale``: the longest
length, ``decode``: a decoded token), and the targets they must meet: one declared row for every
registered encoding.

A row is either the encoding's :class:`Targets` or the reason it is not timed, so leaving an encoding
out is a decision written down, never an accident: ``tests/test_bench.py`` checks that the rows are
exactly the registry's names, and :func:`timed` still times an encoding the table does not know (a
plugin's), without a target, and says so in the part's notes."""

from __future__ import annotations

from dataclasses import dataclass

from posbench import encodings


@dataclass(frozen=True)
class Targets:
    """Latency against ``none``'s on the same model, at most; ``None``: timed, not judged."""

    overhead: float | None  # overhead: forward latency / none's
    decode: float | None  # decode: per-token latency with a KV cache / none's


REFERENCE = Targets(None, None)  # none: what the others are divided by
VECTOR_OR_ROTATION = Targets(1.05, 1.10)  # an input vector, or a rotation of q and k: within 5 % of a forward
LOGIT_BIAS = Targets(1.25, 1.10)  # a bias added to every head's logits: within 25 %
PAIRWISE_MLP = Targets(2.0, 2.0)  # FIRE: an MLP over every (query, key) pair's distance: within 2×
TWICE_WIDE_SCORES = Targets(2.0, 1.5)  # PoPE: q·kᵀ (values padded to it) and the key cache at twice the head width
LOCAL_LAYERS = Targets(1.25, 1.10)  # a layer pattern: a window or chunk mask in 3 of 4 layers (decoding: its keys)
# The fourth hook (position from content), written before the first measurement: per layer it materialises
# the logits of each causal block and runs a dozen elementwise passes over them (sigmoid, a reversed
# cumulative sum, two gathers, the interpolation) where none's fused kernel never writes a logit, plus q·e
# against npos = L + 1 integer positions (a matmul the size of q·kᵀ): within 4×; decoding, ~20 small ops a layer
CONTENT_COUNTS = Targets(4.0, 2.0)  # CoPE
# FoX: per layer a linear map to h gates, a cumulative sum, and per causal block a (B, h, rows, keys) bias of
# one subtraction that SDPA's fused kernel reads as its mask (FIRE's 2× path, with the mask per layer)
FORGET_GATES = Targets(2.0, 1.5)
# stick-breaking: the materialised logits of each causal block, ~8 elementwise passes (log-sigmoid, a
# reversed cumulative sum, exp, the weights' sum) and two matmuls outside the fused kernel
STICK_BREAKING = Targets(3.0, 1.5)
# PaTH: the materialised logits of each causal block (CoPE's path) plus, per layer, the chunks' matmuls (the key
# state carried chunk by chunk, L²·d²/64, and the turned queries against it, about one more q·kᵀ: ~1.5 q·kᵀ in
# all at d_head 32) and three elementwise passes over the logits (the plain ones subtracted, the bias added, the
# block's zero padding): within 4×; decoding, one rank-one update of every cached key (k·w and its update, about two
# more passes over the keys than q·kᵀ's one; the `carried` path): 2×
HOUSEHOLDER_PATH = Targets(4.0, 2.0)
UNDECLARED = Targets(None, None)  # an encoding this table does not know: timed, not judged

DECLARED: dict[str, Targets | str] = {
    "none": REFERENCE,
    **dict.fromkeys(("sinusoidal", "learned", "rope", "rope_p50", "xpos", "mrope", "p_rope"), VECTOR_OR_ROTATION),
    **dict.fromkeys(("alibi", "t5", "kerple"), LOGIT_BIAS),
    "fire": PAIRWISE_MLP,
    "pope": TWICE_WIDE_SCORES,
    **dict.fromkeys(("irope", "rnope_swa"), LOCAL_LAYERS),
    "cope": CONTENT_COUNTS,
    "fox": FORGET_GATES,
    "stick_breaking": STICK_BREAKING,
    "path": HOUSEHOLDER_PATH,
    **dict.fromkeys(("sinusoidal_concat_fixed", "learned_concat_fixed"), VECTOR_OR_ROTATION),
    **{f"{family}_concat": "a wider model (residual stream d + d_p): against none at d its cost is the width's"
       for family in ("sinusoidal", "learned")},
    **{f"{base}_randomized": f"evaluates as {base}: its random position ids are drawn in training only"
       for base in ("alibi", "learned", "rope", "sinusoidal")},
    "rope_theta500k": "rope with Llama 3's base: the same operations as rope",
    "p_rope_25": "p_rope's operations on a third as many pairs (a quarter of each head, not three quarters)",
    **{f"mrope_{model}": "mrope's operations with another base and section split (on a sequence's (L,) ids every "
       "axis turns alike)" for model in ("qwen2vl", "qwen3vl", "mosaic")},
    **{f"{text}_per_modality": f"on a sequence's (L,) ids it runs its text part, {text}, alone"
       for text in ("sinusoidal", "rope")},
    **{f"{family}_2d": "reads (row, column) ids of a grid: the bench's causal decoder reads a sequence"
       for family in ("sinusoidal", "rope")},
}


def timed() -> dict[str, Targets]:
    """Every registered encoding the bench times, with its targets: the declared ones in the table's
    order, then any the table lacks with :data:`UNDECLARED`."""
    registered = encodings.names()
    order = [*DECLARED, *(name for name in registered if name not in DECLARED)]
    return {name: DECLARED.get(name, UNDECLARED) for name in order
            if name in registered and not isinstance(DECLARED.get(name), str)}


def notes() -> list[str]:
    """What a part timing :func:`timed` says about the encodings it leaves out or cannot judge."""
    registered = encodings.names()
    skipped = [f"{name} ({DECLARED[name]})" for name in registered if isinstance(DECLARED.get(name), str)]
    undeclared = [name for name in registered if name not in DECLARED]
    return ([f"not timed: {'; '.join(skipped)}"] if skipped else []) + (
        [f"no declared target (timed, not judged; add it to posbench.bench.targets): {', '.join(undeclared)}"]
        if undeclared else [])
