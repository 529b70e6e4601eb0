"""Layer patterns: RoPE with local attention in most layers, a global layer without position every few.

How large models now use RoPE: one encoding does not serve every layer.

* Llama 4's iRoPE (``modeling_llama4.py`` in Hugging Face transformers, Apache-2.0, read for the rules):
  every 4th layer (``(i + 1) % 4 == 0``) has no rotation and attends globally, its queries scaled by a
  temperature that grows with their position, ``ln(1 + ⌊(n + 1) / floor_scale⌋) · attn_scale + 1``
  (``floor_scale`` 8192, ``attn_scale`` 0.1); the other layers are RoPE with *chunked* attention: a token
  sees only the earlier tokens of its own chunk of ``attention_chunk_size`` (8192) positions.
* Cohere's Command R7B and Command A: three RoPE layers with a *sliding window* (4096) then one global
  layer without position, ``(i + 1) % 4 == 0`` again.

One registered preset is one :class:`LayerPattern`: it gives each layer its encoding through
:meth:`~posbench.encodings.base.PositionalEncoding.layers`, and the model runs each layer's hooks without
asking what they are. A local layer is RoPE whose window or chunk is a logit bias (0 inside, −∞ outside):
a window depends on ``j − i`` alone, so attention reads it as views of one ``(h, 2L − 1)`` table; a
chunk does not, so it is a general bias. The masked layers run SDPA's masked kernel on every key (no
kernel here skips keys outside the window), so in a forward pass a window saves no time, it changes what
is seen; a decode step, one query, attends only the keys its window or chunk holds (``decode_window``),
unmasked, so there a local layer costs its window, not the cache.

**Per model size.** A model with fewer layers than the period shrinks the period to its depth, never
below 2: tiny (2 layers) is local, global; small and base (4) are local, local, local, global, as Llama 4's
and Cohere's; medium (6) has its global layer 4th; large (12) at 4, 8 and 12. A one-layer model is local.

**Scaled to the training length.** Llama 4's 8192 against a 256K training context would leave the
temperature at exactly 1 and every chunk wider than a posbench training sequence, so both scale to the
length the model trains at (``trained_length``, which ``train`` passes; the longest sequence the model
is built for otherwise): window, chunk and ``floor_scale`` are a quarter of it. A training sequence then
spans four chunks (windows), and the temperature reaches ``1 + 0.1 · ln 5 ≈ 1.16`` at its last token
and keeps growing beyond, ``1 + 0.1 · ln 17 ≈ 1.28`` at 4× the training length.
"""

from __future__ import annotations

import torch

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.encodings.rope import ROPE_BASE, Rope
from posbench.positions import Positions

SPAN_OF_TRAINING = 4  # window, chunk and floor_scale: a quarter of the training length


class SlidingWindowRope(Rope):
    """RoPE whose queries see only keys fewer than ``span`` positions away (Mistral's, Cohere's window)."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, span: int,
                 base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal, base=base)
        self.span = span

    def relative_bias(self, offsets: torch.Tensor, max_distance: int) -> torch.Tensor:
        outside = offsets.abs() >= self.span
        return torch.where(outside, float("-inf"), 0.0).expand(self.n_heads, *offsets.shape)  # (h, *offsets)

    def decode_window(self, position: int) -> int:
        return self.span  # keys position − span + 1 … position

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.span}"


class ChunkedRope(Rope):
    """RoPE whose queries see only keys of their own chunk of ``span`` positions (Llama 4's chunked attention)."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, span: int,
                 base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal, base=base)
        self.span = span

    def attention_bias(self, query: Positions, key: Positions) -> torch.Tensor:
        other_chunk = (query.ids // self.span)[:, None] != (key.ids // self.span)[None, :]  # (q, k)
        return torch.where(other_chunk, float("-inf"), 0.0).expand(self.n_heads, *other_chunk.shape)  # (h, q, k)

    def decode_window(self, position: int) -> int:
        return position % self.span + 1  # its chunk's keys up to it

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, chunk={self.span}"


class QueryTemperature(PositionalEncoding):
    """No rotation; each query scaled by ``ln(1 + ⌊(n + 1) / floor_scale⌋) · attn_scale + 1`` at its position
    ``n`` (Llama 4's attention temperature tuning on its NoPE layers): 1 within the first ``floor_scale``
    positions, sharper attention beyond, where a layer without position sees ever more keys."""

    hook = "qk"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, floor_scale: int,
                 attn_scale: float = 0.1):
        super().__init__(d_model, n_heads, max_len, causal)
        self.floor_scale, self.attn_scale = floor_scale, attn_scale

    def temperature(self, positions: Positions) -> torch.Tensor:
        """``(L,)`` float32: the scale of each query."""
        blocks = torch.floor((positions.ids.to(torch.float32) + 1) / self.floor_scale)  # (L,)
        return torch.log1p(blocks) * self.attn_scale + 1

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        return q * self.temperature(positions).to(q.dtype)[:, None], k  # (…, L, d_head) × (L, 1)

    def rotation_flops(self, batch_size: int, seq_len: int, mode: str) -> int:
        """One multiply per query element (its gradient: one more); keys pass."""
        return batch_size * seq_len * self.d_model * (2 if mode == "train" else 1)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, floor_scale={self.floor_scale}, attn_scale={self.attn_scale:g}"


LOCAL_ATTENTION = {"sliding": SlidingWindowRope, "chunked": ChunkedRope}


class LayerPattern(PositionalEncoding):
    """Local RoPE layers and, every ``period``-th layer, a global layer without position.

    Family options: ``local_attention`` (``sliding`` window or ``chunked``), ``period`` (4), ``temperature``
    (the global layers scale their queries, Llama 4's rule; default off), ``trained_length`` (the positions
    a training sequence spans; default ``max_len``), ``span`` (window or chunk; default a quarter of
    ``trained_length``), ``floor_scale`` (default ``span``), ``attn_scale`` (0.1), ``base`` (RoPE's θ)."""

    hook = "qk"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 local_attention: str = "sliding", period: int = 4, temperature: bool = False,
                 trained_length: int | None = None, span: int | None = None, floor_scale: int | None = None,
                 attn_scale: float = 0.1, base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal)
        if local_attention not in LOCAL_ATTENTION:
            raise ValueError(f"local_attention {local_attention!r}; allowed: {', '.join(LOCAL_ATTENTION)}")
        trained_length = trained_length or max_len
        span = span or max(1, trained_length // SPAN_OF_TRAINING)
        for name, value in (("period", period), ("trained_length", trained_length), ("span", span)):
            if not isinstance(value, int) or isinstance(value, bool) or value < (2 if name == "period" else 1):
                raise ValueError(f"{name} must be an integer >= {2 if name == 'period' else 1}, got {value!r}")
        self.period, self.trained_length = period, trained_length
        self.local = LOCAL_ATTENTION[local_attention](d_model, n_heads, max_len, causal, span=span, base=base)
        self.global_layer = (QueryTemperature(d_model, n_heads, max_len, causal, floor_scale=floor_scale or span,
                                              attn_scale=attn_scale)
                             if temperature else PositionalEncoding(d_model, n_heads, max_len, causal))

    def layers(self, n_layers: int) -> list[PositionalEncoding]:
        """Layer ``i`` is global when ``(i + 1) % p == 0``, ``p`` the period shrunk to the depth (at least 2)."""
        period = min(self.period, max(n_layers, 2))
        return [self.global_layer if (i + 1) % period == 0 else self.local for i in range(n_layers)]

    @property
    def rotated_width(self) -> int:
        return self.local.rotated_width

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """As the local layers rotate (a one-layer model has only those); a model runs each layer's own."""
        return self.local.rotate(q, k, positions)

    def rotate_in_place(self, q: torch.Tensor, k: torch.Tensor,
                        positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        return self.local.rotate_in_place(q, k, positions)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, period={self.period}, trained_length={self.trained_length}"


register("irope", local_attention="chunked", temperature=True)(LayerPattern)  # Llama 4
register("rnope_swa", local_attention="sliding")(LayerPattern)  # Cohere Command R7B / A
