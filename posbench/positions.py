"""Where each token sits: the one value every position hook receives.

A tensor of integer ids is not enough for the schemes posbench measures. A KV cache needs the
offset of the new tokens, randomized positions (Ruoss et al. 2023) need ids that are not
``0 … L−1`` (also for ALiBi and T5, whose bias depends on ids, not lengths), image patches need
(row, column) axes and multimodal inputs a modality id per token. And the encodings need the
largest id *on the host*: reading it from a device tensor (``int(ids.max())``) forces a device sync on
every forward pass, which biases exactly the small, launch-bound cells where overheads are judged,
while a learned table must still refuse an id it has no row for.

Causality stays a matter of token order (token ``t`` sees tokens ``0 … t``); ids say where tokens
sit, and only the position hooks read them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import torch

TEXT, IMAGE = 0, 1  # modality ids, what a task marks its tokens with and an encoding per modality reads


@dataclass(frozen=True, eq=False)
class Positions:
    """Integer ids of a sequence's tokens, with what the hooks need to know about them.

    Build one with :meth:`arange`, :meth:`grid` or :meth:`from_ids`, not by hand: they keep
    ``max_position`` and ``contiguous`` true to ``ids``.
    """

    ids: torch.Tensor  # (L,) or (L, axes) integer
    max_position: int  # an upper bound on every id, known on the host (exact from arange and from_ids)
    offset: int = 0  # tokens before these ones (in a cache)
    modality: torch.Tensor | None = None  # (L,) modality id per token (TEXT, IMAGE); None: one modality, TEXT
    contiguous: bool = False  # 1-D ids offset, offset + 1, …: a bias of i − j alone may use a (h, 2L − 1) table
    derived: dict = field(default_factory=dict, init=False, repr=False)  # see once_per_positions

    @classmethod
    def arange(cls, length: int, offset: int = 0, device: torch.device | str | None = None) -> Positions:
        """Ids ``offset … offset + length − 1``: a plain sequence, or new tokens after a cache of ``offset``."""
        if length < 0 or offset < 0:
            raise ValueError(f"length and offset must be >= 0, got {length}, {offset}")
        ids = torch.arange(offset, offset + length, device=device)  # (L,)
        return cls(ids, max(offset + length - 1, 0), offset, contiguous=True)

    @classmethod
    def grid(cls, length: int, cols: int, device: torch.device | str | None = None, offset: int = 0) -> Positions:
        """(row, column) ids of cells ``offset … offset + length − 1`` of a grid read row by row: ``(L, 2)``."""
        if cols <= 0:
            raise ValueError(f"cols must be positive, got {cols}")
        t = torch.arange(offset, offset + length, device=device)
        ids = torch.stack([t // cols, t % cols], dim=-1)  # (L, 2) row, column
        last = offset + length - 1
        return cls(ids, max(last // cols, min(last, cols - 1), 0), offset)

    @classmethod
    def from_ids(cls, ids: torch.Tensor, modality: torch.Tensor | None = None, offset: int = 0) -> Positions:
        """Any ids (e.g. a randomized subset): reads their maximum once, where the batch is made."""
        if ids.dtype.is_floating_point or ids.dim() not in (1, 2):
            raise ValueError(f"ids must be integers of shape (L,) or (L, axes), got {ids.dtype} {tuple(ids.shape)}")
        if ids.numel() and int(ids.min()) < 0:
            raise ValueError(f"position ids must be >= 0, got {int(ids.min())}")
        top = int(ids.max()) if ids.numel() else 0
        return cls(ids, top, offset, modality)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def to(self, device: torch.device | str) -> Positions:
        """The same positions with their ids (and modalities) on ``device``."""
        modality = None if self.modality is None else self.modality.to(device)
        return replace(self, ids=self.ids.to(device), modality=modality)

    @property
    def axes(self) -> int:
        """1 for a sequence; 2 for (row, column); more for multimodal axes."""
        return 1 if self.ids.dim() == 1 else self.ids.shape[-1]

    def axis(self, index: int) -> Positions:
        """One axis as 1-D positions (its bound is the bound of all axes)."""
        return replace(self, ids=self.ids[:, index], contiguous=False)

    def rows_of(self, table: torch.Tensor) -> torch.Tensor:
        """The rows of a per-position ``table (max_len, …)`` at these ids ``(L, …)``: a view of ``L`` rows from
        ``offset`` where the ids are contiguous (a decode step's one position: no gather), else gathered.
        The same values either way; ids must lie within the table (none: no row, wherever the offset)."""
        if self.contiguous and len(self):
            return table.narrow(0, self.offset, len(self))
        return table[self.ids]

    def then(self, later: Positions) -> Positions:
        """These positions followed by ``later`` ones (a cache's keys, then the new tokens')."""
        contiguous = self.contiguous and later.contiguous and later.offset == self.offset + len(self)
        modality = None if self.modality is None and later.modality is None else torch.cat(
            [_modality(self), _modality(later)])
        return Positions(torch.cat([self.ids, later.ids]), max(self.max_position, later.max_position), self.offset,
                         modality, contiguous)

    def __getitem__(self, rows: slice) -> Positions:
        """The positions of tokens ``rows`` (a slice with step 1), e.g. one block of queries."""
        start, stop, step = rows.indices(len(self))
        if step != 1:
            raise ValueError(f"positions slice with a step of {step}; only contiguous slices are allowed")
        modality = None if self.modality is None else self.modality[start:stop]
        if self.contiguous:
            return replace(self, ids=self.ids[start:stop], offset=self.offset + start, modality=modality,
                           max_position=max(self.offset + stop - 1, 0))
        return replace(self, ids=self.ids[start:stop], modality=modality)


Derived = TypeVar("Derived")


def once_per_positions(method: Callable[[object, Positions], Derived]) -> Callable[[object, Positions], Derived]:
    """An encoding's ``method(self, positions)`` computed once per :class:`Positions` value and kept on it.

    Every layer of a forward pass receives the same Positions, so what an encoding derives from the ids
    alone, no parameter in it (a rotary table's rows; not PoPE's, turned by a learned phase whose gradient
    would then gather from every layer), is gathered once and shared by the layers, as a serving stack does;
    per layer it was a decode step's own repeated work. The model clears ``derived`` when its forward
    pass ends, so nothing outlives one pass (a latency still includes the encoding's work once)."""

    @functools.wraps(method)
    def once(self, positions: Positions) -> Derived:
        key = (method.__qualname__, self)
        if key not in positions.derived:
            positions.derived[key] = method(self, positions)
        return positions.derived[key]

    return once


def _modality(positions: Positions) -> torch.Tensor:
    """Modality ids, ``TEXT`` (one modality) where none were given."""
    if positions.modality is not None:
        return positions.modality
    return torch.full((len(positions),), TEXT, dtype=torch.long, device=positions.ids.device)
