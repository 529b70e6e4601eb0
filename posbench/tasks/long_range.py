"""``long_range``: a genome-like classification over the alphabet ``A C G T``.

Each sequence hides two fixed motifs exactly once in random background. The label (4 classes)
is which motif comes first *and* whether they are at least ``far_distance`` letters apart:
``label = 2·[A before B] + [distance ≥ far_distance]``. Spotting a motif needs the order of its
own letters; the label needs the order and distance of two far-apart spots. Without position
(``none``) a bidirectional model sees a bag of letters and sits at chance (25 %).
``far_distance`` is a fixed number of letters (32, half the training length), not a share of the
sequence: a longer evaluation asks the question the model was trained on, in a longer sequence
(an earlier version said "half the sequence", so the label itself changed with the evaluation
length and beyond 1× no model could know the rule).
Classes are balanced by drawing the label first and then placing the motifs to match it; a fixed
evaluation set is balanced only up to sampling, and its majority class (the accuracy's chance
level) changes with the evaluation length, since each length draws its own set.

Test and validation sets come from generators of their own (:func:`posbench.tasks.base.eval_rng`);
a generated example can coincide with another split's by chance. Budgets and learning rates are
chosen on validation, never on test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import Batch, Task, eval_rng
from posbench.tasks.registry import register

ALPHABET = "ACGT"
MOTIFS = ("GATTAC", "CCTGAG")  # A, B


def to_ids(letters: str) -> np.ndarray:
    return np.array([ALPHABET.index(c) for c in letters])


def count_occurrences(sequence: np.ndarray, motif: np.ndarray) -> int:
    windows = np.lib.stride_tricks.sliding_window_view(sequence, len(motif))  # (n-m+1, m)
    return int((windows == motif).all(axis=1).sum())


@register("long_range")
@dataclass(frozen=True)
class LongRange(Task):
    kind = "long"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    causal: ClassVar[bool] = False

    train_length: int = 64
    min_length: int = 40
    far_distance: int = 32
    steps: int = 600
    eval_examples: int = 256
    eval_batch_size: int = 64

    def model_options(self) -> dict:
        return {"vocab_size": len(ALPHABET), "n_classes": 4, "causal": False}

    def valid_length(self, length: int) -> int:
        """Long enough for a far pair: ``far_distance`` plus a motif."""
        return max(length, self.far_distance + len(MOTIFS[0]))

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, int]:
        """A sequence of ``length`` letters holding each motif exactly once, and its label."""
        motif_a, motif_b = (to_ids(m) for m in MOTIFS)
        width = len(motif_a)
        a_first, far = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        low, high = (self.far_distance, length - width) if far else (width, self.far_distance - 1)
        while True:
            distance = int(rng.integers(low, high + 1))
            first = int(rng.integers(0, length - width - distance + 1))
            sequence = rng.integers(0, len(ALPHABET), size=length)
            sequence[first : first + width] = motif_a if a_first else motif_b
            sequence[first + distance : first + distance + width] = motif_b if a_first else motif_a
            if count_occurrences(sequence, motif_a) == count_occurrences(sequence, motif_b) == 1:
                return sequence, 2 * a_first + far

    def _batch(self, rng: np.random.Generator, length: int, count: int) -> Batch:
        sequences, labels = zip(*(self.example(rng, length) for _ in range(count)))
        return Batch(torch.from_numpy(np.stack(sequences)), torch.tensor(labels)[:, None])  # (B, n), (B, 1)

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """One length per batch: a bidirectional model has no padding mask."""
        length = self.valid_length(int(rng.integers(self.min_length, self.train_length + 1)))
        return self._batch(rng, length, batch_size)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        rng = eval_rng(length, split)
        for start in range(0, self.eval_examples, self.eval_batch_size):
            yield self._batch(rng, length, min(self.eval_batch_size, self.eval_examples - start))
