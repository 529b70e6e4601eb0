"""``mosaic_resolution``: ``mosaic_qa`` at several image resolutions, trained on small grids and evaluated on
larger ones (resolution extrapolation).

What M-RoPE-style axes are for: an image arrives at another resolution and the model still has to find
its corners. The mosaic's 16 × 16 image (four digits, :mod:`posbench.tasks.mosaic_qa`) is upsampled by
nearest neighbour to ``4g × 4g`` pixels and cut into the same fixed 4 × 4-pixel patches, so a token's
width never changes and a side holds ``g`` patches: the task's *length* is ``g``, the sequence ``g² + 6``
tokens (patches row by row, then the six-word question). At ``g = 4`` an example is ``mosaic_qa``'s
exactly; at ``g = 6`` each digit spans 3 × 3 patches, and at odd ``g`` the middle row and column of
patches straddle two digits, as patches of a real image fall across objects.

* Training: each batch draws one grid side uniformly from ``min_grid … train_length`` (4 … 6 by
  default; every example of a batch has it, nothing is padded), as ``lm_prose_varlen`` draws lengths.
* Evaluation: ``train_length`` times ``eval_factors``: grids 6 (in distribution), 9 and 12 (150 tokens),
  1,024 questions each, test and validation from their own generators (``eval_rng`` of the grid side).
* Positions are the mosaic's (:func:`~posbench.tasks.mosaic_qa.layout`): patch ``(r, c)`` at
  ``(0, r, c)``, word ``j`` at ``(g + j, g + j, g + j)``, so a multimodal encoding sees rows and columns
  at every resolution; a 1-D encoding reads the flat sequence.
* Scored as ``mosaic_qa``: accuracy over the answer classes, chance the majority answer of each set, a
  bag of patches at best 0.375; the digit images of the splits are ``digits_2d``'s (disjoint).

No comparison is declared on it: a comparison here would judge resolution extrapolation only once an arm
learns the task in distribution, which the pilot at these defaults found none did (``results/reference/NOTES.md``).
It is descriptive, in ``workflow/full.yaml`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.base import Batch
from posbench.tasks.mosaic_qa import GRID, QUESTION_LENGTH, MosaicQA
from posbench.tasks.registry import register


@register("mosaic_resolution")
@dataclass(frozen=True)
class MosaicResolution(MosaicQA):

    train_length: int = 6  # the largest grid side trained on
    min_grid: int = GRID  # the smallest (mosaic_qa's: its 8 × 8 digits at their own resolution)
    steps: int = 4000
    eval_factors: tuple[float, ...] = (1.0, 1.5, 2.0)

    def __post_init__(self):
        if not GRID <= self.min_grid <= self.train_length:
            raise ValueError(f"{self.name}: min_grid must lie in {GRID} … train_length ({self.train_length}), the "
                             f"grid sides trained on; got {self.min_grid}")

    def sequence_length(self, length: int) -> int:
        return length * length + QUESTION_LENGTH

    def grid(self, length: int) -> int:
        return length

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        grid = int(rng.integers(self.min_grid, self.train_length + 1))
        return self.batch(rng, "train", batch_size, grid)
