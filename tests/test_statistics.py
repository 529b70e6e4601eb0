"""posbench.statistics against values computed by hand (scipy.stats.t and .norm for the quantiles) and against
the reference implementations it stands in for (scipy's t-tests, statsmodels' Holm, scipy's linregress)."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from posbench import comparisons, statistics


def test_a_mean_interval_is_the_mean_plus_minus_t_times_the_standard_error():
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])  # mean 3, sample sd √2.5, se √0.5
    half = stats.t.ppf(0.975, 4) * math.sqrt(2.5 / 5)
    assert half == pytest.approx(1.963243, abs=1e-6)
    assert statistics.mean_interval(values) == pytest.approx((3 - half, 3 + half), rel=1e-15)
    assert statistics.mean_interval(values, 0.90) == pytest.approx((3 - 1.507443, 3 + 1.507443), abs=1e-6)


def test_a_mean_interval_equals_scipys_one_sample_t_interval_to_the_bit():
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 10, 30):
        values = rng.random(n) * 0.3 + 0.5
        expected = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
        assert statistics.mean_interval(values) == (expected.low, expected.high)


def test_seeds_without_spread_give_a_point_interval():
    assert statistics.mean_interval(np.full(4, 0.25)) == (0.25, 0.25)


def test_a_welch_interval_matches_the_hand_computed_one():
    comparator, added = np.array([0.9, 0.8, 0.85, 0.95, 0.7]), np.array([0.6, 0.65, 0.5, 0.7])
    va, vb = comparator.var(ddof=1) / 5, added.var(ddof=1) / 4
    dof = (va + vb) ** 2 / (va**2 / 4 + vb**2 / 3)  # Welch–Satterthwaite
    effect = comparator.mean() - added.mean()
    half = stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
    assert (effect, dof, half) == pytest.approx((0.2275, 6.8712, 0.1439), abs=1e-4)
    numbers = statistics.contrast(comparator, added, True, 0.1)
    assert (numbers.effect, numbers.ci_low, numbers.ci_high) == pytest.approx((effect, effect - half, effect + half),
                                                                              rel=1e-12)
    # "better by more than δ": one-sided Welch of comparator - δ against added
    t_better = (effect - 0.1) / math.sqrt(va + vb)
    assert numbers.p_better == pytest.approx(stats.t.sf(t_better, dof), rel=1e-10)
    assert numbers.p_not_better == pytest.approx(stats.t.cdf(t_better, dof), rel=1e-10)
    lower = statistics.contrast(-comparator, -added, False, 0.1)  # lower is better: the same effect, sign-flipped data
    assert (lower.effect, lower.ci_low, lower.ci_high) == pytest.approx((effect, effect - half, effect + half))


def test_holm_matches_the_textbook_example_and_statsmodels():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert statistics.holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert statistics.holm(p).tolist() == pytest.approx(multipletests(p, method="holm")[1].tolist())
    families = np.array([p, [0.5, 0.2, 0.9, 0.001]])  # many families at once, each on its own
    assert statistics.holm(families)[1].tolist() == pytest.approx(multipletests(families[1], method="holm")[1].tolist())
    assert statistics.holm([0.6, 0.9]).tolist() == [1.0, 1.0]  # 1.2 and the running max: capped at 1


def test_the_power_rule_is_one_formula_for_declared_and_measured_spreads():
    # 2 (z · s / d)² with z = 1.96 + 0.8416, s = 0.1, d = 0.05: 62.79 -> 63 seeds per arm
    assert statistics.power_seeds(statistics.POWER_Z, 0.1, 0.05) == 63
    rule = comparisons.load().seed_rule
    z = stats.norm.ppf(1 - rule.alpha) + stats.norm.ppf(rule.power)
    assert rule.n(0.1, 0.05) == min(rule.max, max(rule.min, statistics.power_seeds(z, 0.1, 0.05)))
    spread = np.array([0.0, 0.2])  # sample sd √0.02 = 0.1414 in each arm
    assert statistics.seeds_needed(spread, spread + 1, effect=0.15, margin=0.1) == math.ceil(
        2 * (statistics.POWER_Z * math.sqrt(0.02) / 0.05) ** 2) == 126
    assert statistics.seeds_needed(spread, spread, effect=0.1, margin=0.1) == statistics.MAX_NEEDED  # on δ: never
    assert statistics.seeds_needed(spread, spread, effect=5.0, margin=0.1, floor=7) == 7


def test_the_looks_levels_are_the_textbook_boundaries():
    pocock, fleming = statistics.boundaries("pocock", 0.025), statistics.boundaries("obrien_fleming", 0.025)
    assert stats.norm.isf(pocock) == pytest.approx([2.178, 2.178], abs=1e-3)
    assert stats.norm.isf(fleming) == pytest.approx([2.797, 1.977], abs=1e-3)


def test_a_slope_interval_matches_linregress():
    x = np.arange(10, dtype=float) * 100
    y = 3.0 - 0.002 * x + np.array([0.01, -0.02, 0.0, 0.015, -0.01, 0.02, -0.005, 0.0, 0.01, -0.015])
    slope, low, high = statistics.slope_interval(x, y)
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, 8) * fit.stderr
    assert (slope, low, high) == pytest.approx((fit.slope, fit.slope - half, fit.slope + half), rel=1e-10)


@pytest.mark.parametrize(("values", "chance", "higher", "expected"), [
    ([0.6, 0.7, 0.8], 0.5, True, True),  # bound 0.7 - 2.920 · 0.1/√3 = 0.531 > 0.5
    ([0.6, 0.7, 0.8], 0.55, True, False),  # 0.531 < 0.55
    ([0.6, 0.7, 0.8], 0.9, False, True),  # lower is better: upper bound 0.869 < 0.9
    ([0.6, 0.7, 0.8], 0.85, False, False),
    ([0.6], 0.5, True, True),  # one seed: its value
    ([], 0.5, True, False),
    ([0.6, 0.7], math.nan, True, None),  # chance unknown
])
def test_above_chance_reads_the_one_sided_95_percent_bound(values, chance, higher, expected):
    assert statistics.above_chance(np.array(values, float), chance, higher) is expected


# ----- Welch, Holm and the power rule: exact numbers (each pins what a mutant of statistics.py changed) -----
def test_the_interval_is_scipys_welch_interval_and_the_sign_follows_the_metric():
    rng = np.random.default_rng(1)
    comparator, added = rng.normal(2.3, 0.02, 10), rng.normal(2.5, 0.01, 12)
    numbers = statistics.contrast(comparator, added, higher_is_better=False, margin=0.05)
    interval = stats.ttest_ind(added, comparator, equal_var=False).confidence_interval()  # lower is better
    assert numbers.effect == pytest.approx(added.mean() - comparator.mean())
    assert (numbers.ci_low, numbers.ci_high) == pytest.approx((interval.low, interval.high))
    p = stats.ttest_ind(added - 0.05, comparator, equal_var=False, alternative="greater").pvalue
    assert numbers.p_better == pytest.approx(p)


def test_arms_without_spread_are_exact():
    numbers = statistics.contrast(np.full(10, 0.9), np.full(10, 0.5), True, 0.1)
    assert (numbers.effect, numbers.ci_low, numbers.ci_high) == pytest.approx((0.4, 0.4, 0.4))
    assert (numbers.p_better, numbers.p_not_better) == (0.0, 1.0)


def test_holm_is_statsmodels_holm_for_many_families_at_once(monkeypatch):
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)  # multipletests collects on every call: ~50 s here
    p = np.random.default_rng(2).uniform(0, 0.2, size=(200, 4))
    expected = np.array([multipletests(row, method="holm")[1] for row in p])
    assert statistics.holm(p) == pytest.approx(expected)


def test_welch_on_seed_resamples_is_the_contrast_of_each_resample():
    """Batched arms (resamples on the first axis) give, row by row, what each row alone gives: the
    spread-free row exactly, the noisy one scipy's Welch numbers."""
    rng = np.random.default_rng(4)
    comparator = np.stack([np.full(10, 0.9), rng.normal(0.6, 0.05, 10), np.full(10, 0.7)])
    added = np.stack([np.full(10, 0.5), rng.normal(0.5, 0.05, 10), rng.normal(0.5, 0.05, 10)])
    batched = np.stack(statistics.welch(comparator, added, True, 0.1), axis=-1)  # (3, 5)
    for b in range(3):
        one = statistics.contrast(comparator[b], added[b], True, 0.1)
        assert batched[b].tolist() == pytest.approx(
            [one.effect, one.ci_low, one.ci_high, one.p_better, one.p_not_better], abs=1e-12)
    assert batched[0].tolist() == pytest.approx([0.4, 0.4, 0.4, 0.0, 1.0])


@pytest.mark.parametrize("constant", ["comparator", "added"])
def test_one_arm_without_spread_keeps_the_welch_interval(constant):
    """Only two spread-free arms are exact; one spread-free arm is an ordinary Welch interval (df = n − 1)."""
    noisy = 0.5 + 0.03 * np.linspace(-1.5, 1.5, 10)
    comparator, added = (np.full(10, 0.8), noisy) if constant == "comparator" else (noisy + 0.3, np.full(10, 0.5))
    numbers = statistics.contrast(comparator, added, True, 0.1)
    half = stats.t.ppf(0.975, 9) * noisy.std(ddof=1) / np.sqrt(10)
    assert (numbers.ci_low, numbers.ci_high) == pytest.approx((0.3 - half, 0.3 + half))
    assert 0 < numbers.p_better < 1e-6 and numbers.p_not_better == pytest.approx(1 - numbers.p_better)


def test_spread_free_arms_exactly_at_the_margin_show_neither():
    """Effect 0.25 = δ exactly (binary fractions): neither "better by more than δ" nor "not better by δ"."""
    numbers = statistics.contrast(np.full(10, 0.75), np.full(10, 0.5), True, 0.25)
    assert (numbers.effect, numbers.ci_low, numbers.ci_high) == (0.25, 0.25, 0.25)
    assert (numbers.p_better, numbers.p_not_better) == (1.0, 1.0)
    # the same table among resamples with spread, in either arm: still exact, resample by resample
    noisy = 0.5 + 0.03 * np.linspace(-1.5, 1.5, 10)
    for comparator, added in ((np.stack([np.full(10, 0.75), noisy]), np.full((2, 10), 0.5)),
                              (np.full((2, 10), 0.75), np.stack([np.full(10, 0.5), noisy]))):
        _, _, _, p_better, p_not_better = statistics.welch(comparator, added, True, 0.25)
        assert (p_better[0], p_not_better[0]) == (1.0, 1.0)


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_seeds_needed_at_and_one_away_from_the_margin():
    low, high = np.array([0.25, 0.25, 0.5, 0.5]), np.array([1.25, 1.25, 1.5, 1.5])
    assert statistics.seeds_needed(high, low, effect=0.25, margin=0.25) == statistics.MAX_NEEDED  # on δ: never
    # one unit from δ at spread 0.144: 2·(2.8·0.144/1)² < 1 -> the floor (the comparison's declared n)
    assert statistics.seeds_needed(high, low, effect=1.25, margin=0.25, floor=7) == 7
    assert statistics.seeds_needed(np.array([1.0]), np.array([0.5]), effect=0.5, margin=0.1) == statistics.MAX_NEEDED
