"""Text classification with a bidirectional encoder and a mean-pooled head (BERT-style): the
shared part of ``text_order`` (:mod:`.text_order`) and ``text_source`` (:mod:`.text_source`).

Both read character windows of shipped text, one label per window, and differ in how much the
label depends on order — the pair separates what positions add from what a bag of characters
already gives (without positions, a bidirectional encoder with a pooled head *is* a bag: NoPE is
invariant to permuting its input).

Splits are the language-model corpora's own (:mod:`posbench.tasks.corpus`): training windows come
from each corpus's training text less its validation end, validation from that end, test from the
test split (prose: the text's last 10 %; code: files whose name hashes into the test share), so a
window of one split never shares a character with another's. Training draws a label uniformly and a
window start uniformly. An evaluation set at length ``m`` has ``eval_chars // m`` windows (rounded
down to even; at least 2), starts spread evenly over the split, labels alternating 0, 1, 0, … —
exactly balanced, so the chance level (the split's majority class) is 0.5; the shuffles are drawn
from a generator fixed per (split, length) (:func:`posbench.tasks.base.eval_rng`).

Lengths: a pooled classifier reads any length, so both tasks are evaluated at 1×, 2× and 4× the
training length (``eval_factors``): longer windows hold more evidence of the order (``text_order``) or more
characters of the source (``text_source``) — no harder for a model that generalises, so a drop there
is the encoding's failure to read positions it never trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import Batch, Task, check_split, eval_rng

CLASSIFICATION_FACTORS = (1.0, 2.0, 4.0)


def window_starts(text: np.ndarray, length: int, count: int) -> np.ndarray:
    """``(count,)`` starts of windows of ``length`` spread evenly over ``text``."""
    if len(text) <= length:
        raise ValueError(f"split has {len(text)} characters, too few for windows of {length}")
    return np.linspace(0, len(text) - length, count).astype(np.int64)


@dataclass(frozen=True)
class WindowClassification(Task):
    """Character windows with one label each; subclasses say where a class's windows come from."""

    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    causal: ClassVar[bool] = False
    kind = "classification"
    n_classes: ClassVar[int] = 2

    train_length: int = 64
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    eval_factors: tuple[float, ...] = CLASSIFICATION_FACTORS
    eval_chars: int = 32768
    eval_batch_size: int = 64

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def model_options(self) -> dict:
        return {"vocab_size": self.vocab_size, "n_classes": self.n_classes, "causal": False}

    def texts(self, split: str) -> list[np.ndarray]:
        """Per class, the text its windows of ``split`` (``train``, ``validation`` or ``test``) are cut from."""
        raise NotImplementedError

    def window(self, label: int, text: np.ndarray, start: int, length: int, rng: np.random.Generator) -> np.ndarray:
        """The window of class ``label`` at ``start`` of ``text``."""
        return text[start : start + length]

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        texts = self.texts("train")
        labels = rng.integers(0, self.n_classes, size=batch_size)
        windows = []
        for label in labels:
            text = texts[label]
            start = int(rng.integers(0, len(text) - self.train_length + 1))
            windows.append(self.window(int(label), text, start, self.train_length, rng))
        return Batch(torch.from_numpy(np.stack(windows)), torch.from_numpy(labels)[:, None])

    def eval_set(self, length: int, split: str = "test") -> tuple[np.ndarray, np.ndarray]:
        """``(windows (N, length), labels (N,))``: the fixed ``split`` set at ``length``."""
        check_split(split)
        rng = eval_rng(length, split)
        count = max(2, self.eval_chars // length // self.n_classes * self.n_classes)
        labels = np.arange(count) % self.n_classes
        windows = np.empty((count, length), dtype=np.int64)
        for label, text in enumerate(self.texts(split)):
            chosen = np.flatnonzero(labels == label)
            for i, start in zip(chosen, window_starts(text, length, len(chosen))):
                windows[i] = self.window(label, text, int(start), length, rng)
        return windows, labels

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        windows, labels = self.eval_set(length, split)
        for first in range(0, len(labels), self.eval_batch_size):
            chunk = slice(first, first + self.eval_batch_size)
            yield Batch(torch.from_numpy(windows[chunk]), torch.from_numpy(labels[chunk])[:, None])
