"""``duplicate_string``: read ``n`` symbols, write them twice: ``s_1 … s_n -> s_1 … s_n s_1 … s_n``.

Ruoss et al. 2023's context-sensitive task (``tasks/cs/duplicate_string.py`` of their repository):
binary strings, an answer twice the input's length, no separator. Answer token ``j`` must find input
``j mod n``: where the second copy starts depends on the input's length, which the model has to
read off positions it never saw beyond 40. The protocol — layout, lengths, score — is
:mod:`posbench.tasks.chomsky`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.chomsky import ChomskyTask
from posbench.tasks.registry import register


@register("duplicate_string")
@dataclass(frozen=True)
class DuplicateString(ChomskyTask):
    kind = "structured"

    def answer_length(self, length: int) -> int:
        return 2 * length

    def string_and_answer(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        string = rng.integers(0, self.n_symbols, size=length)
        return string, np.concatenate([string, string])
