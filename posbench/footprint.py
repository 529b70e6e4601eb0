"""The analytic memory of a cell: what it needs, known before it runs, so a cell no device can hold is
refused (the workflow's config check) or recorded ``oom`` (a profile job) instead of being run.

>>> from posbench import ModelConfig
>>> from posbench.footprint import cell_memory
>>> terms = cell_memory(ModelConfig.from_size("base", encoding="rope", max_len=10**9), 1, 10**9, "infer")
>>> f"{sum(terms.values()) / 2**40:.1f} TiB"
'10.4 TiB'

Counted in bytes, term by term, from the model's config and its encoding's declared widths and hooks:

* ``weights``: the parameters outside the encoding (:func:`rest_parameters`, the same count as
  :class:`~posbench.model.Transformer` builds) and the encoding's own parameters and buffers (a learned,
  sinusoid or rotary table of ``max_len`` rows, ALiBi's penalties), in the dtype they run in.
* ``optimizer`` (train): gradients and AdamW's two moments, one float32 copy each of the parameters.
* ``activations``: the largest set of ``(B, L, ·)`` tensors alive at once, per token. Inference (and a
  decode cell's prefill): a block's residual stream before and after its attention, its normalised input
  and the feed-forward's hidden layer before and after its activation, ``3·w + 2·d_ff``, or the
  residual, normalised input and logits at the head if more. Training: what autograd keeps per layer
  for the backward, ``11·w + 2·d_ff`` (residuals, both norms' outputs, q/k/v, attention output and its
  reshaped copy, the hidden layer twice) and the turned q and k where a layer rotates them (``2·w``, PoPE's
  ``4·w``), plus one layer's gradients in flight (``2·w + 2·d_ff``) and the logits three times (logits,
  log-softmax, gradient).
* ``kv_cache`` (decode): keys (as wide as ``q·kᵀ`` reads them) and values of every layer for ``L + 1`` tokens,
  once: the cache is preallocated for the prompt and the step's token (:class:`~posbench.cache.KVCache`), and a
  step writes its entries in place.
* ``attention_bias``: what the attention path (:func:`posbench.attention.choose_path`, the model's own
  choice) holds of the logit bias: the ``(h, 2L − 1)`` table of a relative bias; a general bias whole,
  ``(h, L, L)``, or one block of query rows, with its causal copy (none where the bias is ``-inf`` at
  future keys already: FIRE's) and what building it holds besides
  (:meth:`~posbench.encodings.base.PositionalEncoding.bias_build_elements`, FIRE's MLP). In training
  every mask a layer uses is kept for the backward (every layer's blocks, on the blocked path), and a
  trained bias gets a gradient of its size.
* The fourth hook's paths (position from content) build their bias per layer, per sequence and per block of
  queries: one block's bias and its causal copy, what making it holds, and on ``contextual_logits`` the
  block's logits and weights (``attention_scores``); training keeps every block of every layer.
* ``attention_scores``: logits, only where the kernel materialises them: FlexAttention run uncompiled (off
  CUDA), the ``(B, h, L, L)`` logits and their softmax; and SDPA's math kernel, which runs where a mask
  needs a gradient (a trained bias in training: the fused kernels give none) and keeps every block's
  softmax for the backward. SDPA's fused kernels (flash on CPU, flash or memory-efficient on CUDA) and
  compiled FlexAttention work in tiles.

Not counted: the Python and torch runtime (a few hundred MiB resident before any model exists, plus what the
first kernels and the first optimizer step load, more in training), the allocator's fragmentation and a CUDA
context. The measured peak
of small CPU cells over the estimate is stated and checked in ``tests/test_footprint.py``.
"""

from __future__ import annotations

import functools
import json
import math
import os

import torch

from posbench import attention, encodings
from posbench.devices import CPU, CUDA, missing_device, on_cuda
from posbench.encodings.base import PositionalEncoding
from posbench.model import ModelConfig

MODES = ("infer", "train", "decode")
BUILT_UP_TO = 2**16  # positions up to which an encoding is built on the CPU to count its tables; meta beyond


def cell_memory(cfg: ModelConfig, batch_size: int, seq_len: int, mode: str = "infer",
                dtype: torch.dtype = torch.float32, device: str = CPU) -> dict[str, int]:
    """Bytes per term (see the module's doc) of one cell: a forward (``infer``), a training step with
    AdamW (``train``: float32 weights, activations in ``dtype``) or a token generated after a
    ``seq_len``-token prompt (``decode``), on ``device``; ``sum(result.values())`` is the estimate."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}; allowed: {', '.join(MODES)}")
    enc = encoding_of(cfg)
    width, n = enc.model_width, cfg.n_layers
    layers = enc.layers(n)
    d_ff, outputs = cfg.d_ff or 4 * width, cfg.n_classes or cfg.vocab_size
    weight_bytes = _bytes(torch.float32 if mode == "train" else dtype)
    size = _bytes(dtype)
    tokens = batch_size * seq_len
    parameters = rest_parameters(cfg) + sum(p.numel() for p in enc.parameters())
    if mode == "train":
        rotated = sum(2 * layer.query_key_width for layer in layers if layer.rotated_width)  # q and k turned
        per_token = n * (11 * width + 2 * d_ff) + rotated + 2 * width + 2 * d_ff + 3 * outputs  # kept for backward
    else:
        per_token = max(3 * width + 2 * d_ff, 2 * width + outputs)
    per_encoding = [_attention_elements(layer, layers.count(layer), batch_size, seq_len, cfg.causal, mode, dtype,
                                        device) for layer in dict.fromkeys(layers)]  # every mask is built up front
    scores = [s for _, s in per_encoding]  # kept per layer for the backward in training, else one layer's at a time
    bias, scores = sum(b for b, _ in per_encoding), sum(scores) if mode == "train" else max(scores)
    return {
        "weights": rest_parameters(cfg) * weight_bytes + _tensor_bytes(enc, weight_bytes),
        "optimizer": 3 * parameters * 4 if mode == "train" else 0,
        "activations": tokens * per_token * size,
        "kv_cache": batch_size * (seq_len + 1) * sum(layer.query_key_width + width for layer in layers) * size
        if mode == "decode" else 0,  # keys (as wide as q·kᵀ reads them) and values, preallocated
        "attention_bias": bias * size,
        "attention_scores": scores * size,
    }


def rest_parameters(cfg: ModelConfig) -> int:
    """Parameters outside the encoding, as :class:`~posbench.model.Transformer` builds them: the token
    embedding (or patch projection), per layer q/k/v and output projections, the feed-forward and two
    layer norms, the final norm and the head (the tests check this against a built model)."""
    enc = encoding_of(cfg)
    width = enc.model_width
    d_ff = cfg.d_ff or 4 * width
    embedding = (cfg.patch_dim or cfg.vocab_size) * enc.token_width
    block = 4 * width * width + 2 * width * d_ff + 2 * 2 * width
    return embedding + cfg.n_layers * block + 2 * width + width * (cfg.n_classes or cfg.vocab_size)


def _attention_elements(enc: PositionalEncoding, n_layers: int, batch_size: int, seq_len: int, causal: bool,
                        mode: str, dtype: torch.dtype, device: str) -> tuple[int, int]:
    """Elements of the logit bias and of materialised attention scores at their peak, in a forward (a
    decode cell's prefill is one) or a training step at ``seq_len``."""
    L, h = seq_len, enc.n_heads
    path = attention.choose_path(enc, L, L, causal, dtype, device=device)
    kind = attention.bias_kind(enc)
    trained = mode == "train" and any(p.requires_grad for p in enc.parameters())
    rows = attention.mask_rows(path, h, L, L, causal, dtype)
    if path == "flex":
        scores = 0 if on_cuda(device) else 2 * batch_size * h * L * L  # eager: logits and softmax
    elif trained and path in attention.MASK_PATHS:  # SDPA's fused kernels give no mask gradient: math, which
        scores = n_layers * batch_size * h * _logits(L, rows, causal)  # keeps every block's softmax
    else:
        scores = 0
    if path in attention.CONTEXTUAL_PATHS:
        return _contextual_elements(enc, n_layers, batch_size, L, causal, path, rows, trained)
    if kind is None:
        return 0, scores
    if kind == "relative" and path in ("relative", "flex"):
        return h * (2 * L - 1) * (1 + causal), scores  # the table and its causal copy
    held = rows if path == "general_blocked" else L  # query rows of the bias built at once
    # a causal copy, unless flex masks the future (a block mask) or the bias has -inf there already (FIRE)
    copies = 1 + (causal and path != "flex" and not enc.hides_future_keys)
    one = copies * h * held * L + enc.bias_build_elements(held, L, trained)  # one mask (or block) and its making
    if mode != "train":
        return one, scores
    kept = n_layers * math.ceil(L / held) if path == "general_blocked" else 1  # blocks are built per layer
    return one * kept * (2 if trained else 1), scores


def _contextual_elements(enc: PositionalEncoding, n_layers: int, batch_size: int, L: int, causal: bool, path: str,
                         rows: int, trained: bool) -> tuple[int, int]:
    """The fourth hook's paths, per sequence of the batch and per layer: one block's bias, its causal copy and
    what making it holds (``bias_build_elements``); on ``contextual_logits`` the block's logits and weights
    too. Training keeps them for every block of every layer."""
    block = enc.n_heads * rows * L
    bias = 2 * block + enc.bias_build_elements(rows, L, trained)
    scores = 2 * block if path == "contextual_logits" else 0
    if trained:
        kept = n_layers * _logits(L, rows, causal) / (rows * L)  # every block of every layer, in blocks
        return batch_size * math.ceil(bias * kept), batch_size * math.ceil(scores * kept)
    return batch_size * bias, batch_size * scores


def _logits(seq_len: int, rows: int, causal: bool) -> int:
    """Query-key pairs one layer computes in blocks of ``rows`` queries, each block (causal) up to its last query."""
    if not causal:
        return seq_len * seq_len
    full, last = divmod(seq_len, rows)
    return rows * rows * full * (full + 1) // 2 + last * seq_len


def encoding_of(cfg: ModelConfig) -> PositionalEncoding:
    """``cfg``'s encoding on the meta device (its tensors' shapes, no memory), to read its widths, hooks and
    tensors: built for real on the CPU up to :data:`BUILT_UP_TO` positions and moved there (cheap), built
    there directly beyond (the first meta operation of a process costs seconds of imports)."""
    return _built(cfg.encoding, cfg.d_model, cfg.n_heads, cfg.max_len, cfg.causal, cfg.n_layers,
                  json.dumps(cfg.encoding_options, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _built(name: str, d_model: int, n_heads: int, max_len: int, causal: bool, n_layers: int,
           options: str) -> PositionalEncoding:
    with torch.device(CPU if max_len <= BUILT_UP_TO else "meta"):
        encoding = encodings.build(name, d_model=d_model, n_heads=n_heads, max_len=max_len, causal=causal,
                                   n_layers=n_layers, **json.loads(options))
    return encoding.to("meta")


def _tensor_bytes(module: torch.nn.Module, float_bytes: int) -> int:
    """Parameters and buffers; floating-point ones at ``float_bytes`` (``Module.to(dtype)`` casts them)."""
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * (float_bytes if t.is_floating_point() else t.element_size()) for t in tensors)


def _bytes(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits // 8


def device_memory(device: str) -> int | None:
    """Bytes ``device`` holds, or ``None`` when this process cannot see it: the machine's physical memory
    for ``cpu``, a CUDA device's total memory (torch), MPS's recommended working set."""
    if missing_device(device):
        return None
    kind, _, index = device.partition(":")
    if kind == CPU:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if kind == CUDA:
        return torch.cuda.get_device_properties(int(index or 0)).total_memory
    return torch.mps.recommended_max_memory()


def human(n_bytes: float) -> str:
    """``3.52 TiB``: binary units, three significant digits."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = min(int(math.log(max(n_bytes, 1), 1024)), len(units) - 1)
    return f"{n_bytes / 1024 ** power:.3g} {units[power]}" if power else f"{int(n_bytes)} B"


def described(terms: dict[str, int]) -> str:
    """``10.5 TiB (activations 10.5 TiB, weights 12.5 MiB)``: the total and its two largest terms."""
    largest = sorted((t for t in terms.items() if t[1]), key=lambda t: -t[1])[:2]
    return f"{human(sum(terms.values()))} ({', '.join(f'{name} {human(b)}' for name, b in largest)})"
