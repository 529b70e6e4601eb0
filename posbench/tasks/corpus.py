"""Character-level language modelling: the shared windows, vocabulary and evaluation.

The vocabulary is the set of characters in the training split, plus ``UNK`` (id 0) for characters
that only the test split has. The last ``VALIDATION_FRACTION`` of the training split is held out as
the validation split: training draws random windows of ``train_length`` characters from the rest
only, so no training window reaches a validation character. Budgets and learning rates are chosen
on validation, never on test. Evaluation at length ``m`` reads ``eval_chars // m`` windows of ``m``
characters spread evenly over the test (or validation) split, so every length is scored on about
the same number of characters. The metric is bits per character over every position of a window
(as in the ALiBi paper's extrapolation tests); its chance level is the unigram cross-entropy under
the training text's character frequencies with add-one smoothing over the vocabulary,
``p(c) = (n_c + 1) / (N + V)``, so a character training never saw (``UNK``) costs a finite amount.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import Batch, Task, check_split

UNK = 0
VALIDATION_FRACTION = 0.05  # of the training split, its end: a class constant, so config hashes stay as they were


@dataclass(frozen=True)
class Corpus:
    train: np.ndarray  # (N_train,) character ids
    test: np.ndarray  # (N_test,) character ids
    vocab_size: int


def encode_corpus(train_text: str, test_text: str) -> Corpus:
    train_codes, test_codes = (np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32) for t in (train_text, test_text))
    alphabet = np.unique(train_codes)  # sorted code points of the training split

    def encode(codes: np.ndarray) -> np.ndarray:
        slot = np.searchsorted(alphabet, codes).clip(max=len(alphabet) - 1)
        return np.where(alphabet[slot] == codes, slot + 1, UNK).astype(np.int64)

    return Corpus(encode(train_codes), encode(test_codes), len(alphabet) + 1)


@dataclass(frozen=True)
class LanguageModelTask(Task):
    """Options: ``data`` (a path replacing the built-in text), ``eval_chars`` per evaluation length."""

    metrics: ClassVar[tuple[str, ...]] = ("bits_per_char", "token_accuracy")

    data: str | None = None
    train_length: int = 64
    steps: int = 500
    batch_size: int = 32
    eval_chars: int = 16384
    eval_batch_size: int = 16

    def texts(self) -> tuple[str, str]:
        """The (train, test) text of the corpus."""
        raise NotImplementedError

    @property
    def corpus(self) -> Corpus:
        return _encoded(self)

    def model_options(self) -> dict:
        return {"vocab_size": self.corpus.vocab_size, "causal": True}

    @property
    def training_text(self) -> np.ndarray:
        """``(N,)`` the training split less its validation end: all that training reads."""
        return self.corpus.train[: self._validation_start()]

    def split_text(self, split: str) -> np.ndarray:
        check_split(split)
        return self.corpus.test if split == "test" else self.corpus.train[self._validation_start() :]

    def _validation_start(self) -> int:
        return int(len(self.corpus.train) * (1 - VALIDATION_FRACTION))

    def target_prior(self) -> np.ndarray:
        """``(V,)`` character frequencies of the training text, add-one smoothed over the vocabulary."""
        counts = np.bincount(self.training_text, minlength=self.corpus.vocab_size) + 1  # (V,)
        return counts / counts.sum()

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        text, length = self.training_text, self.window_length(rng)
        starts = rng.integers(0, len(text) - length, size=batch_size)
        return self._windows(text, starts, length)

    def window_length(self, rng: np.random.Generator) -> int:
        """The length of a training batch's windows: the training length (a variant varies it)."""
        return self.train_length

    def eval_windows(self, length: int, split: str) -> tuple[np.ndarray, np.ndarray]:
        """The ``split`` text ``(N,)`` and the starts of its evaluation windows at ``length``:
        ``eval_chars // length`` of them (at least one), spread evenly over the text."""
        text = self.split_text(split)
        if len(text) <= length:
            raise ValueError(f"{self.name}: {split} split has {len(text)} characters, too few for windows of {length}")
        n_windows = max(1, self.eval_chars // length)
        return text, np.linspace(0, len(text) - length - 1, n_windows).astype(np.int64)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        text, starts = self.eval_windows(length, split)
        for first in range(0, len(starts), self.eval_batch_size):
            yield self._windows(text, starts[first : first + self.eval_batch_size], length)

    @staticmethod
    def _windows(text: np.ndarray, starts: np.ndarray, length: int) -> Batch:
        window = torch.from_numpy(text[starts[:, None] + np.arange(length + 1)])  # (B, length+1)
        return Batch(window[:, :-1], window[:, 1:])


@cache
def _encoded(task: LanguageModelTask) -> Corpus:
    return encode_corpus(*task.texts())
