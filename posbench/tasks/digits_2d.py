"""``digits_2d``: scikit-learn's 8×8 handwritten digits as a sequence of image patches.

Each image is cut into ``PATCH × PATCH`` pixel patches read row by row, giving a
``(8/PATCH) × (8/PATCH)`` grid. A 1-D encoding sees the flattened sequence; a 2-D encoding gets
the grid (``grid`` in the model options). The task has one length (the grid): no extrapolation.
20 % of the 1,797 images (a fixed permutation) are the test split; the next 10 % of that
permutation, taken from what was the training split, are the validation split, which training never
reads. Budgets and learning rates are chosen on validation, never on test.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import Batch, Task, check_one_length, check_split
from posbench.tasks.registry import register

IMAGE_SIZE = 8
PATCH = 2
GRID = (IMAGE_SIZE // PATCH, IMAGE_SIZE // PATCH)
TEST_FRACTION = 0.2
VALIDATION_FRACTION = 0.1  # of all images, after the test split in the fixed permutation


def to_patches(images: np.ndarray, patch: int = PATCH) -> np.ndarray:
    """``(N, H, W)`` -> ``(N, (H/p)·(W/p), p·p)``: patches in row-major grid order, pixels row-major inside."""
    n, height, width = images.shape
    grid = images.reshape(n, height // patch, patch, width // patch, patch)  # (N, R, p, C, p)
    return grid.transpose(0, 1, 3, 2, 4).reshape(n, (height // patch) * (width // patch), patch * patch)


@cache
def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(images (1797, 8, 8) in 0…16, labels (1797,))``, as ``sklearn.datasets.load_digits`` returns them.

    Read straight from the file scikit-learn ships (rows of 64 pixels and a label): importing
    scikit-learn would add its import time to every training job, which can exceed a short job's
    training (``python -X importtime -c 'import sklearn.datasets'`` measures it).
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("digits_2d needs scikit-learn installed (its 8×8 digits file)")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    data = np.loadtxt(path, delimiter=",")  # (1797, 65)
    return data[:, :-1].reshape(-1, IMAGE_SIZE, IMAGE_SIZE), data[:, -1].astype(np.int64)


@cache
def splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"train", "test", "validation"}`` -> (patches, labels), disjoint; pixels scaled to [0, 1]. The
    test split is the one it always was (the permutation's first 20 %)."""
    images, labels = load_digits()
    patches = to_patches(images / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(patches))
    n_test, n_validation = int(len(order) * TEST_FRACTION), int(len(order) * VALIDATION_FRACTION)
    parts = np.split(order, [n_test, n_test + n_validation])
    return {name: (patches[part], labels[part]) for name, part in zip(("test", "validation", "train"), parts)}


@register("digits_2d")
@dataclass(frozen=True)
class Digits2D(Task):
    kind = "multimodal"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    causal: ClassVar[bool] = False

    train_length: int = GRID[0] * GRID[1]
    steps: int = 600
    eval_factors: tuple[float, ...] = (1.0,)
    eval_batch_size: int = 128

    def __post_init__(self):
        check_one_length(self, GRID[0] * GRID[1], f"its {GRID[0]}×{GRID[1]} grid of patches")

    def model_options(self) -> dict:
        return {"patch_dim": PATCH * PATCH, "n_classes": 10, "causal": False, "grid": GRID}

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        patches, labels = splits()["train"]
        pick = rng.integers(0, len(patches), size=batch_size)
        return Batch(torch.from_numpy(patches[pick]), torch.from_numpy(labels[pick])[:, None])

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        check_split(split)
        patches, labels = splits()[split]
        for start in range(0, len(patches), self.eval_batch_size):
            chunk = slice(start, start + self.eval_batch_size)
            yield Batch(torch.from_numpy(patches[chunk]), torch.from_numpy(labels[chunk])[:, None])
