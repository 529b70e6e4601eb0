"""``selective_copy``: copy the symbols of a sequence, leaving out its blanks (Gu & Dao 2023; CoPE's
selective copy, Golovneva et al. 2024).

Sequence (token ids)::

    x_1 BLANK BLANK x_2 BLANK x_3 … SEP x_1 x_2 x_3 …

``length`` input positions, of which ``round(density · length)`` (at least one) hold symbols at
random places and the rest ``BLANK``; after ``SEP`` the model writes the symbols in order. The
answer token ``k`` is the ``k``-th symbol, whose position depends on how many blanks came before
it: a position by content, what CoPE's paper compares encodings on. Only the answer is
scored: exact match needs all of it right, token accuracy is per symbol (chance: the majority
symbol's share, about ``1 / n_symbols``).

16 symbols as in Gu & Dao's; 32 positions half blank for training, a length a ``tiny`` model on one
core copies in a short run (the papers use hundreds to thousands, with larger models), evaluated
to 8× it. 600 steps, the sequence tasks' default budget, untuned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.registry import register
from posbench.tasks.sequence import FREE_RUNNING_METRICS, SequenceTask, prompt_then_answer


@register("selective_copy")
@dataclass(frozen=True)
class SelectiveCopy(SequenceTask):
    """Token ids: symbols ``0 … n_symbols-1``, ``BLANK``, ``SEP``, padding."""

    kind = "structured"
    metrics: ClassVar[tuple[str, ...]] = FREE_RUNNING_METRICS

    train_length: int = 32
    min_length: int = 2
    n_symbols: int = 16
    density: float = 0.5

    def __post_init__(self):
        if not 0 < self.density <= 1:
            raise ValueError(f"selective_copy: density must be in (0, 1], got {self.density}")

    @property
    def blank_id(self) -> int:
        return self.n_symbols

    @property
    def sep_id(self) -> int:
        return self.n_symbols + 1

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 3

    def n_copied(self, length: int) -> int:
        """How many of ``length`` positions hold symbols."""
        return max(1, round(self.density * length))

    def sequence_length(self, length: int) -> int:
        return length + self.n_copied(length)

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        symbols = rng.integers(0, self.n_symbols, size=self.n_copied(length))
        sequence = np.full(length, self.blank_id)
        sequence[np.sort(rng.choice(length, size=len(symbols), replace=False))] = symbols
        return prompt_then_answer(np.append(sequence, self.sep_id), symbols)
