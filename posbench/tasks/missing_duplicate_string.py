"""``missing_duplicate_string``: a string written twice with one symbol blanked out; say the symbol:
``0110 0 MISSING 10 -> 1``.

Ruoss et al. 2023's context-sensitive task (``tasks/cs/missing_duplicate_string.py`` of their
repository), with their ids for binary strings: symbols ``0, 1``, ``MISSING = 2``, ``FILL = 3``. An
input of ``length`` is a string of ``length // 2`` written twice, one of its ``2 · (length // 2)``
places (uniformly drawn) replaced by ``MISSING``, and ``FILL`` at the end when ``length`` is odd; the
answer is one token, the symbol that was replaced, so ``exact_match`` equals ``token_accuracy``. The
model must find the blank's twin half a string away: a distance that grows with the length. Length 1
has no string to write twice: as in the paper, its item is the constant ``1 -> 1``. The protocol is
:mod:`posbench.tasks.chomsky`'s, but for the budget: 10,000 steps, five times the others', since one
answer token per string gives a step little to learn from — in a one-seed pilot (``tiny``, RoPE) the
model was still at chance at 40 after 2,000 steps and past 95 % after 10,000.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.chomsky import ChomskyTask
from posbench.tasks.registry import register


@register("missing_duplicate_string")
@dataclass(frozen=True)
class MissingDuplicateString(ChomskyTask):
    """Token ids: symbols ``0 … n_symbols-1``, ``MISSING``, ``FILL``, ``EMPTY``, padding."""

    kind = "structured"

    steps: int = 10_000

    @property
    def missing_id(self) -> int:
        return self.n_symbols

    @property
    def fill_id(self) -> int:
        return self.n_symbols + 1

    @property
    def input_ids(self) -> int:
        return self.n_symbols + 2

    def answer_length(self, length: int) -> int:
        return 1

    def string_and_answer(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        if length == 1:
            return np.array([1]), np.array([1])
        half = rng.integers(0, self.n_symbols, size=length // 2)
        twice = np.concatenate([half, half])
        blank = rng.integers(0, len(twice))
        answer = twice[blank : blank + 1].copy()
        twice[blank] = self.missing_id
        return np.concatenate([twice, np.full(length % 2, self.fill_id)]), answer
