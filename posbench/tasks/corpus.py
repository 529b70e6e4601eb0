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
The windows do not overlap where the split holds ``eval_chars`` characters (plus one, the last
target), as the ALiBi paper's non-overlapping evaluation.

Beside that headline, a causal LM is also scored with *sliding windows*
(:meth:`LanguageModelTask.sliding_batches`), on exactly the headline's characters: each headline
window's span of ``m`` targets is scored again by windows of ``m`` that start every ``s = m // 4``
characters (:func:`sliding_stride`) up to the span's own start (at ``p - 3s``, ``p - 2s``, ``p - s``,
``p``), each scoring only its last ``s`` targets, so every target of the span is scored exactly once
and with at least ``m - s`` characters of context. A span too near the split's start to have
``m - s`` characters before it (the first, at 0) is scored by its own window alone, all ``m``
targets, as in the headline. The same characters scored both ways: the gap between the two scores
is the context alone (at ``m / s = 4`` times the headline's forward work). The non-overlapping
score stays the headline (the ALiBi paper's): its targets sit at every position of a window, so it
measures how a model copes with positions up to ``m``; the sliding score asks what a long context is
worth once every character has most of one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import IGNORE, Batch, Task, check_split

UNK = 0
VALIDATION_FRACTION = 0.05  # of the training split, its end: a class constant, so config hashes stay as they were
SLIDING_STRIDE_DIVISOR = 4  # sliding windows start every m // 4 characters: each scored one sees >= 3m/4 context


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


def sliding_stride(length: int) -> int:
    """How far apart the sliding windows of ``length`` characters start (and how many each scores)."""
    return max(1, length // SLIDING_STRIDE_DIVISOR)


def sliding_starts(span_starts: np.ndarray, length: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """The sliding windows over the spans of ``length`` targets after each of ``span_starts (B,)``:
    ``(K,)`` window starts, in text order, and ``(K,)`` the first position each scores. A span at ``p``
    gets the windows at ``p - i · stride`` (i = ⌈length / stride⌉ - 1 … 0), each scoring its last
    ``stride`` targets (the earliest one what is left); a span with too few characters before it for
    its earliest window gets its own window alone, scoring all of it."""
    chunks = -(-length // stride)
    back = stride * np.arange(chunks)[::-1]  # (k,) how far each window starts before its span
    starts = span_starts[:, None] - back  # (B, k)
    scored_from = np.tile(np.maximum(length - stride, back), (len(span_starts), 1))  # (B, k)
    short = span_starts < back[0]  # (B,) no room before the span for its earliest window
    keep = np.ones(starts.shape, dtype=bool)  # (B, k)
    keep[short, :-1] = False
    scored_from[short, -1] = 0
    return starts[keep], scored_from[keep]


def window_ids(text: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``(B, width)`` the characters of ``text`` from each of ``starts (B,)``: the one window reader."""
    return text[starts[:, None] + np.arange(width)]


def windows(text: np.ndarray, starts: np.ndarray, length: int, scored_from: np.ndarray | None = None) -> Batch:
    """Next-character batches of ``length`` from ``starts (B,)``; a target before its window's
    ``scored_from (B,)`` position is ``IGNORE`` (every target is scored without it)."""
    window = torch.from_numpy(window_ids(text, starts, length + 1))  # (B, length+1)
    targets = window[:, 1:].clone()  # (B, length)
    if scored_from is not None:
        targets[torch.arange(length)[None, :] < torch.from_numpy(scored_from)[:, None]] = IGNORE
    return Batch(window[:, :-1], targets)


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
        """The (train, test) text of the corpus; the train text ends with the validation split."""
        raise NotImplementedError

    def validation_length(self) -> int | None:
        """How many characters at the train text's end are the validation split; ``None``: the last
        ``VALIDATION_FRACTION`` of it (a corpus with documents of its own says where they begin)."""
        return None

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
        own, whole = self.validation_length(), len(self.corpus.train)
        return whole - own if own is not None else int(whole * (1 - VALIDATION_FRACTION))

    def target_prior(self) -> np.ndarray:
        """``(V,)`` character frequencies of the training text, add-one smoothed over the vocabulary."""
        counts = np.bincount(self.training_text, minlength=self.corpus.vocab_size) + 1  # (V,)
        return counts / counts.sum()

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        text, length = self.training_text, self.window_length(rng)
        starts = rng.integers(0, len(text) - length, size=batch_size)
        return windows(text, starts, length)

    def window_length(self, rng: np.random.Generator) -> int:
        """The length of a training batch's windows: the training length (a variant varies it)."""
        return self.train_length

    @property
    def sliding_window(self) -> bool:
        """Only a causal model scored on this class's own next-character windows: a task that builds
        its evaluation otherwise (``mlm_prose`` masks them, ``code_brackets`` tags brackets) scores
        targets that are not the next character, or, bidirectional, sees context on both sides."""
        return self.causal and type(self).eval_batches is LanguageModelTask.eval_batches

    def chars_read(self, split: str) -> int:
        """Characters an evaluation on ``split`` reads at each length: ``eval_chars``."""
        return self.eval_chars

    def eval_windows(self, length: int, split: str) -> tuple[np.ndarray, np.ndarray]:
        """The ``split`` text ``(N,)`` and the starts of its evaluation windows at ``length``:
        ``chars_read(split) // length`` of them (at least one), spread evenly over the text."""
        text = self.split_text(split)
        if len(text) <= length:
            raise ValueError(f"{self.name}: {split} split has {len(text)} characters, too few for windows of {length}")
        n_windows = max(1, self.chars_read(split) // length)
        return text, np.linspace(0, len(text) - length - 1, n_windows).astype(np.int64)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        text, starts = self.eval_windows(length, split)
        return self._batches(text, starts, length)

    def sliding_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        """The sliding windows of ``length`` at stride :func:`sliding_stride` over the spans of the
        ``split`` set's windows: :meth:`eval_batches`' characters, each with its context (see the module)."""
        text, spans = self.eval_windows(length, split)
        starts, scored_from = sliding_starts(spans, length, sliding_stride(length))
        return self._batches(text, starts, length, scored_from)

    def _batches(self, text: np.ndarray, starts: np.ndarray, length: int,
                 scored_from: np.ndarray | None = None) -> Iterator[Batch]:
        for first in range(0, len(starts), self.eval_batch_size):
            chunk = slice(first, first + self.eval_batch_size)
            yield windows(text, starts[chunk], length, None if scored_from is None else scored_from[chunk])


@cache
def _encoded(task: LanguageModelTask) -> Corpus:
    return encode_corpus(*task.texts())
