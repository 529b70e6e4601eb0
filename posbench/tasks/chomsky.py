"""Ruoss et al. 2023's protocol for the Chomsky-hierarchy transduction tasks (``duplicate_string``,
``odds_first``, ``missing_duplicate_string``, ``bucket_sort``), shared here; each task only says what
its input string and its answer are.

The layout is the paper's encoder setting (``google-deepmind/randomized_positional_encodings``,
``experiments/utils.py``, ``make_model_with_empty_targets``, after Delétang et al. 2023): the input
string, then one ``EMPTY`` token per answer token, read by a bidirectional model that writes the
whole answer at the ``EMPTY`` positions at once::

    inputs   s_1 … s_n EMPTY … EMPTY
    targets  IGNORE …  a_1   … a_m

Nothing the model predicts is fed back, so teacher forcing and free running are the same thing here:
``exact_match`` is the free-running one. The headline is the paper's score, ``token_accuracy``: the
share of answer tokens right. The model's head scores every id of the vocabulary, where the paper's
scores only the answer's symbols: predicting ``EMPTY`` (or another non-symbol) is simply wrong.

Lengths, the paper's: a training batch is one length drawn uniformly from ``min_length …
train_length`` (1 … 40), as its ``UniformCurriculum`` draws one per batch; one length per batch also
means the bidirectional model never reads padding (the model has no padding mask). The paper
evaluates every length 1 … 500 on 512 strings each and scores the mean of the per-length accuracies
beyond the training length (:meth:`ChomskyTask.beyond_training`; its example script's slice starts at
42). posbench evaluates at multiples of
the training length (``eval_factors``), so the protocol is declared as factors of 40 that give
:data:`BEYOND_TRAINING`, ten evenly spaced lengths 41, 92, …, 500, whose plain mean estimates the
paper's mean over all 460; the training length itself is evaluated too (whether the arm learned).
At another ``train_length`` the same factors scale those lengths: the absolute sample is the
protocol's only at 40.

Sizes for the ``tiny`` model on one core: 128 strings per length (the paper: 512), since the ten sets
reach 1,500 positions (``duplicate_string`` at 500) and their cost grows with the square of the
length, while the headline pools every answer token of a set; evaluation batches of 32, half the
sequence tasks' 64, for the same reason (memory at 1,500 positions). Training: batches of 32
(the paper: 128) for 2,000 steps, the budget at which ``reverse``, the nearest measured relative,
is past 95 % in distribution; ``missing_duplicate_string`` has a budget of its own. Whether a
budget teaches a task in distribution is a pilot's to say (results/reference/NOTES.md, Lab notes):
until one does, a task's numbers beyond 40 say nothing about extrapolation, and the in-distribution
gate reads its arms as not learned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.base import IGNORE, Batch
from posbench.tasks.sequence import SequenceTask

TRAIN_LENGTH = 40  # the paper's longest training string
BEYOND_TRAINING = tuple(range(41, 501, 51))  # 41, 92, …, 500: the declared sample of the paper's 41 … 500
EVAL_FACTORS = (1.0, *(n / TRAIN_LENGTH for n in BEYOND_TRAINING))


@dataclass(frozen=True)
class ChomskyTask(SequenceTask):
    """Token ids: the input string's ids (``0 … input_ids-1``), ``EMPTY``, padding."""

    metrics: ClassVar[tuple[str, ...]] = ("token_accuracy", "exact_match")
    causal: ClassVar[bool] = False

    train_length: int = TRAIN_LENGTH
    eval_factors: tuple[float, ...] = EVAL_FACTORS
    steps: int = 2000
    n_symbols: int = 2  # the paper's binary strings
    eval_examples: int = 128
    eval_batch_size: int = 32

    def __post_init__(self):
        if not 1 <= self.min_length <= self.train_length:
            raise ValueError(f"{self.name}: min_length must lie in 1 … train_length ({self.train_length}); "
                             f"got {self.min_length}")
        if self.n_symbols < 2:
            raise ValueError(f"{self.name}: n_symbols must be at least 2; got {self.n_symbols}")

    @property
    def input_ids(self) -> int:
        """Ids an input string is made of: the symbols, unless a task marks more."""
        return self.n_symbols

    @property
    def empty_id(self) -> int:
        return self.input_ids

    @property
    def vocab_size(self) -> int:
        return self.input_ids + 2  # + EMPTY + padding

    def model_options(self) -> dict:
        return {"vocab_size": self.vocab_size, "causal": False}

    def answer_length(self, length: int) -> int:
        """Answer tokens for an input string of ``length``."""
        return length

    def sequence_length(self, length: int) -> int:
        return length + self.answer_length(length)

    def string_and_answer(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        """An input string ``(length,)`` and its answer ``(answer_length,)``: the task's definition."""
        raise NotImplementedError

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        string, answer = self.string_and_answer(rng, length)
        inputs = np.concatenate([string, np.full(len(answer), self.empty_id)])
        targets = np.concatenate([np.full(len(string), IGNORE), answer])
        return inputs, targets

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        length = int(rng.integers(self.min_length, self.train_length + 1))
        return self.collate([self.example(rng, length) for _ in range(batch_size)])

    def beyond_training(self, accuracy_by_length: Mapping[int, float]) -> float:
        """The paper's score: the mean of per-length accuracies over the evaluated lengths beyond
        ``train_length`` (the training length's own row left out)."""
        beyond = [value for length, value in accuracy_by_length.items() if length > self.train_length]
        if not beyond:
            raise ValueError(f"{self.name}: no accuracy beyond train_length ({self.train_length}); "
                             f"evaluated: {', '.join(map(str, accuracy_by_length))}")
        return float(np.mean(beyond))
