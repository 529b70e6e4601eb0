"""Which M-RoPE-style arm decides the multimodal row: a rule written down before the arm's run.

The shipped comparator, ``mrope`` (Qwen2-VL's contiguous sections at base 10,000), is blind on the
mosaic's columns by the axis check (:mod:`posbench.axis_check`), so its comparison decides nothing. Its
replacement is not picked by looking at results: this rule picks it from the initialised model alone.

* Layout: Qwen3-VL's interleaved ``mrope_section`` (24, 20, 20) of 64 pairs (:data:`LAYOUT`), scaled to
  the head, so every axis spans the spectrum (at a 16-wide head: (4, 2, 2)).
* Base: the smallest of the declared ladder :data:`BASES` at which every axis the task's positions use
  clears the check's :data:`~posbench.axis_check.BLIND` threshold at ``size`` (seed
  :data:`~posbench.axis_check.SEED`): among the standard bases, the one whose pairs turn fastest over a
  small grid, provided no axis is blind there. No base clearing is a ``ValueError``: no arm is declared.

At size tiny on ``mosaic_qa`` (a 4×4 grid of patches, six words) every base of the ladder clears (columns:
0.28 of 1-D RoPE's change at 100, 0.086 at 10,000; contiguous sections at 10,000: 0.0032, blind), and the
rule chose base 100, registered as ``mrope_mosaic`` (``posbench/encodings/rope.py``; a test holds the
two together). Base 100 is also the base of RoPE-Axial on 2-D patch grids (Heo et al., "Rotary Position
Embedding for Vision Transformer", ECCV 2024: ``rope_theta=100.0`` in naver-ai/rope-vit's
``deit/models_v2_rope.py``, a file the repository's NOTICE puts under the Llama 2 Community License; the
figure is cited, no code taken).
"""

from __future__ import annotations

from posbench import axis_check
from posbench.comparisons import ArmSpec
from posbench.encodings.rope import HF_SECTION_PAIRS, QWEN3VL_SECTION

FAMILY = "mrope"
BASES = (100.0, 500.0, 1000.0, 10000.0)  # standard RoPE bases, smallest first
LAYOUT = {"mrope_section": QWEN3VL_SECTION, "section_pairs": HF_SECTION_PAIRS, "mrope_interleaved": True}


def options(base: float, layout: dict | None = None) -> dict:
    """The family options of the arm at ``base`` with ``layout`` (default :data:`LAYOUT`)."""
    return {"base": base, **(LAYOUT if layout is None else layout)}


def figures(task: str, size: str, base: float, layout: dict | None = None) -> dict[str, float]:
    """The axis check's figure per axis of ``task`` for the arm at ``base`` (1-D RoPE's change = 1)."""
    chosen = tuple(sorted(options(base, layout).items()))
    return axis_check.sensitivity(ArmSpec(task, FAMILY), size, chosen)


def choose(task: str, size: str, bases: tuple[float, ...] = BASES, layout: dict | None = None) -> dict:
    """The family options of the first arm of ``bases``, in their order, that sees every axis of ``task``
    at ``size``; a one-line ``ValueError`` naming each base's blindest axis when none does."""
    blindest = {}
    for base in bases:
        seen = figures(task, size, base, layout)
        if min(seen.values()) >= axis_check.BLIND:
            return options(base, layout)
        blindest[base] = min(seen.items(), key=lambda item: item[1])
    tried = "; ".join(f"base {base:g}: {axis} {ratio:.2%}" for base, (axis, ratio) in blindest.items())
    raise ValueError(f"no {FAMILY} arm of bases {', '.join(f'{b:g}' for b in bases)} sees every axis of {task} at "
                     f"{size} (blindest axis each, below {axis_check.BLIND:.0%}: {tried}); declare none")
