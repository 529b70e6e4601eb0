"""2-D encodings for inputs on a grid (image patches): position is (row, column), not an index.

Sequences are the grid read row by row, so token ``t`` sits at ``(t // cols, t % cols)``.
Family option ``grid = (rows, cols)``; default a square grid that holds ``max_len`` tokens.

* ``sinusoidal_2d``  added: the first half of P is the 1-D sinusoid of the row, the second of the column;
* ``rope_2d``        axial RoPE: the first half of each head is rotated by the row, the second by the column.
"""

from __future__ import annotations

import math

import torch

from posbench.encodings.absolute import AbsoluteEncoding, sinusoid_table
from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.encodings.rope import ROPE_BASE, RotaryAngles, TurnedByRows
from posbench.positions import Positions, once_per_positions


class GridMixin:
    """Shared by the 2-D encodings: the grid shape and (row, col) positions."""

    axes = "2d"

    def _init_grid(self, max_len: int, grid: tuple[int, int] | None) -> None:
        if grid is None:
            cols = math.ceil(math.sqrt(max_len))
            grid = (math.ceil(max_len / cols), cols)
        rows, cols = (int(n) for n in grid)
        if rows <= 0 or cols <= 0:
            raise ValueError(f"grid must be two positive integers (rows, cols), got {grid!r}")
        self.grid = (rows, cols)

    def positions(self, seq_len: int, device=None, offset: int = 0) -> Positions:
        return Positions.grid(seq_len, self.grid[1], device, offset)  # (L, 2) row, col


class Sinusoidal2D(GridMixin, AbsoluteEncoding):
    """Added 2-D sinusoids; ``table((rows, cols))`` -> ``(rows, cols, d)``."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 grid: tuple[int, int] | None = None):
        super().__init__(d_model, n_heads, max_len, causal, mode="add")
        if d_model % 4:
            raise ValueError(f"sinusoidal_2d needs d_model divisible by 4, got {d_model}")
        self._init_grid(max_len, grid)

    def lookup(self, positions: Positions) -> torch.Tensor:
        half, ids = self.d_pos // 2, positions.ids
        rows, cols = sinusoid_table(ids[:, 0], half), sinusoid_table(ids[:, 1], half)
        return torch.cat([rows, cols], dim=-1).to(ids.device)  # (L, d)

    def table(self, grid: tuple[int, int]) -> torch.Tensor:
        rows, cols = grid
        return self.lookup(Positions.grid(rows * cols, cols)).reshape(rows, cols, self.d_pos)


class Rope2D(GridMixin, TurnedByRows, PositionalEncoding):
    """Axial RoPE; ``d_head`` must be divisible by 4. Family options: ``grid``, ``base``."""

    hook = "qk"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 grid: tuple[int, int] | None = None, base: float = ROPE_BASE):
        super().__init__(d_model, n_heads, max_len, causal)
        d_head = d_model // n_heads
        if d_model % n_heads or d_head % 4:
            raise ValueError(f"rope_2d needs d_model/n_heads divisible by 4, got {d_model}/{n_heads}")
        self._init_grid(max_len, grid)
        self.angles = RotaryAngles(d_head // 2, max(self.grid), base)

    @property
    def rotated_width(self) -> int:
        return self.d_model

    @once_per_positions
    def rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Complex turns of queries and of keys (the same), ``(L, d_head/2)``: the pairs of the first half
        of each head turn by the row, those of the second half by the column."""
        by_row, by_col = self.angles.rows(positions.axis(0)), self.angles.rows(positions.axis(1))  # (L, d_head/4) each
        turns = torch.cat([by_row, by_col], dim=-1)  # (L, d_head/2)
        return turns, turns


register("sinusoidal_2d")(Sinusoidal2D)
register("rope_2d")(Rope2D)
