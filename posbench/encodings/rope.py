"""Rotary position embedding (RoFormer, Su et al. 2021): rotate q and k by an angle per position,
with the options people use now: the base (``theta``), partial rotation and Hugging Face's
context-extension ``scaling`` types; and xPos (Sun et al. 2022), RoPE with a decay.

Pairing convention: RoFormer's own *neighbours*: dimensions ``(2i, 2i+1)`` of a head form the complex
number ``x_{2i} + i·x_{2i+1}``, turned by ``pos · θ_i``. GPT-NeoX / LLaMA-HF pair ``(i, i + d/2)``
instead; the two differ only by a fixed permutation of the head dimensions: permuting the rows of
``W_q`` and ``W_k`` turns one model into the other, so both pairings span the same models (a given
seed draws a different one of them). Neighbours let the rotation be one complex multiplication over
a view of q or k: a single pass over memory, where the real-valued form (``x·cos + swap(x)·sin``)
needs a copy and three more passes.

``scaling`` takes Hugging Face's keys (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``), so a model
config carries over: ``{"rope_type": "linear" | "dynamic" | "yarn" | "llama3" | "longrope", "factor": s, …}``.
The frequencies and the attention factor (YaRN's ``0.1·ln(s) + 1``, LongRoPE's
``sqrt(1 + ln(s) / ln(original_max_position_embeddings))``, applied to both cos and sin, so to q and
to k, as Hugging Face does) follow HF's formulas; ``original_max_position_embeddings`` is the length
the model was trained at. ``dynamic`` (NTK) recomputes the base from the current sequence length
(the largest position id + 1), as HF does without a cache; ``longrope`` divides each frequency by its
``short_factor`` and switches to its ``long_factor`` once that length passes
``original_max_position_embeddings``, HF's rule.

p-RoPE (Barbero et al., ICLR 2025) is another scheme than ``rotary_fraction``: it keeps the fastest
pairs of the full-width ladder ``base^(-2i/d_head)`` turning and leaves the slowest ones still
(:class:`PRope`), where ``rotary_fraction`` (HF's ``partial_rotary_factor``) lays a whole ladder over
the rotated part.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from posbench.devices import converted
from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.positions import Positions, once_per_positions

ROPE_BASE = 10000.0
SCALING_KEYS = {  # rope_type -> (required keys, optional keys), as Hugging Face validates them
    "linear": ({"factor"}, set()),
    "dynamic": ({"factor", "original_max_position_embeddings"}, set()),
    "yarn": ({"factor", "original_max_position_embeddings"}, {"beta_fast", "beta_slow", "attention_factor"}),
    "llama3": ({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}, set()),
    "longrope": ({"factor", "original_max_position_embeddings", "short_factor", "long_factor"}, {"attention_factor"}),
}
PER_FREQUENCY_KEYS = {"short_factor", "long_factor"}  # a value per frequency pair: no TYPE:FACTOR label sets them
LABELLED_TYPES = tuple(kind for kind, (required, _) in SCALING_KEYS.items() if not required & PER_FREQUENCY_KEYS)
LENGTH_DEPENDENT_TYPES = ("dynamic", "longrope")  # frequencies chosen by the sequence's length


@dataclass(frozen=True)
class RopeScaling:
    """A context-extension method with Hugging Face's key names (see :data:`SCALING_KEYS`)."""

    rope_type: str
    factor: float
    original_max_position_embeddings: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    short_factor: tuple[float, ...] | None = None  # longrope: a divisor per frequency pair, within the training length
    long_factor: tuple[float, ...] | None = None  # longrope: the divisors beyond it

    def __post_init__(self):
        for name in PER_FREQUENCY_KEYS:  # JSON gives lists; a frozen value keeps tuples
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(float(value) for value in getattr(self, name)))

    @classmethod
    def parse(cls, options: dict | RopeScaling | None) -> RopeScaling | None:
        """A scaling dict (or ``None``) checked key by key; every mistake is one line naming the key."""
        if options is None or isinstance(options, RopeScaling):
            return options
        if not isinstance(options, dict) or options.get("rope_type") not in SCALING_KEYS:
            got = options.get("rope_type") if isinstance(options, dict) else options
            raise ValueError(f"scaling.rope_type {got!r}; allowed: {', '.join(SCALING_KEYS)}")
        kind = options["rope_type"]
        required, optional = SCALING_KEYS[kind]
        keys = set(options) - {"rope_type"}
        if missing := sorted(required - keys):
            raise ValueError(f"scaling ({kind}) needs {', '.join(missing)}; allowed keys: "
                             f"{', '.join(sorted(required | optional))}")
        if unknown := sorted(keys - required - optional):
            raise ValueError(f"scaling ({kind}) key {unknown[0]!r} is not allowed; allowed keys: "
                             f"{', '.join(sorted(required | optional))}")
        scaling = cls(**options)
        if not scaling.factor >= 1:
            raise ValueError(f"scaling.factor must be >= 1, got {scaling.factor!r}")
        return scaling

    def frequencies(self, width: int, base: float, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
        """Inverse frequencies ``(width/2,)`` float64 and the attention factor, at ``seq_len`` for ``dynamic``."""
        exponents = torch.arange(0, width, 2, dtype=torch.float64) / width  # (width/2,)
        inv_freq = base ** -exponents
        s, original = self.factor, self.original_max_position_embeddings
        if self.rope_type == "linear":  # Position Interpolation (Chen et al. 2023): positions / s
            return inv_freq / s, 1.0
        if self.rope_type == "dynamic":  # NTK-aware base, grown with the sequence beyond the training length
            seq_len = max(seq_len or original, original)
            grown = base * ((s * seq_len / original) - (s - 1)) ** (width / (width - 2))
            return grown ** -exponents, 1.0
        if self.rope_type == "yarn":  # Peng et al. 2023: interpolate low frequencies, keep high ones
            return self._yarn(inv_freq, width, base), (self.attention_factor or 0.1 * math.log(s) + 1.0)
        if self.rope_type == "longrope":  # Ding et al. 2024: a searched divisor per frequency, two sets
            return inv_freq / self._longrope_divisors(width, seq_len), self._longrope_attention_factor()
        return self._llama3(inv_freq), 1.0

    def _longrope_divisors(self, width: int, seq_len: int | None) -> torch.Tensor:
        """``long_factor`` once ``seq_len`` passes the training length, else ``short_factor``: ``(width/2,)``."""
        name = "long_factor" if seq_len and seq_len > self.original_max_position_embeddings else "short_factor"
        divisors = getattr(self, name)
        if len(divisors) != width // 2:
            raise ValueError(f"scaling (longrope) {name} has {len(divisors)} values; a rotated width of {width} "
                             f"needs {width // 2}, one per frequency pair")
        return torch.tensor(divisors, dtype=torch.float64)

    def _longrope_attention_factor(self) -> float:
        """HF's default: ``sqrt(1 + ln(s) / ln(original))``, 1 for ``s <= 1``; or the given ``attention_factor``."""
        if self.attention_factor is not None:
            return self.attention_factor
        if self.factor <= 1:
            return 1.0
        return math.sqrt(1 + math.log(self.factor) / math.log(self.original_max_position_embeddings))

    def _yarn(self, inv_freq: torch.Tensor, width: int, base: float) -> torch.Tensor:
        def correction_dim(rotations: float) -> float:  # the dimension that turns ``rotations`` times in training
            turns_in_training = self.original_max_position_embeddings / (rotations * 2 * math.pi)
            return width * math.log(turns_in_training) / (2 * math.log(base))

        low = max(math.floor(correction_dim(self.beta_fast)), 0)
        high = min(math.ceil(correction_dim(self.beta_slow)), width - 1)
        high = high + 0.001 if low == high else high  # HF's guard against a zero-width ramp
        ramp = ((torch.arange(width // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        keep = 1 - ramp  # 1: extrapolate (high frequencies), 0: interpolate by the factor
        return inv_freq / self.factor * (1 - keep) + inv_freq * keep

    def _llama3(self, inv_freq: torch.Tensor) -> torch.Tensor:
        original, s = self.original_max_position_embeddings, self.factor
        wavelength = 2 * math.pi / inv_freq
        low_wavelength, high_wavelength = original / self.low_freq_factor, original / self.high_freq_factor
        smooth = (original / wavelength - self.low_freq_factor) / (self.high_freq_factor - self.low_freq_factor)
        medium = (wavelength >= high_wavelength) & (wavelength <= low_wavelength)
        scaled = torch.where(wavelength > low_wavelength, inv_freq / s, inv_freq)
        return torch.where(medium, (1 - smooth) * scaled / s + smooth * scaled, scaled)

    def label(self) -> str:
        """Short name for tables and reports, e.g. ``yarn:4``."""
        return f"{self.rope_type}:{self.factor:g}"

    @classmethod
    def from_label(cls, label: str, trained_positions: int) -> RopeScaling:
        """``"yarn:4"`` for a model trained on ``trained_positions`` positions: the method at factor 4 with
        its published defaults (YaRN β 32/1, Llama 3.1's low/high frequency factors 1 and 4)."""
        kind, _, factor = label.partition(":")
        try:
            factor = float(factor)
        except ValueError:
            factor = None
        if kind not in LABELLED_TYPES or factor is None:
            raise ValueError(f"eval scaling {label!r}: expected TYPE:FACTOR with TYPE one of "
                             f"{', '.join(LABELLED_TYPES)}, e.g. yarn:4")
        options = {"rope_type": kind, "factor": factor}
        if "original_max_position_embeddings" in SCALING_KEYS[kind][0]:
            options["original_max_position_embeddings"] = trained_positions
        if kind == "llama3":
            options.update(low_freq_factor=1.0, high_freq_factor=4.0)
        return cls.parse(options)


def rotary_frequencies(width: int, base: float, scaling: RopeScaling | None,
                       seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """Plain RoPE's ``base^(-2i/width)`` (float64) and factor 1, or the scaling's."""
    if scaling is None:
        return base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width), 1.0
    return scaling.frequencies(width, base, seq_len)


class RotaryAngles(nn.Module):
    """Complex turns ``a · exp(i · pos · θ_j)`` (``a``: the scaling's attention factor, else 1), cached
    for ``max_len`` positions, computed beyond.

    The cache is a real buffer ``(max_len, width/2, 2)`` (real and imaginary parts): ``Module.to(dtype)``
    casts a complex buffer to a real dtype by dropping its imaginary part, which would silently turn
    every rotation into a scaling. The frequencies stay a float64 attribute, not a buffer, so a
    half-precision model still turns positions beyond the cache by exact angles."""

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE, scaling: RopeScaling | None = None):
        super().__init__()
        if width % 2:
            raise ValueError(f"rotary width must be even, got {width}")
        self.width, self.base, self.scaling, self.max_len = width, base, scaling, max_len
        self.inv_freq, self.attention_factor = self.frequencies()  # (width/2,) float64
        turns = self._turns(torch.arange(max_len), torch.get_default_dtype())  # (max_len, width/2) complex
        self.register_buffer("turns", torch.view_as_real(turns), persistent=False)  # (max_len, width/2, 2)

    def rows(self, positions: Positions) -> torch.Tensor:
        """Complex turns ``(L, width/2)`` of 1-D ``positions``, in the cache's precision (at least float32)."""
        if self._grows_with(positions):
            inv_freq, _ = self.frequencies(positions.max_position + 1)
            return self._turns(positions.ids, self.turns.dtype, inv_freq)
        if positions.max_position < self.max_len:
            cached = positions.rows_of(self.turns)  # (L, width/2, 2), in the model's dtype
            return torch.view_as_complex(converted(cached, torch.promote_types(cached.dtype, torch.float32)))
        return self._turns(positions.ids, self.turns.dtype)

    def frequencies(self, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
        """Inverse frequencies ``(width/2,)`` float64 and the attention factor, at ``seq_len`` positions."""
        return rotary_frequencies(self.width, self.base, self.scaling, seq_len)

    def _grows_with(self, positions: Positions) -> bool:
        """Dynamic NTK or LongRoPE beyond the training length: the frequencies depend on this sequence's length."""
        scaling = self.scaling
        return (scaling is not None and scaling.rope_type in LENGTH_DEPENDENT_TYPES
                and positions.max_position + 1 > scaling.original_max_position_embeddings)

    def _turns(self, positions: torch.Tensor, dtype: torch.dtype, inv_freq: torch.Tensor | None = None,
               decay: torch.Tensor | None = None) -> torch.Tensor:
        """``(L,)`` positions -> ``(L, width/2)`` complex turns, complex64 or (for float64) complex128;
        ``decay (L, width/2)`` multiplies their length (xPos)."""
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        angle = positions.to(torch.float64)[:, None] * inv_freq.to(positions.device)  # (L, w/2)
        length = torch.full_like(angle, self.attention_factor) if decay is None else decay * self.attention_factor
        complex_dtype = torch.promote_types(torch.promote_types(dtype, torch.float32), torch.complex64)
        return torch.polar(length, angle).to(complex_dtype)

    def query_key_rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Turns for queries and for keys (the same for RoPE), ``(L, width/2)`` each."""
        rows = self.rows(positions)
        return rows, rows

    @staticmethod
    def turn(x: torch.Tensor, rows: torch.Tensor, overwrite: bool = False) -> torch.Tensor:
        """Rotate ``x (…, L, width)`` by ``rows (L, width/2)``: each pair ``(x_2i, x_2i+1)`` turns by its angle.

        Half precision is rotated in float32 (complex numbers need it) and returned in its own dtype. A
        conversion runs only where a dtype differs: each no-op ``.to`` is a dispatch of its own, about a third
        of a decode step's turn of q and k. ``overwrite`` (``x`` is the caller's to change): a float32 or
        float64 ``x`` that records no gradient is turned in place and returned, the same multiply bit for bit
        without a new tensor (:meth:`PositionalEncoding.rotate`)."""
        exact = torch.promote_types(x.dtype, torch.float32)
        pairs = torch.view_as_complex(converted(x, exact).unflatten(-1, (-1, 2)))  # (…, L, width/2)
        if overwrite and x.dtype == exact and not x.requires_grad:
            pairs.mul_(converted(rows, pairs.dtype))
            return x
        turned = torch.view_as_real(pairs * converted(rows, pairs.dtype)).flatten(-2)  # (…, L, width)
        return converted(turned, x.dtype)


def rotate_heads(q: torch.Tensor, k: torch.Tensor, query_rows: torch.Tensor, key_rows: torch.Tensor,
                 overwrite: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn every pair of each head of ``q, k (…, L, d_head)`` by per-token complex turns ``(L, d_head/2)``; a
    pair that passes through (partial rotation) has the turn 1 (:func:`whole_head`). Every rotary encoding
    rotates this way, so turns chosen per token (one modality's here, another's there) are applied in one
    pass, and a partial rotation is one multiply over the head where splitting q and k and joining them
    again would copy each twice more."""
    return RotaryAngles.turn(q, query_rows, overwrite), RotaryAngles.turn(k, key_rows, overwrite)


def whole_head(pairs: int, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Turns ``(L, rotated pairs)`` of the leading pairs of a head of ``pairs`` -> ``(L, pairs)`` each, the
    pairs after them turned by exactly 1 (``x·1 = x``: they pass through bit for bit)."""
    passing = pairs - rows[0].shape[-1]
    if not passing:
        return rows
    ones = rows[0].new_ones(rows[0].shape[0], passing)  # (L, passing)
    return tuple(torch.cat([turns, ones], dim=-1) for turns in rows)


class XPosAngles(RotaryAngles):
    """xPos (Sun et al. 2022): queries turn by ``ζ^((n−c)/scale_base)·e^{iθn}``, keys by
    ``ζ^(−(n−c)/scale_base)·e^{iθn}``, with ``ζ_j = (2j/width + γ)/(1 + γ)`` per pair: the logit of
    query m and key n decays as ``ζ^((m−n)/scale_base)`` and still depends on ``m − n`` alone. The
    centre ``c`` cancels; it keeps the powers in range (x-transformers centres on the sequence):
    ``max_len // 2`` for the cached turns, the largest position // 2 beyond them."""

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE, scaling: RopeScaling | None = None,
                 scale_base: float = 512.0, gamma: float = 0.4):
        super().__init__(width, max_len, base, scaling)
        self.scale_base, self.gamma = scale_base, gamma
        self.zeta = (torch.arange(0, width, 2, dtype=torch.float64) / width + gamma) / (1 + gamma)  # (width/2,)
        positions = torch.arange(max_len)
        for name, sign in (("query_turns", 1), ("key_turns", -1)):
            turns = self._decayed(positions, sign, max_len // 2, torch.get_default_dtype())
            self.register_buffer(name, torch.view_as_real(turns), persistent=False)  # (max_len, width/2, 2)

    def _decayed(self, positions: torch.Tensor, sign: int, centre: int, dtype: torch.dtype) -> torch.Tensor:
        power = sign * (positions.to(torch.float64) - centre) / self.scale_base  # (L,)
        return self._turns(positions, dtype, decay=self.zeta.to(positions.device) ** power[:, None])

    def query_key_rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        if positions.max_position < self.max_len and not self._grows_with(positions):
            exact = torch.promote_types(self.query_turns.dtype, torch.float32)
            return (torch.view_as_complex(converted(positions.rows_of(self.query_turns), exact)),
                    torch.view_as_complex(converted(positions.rows_of(self.key_turns), exact)))
        rows = self.rows(positions)  # the angles (dynamic frequencies included), length 1 or the attention factor
        centre = positions.max_position // 2
        power = (positions.ids.to(torch.float64) - centre)[:, None] / self.scale_base  # (L, 1)
        decay = (self.zeta.to(rows.device) ** power).to(rows.real.dtype)  # (L, width/2)
        return rows * decay, rows / decay


class TurnedByRows:
    """The query/key hook of an encoding whose ``rows(positions)`` gives per-token complex turns of the
    queries' and the keys' pairs ``(L, d_head/2)`` each: one :func:`rotate_heads` for every rotary scheme."""

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        return rotate_heads(q, k, *self.rows(positions))

    def rotate_in_place(self, q: torch.Tensor, k: torch.Tensor,
                        positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        return rotate_heads(q, k, *self.rows(positions), overwrite=True)


class Rope(TurnedByRows, PositionalEncoding):
    """RoPE. Family options: ``base`` (θ, default 10000), ``rotary_fraction`` (the first
    ``⌊f·d_head/2⌋`` pairs of each head rotate, frequencies over the rotated width — HF's
    ``partial_rotary_factor``; the rest pass through) and ``scaling`` (a dict with HF's keys)."""

    hook = "qk"
    angles_type = RotaryAngles

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 base: float = ROPE_BASE, rotary_fraction: float = 1.0, scaling: dict | None = None, **angle_options):
        super().__init__(d_model, n_heads, max_len, causal)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if not base > 1:
            raise ValueError(f"base must be > 1, got {base!r}")
        if not 0 < rotary_fraction <= 1:
            raise ValueError(f"rotary_fraction must lie in (0, 1], got {rotary_fraction!r}")
        d_head = d_model // n_heads
        self.rotated = 2 * math.floor(rotary_fraction * d_head / 2)  # dims of a head that turn
        if self.rotated == 0:
            raise ValueError(f"rotary_fraction {rotary_fraction} rotates no pair of a {d_head}-wide head")
        self.scaling = RopeScaling.parse(scaling)
        self.angle_options = angle_options
        self.angles = self.angles_type(self.rotated, max_len, base, self.scaling, **angle_options)

    @property
    def rotated_width(self) -> int:
        return self.n_heads * self.rotated

    def rescaled(self, scaling: RopeScaling) -> Rope:
        """This encoding with its frequencies scaled (a training-free context extension of a trained
        model): the same everything else, nothing to learn."""
        scaled = copy.deepcopy(self)
        scaled.scaling = scaling
        scaled.angles = self.angles_type(self.rotated, self.max_len, self.angles.base, scaling, **self.angle_options)
        return scaled.to(self.angles.turns.device)

    @once_per_positions
    def rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Complex turns of queries and of keys, ``(L, d_head/2)`` each: the rotated pairs', then 1 for the rest."""
        return self.whole_head(*self.angles.query_key_rows(positions))

    def whole_head(self, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Turns of the rotated pairs ``(L, rotated/2)`` -> ``(L, d_head/2)``, the passing pairs' turned by 1."""
        return whole_head(self.d_model // self.n_heads // 2, *rows)

    def rotation_flops(self, batch_size: int, seq_len: int, mode: str) -> int:
        """RoPE's count over the whole head: the pairs that pass through are multiplied too, by 1
        (:func:`rotate_heads`)."""
        return super().rotation_flops(batch_size, seq_len, mode) * self.d_model // self.rotated_width

    def extra_repr(self) -> str:
        scaling = f", scaling={self.scaling.label()}" if self.scaling else ""
        return f"{super().extra_repr()}, base={self.angles.base:g}, rotated={self.rotated}{scaling}"


class XPos(Rope):
    """xPos: RoPE with a decay (:class:`XPosAngles`). Extra family options: ``scale_base`` (512), ``gamma`` (0.4)."""

    angles_type = XPosAngles


QWEN2VL_SECTION, QWEN3VL_SECTION = (16, 24, 24), (24, 20, 20)  # HF's mrope_section, of 64 pairs (a 128-wide head)
HF_SECTION_PAIRS = 64


class MRope(Rope):
    """M-RoPE (Qwen2-VL, Qwen3-VL): positions have three axes (text/time, row, column) and each frequency
    pair of a head turns by one of them. Frequencies run over the whole rotated width as in 1-D RoPE, so
    text — one axis, or three equal axes — is turned exactly as 1-D RoPE turns it.

    Family options, with Hugging Face's names (``rope_parameters`` of Qwen2-VL / Qwen3-VL):

    * ``mrope_section``: pairs per axis (text/time, rows, columns); default Qwen2-VL's (16, 24, 24).
    * ``section_pairs``: the pairs ``mrope_section`` was written for (``None``: this head's, so it
      must sum to them). Another count scales it to this head: rows and columns
      ``⌊s · pairs / section_pairs⌋``, text/time the rest — at a 16-wide head (8 pairs) Qwen2-VL's
      (16, 24, 24) of 64 becomes (2, 3, 3) and Qwen3-VL's (24, 20, 20) becomes (4, 2, 2).
    * ``mrope_interleaved``: ``False`` (Qwen2-VL): contiguous sections, the first ``s_0`` pairs turn with
      text/time, the next ``s_1`` with rows, the last ``s_2`` with columns, so columns get only the
      lowest frequencies. ``True`` (Qwen3-VL's ``apply_interleaved_mrope``): pair ``i`` turns with rows
      when ``i % 3 == 1`` and ``i < 3·s_1``, with columns when ``i % 3 == 2`` and ``i < 3·s_2``, else
      with text/time, so every axis spans the spectrum.
    """

    axes = "multimodal"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 mrope_section: tuple[int, int, int] | list[int] | None = None, section_pairs: int | None = None,
                 mrope_interleaved: bool = False, **rope_options):
        super().__init__(d_model, n_heads, max_len, causal, **rope_options)
        pairs = self.rotated // 2
        if mrope_section is None:
            mrope_section, section_pairs = QWEN2VL_SECTION, HF_SECTION_PAIRS
        self.sections = scaled_section(tuple(mrope_section), section_pairs or pairs, pairs)
        if not isinstance(mrope_interleaved, bool):
            raise ValueError(f"mrope_interleaved must be true or false, got {mrope_interleaved!r}")
        self.interleaved = mrope_interleaved
        axis = pair_axes(self.sections, self.interleaved)  # (pairs,) 0 text/time, 1 rows, 2 columns
        self.register_buffer("axis_of_pair", axis, persistent=False)

    @once_per_positions
    def rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        if positions.axes == 1:  # text only: every axis is the text position
            return super().rows(positions)
        if positions.axes != 3:
            raise ValueError(f"mrope needs positions with 1 or 3 axes (text/time, row, column), got {positions.axes}")
        per_axis = [self.angles.query_key_rows(positions.axis(a)) for a in range(3)]  # 3 × ((L, pairs), (L, pairs))
        chosen = self.axis_of_pair.to(positions.ids.device)
        picked = [torch.stack([rows[side] for rows in per_axis])  # (3, L, pairs)
                  .gather(0, chosen.expand(1, len(positions), -1))[0] for side in (0, 1)]  # (L, pairs) each
        return self.whole_head(*picked)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, sections={self.sections}{', interleaved' if self.interleaved else ''}"


def scaled_section(section: tuple[int, ...], section_pairs: int, pairs: int) -> tuple[int, int, int]:
    """``mrope_section`` written for ``section_pairs`` pairs, at a head of ``pairs``: rows and columns
    ``⌊s · pairs / section_pairs⌋``, text/time the rest (unchanged when the two counts agree)."""
    if len(section) != 3 or min(section) < 0 or sum(section) != section_pairs:
        raise ValueError(f"mrope_section must be three counts of frequency pairs summing to {section_pairs}, "
                         f"got {section!r}")
    rows, columns = (s * pairs // section_pairs for s in section[1:])
    return pairs - rows - columns, rows, columns


def pair_axes(sections: tuple[int, int, int], interleaved: bool) -> torch.Tensor:
    """``(pairs,)`` the axis each frequency pair turns with: 0 text/time, 1 rows, 2 columns."""
    pairs = sum(sections)
    if not interleaved:
        return torch.repeat_interleave(torch.arange(3), torch.tensor(sections))
    if 3 * sections[1] > pairs + 1 or 3 * sections[2] > pairs:
        raise ValueError(f"interleaved mrope_section {sections}: rows need 3·s_1 <= {pairs + 1} and columns "
                         f"3·s_2 <= {pairs} pairs (pair i turns with rows at i % 3 == 1, columns at i % 3 == 2)")
    i = torch.arange(pairs)
    rows, columns = (i % 3 == 1) & (i < 3 * sections[1]), (i % 3 == 2) & (i < 3 * sections[2])
    return rows.long() + 2 * columns.long()


register("rope")(Rope)
register("rope_theta500k", base=500_000.0)(Rope)  # Llama 3's base
register("rope_p50", rotary_fraction=0.5)(Rope)  # half of each head rotates, a ladder over that half (HF's
# partial_rotary_factor 0.5; GPT-NeoX used 0.25): not p-RoPE, which keeps part of the full-width ladder (p_rope.py)
register("xpos")(XPos)
register("mrope")(MRope)
register("mrope_qwen2vl", base=1e6, mrope_section=QWEN2VL_SECTION, section_pairs=HF_SECTION_PAIRS)(MRope)
register("mrope_qwen3vl", base=5e6, mrope_section=QWEN3VL_SECTION, section_pairs=HF_SECTION_PAIRS,
         mrope_interleaved=True)(MRope)
# The mosaic's M-RoPE-style arm, chosen before its run by posbench.arm_rule (Qwen3-VL's interleaved split, the
# smallest base of the declared ladder at which every axis of mosaic_qa clears the axis check; tested there)
register("mrope_mosaic", base=100.0, mrope_section=QWEN3VL_SECTION, section_pairs=HF_SECTION_PAIRS,
         mrope_interleaved=True)(MRope)
register("rope_randomized", randomized=True)(Rope)
