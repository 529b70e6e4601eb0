"""Declared comparisons and their judgement, on simulated data with known truth: error rates, power,
equivalence, gates, Holm and the interval against scipy / statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from posbench import comparisons, evidence
from posbench.comparisons import ADDING_SUFFICES, OTHER_SCHEME_WINS

DECLARED = comparisons.load()
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
    _, _, _, better, not_better = evidence.welch(comparator, added, comparison.higher_is_better, comparison.margin)
    return np.where(better < evidence.ALPHA, "better", np.where(not_better < evidence.ALPHA, "not better", "unclear"))


def test_with_every_arm_equal_the_comparator_rarely_wins():
    outcomes = decided(PROSE, *simulate(PROSE, truth=0.0, spread=PROSE.reference_spread))
    assert (outcomes == "better").mean() <= 0.05
    # at exactly δ, "better by more than δ" is the null hypothesis: its error rate is the test's level
    at_margin = decided(PROSE, *simulate(PROSE, truth=PROSE.margin, spread=PROSE.reference_spread))
    assert (at_margin == "better").mean() == pytest.approx(evidence.ALPHA, abs=0.012)


@pytest.mark.parametrize("comparison", [c for c in DECLARED.comparisons if c.detectable(10) <= c.margin],
                         ids=lambda c: c.id)
def test_a_comparator_better_by_two_margins_is_found_at_ten_seeds(comparison):
    """Every declared margin that the file says is detectable at 10 seeds is, at the reference spread."""
    outcomes = decided(comparison, *simulate(comparison, 2 * comparison.margin, comparison.reference_spread))
    assert (outcomes == "better").mean() >= 0.8


def test_equivalence_only_when_the_interval_lies_below_the_margin():
    comparator, added = simulate(PROSE, truth=0.03, spread=0.03, times=500)
    effect, low, high, better, not_better = evidence.welch(comparator, added, False, PROSE.margin)
    assert np.array_equal(not_better < evidence.ALPHA, high < PROSE.margin)
    assert np.array_equal(better < evidence.ALPHA, low > PROSE.margin)
    assert 0.1 < (high < PROSE.margin).mean() < 0.9  # both kinds of table occur


def test_the_interval_is_scipys_welch_interval_and_the_sign_follows_the_metric():
    rng = np.random.default_rng(1)
    comparator, added = rng.normal(2.3, 0.02, 10), rng.normal(2.5, 0.01, 12)
    numbers = evidence.contrast(comparator, added, higher_is_better=False, margin=0.05)
    interval = stats.ttest_ind(added, comparator, equal_var=False).confidence_interval()  # lower is better
    assert numbers.effect == pytest.approx(added.mean() - comparator.mean())
    assert (numbers.ci_low, numbers.ci_high) == pytest.approx((interval.low, interval.high))
    p = stats.ttest_ind(added - 0.05, comparator, equal_var=False, alternative="greater").pvalue
    assert numbers.p_better == pytest.approx(p)


def test_arms_without_spread_are_exact():
    numbers = evidence.contrast(np.full(10, 0.9), np.full(10, 0.5), True, 0.1)
    assert (numbers.effect, numbers.ci_low, numbers.ci_high) == pytest.approx((0.4, 0.4, 0.4))
    assert (numbers.p_better, numbers.p_not_better) == (0.0, 1.0)


def test_holm_is_statsmodels_holm_for_many_families_at_once():
    p = np.random.default_rng(2).uniform(0, 0.2, size=(200, 4))
    expected = np.array([multipletests(row, method="holm")[1] for row in p])
    assert evidence.holm(p) == pytest.approx(expected)


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
def results(arms: dict[str, list[float]], task="reverse", metric="exact_match", chance=np.nan, token=None,
            status=None, ratio=1.0) -> pd.DataFrame:
    """An extrapolation table: per-seed values of each arm at one length."""
    rows = []
    for encoding, values in arms.items():
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
    arm = evidence.Arm("sinusoidal", np.array([0.5]), np.array([0]), np.array([0.75]), np.nan, eval_len=16)
    other = evidence.Arm("rope", np.array([1.0]), np.array([0]), np.array([1.0]), np.nan, eval_len=16)
    error = evidence.item_error(items, DECLARED.by_id["reverse-rope"], "tiny", arm, other)
    assert error == pytest.approx(np.sqrt(0.25 / n), rel=0.1)


def test_the_verdict_table_has_one_row_per_comparison():
    table = results({"sinusoidal": ten(0.1), "rope": ten(0.9)}, token={"sinusoidal": 0.8, "rope": 0.99})
    frame = evidence.table(evidence.judge(DECLARED, table))
    assert frame[["row", "comparison", "add_arm", "comparator_arm", "n_added", "n_comparator"]].values.tolist() == [
        ["precise_position", "reverse-rope", "sinusoidal", "rope", 10, 10]]
    assert frame.loc[0, "mean_comparator"] == pytest.approx(0.9) and frame.loc[0, "margin"] == 0.1


# ----- the declaration file --------------------------------------------------------------------------
def test_the_default_preset_declares_one_comparison_per_row():
    default = DECLARED.in_preset("default")
    assert [c.row for c in default] == list(comparisons.ROW_CLAIMS)
    assert all(c.added in ("sinusoidal", "learned", "sinusoidal_2d") for c in DECLARED.comparisons)
    assert DECLARED.arms("default")["lm_prose"] == ["sinusoidal", "rope", "sinusoidal_concat_fixed", "alibi"]
    assert len(DECLARED.sha256) == 64 and DECLARED.margin("lm_prose", "bits_per_char") == 0.05


@pytest.mark.parametrize(("change", "message"), [
    ({"comparator": "ropee"}, "comparator 'ropee' is not an encoding; allowed: "),
    ({"added": "rope"}, "added 'rope' does not add P to E; allowed: "),
    ({"metric": "accuracy"}, "task lm_prose has no metric 'accuracy'; allowed: bits_per_char, token_accuracy"),
    ({"margin": "0.05"}, "margin = '0.05' has the wrong type; expected int or float"),
    ({"length_ratio": 3}, "length_ratio 3 is not one of lm_prose's evaluation factors; allowed: 1, 1.25"),
    ({"presets": ["nightly"]}, "presets ['nightly']; allowed: a non-empty list of default, full"),
])
def test_a_bad_declaration_is_one_line_naming_the_key(tmp_path, change, message):
    entry = {"id": "x", "task": "lm_prose", "metric": "bits_per_char", "length_ratio": 1, "added": "sinusoidal",
             "comparator": "rope", "margin": 0.05, "reference_spread": 0.02, "presets": ["default"], **change}
    path = tmp_path / "comparisons.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"rows": {"standard_nlp": [entry]}}))
    with pytest.raises(ValueError, match="row 'standard_nlp', comparison 'x': ") as error:
        comparisons.load(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_unknown_row_or_a_missing_file_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rows: {long_context: []}\n")
    with pytest.raises(ValueError, match="unknown row 'long_context'; allowed: standard_nlp, fixed_length"):
        comparisons.load(path)
    with pytest.raises(ValueError, match="does not exist"):
        comparisons.load(tmp_path / "absent.yaml")
