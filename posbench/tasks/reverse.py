"""``reverse``: read ``n`` symbols, a separator, then write them last to first: ``x SEP reversed(x)``.

Output ``j`` must find input ``n+1-j``: a distance that changes with every step, which is what
makes reversal harder than copying for relative encodings."""

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

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        return symbols[::-1]
