"""FIRE (Li et al. 2024): the logit bias is a small MLP of the log distance, normalised by the
query's own position, ``B[h, i, j] = f_θ(ψ(i − j) / ψ(max(L, i)))_h`` with ``ψ(x) = log(c·x + 1)``.

Because the normaliser depends on ``i``, the bias is *not* a function of ``i − j`` alone: FIRE has no
``(h, 2L − 1)`` table and goes through attention's general-bias path. Learned: the MLP (1 → hidden →
heads, ReLU), ``c`` and the threshold ``L`` (both used as absolute values, so they stay positive);
bidirectional models read ``|i − j|``.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.positions import Positions


class Fire(PositionalEncoding):
    """Family options: ``hidden`` (32), ``init_c`` (0.1), ``init_threshold`` (512)."""

    hook = "logits"
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 hidden: int = 32, init_c: float = 0.1, init_threshold: float = 512.0):
        super().__init__(d_model, n_heads, max_len, causal)
        self.hidden = hidden
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.threshold = nn.Parameter(torch.tensor(init_threshold))

    def attention_bias(self, query: Positions, key: Positions) -> torch.Tensor:
        c = self.c.abs()
        i = query.ids.to(c.dtype)[:, None]  # (q, 1)
        distance = i - key.ids.to(c.dtype)[None, :]  # (q, k)
        distance = distance.abs() if not self.causal else distance.clamp(min=0)  # future keys are masked anyway
        normaliser = torch.log1p(c * torch.maximum(i, self.threshold.abs()))  # (q, 1)
        features = torch.log1p(c * distance) / normaliser  # (q, k) in [0, 1] up to the threshold
        return self.mlp(features[..., None]).movedim(-1, 0)  # (h, q, k)

    def bias_flops(self, q_len: int, k_len: int, mode: str) -> int:
        """Per (query, key): the ``i − j`` subtraction and the MLP's two matmuls (``2·hidden`` and
        ``2·hidden·h``); multiplies by the scalar ``c`` are free under the convention. The backward:
        twice the matmuls, two multiplies per (query, key) and one per query (``c``'s gradient through
        the distance and the normaliser)."""
        pairs, matmuls = q_len * k_len, 2 * self.hidden * (1 + self.n_heads) * q_len * k_len
        forward = pairs + matmuls
        return forward if mode == "infer" else forward + 2 * matmuls + 2 * pairs + q_len

    def bias_build_elements(self, q_len: int, k_len: int) -> int:
        """The normalised distances ``(q, k)`` and the MLP's hidden layer before and after its ReLU
        ``(q, k, hidden)`` each: alive together while the ReLU runs."""
        return q_len * k_len * (1 + 2 * self.hidden)


register("fire")(Fire)
