"""T5 relative bias (Raffel et al., 2020): a learned scalar per (distance bucket, head) added to the
attention logits, shared across layers. T5 does not concatenate anything to its inputs.

Buckets follow the reference implementation: half the buckets are exact distances, the rest grow
logarithmically up to ``max_distance`` and saturate; bidirectional models spend half of them on each
direction, causal models all of them on the past.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool,
                             num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """``relative_position = j − i`` (key minus query) -> bucket index in ``[0, num_buckets)``."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class T5Bias(PositionalEncoding):
    """Family options: ``num_buckets`` (32), ``max_distance`` (128); bucketing follows ``causal``."""

    hook = "logits"
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 num_buckets: int = 32, max_distance: int = 128):
        super().__init__(d_model, n_heads, max_len, causal)
        fewest = 2 if causal else 4  # one exact distance per direction
        if not isinstance(num_buckets, int) or num_buckets < fewest:
            raise ValueError(f"num_buckets must be an integer >= {fewest} (one exact distance per "
                             f"direction at least), got {num_buckets!r}")
        exact = num_buckets // (1 if causal else 2) // 2  # distances with a bucket each, per direction
        if not isinstance(max_distance, int) or max_distance <= exact:
            raise ValueError(f"max_distance must be an integer > {exact}, the exact distances of {num_buckets} "
                             f"buckets, got {max_distance!r}")
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bias = nn.Embedding(num_buckets, n_heads)  # (buckets, h)
        nn.init.normal_(self.bias.weight, std=0.02)
        offsets = torch.arange(-max_distance, max_distance + 1)  # every bucket saturates from ±max_distance on
        self.register_buffer("bucket_of_offset", relative_position_bucket(offsets, not causal, num_buckets,
                                                                          max_distance), persistent=False)

    def relative_bias(self, offsets: torch.Tensor, max_distance: int) -> torch.Tensor:
        """The bucket of each offset read from a table of the offsets ±``max_distance`` (the family option),
        built once: a decode step's row is a gather, where the bucket rule is a dozen passes over every key."""
        if max_distance > self.max_distance:  # the host bound says some offsets lie beyond the table
            offsets = offsets.clamp(-self.max_distance, self.max_distance)
        buckets = self.bucket_of_offset[offsets + self.max_distance]
        return self.bias.weight.t()[:, buckets]  # (h, *offsets.shape)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, causal={self.causal}, num_buckets={self.num_buckets}"


register("t5")(T5Bias)
