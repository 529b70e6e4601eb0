"""Algorithmic sequence tasks scored token by token: the shared batching and padding.

A task generates one example at a time as ``(inputs (T,), targets (T,))``; this module pads
examples on the right into a batch. The models are causal, so right padding never reaches a
scored position. Training lengths are drawn uniformly from ``min_length … train_length`` per
example; evaluation uses one length per set.

Test and validation sets come from generators of their own (:func:`posbench.tasks.base.eval_rng`),
training from the run's: independent draws, though with few possible examples (short lengths, few
symbols) a validation, test and training example can coincide by chance. Budgets and learning rates
are chosen on validation, never on test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from posbench.tasks.base import IGNORE, Batch, Task, eval_rng

FREE_RUNNING_METRICS = ("exact_match", "token_accuracy", "greedy_exact_match")  # an answer the model writes itself


@dataclass(frozen=True)
class SequenceTask(Task):
    metrics: ClassVar[tuple[str, ...]] = ("exact_match", "token_accuracy")

    min_length: int = 1
    n_symbols: int = 8
    eval_examples: int = 256
    eval_batch_size: int = 64

    @property
    def vocab_size(self) -> int:
        """Symbols, the task's special tokens, then one padding id (always the last)."""
        raise NotImplementedError

    @property
    def pad_id(self) -> int:
        return self.vocab_size - 1

    def model_options(self) -> dict:
        return {"vocab_size": self.vocab_size, "causal": True}

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        """One example of problem size ``length``: ``inputs (T,)`` and ``targets (T,)`` with IGNORE."""
        raise NotImplementedError

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        lengths = rng.integers(self.min_length, self.train_length + 1, size=batch_size)
        return self.collate([self.example(rng, self.valid_length(int(n))) for n in lengths])

    def eval_example(self, rng: np.random.Generator, length: int, item: int) -> tuple[np.ndarray, np.ndarray]:
        """Item ``item`` of an evaluation set: a draw like training's, unless a task lays its set out."""
        return self.example(rng, length)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        rng = eval_rng(length, split)
        for start in range(0, self.eval_examples, self.eval_batch_size):
            count = min(self.eval_batch_size, self.eval_examples - start)
            yield self.collate([self.eval_example(rng, length, item) for item in range(start, start + count)])

    def collate(self, examples: list[tuple[np.ndarray, np.ndarray]]) -> Batch:
        width = max(len(inputs) for inputs, _ in examples)
        inputs = np.full((len(examples), width), self.pad_id, dtype=np.int64)  # (B, T)
        targets = np.full((len(examples), width), IGNORE, dtype=np.int64)  # (B, T)
        for row, (x, y) in enumerate(examples):
            inputs[row, : len(x)] = x
            targets[row, : len(y)] = y
        return Batch(torch.from_numpy(inputs), torch.from_numpy(targets))


def prompt_then_answer(prompt: np.ndarray, answer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Next-token prediction over ``prompt + answer``, scoring only the answer tokens."""
    sequence = np.concatenate([prompt, answer])
    inputs, targets = sequence[:-1], sequence[1:].copy()
    targets[: len(prompt) - 1] = IGNORE
    return inputs, targets


def pad_right(examples: list[tuple[np.ndarray, np.ndarray]], pad_id: int, width: int | None = None) -> Batch:
    """``(inputs, targets)`` examples padded on the right to ``width`` positions (default: the longest),
    inputs with ``pad_id``, targets with IGNORE: :meth:`SequenceTask.collate` for tasks that are not one."""
    width = max(len(inputs) for inputs, _ in examples) if width is None else width
    inputs = np.full((len(examples), width), pad_id, dtype=np.int64)  # (B, T)
    targets = np.full((len(examples), width), IGNORE, dtype=np.int64)  # (B, T)
    for row, (x, y) in enumerate(examples):
        inputs[row, : len(x)] = x
        targets[row, : len(y)] = y
    return Batch(torch.from_numpy(inputs), torch.from_numpy(targets))


@dataclass(frozen=True)
class VaryingSequenceTask(SequenceTask):
    """A sequence task whose examples of one problem size vary in length (a program's statements, an
    answer's hops): :meth:`sequence_length` is their bound, and each evaluation set is padded on the
    right to it, so a set is as wide as its records say."""

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        width = self.sequence_length(length)
        for batch in super().eval_batches(length, split):
            extra = width - batch.inputs.shape[1]
            yield Batch(F.pad(batch.inputs, (0, extra), value=self.pad_id),  # (B, width)
                        F.pad(batch.targets, (0, extra), value=IGNORE))  # (B, width)
