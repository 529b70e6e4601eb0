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
    """cos/sin of ``pos · base^(-2i/width)``, cached for ``max_len`` positions, computed beyond.

    The sine is stored with the rotation's sign folded in (``−sin`` on the first half), so a
    rotation is ``x·cos + swap_halves(x)·signed_sin``: no negation pass on the hot path. The rows
    for the last positions tensor are kept, so the q and k of every layer share one lookup.
    """

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE):
        super().__init__()
        if width % 2:
            raise ValueError(f"rotary width must be even, got {width}")
        inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # (width/2,)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        cos, signed_sin = self._angles(torch.arange(max_len))
        self.register_buffer("cos", cos, persistent=False)  # (max_len, width)
        self.register_buffer("signed_sin", signed_sin, persistent=False)
        self.max_len = max_len
        self._rows: tuple[torch.Tensor, tuple, tuple[torch.Tensor, torch.Tensor]] | None = None

    def rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin ``(L, width)`` of ``positions (L,)``; the same tensor object (unchanged
        since, and in the same inference mode) gets the same rows back without a lookup."""
        version = None if positions.is_inference() else positions._version  # inference tensors have none
        state = (version, torch.is_inference_mode_enabled())
        if self._rows is not None and self._rows[0] is positions and self._rows[1] == state:
            return self._rows[2]
        if positions.numel() and int(positions.max()) < self.max_len:
            rows = self.cos[positions], self.signed_sin[positions]
        else:
            rows = self._angles(positions)
        self._rows = (positions, state, rows)
        return rows

    def _angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L,)`` positions -> cos and signed sin, each ``(L, width)``."""
        angle = positions.to(torch.float64)[:, None] * self.inv_freq.to(positions.device)  # (L, w/2)
        dtype = torch.get_default_dtype()
        cos = torch.cat([angle.cos(), angle.cos()], dim=-1)  # halves share a frequency
        signed_sin = torch.cat([-angle.sin(), angle.sin()], dim=-1)
        return cos.to(dtype), signed_sin.to(dtype)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (…, L, width)`` by ``positions (L,)``: pairs ``(x_i, x_{i+w/2})`` turn by their angle."""
        cos, signed_sin = (rows.to(x.dtype) for rows in self.rows(positions))  # (L, width)
        first, second = x.chunk(2, dim=-1)
        swapped = torch.cat([second, first], dim=-1)  # (…, L, width)
        return x * cos + swapped * signed_sin


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
