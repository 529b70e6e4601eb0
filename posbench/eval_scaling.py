"""The one check of a training-free RoPE scaling (``yarn:4``, an arm such as ``rope+yarn:4``) on an encoding:
train's config, the workflow's train jobs and the published shapes all ask it, and none of them trains or
builds a model to do so."""

from __future__ import annotations

from posbench import encodings
from posbench.encodings.rope import RopeScaling


def check_eval_scaling(encoding: str, labels, trained_positions: int = 2) -> None:
    """A one-line ``ValueError`` unless every label is a valid scaling and ``encoding`` has rotary
    frequencies to scale (checked on a tiny instance of it)."""
    tiny = encodings.build(encoding, d_model=16, n_heads=2, max_len=4)
    for label in labels:
        tiny.rescaled(RopeScaling.from_label(label, trained_positions))
