"""FLOPs of a posbench model, counted three ways and reconciled.

>>> from posbench import ModelConfig, build_model
>>> from posbench.flops import count_flops
>>> c = count_flops(build_model(ModelConfig(encoding="rope")), batch_size=1, seq_len=1024)
>>> c.fvcore == c.torch == c.analytic
True

Out of the box the two library counters do not measure the same thing as each other or as a
formula: fvcore counts multiply-adds, skips ``scaled_dot_product_attention`` and every elementwise
op, but counts layer norms; ``torch.utils.flop_counter.FlopCounterMode`` counts 0 for SDPA's CPU
kernel (``aten._scaled_dot_product_flash_attention_for_cpu``). Both are given handles here so that
all three counts follow one convention.

The convention
--------------
* FLOPs = 2 × multiply-adds for every matmul: the q/k/v and output projections, ``q·kᵀ``,
  ``attn·v``, the feed-forward, the output head and (patch inputs) the patch embedding.
* ``baddbmm`` (``input + α · a @ b``, PaTH's decode step): its matmul and one add per output element.
* Floating-point elementwise arithmetic between two tensors (``add``, ``sub``, ``mul``) costs one
  FLOP per real output element; a complex multiply costs 6 (4 real multiplies, 2 adds), a complex
  add 2. In this model that is exactly the encoding's own work (the embedding add ``E + P``, RoPE's
  rotation — one complex multiply per pair of dimensions, 3 FLOPs per rotated element — and the
  logit-bias add inside attention) plus the two residual adds per block. An op with a constant
  operand (SDPA's internal ``1/√d`` scale, which a fused kernel hides), negation and integer index
  arithmetic are free.
* Not counted by any of the three: divisions, softmax, layer norms, activations, reductions (mean-pooling,
  the batch-sum of a broadcast gradient), gathers and copies (embedding lookup, concat, index).
  They are kernel-dependent, cheap, and the same for every encoding.
* Attention is counted as a dense kernel executes it: all ``L × L`` logits, even when causal,
  for every encoding. The counters therefore run attention as one SDPA call over all keys
  (``block_size = L``): the harness's causal query blocks, which skip keys after a block's last
  query, would otherwise count fewer logits for a biased encoding than SDPA's ``is_causal``
  kernel is credited with, and the encodings would not compare. ``analytic_causal_half`` counts
  the score and value matmuls over the ``L(L+1)/2`` logits an ideal causal kernel computes; the
  bias add stays dense there.
* The count is of one call, the logit bias built in it: ALiBi looks its penalties up in a table
  computed at construction (like a sinusoid table) and T5 gathers bucket scalars, both free under
  the convention. An encoding that rebuilds its position table every call is counted by the
  counters only (``sinusoidal_2d``: ``L·d/2`` angle products, a few parts per million of a forward pass).
* Training step (``mode="train"``) = forward + backward, no optimizer. Backward: every matmul
  costs 2× its forward (one matmul per input gradient), except the patch embedding, whose input
  needs no gradient (1×); attention backward is 4 matmuls (2× forward) on every kernel, so a
  flash kernel's recomputation of ``q·kᵀ`` is not counted (torch's stock formula counts it; we
  replace it so the figure does not depend on which kernel ran). Elementwise backward: RoPE
  one complex multiply by the conjugate turn (3 FLOPs per rotated element), one
  gradient-accumulation add per residual branch point (2 per block) and, for a trainable bias
  shared by all layers (T5), ``n_layers − 1`` accumulation adds of its gradient, the size of the
  bias as attention holds it (the ``(h, 2L − 1)`` table of a relative bias, else the ``(h, L, L)``
  mask). The loss is not counted: backward is seeded with the gradient of a sum.
* Each layer is counted with its own encoding (:meth:`~posbench.encodings.base.PositionalEncoding.layers`:
  a layer pattern's local and global layers differ); a bias is built once per distinct encoding and added
  in each of its layers. An encoding's rotation counts itself (``rotation_flops``: RoPE's as above, PoPE's
  magnitudes times turns, a query temperature's one multiply), and attention reads q and k at the width
  rotation leaves them (``query_key_width``: PoPE doubles it, and values are padded to it where more than
  one query attends, :func:`posbench.attention.attended_value_width`); a trained rotation that every layer
  runs (PoPE's ``δ``) accumulates its gradient ``n_layers − 1`` times.
* Position from content (the fourth hook, :mod:`posbench.encodings.contextual`): its paths run the
  same two attention matmuls (materialised or inside SDPA); everything they add, in every layer and
  with its backward, is the encoding's declared ``content_flops``, the ``position_content`` term (the
  model's encoding declares it for all its layers at once, so it is not summed over the layers).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from fractions import Fraction

import torch
from torch.utils.flop_counter import FlopCounterMode

with warnings.catch_warnings():  # fvcore 0.1.5 torch.jit.scripts its losses on import; torch 2.13 deprecates that
    warnings.simplefilter("ignore", DeprecationWarning)
    from fvcore.nn import FlopCountAnalysis
    from fvcore.nn.jit_handles import (
        addmm_flop_jit,
        bmm_flop_jit,
        einsum_flop_jit,
        get_shape,
        linear_flop_jit,
        matmul_flop_jit,
    )

from posbench import attention
from posbench.model import ModelConfig, Transformer, meta_model

MODES = ("infer", "train")
ELEMENTWISE_OPS = ("add", "sub", "mul")  # the arithmetic the convention counts, each also in place


@dataclass(frozen=True)
class FlopCounts:
    """One model, one input shape, three counts under the module's convention."""

    mode: str
    batch_size: int
    seq_len: int
    analytic: int
    analytic_causal_half: int
    fvcore: int | None  # None for mode="train": fvcore traces the forward pass only
    torch: int
    terms: dict[str, int]  # the analytic breakdown (:func:`analytic_flops`), sums to ``analytic``
    counted_at: tuple[int, ...]  # the lengths the library counters ran the model at (see count_flops)

    def as_dict(self) -> dict:
        """JSON-ready, with the ratios of each counter to the analytic count."""
        return {**asdict(self),
                "fvcore_over_analytic": None if self.fvcore is None else self.fvcore / self.analytic,
                "torch_over_analytic": self.torch / self.analytic}


def count_flops(model: Transformer, batch_size: int = 1, seq_len: int = 1024,
                mode: str = "infer", *, max_run_len: int | None = None) -> FlopCounts:
    """Analytic, fvcore and FlopCounterMode FLOPs of one forward pass (``infer``) or training step (``train``).

    ``max_run_len``: the longest sequence the library counters may run the model at. Running a long
    cell once more only to count it costs the device an extra full-size pass (an out-of-memory at 32k
    in train mode); but under the convention every count is a quadratic in L (constant, per-token and
    per-logit terms), so above ``max_run_len`` the counters run at three short lengths, the quadratic
    through those counts is read off at ``seq_len`` — exact integer arithmetic — after a fourth short
    length checked it. A count that is not quadratic raises ``ValueError`` rather than guess; an encoding
    that declares its count is not (``quadratic_flops``: PaTH's chunks) is counted at full length.
    """
    _check_arguments(batch_size, seq_len, mode)
    terms = analytic_flops(model, batch_size, seq_len, mode)
    causal_half = analytic_flops(model, batch_size, seq_len, mode, causal_half=True)
    if max_run_len is None or seq_len <= max_run_len or not model.encoding.quadratic_flops:
        counted_at = (seq_len,)
        fvcore, torch_count = _library_counts(model, batch_size, seq_len, mode)
    else:
        counted_at = _short_lengths(max_run_len)
        counts = {length: _library_counts(model, batch_size, length, mode) for length in counted_at}
        fvcore = None if mode == "train" else _extended({n: c[0] for n, c in counts.items()}, seq_len, "fvcore")
        torch_count = _extended({n: c[1] for n, c in counts.items()}, seq_len, "torch")
    return FlopCounts(mode=mode, batch_size=batch_size, seq_len=seq_len, analytic=sum(terms.values()),
                      analytic_causal_half=sum(causal_half.values()), fvcore=fvcore, torch=torch_count,
                      terms=terms, counted_at=counted_at)


def _library_counts(model: Transformer, batch_size: int, seq_len: int, mode: str) -> tuple[int | None, int]:
    """fvcore (``None`` in train mode) and FlopCounterMode counts of the model run at ``seq_len``."""
    inputs = _example_inputs(model, batch_size, seq_len)
    # one SDPA call over all keys (the dense kernel) and never FlexAttention, which no counter sees inside
    with attention.configured(block_size=seq_len, flex_on_cuda=False):
        fvcore = fvcore_flops(model, inputs) if mode == "infer" else None
        return fvcore, torch_flops(model, inputs, mode)


def _short_lengths(max_run_len: int) -> tuple[int, ...]:
    """Three lengths to fit a quadratic through and a fourth, ``max_run_len``, to check it."""
    if max_run_len < 4:
        raise ValueError(f"max_run_len must be an integer >= 4, got {max_run_len!r}")
    return max_run_len // 4, max_run_len // 2, 3 * max_run_len // 4, max_run_len


def _extended(counts: dict[int, int], seq_len: int, counter: str) -> int:
    """The quadratic through the first three ``(length, count)`` pairs, at ``seq_len``; the last pair
    checks it (Lagrange form in exact fractions, so no count is rounded)."""
    *fit, (check_len, check_count) = counts.items()
    if _quadratic_at(fit, check_len) != check_count:
        raise ValueError(f"{counter} counts are not quadratic in the sequence length "
                         f"({dict(counts)}); count at full length instead")
    value = _quadratic_at(fit, seq_len)
    if value.denominator != 1:
        raise ValueError(f"{counter} counts {dict(counts)} extend to a fraction at L={seq_len}")
    return int(value)


def _quadratic_at(points: list[tuple[int, int]], x: int) -> Fraction:
    return sum((Fraction(y) * math.prod(Fraction(x - other, xi - other) for other, _ in points if other != xi)
                for xi, y in points), Fraction(0))


# ----- analytic ----------------------------------------------------------------------------------
def analytic_flops(cfg_or_model: ModelConfig | Transformer, batch_size: int, seq_len: int,
                   mode: str = "infer", *, causal_half: bool = False) -> dict[str, int]:
    """Per-term FLOPs (the module's convention); ``sum(result.values())`` is the total.

    ``causal_half``: count the score and value matmuls of a causal model over ``L(L+1)/2``
    logits instead of ``L²``. A config is turned into a model on the meta device (no memory).
    """
    _check_arguments(batch_size, seq_len, mode)
    model = meta_model(cfg_or_model) if isinstance(cfg_or_model, ModelConfig) else cfg_or_model
    cfg, enc, width = model.cfg, model.encoding, model.width
    B, L, n, h = batch_size, seq_len, cfg.n_layers, cfg.n_heads
    logits = L * (L + 1) // 2 if causal_half and cfg.causal else L * L  # per (batch, head)
    tokens = B * L
    layers = model.layer_encodings
    biases = _biases(layers)  # each distinct biased encoding and its layers
    forward = {
        "embedding": 2 * tokens * cfg.patch_dim * enc.token_width if cfg.patch_dim else 0,
        "position_input": tokens * width if enc.traits.combine == "add" else 0,  # E + P; a concat is free
        "projections": n * 2 * tokens * width * 4 * width,  # qkv (3w) and out (w)
        "rotation": sum(layer.rotation_flops(B, L, "infer") for layer in layers),
        "attention_scores": 2 * B * logits * sum(layer.query_key_width for layer in layers),  # h × d_head (or wider)
        "attention_bias": sum(m * B * h * L * L + e.bias_flops(L, L, "infer") for e, m in biases.items()),
        "attention_values": 2 * B * logits * sum(attention.attended_value_width(layer.query_key_width, width, L)
                                                 for layer in layers),  # PoPE's values padded to its keys' width
        "position_content": enc.content_flops(B, L, L, "infer"),  # the fourth hook, all layers
        "ffn": n * 2 * 2 * tokens * width * model.d_ff,
        "residual": n * 2 * tokens * width,
        "head": 2 * (B if cfg.n_classes else tokens) * width * (cfg.n_classes or cfg.vocab_size),
    }
    if mode == "infer":
        return forward
    backward = {
        "embedding": forward["embedding"],  # weight gradient only: the input needs none
        "position_input": 0,  # the add passes its gradient through
        "projections": 2 * forward["projections"],
        "rotation": sum(layer.rotation_flops(B, L, "train") for layer in layers) - forward["rotation"]
        + _shared_rotation_gradients(layers),
        "attention_scores": 2 * forward["attention_scores"],
        "attention_bias": sum((m - 1) * _bias_held(e, L) * _trainable(e)  # one bias for all its layers
                              + e.bias_flops(L, L, "train") - e.bias_flops(L, L, "infer")  # building it: backward
                              for e, m in biases.items()),
        "attention_values": 2 * forward["attention_values"],
        "position_content": enc.content_flops(B, L, L, "train") - forward["position_content"],
        "ffn": 2 * forward["ffn"],
        "residual": forward["residual"],  # one gradient-accumulation add per branch point
        "head": 2 * forward["head"],
    }
    return {term: forward[term] + backward[term] for term in forward}


def decode_flops(cfg_or_model: ModelConfig | Transformer, batch_size: int, context: int) -> dict[str, int]:
    """Per-term FLOPs of one generated token per sequence against a KV cache of ``context`` tokens,
    under the module's convention: every per-token term of :func:`analytic_flops` at one token, the
    attention terms over the ``context + 1`` keys (a local layer's over its window's, unmasked: the
    ``window`` path of :func:`posbench.attention.choose_path`), the bias of one query row built."""
    _check_arguments(batch_size, context, "infer")
    model = meta_model(cfg_or_model) if isinstance(cfg_or_model, ModelConfig) else cfg_or_model
    cfg, enc, width = model.cfg, model.encoding, model.width
    B, keys, n, h = batch_size, context + 1, cfg.n_layers, cfg.n_heads
    layers = model.layer_encodings
    windowed = {e for e in layers if attention.choose_path(e, 1, keys, cfg.causal) == "window"}
    seen = [min(keys, layer.decode_window(context)) if layer in windowed else keys for layer in layers]
    biased = {e: m for e, m in _biases(layers).items() if e not in windowed}
    return {
        "embedding": 2 * B * cfg.patch_dim * enc.token_width if cfg.patch_dim else 0,
        "position_input": B * width if enc.traits.combine == "add" else 0,
        "projections": n * 2 * B * width * 4 * width,
        "rotation": sum(layer.rotation_flops(B, 1, "infer") for layer in layers),
        "attention_scores": 2 * B * sum(k * layer.query_key_width for k, layer in zip(seen, layers)),
        "attention_bias": sum(m * B * h * keys + e.bias_flops(1, keys, "infer") for e, m in biased.items()),
        "attention_values": 2 * B * sum(seen) * width,  # one query: values at their own width
        "position_content": enc.content_flops(B, 1, keys, "infer"),
        "ffn": n * 2 * 2 * B * width * model.d_ff,
        "residual": n * 2 * B * width,
        "head": 2 * B * width * (cfg.n_classes or cfg.vocab_size),
    }


def _biases(layers: list) -> dict:
    """Each distinct encoding among ``layers`` that adds a logit bias -> how many layers use it (its bias is
    built once per forward pass and added in each of them)."""
    counts = {}
    for layer in layers:
        if attention.bias_kind(layer):
            counts[layer] = counts.get(layer, 0) + 1
    return counts


def _shared_rotation_gradients(layers: list) -> int:
    """Accumulation adds of the gradient of a trained rotation's parameters (PoPE's ``δ``) that ``m`` layers
    use: ``m − 1`` per parameter."""
    return sum((layers.count(e) - 1) * sum(p.numel() for p in e.parameters() if p.requires_grad)
               for e in dict.fromkeys(layers) if e.rotated_width)


def _bias_held(encoding, seq_len: int) -> int:
    """Elements of the bias as attention holds it: the ``(h, 2L − 1)`` table of a relative bias, else ``(h, L, L)``."""
    h = encoding.n_heads
    return h * (2 * seq_len - 1) if attention.bias_kind(encoding) == "relative" else h * seq_len * seq_len


def _trainable(encoding) -> bool:
    return any(p.requires_grad for p in encoding.parameters())


# ----- shared by the counters --------------------------------------------------------------------
def _attention_matmul_flops(q_shape, k_shape, v_shape) -> int:
    """``q·kᵀ`` and ``attn·v`` of ``(B, h, Lq, d)`` queries against ``(B, h, Lk, d)`` keys and values."""
    *batch, q_len, d_qk = q_shape
    k_len, d_v = k_shape[-2], v_shape[-1]
    return 2 * math.prod(batch) * q_len * k_len * (d_qk + d_v)


def _attention_flops(q_shape, k_shape, v_shape, bias_shape) -> int:
    """Forward attention: the two matmuls plus the logit-bias add when a float mask is given."""
    logits = math.prod(q_shape[:-1]) * k_shape[-2]  # (B, h, Lq, Lk)
    return _attention_matmul_flops(q_shape, k_shape, v_shape) + (logits if _is_tensor(bias_shape) else 0)


def _baddbmm_flops(a_shape, b_shape) -> int:
    """``input + α · a @ b`` of ``(b, n, k)`` and ``(b, k, m)``: the batched matmul and one add per output element
    (the scale by a constant ``α`` is free)."""
    batch, n, k = a_shape
    return 2 * batch * n * k * b_shape[-1] + batch * n * b_shape[-1]


def _elementwise_flops(a_shape, b_shape, out_shape, per_element: int) -> int:
    """``per_element`` FLOPs per output element when both operands are tensors; a constant operand is free."""
    return math.prod(out_shape) * per_element if _is_tensor(a_shape) and _is_tensor(b_shape) else 0


def _flops_per_element(dtype: torch.dtype, op: str) -> int:
    """Real arithmetic: 1 (integers: 0). Complex: a multiply is 4 real multiplies and 2 adds, an add 2 adds."""
    if dtype.is_complex:
        return 6 if op == "mul" else 2
    return 1 if dtype.is_floating_point else 0


def _is_tensor(shape) -> bool:
    """A shape of a tensor with at least one dimension (0-d tensors and Python numbers are constants)."""
    return isinstance(shape, (list, tuple)) and len(shape) > 0


# ----- torch.utils.flop_counter ------------------------------------------------------------------
def _torch_elementwise(op: str):
    def formula(a, b=None, *args, out_val=None, **kwargs) -> int:
        return _elementwise_flops(_shape(a), _shape(b), out_val.shape, _flops_per_element(out_val.dtype, op))

    formula._get_raw = True  # FlopCounterMode's flag: pass tensors, not shapes (the dtype matters)
    return formula


def _shape(value):
    return value.shape if isinstance(value, torch.Tensor) else value


def _torch_attention(q, k, v, *args, out_shape=None, **kwargs) -> int:
    # the CPU kernel takes the mask as keyword ``attn_mask``; efficient/cudnn as 4th positional
    return _attention_flops(q, k, v, kwargs.get("attn_mask", args[0] if args else None))


def _torch_attention_backward(grad_out, q, k, v, *args, out_shape=None, **kwargs) -> int:
    return 2 * _attention_matmul_flops(q, k, v)  # dQ, dK, dV, dP; no recompute of q·kᵀ


_aten = torch.ops.aten
TORCH_FORMULAS = {
    **{getattr(_aten, name + inplace): _torch_elementwise(name)
       for name in ELEMENTWISE_OPS for inplace in ("", "_")},
    _aten.baddbmm: lambda input, a, b, *args, out_shape=None, **kwargs: _baddbmm_flops(a, b),
    _aten.baddbmm_: lambda input, a, b, *args, out_shape=None, **kwargs: _baddbmm_flops(a, b),
    **{op: _torch_attention for op in (
        _aten._scaled_dot_product_flash_attention_for_cpu, _aten._scaled_dot_product_flash_attention,
        _aten._scaled_dot_product_efficient_attention, _aten._scaled_dot_product_cudnn_attention)},
    **{op: _torch_attention_backward for op in (
        _aten._scaled_dot_product_flash_attention_for_cpu_backward,
        _aten._scaled_dot_product_flash_attention_backward,
        _aten._scaled_dot_product_efficient_attention_backward,
        _aten._scaled_dot_product_cudnn_attention_backward)},
}  # the math path (bmm, add, softmax) needs nothing beyond the elementwise formulas


def torch_flops(model: Transformer, inputs: torch.Tensor, mode: str = "infer") -> int:
    """``FlopCounterMode`` with :data:`TORCH_FORMULAS`; ``train`` adds the backward of ``logits.sum()``."""
    counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
    if mode == "infer":
        with torch.no_grad(), counter:
            model(inputs)
        return counter.get_total_flops()
    saved_grads = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)  # accumulating into existing .grad would add FLOPs
    try:
        with counter:
            model(inputs).sum().backward()
    finally:
        for param, grad in zip(model.parameters(), saved_grads):
            param.grad = grad
    return counter.get_total_flops()


# ----- fvcore ------------------------------------------------------------------------------------
def _doubled(handle):
    """fvcore counts a multiply-add as 1; the convention counts it as 2."""
    return lambda inputs, outputs: 2 * handle(inputs, outputs)


def _fvcore_elementwise(op: str):
    def handle(inputs, outputs) -> int:
        out = outputs[0]
        per_element = _flops_per_element(out.type().dtype(), op) if out.isCompleteTensor() else 0
        return _elementwise_flops(get_shape(inputs[0]), get_shape(inputs[1]), get_shape(out), per_element)

    return handle


def _fvcore_attention(inputs, outputs) -> int:
    # aten::scaled_dot_product_attention(query, key, value, attn_mask, ...)
    return _attention_flops(*(get_shape(value) for value in inputs[:4]))


FVCORE_HANDLES = {
    **{op: _doubled(handle) for op, handle in (
        ("aten::addmm", addmm_flop_jit), ("aten::bmm", bmm_flop_jit), ("aten::einsum", einsum_flop_jit),
        ("aten::matmul", matmul_flop_jit), ("aten::mm", matmul_flop_jit), ("aten::linear", linear_flop_jit))},
    **{f"aten::{name}{inplace}": _fvcore_elementwise(name) for name in ELEMENTWISE_OPS for inplace in ("", "_")},
    "aten::scaled_dot_product_attention": _fvcore_attention,
    **{f"aten::baddbmm{inplace}": lambda inputs, outputs: _baddbmm_flops(get_shape(inputs[1]), get_shape(inputs[2]))
       for inplace in ("", "_")},
}  # complete: fvcore's defaults are cleared first, which drops its layer-norm count


def fvcore_flops(model: Transformer, inputs: torch.Tensor) -> int:
    """fvcore's forward count with :data:`FVCORE_HANDLES` instead of its defaults."""
    analysis = FlopCountAnalysis(model, inputs).clear_op_handles().set_op_handle(**FVCORE_HANDLES)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return int(analysis.total())


# ----- inputs and arguments ----------------------------------------------------------------------
def _example_inputs(model: Transformer, batch_size: int, seq_len: int) -> torch.Tensor:
    """Token ids ``(B, L)`` or float patches ``(B, L, patch_dim)`` on the model's device."""
    param = next(model.parameters())
    if model.cfg.patch_dim:
        return torch.randn(batch_size, seq_len, model.cfg.patch_dim, device=param.device, dtype=param.dtype)
    return torch.randint(model.cfg.vocab_size, (batch_size, seq_len), device=param.device)


def _check_arguments(batch_size: int, seq_len: int, mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}; allowed: {', '.join(MODES)}")
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
