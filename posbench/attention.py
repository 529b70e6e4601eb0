"""The one attention function every encoding goes through.

Attention is always ``torch.nn.functional.scaled_dot_product_attention``: encodings that add no
logit bias use its ``is_causal`` fast path, the others pass their bias (with the causal mask folded
in, built once per forward pass) as a float mask. Never ``nn.MultiheadAttention``, whose fused paths
hide work from FLOP counters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def logit_mask(bias: torch.Tensor | None, causal: bool) -> torch.Tensor | None:
    """Fold the causal mask into a ``(h, q, k)`` bias; ``None`` stays ``None`` (``is_causal`` handles it)."""
    if bias is None or not causal:
        return bias
    q_len, k_len = bias.shape[-2:]
    future = torch.ones(q_len, k_len, dtype=torch.bool, device=bias.device).triu(k_len - q_len + 1)
    return bias.masked_fill(future, float("-inf"))  # (h, q, k)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
           causal: bool) -> torch.Tensor:
    """``q, k, v (B, h, L, d_head)`` and a float ``mask (h, L, L)`` from :func:`logit_mask` -> ``(B, h, L, d_head)``."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype))
