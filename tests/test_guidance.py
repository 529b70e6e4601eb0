"""The article's guidance rows and the task kinds: one table (posbench/guidance.py) that every reader uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from posbench import comparisons, guidance, tasks

PACKAGE = Path(guidance.__file__).parent
SOURCES = {path.relative_to(PACKAGE).as_posix(): path.read_text() for path in PACKAGE.rglob("*.py")}


def defined_in(text: str) -> list[str]:
    return sorted(name for name, source in SOURCES.items() if text in source)


@pytest.mark.parametrize("row", guidance.ROWS, ids=lambda row: row.key)
def test_each_rows_words_are_written_once(row):
    assert defined_in(row.quote) == defined_in(row.english) == ["guidance.py"]


def test_the_sides_and_task_kinds_are_written_once():
    for text in (*guidance.SIDES, *guidance.SIDES.values(), '"classification", "code", "structured"'):
        assert defined_in(text) == ["guidance.py"], text


def test_the_rows_are_the_articles_six_in_order_with_their_claims():
    assert [(row.key, row.claim) for row in guidance.ROWS] == [
        ("standard_nlp", guidance.ADDING_SUFFICES), ("fixed_length", guidance.ADDING_SUFFICES),
        ("parameter_budget", guidance.ADDING_SUFFICES), ("long_sequences", guidance.OTHER_SCHEME_WINS),
        ("precise_position", guidance.OTHER_SCHEME_WINS), ("multimodal", guidance.OTHER_SCHEME_WINS)]
    assert {c.row for c in comparisons.load().comparisons} == set(guidance.BY_KEY)


def test_task_kinds_name_the_rows_advise_brings_up():
    assert {kind: guidance.rows_for_kind(kind) for kind in guidance.KINDS} == {
        "nlp": ["standard_nlp"], "classification": ["standard_nlp"], "code": ["fixed_length", "precise_position"],
        "structured": ["precise_position"], "long": ["long_sequences"], "multimodal": ["multimodal"]}
    assert guidance.rows_for_kind(None) == []
    assert {tasks.get(name).kind for name in tasks.names()} <= set(guidance.KINDS)


def test_each_rows_named_situations_are_tested_by_registered_tasks():
    """What a row's words name (``covers``) points at tasks that exist, or at none where nothing can test
    it yet; the report's scope line reads it."""
    for row in guidance.ROWS:
        for cover in row.covers:
            assert set(cover.tasks) <= set(tasks.names()), (row.key, cover.words)
            assert cover.words.lower() in row.english.lower(), cover.words
    assert [c.words for c in guidance.BY_KEY["precise_position"].covers] == ["code generation", "structured data"]
    assert guidance.BY_KEY["fixed_length"].lengths and max(guidance.BY_KEY["fixed_length"].lengths) < 512
