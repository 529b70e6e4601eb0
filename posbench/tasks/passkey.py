"""``passkey``: a number hidden in filler, asked for at the end (Mohtashami & Jaggi 2023).

Sequence (token ids)::

    filler … KEY d_1 … d_m filler … QUERY d_1 … d_m

The filler is one fixed sentence of ``n_filler`` word tokens repeated from a random phase, like the
paper's "The grass is green. The sky is blue. …": it carries no information, so the only thing worth
attending to is the key, wherever it sits. Only the answer digits are scored: exact match needs all
``m`` right (guessing: 10^-m), token accuracy is per digit (chance 1/10).

The problem size ``length`` is the haystack — filler plus the key — and the model sees
``length + m`` positions. The key's *depth* is where it starts, as a share of the positions it could
start at (0: first, 1: just before the query). Training draws depths uniformly; an evaluation set
cycles through :data:`EVAL_DEPTHS` item by item (item ``i`` at ``EVAL_DEPTHS[i % 11]``), so the
pooled score weighs every depth equally and a depth × length map can be read from per-item results
(:meth:`Passkey.eval_depth`). Trained at ``train_length`` (64) and evaluated to 32× it (2,048
positions), this is the long-sequence question asked as retrieval: does the model find the key
beyond its training length, or only survive the length? The budget: 600 steps at 64 (what the arms
reach at 1× with it, and its cost: results/reference/NOTES.md (Lab notes)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.registry import register
from posbench.tasks.sequence import SequenceTask, prompt_then_answer

EVAL_DEPTHS = tuple(np.linspace(0.0, 1.0, 11))  # 0, 0.1, …, 1
DIGITS = 10


@register("passkey")
@dataclass(frozen=True)
class Passkey(SequenceTask):
    """Token ids: digits ``0 … 9``, filler words, ``KEY``, ``QUERY``, padding."""

    kind = "long"

    train_length: int = 64
    min_length: int = 16
    n_digits: int = 4
    n_filler: int = 5
    steps: int = 600
    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)

    @property
    def key_id(self) -> int:
        return DIGITS + self.n_filler

    @property
    def query_id(self) -> int:
        return self.key_id + 1

    @property
    def vocab_size(self) -> int:
        return self.query_id + 2  # … QUERY, padding

    def sequence_length(self, length: int) -> int:
        return length + self.n_digits

    def valid_length(self, length: int) -> int:
        return max(length, self.n_digits + 1)

    @staticmethod
    def eval_depth(item: int) -> float:
        """The key's depth in item ``item`` of any evaluation set."""
        return float(EVAL_DEPTHS[item % len(EVAL_DEPTHS)])

    def haystack(self, rng: np.random.Generator, length: int, depth: float, key: np.ndarray) -> np.ndarray:
        """``length`` filler tokens from a random phase with ``KEY key`` written at ``depth``."""
        phase = int(rng.integers(0, self.n_filler))
        sequence = DIGITS + (phase + np.arange(length)) % self.n_filler  # (length,) filler word ids
        marked = np.append(self.key_id, key)  # KEY d_1 … d_m
        start = round(depth * (length - len(marked)))
        sequence[start : start + len(marked)] = marked
        return sequence

    def example(self, rng: np.random.Generator, length: int, depth: float | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        key = rng.integers(0, DIGITS, size=self.n_digits)
        depth = float(rng.uniform()) if depth is None else depth
        prompt = np.append(self.haystack(rng, length, depth, key), self.query_id)
        return prompt_then_answer(prompt, key)

    def eval_example(self, rng: np.random.Generator, length: int, item: int) -> tuple[np.ndarray, np.ndarray]:
        return self.example(rng, length, self.eval_depth(item))
