"""ALiBi (Press et al., 2022): a per-head linear *penalty* on distance, ``B[h, i, j] = −m_h·|i − j|``.

The article writes ``+ m·|i−j|``; that would reward distant tokens. The paper subtracts. Slopes are
the geometric sequence starting at ``2^(−8/h)``; for head counts that are not powers of two the
paper's reference code takes the slopes of the nearest lower power of two and fills the rest with
every other slope of the next power of two.
"""

from __future__ import annotations

import math

import torch

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register


def alibi_slopes(n_heads: int) -> list[float]:
    """The paper's slopes, e.g. 8 heads -> 1/2, 1/4, …, 1/256."""

    def geometric(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return geometric(n_heads)
    lower = 2 ** math.floor(math.log2(n_heads))
    return geometric(lower) + alibi_slopes(2 * lower)[0::2][: n_heads - lower]


class Alibi(PositionalEncoding):
    """Symmetric distance penalty (the same form serves causal and bidirectional models).

    The bias depends on ``j − i`` alone, so it is given as a ``(h, 2L − 1)`` table
    (:meth:`relative_bias`); attention reads it as views and never builds the ``(h, L, L)`` bias.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False):
        super().__init__(d_model, n_heads, max_len, causal)
        slopes = torch.tensor(alibi_slopes(n_heads))
        self.register_buffer("slopes", slopes, persistent=False)  # (h,)

    def relative_bias(self, k_len: int) -> torch.Tensor:
        offsets = torch.arange(1 - k_len, k_len, device=self.slopes.device)  # j − i
        return -self.slopes[:, None] * offsets.abs().to(self.slopes.dtype)  # (h, 2k − 1)

    def attention_bias(self, q_len: int, k_len: int) -> torch.Tensor:
        return self.attention_bias_block(k_len - q_len, k_len, k_len)  # (h, q, k)


register("alibi")(Alibi)
