"""PoPE (Gopalakrishnan et al. 2025, "Decoupling the 'What' and 'Where' With Polar Coordinate Positional
Embeddings", arXiv:2509.10534): magnitude from content, phase from position.

RoPE turns pairs of content dimensions, so what a token is also moves the angle its logit reads. PoPE
keeps the two apart: every dimension ``c`` of a head becomes a complex number whose *magnitude* is
``softplus(x_c)`` (content, never negative) and whose *phase* is ``n·θ_c`` (position alone), with one
frequency per dimension, ``θ_c = base^(−c/d_head)`` — ``d_head`` frequencies where RoPE has ``d_head/2``.
A key's phase is shifted by a learned ``δ_{h,c} ∈ [−2π, 0]`` per head and dimension, so the logit of a
query at ``m`` and a key at ``n`` is

    Σ_c softplus(q_c) · softplus(k_c) · cos((m − n)·θ_c − δ_c) / √d_head,

a function of ``m − n`` and of the two tokens' contents, which never turn each other.

As a query/key transform: ``q`` and ``k (…, L, d_head)`` become ``(…, L, 2·d_head)`` real vectors, the
real and imaginary part of each dimension side by side, whose dot product is the sum above; so q·kᵀ and
the key cache are twice as wide (:attr:`query_key_width`) and values keep their width. Queries carry
``√2`` in their turns so that attention's ``1/√(2·d_head)`` scale gives the ``1/√d_head`` above.

One ``δ`` serves every layer (the model shares one encoding across its layers), as in x-transformers,
whose ``PolarEmbedding`` and ``apply_polar_pos_emb`` (lucidrains/x-transformers, MIT licence) were read
for the formulas: frequencies ``base^(−c/d)`` over all ``d`` dimensions, softplus magnitudes, the key's
bias clamped to ``[−2π, 0]`` and starting at 0, the ``1/√d_head`` logit scale. This is posbench's own code.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.encodings.rope import ROPE_BASE
from posbench.positions import Positions


class Pope(PositionalEncoding):
    """PoPE. Family option: ``base`` (10000, the frequency ladder's θ). Learns ``δ`` ``(n_heads, d_head)``."""

    hook = "qk"
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if not base > 1:
            raise ValueError(f"base must be > 1, got {base!r}")
        d_head = d_model // n_heads
        self.base = base
        self.inv_freq = base ** -(torch.arange(d_head, dtype=torch.float64) / d_head)  # (d_head,) θ_c, float64
        self.key_phase = nn.Parameter(torch.zeros(n_heads, d_head))  # δ, clamped to [−2π, 0] when used
        turns = self._query_turns(torch.arange(max_len), torch.get_default_dtype())  # (max_len, d_head) complex
        self.register_buffer("turns", torch.view_as_real(turns), persistent=False)  # (max_len, d_head, 2): real

    @property
    def rotated_width(self) -> int:
        return self.d_model  # every dimension of every head gets a phase

    @property
    def query_key_width(self) -> int:
        return 2 * self.d_model  # a real and an imaginary part per dimension

    def _query_turns(self, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``(L,)`` ids -> ``√2 · exp(i·n·θ_c)`` ``(L, d_head)`` complex (angles in float64, as RoPE's)."""
        angle = ids.to(torch.float64)[:, None] * self.inv_freq.to(ids.device)  # (L, d_head)
        complex_dtype = torch.promote_types(torch.promote_types(dtype, torch.float32), torch.complex64)
        return torch.polar(torch.full_like(angle, math.sqrt(2)), angle).to(complex_dtype)

    def rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Turns of queries ``(L, d_head)`` and of keys ``(h, L, d_head)`` (``δ`` is per head), complex:
        ``√2·e^{inθ}`` and ``e^{i(nθ + δ)}``."""
        if positions.max_position < self.max_len:
            cached = positions.rows_of(self.turns)  # (L, d_head, 2)
            query = torch.view_as_complex(cached.to(torch.promote_types(cached.dtype, torch.float32)))
        else:
            query = self._query_turns(positions.ids, self.turns.dtype)
        delta = self.key_phase.clamp(-2 * math.pi, 0).to(query.real.dtype)  # (h, d_head)
        shift = torch.polar(torch.full_like(delta, 1 / math.sqrt(2)), delta)  # (h, d_head): e^{iδ} / √2
        return query, query * shift[:, None, :]  # (L, d), (h, L, d)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """``q, k (B, h, L, d_head)`` -> ``(B, h, L, 2·d_head)``: each dimension's magnitude ``softplus(x)``
        times its turn, real and imaginary parts side by side (float32 at least, returned in q's dtype)."""
        query_rows, key_rows = self.rows(positions)
        return polar(q, query_rows), polar(k, key_rows)

    def rotation_flops(self, batch_size: int, seq_len: int, mode: str) -> int:
        """Magnitudes times turns: 2 FLOPs per dimension of q and of k (cos and sin parts); the keys' turns,
        one complex multiply (6) per head, position and dimension. Training: the magnitudes' gradients
        (2 per dimension of q and of k) and the keys' turns' (2 per dimension of k, and its complex multiply
        back to ``δ``, 6 per head, position and dimension), and ``torch.polar``'s backward to ``δ``
        (two complex multiplies per head and dimension)."""
        width, tokens = self.d_model, batch_size * seq_len
        forward = 2 * 2 * tokens * width + 6 * seq_len * width
        if mode != "train":
            return forward
        return 2 * forward + 2 * tokens * width + 2 * 6 * width

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base:g}"


def polar(x: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """``x (…, L, d)`` with magnitudes ``softplus(x)`` turned by complex ``turns`` (broadcasting to ``(…, L, d)``)
    -> ``(…, L, 2·d)`` real: ``[μ_0·cos φ_0, μ_0·sin φ_0, μ_1·cos φ_1, …]``."""
    exact = torch.promote_types(x.dtype, torch.float32)
    magnitude = F.softplus(x.to(exact))  # (…, L, d)
    return (magnitude[..., None] * torch.view_as_real(turns)).flatten(-2).to(x.dtype)  # (…, L, 2·d)


register("pope")(Pope)
