"""A comparison's effect over its annealed checkpoints (``checkpoints.csv``): at each budget both arms
have, the effect and its 95 % Welch interval (:func:`trajectory`), and the effect's change over the last
two budgets (:class:`Trend`), labelled by the declared trend rule (``comparisons.yaml``'s ``trend.steady``,
:func:`trend_label`). The judge (:func:`posbench.evidence.with_trajectory`) attaches both to each compared
comparison; they describe how the verdict's budget was reached and never decide it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from posbench import statistics
from posbench.arms import Arm, cell_rows, declared_rows
from posbench.comparisons import ArmSpec, Comparison

CLOSING, WIDENING, STEADY = "closing", "widening", "steady"  # the trend of an effect over the last budgets
UNCLEAR = "unclear"  # a trend whose interval is neither within the steady band nor wholly on one side


@dataclass(frozen=True)
class Trend:
    """The change of the effect from budget ``since`` to ``until`` (the last two checkpoints): Welch over
    each arm's per-seed changes, 95 %; ``label`` by the declared rule (:func:`trend_label`)."""

    since: int
    until: int
    change: float
    ci_low: float
    ci_high: float
    label: str


def trajectory(checkpoints: pd.DataFrame, comparison: Comparison, size: str, added: Arm, comparator: Arm,
               steady: float) -> tuple[tuple[dict, ...], Trend | None]:
    """The comparison's effect and its 95 % Welch interval at every checkpoint budget both arms have, for the
    seeds the verdict read, and its trend over the last two (``None`` with fewer than two budgets)."""
    added_values, comparator_values = (checkpoint_values(checkpoints, comparison, size, one, spec)
                                       for one, spec in zip((added, comparator), comparison.arms))
    budgets = sorted(set(added_values.columns) & set(comparator_values.columns))
    points = tuple(trajectory_point(comparison, b, comparator_values[b].dropna(), added_values[b].dropna())
                   for b in budgets)
    if len(budgets) < 2:
        return points, None
    return points, effect_trend(comparison, added_values, comparator_values, budgets[-2:], points[-2]["effect"],
                                steady)


def checkpoint_values(checkpoints: pd.DataFrame, comparison: Comparison, size: str, which: Arm,
                      spec: ArmSpec) -> pd.DataFrame:
    """``(seeds, budgets)``: the arm's metric at the comparison's length at each checkpoint, for the seeds
    the verdict read."""
    rows = declared_rows(checkpoints[cell_rows(checkpoints, spec, size)], tuple(which.seeds), comparison.budget)
    rows = rows[np.isclose(rows["length_ratio"].astype(float), comparison.length_ratio) & (rows["status"] == "ok")]
    return rows.pivot_table(index="seed", columns="budget", values="value", aggfunc="first")


def trajectory_point(comparison: Comparison, budget: int, comparator: pd.Series, added: pd.Series) -> dict:
    x = statistics.contrast(comparator.to_numpy(float), added.to_numpy(float), comparison.higher_is_better,
                            comparison.margin)
    return {"budget": int(budget), "n_added": len(added), "n_comparator": len(comparator), "effect": x.effect,
            "ci_low": x.ci_low, "ci_high": x.ci_high}


def effect_trend(comparison: Comparison, added: pd.DataFrame, comparator: pd.DataFrame, last_two: list,
                 before: float, steady: float) -> Trend:
    """The change of the effect over ``last_two`` budgets from each arm's per-seed changes (Welch, 95 %)."""
    since, until = last_two
    changes = [(table[until] - table[since]).dropna().to_numpy(float) for table in (comparator, added)]
    x = statistics.contrast(*changes, comparison.higher_is_better, 0.0)
    return Trend(int(since), int(until), x.effect, x.ci_low, x.ci_high,
                 trend_label(before, x.ci_low, x.ci_high, steady * comparison.margin))


def trend_label(before: float, low: float, high: float, band: float) -> str:
    """The declared trend rule: "steady" when the change's interval lies within ± ``band`` (steady · δ);
    else "closing" when it lies wholly on the side toward zero from the earlier effect ``before``,
    "widening" when wholly away from it; else "unclear"."""
    if -band <= low and high <= band:
        return STEADY
    toward_zero = -1.0 if before > 0 else 1.0
    if (toward_zero < 0 and high < 0) or (toward_zero > 0 and low > 0):
        return CLOSING
    if (toward_zero < 0 and low > 0) or (toward_zero > 0 and high < 0):
        return WIDENING
    return UNCLEAR
