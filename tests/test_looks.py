"""The experiment behind a verdict as declared in comparisons.yaml: each comparison's own seeds (from the
power rule, after the pilots'), a second look only where the first decided nothing clear (α split by
Pocock's rule), and the effect's trajectory over annealed checkpoints with its trend."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from posbench import comparisons, evidence, statistics, trajectories

SHIPPED = comparisons.load()
REVERSE = SHIPPED.by_id["reverse-rope"]  # exact match, δ 0.10, reverse's 2,000 steps
FIRST = SHIPPED.seed_rule.first_seed
LEVELS = statistics.boundaries(SHIPPED.seed_rule.looks, SHIPPED.seed_rule.alpha)


def reverse_results(values: dict[str, dict[int, float]], token: float = 0.9) -> pd.DataFrame:
    """An extrapolation table of reverse-rope's arms: seed -> exact match per encoding, at its budget."""
    return pd.DataFrame([{"task": "reverse", "encoding": encoding, "size": "tiny", "seed": seed, "status": "ok",
                          "metric": "exact_match", "length_ratio": 1.0, "eval_len": 16, "value": value,
                          "token_accuracy": token, "chance": np.nan, "token_chance": 0.125, "steps": 2000,
                          "batch_size": 32, "lr": 0.003}
                         for encoding, by_seed in values.items() for seed, value in by_seed.items()])


def around(mean: float, seeds, spread: float = 0.02) -> dict[int, float]:
    seeds = list(seeds)
    return dict(zip(seeds, mean + spread * np.linspace(-1.5, 1.5, len(seeds))))


def judged(table: pd.DataFrame, checkpoints: pd.DataFrame | None = None) -> evidence.Judged:
    (judgement,) = evidence.judge(SHIPPED, table, comparisons=[REVERSE], checkpoints=checkpoints)
    (found,) = judgement.judged
    return found


def test_the_seed_rule_is_the_power_calculation_within_its_bounds():
    rule = SHIPPED.seed_rule
    assert (rule.alpha, rule.power, rule.min, rule.max, rule.first_seed, rule.looks) == (
        0.025, 0.8, 7, 10, 100, "pocock")
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert math.ceil(2 * (z * 0.094 / 0.10) ** 2) == 14 and rule.n(0.094, 0.10) == 10  # SCAN's spread: the cap
    assert rule.n(0.060, 0.10) == 7 and rule.n(0.070, 0.10) == 8  # ceil(5.65) = 6: the floor 7; ceil(7.69) = 8
    scan = SHIPPED.by_id["scan-rope"]
    assert (scan.n_seeds, scan.seeds(), scan.seeds(2)[-1], scan.budget) == (10, tuple(range(100, 110)), 119, 3200)
    assert SHIPPED.budget_rule.budgets(scan.budget) == (800, 1600, 3200)


def test_the_looks_split_alpha_as_the_textbooks_do():
    pocock = statistics.boundaries("pocock", 0.025)
    fleming = statistics.boundaries("obrien_fleming", 0.025)
    assert [stats.norm.isf(a) for a in pocock] == pytest.approx([2.178, 2.178], abs=1e-3)
    assert [stats.norm.isf(a) for a in fleming] == pytest.approx([2.797, 1.977], abs=1e-3)
    with pytest.raises(ValueError, match="looks 'haybittle'; allowed: pocock, obrien_fleming"):
        statistics.boundaries("haybittle")


def test_a_comparison_ignores_seeds_it_did_not_declare():
    """Pilot seeds 0–2 say the reverse of the deciding seeds; only seeds 100–106 (n = 7) decide."""
    pilots = reverse_results({"sinusoidal": around(0.9, range(3)), "rope": around(0.1, range(3))})
    deciding = reverse_results({"sinusoidal": around(0.3, range(FIRST, FIRST + 7)),
                                "rope": around(0.9, range(FIRST, FIRST + 7))})
    found = judged(pd.concat([pilots, deciding]))
    assert found.added.seeds.tolist() == list(range(100, 107)) and found.numbers.effect == pytest.approx(0.6)
    assert (found.outcome, found.look, found.alpha) == (evidence.BETTER, 1, LEVELS[0])
    assert evidence.table([evidence.RowJudgement("precise_position", "tiny", "supported", 1.0, {}, [found])]).loc[
        0, "seeds_added"] == "100-106"
    assert evidence.judge(SHIPPED, pilots, comparisons=[REVERSE]) == []  # the pilots alone: no results for it
    at_another_rate = deciding.assign(lr=np.where(deciding["seed"] % 2, 0.003, 0.009))
    assert judged(at_another_rate).gates[0] == "sinusoidal: its seeds mix lr (0.003, 0.009)"


def test_a_second_look_only_where_the_first_is_unclear_and_at_its_own_level():
    first = range(FIRST, FIRST + 7)
    second = range(FIRST + 7, FIRST + 14)
    clear = reverse_results({"sinusoidal": around(0.3, first), "rope": around(0.9, first)})
    contrary = reverse_results({"sinusoidal": around(0.9, second), "rope": around(0.1, second)})
    kept = judged(pd.concat([clear, contrary]))  # a clear first look: the second n seeds are never read
    assert (kept.look, kept.added.n, kept.outcome) == (1, 7, evidence.BETTER)
    assert not evidence.wants_second_look(kept)

    rng = np.random.default_rng(0)
    noisy = reverse_results({"sinusoidal": dict(zip(first, rng.normal(0.40, 0.15, 7))),
                             "rope": dict(zip(first, rng.normal(0.52, 0.15, 7)))})
    alone = judged(noisy)
    assert alone.outcome == evidence.UNCLEAR and evidence.wants_second_look(alone)
    (judgement,) = evidence.judge(SHIPPED, noisy, comparisons=[REVERSE])
    assert evidence.second_looks([judgement]) == [("reverse-rope", "tiny")]
    more = reverse_results({"sinusoidal": around(0.40, second, 0.05), "rope": around(0.75, second, 0.05)})
    again = judged(pd.concat([noisy, more]))
    assert (again.look, again.added.n, again.comparator.n, again.alpha) == (2, 14, 14, LEVELS[1])
    both = pd.concat([noisy, more])
    values = {e: both[both["encoding"] == e].sort_values("seed")["value"].to_numpy() for e in ("sinusoidal", "rope")}
    expected = statistics.contrast(values["rope"], values["sinusoidal"], True, 0.10, LEVELS[1])
    assert (again.numbers.ci_low, again.numbers.ci_high) == pytest.approx((expected.ci_low, expected.ci_high))
    wider = statistics.contrast(values["rope"], values["sinusoidal"], True, 0.10)  # 95 %: narrower than the look's
    assert again.numbers.ci_low < wider.ci_low and not evidence.wants_second_look(again)
    part = judged(pd.concat([noisy, more[more["seed"] < FIRST + 10]]))  # the second look under way
    assert (part.look, part.outcome) == (2, evidence.FEW_SEEDS)


def checkpoint_table(effects: dict[int, float], seeds=range(FIRST, FIRST + 7), base: float = 0.5) -> pd.DataFrame:
    """reverse-rope's arms at each checkpoint budget: rope ``effect`` above sinusoidal, seed noise 0.01."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in seeds:
        for encoding in ("sinusoidal", "rope"):
            wobble = rng.normal(0, 0.01)
            for budget, effect in effects.items():
                value = base + wobble + rng.normal(0, 0.005) + (effect if encoding == "rope" else 0.0)
                rows.append({"task": "reverse", "encoding": encoding, "size": "tiny", "seed": seed, "status": "ok",
                             "length_ratio": 1.0, "budget": budget, "value": value, "steps": 2000})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("effects, label", [
    ({500: 0.40, 1000: 0.20, 2000: 0.0}, trajectories.CLOSING),
    ({500: 0.20, 1000: 0.20, 2000: 0.21}, trajectories.STEADY),
    ({500: 0.10, 1000: 0.20, 2000: 0.40}, trajectories.WIDENING),
])
def test_the_trend_over_the_last_two_checkpoints_follows_the_declared_rule(effects, label):
    checkpoints = checkpoint_table(effects)
    final = checkpoints[checkpoints["budget"] == 2000].assign(metric="exact_match", eval_len=16, token_accuracy=0.9,
                                                              chance=np.nan, token_chance=0.125, batch_size=32)
    found = judged(final, checkpoints)
    assert [p["budget"] for p in found.trajectory] == [500, 1000, 2000]
    assert [p["effect"] for p in found.trajectory] == pytest.approx(list(effects.values()), abs=0.02)
    assert (found.trend.since, found.trend.until, found.trend.label) == (1000, 2000, label)
    assert found.trend.change == pytest.approx(effects[2000] - effects[1000], abs=0.02)
    judgement = evidence.RowJudgement("precise_position", "tiny", "x", 1.0, {}, [found])
    trajectory = evidence.trajectory_table([judgement])
    assert trajectory["budget"].tolist() == [500, 1000, 2000] and trajectory["decides"].tolist() == [False, False, True]
    assert evidence.table([judgement]).loc[0, "trend"] == label


def test_the_trend_rule_in_numbers():
    band = 0.05  # steady 0.5 × δ 0.10
    assert trajectories.trend_label(0.3, -0.2, -0.1, band) == trajectories.CLOSING
    assert trajectories.trend_label(-0.3, 0.1, 0.2, band) == trajectories.CLOSING  # a negative gap closing upward
    assert trajectories.trend_label(0.3, -0.04, 0.04, band) == trajectories.STEADY  # within ± steady·δ, though not 0
    assert trajectories.trend_label(0.3, 0.06, 0.2, band) == trajectories.WIDENING
    assert trajectories.trend_label(0.3, -0.2, 0.1, band) == trajectories.UNCLEAR
