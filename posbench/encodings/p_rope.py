"""p-RoPE (Barbero et al., "Round and Round We Go! What makes Rotary Positional Encodings useful?",
ICLR 2025): RoPE with the lowest frequencies removed.

The paper's ``apply_p_rope`` keeps ``⌊p·d_head/2⌋`` pairs turning at the full-width ladder's
frequencies ``base^(-2i/d_head)`` (the fastest ones) and gives the other pairs an infinite timescale:
they pass through unturned, free to carry content at any distance. ``p = 1`` is RoPE, ``p = 0`` NoPE.
Gemma's ``apply_rope(rope_proportion=…)`` and Hugging Face's ``rope_type: "proportional"`` compute the
same frequencies.

``rope``'s ``rotary_fraction`` (HF's ``partial_rotary_factor``) differs: it lays a whole ladder, from
``base^0`` down to ``base^(-(r-2)/r)``, over the ``r`` rotated dimensions, so its slowest pair turns
about as slowly as full RoPE's. Here the slowest kept pair turns at ``base^(-2(k-1)/d_head)``, far
faster. The rotation itself is RoPE's (:func:`~posbench.encodings.rope.rotate_heads`: the first ``2k``
dimensions of each head turn, the rest are multiplied by 1); only the ladder differs.
"""

from __future__ import annotations

import math

import torch

from posbench.encodings.registry import register
from posbench.encodings.rope import ROPE_BASE, Rope, RopeScaling, RotaryAngles, rotary_frequencies


class LadderTopAngles(RotaryAngles):
    """Turns for the first ``width/2`` pairs of a ladder laid over ``ladder_width`` dimensions: the fastest
    rungs of the full-width ladder (a scaling, if any, rescales the whole ladder first)."""

    def __init__(self, width: int, max_len: int, base: float = ROPE_BASE, scaling: RopeScaling | None = None, *,
                 ladder_width: int):
        self.ladder_width = ladder_width  # read by frequencies(), which RotaryAngles.__init__ calls
        super().__init__(width, max_len, base, scaling)

    def frequencies(self, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
        inv_freq, attention_factor = rotary_frequencies(self.ladder_width, self.base, self.scaling, seq_len)
        return inv_freq[: self.width // 2], attention_factor  # (width/2,) of (ladder_width/2,)


class PRope(Rope):
    """p-RoPE. Family options: ``kept_fraction`` (p: the first ``⌊p·d_head/2⌋`` pairs of each head turn
    at ``base^(-2i/d_head)``, the rest pass through; default 0.75, the larger of the paper's two
    settings), ``base`` and ``scaling`` (as ``rope``'s, over the full-width ladder)."""

    angles_type = LadderTopAngles

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 kept_fraction: float = 0.75, base: float = ROPE_BASE, scaling: dict | None = None):
        if not 0 < kept_fraction <= 1:
            raise ValueError(f"kept_fraction must lie in (0, 1], got {kept_fraction!r}")
        d_head = d_model // n_heads
        if math.floor(kept_fraction * d_head / 2) == 0:
            raise ValueError(f"kept_fraction {kept_fraction} keeps no frequency pair of a {d_head}-wide head")
        # Rope rotates the first 2·⌊f·d_head/2⌋ dimensions: the paper's int(p·d_head // 2) pairs.
        super().__init__(d_model, n_heads, max_len, causal, base=base, rotary_fraction=kept_fraction,
                         scaling=scaling, ladder_width=d_head)
        self.kept_fraction = kept_fraction

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, ladder={self.angles.ladder_width}"


register("p_rope")(PRope)  # p = 0.75
register("p_rope_25", kept_fraction=0.25)(PRope)  # the paper's other setting: a quarter of the ladder turns
