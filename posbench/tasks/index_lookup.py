"""``index_lookup``: read ``n`` symbols, then answer queries "which symbol is at position q?".

Sequence: ``x_0 … x_{n-1} SEP q_1 a_1 … q_k a_k`` where each ``q`` is an index token and
``a = x_q``. Only the answers are scored; exact match needs all ``k`` right.

Queried positions stay below the training length at every evaluation length: index tokens for
positions never trained would be untrained embeddings for every encoding and decide nothing. A
longer evaluation therefore asks the same kind of question in a longer sequence, and the index
must still be found by its absolute position, the row of the guidance on precise position.

The budget, 1,200 steps, is one at which an arm is past 95 % in distribution, so numbers beyond the
training length compare trained models (the measurements behind it: results/reference/NOTES.md (Lab notes)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.base import IGNORE
from posbench.tasks.registry import register
from posbench.tasks.sequence import SequenceTask, prompt_then_answer


@register("index_lookup")
@dataclass(frozen=True)
class IndexLookup(SequenceTask):
    """Token ids: symbols, ``SEP``, one index token per trained position, padding."""

    kind = "structured"

    train_length: int = 24
    min_length: int = 4
    n_symbols: int = 16
    n_queries: int = 4
    steps: int = 1200

    @property
    def sep_id(self) -> int:
        return self.n_symbols

    def index_token(self, position: np.ndarray) -> np.ndarray:
        return self.n_symbols + 1 + position

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 1 + self.train_length + 1

    def sequence_length(self, length: int) -> int:
        return length + 2 * self.n_queries

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        symbols = rng.integers(0, self.n_symbols, size=length)
        queries = rng.integers(0, min(length, self.train_length), size=self.n_queries)
        pairs = np.stack([self.index_token(queries), symbols[queries]], axis=1).ravel()  # q_1 a_1 q_2 a_2 …
        inputs, targets = prompt_then_answer(np.append(symbols, self.sep_id), pairs)
        targets[length::2] = IGNORE  # the queries themselves are random: only answers are scored
        return inputs, targets
