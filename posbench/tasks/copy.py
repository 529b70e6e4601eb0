"""``copy``: read ``n`` symbols, a separator, then write them again: ``x SEP x``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.registry import register
from posbench.tasks.sequence import FREE_RUNNING_METRICS, SequenceTask, prompt_then_answer


@register("copy")
@dataclass(frozen=True)
class Copy(SequenceTask):
    """Token ids: symbols ``0 … n_symbols-1``, ``SEP = n_symbols``, padding."""

    kind = "structured"
    metrics: ClassVar[tuple[str, ...]] = FREE_RUNNING_METRICS

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 2

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        """The answer the model must write after the separator."""
        return symbols

    def sequence_length(self, length: int) -> int:
        return 2 * length

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        symbols = rng.integers(0, self.n_symbols, size=length)
        prompt = np.append(symbols, self.n_symbols)  # x SEP
        return prompt_then_answer(prompt, self.transform(symbols))
