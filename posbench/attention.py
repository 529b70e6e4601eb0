"""The one attention function every encoding goes through, and the mask paths that feed it.

Attention is always ``torch.nn.functional.scaled_dot_product_attention`` (never
``nn.MultiheadAttention``, whose fused paths hide work from FLOP counters). What differs between
encodings is only how their logit bias reaches it; :func:`choose_path` names the path:

``is_causal``  no bias, causal: SDPA's own causal kernel.
``unmasked``   no bias, not causal: one plain SDPA call.
``dense``      a general bias whose full ``(h, L, L)`` float mask fits in ``max_mask_bytes``: the
               mask is built once per forward pass (and kept while the encoding's tensors are
               unchanged and no gradient flows to them).
``relative``   a bias that depends on ``j − i`` alone (ALiBi, T5): the encoding gives a
               ``(h, 2L − 1)`` table and every block's mask is a strided *view* of it, so no
               ``(h, L, L)`` tensor ever exists. A view with rows ``i`` and columns ``j`` reading
               ``table[j − i]`` needs a negative stride, so each block's queries run in reverse
               order (``table[r + j]``, strides ``(1, 1)``) and the output is flipped back.
``blocked``    a general bias whose full mask would not fit: each block of queries gets only its
               own slice from ``encoding.attention_bias_block``, rebuilt per layer.

Masked paths run queries in blocks of ``block_size`` when causal, and a block attends only to the
keys up to its last query (later keys are all masked): like SDPA's ``is_causal`` kernel, they skip
the upper triangle, so the executed attention matmuls are ``≈ L²/2 + L·block/2`` per head, not L²
(``configured(block_size=L)`` gives one call over all keys, as :mod:`posbench.flops` counts).
A mask must reach SDPA with 4 dimensions: a 3-D ``(h, L, L)`` one sends the CPU kernel to a path
5× slower.

Why these paths, measured on the 2-core reference CPU (one call, fp32, L = 1024, 8 heads,
d_head 32; ``python -m posbench bench --parts paths [--flex]`` repeats it): at load ≈ 1, 2 threads,
is_causal 7.7 ms, a dense mask in one call 12.8 ms, a dense mask in blocks of 256 9.5 ms, the
relative view in one call 10.7 ms, and FlexAttention with an ALiBi ``score_mod`` under
``torch.compile`` 13.7 ms after 28 s of compiling — so FlexAttention is not used. At load ≈ 7,
1 thread (relative to is_causal): relative in blocks of 64/128/256/512/1024 0.96/0.95/0.95/1.13/1.27,
dense in one call 1.63, blocked (its slices rebuilt per call) 3.35.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

PATHS = ("is_causal", "unmasked", "dense", "relative", "blocked")
FORCEABLE_PATHS = ("dense", "relative", "blocked")


@dataclass(frozen=True)
class AttentionSettings:
    """Knobs of the mask paths; change them with :func:`configured`."""

    block_size: int = 256  # queries per SDPA call when causal (measured fastest of 64…512 here)
    max_mask_bytes: int = 256 * 2**20  # the most memory one mask (full or per block) may take
    force_path: str | None = None  # a biased encoding runs this path instead of the chosen one

    def __post_init__(self):
        if self.force_path not in (None, *FORCEABLE_PATHS):
            raise ValueError(f"force_path {self.force_path!r}; allowed: {', '.join(FORCEABLE_PATHS)}")
        if self.block_size < 1 or self.max_mask_bytes < 1:
            raise ValueError(f"block_size and max_mask_bytes must be positive, got "
                             f"{self.block_size}, {self.max_mask_bytes}")


SETTINGS = AttentionSettings()


@contextlib.contextmanager
def configured(**changes):
    """``with configured(force_path="blocked", block_size=16): …`` — settings for the block only."""
    global SETTINGS
    previous = SETTINGS
    SETTINGS = dataclasses.replace(SETTINGS, **changes)
    try:
        yield SETTINGS
    finally:
        SETTINGS = previous


def bias_kind(encoding) -> str | None:
    """``"relative"`` (a ``(h, 2L − 1)`` table), ``"general"`` (any other bias) or ``None``."""
    with torch.no_grad():
        if encoding.relative_bias(1) is not None:
            return "relative"
        if encoding.attention_bias_block(0, 1, 1) is not None:
            return "general"
    return None


def choose_path(encoding, q_len: int, k_len: int, causal: bool, dtype: torch.dtype = torch.float32) -> str:
    """The attention path (one of :data:`PATHS`) a model with ``encoding`` runs at these lengths.

    This is the function the model itself uses, so profiling can record which path ran.
    """
    kind = bias_kind(encoding)
    if kind is None:
        return "is_causal" if causal else "unmasked"
    if SETTINGS.force_path is not None:
        if SETTINGS.force_path == "relative" and kind != "relative":
            raise ValueError(f"force_path 'relative' needs a bias that depends on j − i alone; "
                             f"{type(encoding).__name__} has a general bias")
        return SETTINGS.force_path
    if kind == "relative":
        return "relative"
    full_mask_bytes = encoding.n_heads * q_len * k_len * torch.finfo(dtype).bits // 8
    return "dense" if full_mask_bytes <= SETTINGS.max_mask_bytes else "blocked"


def mask_future(bias: torch.Tensor, q_start: int) -> torch.Tensor:
    """``bias (h, q, k)`` for query positions ``q_start …`` -> the same with ``-inf`` where key > query."""
    i = torch.arange(q_start, q_start + bias.shape[-2], device=bias.device)
    j = torch.arange(bias.shape[-1], device=bias.device)
    return bias.masked_fill(j[None, :] > i[:, None], float("-inf"))  # (h, q, k)


class Mask:
    """One forward pass's logit mask: which blocks of queries to run, each block's mask, and the
    block-by-block attention."""

    path: str

    def __init__(self, encoding, q_len: int, k_len: int, causal: bool, dtype: torch.dtype):
        self.encoding, self.q_len, self.k_len, self.causal = encoding, q_len, k_len, causal
        self.first_query = k_len - q_len  # queries are the last q_len of the k_len positions
        self.rows = SETTINGS.block_size if causal else q_len

    def blocks(self):
        """``(start, stop, key_stop)`` per block of queries; ``key_stop`` ends the keys it may see."""
        for start in range(0, self.q_len, self.rows):
            stop = min(start + self.rows, self.q_len)
            yield start, stop, self.first_query + stop if self.causal else self.k_len

    def block_mask(self, start: int, stop: int, key_stop: int, dtype: torch.dtype) -> torch.Tensor:
        """``(1, h, stop − start, key_stop)`` float mask of one block, causal ``-inf`` included."""
        raise NotImplementedError

    def attend(self, q, k, v) -> torch.Tensor:
        """``q (B, h, q_len, d)``, ``k, v (B, h, k_len, d)`` -> ``(B, h, q_len, d)``, block by block."""
        return torch.cat([masked_sdpa(q[..., start:stop, :], k, v, self.block_mask(start, stop, key_stop, q.dtype))
                          for start, stop, key_stop in self.blocks()], dim=-2)


def masked_sdpa(q_block, k, v, mask) -> torch.Tensor:
    """SDPA of a block of queries against the first ``mask.shape[-1]`` keys."""
    key_stop = mask.shape[-1]
    return F.scaled_dot_product_attention(q_block, k[..., :key_stop, :], v[..., :key_stop, :], attn_mask=mask)


class DenseMask(Mask):
    path = "dense"

    def __init__(self, encoding, q_len, k_len, causal, dtype):
        super().__init__(encoding, q_len, k_len, causal, dtype)
        bias = encoding.attention_bias(q_len, k_len).to(dtype)  # (h, q, k)
        self.full = (mask_future(bias, self.first_query) if causal else bias)[None]  # (1, h, q, k)

    def block_mask(self, start, stop, key_stop, dtype):
        return self.full[:, :, start:stop, :key_stop].to(dtype)


class BlockedMask(Mask):
    path = "blocked"

    def __init__(self, encoding, q_len, k_len, causal, dtype):
        super().__init__(encoding, q_len, k_len, causal, dtype)
        row_bytes = encoding.n_heads * k_len * torch.finfo(dtype).bits // 8
        self.rows = max(1, min(self.rows, SETTINGS.max_mask_bytes // row_bytes))

    def block_mask(self, start, stop, key_stop, dtype):
        first = self.first_query + start
        bias = self.encoding.attention_bias_block(first, self.first_query + stop, key_stop).to(dtype)
        return (mask_future(bias, first) if self.causal else bias)[None]


class RelativeMask(Mask):
    """Block masks are views of one ``(h, 2k − 1)`` table, with the block's queries reversed."""

    path = "relative"

    def __init__(self, encoding, q_len, k_len, causal, dtype):
        super().__init__(encoding, q_len, k_len, causal, dtype)
        table = encoding.relative_bias(k_len).to(dtype)  # (h, 2k − 1), column k − 1 is offset 0
        if causal:  # offsets j − i > 0 are future keys
            offsets = torch.arange(1 - k_len, k_len, device=table.device)
            table = table.masked_fill(offsets > 0, float("-inf"))
        self.table = table.contiguous()

    def block_mask(self, start, stop, key_stop, dtype):
        """Rows in *reverse* query order: row r is query i = s − 1 − r (s: absolute position of
        ``stop``), so ``table[j − i + k − 1] = table[r + j + k − s]``, a view with strides (1, 1)."""
        table = self.table.to(dtype)
        offset = table.storage_offset() + self.k_len - (self.first_query + stop)
        return table.as_strided((1, table.shape[0], stop - start, key_stop), (0, table.stride(0), 1, 1), offset)

    def attend(self, q, k, v):
        """Reverses the queries once (not per block: each op is a thread-pool round trip): rows
        ``q_len − stop … q_len − start`` of the reversed queries are one block, in the order its
        mask wants, and the reversed outputs, last block first, flip back in one go."""
        reversed_queries = q.flip(-2)  # (B, h, q_len, d)
        q_len = self.q_len
        blocks = [masked_sdpa(reversed_queries[..., q_len - stop:q_len - start, :], k, v,
                              self.block_mask(start, stop, key_stop, q.dtype))
                  for start, stop, key_stop in reversed(list(self.blocks()))]
        return torch.cat(blocks, dim=-2).flip(-2)


MASKS = {mask.path: mask for mask in (DenseMask, BlockedMask, RelativeMask)}


def build_mask(encoding, q_len: int, k_len: int, causal: bool, dtype: torch.dtype = torch.float32) -> Mask | None:
    """The mask for one forward pass, or ``None`` when the encoding adds no bias."""
    mask = MASKS.get(choose_path(encoding, q_len, k_len, causal, dtype))
    return None if mask is None else mask(encoding, q_len, k_len, causal, dtype)


class MaskCache:
    """Keeps a model's last mask while nothing it depends on changed, so repeated forward passes
    at one length build it once.

    Reused only when no gradient flows to the encoding (a trained bias must be rebuilt to stay in
    the graph); the key holds the lengths, dtype, settings, inference mode, and the storage and
    version counter of every tensor of the encoding, so an optimiser step or ``load_state_dict``
    rebuilds it.
    """

    def __init__(self):
        self._key = None
        self._mask = None

    def get(self, encoding, q_len: int, k_len: int, causal: bool, dtype: torch.dtype) -> Mask | None:
        tensors = list(itertools.chain(encoding.parameters(), encoding.buffers()))
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return build_mask(encoding, q_len, k_len, causal, dtype)
        key = (id(encoding), q_len, k_len, causal, dtype, SETTINGS, torch.is_inference_mode_enabled(),
               tuple((t.data_ptr(), t._version) for t in tensors))
        if key != self._key:
            self._key, self._mask = key, build_mask(encoding, q_len, k_len, causal, dtype)
        return self._mask


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None, causal: bool) -> torch.Tensor:
    """``q (B, h, q_len, d_head)``, ``k, v (B, h, k_len, d_head)`` and a :class:`Mask` (or ``None``
    for no bias) -> ``(B, h, q_len, d_head)``."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return mask.attend(q, k, v)
