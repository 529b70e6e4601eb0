"""The statistics every judged number rests on, in one module: the judge's comparisons
(:mod:`posbench.evidence`), the published shapes (:mod:`posbench.shapes`), the advice's rankings
(:mod:`posbench.advise`) and the training record's trend (:mod:`posbench.train`) all read them here, so an
interval means the same wherever it is printed.

* **Student's t intervals**: :func:`t_interval` from an estimate, its standard error and degrees of
  freedom, in the form scipy's t-test results use (``estimate + t_p · se`` at both tails), so an
  interval here equals scipy's to the bit; :func:`mean_interval` for a mean over seeds,
  :func:`above_chance` its one-sided bound against a chance level, :func:`slope_interval` for a
  least-squares slope.
* **Welch**: :func:`welch` / :func:`contrast`, one comparator against one added arm: the effect, its
  Welch interval (scipy's ``ttest_ind(..., equal_var=False)``) and the one-sided p-values of "better by
  more than δ" and "not better by δ".
* **Holm**: :func:`holm`, the step-down adjustment over a family of p-values (statsmodels'
  ``multipletests(method="holm")``, vectorised over many families).
* **The power rule**: :func:`power_seeds`, seeds per arm for 80 % power, from a declared spread
  (:class:`posbench.comparisons.SeedRule`) or a measured one (:func:`seeds_needed`).
* **Sequential looks**: :func:`boundaries`, the one-sided levels of a comparison's two looks (Pocock's
  or O'Brien–Fleming's split of α).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

ALPHA = 0.025  # each one-sided test: both together are the 95 % interval (a look's own level: boundaries)
LEVEL = 0.95  # the two-sided level of every interval a reader sees
POWER_Z = 1.9600 + 0.8416  # z_0.975 + z_0.80: a one-sided 2.5 % test (one side of a 95 % interval), 80 % power
MAX_NEEDED = 1000  # the most seeds per arm the power rule asks for (an effect on δ: never decided)


# ----- Student's t ---------------------------------------------------------------------------------
def t_interval(estimate: float, standard_error: float, dof: float, level: float = LEVEL) -> tuple[float, float]:
    """The two-sided ``level`` Student's t interval ``estimate ± t · standard_error`` at ``dof`` degrees of
    freedom (each end the one-sided ``(1 + level) / 2`` bound), computed as scipy's t-test results compute
    theirs, so the two agree to the last bit."""
    tail = (1 - level) / 2
    low, high = special.stdtrit(dof, np.array([tail, 1 - tail]))
    return float(estimate + low * standard_error), float(estimate + high * standard_error)


def mean_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` t interval of the mean of ``values (n,)``, n ≥ 2 (scipy's ``ttest_1samp`` interval: the
    standard error from the sample variance, n - 1 degrees of freedom). Exact for values without spread."""
    n = len(values)
    mean = values.mean()
    standard_error = np.sqrt(np.mean((values - mean) ** 2) * (n / (n - 1)) / n)
    return t_interval(mean, standard_error, n - 1, level)


def above_chance(values: np.ndarray, chance: float, higher_is_better: bool) -> bool | None:
    """Whether the one-sided 95 % bound over seeds of ``values (n,)`` beats ``chance`` (one seed: its value);
    ``None`` when chance (or a value) is unknown."""
    if math.isnan(chance) or np.isnan(values).any():
        return None
    if len(values) == 0:
        return False
    one_sided = 0.90  # each end of a two-sided 90 % interval is a one-sided 95 % bound
    low, high = mean_interval(values, one_sided) if len(values) > 1 else (values[0], values[0])
    return bool(low > chance if higher_is_better else high < chance)


def slope_interval(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The least-squares slope of ``y (n,)`` on ``x (n,)`` and its ``level`` t interval (n - 2 degrees of
    freedom): (slope, low, high)."""
    centred = x - x.mean()  # (n,)
    slope = float((centred * y).sum() / (centred**2).sum())
    residuals = y - y.mean() - slope * centred  # (n,)
    standard_error = math.sqrt((residuals**2).sum() / (len(x) - 2) / (centred**2).sum())
    return slope, *t_interval(slope, standard_error, len(x) - 2, level)


# ----- Welch ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Contrast:
    """A comparator against an added arm: effect (positive = comparator better), 95 % Welch interval,
    and the raw one-sided p-values of "better by more than δ" and "not better by δ"."""

    effect: float
    ci_low: float
    ci_high: float
    p_better: float
    p_not_better: float


def welch(comparator: np.ndarray, added: np.ndarray, higher_is_better: bool, margin: float, alpha: float = ALPHA):
    """:class:`Contrast`'s numbers as arrays: ``comparator`` and ``added`` may carry leading batch axes
    (seed resamples), the seeds on the last; the interval's level is ``1 - 2·alpha``. Two arms without
    any seed spread are exact."""
    sign = 1.0 if higher_is_better else -1.0
    better, base = sign * comparator, sign * added  # larger is better on both
    effect = better.mean(-1) - base.mean(-1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's "precision loss" for arms without spread: exact below
        result = stats.ttest_ind(better, base, axis=-1, equal_var=False)
        interval = result.confidence_interval(1 - 2 * alpha)
        shifted = better - margin
        p_better = stats.ttest_ind(shifted, base, axis=-1, equal_var=False, alternative="greater").pvalue
        p_not_better = stats.ttest_ind(shifted, base, axis=-1, equal_var=False, alternative="less").pvalue
    exact = (better.var(-1) == 0) & (base.var(-1) == 0)
    low = np.where(exact, effect, interval.low)
    high = np.where(exact, effect, interval.high)
    p_better = np.where(exact, (effect <= margin).astype(float), p_better)
    p_not_better = np.where(exact, (effect >= margin).astype(float), p_not_better)
    return effect, low, high, p_better, p_not_better


def contrast(comparator: np.ndarray, added: np.ndarray, higher_is_better: bool, margin: float,
             alpha: float = ALPHA) -> Contrast:
    """One comparison's numbers from the per-seed values of its two arms (interval at ``1 - 2·alpha``)."""
    return Contrast(*(float(x) for x in welch(np.asarray(comparator, float), np.asarray(added, float),
                                              higher_is_better, margin, alpha)))


# ----- Holm ----------------------------------------------------------------------------------------
def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values along the last axis, for many families at once (statsmodels'
    ``multipletests(method="holm")`` per family, which the tests check; that function runs
    ``gc.collect()`` on every call, far too slow for a thousand bootstrap resamples)."""
    p_values = np.asarray(p_values, float)
    m = p_values.shape[-1]
    order = np.argsort(p_values, axis=-1)
    stepped = np.take_along_axis(p_values, order, -1) * (m - np.arange(m))
    adjusted = np.empty_like(p_values)
    np.put_along_axis(adjusted, order, np.minimum(1.0, np.maximum.accumulate(stepped, axis=-1)), -1)
    return adjusted


# ----- the power rule ------------------------------------------------------------------------------
def power_seeds(z: float, spread: float, distance: float) -> int:
    """Seeds per arm for a two-arm test at ``z`` (z of its level plus z of its power) to find ``distance``
    at a seed spread ``spread``: ``ceil(2 (z · spread / distance)²)``, unbounded."""
    return math.ceil(2 * (z * spread / distance) ** 2)


def seeds_needed(comparator: np.ndarray, added: np.ndarray, effect: float, margin: float, floor: int = 2) -> int:
    """Seeds per arm for 80 % power to place the interval on one side of δ, at the observed spread
    and the observed distance of the effect from δ (at least ``floor``, capped at :data:`MAX_NEEDED`)."""
    spread = math.sqrt((np.var(comparator, ddof=1) + np.var(added, ddof=1)) / 2)
    distance = abs(effect - margin)
    if distance == 0 or not math.isfinite(spread):
        return MAX_NEEDED
    return min(MAX_NEEDED, max(floor, power_seeds(POWER_Z, spread, distance)))


# ----- sequential looks ----------------------------------------------------------------------------
def boundaries(rule: str, alpha: float = ALPHA) -> tuple[float, float]:
    """The nominal one-sided levels of a comparison's two looks (equal seed counts at each) that keep the
    overall one-sided ``alpha``: Pocock's one critical z for both, or O'Brien–Fleming's z·√2 then z.
    Found on the two looks' joint normal law (correlation √½), so any ``alpha`` works; at 2.5 %
    they are the textbook z = 2.178 (Pocock) and 2.797, 1.977 (O'Brien–Fleming)."""
    from scipy.optimize import brentq

    joint = stats.multivariate_normal([0.0, 0.0], [[1.0, math.sqrt(0.5)], [math.sqrt(0.5), 1.0]])
    scale = (1.0, 1.0) if rule == "pocock" else (math.sqrt(2), 1.0)
    if rule not in ("pocock", "obrien_fleming"):
        raise ValueError(f"looks {rule!r}; allowed: pocock, obrien_fleming")
    crossing = brentq(lambda z: 1 - joint.cdf(np.array([scale[0] * z, scale[1] * z])) - alpha, 1.0, 5.0, xtol=1e-10)
    return tuple(float(stats.norm.sf(s * crossing)) for s in scale)
