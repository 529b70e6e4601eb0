"""``mlm_prose``: masked character language model on ``lm_prose``'s text, the bidirectional
counterpart of the causal LM (BERT's objective; Haviv et al. 2022: without positions a causal LM
loses little, a masked LM collapses — a bidirectional NoPE encoder sees its input as a bag).

A window of ``train_length`` characters is the input. ``mask_rate`` (15 %) of its positions —
``round(mask_rate · L)`` of them, at least one, chosen uniformly without replacement — are
*selected*; each selected character is replaced by ``MASK`` (a vocabulary id of its own, the last)
with probability 0.8, by a uniformly drawn character of the vocabulary with 0.1, and left unchanged
with 0.1 (BERT's 80/10/10). Only selected positions are scored: their target is the original
character, every other target is ``IGNORE``. So ``bits_per_char`` and ``token_accuracy`` are over the
masked (selected) characters only — the metrics' own definitions (per *scored* character), no new
metric; the chance level of ``bits_per_char`` is still the unigram cross-entropy under the training
text's character frequencies, here on the selected characters.

Windows and splits are ``lm_prose``'s (:mod:`posbench.tasks.corpus`); the evaluation set at each
length draws its masks once from a generator fixed per (split, length), so it is the same for every
run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from posbench.tasks.base import IGNORE, Batch, eval_rng
from posbench.tasks.corpus import UNK, window_ids
from posbench.tasks.lm_prose import ProseLM
from posbench.tasks.registry import register

MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of the selected positions; the remaining 0.1 stay unchanged


def mask_windows(windows: np.ndarray, rng: np.random.Generator, rate: float, mask_id: int,
                 vocab_size: int) -> Batch:
    """``windows (B, L)`` character ids -> inputs with BERT's masking and targets that score only the
    selected positions. Random replacements are drawn from the characters (ids ``1 … vocab_size-1``:
    neither ``UNK`` nor ``MASK``)."""
    count = max(1, round(rate * windows.shape[1]))
    ranks = rng.random(windows.shape).argsort(axis=1).argsort(axis=1)  # (B, L) a random order of each row
    selected = ranks < count  # (B, L) exactly `count` per row
    kind = rng.random(windows.shape)  # (B, L)
    replacement = rng.integers(UNK + 1, vocab_size, size=windows.shape)  # (B, L)
    inputs = np.where(selected & (kind < MASK_SHARE), mask_id, windows)
    inputs = np.where(selected & (kind >= MASK_SHARE) & (kind < MASK_SHARE + RANDOM_SHARE), replacement, inputs)
    targets = np.where(selected, windows, IGNORE)
    return Batch(torch.from_numpy(inputs), torch.from_numpy(targets))


@register("mlm_prose")
@dataclass(frozen=True)
class MaskedProseLM(ProseLM):
    """Options: those of ``lm_prose`` and ``mask_rate`` (the share of positions selected)."""

    kind = "nlp"
    causal = False

    mask_rate: float = 0.15

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.mask_rate < 1:
            raise ValueError(f"mlm_prose: mask_rate must be in (0, 1), got {self.mask_rate}")

    @property
    def mask_id(self) -> int:
        return self.corpus.vocab_size

    def model_options(self) -> dict:
        return {"vocab_size": self.corpus.vocab_size + 1, "causal": False}  # + MASK

    def _masked(self, text: np.ndarray, starts: np.ndarray, length: int, rng: np.random.Generator) -> Batch:
        windows = window_ids(text, starts, length)  # (B, length)
        return mask_windows(windows, rng, self.mask_rate, self.mask_id, self.corpus.vocab_size)

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        text = self.training_text
        starts = rng.integers(0, len(text) - self.train_length, size=batch_size)
        return self._masked(text, starts, self.train_length, rng)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        text, starts = self.eval_windows(length, split)
        batch = self._masked(text, starts, length, eval_rng(length, split))
        for first in range(0, len(starts), self.eval_batch_size):
            chunk = slice(first, first + self.eval_batch_size)
            yield Batch(batch.inputs[chunk], batch.targets[chunk])
