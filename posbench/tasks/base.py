"""What a task is: data at a given length, the model it needs, and which metrics it reports.

Every task yields :class:`Batch` es of ``inputs`` and ``targets`` in one shape, so a single training
loop and a single evaluation serve them all:

* sequence tasks (language models, copy, reverse, …): ``targets (B, T)`` token ids, ``IGNORE``
  where nothing is scored (the prompt of an algorithmic task, padding);
* classification tasks (``long_range``, ``digits_2d``): ``targets (B, 1)``, one label per sequence.

A task's *length* is its problem size (symbols to copy, brackets, characters in an LM window, …);
:meth:`Task.sequence_length` turns it into the number of positions the model sees.

Every task has two held-out splits (:data:`SPLITS`): ``test``, scored once for the results, and
``validation``, on which training budgets and learning rates are chosen and the held-out loss curve
is drawn — never on test. Where a task has finite data (the corpora, the digits) validation is a
fixed part of the training data that training never reads; generated tasks draw validation from a
generator of its own (see each task).

:meth:`Task.chance` gives each metric's chance level on an evaluation set: what a model that ignores
its input entirely would score there (see :mod:`posbench.metrics`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from posbench import metrics
from posbench.positions import Positions

IGNORE = -100  # target id that no loss or metric counts (torch's cross_entropy default)
EXTRAPOLATION_FACTORS = (1.0, 1.25, 1.5, 2.0, 4.0, 8.0)  # evaluation lengths, as multiples of the training length
EVAL_SEED = 20240601  # evaluation data is the same for every training seed and encoding
VALIDATION_SEED = 20240602  # generated validation data: the same for every run, another stream than test's
SPLITS = ("test", "validation")


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T) token ids, or (B, T, patch_dim) floats
    targets: torch.Tensor  # (B, T) token ids with IGNORE, or (B, 1) class labels
    positions: Positions | None = None  # a multimodal task's layout ((T, 3) ids, a modality per token); else plain


@dataclass(frozen=True)
class Task:
    """Base of every task. Fields are options (``tasks.get(name, **options)``); the training
    defaults (``steps``, ``batch_size``, ``lr``) size one job with the ``tiny`` model for a short run
    on one CPU core; each train record's ``wall_time_s`` says how long it took."""

    name: ClassVar[str]  # the registered name: set by register("name")
    metrics: ClassVar[tuple[str, ...]]  # reported per evaluation length, headline first (posbench.metrics)
    causal: ClassVar[bool] = True
    kind: ClassVar[str]  # one of guidance.KINDS, what `posbench advise --task` names; a ClassVar: config hashes stay

    train_length: int = 16
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    eval_factors: tuple[float, ...] = EXTRAPOLATION_FACTORS

    def options(self) -> dict:
        """The task's options, as recorded in a run's config."""
        return dataclasses.asdict(self)

    def model_options(self) -> dict:
        """``ModelConfig`` fields the task fixes (vocabulary, classes, patches, causality, grid)."""
        raise NotImplementedError

    def sequence_length(self, length: int) -> int:
        """Positions the model sees for a problem of size ``length``."""
        return length

    def valid_length(self, length: int) -> int:
        """The nearest length the task can generate (e.g. even for brackets)."""
        return length

    def eval_lengths(self) -> list[int]:
        """The training length and its multiples, each a length the task can generate, no repeats."""
        lengths = [self.valid_length(round(self.train_length * f)) for f in self.eval_factors]
        return list(dict.fromkeys(lengths))

    @property
    def sliding_window(self) -> bool:
        """Whether the task is also scored on sliding windows (``sliding_batches``): a causal character
        LM's, see :mod:`posbench.tasks.corpus`."""
        return False

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        raise NotImplementedError

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        """The fixed ``split`` set (one of :data:`SPLITS`) at ``length``, the same whatever the training seed."""
        raise NotImplementedError

    def target_prior(self) -> np.ndarray | None:
        """Probabilities of each target id under the training data, for a unigram chance level; ``None``
        where no metric of the task needs one."""
        return None

    def chance(self, length: int, split: str = "test") -> dict[str, float]:
        """Each of the task's metrics that has a chance level (``metrics.Metric.chance``), on the
        ``split`` set at ``length``: computed from that set's scored targets, since e.g. the majority
        class of a generated set changes with its length."""
        counts = target_counts(self.eval_batches(length, split))
        prior = self.target_prior()
        return {name: metrics.get(name).chance(counts, prior) for name in self.metrics if metrics.get(name).chance}


def check_one_length(task: Task, length: int, what: str) -> None:
    """A one-line ``ValueError`` unless ``task`` trains and evaluates at its one ``length`` (``what`` says why)."""
    if task.train_length != length or task.eval_factors != (1.0,):
        raise ValueError(f"{task.name} has one length, {what}: train_length {length}, eval_factors (1.0,)")


def target_counts(batches: Iterator[Batch]) -> np.ndarray:
    """``(K,)`` how often each target id is scored (IGNORE left out) over ``batches``; K: the largest id + 1."""
    targets = torch.cat([batch.targets.flatten() for batch in batches])  # (N,)
    return np.bincount(targets[targets != IGNORE].numpy())


def check_split(split: str) -> None:
    """A one-line ``ValueError`` for a split no task has."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")


def eval_rng(length: int, split: str = "test") -> np.random.Generator:
    """The generator of a generated task's ``split`` set at ``length``: test and validation draw from
    different seeds, so their examples are independent (they, and training's, can still coincide by
    chance where the task has few distinct examples, e.g. short copies)."""
    check_split(split)
    return np.random.default_rng((VALIDATION_SEED if split == "validation" else EVAL_SEED, length))
