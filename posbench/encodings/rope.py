"""Rotary position embedding (RoFormer, Su et al. 2021): rotate q and k by an angle per position.

Pairing convention: *halves* (GPT-NeoX / LLaMA): dimension ``i`` of a head is paired with dimension
``i + d_head/2`` and turned by ``pos · base^(-2i/d_head)``. RoFormer's paper pairs neighbours
``(2i, 2i+1)`` instead; the two differ only by a fixed permutation of the head dimensions applied to
both q and k, so every logit ``q·k`` is the same. Halves avoid a strided view on the hot path.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register

ROPE_BASE = 10000.0


class RotaryAngles(nn.Module):
    """cos/sin of ``pos · base^(-2i/width)``, cached for ``max_len`` positions, computed beyond."""

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE):
        super().__init__()
        if width % 2:
            raise ValueError(f"rotary width must be even, got {width}")
        inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # (width/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        cos, sin = self._angles(torch.arange(max_len))
        self.register_buffer("cos", cos, persistent=False)  # (max_len, width)
        self.register_buffer("sin", sin, persistent=False)
        self.max_len = max_len

    def _angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle = positions.to(torch.float64)[:, None] * self.inv_freq.to(positions.device)  # (L, w/2)
        angle = torch.cat([angle, angle], dim=-1)  # (L, width): halves share a frequency
        dtype = torch.get_default_dtype()
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (…, L, width)`` by ``positions (L,)``."""
        if positions.numel() and int(positions.max()) < self.max_len:
            cos, sin = self.cos[positions], self.sin[positions]  # (L, width)
        else:
            cos, sin = self._angles(positions)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        first, second = x.chunk(2, dim=-1)
        rotated_half = torch.cat([-second, first], dim=-1)  # (…, L, width)
        return x * cos + rotated_half * sin


class Rope(PositionalEncoding):
    """RoPE over the whole head dimension. Family option: ``base`` (default 10000)."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.angles = RotaryAngles(d_model // n_heads, max_len, base)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.angles(x, positions)


register("rope")(Rope)
