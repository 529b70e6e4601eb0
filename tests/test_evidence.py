"""Declared comparisons and their judgement, on simulated data with known truth: error rates, power,
equivalence, gates, Holm and the interval against scipy / statsmodels."""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import declared_rules
from scipy import stats

from posbench import arms, comparisons, evidence, experiments, guidance, statistics
from posbench.comparisons import ArmSpec
from posbench.guidance import ADDING_SUFFICES, OTHER_SCHEME_WINS


def declared_with(**rule) -> comparisons.Declaration:
    """The shipped declarations under another seed rule (``seeds`` keys changed)."""
    data = yaml.safe_load(comparisons.PATH.read_text())
    data["seeds"].update(rule)
    path = Path(tempfile.mkdtemp()) / "comparisons.yaml"
    path.write_text(yaml.safe_dump(data))
    return comparisons.load(path)


SHIPPED = comparisons.load()
RULES = declared_rules()
DECLARED = declared_with(min=10, max=10, first_seed=0)  # ten deciding seeds from 0: what the planted tables hold
PROSE = DECLARED.by_id["prose-rope"]  # lm_prose bits/char, lower is better, δ 0.05
TIMES = 2000


def simulate(comparison, truth: float, spread: float, seeds: int = 10, times: int = TIMES, seed: int = 0):
    """``times`` tables of per-seed results: the comparator better by ``truth`` (metric units)."""
    rng = np.random.default_rng(seed)
    sign = 1.0 if comparison.higher_is_better else -1.0
    added = rng.normal(2.5, spread, size=(times, seeds))
    comparator = rng.normal(2.5 + sign * truth, spread, size=(times, seeds))
    return comparator, added


def decided(comparison, comparator, added):
    """One comparison alone (a row of one): the outcome of each simulated table."""
    _, _, _, better, not_better = statistics.welch(comparator, added, comparison.higher_is_better, comparison.margin)
    alpha = statistics.ALPHA
    return np.where(better < alpha, "better", np.where(not_better < alpha, "not better", "unclear"))


def test_with_every_arm_equal_the_comparator_rarely_wins():
    outcomes = decided(PROSE, *simulate(PROSE, truth=0.0, spread=PROSE.reference_spread))
    assert (outcomes == "better").mean() <= 0.05
    # at exactly δ, "better by more than δ" is the null hypothesis: its error rate is the test's level
    at_margin = decided(PROSE, *simulate(PROSE, truth=PROSE.margin, spread=PROSE.reference_spread))
    assert (at_margin == "better").mean() == pytest.approx(statistics.ALPHA, abs=0.012)


@pytest.mark.parametrize("comparison", [c for c in DECLARED.comparisons if c.detectable(10) <= c.margin],
                         ids=lambda c: c.id)
def test_a_comparator_better_by_two_margins_is_found_at_ten_seeds(comparison):
    """Every declared margin that the file says is detectable at 10 seeds is, at the reference spread."""
    outcomes = decided(comparison, *simulate(comparison, 2 * comparison.margin, comparison.reference_spread))
    assert (outcomes == "better").mean() >= 0.8


def test_equivalence_only_when_the_interval_lies_below_the_margin():
    comparator, added = simulate(PROSE, truth=0.03, spread=0.03, times=500)
    effect, low, high, better, not_better = statistics.welch(comparator, added, False, PROSE.margin)
    assert np.array_equal(not_better < statistics.ALPHA, high < PROSE.margin)
    assert np.array_equal(better < statistics.ALPHA, low > PROSE.margin)
    assert 0.1 < (high < PROSE.margin).mean() < 0.9  # both kinds of table occur


def test_family_verdicts_follow_the_claim():
    better, not_better, unclear = evidence.BETTER, evidence.NOT_BETTER, evidence.UNCLEAR
    assert evidence.family_verdict({"a": [not_better, not_better]}, ADDING_SUFFICES)[0] == evidence.SUPPORTED
    assert evidence.family_verdict({"a": [not_better, better]}, ADDING_SUFFICES)[0] == evidence.NOT_SUPPORTED
    assert evidence.family_verdict({"a": [not_better], "b": [unclear]}, ADDING_SUFFICES)[0] == evidence.INCONCLUSIVE
    # another scheme wins: one comparator better suffices on a task, and every task must agree
    assert evidence.family_verdict({"a": [unclear, better]}, OTHER_SCHEME_WINS)[0] == evidence.SUPPORTED
    verdict, by_task = evidence.family_verdict({"a": [better], "b": [not_better]}, OTHER_SCHEME_WINS)
    assert verdict == evidence.NOT_SUPPORTED and by_task == {"a": evidence.SUPPORTED, "b": evidence.NOT_SUPPORTED}


# ----- from tables -----------------------------------------------------------------------------------
def results(by_encoding: dict[str, list[float]], task="reverse", metric="exact_match", chance=np.nan, token=None,
            status=None, ratio=1.0) -> pd.DataFrame:
    """An extrapolation table: per-seed values of each arm at one length."""
    rows = []
    for encoding, values in by_encoding.items():
        for seed, value in enumerate(values):
            rows.append({"task": task, "encoding": encoding, "size": "tiny", "seed": seed, "metric": metric,
                         "length_ratio": ratio, "eval_len": 16, "value": value,
                         "status": (status or {}).get((encoding, seed), "ok"),
                         "token_accuracy": (token or {}).get(encoding, np.nan), "chance": chance,
                         "token_chance": 0.125})
    return pd.DataFrame(rows)


def row(judgements, key):
    (found,) = [j for j in judgements if j.row == key]
    return found


def ten(mean: float, spread: float = 0.02) -> list[float]:
    return list(mean + spread * np.linspace(-1.5, 1.5, 10))


def test_a_clear_win_decides_its_row_and_is_stable():
    table = results({"sinusoidal": ten(0.1), "rope": ten(0.9)}, token={"sinusoidal": 0.8, "rope": 0.99})
    judged = row(evidence.judge(DECLARED, table), "precise_position")
    assert judged.verdict == evidence.SUPPORTED and judged.shown == evidence.SUPPORTED
    (comparison,) = judged.judged
    assert comparison.outcome == evidence.BETTER and comparison.stability == 1.0 and judged.stability == 1.0
    assert "effect +0.8" in comparison.line() and "n = 10/10 seeds" in comparison.line()


def test_an_arm_at_chance_is_not_compared():
    """Exact match is gated on token accuracy: 0.13 does not beat the token chance 0.125 with any margin."""
    table = results({"sinusoidal": ten(0.0, 0.0), "rope": ten(0.9)}, token={"sinusoidal": 0.13, "rope": 0.99})
    table.loc[table["encoding"] == "sinusoidal", "token_accuracy"] = ten(0.126, 0.005)
    judged = row(evidence.judge(DECLARED, table), "precise_position")
    (comparison,) = judged.judged
    assert comparison.outcome == evidence.GATED and judged.verdict == evidence.INCONCLUSIVE
    assert "sinusoidal did not learn: token_accuracy" in comparison.line()


def test_learning_is_read_at_the_training_length_and_chance_beyond_it_is_data():
    """Passkey at 16×: sinusoidal learned at 1× (token accuracy 0.8) and is at chance at 16× (0.12 against
    0.125): it did not extrapolate, which is what the comparison asks; ALiBi is compared with it, and a
    note says sinusoidal is at chance there. An arm at chance at 1× is gated whatever the length."""
    trained = results({"sinusoidal": ten(0.5), "alibi": ten(0.9)}, task="passkey", token={"sinusoidal": 0.8,
                                                                                             "alibi": 0.95})
    far = results({"sinusoidal": ten(0.0, 0.0), "alibi": ten(0.3)}, task="passkey", ratio=16.0,
                  token={"sinusoidal": 0.12, "alibi": 0.6})
    comparison = DECLARED.by_id["passkey-16x-alibi"]
    added = arms.arm(pd.concat([trained, far]), comparison, ArmSpec("passkey", "sinusoidal"), "tiny")
    assert added.values.tolist() == ten(0.0, 0.0) and added.gate_values.tolist() == [0.8] * 10
    assert added.gate_at_length.tolist() == [0.12] * 10 and added.chance_at_length == 0.125
    (judged,) = [j for j in row(evidence.judge(DECLARED, pd.concat([trained, far])), "long_sequences").judged
                 if j.comparison.id == "passkey-16x-alibi"]
    assert judged.outcome == evidence.BETTER and judged.gates == ()
    assert ("sinusoidal is at chance at 16× (token_accuracy 0.12, chance 0.125), though it learned at the "
            "training length") in judged.notes
    trained.loc[trained["encoding"] == "sinusoidal", "token_accuracy"] = 0.12  # at chance where it was trained
    (judged,) = [j for j in row(evidence.judge(DECLARED, pd.concat([trained, far])), "long_sequences").judged
                 if j.comparison.id == "passkey-16x-alibi"]
    assert judged.outcome == evidence.GATED and judged.gates[0].startswith("sinusoidal did not learn: token_accuracy")
    only_far = arms.arm(far, comparison, ArmSpec("passkey", "sinusoidal"), "tiny")  # no 1× rows: gate at 16×
    assert only_far.gate_values.tolist() == [0.12] * 10 and only_far.gate_at_length is None


def test_a_bits_per_char_arm_must_fall_below_the_unigram_chance():
    table = results({"sinusoidal": ten(4.2), "rope": ten(2.3)}, task="lm_prose", metric="bits_per_char", chance=4.1)
    (comparison,) = row(evidence.judge(DECLARED, table), "standard_nlp").judged
    assert comparison.outcome == evidence.GATED and "sinusoidal did not learn" in comparison.gates[0]


def test_a_diverged_run_is_gated_as_did_not_learn():
    table = results({"sinusoidal": ten(0.1), "rope": ten(0.9)}, token={"sinusoidal": 0.8, "rope": 0.99},
                    status={("rope", 3): "diverged"})
    (comparison,) = row(evidence.judge(DECLARED, table), "precise_position").judged
    assert comparison.gates == ("rope did not learn: 1 seed(s) diverged",)


def test_too_few_seeds_is_inconclusive_and_says_how_many_are_needed():
    table = results({"sinusoidal": [0.40, 0.30, 0.50], "rope": [0.55, 0.35, 0.70]},
                    token={"sinusoidal": 0.8, "rope": 0.9})
    judged = row(evidence.judge(DECLARED, table), "precise_position")
    (comparison,) = judged.judged
    assert judged.verdict == evidence.INCONCLUSIVE and comparison.outcome == evidence.FEW_SEEDS
    spread = np.sqrt((np.var([0.40, 0.30, 0.50], ddof=1) + np.var([0.55, 0.35, 0.70], ddof=1)) / 2)
    effect = np.mean([0.55, 0.35, 0.70]) - np.mean([0.40, 0.30, 0.50])
    expected = int(np.ceil(2 * (comparisons.POWER_Z * spread / abs(effect - 0.1)) ** 2))
    assert comparison.needs_n == expected and f"needs n ≈ {expected}" in comparison.line()


def test_a_noisy_row_is_printed_unstable():
    rng = np.random.default_rng(3)
    table = results({"sinusoidal": list(rng.normal(0.3, 0.15, 10)), "rope": list(rng.normal(0.52, 0.15, 10))},
                    token={"sinusoidal": 0.8, "rope": 0.9})
    judged = row(evidence.judge(DECLARED, table), "precise_position")
    assert judged.stability < evidence.STABLE
    assert judged.shown.startswith("unstable") or judged.verdict == evidence.INCONCLUSIVE


def test_the_evaluation_sets_own_error_from_items():
    """One seed per arm; the comparator gets every item right, the added arm a fixed half: the effect's
    item-bootstrap error is the binomial one, sqrt(p(1-p)/n)."""
    n = 400
    items = pd.DataFrame([{"task": "reverse", "encoding": e, "size": "tiny", "seed": 0, "eval_len": 16, "item": i,
                           "loss_sum": 1.0, "scored": 16, "correct": 16 if right else 8, "exact": int(right)}
                          for e in ("sinusoidal", "rope") for i in range(n)
                          for right in [e == "rope" or i % 2 == 0]])
    arm = arms.Arm("sinusoidal", np.array([0.5]), np.array([0]), np.array([0.75]), np.nan, eval_len=16)
    other = arms.Arm("rope", np.array([1.0]), np.array([0]), np.array([1.0]), np.nan, eval_len=16)
    error = evidence.item_error(items, DECLARED.by_id["reverse-rope"], "tiny", arm, other)
    assert error == pytest.approx(np.sqrt(0.25 / n), rel=0.1)


def test_the_verdict_table_has_one_row_per_comparison():
    table = results({"sinusoidal": ten(0.1), "rope": ten(0.9)}, token={"sinusoidal": 0.8, "rope": 0.99})
    frame = evidence.table(evidence.judge(DECLARED, table))
    assert frame[["row", "comparison", "add_arm", "comparator_arm", "n_added", "n_comparator"]].values.tolist() == [
        ["precise_position", "reverse-rope", "sinusoidal", "rope", 10, 10]]
    assert frame.loc[0, "mean_comparator"] == pytest.approx(0.9) and frame.loc[0, "margin"] == 0.1


# ----- the declaration file --------------------------------------------------------------------------
def test_the_default_preset_declares_one_deciding_comparison_per_row():
    default = [c for c in SHIPPED.in_preset("default") if not c.withdrawn]
    assert [c.row for c in default] == [row.key for row in guidance.ROWS]
    assert all(c.added in ("sinusoidal", "learned", "sinusoidal_2d") for c in DECLARED.comparisons)
    assert [(a.encoding, a.train_length, a.d_model) for a in DECLARED.arms("default") if a.task == "lm_prose"] == [
        ("sinusoidal", 128, None), ("rope", 128, None), ("sinusoidal", None, None), ("sinusoidal_concat", None, 32)]
    assert [(c.id, c.task) for c in default][3:] == [("passkey-16x-alibi", "passkey"),
                                                     ("code-brackets-rope", "code_brackets"),
                                                     ("mosaic-mrope-interleaved", "mosaic_qa")]
    assert len(DECLARED.sha256) == 64 and DECLARED.margin("lm_prose", "bits_per_char") == 0.05


def test_the_declarations_hash_is_of_their_content_not_their_comments_or_layout(tmp_path):
    text = comparisons.PATH.read_text()
    (tmp_path / "prose.yaml").write_text("# a new comment\n" + text.replace("\n", "\n\n", 3))
    (tmp_path / "content.yaml").write_text(text.replace("margin: 0.05,", "margin: 0.051,", 1))
    assert comparisons.load(tmp_path / "prose.yaml").sha256 == SHIPPED.sha256
    assert comparisons.load(tmp_path / "content.yaml").sha256 != SHIPPED.sha256


@pytest.mark.parametrize(("change", "message"), [
    ({"comparator": "ropee"}, "comparator 'ropee' is not an encoding; allowed: "),
    ({"added": "rope"}, "added 'rope' does not add P to E; allowed: "),
    ({"metric": "accuracy"}, "task lm_prose has no metric 'accuracy'; allowed: bits_per_char, token_accuracy"),
    ({"margin": "0.05"}, "margin = '0.05' has the wrong type; expected int or float"),
    ({"length_ratio": 3}, "length_ratio 3 is not one of lm_prose's evaluation factors; allowed: 1, 1.25"),
    ({"presets": ["nightly"]}, "presets ['nightly']; allowed: a non-empty list of default, full"),
    ({"comparator_d_model": "32"}, "comparator_d_model = '32' has the wrong type; expected int"),
    ({"train_length": -64}, "train_length must be positive, got -64"),
    ({"comparator": "sinusoidal"}, "added and comparator are both 'sinusoidal' at one width"),
    ({"width": 32}, "keys ['added', 'comparator', 'id', 'length_ratio', 'margin', 'metric', 'presets', "
                    "'reference_spread', 'task', 'width']; required exactly: id, task, metric, length_ratio, added, "
                    "comparator, margin, reference_spread, presets; optional: train_length, added_d_model, "
                    "comparator_d_model, steps, withdrawn"),
    ({"withdrawn": True}, "withdrawn = True has the wrong type; expected str"),
    ({"withdrawn": " "}, "withdrawn must say why (e.g. 'axis-blind: …'), got ' '"),
])
def test_a_bad_declaration_is_one_line_naming_the_key(tmp_path, change, message):
    entry = {"id": "x", "task": "lm_prose", "metric": "bits_per_char", "length_ratio": 1, "added": "sinusoidal",
             "comparator": "rope", "margin": 0.05, "reference_spread": 0.02, "presets": ["default"], **change}
    path = tmp_path / "comparisons.yaml"
    import yaml

    path.write_text(yaml.safe_dump({**RULES, "rows": {"standard_nlp": [entry]}}))
    with pytest.raises(ValueError, match="row 'standard_nlp', comparison 'x': ") as error:
        comparisons.load(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_declared_length_and_widths_name_each_arm(tmp_path):
    entry = {"id": "x", "task": "lm_prose", "metric": "bits_per_char", "length_ratio": 1, "added": "sinusoidal",
             "comparator": "sinusoidal", "margin": 0.05, "reference_spread": 0.02, "presets": ["full"],
             "train_length": 128, "added_d_model": 64, "comparator_d_model": 32}
    path = tmp_path / "comparisons.yaml"
    import yaml

    path.write_text(yaml.safe_dump({**RULES, "rows": {"parameter_budget": [entry]}}))
    (comparison,) = comparisons.load(path).comparisons
    assert comparison.arms == (ArmSpec("lm_prose", "sinusoidal", 128, 64, "tiny"),
                               ArmSpec("lm_prose", "sinusoidal", 128, 32, "tiny"))  # widths stated at tiny
    assert [spec.resolved("small") for spec in comparison.arms] == [(128, 128), (128, 64)]  # scaled with the size
    assert comparison.describe() == ("lm_prose bits_per_char, trained at 128: sinusoidal (d = 64) (added) vs "
                                     "sinusoidal (d = 32), δ = 0.05")
    assert PROSE.arms == (ArmSpec("lm_prose", "sinusoidal"), ArmSpec("lm_prose", "rope"))


def test_an_unknown_row_or_a_missing_file_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**RULES, "rows": {"long_context": []}}))
    with pytest.raises(ValueError, match="unknown row 'long_context'; allowed: standard_nlp, fixed_length"):
        comparisons.load(path)
    with pytest.raises(ValueError, match="does not exist"):
        comparisons.load(tmp_path / "absent.yaml")


# ----- exact numbers of the pieces (each pins what a mutant of evidence.py changed) -------------------
def test_holm_caps_at_one_and_decides_at_alpha_exactly():
    assert statistics.holm([0.01, 0.6, 0.7]).tolist() == pytest.approx([0.03, 1.0, 1.0])
    assert evidence.holm_outcomes([], []) == []
    assert evidence.holm_outcomes([0.025], [0.5]) == [(evidence.UNCLEAR, 0.025)]  # p < α, not ≤
    assert evidence.holm_outcomes([0.5], [0.025]) == [(evidence.UNCLEAR, 0.025)]
    assert evidence.holm_outcomes([0.5], [0.5]) == [(evidence.UNCLEAR, 0.5)]
    assert evidence.holm_outcomes([0.5], [0.01]) == [(evidence.NOT_BETTER, 0.01)]
    assert evidence.holm_outcomes([0.02], [0.9]) == [(evidence.BETTER, 0.02)]


def test_a_group_without_a_decided_comparison_is_inconclusive():
    assert evidence.family_verdict({"a": [evidence.GATED, evidence.FEW_SEEDS]}, ADDING_SUFFICES) == (
        evidence.INCONCLUSIVE, {"a": evidence.INCONCLUSIVE})
    assert evidence.family_verdict({"a": [evidence.NOT_BETTER, evidence.UNCLEAR]}, ADDING_SUFFICES) == (
        evidence.INCONCLUSIVE, {"a": evidence.INCONCLUSIVE})


def test_seed_resamples_draw_every_seed():
    values = arms.Arm("rope", np.array([0.0, 1.0, 2.0]), np.arange(3), np.zeros(3), np.nan).resampled(
        np.random.default_rng(0), 1000)
    assert values.shape == (1000, 3) and set(np.unique(values)) == {0.0, 1.0, 2.0}


def chance_arm(values, chance=0.5, gate=None):
    values = np.asarray(values, float)
    return arms.Arm("rope", values, np.arange(len(values)), values if gate is None else np.asarray(gate, float),
                        chance)


def test_beating_chance_is_the_one_sided_95_percent_bound_over_seeds():
    values = [0.1, 0.2, 0.3, 0.4, 0.5]  # mean 0.3, sd 0.158: bounds 0.3 ∓ t(0.95, 4)·0.158/√5 = 0.3 ∓ 0.1507
    bound = stats.t.ppf(0.95, 4) * np.std(values, ddof=1) / np.sqrt(5)
    assert bound == pytest.approx(0.150744, abs=1e-6)
    assert evidence.beats_chance(chance_arm(values, 0.3 - bound - 1e-4), higher_is_better=True) is True
    assert evidence.beats_chance(chance_arm(values, 0.3 - bound + 1e-4), higher_is_better=True) is False
    assert evidence.beats_chance(chance_arm(values, 0.3 + bound + 1e-4), higher_is_better=False) is True
    assert evidence.beats_chance(chance_arm(values, 0.3 + bound - 1e-4), higher_is_better=False) is False
    # two seeds: t(0.95, 1) = 6.31 makes the bound 0.6 − 0.63 < 0.55
    assert evidence.beats_chance(chance_arm([0.5, 0.7], 0.55), higher_is_better=True) is False
    # one seed: no spread to estimate, the value itself; exactly at chance does not beat it
    assert evidence.beats_chance(chance_arm([0.6], 0.5), higher_is_better=True) is True
    assert evidence.beats_chance(chance_arm([0.5], 0.5), higher_is_better=True) is False
    assert evidence.beats_chance(chance_arm([0.5], 0.5), higher_is_better=False) is False
    assert evidence.beats_chance(chance_arm([], 0.5), higher_is_better=True) is False
    assert evidence.beats_chance(chance_arm([0.9, 0.9], 0.5, gate=[0.9, np.nan]), higher_is_better=True) is None


def test_every_gate_and_note_in_words():
    reverse = DECLARED.by_id["reverse-rope"]  # exact match: gated on token accuracy against the token chance
    empty = arms.Arm("sinusoidal", np.array([]), np.array([]), np.array([]), 0.125)
    diverged = arms.Arm("rope", np.array([]), np.array([]), np.array([]), 0.125, diverged=3)
    assert evidence.gates(reverse, empty, diverged) == (
        ["sinusoidal: no results", "rope did not learn: 3 seed(s) diverged"], [])
    added = arms.Arm("sinusoidal", np.full(4, 0.5), np.arange(4), np.full(4, 0.9), np.nan, undertrained=2,
                         overfit=1, untrained_positions=True, budget=(300, 32))
    comparator = arms.Arm("rope", np.full(4, 0.5), np.arange(4), np.full(4, 0.9), 0.125, budget=(600, 32))
    assert evidence.gates(reverse, added, comparator) == (
        ["sinusoidal: positions at this length were never trained",
         "unequal budgets (steps, batch): (300, 32) vs (600, 32)"],
        ["sinusoidal: no chance level in the tables, not gated",
         "sinusoidal undertrained in 2 of 4 seeds (still falling)",
         "sinusoidal overfits by its last budget in 1 of 4 seeds (annealed validation loss above an earlier "
         "checkpoint's: the task needs more text for this budget)"])
    same = replace(comparator, budget=(300, 32))
    assert evidence.gates(reverse, replace(added, untrained_positions=False), same)[0] == []
    assert evidence.gates(reverse, same, same) == ([], ["reverse: every arm trained 300 steps × batch 32"])
    no_budget = replace(same, budget=None)
    assert evidence.gates(reverse, no_budget, same) == ([], [])


def test_the_learning_rate_with_the_lowest_mean_validation_loss_is_the_arms():
    two = pd.DataFrame({"lr": [1e-3, 1e-3, 3e-3, 3e-3], "validation_loss": [2.0, 2.2, 1.9, 2.1],
                        "value": [1, 2, 3, 4]})
    rows, lr, note = experiments.best_rate(two)
    assert rows["value"].tolist() == [3, 4] and lr == 3e-3
    assert note == "lr 0.003 chosen on validation loss among [np.float64(0.001), np.float64(0.003)]"
    rows, lr, note = experiments.best_rate(two.assign(validation_loss=[1.0, 1.0, 2.0, 2.0]))
    assert rows["value"].tolist() == [1, 2] and lr == 1e-3
    one = two.assign(lr=[2e-3, 2e-3, np.nan, np.nan])
    rows, lr, note = experiments.best_rate(one)
    assert rows["value"].tolist() == [1, 2] and (lr, note) == (2e-3, "")
    rows, lr, note = experiments.best_rate(two.drop(columns="validation_loss"))  # several rates, nothing to choose by
    assert rows["value"].tolist() == [1, 2, 3, 4] and (lr, note) == (None, "")
    for without in (two.drop(columns="lr"), two.assign(lr=np.nan)):
        rows, lr, note = experiments.best_rate(without)
        assert rows["value"].tolist() == [1, 2, 3, 4] and (lr, note) == (None, "")


def test_an_arm_reads_budget_undertraining_positions_and_rate_from_its_rows():
    table = results({"sinusoidal": ten(0.5), "rope": ten(0.9)}, metric="accuracy", task="long_range", ratio=2.0)
    table = table.drop(columns="chance").assign(  # undertrained as a CSV reads it: missing is NaN
        steps=600, batch_size=32, lr=1e-3, undertrained=[True, np.nan, False] * 6 + [True, True],
        positions_trained=True)
    other_budget = table[table["seed"] == 9].assign(steps=300, value=0.0)  # another budget's run: not this arm's
    comparison = DECLARED.by_id["long-range-2x-rope"]  # declares no steps: long_range's 600
    sinusoidal = ArmSpec(comparison.task, "sinusoidal")
    added = arms.arm(pd.concat([table, other_budget]), comparison, sinusoidal, "tiny", tuple(range(10)), 600)
    assert (added.n, added.budget, added.undertrained, added.untrained_positions, added.lr,
            added.eval_len) == (10, (600, 32), 4, False, 1e-3, 16)
    assert added.values.tolist() == ten(0.5) and added.seeds.tolist() == list(range(10))
    assert np.isnan(added.chance)  # no chance column at all: not gated (a note says so)
    assert added.gate_values.tolist() == ten(0.5)
    (judged,) = row(evidence.judge(DECLARED, table), "long_sequences").judged
    assert judged.notes == ("sinusoidal: no chance level in the tables, not gated",
                            "sinusoidal undertrained in 4 of 10 seeds (still falling)",
                            "rope: no chance level in the tables, not gated",
                            "rope undertrained in 4 of 10 seeds (still falling)",
                            "long_range: every arm trained 600 steps × batch 32")
    assert arms.arm(table.drop(columns=["steps", "batch_size"]), comparison, sinusoidal, "tiny").budget is None
    rates = table.assign(lr=np.where(table["seed"] < 5, 1e-3, 3e-3), validation_loss=np.where(table["seed"] < 5, 2, 1))
    chosen = arms.arm(rates, comparison, sinusoidal, "tiny")  # advise's use: the rate chosen on validation
    assert (chosen.n, chosen.lr) == (5, 3e-3)
    declared = tuple(range(10))  # judging a comparison: no rate is chosen, two rates are a gate
    mixed = arms.arm(rates, comparison, sinusoidal, "tiny", declared, comparison.budget)
    assert (mixed.n, mixed.lr, mixed.mixed) == (10, None, ("lr (0.001, 0.003)",))
    assert arms.arm(table, comparison, sinusoidal, "tiny", seeds=(3, 4, 99)).seeds.tolist() == [3, 4]
    table.loc[(table["encoding"] == "sinusoidal") & (table["seed"] == 4), "positions_trained"] = False
    assert arms.arm(table, comparison, sinusoidal, "tiny").untrained_positions is True
    alone = table[(table["seed"] == 0) | (table["encoding"] == "rope")]
    assert arms.arm(alone, comparison, sinusoidal, "tiny").eval_len == 16  # one seed is enough


def test_one_seed_is_not_compared_two_seeds_are_descriptive():
    one = row(evidence.judge(DECLARED, results({"sinusoidal": [0.3], "rope": [0.6]},
                                               token={"sinusoidal": 0.8, "rope": 0.9})), "precise_position")
    (single,) = one.judged
    assert single.numbers is None and single.outcome == evidence.FEW_SEEDS
    assert single.line() == "reverse exact_match at 1× (tiny): rope vs sinusoidal: n = 1/1 seeds, too few to compare"
    assert (one.size, one.verdict, one.by_task) == ("tiny", evidence.INCONCLUSIVE, {"reverse": evidence.INCONCLUSIVE})
    assert math.isnan(one.stability)
    assert all(math.isnan(evidence.table([one]).loc[0, name]) for name in ("effect", "ci_low", "p_not_better"))
    two = row(evidence.judge(DECLARED, results({"sinusoidal": [0.25, 0.75], "rope": [0.5, 1.0]},
                                               token={"sinusoidal": 0.8, "rope": 0.9})), "precise_position")
    (pair,) = two.judged
    # sd 0.354 in each arm, 0.15 from δ: 2·(2.80·0.354/0.15)² = 87.2; Welch df 2 at the first look's Pocock
    # level (one-sided 1.47 %, so a 97.1 % interval): 0.25 ± 5.71·0.354
    assert pair.numbers.effect == 0.25 and pair.outcome == evidence.FEW_SEEDS and pair.needs_n == 88
    assert pair.line() == ("reverse exact_match at 1× (tiny): rope vs sinusoidal: "
                           "effect +0.25 [-1.77, +2.27] vs δ 0.1, descriptive only, n = 2/2 seeds → too few seeds "
                           "(needs n ≈ 88 seeds per arm)")
    assert replace(pair, needs_n=999).line().endswith(" (needs n ≈ 999 seeds per arm)")
    assert replace(pair, needs_n=1000).line().endswith(" (needs n ≈ 1000+ seeds per arm)")
    frame = evidence.table([two])
    assert frame.loc[0, "detectable"] == DECLARED.by_id["reverse-rope"].detectable(2)
    assert frame.loc[0, "needs_n"] == 88 and math.isnan(frame.loc[0, "p_holm"])


def test_a_supported_adding_row_with_its_numbers_in_line_and_table():
    """standard_nlp ("adding suffices"): rope within δ of sinusoidal on lm_prose bits/char, every seed
    resample agrees; the line and verdicts.csv carry every number."""
    table = results({"sinusoidal": ten(2.30, 0.005), "rope": ten(2.29, 0.005)}, task="lm_prose", metric="bits_per_char",
                    chance=4.1)
    judged = row(evidence.judge(DECLARED, table), "standard_nlp")
    assert (judged.size, judged.verdict, judged.stability, judged.by_task) == (
        "tiny", evidence.SUPPORTED, 1.0, {"lm_prose": evidence.SUPPORTED})
    (comparison,) = judged.judged
    x = comparison.numbers
    assert comparison.outcome == evidence.NOT_BETTER and comparison.needs_n is None and comparison.stability == 1.0
    assert comparison.p_holm == x.p_not_better  # a family of one: Holm leaves p alone
    assert comparison.line() == (f"lm_prose bits_per_char at 1× (tiny): rope vs sinusoidal: effect {x.effect:+.3g} "
                                 f"[{x.ci_low:+.3g}, {x.ci_high:+.3g}] vs δ 0.05, Holm p {comparison.p_holm:.2g}, "
                                 "n = 10/10 seeds, stability 100% → comparator not better by δ")
    frame = evidence.table([judged])
    assert list(frame.columns) == [
        "row", "row_verdict", "row_stability", "comparison", "task", "metric", "length_ratio", "size", "add_arm",
        "comparator_arm", "train_len", "d_model_added", "d_model_comparator", "n_added", "n_comparator",
        "mean_added", "mean_comparator", "lr_added", "lr_comparator", "text",
        "effect", "ci_low", "ci_high", "p_better", "p_not_better", "eval_se", "p_holm", "margin", "detectable",
        "outcome", "task_verdict", "stability", "needs_n", "steps", "look", "alpha_look", "seeds_added",
        "seeds_comparator", "second_look_wanted", "trend_since", "trend_until", "trend_change", "trend_ci_low",
        "trend_ci_high", "trend", "gate_notes"]
    found = frame.iloc[0].to_dict()
    assert {k: found[k] for k in ("row", "row_verdict", "row_stability", "comparison", "task", "metric",
                                  "length_ratio", "size", "outcome", "task_verdict", "stability")} == {
        "row": "standard_nlp", "row_verdict": evidence.SUPPORTED, "row_stability": 1.0, "comparison": "prose-rope",
        "task": "lm_prose", "metric": "bits_per_char", "length_ratio": 1.0, "size": "tiny",
        "outcome": evidence.NOT_BETTER, "task_verdict": evidence.SUPPORTED, "stability": 1.0}
    assert [found[k] for k in ("effect", "ci_low", "ci_high", "p_better", "p_not_better", "p_holm")] == [
        x.effect, x.ci_low, x.ci_high, x.p_better, x.p_not_better, comparison.p_holm]
    assert found["mean_added"] == pytest.approx(2.30) and found["mean_comparator"] == pytest.approx(2.29)
    assert found["lr_added"] is None and found["lr_comparator"] is None and found["needs_n"] is None
    assert found["detectable"] == DECLARED.by_id["prose-rope"].detectable(10) and math.isnan(found["eval_se"])
    assert found["gate_notes"] == ""


def test_gated_and_compared_comparisons_share_a_row():
    """parameter_budget: the learned arm diverged (gated, no stability of its own); the other is compared."""
    table = results({"sinusoidal": ten(2.30), "sinusoidal_concat_fixed": ten(2.35), "learned": ten(2.31)},
                    task="lm_prose", metric="bits_per_char", chance=4.1, status={("learned", 2): "diverged"})
    table = table.assign(steps=500, batch_size=32)
    judged = row(evidence.judge(DECLARED, table), "parameter_budget")
    gated, compared = sorted(judged.judged, key=lambda j: j.comparison.id != "prose-learned-concat-fixed")
    assert gated.outcome == evidence.GATED and math.isnan(gated.stability) and compared.stability == 1.0
    frame = evidence.table([judged]).set_index("comparison")
    assert frame.loc["prose-learned-concat-fixed", "gate_notes"] == (
        "learned did not learn: 1 seed(s) diverged; lm_prose: every arm trained 500 steps × batch 32")
    assert gated.line() == ("lm_prose bits_per_char at 1× (tiny): sinusoidal_concat_fixed vs learned: not compared — "
                            "learned did not learn: 1 seed(s) diverged")
    two_gates = replace(gated, gates=("a", "b"))
    assert two_gates.line().endswith(": not compared — a; b")


def test_only_the_comparisons_asked_for_are_judged_and_the_default_seed_is_zero():
    rng = np.random.default_rng(3)
    table = results({"sinusoidal": list(rng.normal(0.3, 0.15, 10)), "rope": list(rng.normal(0.52, 0.15, 10))},
                    token={"sinusoidal": 0.8, "rope": 0.9})
    assert evidence.judge(DECLARED, table, comparisons=[]) == []
    (found,) = evidence.judge(DECLARED, table, comparisons=[DECLARED.by_id["reverse-rope"]])
    again = row(evidence.judge(DECLARED, table), "precise_position")
    assert found.stability == again.stability  # reproducible: the bootstrap is seeded
    judged = [replace(j, outcome=evidence.UNCLEAR) for j in found.judged]
    rerun = evidence.judge_row("precise_position", OTHER_SCHEME_WINS, "tiny", judged, seed=0)
    other = evidence.judge_row("precise_position", OTHER_SCHEME_WINS, "tiny", judged, seed=1)
    assert found.stability == rerun.stability != other.stability


def item_rows(right, encodings=("sinusoidal", "rope", "alibi"), n=400, seeds=(0,)):
    """Items of reverse: ``right[encoding](i, seed)`` says whether item ``i`` is exactly right."""
    return pd.DataFrame([{"task": "reverse", "encoding": e, "size": "tiny", "seed": s, "eval_len": 16, "item": i,
                          "loss_sum": 1.0, "scored": 16, "correct": 16 if right[e](i, s) else 8,
                          "exact": int(right[e](i, s))}
                         for e in encodings for s in seeds for i in range(n)])


def test_the_item_error_is_the_sd_of_the_effect_over_item_redraws():
    """Both arms vary over items and their differences are 1 on a quarter of them: the effect's
    bootstrap sd is the sd (ddof 1) of that quarter's share over the seed-0 multinomial redraws, and
    near the binomial sqrt(p(1 − p)/n); a third encoding in the table is not read."""
    n = 400
    right = {"sinusoidal": lambda i, s: i % 2 == 0, "rope": lambda i, s: i % 2 == 0 or i % 4 == 1,
             "alibi": lambda i, s: i % 3 == 0}
    items = item_rows(right, seeds=(0, 1))
    arm = arms.Arm("sinusoidal", np.array([0.5, 0.5]), np.array([0, 1]), np.array([0.75] * 2), np.nan, eval_len=16)
    other = arms.Arm("rope", np.array([0.75, 0.75]), np.array([0, 1]), np.array([0.9] * 2), np.nan, eval_len=16)
    draws = np.random.default_rng(0).multinomial(n, np.full(n, 1 / n), size=evidence.BOOTSTRAP)
    differs = np.array([float(i % 4 == 1) for i in range(n)])
    expected = np.std(draws @ differs / n, ddof=1)
    error = evidence.item_error(items, DECLARED.by_id["reverse-rope"], "tiny", arm, other)
    assert error == pytest.approx(expected, rel=1e-12) and expected == pytest.approx(np.sqrt(0.1875 / n), rel=0.1)
    # judged from the tables, the comparison carries that error
    table = results({"sinusoidal": ten(0.5), "rope": ten(0.75)}, token={"sinusoidal": 0.75, "rope": 0.9})
    (judged,) = row(evidence.judge(DECLARED, table[table["seed"] < 2], items=items), "precise_position").judged
    assert judged.eval_se == pytest.approx(expected, rel=1e-12)
    # arms with different seeds: each reads its own seeds of its own encoding only
    later = pd.concat([item_rows(right, ("sinusoidal", "alibi"), seeds=(0, 1, 2)),
                       item_rows(right, ("rope",), seeds=(1, 2))])
    error = evidence.item_error(later, DECLARED.by_id["reverse-rope"], "tiny", arm,
                                replace(other, seeds=np.array([1, 2])))
    assert error == pytest.approx(expected, rel=1e-12)


def test_the_item_error_of_a_lower_is_better_metric():
    """bits/char: loss 2 on a quarter of the items for the added arm, 1 elsewhere and for the comparator."""
    n = 400
    comparison = DECLARED.by_id["prose-rope"]
    items = pd.DataFrame([{"task": "lm_prose", "encoding": e, "size": "tiny", "seed": 0, "eval_len": 64, "item": i,
                           "loss_sum": 2.0 if e == "sinusoidal" and i % 4 == 1 else 1.0, "scored": 1, "correct": 1,
                           "exact": 1} for e in ("sinusoidal", "rope") for i in range(n)])
    arm = arms.Arm("sinusoidal", np.array([1.0]), np.array([0]), np.array([1.0]), np.nan, eval_len=64)
    other = arms.Arm("rope", np.array([1.0]), np.array([0]), np.array([1.0]), np.nan, eval_len=64)
    draws = np.random.default_rng(0).multinomial(n, np.full(n, 1 / n), size=evidence.BOOTSTRAP)
    expected = np.std(draws @ np.array([float(i % 4 == 1) for i in range(n)]) / n / np.log(2), ddof=1)
    assert evidence.item_error(items, comparison, "tiny", arm, other) == pytest.approx(expected, rel=1e-12)


def test_a_family_of_entries_holm_across_those_with_ten_seeds():
    """The claims page's families: Holm across the entries with 10 seeds per arm; 2 to 9 seeds get numbers
    but decide nothing; 1 seed gets no numbers."""
    spread = np.linspace(-1.5, 1.5, 10) * 0.01
    entries = [evidence.Entry("a", "clear", 0.9 + spread, 0.5 + spread, True, 0.1),
               evidence.Entry("a", "close", 0.52 + spread, 0.5 + spread, True, 0.1),
               evidence.Entry("b", "few", np.array([0.9, 0.7]), np.array([0.1, 0.3]), True, 0.1),
               evidence.Entry("b", "one", np.array([0.9]), np.array([0.1]), True, 0.1)]
    verdict, found = evidence.judge_family(entries, OTHER_SCHEME_WINS, 10)
    assert verdict == evidence.INCONCLUSIVE  # group a supports the claim, b decides nothing
    assert [(entry.label, result) for entry, _, result in found] == [
        ("clear", evidence.BETTER), ("close", evidence.NOT_BETTER), ("few", evidence.FEW_SEEDS),
        ("one", evidence.FEW_SEEDS)]
    (_, clear, _), (_, close, _), (_, few, _), (_, one, _) = found
    assert clear == statistics.contrast(0.9 + spread, 0.5 + spread, True, 0.1) and one is None
    assert few.effect == pytest.approx(0.6) and close.effect == pytest.approx(0.02)
    assert evidence.judge_family(entries[:2], OTHER_SCHEME_WINS, 10)[0] == evidence.SUPPORTED
    assert evidence.judge_family(entries[1:2], ADDING_SUFFICES, 10)[0] == evidence.SUPPORTED


# ----- arms at a training length or width of their own (rows 2 and 3) --------------------------------
def swept(arms: dict[tuple[str, int, int], list[float]], params: dict[tuple[str, int], int]) -> pd.DataFrame:
    """An lm_prose extrapolation table over (encoding, train_len, d_model) cells, parameters per (encoding, width)."""
    frames = []
    for (encoding, length, width), values in arms.items():
        frame = results({encoding: values}, task="lm_prose", metric="bits_per_char", chance=4.7)
        frames.append(frame.assign(train_len=length, d_model=width, params_total=params[encoding, width]))
    return pd.concat(frames, ignore_index=True)


MATCHED = comparisons.Comparison("matched", "parameter_budget", "lm_prose", "bits_per_char", 1.0, "sinusoidal",
                                 "sinusoidal_concat", 0.05, 0.03, ("full",), None, None, 32)
PARAMS = {("sinusoidal", 64): 112256, ("sinusoidal", 32): 31552, ("sinusoidal_concat", 32): 108928,
          ("sinusoidal_concat", 64): 414464}


def test_an_arm_reads_only_its_own_length_and_width():
    table = swept({("sinusoidal", 64, 64): ten(2.2), ("sinusoidal", 64, 32): ten(2.5),
                   ("sinusoidal", 128, 64): ten(2.0), ("sinusoidal_concat", 64, 32): ten(2.21),
                   ("sinusoidal_concat", 64, 64): ten(2.0)}, PARAMS)
    added, comparator = (arms.arm(table, MATCHED, spec, "tiny") for spec in MATCHED.arms)
    assert added.values.mean() == pytest.approx(2.2) and (added.train_len, added.d_model) == (64, 64)
    assert comparator.values.mean() == pytest.approx(2.21) and (comparator.train_len, comparator.d_model) == (64, 32)
    assert (added.params, comparator.params) == (112256, 108928)
    at_128 = arms.arm(table, MATCHED, ArmSpec("lm_prose", "sinusoidal", 128), "tiny")
    assert at_128.values.mean() == pytest.approx(2.0) and at_128.n == 10
    # the plain cell (the task's length, the size's width) of the grid, as the other comparisons read it
    assert arms.arm(table, PROSE, ArmSpec("lm_prose", "sinusoidal"), "tiny").values.mean() == pytest.approx(2.2)


def test_arms_at_different_widths_are_compared_only_at_matched_parameters():
    table = swept({("sinusoidal", 64, 64): ten(2.2), ("sinusoidal_concat", 64, 32): ten(2.21)}, PARAMS)
    (judged,) = row(evidence.judge(DECLARED, table, comparisons=[MATCHED]), "parameter_budget").judged
    assert judged.gates == () and judged.outcome == evidence.NOT_BETTER
    assert judged.line().startswith("lm_prose bits_per_char at 1× (tiny): sinusoidal_concat (d = 32) vs sinusoidal: "
                                    "effect ")
    at_128 = replace(DECLARED.by_id["prose-rope-L128"], presets=("full",))
    assert evidence.Judged(at_128, "tiny", judged.added, judged.comparator, gates=("g",)).line() == (
        "lm_prose bits_per_char at 1×, trained at 128 (tiny): rope vs sinusoidal: not compared — g")
    assert ("parameters: sinusoidal (d = 64) 112,256, sinusoidal_concat (d = 32) 108,928; compared only within 5% "
            "of each other") in judged.notes  # 3.0 % apart
    unmatched = table.assign(params_total=np.where(table["encoding"] == "sinusoidal", 114700, 108928))  # 5.03 %
    (judged,) = row(evidence.judge(DECLARED, unmatched, comparisons=[MATCHED]), "parameter_budget").judged
    assert judged.outcome == evidence.GATED and judged.gates == (
        "parameters: sinusoidal (d = 64) 114,700, sinusoidal_concat (d = 32) 108,928; compared only within 5% "
        "of each other",)
    unknown = table.drop(columns="params_total")
    (judged,) = row(evidence.judge(DECLARED, unknown, comparisons=[MATCHED]), "parameter_budget").judged
    assert judged.gates == ("parameters: sinusoidal (d = 64) unknown, sinusoidal_concat (d = 32) unknown; compared "
                            "only within 5% of each other",)
    frame = evidence.table([row(evidence.judge(DECLARED, table, comparisons=[MATCHED]), "parameter_budget")])
    assert frame[["train_len", "d_model_added", "d_model_comparator"]].values.tolist() == [[64, 64, 32]]


def test_holm_decides_a_row_of_several_comparisons_not_the_raw_p_values():
    """Two comparisons at raw p 0.02 and 0.024 (each below α = 0.025 alone): Holm makes both 0.04, so
    neither is "better by more than δ" — through holm_outcomes and through a row's outcomes."""
    unclear = [(evidence.UNCLEAR, pytest.approx(0.04)), (evidence.UNCLEAR, pytest.approx(0.04))]
    assert evidence.holm_outcomes([0.02, 0.024], [0.9, 0.9]) == unclear
    assert evidence.holm_outcomes([0.9, 0.9], [0.02, 0.024]) == unclear
    compared = SimpleNamespace(gates=(), compared=True, alpha=statistics.ALPHA)
    assert evidence.outcomes([compared, compared], [0.02, 0.024], [0.9, 0.9]) == unclear
    assert evidence.outcomes([compared], [0.02], [0.9]) == [(evidence.BETTER, 0.02)]  # a row of one: no correction


@pytest.mark.parametrize(("share", "shown"), [
    (0.85, "unstable (supported in 85% of seed resamples)"), (0.8999, "unstable (supported in 90% of seed resamples)"),
    (0.9, "supported"), (1.0, "supported")])
def test_a_verdict_reproduced_by_fewer_than_90_percent_of_resamples_is_unstable(share, shown):
    assert evidence.STABLE == 0.9
    assert evidence.RowJudgement("standard_nlp", "tiny", evidence.SUPPORTED, share, {}).shown == shown
    assert evidence.RowJudgement("standard_nlp", "tiny", evidence.INCONCLUSIVE, 0.5, {}).shown == evidence.INCONCLUSIVE


def test_seeds_run_on_other_devices_dtypes_or_budgets_are_not_pooled():
    """An arm whose seeds come from two devices (a CPU and a CUDA run under one machine label) or two
    budgets is not compared: its seeds are not replicates of one another."""
    table = results({"sinusoidal": ten(0.1), "rope": ten(0.9)}, token={"sinusoidal": 0.8, "rope": 0.99})
    table = table.assign(device="cpu", dtype="float32", steps=2000, batch_size=32)
    assert row(evidence.judge(DECLARED, table), "precise_position").verdict == evidence.SUPPORTED
    rope = table["encoding"] == "rope"
    table.loc[rope & (table["seed"] >= 5), "device"] = "cuda"
    table.loc[~rope & (table["seed"] == 0), "batch_size"] = 64
    judged = row(evidence.judge(DECLARED, table), "precise_position")
    (comparison,) = judged.judged
    assert judged.verdict == evidence.INCONCLUSIVE and comparison.outcome == evidence.GATED
    assert comparison.gates == ("sinusoidal: its seeds mix batch_size (32, 64)",
                                "rope: its seeds mix device (cpu, cuda)",
                                "unequal budgets (steps, batch): (2000, 64) vs (2000, 32)")
