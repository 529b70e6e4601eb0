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

    The bias depends on ``j − i`` alone, so it is given by :meth:`relative_bias`; on contiguous
    positions attention reads one ``(h, 2L − 1)`` table as views and never builds the ``(h, L, L)`` bias.
    The penalties of offsets within ``max_len`` are computed once, like a sinusoid table, and
    looked up; offsets beyond are computed.
    """

    hook = "logits"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False):
        super().__init__(d_model, n_heads, max_len, causal)
        slopes = torch.tensor(alibi_slopes(n_heads))
        self.register_buffer("slopes", slopes, persistent=False)  # (h,)
        offsets = torch.arange(1 - max_len, max_len)  # j − i
        self.register_buffer("penalties", self._penalties(slopes, offsets), persistent=False)  # (h, 2·max_len − 1)

    @staticmethod
    def _penalties(slopes: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """``−m_h·|offset|``: ``(h, *offsets.shape)``."""
        distance = offsets.abs().to(slopes.dtype)
        return -slopes.view(-1, *[1] * offsets.dim()) * distance

    def relative_bias(self, offsets: torch.Tensor, max_distance: int) -> torch.Tensor:
        if max_distance < self.max_len:
            return self.penalties[:, offsets + self.max_len - 1]  # (h, *offsets.shape)
        return self._penalties(self.slopes, offsets)


register("alibi")(Alibi)
register("alibi_randomized", randomized=True)(Alibi)
