"""Text classification with a bidirectional encoder and a mean-pooled head (BERT-style), two tasks.

Both read character windows of shipped text, one label per window, and differ in how much the
label depends on order — the pair separates what positions add from what a bag of characters
already gives (without positions, a bidirectional encoder with a pooled head *is* a bag: NoPE is
invariant to permuting its input):

* ``text_order`` (order-sensitive): a window of ``lm_prose``'s text is natural (label 0) or
  perturbed (label 1), with exactly the natural window's characters — the same bag — so NoPE cannot
  tell the labels apart and sits at chance. ``perturb`` says how: ``reverse`` (the default) reads
  the window backwards; ``scramble`` shuffles the characters of every word within consecutive
  chunks of ``span`` characters (``span`` 3: "position" may come back "sopitino"; words are the runs
  of non-space characters, cut words at either end included; spaces and newlines stay in place).
  A window no perturbation changes (a rule of ``*``, say) is passed over for the next one.
  Measured with the tiny model at the defaults (seed 0, test accuracy at 64 / 128 / 256 characters):
  RoPE 0.928 / 0.938 / 0.914; sinusoidal 0.498 / 0.496 / 0.500 and NoPE 0.500 (chance 0.5) — the
  sinusoidal model had not left chance after 600 steps. ``scramble`` (and, before it, whole words
  shuffled within spans of three words) kept even RoPE at chance for 300–500 steps: too hard for the
  budget, kept as an option for larger models.
* ``text_source`` (mostly order-insensitive): which corpus a window comes from, prose (label 0,
  ``lm_prose``'s Python documentation) or code (label 1, ``lm_code``'s standard-library source).
  A bag of characters nearly suffices (indentation, ``_``, ``()``, ``=`` against letters and
  punctuation); NoPE here is the bag-of-characters control.

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
from functools import cache, cached_property
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import Batch, Task, check_split, eval_rng
from posbench.tasks.corpus import VALIDATION_FRACTION, encode_corpus
from posbench.tasks.lm_code import CodeLM
from posbench.tasks.lm_prose import ProseLM
from posbench.tasks.registry import register

SPACES = " \n\t"  # characters that separate words; they stay in place in a shuffled window
CLASSIFICATION_FACTORS = (1.0, 2.0, 4.0)
PERTURBATIONS = ("reverse", "scramble")  # text_order's label-1 windows: reversed, or letters shuffled within words


def validation_start(text: np.ndarray) -> int:
    """Where a training split's validation end begins (the corpora's rule)."""
    return int(len(text) * (1 - VALIDATION_FRACTION))


def window_starts(text: np.ndarray, length: int, count: int) -> np.ndarray:
    """``(count,)`` starts of windows of ``length`` spread evenly over ``text``."""
    if len(text) <= length:
        raise ValueError(f"split has {len(text)} characters, too few for windows of {length}")
    return np.linspace(0, len(text) - length, count).astype(np.int64)


def shuffle_within_words(window: np.ndarray, is_space: np.ndarray, span: int,
                        rng: np.random.Generator) -> np.ndarray:
    """``window (L,)`` with the characters of each word permuted within consecutive chunks of
    ``span`` characters counted from the word's start; spaces stay in place. A draw that leaves the
    window as it was is drawn again (up to 20 times), so a window with a chunk of two different
    characters always comes back changed."""
    length = len(window)
    where = np.arange(length)
    starts_run = np.r_[True, is_space[1:] != is_space[:-1]]  # (L,) a run of word or space characters starts
    offset = where - np.maximum.accumulate(np.where(starts_run, where, 0))  # (L,) place inside its run
    chunk = np.cumsum(starts_run) * (length + 1) + np.where(is_space, offset, offset // span)  # (L,) nondecreasing
    for _ in range(20):
        shuffled = window[np.lexsort((rng.random(length), chunk))]
        if not np.array_equal(shuffled, window):
            return shuffled
    return shuffled


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


@register
@dataclass(frozen=True)
class TextOrder(WindowClassification):
    """Options: ``data`` (a text file replacing the built-in prose), ``perturb`` (:data:`PERTURBATIONS`),
    ``span`` (characters shuffled together by ``scramble``)."""

    name = "text_order"

    data: str | None = None
    span: int = 3
    perturb: str = "reverse"

    def __post_init__(self):
        if self.perturb not in PERTURBATIONS:
            raise ValueError(f"text_order: perturb {self.perturb!r}; allowed: {', '.join(PERTURBATIONS)}")
        if self.span < 2:
            raise ValueError(f"text_order: span must be at least 2 characters, got {self.span}")

    @cached_property
    def prose(self) -> ProseLM:
        return ProseLM(data=self.data)

    @property
    def vocab_size(self) -> int:
        return self.prose.corpus.vocab_size

    @cached_property
    def space_ids(self) -> np.ndarray:
        """Ids of the separating characters the training text has."""
        codes = np.frombuffer(SPACES.encode("utf-32-le"), dtype=np.uint32)
        alphabet = np.unique(np.frombuffer(self.prose.texts()[0].encode("utf-32-le"), dtype=np.uint32))
        return np.flatnonzero(np.isin(alphabet, codes)) + 1  # ids are alphabet slots + 1 (UNK is 0)

    def texts(self, split: str) -> list[np.ndarray]:
        text = self.prose.training_text if split == "train" else self.prose.split_text(split)
        return [text, text]

    def window(self, label: int, text: np.ndarray, start: int, length: int, rng: np.random.Generator) -> np.ndarray:
        natural = text[start : start + length]
        if label == 0:
            return natural
        for _ in range(100):  # a window that no shuffle changes (a rule of '*' or '=') gives way to the next one
            if self.perturb == "reverse":
                shuffled = natural[::-1].copy()
            else:
                shuffled = shuffle_within_words(natural, np.isin(natural, self.space_ids), self.span, rng)
            if not np.array_equal(shuffled, natural):
                return shuffled
            start = (start + length) % (len(text) - length + 1)
            natural = text[start : start + length]
        raise ValueError(f"{self.name}: no window of {length} characters near {start} changes when shuffled")


@register
@dataclass(frozen=True)
class TextSource(WindowClassification):
    """Options: ``prose`` (a text file replacing the built-in prose), ``code`` (a directory of ``*.py``
    files replacing the standard library)."""

    name = "text_source"

    prose: str | None = None
    code: str | None = None

    @property
    def vocab_size(self) -> int:
        return _sources(self)[1]

    def texts(self, split: str) -> list[np.ndarray]:
        parts = _sources(self)[0]
        if split == "train":
            return [part.train[: validation_start(part.train)] for part in parts]
        check_split(split)
        return [part.test if split == "test" else part.train[validation_start(part.train) :] for part in parts]


@dataclass(frozen=True)
class _Part:
    train: np.ndarray
    test: np.ndarray


@cache
def _sources(task: TextSource) -> tuple[tuple[_Part, _Part], int]:
    """The prose and code corpora encoded with one vocabulary (the characters of both training
    splits, ``UNK`` for the rest), and its size."""
    prose, code = ProseLM(data=task.prose).texts(), CodeLM(data=task.code).texts()
    corpus = encode_corpus(prose[0] + code[0], prose[1] + code[1])
    parts = (_Part(corpus.train[: len(prose[0])], corpus.test[: len(prose[1])]),
             _Part(corpus.train[len(prose[0]) :], corpus.test[len(prose[1]) :]))
    return parts, corpus.vocab_size
