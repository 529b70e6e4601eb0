"""The judge step (posbench/verdicts.py) and page 1's words for its verdicts.csv (posbench/report/
verdicts.py) on small hand-made tables: the rule in words, the rows judged per size and task, the
evidence lines and the summary as read back from the CSV. The statistics themselves are tested in
test_evidence.py; the whole report in test_report.py."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from posbench import comparisons, evidence, guidance
from posbench import verdicts as judge
from posbench.report import verdicts as report
from posbench.tables import RESULT_COLUMNS, Tables

SEEDS = comparisons.load().seed_rule.first_seed + np.arange(20)  # the deciding seeds of any first look
SPREAD = 0.01 * np.linspace(-1.5, 1.5, len(SEEDS))  # around each mean
STEPS = {"lm_prose": 500, "scan": 3200, "reverse": 2000}  # each task's declared budget (comparisons.yaml)
ARMS = {  # task -> metric, {encoding: mean}: every comparator within δ of the added arm, or clearly better
    "lm_prose": ("bits_per_char", {"sinusoidal": 2.30, "rope": 2.29, "alibi": 2.31}),
    "scan": ("exact_match", {"sinusoidal": 0.60, "rope": 0.61}),
    "reverse": ("exact_match", {"sinusoidal": 0.30, "rope": 0.90}),
}


def extrapolation(sizes=("tiny",)) -> pd.DataFrame:
    rows = [{"task": task, "encoding": encoding, "size": size, "seed": seed, "status": "ok", "metric": metric,
             "length_ratio": 1.0, "eval_len": 16, "value": mean + spread, "token_accuracy": 0.95,
             "chance": 4.2 if metric == "bits_per_char" else np.nan, "token_chance": 0.1, "steps": STEPS[task],
             "batch_size": 32}
            for task, (metric, means) in ARMS.items() for encoding, mean in means.items()
            for size in sizes for seed, spread in zip(SEEDS, SPREAD)]
    return pd.DataFrame(rows)


def tables(frame: pd.DataFrame, items: pd.DataFrame | None = None) -> Tables:
    return Tables({"extrapolation": frame}, {}, None, items=items)


def judged(found: Tables, preset: str | None = None) -> pd.DataFrame:
    """What the judge step writes to verdicts.csv, read back as the report reads it."""
    buffer = io.StringIO()
    judge.verdict_tables(found, preset)[0].to_csv(buffer, index=False)
    return pd.read_csv(io.StringIO(buffer.getvalue()))


def row_lines(found: Tables, key: str, preset: str | None = None, decides: bool = True):
    return report.of_row(judged(found, preset), guidance.BY_KEY[key], decides)


def judgements(found: Tables, key: str, preset: str | None = None, descriptive: bool = False):
    """The judgements behind one row, as posbench.evidence makes them (to compare the CSV's words with)."""
    chosen = judge.deciding(preset)
    if descriptive:
        chosen = [c for c in comparisons.load().comparisons if c not in chosen]
    found = evidence.judge(comparisons.load(), judge.results_frame(found), found.items, chosen)
    return [j for j in found if j.row == key]


def test_each_rule_in_words():
    adding, other = guidance.ROWS[0], guidance.ROWS[3]
    assert (adding.key, adding.claim, other.key, other.claim) == (
        "standard_nlp", guidance.ADDING_SUFFICES, "long_sequences", guidance.OTHER_SCHEME_WINS)
    how = ("Welch interval at the look's level, Holm across the row, every declared seed of the look: n per arm "
           "from the power rule, a second look with n more where the first is unclear or unstable")
    assert judge.rule(adding) == (
        "Supported when every declared comparator is shown not better than the added encoding by its margin δ "
        f"(interval below δ; {how}); not supported when one is shown better by more than δ; otherwise inconclusive.")
    assert judge.rule(other) == (
        "Supported when a declared comparator is shown better than the added encoding by more than its margin δ "
        f"(interval above δ; {how}); not supported when every one is shown not better by δ; otherwise inconclusive.")


def test_results_without_a_needed_column_are_no_results():
    found = tables(extrapolation().drop(columns="status"))
    frame = judge.results_frame(found)
    assert frame.empty and list(frame.columns) == list(RESULT_COLUMNS)
    table = judge.verdict_tables(found, None)[0]
    assert table.empty and list(table.columns) == ["declaration_sha256", "decides"]
    assert report.row_verdict(report.of_row(table, guidance.ROWS[0])) == (
        "inconclusive: no deciding comparison has results in these tables")


def test_a_row_over_two_tasks_and_two_sizes():
    """standard_nlp with every comparison deciding (no preset): lm_prose (rope, alibi) and scan (rope) at
    two sizes; every comparator within δ, so each task and the row are supported at each size. The report
    reads the sizes from the smallest model up, though the judge writes them alphabetically."""
    found = tables(extrapolation(sizes=("tiny", "small")))
    lines = row_lines(found, "standard_nlp")
    assert [(j.size, j.verdict, j.by_task) for j in judgements(found, "standard_nlp")] == [
        (size, "supported", {"lm_prose": "supported", "scan": "supported"}) for size in ("small", "tiny")]
    assert report.row_verdict(lines) == "tiny: supported; small: supported"  # smallest model first
    assert report.row_verdict(lines[lines["size"] == "tiny"]) == "supported"
    by_size = {judgement.size: judgement.judged for judgement in judgements(found, "standard_nlp")}
    for judged in by_size.values():
        assert [j.comparison.id for j in judged] == ["prose-rope", "prose-alibi", "scan-rope"]
    expected = [by_size[size][k].line() for k in range(3) for size in ("tiny", "small")]  # each comparison's sizes
    expected += [f"by task ({size}): lm_prose supported, scan supported" for size in ("tiny", "small")]
    expected += ["note: lm_prose: every arm trained 500 steps × batch 32",  # once, though four comparisons say it
                 "note: scan: every arm trained 3200 steps × batch 32"]
    assert report.evidence_lines(lines, lines.iloc[0:0]) == expected
    # one task: no by-task line
    reverse = row_lines(found, "precise_position")
    reverse = reverse[reverse["size"] == "tiny"]
    (tiny,) = judgements(found, "precise_position")[1].judged
    assert report.evidence_lines(reverse, reverse.iloc[0:0]) == [
        tiny.line(), "note: reverse: every arm trained 2000 steps × batch 32"]


def test_page_ones_lines_and_caveats_go_from_the_smallest_model_up_each_named_by_its_size():
    """verdicts.csv holds small before tiny (the judge's alphabetical order); page 1 reads micro, tiny, small,
    and where a row has several sizes each caveat says which size it is about."""
    line = dict(row="standard_nlp", decides=True, metric="exact_match", add_arm="sinusoidal", comparator_arm="rope",
                mean_comparator=0.5, trend="closing", trend_since=1600, steps=3200, trend_change=-0.02,
                trend_ci_low=-0.03, trend_ci_high=-0.01)
    table = pd.DataFrame([{**line, "size": size, "mean_added": added}
                          for size, added in (("small", 0.99), ("tiny", 0.97), ("micro", 0.9))])
    lines = report.of_row(table, guidance.BY_KEY["standard_nlp"])
    assert list(lines["size"]) == ["micro", "tiny", "small"]
    assert report.flags(lines, pd.DataFrame()) == [
        "micro: gap closing from 1600 to 3200 steps: −2.0 [−3.0, −1.0] exact-match points",
        "tiny: near the ceiling: sinusoidal at 0.970 of 1 (exact_match)",
        "tiny: gap closing from 1600 to 3200 steps: −2.0 [−3.0, −1.0] exact-match points",
        "small: near the ceiling: sinusoidal at 0.990 of 1 (exact_match)",
        "small: gap closing from 1600 to 3200 steps: −2.0 [−3.0, −1.0] exact-match points"]
    assert report.flags(lines[lines["size"] == "tiny"], pd.DataFrame())[0].startswith("near the ceiling")


def test_the_preset_decides_and_the_rest_is_descriptive():
    found = tables(extrapolation())
    deciding = row_lines(found, "standard_nlp", "default")
    descriptive = row_lines(found, "standard_nlp", "default", decides=False)
    assert deciding["comparison"].tolist() == ["scan-rope"]
    assert descriptive["comparison"].tolist() == ["prose-rope", "prose-alibi"]
    (scan,) = judgements(found, "standard_nlp", "default")[0].judged
    rope, alibi = judgements(found, "standard_nlp", "default", descriptive=True)[0].judged
    assert report.evidence_lines(deciding, descriptive) == [
        scan.line(), "note: scan: every arm trained 3200 steps × batch 32",
        f"not in this preset, descriptive: {rope.line()}", f"not in this preset, descriptive: {alibi.line()}"]
    table = judge.verdict_tables(found, "default")[0]
    assert list(table.columns[:2]) == ["declaration_sha256", "row"] and list(table.columns[-1:]) == ["decides"]
    assert table.index.tolist() == list(range(len(table)))
    decides = table.set_index("comparison")["decides"]
    assert decides[["scan-rope", "reverse-rope"]].tolist() == [True, False]  # reverse-rope: full preset only
    assert decides[["prose-alibi", "prose-rope"]].tolist() == [False, False]
    assert (table["row_rule"] == [judge.rule(guidance.BY_KEY[row]) for row in table["row"]]).all()


def test_page_one_words_the_deciding_comparison_in_its_own_direction_with_its_interval_seeds_and_scope():
    found = tables(extrapolation())
    lines = row_lines(found, "standard_nlp", "default")
    (scan,) = lines.itertuples(index=False)
    x = judgements(found, "standard_nlp", "default")[0].judged[0].numbers
    assert 0.009 < x.effect < 0.011  # rope 0.61 against sinusoidal 0.60
    assert report.finding(scan) == (
        f"adding is within δ = 10 exact-match points of rope (rope's advantage {report.signed(x.effect * 100, 1)} "
        f"[{report.signed(x.ci_low * 100, 1)}, {report.signed(x.ci_high * 100, 1)}], "
        f"{report.interval_level(scan.alpha_look)} interval, 10/10 seeds)")
    assert report.decided_on(lines) == "scan trained at 48"  # SCAN's declared budget, its own training length
    assert report.scope(guidance.BY_KEY["standard_nlp"], lines).startswith("decided on scan trained at 48; tested: ")


def test_the_items_give_each_comparison_its_evaluation_error():
    n_items = 40
    items = pd.DataFrame([{"task": "reverse", "encoding": encoding, "size": "tiny", "seed": seed, "eval_len": 16,
                           "item": i, "loss_sum": 1.0, "scored": 8, "correct": 8 if right else 4, "exact": int(right)}
                          for encoding, share in (("sinusoidal", 3), ("rope", 1)) for seed in SEEDS
                          for i in range(n_items) for right in [i % share == 0]])
    found = tables(extrapolation(), items=items)
    (judgement,) = judgements(found, "precise_position")
    (reverse,) = judgement.judged
    expected = evidence.item_error(items, reverse.comparison, "tiny", reverse.added, reverse.comparator)
    assert reverse.eval_se == expected and 0.06 < expected < 0.09  # binomial: sqrt(0.35 · 0.65 / 40) = 0.075
    table = judge.verdict_tables(found, None)[0].set_index("comparison")
    assert table.loc["reverse-rope", "eval_se"] == pytest.approx(expected)
    assert math.isnan(table.loc["prose-rope", "eval_se"])  # no lm_prose items
