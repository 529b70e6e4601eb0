"""``bucket_sort``: write the input's symbols in increasing order: ``10204112 -> 00111224``.

Ruoss et al. 2023's context-sensitive task (``tasks/cs/bucket_sort.py`` of their repository): strings
over 5 symbols (their default), an answer as long as the input. Answer token ``j`` is the symbol
whose running count first exceeds ``j``: the model counts each symbol over the whole input, and
where a bucket ends moves with the length. The protocol is :mod:`posbench.tasks.chomsky`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.chomsky import ChomskyTask
from posbench.tasks.registry import register


@register("bucket_sort")
@dataclass(frozen=True)
class BucketSort(ChomskyTask):
    kind = "structured"

    n_symbols: int = 5

    def string_and_answer(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        string = rng.integers(0, self.n_symbols, size=length)
        return string, np.sort(string)
