"""Page 1's guidance rows (posbench/report/verdicts.py) on small hand-made tables: the rule in words,
the rows judged per size and task, the evidence lines and verdicts.csv. The statistics themselves are
tested in test_evidence.py; the whole report in test_report.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from posbench import comparisons, evidence
from posbench.report import data, verdicts

SPREAD = 0.01 * np.linspace(-1.5, 1.5, 10)  # ten seeds around each mean
ARMS = {  # task -> metric, {encoding: mean}: every comparator within δ of the added arm, or clearly better
    "lm_prose": ("bits_per_char", {"sinusoidal": 2.30, "rope": 2.29, "alibi": 2.31}),
    "scan": ("exact_match", {"sinusoidal": 0.60, "rope": 0.61}),
    "reverse": ("exact_match", {"sinusoidal": 0.30, "rope": 0.90}),
}


def extrapolation(sizes=("tiny",)) -> pd.DataFrame:
    rows = [{"task": task, "encoding": encoding, "size": size, "seed": seed, "status": "ok", "metric": metric,
             "length_ratio": 1.0, "eval_len": 16, "value": mean + SPREAD[seed], "token_accuracy": 0.95,
             "chance": 4.2 if metric == "bits_per_char" else np.nan, "token_chance": 0.1, "steps": 300,
             "batch_size": 32}
            for task, (metric, means) in ARMS.items() for encoding, mean in means.items()
            for size in sizes for seed in range(10)]
    return pd.DataFrame(rows)


def tables(frame: pd.DataFrame, preset: str | None = None, items: pd.DataFrame | None = None) -> data.Tables:
    found = data.Tables({"extrapolation": frame}, {}, None, items=items)
    found.derived["preset"] = preset
    return found


def test_each_rule_in_words():
    adding, other = verdicts.ROWS[0], verdicts.ROWS[3]
    assert (adding.key, adding.claim, other.key, other.claim) == (
        "standard_nlp", comparisons.ADDING_SUFFICES, "long_sequences", comparisons.OTHER_SCHEME_WINS)
    assert verdicts.rule(adding) == (
        "Supported when every declared comparator is shown not better than the added encoding by its margin δ "
        "(95 % Welch interval below δ, Holm across the row, >= 10 seeds per arm); not supported when one is shown "
        "better by more than δ; otherwise inconclusive.")
    assert verdicts.rule(other) == (
        "Supported when a declared comparator is shown better than the added encoding by more than its margin δ "
        "(95 % Welch interval above δ, Holm across the row, >= 10 seeds per arm); not supported when every one is "
        "shown not better by δ; otherwise inconclusive.")


def test_results_without_a_needed_column_are_no_results():
    found = tables(extrapolation().drop(columns="status"))
    frame = verdicts.results_frame(found)
    assert frame.empty and list(frame.columns) == list(verdicts.RESULT_COLUMNS)
    judged = verdicts.judged(found)
    assert list(judged) == [row.key for row in verdicts.ROWS] and all(v == [] for v in judged.values())
    assert verdicts.row_verdict(judged["standard_nlp"]) == (
        "inconclusive: no declared comparison has results in these tables")
    table = verdicts.verdict_table(found)
    assert table.empty and list(table.columns) == ["declaration_sha256", "decides"]


def test_a_row_over_two_tasks_and_two_sizes():
    """standard_nlp with every comparison deciding (no preset): lm_prose (rope, alibi) and scan (rope) at
    two sizes; every comparator within δ, so each task and the row are supported at each size."""
    found = tables(extrapolation(sizes=("tiny", "small")))
    judged = verdicts.judged(found)["standard_nlp"]
    assert [(j.size, j.verdict, j.by_task) for j in judged] == [
        (size, "supported", {"lm_prose": "supported", "scan": "supported"}) for size in ("small", "tiny")]
    assert verdicts.row_verdict(judged) == "small: supported; tiny: supported"
    assert verdicts.row_verdict(judged[1:]) == "supported"
    expected = []
    for judgement in judged:
        assert [j.comparison.id for j in judgement.judged] == ["prose-rope", "prose-alibi", "scan-rope"]
        expected += [j.line() for j in judgement.judged]
        expected += [f"by task ({judgement.size}): lm_prose supported, scan supported",
                     "note: lm_prose: every arm trained 300 steps × batch 32",  # once, though two comparisons say it
                     "note: scan: every arm trained 300 steps × batch 32"]
    assert verdicts.evidence_lines(judged) == expected
    # one task: no by-task line
    reverse = verdicts.judged(found)["precise_position"]
    assert verdicts.evidence_lines(reverse[:1]) == [
        reverse[0].judged[0].line(), "note: reverse: every arm trained 300 steps × batch 32"]


def test_the_preset_decides_and_the_rest_is_descriptive():
    found = tables(extrapolation(), preset="default")
    deciding, descriptive = verdicts.judged(found), verdicts.judged(found, descriptive=True)
    assert [j.comparison.id for j in deciding["standard_nlp"][0].judged] == ["scan-rope"]
    assert [j.comparison.id for j in descriptive["standard_nlp"][0].judged] == ["prose-rope", "prose-alibi"]
    (scan,), (rope, alibi) = deciding["standard_nlp"][0].judged, descriptive["standard_nlp"][0].judged
    assert verdicts.evidence_lines(deciding["standard_nlp"], descriptive["standard_nlp"]) == [
        scan.line(), "note: scan: every arm trained 300 steps × batch 32",
        f"not in this preset, descriptive: {rope.line()}", f"not in this preset, descriptive: {alibi.line()}"]
    table = verdicts.verdict_table(found)
    assert list(table.columns[:2]) == ["declaration_sha256", "row"] and list(table.columns[-1:]) == ["decides"]
    assert table.index.tolist() == list(range(len(table)))
    decides = table.set_index("comparison")["decides"]
    assert decides[["scan-rope", "reverse-rope"]].tolist() == [True, False]  # reverse-rope: full preset only
    assert decides[["prose-alibi", "prose-rope"]].tolist() == [False, False]


def test_the_items_give_each_comparison_its_evaluation_error():
    n_items = 40
    items = pd.DataFrame([{"task": "reverse", "encoding": encoding, "size": "tiny", "seed": seed, "eval_len": 16,
                           "item": i, "loss_sum": 1.0, "scored": 8, "correct": 8 if right else 4, "exact": int(right)}
                          for encoding, share in (("sinusoidal", 3), ("rope", 1)) for seed in range(10)
                          for i in range(n_items) for right in [i % share == 0]])
    found = tables(extrapolation(), items=items)
    (judgement,) = verdicts.judged(found)["precise_position"]
    (reverse,) = judgement.judged
    expected = evidence.item_error(items, reverse.comparison, "tiny", reverse.added, reverse.comparator)
    assert reverse.eval_se == expected and 0.06 < expected < 0.09  # binomial: sqrt(0.35 · 0.65 / 40) = 0.075
    table = verdicts.verdict_table(found).set_index("comparison")
    assert table.loc["reverse-rope", "eval_se"] == pytest.approx(expected)
    assert math.isnan(table.loc["prose-rope", "eval_se"])  # no lm_prose items
