"""Judging the declared comparisons (:mod:`posbench.comparisons`) on a run's per-seed results: each arm's
rows as :mod:`posbench.arms` reads them, the numbers by :mod:`posbench.statistics`, the effect over the
annealed checkpoints by :mod:`posbench.trajectories`; here the gates, the outcomes, the verdicts, the looks
and ``verdicts.csv`` / ``trajectory.csv``.

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
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from posbench import arms, metrics, statistics, trajectories
from posbench.arms import Arm, cell_rows
from posbench.comparisons import ArmSpec, Comparison, Declaration
from posbench.guidance import ADDING_SUFFICES
from posbench.statistics import ALPHA, Contrast
from posbench.trajectories import Trend

BOOTSTRAP = 1000
STABLE = 0.9
PARAMS_MATCHED = 0.05  # arms at different widths are compared only when their parameter totals are this close
SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
BETTER, NOT_BETTER, UNCLEAR, GATED, FEW_SEEDS = (
    "comparator better by more than δ", "comparator not better by δ", "unclear", "gated", "too few seeds")


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
            capped = "+" if self.needs_n >= statistics.MAX_NEEDED else ""
            text += f" (needs n ≈ {self.needs_n}{capped} seeds per arm)"
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


def holm_outcomes(p_better, p_not_better, alphas=None) -> list[tuple[str, float]]:
    """(outcome, Holm p) for a family of compared comparisons: each test family Holm-adjusted, each
    comparison decided at its own look's level (``alphas``; default :data:`ALPHA` for all)."""
    if len(p_better) == 0:
        return []
    better, not_better = statistics.holm(p_better), statistics.holm(p_not_better)
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
    numbers = [statistics.contrast(e.comparator, e.added, e.higher_is_better, e.margin)
               if min(len(e.comparator), len(e.added)) >= 2 else None for e in entries]
    decided = iter(holm_outcomes([n.p_better for n, ok in zip(numbers, enough) if ok],
                                 [n.p_not_better for n, ok in zip(numbers, enough) if ok]))
    results = [next(decided)[0] if ok else FEW_SEEDS for ok in enough]
    by_group: dict[str, list[str]] = {}
    for entry, result in zip(entries, results):
        by_group.setdefault(entry.group, []).append(result)
    return family_verdict(by_group, claim)[0], list(zip(entries, numbers, results))


def beats_chance(arm: Arm, higher_is_better: bool) -> bool | None:
    """Whether the arm learned: the one-sided 95 % bound over seeds of its gate metric at the training
    length beats chance there; ``None`` when chance is unknown."""
    return statistics.above_chance(arm.gate_values, arm.chance, higher_is_better)


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
        elif (arm.gate_at_length is not None
              and statistics.above_chance(arm.gate_at_length, arm.chance_at_length, higher) is False):
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
    numbers = statistics.contrast(comparator.values, added.values, comparison.higher_is_better, comparison.margin,
                                  alpha)
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
    return statistics.seeds_needed(judged.comparator.values, judged.added.values, judged.numbers.effect,
                                   judged.comparison.margin, judged.comparison.n_seeds)


def stability(judged: list[Judged], compared: list[Judged], claim: str, verdict: str, results: list[str],
              rng: np.random.Generator, times: int = BOOTSTRAP) -> tuple[float, dict[int, float]]:
    """Share of seed-bootstrap resamples reproducing the row's verdict, and each comparison's outcome."""
    p_better, p_not_better = [], []
    for j in compared:
        _, _, _, better, not_better = statistics.welch(j.comparator.resampled(rng, times),
                                                       j.added.resampled(rng, times), j.comparison.higher_is_better,
                                                       j.comparison.margin, j.alpha)
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
    levels = statistics.boundaries(rule.looks, rule.alpha) if rule else (ALPHA, ALPHA)
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
    pair = [arms.arm(results, comparison, spec, size, seeds, comparison.budget) for spec in comparison.arms]
    return judge_one(comparison, size, *pair, items, look, alpha)


def wants_second_look(judged: Judged) -> bool:
    """A first look that decided nothing clear: compared, and unclear or below :data:`STABLE`."""
    unstable = not math.isnan(judged.stability) and judged.stability < STABLE
    return judged.look == 1 and judged.compared and (judged.outcome == UNCLEAR or unstable)


def second_looks(judgements: list[RowJudgement]) -> list[tuple[str, str]]:
    """(comparison id, size) of every comparison whose first look asks for a second that has not run."""
    return [(j.comparison.id, j.size) for judgement in judgements for j in judgement.judged if wants_second_look(j)]


# ----- budgets: the effect at each annealed checkpoint, and its trend ---------------------------------
def with_trajectory(judgement: RowJudgement, checkpoints: pd.DataFrame, steady: float) -> RowJudgement:
    """Each compared comparison of ``judgement`` with its trajectory (the effect and its 95 % Welch
    interval at every checkpoint budget both arms have) and its trend (:func:`posbench.trajectories.trajectory`)."""
    found = []
    for j in judgement.judged:
        if j.numbers is None or checkpoints.empty:
            found.append(j)
            continue
        points, trend = trajectories.trajectory(checkpoints, j.comparison, j.size, j.added, j.comparator, steady)
        found.append(replace(j, trajectory=points, trend=trend))
    return replace(judgement, judged=found)


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
                "lr_added": j.added.lr, "lr_comparator": j.comparator.lr, "text": j.added.text,
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
