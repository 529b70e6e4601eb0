"""The report's look: a CJK font found at run time, one colour per encoding, print-friendly defaults.

Chinese text needs a font with CJK glyphs embedded in the PDF (TrueType, ``pdf.fonttype = 42``).
Matplotlib's font cache is built once and does not see fonts installed later, so the search also
walks the system's font files and registers the first that covers the glyphs the report prints.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import matplotlib

matplotlib.use("Agg")  # the report never opens a window

from matplotlib import font_manager

from posbench import encodings

PREFERRED_CJK = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC",
                 "PingFang SC", "Microsoft YaHei", "SimHei", "AR PL UMing CN")
CJK_PROBE = "何时使用相加考虑其他方案"  # glyphs the report must be able to draw
LATIN_FAMILY = "DejaVu Sans"

# Families share a hue (blues: sinusoidal, oranges: learned, greens: RoPE); colour-blind-safe base.
_FIXED_COLOURS = {
    "none": "#7f7f7f",
    "sinusoidal": "#1f4e9c", "sinusoidal_concat": "#5b8fd6", "sinusoidal_concat_fixed": "#9cc3f0",
    "sinusoidal_2d": "#17becf",
    "learned": "#d95f02", "learned_concat": "#f28e2b", "learned_concat_fixed": "#fdbf6f",
    "rope": "#1b7837", "rope_2d": "#7fbf7b",
    "alibi": "#c51b7d", "t5": "#6a3d9a",
}
# A spare colour for each other registered encoding and for a few scaled arms (rope+yarn:16): no two arms of
# one figure share a colour.
_SPARE_COLOURS = ("#8c564b", "#bcbd22", "#e377c2", "#393b79", "#637939", "#843c39", "#d62728", "#9467bd",
                  "#e6ab02", "#e7298a", "#7570b3", "#a6761d", "#5254a3", "#8ca252", "#8c6d31",
                  "#ad494a", "#7b4173", "#6b6ecf", "#b5cf6b", "#bd9e39", "#d6616b", "#a55194", "#ce6dbd",
                  "#e7ba52", "#756bb1", "#b15928", "#fb9a99", "#cab2d6", "#bc80bd", "#fccde5", "#9e9ac8")


def palette(arms=()) -> dict[str, str]:
    """Encoding name -> colour, for every registered encoding (the same in every figure), and for
    ``arms`` beyond them (a trained encoding evaluated with a scaling, ``rope+yarn:4``)."""
    return _palette(tuple(sorted(set(arms))))


@functools.cache
def _palette(arms: tuple[str, ...]) -> dict[str, str]:
    spare = itertools.cycle(_SPARE_COLOURS)
    colours = {name: _FIXED_COLOURS.get(name) or next(spare) for name in encodings.names()}
    return {**colours, **{arm: next(spare) for arm in arms if arm not in colours}}


def colour(encoding: str) -> str:
    return palette().get(encoding, "#000000")


def _covers(path: str, text: str) -> bool:
    try:
        font = matplotlib.ft2font.FT2Font(path)
    except Exception:  # noqa: BLE001 - unreadable font files are simply not candidates
        return False
    return all(font.get_char_index(ord(ch)) for ch in text)


@functools.cache
def cjk_family() -> str | None:
    """The family name of a font that draws Chinese, registering it with matplotlib if needed."""
    known = {font.name for font in font_manager.fontManager.ttflist}
    for name in PREFERRED_CJK:
        if name in known:
            return name
    for path in sorted(font_manager.findSystemFonts()):
        if _covers(path, CJK_PROBE):
            font_manager.fontManager.addfont(path)
            return font_manager.FontProperties(fname=path).get_name()
    return None


def apply(chinese: bool) -> None:
    """Set matplotlib and seaborn defaults for the report (embedded TrueType, legible print sizes)."""
    import logging

    import seaborn as sns

    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # "no bold CJK face" is expected

    sns.set_theme(style="whitegrid", context="paper")
    family = [LATIN_FAMILY] + ([cjk_family()] if chinese else [])
    matplotlib.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "font.family": family, "axes.unicode_minus": True,
        "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "figure.dpi": 100, "savefig.dpi": 150,
    })


def chinese_available() -> bool:
    """Whether Chinese can be drawn; warns once (English lines only) when no CJK font exists."""
    if cjk_family() is None:
        warnings.warn("posbench report: no CJK font found (install fonts-wqy-microhei); "
                      "the guidance rows are shown in English only", stacklevel=2)
        return False
    return True
