"""``reverse``: read ``n`` symbols, a separator, then write them last to first: ``x SEP reversed(x)``.

Output ``j`` must find input ``n+1-j``: a distance that changes with every step, which is what
makes reversal harder than copying for relative encodings.

The budget, 2,000 steps, is one at which an arm is past 95 % in distribution, so numbers beyond the
training length compare trained models (the measurements behind it: results/reference/NOTES.md (Lab notes))."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.copy import Copy
from posbench.tasks.registry import register


@register("reverse")
@dataclass(frozen=True)
class Reverse(Copy):
    kind = "structured"

    steps: int = 2000

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        return symbols[::-1]
