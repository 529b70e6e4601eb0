"""Judging the declared comparisons (:mod:`posbench.comparisons`) on a run's per-seed results.

For one comparison at one model size:

* **Effect**: mean of the comparator minus mean of the added arm over seeds, signed so that a
  positive effect means the comparator is better (bits/char: lower; accuracy: higher).
* **Interval**: the 95 % Welch interval of that difference (scipy's ``ttest_ind(...,
  equal_var=False).confidence_interval()``), from the per-seed means: the seeds are the replicates.
  Beside it, ``eval_se``: the effect's standard error from the evaluation set's own sampling
  (items bootstrapped with the seeds held fixed, the same items for both arms).
* **Tests against the margin δ**, one-sided Welch tests at 2.5 % each, so that a decision can be
  read off the 95 % interval: "comparator better by more than δ" (the interval lies above δ) and
  "comparator not better by δ" (the interval lies below δ, a non-inferiority result for the added
  arm). Their p-values are Holm-adjusted across the comparisons of a row (statsmodels).
* **Gates**: an arm that does not beat its task's chance level at the training length (one-sided 95 %
  bound over seeds; for exact match the token accuracy against the token chance), that diverged, or
  whose positions at the evaluated length were never trained (a learned table beyond its training
  length), "did not learn" and is not compared; one that learned and is at chance beyond its training
  length did not extrapolate: that is compared, with a note. Arms with different training budgets are
  not compared. An undertrained arm is flagged, never gated.
* **Decisions**: with fewer than :data:`MIN_SEEDS` seeds per arm a comparison is descriptive only.
  "Adding suffices" rows: a task *supports* the row when every comparator there is shown not better
  by δ, *contradicts* it when some comparator is shown better by more than δ. "Another scheme wins"
  rows: the reverse. The row: *supported* when every task supports it, *not supported* when any task
  contradicts it, else *inconclusive*.
* **Stability**: the share of seed-bootstrap resamples (seeds drawn with replacement per arm, the
  whole row judged again) that give the row's verdict; below 90 % it is printed "unstable".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats

from posbench import metrics
from posbench.comparisons import POWER_Z, ArmSpec, Comparison, Declaration
from posbench.guidance import ADDING_SUFFICES

ALPHA = 0.025  # each one-sided test: both together are the 95 % interval (a look's own level: boundaries)
BOOTSTRAP = 1000
STABLE = 0.9
MAX_NEEDED = 1000
RUN_KEYS = ("device", "dtype", "steps", "batch_size", "lr")  # what an arm's seeds must share to be replicates
CLOSING, WIDENING, STEADY = "closing", "widening", "steady"  # the trend of an effect over the last budgets
PARAMS_MATCHED = 0.05  # arms at different widths are compared only when their parameter totals are this close
SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
BETTER, NOT_BETTER, UNCLEAR, GATED, FEW_SEEDS = (
    "comparator better by more than δ", "comparator not better by δ", "unclear", "gated", "too few seeds")


@dataclass(frozen=True)
class Arm:
    """One encoding's results for one comparison at one size: the seeds that finished, and why others did not."""

    encoding: str
    values: np.ndarray  # (n,) the comparison's metric per ok seed
    seeds: np.ndarray  # (n,) those seeds
    gate_values: np.ndarray  # (m,) the metric the chance gate reads (token accuracy for exact match) at the
    chance: float  # training length, where the arm learned or not, and its chance level there (NaN: unknown)
    diverged: int = 0
    undertrained: int = 0
    overfit: int = 0  # seeds whose annealed validation loss at the last budget is above an earlier checkpoint's
    untrained_positions: bool = False
    lr: float | None = None  # the rate its seeds trained at (None: several, a gate, or no column)
    budget: tuple | None = None  # (steps, batch size) when the tables have them
    eval_len: int | None = None  # the evaluated length, in the task's units
    train_len: int | None = None  # the training length and model width the arm was trained at (its own,
    d_model: int | None = None  # else the task's and the size's): verdicts.csv's columns
    params: float | None = None  # total parameters (the mean over ok seeds), where the tables have them
    gate_at_length: np.ndarray | None = None  # (n,) the gate's metric at the comparison's length, beyond
    chance_at_length: float = math.nan  # the training length only: a note, never a gate
    mixed: tuple[str, ...] = ()  # "device (cpu, cuda)": what differs between its seeds' runs (never pooled)

    @property
    def n(self) -> int:
        return len(self.values)

    def resampled(self, rng: np.random.Generator, times: int) -> np.ndarray:
        """``(times, n)`` seed-bootstrap resamples of the values."""
        return self.values[rng.integers(0, self.n, size=(times, self.n))]


@dataclass(frozen=True)
class Judged:
    """One comparison at one size: the numbers, the gates, the outcome after Holm."""

    comparison: Comparison
    size: str
    added: Arm
    comparator: Arm
    numbers: Contrast | None = None  # None when the arms were not compared (gated, or under 2 seeds)
    p_holm: float = math.nan  # the Holm-adjusted p of the outcome's test (or the smaller one when unclear)
    outcome: str = UNCLEAR
    gates: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    needs_n: int | None = None
    eval_se: float = math.nan
    stability: float = math.nan
    look: int = 1  # 1: the first n declared seeds; 2: a second look with the next n too
    alpha: float = ALPHA  # this look's nominal one-sided level (boundaries)
    trajectory: tuple[dict, ...] = ()  # the effect at each checkpoint budget (with_trajectory)
    trend: Trend | None = None  # the effect's change over the last two checkpoints, where there are several

    @property
    def compared(self) -> bool:
        """Whether it decides: no gate, and every declared seed of its look in both arms."""
        needed = self.look * self.comparison.n_seeds
        return not self.gates and self.added.n >= needed and self.comparator.n >= needed

    def line(self) -> str:
        """The comparison in one line: effect, interval, margin, Holm p, seeds, stability, gates."""
        c = self.comparison
        added, comparator = c.labels
        head = f"{c.task} {c.metric} at {c.length_ratio:g}×{c.trained} ({self.size}): {comparator} vs {added}"
        if self.gates:
            return f"{head}: not compared — {'; '.join(self.gates)}"
        if self.numbers is None:
            return f"{head}: n = {self.added.n}/{self.comparator.n} seeds, too few to compare"
        x = self.numbers
        text = (f"{head}: effect {x.effect:+.3g} [{x.ci_low:+.3g}, {x.ci_high:+.3g}] vs δ {c.margin:g}, "
                + (f"Holm p {self.p_holm:.2g}, " if self.compared else "descriptive only, ")
                + f"n = {self.added.n}/{self.comparator.n} seeds")
        if not math.isnan(self.stability):
            text += f", stability {self.stability:.0%}"
        text += f" → {self.outcome}"
        if self.needs_n:
            text += f" (needs n ≈ {self.needs_n}{'+' if self.needs_n >= MAX_NEEDED else ''} seeds per arm)"
        return text


@dataclass(frozen=True)
class RowJudgement:
    """A guidance row at one size: its verdict, each task's verdict, the comparisons behind them."""

    row: str
    size: str
    verdict: str
    stability: float
    by_task: dict[str, str]
    judged: list[Judged] = field(default_factory=list)

    @property
    def shown(self) -> str:
        """The verdict as printed: "unstable" when fewer than 90 % of seed resamples reproduce it."""
        if self.verdict != INCONCLUSIVE and not math.isnan(self.stability) and self.stability < STABLE:
            return f"unstable ({self.verdict} in {self.stability:.0%} of seed resamples)"
        return self.verdict


# ----- the numbers of one comparison ---------------------------------------------------------------
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


def holm_outcomes(p_better, p_not_better, alphas=None) -> list[tuple[str, float]]:
    """(outcome, Holm p) for a family of compared comparisons: each test family Holm-adjusted, each
    comparison decided at its own look's level (``alphas``; default :data:`ALPHA` for all)."""
    if len(p_better) == 0:
        return []
    better, not_better = holm(p_better), holm(p_not_better)
    alphas = [ALPHA] * len(better) if alphas is None else alphas
    return [(BETTER, b) if b < a else (NOT_BETTER, nb) if nb < a else (UNCLEAR, min(b, nb))
            for b, nb, a in zip(better, not_better, alphas)]


def family_verdict(outcomes_by_group: dict[str, list[str]], claim: str) -> tuple[str, dict[str, str]]:
    """A claim's verdict and each group's (a row's tasks), from the comparisons' outcomes.

    "Adding suffices": a group supports it when every comparator there is not better by δ, contradicts
    it when some comparator is better by more than δ; "another scheme wins": the reverse. Overall:
    supported when every group supports it, not supported when any contradicts it, else inconclusive."""
    by_group = {}
    for group, found in outcomes_by_group.items():
        found = [r for r in found if r in (BETTER, NOT_BETTER, UNCLEAR)]
        if not found:
            by_group[group] = INCONCLUSIVE
        elif BETTER in found:
            by_group[group] = NOT_SUPPORTED if claim == ADDING_SUFFICES else SUPPORTED
        elif all(r == NOT_BETTER for r in found):
            by_group[group] = SUPPORTED if claim == ADDING_SUFFICES else NOT_SUPPORTED
        else:
            by_group[group] = INCONCLUSIVE
    verdicts = list(by_group.values())
    if NOT_SUPPORTED in verdicts:
        return NOT_SUPPORTED, by_group
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED, by_group
    return INCONCLUSIVE, by_group


@dataclass(frozen=True)
class Entry:
    """One comparison of a family that has no gates of its own (the claims page's): a label, the group
    it counts for, the two arms' per-seed values, the metric's direction and the margin."""

    group: str
    label: str
    comparator: np.ndarray
    added: np.ndarray
    higher_is_better: bool
    margin: float


def judge_family(entries: list[Entry], claim: str,
                 min_seeds: int) -> tuple[str, list[tuple[Entry, Contrast | None, str]]]:
    """A family's verdict (:func:`family_verdict`) and each entry's numbers and outcome: Holm across the
    entries with at least ``min_seeds`` seeds per arm (the declared rule's minimum); the others are
    descriptive only."""
    enough = [min(len(e.comparator), len(e.added)) >= min_seeds for e in entries]
    numbers = [contrast(e.comparator, e.added, e.higher_is_better, e.margin)
               if min(len(e.comparator), len(e.added)) >= 2 else None for e in entries]
    decided = iter(holm_outcomes([n.p_better for n, ok in zip(numbers, enough) if ok],
                                 [n.p_not_better for n, ok in zip(numbers, enough) if ok]))
    results = [next(decided)[0] if ok else FEW_SEEDS for ok in enough]
    by_group: dict[str, list[str]] = {}
    for entry, result in zip(entries, results):
        by_group.setdefault(entry.group, []).append(result)
    return family_verdict(by_group, claim)[0], list(zip(entries, numbers, results))


def seeds_needed(comparator: np.ndarray, added: np.ndarray, effect: float, margin: float, floor: int = 2) -> int:
    """Seeds per arm for 80 % power to place the interval on one side of δ, at the observed spread
    and the observed distance of the effect from δ (at least ``floor``, capped at :data:`MAX_NEEDED`)."""
    spread = math.sqrt((np.var(comparator, ddof=1) + np.var(added, ddof=1)) / 2)
    distance = abs(effect - margin)
    if distance == 0 or not math.isfinite(spread):
        return MAX_NEEDED
    return min(MAX_NEEDED, max(floor, math.ceil(2 * (POWER_Z * spread / distance) ** 2)))


def beats_chance(arm: Arm, higher_is_better: bool) -> bool | None:
    """Whether the arm learned: the one-sided 95 % bound over seeds of its gate metric at the training
    length beats chance there; ``None`` when chance is unknown."""
    return above_chance(arm.gate_values, arm.chance, higher_is_better)


def above_chance(values: np.ndarray, chance: float, higher_is_better: bool) -> bool | None:
    """Whether the one-sided 95 % bound over seeds of ``values (n,)`` beats ``chance``; ``None`` when
    chance (or a value) is unknown."""
    if math.isnan(chance) or np.isnan(values).any():
        return None
    if len(values) == 0:
        return False
    n = len(values)
    margin = stats.t.ppf(0.95, n - 1) * values.std(ddof=1) / math.sqrt(n) if n > 1 else 0.0
    return bool(values.mean() - margin > chance if higher_is_better else values.mean() + margin < chance)


def gates(comparison: Comparison, added: Arm, comparator: Arm) -> tuple[list[str], list[str]]:
    """(gates, notes): why the arms are not compared, and what a reader should know anyway."""
    blocked, notes = [], []
    gate_metric = "token_accuracy" if comparison.metric == "exact_match" else comparison.metric
    higher = metrics.get(gate_metric).higher_is_better
    for arm in (added, comparator):
        if arm.n == 0 and not arm.diverged:
            blocked.append(f"{arm.encoding}: no results")
        elif arm.diverged:
            blocked.append(f"{arm.encoding} did not learn: {arm.diverged} seed(s) diverged")
        elif (learned := beats_chance(arm, higher)) is False:
            blocked.append(f"{arm.encoding} did not learn: {gate_metric} {arm.gate_values.mean():.4g} does not beat "
                           f"chance {arm.chance:.4g}")
        elif learned is None:
            notes.append(f"{arm.encoding}: no chance level in the tables, not gated")
        elif arm.gate_at_length is not None and above_chance(arm.gate_at_length, arm.chance_at_length, higher) is False:
            notes.append(f"{arm.encoding} is at chance at {comparison.length_ratio:g}× ({gate_metric} "
                         f"{arm.gate_at_length.mean():.4g}, chance {arm.chance_at_length:.4g}), though it learned "
                         "at the training length")
        if arm.undertrained:
            notes.append(f"{arm.encoding} undertrained in {arm.undertrained} of {arm.n} seeds (still falling)")
        if arm.overfit:
            notes.append(f"{arm.encoding} overfits by its last budget in {arm.overfit} of {arm.n} seeds (annealed "
                         "validation loss above an earlier checkpoint's: the task needs more text for this budget)")
    if added.untrained_positions:
        blocked.append(f"{added.encoding}: positions at this length were never trained")
    blocked += [f"{arm.encoding}: its seeds mix {what}" for arm in (added, comparator) for what in arm.mixed]
    if comparison.added_d_model != comparison.comparator_d_model:
        (blocked if not params_matched(added, comparator) else notes).append(
            f"parameters: {added.encoding} (d = {added.d_model}) {_count(added.params)}, {comparator.encoding} "
            f"(d = {comparator.d_model}) {_count(comparator.params)}; compared only within "
            f"{PARAMS_MATCHED:.0%} of each other")
    if added.budget and comparator.budget and added.budget != comparator.budget:
        blocked.append(f"unequal budgets (steps, batch): {added.budget} vs {comparator.budget}")
    elif added.budget:
        notes.append(f"{comparison.task}: every arm trained {added.budget[0]} steps × batch {added.budget[1]}")
    return blocked, notes


def params_matched(added: Arm, comparator: Arm) -> bool:
    """Whether two arms' parameter totals are known and within :data:`PARAMS_MATCHED` of the larger."""
    if added.params is None or comparator.params is None:
        return False
    return abs(added.params - comparator.params) <= PARAMS_MATCHED * max(added.params, comparator.params)


def _count(params: float | None) -> str:
    return "unknown" if params is None else f"{params:,.0f}"


def judge_one(comparison: Comparison, size: str, added: Arm, comparator: Arm, items: pd.DataFrame | None,
              look: int = 1, alpha: float = ALPHA) -> Judged:
    """The comparison's numbers before Holm (its outcome is set by :func:`judge_row`), at look ``look``
    and its level ``alpha``."""
    blocked, notes = gates(comparison, added, comparator)
    judged = Judged(comparison, size, added, comparator, gates=tuple(blocked), notes=tuple(notes), look=look,
                    alpha=alpha)
    if blocked or min(added.n, comparator.n) < 2:
        return judged
    numbers = contrast(comparator.values, added.values, comparison.higher_is_better, comparison.margin, alpha)
    eval_se = item_error(items, comparison, size, added, comparator) if items is not None else math.nan
    return replace(judged, numbers=numbers, eval_se=eval_se)


# ----- a row: Holm, outcomes, verdict, stability ------------------------------------------------------
def outcomes(judged: list[Judged], p_better, p_not_better) -> list[tuple[str, float]]:
    """(outcome, Holm p) per comparison of a row; ``p_*`` hold the compared comparisons' raw p-values,
    each decided at its look's level."""
    compared = iter(holm_outcomes(p_better, p_not_better, [j.alpha for j in judged if j.compared]))
    return [(GATED, math.nan) if j.gates else next(compared) if j.compared else (FEW_SEEDS, math.nan)
            for j in judged]


def row_verdict(judged: list[Judged], results: list[str], claim: str) -> tuple[str, dict[str, str]]:
    by_task: dict[str, list[str]] = {}
    for j, result in zip(judged, results):
        by_task.setdefault(j.comparison.task, []).append(result)
    return family_verdict(by_task, claim)


def judge_row(row: str, claim: str, size: str, judged: list[Judged], seed: int = 0) -> RowJudgement:
    """Holm across the row's compared comparisons, each outcome, the verdict, and its stability."""
    compared = [j for j in judged if j.compared]
    observed = outcomes(judged, [j.numbers.p_better for j in compared], [j.numbers.p_not_better for j in compared])
    results = [o for o, _ in observed]
    verdict, by_task = row_verdict(judged, results, claim)
    judged = [replace(j, outcome=o, p_holm=p, needs_n=_needs(j, o)) for j, (o, p) in zip(judged, observed)]
    if not compared:
        return RowJudgement(row, size, verdict, math.nan, by_task, judged)
    row_share, shares = stability(judged, compared, claim, verdict, results, np.random.default_rng(seed))
    judged = [replace(j, stability=shares.get(id(j.comparison), math.nan)) for j in judged]
    return RowJudgement(row, size, verdict, row_share, by_task, judged)


def _needs(judged: Judged, outcome: str) -> int | None:
    if outcome not in (UNCLEAR, FEW_SEEDS) or judged.numbers is None:
        return None
    return seeds_needed(judged.comparator.values, judged.added.values, judged.numbers.effect, judged.comparison.margin,
                        judged.comparison.n_seeds)


def stability(judged: list[Judged], compared: list[Judged], claim: str, verdict: str, results: list[str],
              rng: np.random.Generator, times: int = BOOTSTRAP) -> tuple[float, dict[int, float]]:
    """Share of seed-bootstrap resamples reproducing the row's verdict, and each comparison's outcome."""
    p_better, p_not_better = [], []
    for j in compared:
        _, _, _, better, not_better = welch(j.comparator.resampled(rng, times), j.added.resampled(rng, times),
                                            j.comparison.higher_is_better, j.comparison.margin, j.alpha)
        p_better.append(better)
        p_not_better.append(not_better)
    p_better, p_not_better = np.array(p_better).T, np.array(p_not_better).T  # (times, compared)
    same_row, same = 0, np.zeros(len(judged))
    for b in range(times):
        resampled = [o for o, _ in outcomes(judged, p_better[b], p_not_better[b])]
        same_row += row_verdict(judged, resampled, claim)[0] == verdict
        same += np.array(resampled) == np.array(results)
    shares = {id(j.comparison): same[i] / times for i, j in enumerate(judged) if j.compared}
    return same_row / times, shares


# ----- from tables ----------------------------------------------------------------------------------
def arm(results: pd.DataFrame, comparison: Comparison, spec: ArmSpec, size: str, seeds: tuple[int, ...] | None = None,
        steps: int | None = None) -> Arm:
    """An arm's rows of ``results`` (the extrapolation table: one row per seed and length) for a
    comparison at ``size``. Judging a declared comparison, only the ``seeds`` it declares at its budget
    ``steps`` (where the table has steps) count, and nothing is chosen: rows at several learning rates
    are seeds that are not replicates (a gate). Without ``seeds`` (advise's descriptive use) every seed
    counts, at the rate with the lowest validation loss where several were run (:func:`best_rate`).

    Whether the arm learned is read at the training length (where the table has it): an arm that
    learned and fails beyond its training length did not extrapolate, which is the comparison's data,
    not a reason to leave it out (a note says it is at chance there)."""
    cell = declared_rows(results[cell_rows(results, spec, size)], seeds, steps)
    ratios = cell["length_ratio"].astype(float)
    rows = cell[np.isclose(ratios, comparison.length_ratio)]
    if seeds is None:
        rows, lr, _ = best_rate(rows)
        cell = cell[cell["lr"] == lr] if lr is not None else cell
    ok = finished(rows)
    rates = sorted(ok["lr"].dropna().unique()) if "lr" in ok.columns else []
    lr = float(rates[0]) if len(rates) == 1 else None
    gate_column, chance_column = (("token_accuracy", "token_chance") if comparison.metric == "exact_match"
                                  else ("value", "chance"))
    trained = finished(cell[np.isclose(cell["length_ratio"].astype(float), 1.0)])
    beyond = comparison.length_ratio != 1 and len(trained) > 0  # the gate reads the training length's rows
    learned = trained if beyond else ok
    budget = None
    if {"steps", "batch_size"} <= set(rows.columns) and len(ok):
        budget = (int(ok["steps"].max()), int(ok["batch_size"].max()))
    untrained = bool("positions_trained" in ok.columns and (ok["positions_trained"] == False).any())  # noqa: E712
    length, width = spec.resolved(size)
    counted = ok["params_total"].dropna() if "params_total" in ok.columns else ok.iloc[:0]
    params = float(counted.mean()) if len(counted) else None
    return Arm(spec.encoding, ok["value"].to_numpy(float), ok["seed"].to_numpy(),
               learned[gate_column].to_numpy(float), mean_chance(learned, chance_column),
               diverged=int((rows["status"] == "diverged").sum()),
               undertrained=flagged(ok, "undertrained"), overfit=flagged(ok, "overfit"),
               untrained_positions=untrained, lr=lr, budget=budget,
               eval_len=int(ok["eval_len"].iloc[0]) if len(ok) else None, train_len=length, d_model=width,
               params=params, gate_at_length=ok[gate_column].to_numpy(float) if beyond else None,
               chance_at_length=mean_chance(ok, chance_column) if beyond else math.nan, mixed=mixed_runs(ok))


def declared_rows(rows: pd.DataFrame, seeds: tuple[int, ...] | None, steps: int | None) -> pd.DataFrame:
    """The rows of ``seeds`` trained for ``steps`` (where ``rows`` has steps); ``None``: any."""
    if seeds is not None:
        rows = rows[rows["seed"].isin(seeds)]
    return rows[rows["steps"] == steps] if steps is not None and "steps" in rows.columns else rows


def flagged(rows: pd.DataFrame, column: str) -> int:
    """How many of ``rows`` have the flag ``column`` set (a missing column or value: not set)."""
    return int(rows[column].fillna(False).astype(bool).sum()) if column in rows.columns else 0


def mixed_runs(rows: pd.DataFrame) -> tuple[str, ...]:
    """Which of :data:`RUN_KEYS` take more than one value across ``rows`` (one arm's seeds), as
    ``"device (cpu, cuda)"``: seeds run on other devices, dtypes or budgets are not replicates of one another."""
    spread = [(key, sorted(map(str, rows[key].dropna().unique()))) for key in RUN_KEYS if key in rows.columns]
    return tuple(f"{key} ({', '.join(values)})" for key, values in spread if len(values) > 1)


def mean_chance(rows: pd.DataFrame, column: str) -> float:
    """The chance level of ``rows`` (their evaluation sets'), NaN where the table has none."""
    return float(rows[column].mean()) if column in rows.columns and len(rows) else math.nan


def finished(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of seeds that finished with a value, by seed."""
    return rows[rows["status"] == "ok"].dropna(subset=["value"]).sort_values("seed")


def cell_rows(frame: pd.DataFrame, spec: ArmSpec, size: str) -> pd.Series:
    """Which rows of ``frame`` (a results or items table) are the arm's: its task, encoding and size, and
    its training length and width where the table has those columns (so a sweep's cells at other
    lengths or widths never join the plain arm); without them, only an arm at the defaults has rows."""
    chosen = (frame["task"] == spec.task) & (frame["encoding"] == spec.encoding) & (frame["size"] == size)
    for column, declared, value in zip(("train_len", "d_model"), (spec.train_length, spec.d_model),
                                       spec.resolved(size)):
        if column in frame.columns:
            chosen &= frame[column] == value
        elif declared is not None:  # a table that cannot tell lengths or widths apart has no such arm
            chosen &= False
    return chosen


def best_rate(rows: pd.DataFrame) -> tuple[pd.DataFrame, float | None, str]:
    """The rows at the learning rate with the lowest mean validation loss, where several were run."""
    if "lr" not in rows.columns or rows["lr"].dropna().empty:
        return rows, None, ""
    rates = sorted(rows["lr"].dropna().unique())
    if len(rates) == 1 or "validation_loss" not in rows.columns:
        return rows[rows["lr"] == rates[0]] if len(rates) == 1 else rows, (rates[0] if len(rates) == 1 else None), ""
    best = rows.groupby("lr")["validation_loss"].mean().idxmin()
    return rows[rows["lr"] == best], float(best), f"lr {best:g} chosen on validation loss among {rates}"


def item_error(items: pd.DataFrame, comparison: Comparison, size: str, added: Arm, comparator: Arm,
               times: int = BOOTSTRAP, seed: int = 0) -> float:
    """Standard error of the effect from the evaluation set alone: the items resampled (the same draw
    for every seed and both arms), the seeds fixed. NaN when the items are not in the tables."""
    metric = metrics.get(comparison.metric)
    draws = None
    means = []
    for one, declared in zip((added, comparator), comparison.arms):
        spec = ArmSpec(comparison.task, one.encoding, declared.train_length, declared.d_model)
        rows = items[cell_rows(items, spec, size) & items["seed"].isin(one.seeds)]
        if rows.empty:
            return math.nan
        rows = rows[rows["eval_len"] == one.eval_len]
        per_seed = {name: rows.pivot_table(index="seed", columns="item", values=name, aggfunc="sum")
                    for name in metrics.ITEM_SUMS}  # name -> (seeds, items)
        n_items = per_seed["scored"].shape[1]
        if draws is None:
            draws = np.random.default_rng(seed).multinomial(n_items, np.full(n_items, 1 / n_items), size=times)
        if draws.shape[1] != n_items:
            return math.nan
        sums = {name: draws @ table.to_numpy(float).T for name, table in per_seed.items()}  # (times, seeds)
        sums["sequences"] = n_items
        means.append(metric.value(sums).mean(axis=1))  # (times,)
    sign = 1.0 if metric.higher_is_better else -1.0
    return float(np.std(sign * (means[1] - means[0]), ddof=1))


def judge(declaration: Declaration, results: pd.DataFrame, items: pd.DataFrame | None = None,
          comparisons: list[Comparison] | None = None, checkpoints: pd.DataFrame | None = None) -> list[RowJudgement]:
    """Every row at every model size the results hold for its comparisons: a comparison counts where
    both its arms have results (ok or diverged), a row where one of its comparisons does.
    ``comparisons`` defaults to every declared one.

    Each comparison reads only its declared seeds at its declared budget. The first look reads its
    first n seeds; a comparison that look leaves unclear or unstable is judged again at the second
    look (its first 2n seeds, at the second look's level) once the tables have any of the second n,
    and Holm runs again over the row. With ``checkpoints`` (the annealed checkpoints' table) each
    compared comparison gets its trajectory and trend (:func:`with_trajectory`)."""
    chosen = comparisons if comparisons is not None else list(declaration.comparisons)
    rule = declaration.seed_rule
    levels = boundaries(rule.looks, rule.alpha) if rule else (ALPHA, ALPHA)
    judgements = []
    for row in dict.fromkeys(c.row for c in declaration.comparisons):
        mine = [c for c in chosen if c.row == row]
        sizes = sorted(set(results.loc[results["task"].isin({c.task for c in mine}), "size"].dropna()))
        for size in sizes:
            first = [look_at(c, size, results, items, 1, levels[0]) for c in mine]
            first = [j for j in first if all(arm.n or arm.diverged for arm in (j.added, j.comparator))]
            if not first:
                continue
            judgement = judge_row(row, first[0].comparison.claim, size, first)
            again = {j.comparison.id for j in judgement.judged if wants_second_look(j)}
            second = [look_at(j.comparison, size, results, items, 2, levels[1]) if j.comparison.id in again else j
                      for j in first]
            if any(j.look == 2 and max(j.added.n, j.comparator.n) > j.comparison.n_seeds for j in second):
                judgement = judge_row(row, first[0].comparison.claim, size, second)
            judgements.append(with_trajectory(judgement, checkpoints, declaration.steady)
                              if checkpoints is not None else judgement)
    return judgements


def look_at(comparison: Comparison, size: str, results: pd.DataFrame, items: pd.DataFrame | None, look: int,
            alpha: float) -> Judged:
    """The comparison at look ``look`` (its first ``look``·n declared seeds), before Holm."""
    seeds = comparison.seeds(look)
    arms = [arm(results, comparison, spec, size, seeds, comparison.budget) for spec in comparison.arms]
    return judge_one(comparison, size, *arms, items, look, alpha)


def wants_second_look(judged: Judged) -> bool:
    """A first look that decided nothing clear: compared, and unclear or below :data:`STABLE`."""
    unstable = not math.isnan(judged.stability) and judged.stability < STABLE
    return judged.look == 1 and judged.compared and (judged.outcome == UNCLEAR or unstable)


def second_looks(judgements: list[RowJudgement]) -> list[tuple[str, str]]:
    """(comparison id, size) of every comparison whose first look asks for a second that has not run."""
    return [(j.comparison.id, j.size) for judgement in judgements for j in judgement.judged if wants_second_look(j)]


# ----- budgets: the effect at each annealed checkpoint, and its trend ---------------------------------
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


def checkpoint_values(checkpoints: pd.DataFrame, judged: Judged, which: Arm, spec: ArmSpec) -> pd.DataFrame:
    """``(seeds, budgets)``: the arm's metric at the comparison's length at each checkpoint, for the seeds
    the verdict read."""
    c = judged.comparison
    rows = declared_rows(checkpoints[cell_rows(checkpoints, spec, judged.size)], tuple(which.seeds), c.budget)
    rows = rows[np.isclose(rows["length_ratio"].astype(float), c.length_ratio) & (rows["status"] == "ok")]
    return rows.pivot_table(index="seed", columns="budget", values="value", aggfunc="first")


def with_trajectory(judgement: RowJudgement, checkpoints: pd.DataFrame, steady: float) -> RowJudgement:
    """Each compared comparison of ``judgement`` with its trajectory (the effect and its 95 % Welch
    interval at every checkpoint budget both arms have) and its trend (:class:`Trend`)."""
    found = []
    for j in judgement.judged:
        if j.numbers is None or checkpoints.empty:
            found.append(j)
            continue
        added, comparator = (checkpoint_values(checkpoints, j, one, spec)
                             for one, spec in zip((j.added, j.comparator), j.comparison.arms))
        budgets = sorted(set(added.columns) & set(comparator.columns))
        points = tuple(trajectory_point(j, b, comparator[b].dropna(), added[b].dropna()) for b in budgets)
        trend = effect_trend(j, added, comparator, budgets[-2:], points[-2]["effect"], steady) if len(budgets) > 1 \
            else None
        found.append(replace(j, trajectory=points, trend=trend))
    return replace(judgement, judged=found)


def trajectory_point(judged: Judged, budget: int, comparator: pd.Series, added: pd.Series) -> dict:
    c = judged.comparison
    x = contrast(comparator.to_numpy(float), added.to_numpy(float), c.higher_is_better, c.margin)
    return {"budget": int(budget), "n_added": len(added), "n_comparator": len(comparator), "effect": x.effect,
            "ci_low": x.ci_low, "ci_high": x.ci_high}


def effect_trend(judged: Judged, added: pd.DataFrame, comparator: pd.DataFrame, last_two: list, before: float,
                 steady: float) -> Trend:
    """The change of the effect over ``last_two`` budgets from each arm's per-seed changes (Welch, 95 %)."""
    since, until = last_two
    changes = [(table[until] - table[since]).dropna().to_numpy(float) for table in (comparator, added)]
    c = judged.comparison
    x = contrast(*changes, c.higher_is_better, 0.0)
    return Trend(int(since), int(until), x.effect, x.ci_low, x.ci_high,
                 trend_label(before, x.ci_low, x.ci_high, steady * c.margin))


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


def table(judgements: list[RowJudgement]) -> pd.DataFrame:
    """``verdicts.csv``: one row per comparison and size."""
    rows = []
    for judgement in judgements:
        for j in judgement.judged:
            c = j.comparison
            rows.append({
                "row": judgement.row, "row_verdict": judgement.verdict, "row_stability": judgement.stability,
                "comparison": c.id, "task": c.task, "metric": c.metric, "length_ratio": c.length_ratio,
                "size": j.size, "add_arm": c.added, "comparator_arm": c.comparator,
                "train_len": j.added.train_len, "d_model_added": j.added.d_model,
                "d_model_comparator": j.comparator.d_model,
                "n_added": j.added.n, "n_comparator": j.comparator.n,
                "mean_added": j.added.values.mean() if j.added.n else math.nan,
                "mean_comparator": j.comparator.values.mean() if j.comparator.n else math.nan,
                "lr_added": j.added.lr, "lr_comparator": j.comparator.lr,
                **{name: getattr(j.numbers, name, math.nan)
                   for name in ("effect", "ci_low", "ci_high", "p_better", "p_not_better")},
                "eval_se": j.eval_se, "p_holm": j.p_holm,
                "margin": c.margin, "detectable": c.detectable(max(2, min(j.added.n, j.comparator.n))),
                "outcome": j.outcome, "task_verdict": judgement.by_task.get(c.task, INCONCLUSIVE),
                "stability": j.stability, "needs_n": j.needs_n,
                "steps": c.budget, "look": j.look, "alpha_look": j.alpha,
                "seeds_added": seed_list(j.added.seeds), "seeds_comparator": seed_list(j.comparator.seeds),
                "second_look_wanted": wants_second_look(j),
                **trend_columns(j.trend),
                "gate_notes": "; ".join([*j.gates, *j.notes])})
    return pd.DataFrame(rows)


def seed_list(seeds: np.ndarray) -> str:
    """Seeds as runs: ``100-109,112``."""
    runs: list[list[int]] = []
    for seed in sorted(int(s) for s in seeds):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def trend_columns(trend: Trend | None) -> dict:
    names = ("since", "until", "change", "ci_low", "ci_high", "label")
    return {f"trend_{name}" if name != "label" else "trend": getattr(trend, name, math.nan if name != "label" else "")
            for name in names}


def trajectory_table(judgements: list[RowJudgement]) -> pd.DataFrame:
    """``trajectory.csv``: one row per compared comparison, size and checkpoint budget: the effect and its
    95 % Welch interval there, with the seeds per arm, the margin and whether it is the verdict's budget."""
    rows = [{"row": judgement.row, "comparison": j.comparison.id, "size": j.size, "metric": j.comparison.metric,
             "margin": j.comparison.margin, **point, "decides": point["budget"] == j.comparison.budget}
            for judgement in judgements for j in judgement.judged for point in j.trajectory]
    return pd.DataFrame(rows, columns=["row", "comparison", "size", "metric", "margin", "budget", "n_added",
                                       "n_comparator", "effect", "ci_low", "ci_high", "decides"])
