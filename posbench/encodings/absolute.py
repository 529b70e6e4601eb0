"""Absolute position vectors at the input: sinusoidal or learned, added or concatenated.

Three ways to combine a token embedding E with a position vector P (``mode``):

* ``add``           ``x = E + P``                 width d, P is d wide (Vaswani et al., 2017);
* ``concat``        ``x = [E ; P]``               width d + d_p: the article's naive case, the whole
                                                  Transformer then runs at the larger width;
* ``concat_fixed``  ``x = [E_{d-p} ; P_p]``       width d: the fair variant, E gives up p dimensions.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding, _require_positive
from posbench.encodings.registry import register
from posbench.positions import Positions

SINUSOID_BASE = 10000.0


def sinusoid_table(positions: torch.Tensor, width: int, base: float = SINUSOID_BASE) -> torch.Tensor:
    """``(L,)`` positions -> ``(L, width)``: PE(pos, 2i) = sin(pos / base^(2i/width)), PE(pos, 2i+1) = cos(…).

    Computed in float64 and returned in the default dtype, so tables agree with the formula to
    rounding at any length.
    """
    if width % 2:
        raise ValueError(f"sinusoidal width must be even, got {width}")
    inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64, device=positions.device) / width)  # (width/2,)
    angle = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (L, width/2)
    table = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)  # (L, width) interleaved
    return table.to(torch.get_default_dtype())


class AbsoluteEncoding(PositionalEncoding):
    """Position vectors looked up per position and combined with the token embedding.

    Family options:
        mode: ``add`` | ``concat`` | ``concat_fixed`` (preset by the registered name).
        d_pos: width of P for the concat modes; default d (``concat``, the article's case) or
            d/2 (``concat_fixed``). When adding, P is always d wide.
    """

    MODES = ("add", "concat", "concat_fixed")
    hook = "input"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 mode: str, d_pos: int | None = None):
        super().__init__(d_model, n_heads, max_len, causal)
        if mode not in self.MODES:
            raise ValueError(f"mode {mode!r}; allowed: {', '.join(self.MODES)}")
        if mode == "add" and d_pos not in (None, d_model):
            raise ValueError(f"d_pos must equal d_model ({d_model}) when adding, got {d_pos}")
        default = {"add": d_model, "concat": d_model, "concat_fixed": d_model // 2}[mode]
        self.mode = mode
        self.d_pos = default if d_pos is None else d_pos
        _require_positive(d_pos=self.d_pos)
        if mode == "concat_fixed" and self.d_pos >= d_model:
            raise ValueError(f"d_pos must be below d_model ({d_model}) for concat_fixed, got {self.d_pos}")

    @property
    def combine(self) -> str:
        return self.mode

    @property
    def token_width(self) -> int:
        return self.d_model - self.d_pos if self.mode == "concat_fixed" else self.d_model

    @property
    def model_width(self) -> int:
        return self.d_model + self.d_pos if self.mode == "concat" else self.d_model

    def table(self, n_positions: int) -> torch.Tensor:
        """Position vectors for positions ``0 … n_positions-1``: ``(n_positions, d_pos)``."""
        raise NotImplementedError

    def lookup(self, positions: Positions) -> torch.Tensor:
        """``(L,)`` positions -> ``(L, d_pos)``."""
        raise NotImplementedError

    def inject(self, tokens: torch.Tensor, positions: Positions) -> torch.Tensor:
        return self.combine_vectors(tokens, self.lookup(positions))

    def combine_vectors(self, tokens: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """``tokens (B, L, token_width)`` with position ``vectors (L, d_pos)`` -> ``(B, L, model_width)``, by
        ``mode``; separate from :meth:`lookup` so vectors chosen per token (per modality) combine in one op."""
        vectors = vectors.to(tokens.dtype)  # (L, d_pos)
        if self.mode == "add":
            return tokens + vectors
        return torch.cat([tokens, vectors.expand(*tokens.shape[:-1], -1)], dim=-1)  # (B, L, model_width)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode}, d_pos={self.d_pos}"


class Sinusoidal(AbsoluteEncoding):
    """Fixed sinusoids (base 10000), cached for ``max_len`` positions and computed beyond it."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, **options):
        super().__init__(d_model, n_heads, max_len, causal, **options)
        cached = sinusoid_table(torch.arange(max_len), self.d_pos)
        self.register_buffer("cached", cached, persistent=False)  # (max_len, d_pos)

    def table(self, n_positions: int) -> torch.Tensor:
        if n_positions <= self.max_len:
            return self.cached[:n_positions]
        return sinusoid_table(torch.arange(n_positions, device=self.cached.device), self.d_pos)

    def lookup(self, positions: Positions) -> torch.Tensor:
        if positions.max_position < self.max_len:
            return positions.rows_of(self.cached)
        return sinusoid_table(positions.ids, self.d_pos).to(self.cached.device)


class Learned(AbsoluteEncoding):
    """A trained table of ``max_len`` rows (GPT-2, BERT), initialised N(0, 1).

    N(0, 1) is the token embedding's scale (``nn.Embedding``'s default), so a position vector starts
    as large as the token vector it is added to or concatenated with. GPT-2's N(0, 0.02²) assumes
    token embeddings drawn at 0.02 too; beside this model's N(0, 1) tokens it started position 50×
    smaller than the tokens, and learned lost on tasks that need position before it could grow.

    There is no row for a position at or beyond ``max_len``: asking for one is an error, never a
    silent clamp (checked against the positions' host-known maximum, so no device sync). Size the
    table for the longest length the run evaluates.
    """

    bounded = True
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, **options):
        super().__init__(d_model, n_heads, max_len, causal, **options)
        self.weight = nn.Parameter(torch.randn(max_len, self.d_pos))  # (max_len, d_pos)

    def table(self, n_positions: int) -> torch.Tensor:
        self._check_length(n_positions)
        return self.weight[:n_positions]

    def lookup(self, positions: Positions) -> torch.Tensor:
        self._check_length(positions.max_position + 1 if len(positions) else 0)
        return positions.rows_of(self.weight)  # a decode step's one row: a view, no gather

    def _check_length(self, n_positions: int) -> None:
        if n_positions > self.max_len:
            raise ValueError(
                f"learned position table has {self.max_len} rows (max_len) but {n_positions} "
                f"positions were asked for; build it with max_len >= {n_positions}")


for _family, _cls in (("sinusoidal", Sinusoidal), ("learned", Learned)):
    register(_family, mode="add")(_cls)
    register(f"{_family}_concat", mode="concat")(_cls)
    register(f"{_family}_concat_fixed", mode="concat_fixed")(_cls)
    register(f"{_family}_randomized", mode="add", randomized=True)(_cls)

