"""``mosaic_qa``: vision + language in one sequence — a 2×2 mosaic of digits, then a question about it.

Four of scikit-learn's 8×8 digits with four different labels tile a 16×16 image, cut into 4×4-pixel
patches: a 4×4 grid of 16 patches read row by row, each digit a 2×2 block of them (2×2-pixel patches,
64 of them, left a tiny model near chance: results/reference/NOTES.md, Lab notes). Six text tokens
follow, one of two questions (half each):

* ``what digit is at <corner> ?`` — the digit in that tile (classes 0–9);
* ``is <a> left of <b> ?`` — ``a`` and ``b`` are two of the mosaic's digits in different columns;
  yes or no (classes 11 and 10).

Both need the patches' places: the first which tile a corner is, the second where two digits sit
relative to each other. A model blind to position sees a bag of patches: at best it names one of the
four digits it sees (1/4) or guesses yes or no (1/2), 0.375 in all; chance, the majority answer of
each evaluation set, is printed beside it. One sequence holds both modalities: every token is a
vector of ``16 + len(WORDS)`` numbers, a patch's sixteen pixels (text slots zero) or a word's one-hot
(pixel slots zero), so one linear embedding reads both.

Positions follow M-RoPE's layout (Qwen2-VL), with a modality per token (:meth:`MosaicQA.layout`):
patch ``(r, c)`` sits at ``(0, r, c)``, text token ``j`` at ``(4 + j, 4 + j, 4 + j)``. A multimodal
encoding (``mrope``, ``*_per_modality``) reads them; a 1-D encoding reads the flat sequence
``0 … 21`` (one added encoding over the whole sequence); a 2-D encoding alone is refused (text has
no grid). The images of each split are ``digits_2d``'s (test, validation, train: disjoint), so no
digit image is both trained on and tested. One length, no extrapolation (``mosaic_resolution`` varies the
image's resolution).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
import torch

from posbench.positions import IMAGE, TEXT, Positions
from posbench.tasks.base import Batch, Task, check_one_length, eval_rng
from posbench.tasks.digits_2d import IMAGE_SIZE, splits, to_patches
from posbench.tasks.digits_2d import PATCH as STORED_PATCH
from posbench.tasks.registry import register

CORNERS = ("top-left", "top-right", "bottom-left", "bottom-right")  # tile order: row by row
WORDS = ("what", "digit", "is", "at", "left", "of", "?", *CORNERS, *(str(d) for d in range(10)))
NO, YES = 10, 11  # answer classes after the ten digits
PATCH = 4
GRID = 2 * IMAGE_SIZE // PATCH  # patches along a side of the mosaic
QUESTION_LENGTH = 6
PIXELS = PATCH * PATCH


def word_ids(text: str) -> list[int]:
    return [WORDS.index(word) for word in text.split()]


@register("mosaic_qa")
@dataclass(frozen=True)
class MosaicQA(Task):
    kind = "multimodal"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    causal: ClassVar[bool] = False

    train_length: int = GRID * GRID + QUESTION_LENGTH
    steps: int = 4000  # seed 0, sinusoidal: 0.31 at 1,500 steps, 0.79 at 4,000 (the loss drops after ~1,500)
    eval_factors: tuple[float, ...] = (1.0,)
    eval_examples: int = 1024
    eval_batch_size: int = 128

    def __post_init__(self):
        check_one_length(self, GRID * GRID + QUESTION_LENGTH,
                         f"{GRID}×{GRID} patches and a {QUESTION_LENGTH}-token question")

    def model_options(self) -> dict:
        return {"patch_dim": PIXELS + len(WORDS), "n_classes": 12, "causal": False}

    @property
    def layout(self) -> Positions:
        """``(22, 3)`` ids (text, row, column) and a modality per token, the same for every example."""
        return layout(GRID)

    def grid(self, length: int) -> int:
        """Patches along a side of the mosaic at evaluation ``length``: always :data:`GRID` (one length)."""
        return GRID

    def example(self, rng: np.random.Generator, split: str, grid: int = GRID) -> tuple[np.ndarray, int, np.ndarray]:
        """``(tokens (grid² + 6, 16 + len(WORDS)), answer, tile_labels (4,))`` drawn from ``split``'s images."""
        images, labels = split_images(split)
        tile_labels = rng.choice(10, size=4, replace=False)
        picks = [rng.choice(np.flatnonzero(labels == label)) for label in tile_labels]
        question, answer = self.question(rng, tile_labels)
        return self.tokens(images[picks], question, grid), answer, tile_labels

    @staticmethod
    def question(rng: np.random.Generator, tile_labels: np.ndarray) -> tuple[list[int], int]:
        """One of the two questions about tiles labelled ``tile_labels`` (row by row), and its answer."""
        if rng.uniform() < 0.5:
            corner = int(rng.integers(0, 4))
            return word_ids(f"what digit is at {CORNERS[corner]} ?"), int(tile_labels[corner])
        row_a, row_b = rng.integers(0, 2, size=2)
        column_a = int(rng.integers(0, 2))  # a and b in different columns
        a, b = tile_labels[2 * row_a + column_a], tile_labels[2 * row_b + 1 - column_a]
        return word_ids(f"is {a} left of {b} ?"), YES if column_a == 0 else NO

    @staticmethod
    def tokens(tiles: np.ndarray, question: list[int], grid: int = GRID) -> np.ndarray:
        """Four ``(8, 8)`` tiles (row by row) and a question -> ``(grid² + 6, 16 + len(WORDS))`` token vectors:
        the 16 × 16 mosaic upsampled to ``grid`` patches a side (nearest neighbour; unchanged at :data:`GRID`)."""
        mosaic = upsampled(np.block([[tiles[0], tiles[1]], [tiles[2], tiles[3]]]), grid * PATCH)  # (4·grid, 4·grid)
        patches = to_patches(mosaic[None], PATCH)[0]  # (grid², 16)
        tokens = np.zeros((len(patches) + len(question), PIXELS + len(WORDS)), dtype=np.float32)
        tokens[: len(patches), :PIXELS] = patches
        tokens[np.arange(len(patches), len(tokens)), PIXELS + np.array(question)] = 1.0
        return tokens

    def batch(self, rng: np.random.Generator, split: str, size: int, grid: int = GRID) -> Batch:
        drawn = [self.example(rng, split, grid) for _ in range(size)]
        inputs = torch.from_numpy(np.stack([tokens for tokens, _, _ in drawn]))  # (B, grid² + 6, 16 + len(WORDS))
        targets = torch.tensor([[answer] for _, answer, _ in drawn])  # (B, 1)
        return Batch(inputs, targets, layout(grid))

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        return self.batch(rng, "train", batch_size)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        rng = eval_rng(length, split)
        for start in range(0, self.eval_examples, self.eval_batch_size):
            yield self.batch(rng, split, min(self.eval_batch_size, self.eval_examples - start), self.grid(length))


@cache
def layout(grid: int) -> Positions:
    """``(grid² + 6, 3)`` ids (text, row, column) and a modality per token of a ``grid × grid`` mosaic and its
    question: patch ``(r, c)`` at ``(0, r, c)``, word ``j`` at ``(grid + j, grid + j, grid + j)``."""
    cells = torch.arange(grid * grid)
    patches = torch.stack([torch.zeros_like(cells), cells // grid, cells % grid], dim=1)  # (grid², 3)
    text = (grid + torch.arange(QUESTION_LENGTH))[:, None].expand(-1, 3)  # (6, 3)
    modality = torch.tensor([IMAGE] * (grid * grid) + [TEXT] * QUESTION_LENGTH)
    return Positions.from_ids(torch.cat([patches, text]), modality)


def upsampled(image: np.ndarray, side: int) -> np.ndarray:
    """A square ``(n, n)`` image at ``(side, side)``, nearest neighbour: output pixel ``i`` of a row or column
    reads input pixel ``⌊i · n / side⌋`` (the identity at ``side = n``)."""
    source = np.arange(side) * len(image) // side  # (side,)
    return image[source[:, None], source[None, :]]


@cache
def split_images(split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, 8, 8) in [0, 1], labels (N,))`` of ``digits_2d``'s ``split`` (train, test or validation),
    built once per split: rebuilt for every example, it would take most of a training batch's time."""
    patches, labels = splits()[split]  # (N, 16, 4): digits_2d's 2×2-pixel patches in row-major grid order
    grid = IMAGE_SIZE // STORED_PATCH
    blocks = patches.reshape(-1, grid, grid, STORED_PATCH, STORED_PATCH)  # (N, rows, cols, p, p)
    images = blocks.transpose(0, 1, 3, 2, 4).reshape(-1, IMAGE_SIZE, IMAGE_SIZE)  # (N, 8, 8)
    return images, labels

