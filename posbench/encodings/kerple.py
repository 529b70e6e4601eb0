"""KERPLE (Chi et al. 2022), logarithmic variant: a learned, conditionally positive definite kernel of
distance as the logit bias, ``B[h, i, j] = −r1_h · log(1 + r2_h · |i − j|)``.

Two scalars per head, shared by all layers (like T5's buckets). ``r1, r2`` must stay positive for the
kernel to be a penalty; they are clamped at ``min_value`` in every call. Initialised ``U(0, 2)`` and
``U(0, 1)``: a spread of decay rates across heads, as ALiBi's slopes give.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register


class KerpleLog(PositionalEncoding):
    """Family option: ``min_value`` (0.01), the clamp that keeps ``r1, r2`` positive."""

    hook = "logits"
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, min_value: float = 0.01):
        super().__init__(d_model, n_heads, max_len, causal)
        self.min_value = min_value
        self.r1 = nn.Parameter(torch.rand(n_heads) * 2)  # (h,) strength
        self.r2 = nn.Parameter(torch.rand(n_heads))  # (h,) distance scale

    def relative_bias(self, offsets: torch.Tensor, max_distance: int) -> torch.Tensor:
        shape = (-1, *[1] * offsets.dim())  # a head axis in front of the offsets
        r1, r2 = self.r1.clamp(min=self.min_value).view(shape), self.r2.clamp(min=self.min_value).view(shape)
        return -r1 * torch.log1p(r2 * offsets.abs().to(r2.dtype))  # (h, *offsets.shape)

    def bias_flops(self, q_len: int, k_len: int, mode: str) -> int:
        """Two multiplies per entry of the ``(h, 2k − 1)`` table; in training, their gradients again
        (one multiply each for r1's and r2's gradient, one for the chain through the log)."""
        table = self.n_heads * (2 * k_len - 1)
        return 2 * table if mode == "infer" else 5 * table


register("kerple")(KerpleLog)
