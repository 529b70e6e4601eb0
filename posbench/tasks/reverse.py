"""``reverse``: read ``n`` symbols, a separator, then write them last to first: ``x SEP reversed(x)``.

Output ``j`` must find input ``n+1-j``: a distance that changes with every step, which is what
makes reversal harder than copying for relative encodings.

The budget, 2,000 steps (the earlier 600 left sinusoidal at 0.21 and RoPE at 0.56 exact match), is one
at which an arm is past 95 % in distribution (tiny, 3 seeds: sinusoidal at lr 0.009 0.969, RoPE at
0.003 0.919; about 33 s a seed on one core), so numbers beyond the training length compare trained
models."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.copy import Copy
from posbench.tasks.registry import register


@register
@dataclass(frozen=True)
class Reverse(Copy):
    name = "reverse"
    kind = "structured"

    steps: int = 2000

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        return symbols[::-1]
