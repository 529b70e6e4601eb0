"""Separate encodings per modality: text tokens get a 1-D encoding, image patches a 2-D one.

The other way to mix vision and language is M-RoPE (:class:`~posbench.encodings.rope.MRope`): one
rotary scheme whose frequencies are shared between the axes. Here each modality keeps its own
encoding (e.g. ``sinusoidal_2d`` on patches, ``sinusoidal`` on text) and each token gets its own
modality's encoding at its own ids.

Positions follow M-RoPE's layout, so one batch serves both:

* ``(L,)`` ids: every token is text (the text part alone, exactly);
* ``(L, 2)`` ids, (row, column): every token is a patch (the image part alone, exactly);
* ``(L, 3)`` ids, (text, row, column), with ``modality (L,)`` (:data:`posbench.positions.TEXT`,
  :data:`~posbench.positions.IMAGE`): text tokens read the text axis, image tokens the (row, column) axes.

The choice is made per token on the device (``torch.where`` on the modality ids), never by reading
them on the host: the parts' position vectors (or rotary turns) are built for every token and the
chosen ones are combined with the tokens in one pass, so a mixed sequence costs one add (or one
rotation) like either part alone. The parts are built from the registry and are submodules, so a
learned part's table counts as position parameters.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from posbench.encodings.absolute import AbsoluteEncoding
from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import build, register
from posbench.encodings.rope import TurnedByRows
from posbench.positions import IMAGE, Positions, once_per_positions

ALLOWED = ("two input encodings with the same combine and widths (e.g. sinusoidal + sinusoidal_2d), "
           "or two rotary encodings with the same rotated width (e.g. rope + rope_2d)")


class PerModality(PositionalEncoding):
    """One encoding for text, one for image patches; the subclass is the hook they share."""

    axes = "multimodal"

    def __init__(self, text: PositionalEncoding, image: PositionalEncoding):
        super().__init__(text.d_model, text.n_heads, text.max_len, text.causal)
        self.text, self.image = text, image
        self.bounded = text.bounded or image.bounded
        self.trained_positions = text.trained_positions or image.trained_positions

    @property
    def combine(self) -> str:
        return self.text.combine

    @property
    def token_width(self) -> int:
        return self.text.token_width

    @property
    def model_width(self) -> int:
        return self.text.model_width

    def split(self, positions: Positions) -> tuple[Positions, Positions, torch.Tensor]:
        """Mixed ``(L, 3)`` positions -> the text part's ``(L,)``, the image part's ``(L, 2)`` and
        ``is_image (L, 1)`` bool. Both parts see every token (the other modality's results are
        discarded), each bounded by the bound of all axes."""
        if positions.axes != 3 or positions.modality is None:
            raise ValueError(f"per-modality positions are (L,) text ids, (L, 2) patch ids or (L, 3) (text, row, "
                             f"column) ids with a modality per token; got {positions.axes} axes"
                             f"{'' if positions.modality is not None else ' and no modality'}")
        image = replace(positions, ids=positions.ids[:, 1:], contiguous=False)  # (L, 2) row, column
        return positions.axis(0), image, (positions.modality == IMAGE)[:, None]


class PerModalityInput(PerModality):
    """Position vectors added to (or concatenated with) the tokens, each from its own modality's table."""

    hook = "input"

    def inject(self, tokens: torch.Tensor, positions: Positions) -> torch.Tensor:
        if positions.axes == 1:
            return self.text.inject(tokens, positions)
        if positions.axes == 2:
            return self.image.inject(tokens, positions)
        text, image, is_image = self.split(positions)
        vectors = torch.where(is_image, self.image.lookup(image), self.text.lookup(text))  # (L, d_pos)
        return self.text.combine_vectors(tokens, vectors)  # (B, L, model_width)


class PerModalityRotary(TurnedByRows, PerModality):
    """Queries and keys turned by their own modality's rotary turns."""

    hook = "qk"

    @property
    def rotated_width(self) -> int:
        return self.text.rotated_width

    @once_per_positions
    def rows(self, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Turns of queries and of keys ``(L, d_head/2)``: each token's from its own modality's encoding, split
        and joined once per forward pass for all layers (each part's rows are of the split's own positions)."""
        if positions.axes == 1:
            return self.text.rows(positions)
        if positions.axes == 2:
            return self.image.rows(positions)
        text, image, is_image = self.split(positions)
        (text_query, text_key), (image_query, image_key) = self.text.rows(text), self.image.rows(image)  # (L, pairs)
        return torch.where(is_image, image_query, text_query), torch.where(is_image, image_key, text_key)


def per_modality(d_model: int, n_heads: int, max_len: int, causal: bool = False, *, text: str, image: str,
                 text_options: dict | None = None, image_options: dict | None = None) -> PerModality:
    """Build registered encodings ``text`` and ``image`` (with their own family options) and compose them
    by the hook their traits share; parts that cannot share one pass are refused in one line."""
    sizes = dict(d_model=d_model, n_heads=n_heads, max_len=max_len, causal=causal)
    text_part, image_part = build(text, **sizes, **(text_options or {})), build(image, **sizes, **(image_options or {}))
    if (text_part.axes, image_part.axes) != ("1d", "2d"):
        raise ValueError(f"per-modality parts need a 1-D text encoding and a 2-D image encoding; got text={text} "
                         f"({text_part.axes}) and image={image} ({image_part.axes})")
    if text_part.traits.randomized or image_part.traits.randomized:  # a part's own positions() is never called
        raise ValueError(f"per-modality parts take the composition's positions, so a randomized part would be "
                         f"trained on plain ids; got text={text}, image={image}; allowed: parts without randomized")
    widths = (text_part.token_width, text_part.model_width) == (image_part.token_width, image_part.model_width)
    input_pair = all(isinstance(part, AbsoluteEncoding) for part in (text_part, image_part))
    rotary_pair = all(part.hook == "qk" and hasattr(part, "rows") for part in (text_part, image_part))
    if input_pair and text_part.combine == image_part.combine and widths:
        return PerModalityInput(text_part, image_part)
    if rotary_pair and text_part.rotated_width == image_part.rotated_width:
        return PerModalityRotary(text_part, image_part)
    raise ValueError(f"per-modality parts text={text} ({_describe(text_part)}) and image={image} "
                     f"({_describe(image_part)}) do not compose; allowed: {ALLOWED}")


def _describe(part: PositionalEncoding) -> str:
    """A part's hook and what must match, for the refusal."""
    if part.hook == "qk":
        return f"qk, rotated width {part.rotated_width}"
    return f"{part.hook}, combine {part.combine}, widths {part.token_width}->{part.model_width}"


register("sinusoidal_per_modality", text="sinusoidal", image="sinusoidal_2d")(per_modality)
register("rope_per_modality", text="rope", image="rope_2d")(per_modality)
