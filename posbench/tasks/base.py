"""What a task is: data at a given length, the model it needs, and which metrics it reports.

Every task yields :class:`Batch` es of ``inputs`` and ``targets`` in one shape, so a single training
loop and a single evaluation serve them all:

* sequence tasks (language models, copy, reverse, …): ``targets (B, T)`` token ids, ``IGNORE``
  where nothing is scored (the prompt of an algorithmic task, padding);
* classification tasks (``long_range``, ``digits_2d``): ``targets (B, 1)``, one label per sequence.

A task's *length* is its problem size (symbols to copy, brackets, characters in an LM window, …);
:meth:`Task.sequence_length` turns it into the number of positions the model sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

IGNORE = -100  # target id that no loss or metric counts (torch's cross_entropy default)
EXTRAPOLATION_FACTORS = (1.0, 1.25, 1.5, 2.0, 4.0, 8.0)  # evaluation lengths, as multiples of the training length
EVAL_SEED = 20240601  # evaluation data is the same for every training seed and encoding


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T) token ids, or (B, T, patch_dim) floats
    targets: torch.Tensor  # (B, T) token ids with IGNORE, or (B, 1) class labels


@dataclass(frozen=True)
class Task:
    """Base of every task. Fields are options (``tasks.get(name, **options)``); the training
    defaults (``steps``, ``batch_size``, ``lr``) size one job with the ``tiny`` model for a short run
    on one CPU core; each train record's ``wall_time_s`` says how long it took."""

    name: ClassVar[str]
    metrics: ClassVar[tuple[str, ...]]  # reported per evaluation length, headline first (posbench.metrics)
    causal: ClassVar[bool] = True

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

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        raise NotImplementedError

    def eval_batches(self, length: int) -> Iterator[Batch]:
        """The fixed evaluation set at ``length`` (the same whatever the training seed)."""
        raise NotImplementedError


def eval_rng(length: int) -> np.random.Generator:
    return np.random.default_rng((EVAL_SEED, length))
