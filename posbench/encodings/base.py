"""The interface every positional encoding implements: three hooks, one per injection point.

A Transformer can learn position at three places, and every scheme in the catalogue uses one or
more of them:

1. input           ``x = E + P`` or ``x = [E ; P]``            -> :meth:`PositionalEncoding.inject`
2. query / key     rotate ``q`` and ``k`` by their position     -> :meth:`PositionalEncoding.rotate`
3. attention logit add ``B[h, i, j]`` to ``q·k / sqrt(d_head)``  -> :meth:`PositionalEncoding.attention_bias`

The base class implements each hook as "leave it alone", so a scheme overrides only the hooks it
uses and the model calls all three unconditionally. Widths live here too, because concatenation
changes them: the token embedding is ``token_width`` wide and the residual stream ``model_width``.
"""

from __future__ import annotations

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """Base class: no position information at any of the three injection points.

    Args:
        d_model: the width the user asked for (the token embedding width of an added encoding).
        n_heads: attention heads; logit biases are per head.
        max_len: the longest sequence the run will use, evaluation lengths included.
        causal: whether the model masks the future (T5 buckets differ for causal models).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False):
        super().__init__()
        _require_positive(d_model=d_model, n_heads=n_heads, max_len=max_len)
        self.d_model = d_model
        self.n_heads = n_heads
        self.max_len = max_len
        self.causal = causal

    # ----- widths --------------------------------------------------------------------------
    @property
    def token_width(self) -> int:
        """Width of the token embedding E that enters :meth:`inject`."""
        return self.d_model

    @property
    def model_width(self) -> int:
        """Width of the residual stream after :meth:`inject` (d + d_p for a naive concat)."""
        return self.d_model

    # ----- positions -----------------------------------------------------------------------
    def positions(self, seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Integer positions of a sequence: ``(L,)``; grid encodings return ``(L, 2)`` (row, col)."""
        return torch.arange(seq_len, device=device)

    # ----- the three hooks -----------------------------------------------------------------
    def inject(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Input hook: ``(B, L, token_width)`` -> ``(B, L, model_width)``."""
        return tokens

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Query/key hook: ``(..., L, d_head)`` -> same shape."""
        return x

    def attention_bias(self, q_len: int, k_len: int) -> torch.Tensor | None:
        """Logit hook: ``(n_heads, q_len, k_len)`` float, or ``None`` when the scheme adds none."""
        return None

    # ----- the logit hook in pieces, for attention that never holds the whole (h, L, L) bias ---------
    def relative_bias(self, k_len: int) -> torch.Tensor | None:
        """``(n_heads, 2·k_len − 1)`` table with ``B[h, i, j] = table[h, j − i + k_len − 1]``, for a bias
        that depends on the offset ``j − i`` alone; ``None`` otherwise (the default).

        An encoding that gives it gets :meth:`attention_bias_block` (and may build
        :meth:`attention_bias`) from it, and attention reads its blocks as strided views.
        """
        return None

    def attention_bias_block(self, q_start: int, q_stop: int, k_len: int) -> torch.Tensor | None:
        """Bias rows of query positions ``q_start … q_stop − 1`` against keys ``0 … k_len − 1``:
        ``(n_heads, q_stop − q_start, k_len)``; ``None`` when the scheme adds no bias.

        ``attention_bias(q_len, k_len)`` equals ``attention_bias_block(k_len − q_len, k_len, k_len)``.
        The default gathers from :meth:`relative_bias` when there is one, and otherwise slices the
        public hook, which builds ``k_len − q_start`` rows: a general bias should override this to
        build only the rows asked for.
        """
        table = self.relative_bias(k_len)
        if table is not None:
            i = torch.arange(q_start, q_stop, device=table.device)
            j = torch.arange(k_len, device=table.device)
            return table[:, j[None, :] - i[:, None] + k_len - 1]  # (h, q, k)
        bias = self.attention_bias(k_len - q_start, k_len)
        return None if bias is None else bias[:, : q_stop - q_start]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}"


def _require_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
