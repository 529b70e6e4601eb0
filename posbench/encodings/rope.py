"""Rotary position embedding (RoFormer, Su et al. 2021): rotate q and k by an angle per position.

Pairing convention: RoFormer's own *neighbours*: dimensions ``(2i, 2i+1)`` of a head form the complex
number ``x_{2i} + i·x_{2i+1}``, turned by ``pos · base^(-2i/d_head)``. GPT-NeoX / LLaMA-HF pair
``(i, i + d_head/2)`` instead; the two differ only by a fixed permutation of the head dimensions:
permuting the rows of ``W_q`` and ``W_k`` turns one model into the other, so both pairings span the
same models (a given seed draws a different one of them). Neighbours let the rotation be one
complex multiplication over a view of q or k: a single pass over memory, where the real-valued
form (``x·cos + swap(x)·sin``) needs a copy and three more passes and cost RoPE twice as much on CPU.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.positions import Positions

ROPE_BASE = 10000.0


class RotaryAngles(nn.Module):
    """Unit complex numbers ``exp(i · pos · base^(-2i/width))``, cached for ``max_len`` positions,
    computed beyond.

    The cache is a real buffer ``(max_len, width/2, 2)`` (real and imaginary parts): ``Module.to(dtype)``
    casts a complex buffer to a real dtype by dropping its imaginary part, which would silently turn
    every rotation into a scaling. The frequencies stay a float64 attribute, not a buffer, so a
    half-precision model still turns positions beyond the cache by exact angles."""

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE):
        super().__init__()
        if width % 2:
            raise ValueError(f"rotary width must be even, got {width}")
        self.inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # (width/2,)
        turns = self._turns(torch.arange(max_len), torch.get_default_dtype())  # (max_len, width/2) complex
        self.register_buffer("turns", torch.view_as_real(turns), persistent=False)  # (max_len, width/2, 2)
        self.max_len = max_len

    def rows(self, positions: Positions) -> torch.Tensor:
        """Complex turns ``(L, width/2)`` of 1-D ``positions``, in the cache's precision (at least float32)."""
        if positions.max_position < self.max_len:
            cached = self.turns[positions.ids]  # (L, width/2, 2), in the model's dtype
            return torch.view_as_complex(cached.to(torch.promote_types(cached.dtype, torch.float32)))
        return self._turns(positions.ids, self.turns.dtype)

    def _turns(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``(L,)`` positions -> ``(L, width/2)`` unit complex numbers, complex64 or (for float64) complex128."""
        angle = positions.to(torch.float64)[:, None] * self.inv_freq.to(positions.device)  # (L, w/2)
        complex_dtype = torch.promote_types(torch.promote_types(dtype, torch.float32), torch.complex64)
        return torch.polar(torch.ones_like(angle), angle).to(complex_dtype)

    @staticmethod
    def turn(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (…, L, width)`` by ``rows (L, width/2)``: each pair ``(x_2i, x_2i+1)`` turns by its angle.

        Half precision is rotated in float32 (complex numbers need it) and returned in its own dtype."""
        exact = torch.promote_types(x.dtype, torch.float32)
        pairs = torch.view_as_complex(x.to(exact).unflatten(-1, (-1, 2)))  # (…, L, width/2)
        turned = pairs * rows.to(pairs.dtype)  # (…, L, width/2)
        return torch.view_as_real(turned).flatten(-2).to(x.dtype)  # (…, L, width)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` (``(…, L, width)``) by 1-D ``positions``, one row lookup for both."""
        rows = self.rows(positions)  # (L, width/2)
        return self.turn(q, rows), self.turn(k, rows)


class Rope(PositionalEncoding):
    """RoPE over the whole head dimension. Family option: ``base`` (default 10000)."""

    hook = "qk"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.angles = RotaryAngles(d_model // n_heads, max_len, base)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        return self.angles(q, k, positions)


register("rope")(Rope)
