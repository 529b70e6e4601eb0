"""The rule that chose the mosaic's M-RoPE-style arm before its run (posbench/arm_rule.py): what it chooses on
the shipped mosaic_qa geometry, that the registered preset is that choice, and that it refuses when no arm sees."""

from __future__ import annotations

import pytest

from posbench import arm_rule, axis_check
from posbench.encodings import registry
from posbench.encodings.rope import HF_SECTION_PAIRS, QWEN2VL_SECTION, MRope

CONTIGUOUS = {"mrope_section": QWEN2VL_SECTION, "section_pairs": HF_SECTION_PAIRS, "mrope_interleaved": False}


def test_the_rule_chooses_the_smallest_base_on_the_mosaic_and_the_preset_is_its_choice():
    chosen = arm_rule.choose("mosaic_qa", "tiny")
    assert chosen == {"base": 100.0, "mrope_section": (24, 20, 20), "section_pairs": 64, "mrope_interleaved": True}
    assert registry._REGISTRY["mrope_mosaic"] == (MRope, chosen)


def test_every_base_of_the_ladder_sees_the_mosaic_interleaved_and_a_smaller_base_sees_more():
    """Size tiny, seed 0: the columns' figure falls as the base grows (0.28 at 100, 0.086 at 10,000), none blind."""
    columns = [arm_rule.figures("mosaic_qa", "tiny", base)["column"] for base in arm_rule.BASES]
    assert columns == sorted(columns, reverse=True) and min(columns) > axis_check.BLIND
    assert 0.2 < columns[0] < 0.35 and 0.05 < columns[-1] < 0.12


def test_the_rule_skips_a_blind_base_and_refuses_when_nothing_sees():
    """Qwen2-VL's contiguous split: columns clear 1 % at base 1,000 (1.45 %), not at 10,000 (0.32 %) or 10⁶."""
    assert arm_rule.choose("mosaic_qa", "tiny", (10000.0, 1000.0), CONTIGUOUS)["base"] == 1000.0
    with pytest.raises(ValueError) as error:
        arm_rule.choose("mosaic_qa", "tiny", (10000.0, 1e6), CONTIGUOUS)
    assert str(error.value).startswith(
        "no mrope arm of bases 10000, 1e+06 sees every axis of mosaic_qa at tiny (blindest axis each, below 1%: "
        "base 10000: column 0.32%; base 1e+06: column 0.02%)")
