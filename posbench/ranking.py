"""How :mod:`posbench.advise` ranks the encodings it has evidence for (its rules 2 and 5): each encoding's
evidence per task (:class:`Row`, :class:`Candidate`), which rows are too uncertain to rank
(:func:`row_uncertainty`), the tiers within one task's rows (:func:`_layers`: one encoding beats another where a
deciding comparison of that experiment, :func:`decisions`, or else a Welch interval separates them) and the order
over tasks (:func:`rank`, :func:`_standings`). Nothing here reads a table or a budget: advise loads the tables,
gates the encodings and applies the budgets, then hands the candidates here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import combinations, permutations

import numpy as np
import pandas as pd

from posbench import evidence, experiments, metrics, projection, statistics

MEASURED, INTERPOLATED, EXTRAPOLATED, NO_EVIDENCE = (
    "measured at this length", "interpolated", "extrapolated beyond the tables", "no evidence")
SURENESS = (MEASURED, INTERPOLATED, EXTRAPOLATED, NO_EVIDENCE)  # best first
FEW_SEEDS = 5  # an interval over fewer seeds is marked "few seeds"
FEW, OTHER_LENGTHS, DISAGREE = "few seeds", "other lengths only", "tasks disagree"  # marks on a confidence
UNCERTAIN = "too uncertain to rank"
UNCERTAIN_SPAN = 0.5  # an interval wider than this share of a bounded metric's range is too uncertain to rank
SHARE_OF = {"correct": "scored", "exact": "sequences", "greedy_exact": "sequences"}  # a count -> what it is part of
BASELINE = "sinusoidal"  # the added encoding every overhead and extra parameter is counted against


@dataclass
class Row:
    """One task's evidence for one encoding."""

    task: str
    metric: str
    higher_is_better: bool
    size: str
    length_ratio: float
    eval_len: int | None
    mean: float
    ci_low: float
    ci_high: float
    n: int
    sureness: str
    clipped: bool = False  # the t interval left the metric's range and was cut back to it
    fills_in: bool = False  # the task has nothing at the asked length: it breaks ties only
    tier: int = 0  # 0: not tiered (too uncertain to rank)
    budget: str = ""  # where the task ran at several budgets, this row's ("500 steps"): a ranking of its own
    steps: int | None = None
    train_len: int | None = None
    d_model: int | None = None
    uncertain: str = ""  # why the row is too uncertain to rank; "" where it ranks
    values: np.ndarray | None = field(default=None, repr=False)

    @property
    def group(self) -> str:
        """What this row is ranked within: its task, and its budget where the task ran at several."""
        return f"{self.task}{experiments.SEPARATOR}{self.budget}" if self.budget else self.task

    @property
    def few_seeds(self) -> bool:
        return self.n < FEW_SEEDS

    def interval(self) -> str:
        """The 95 % interval as printed (CLI and report): marked where it was clipped or rests on few seeds."""
        if self.n < 2:
            return "(one seed, no interval)"
        marks = ["clipped to the metric's range"] * self.clipped + [FEW] * self.few_seeds
        return f"[{self.ci_low:.4g}, {self.ci_high:.4g}]" + (f" ({'; '.join(marks)})" if marks else "")

    def line(self) -> str:
        arrow = "higher" if self.higher_is_better else "lower"
        # a row that fills in was measured at another length than the asked one: how sure it is of that one is moot
        standing = "fills in (no evidence at the asked length: breaks ties only)" if self.fills_in else self.sureness
        doubt = f" — {UNCERTAIN}: {self.uncertain}" if self.uncertain else ""
        return (f"{self.group} {self.metric} ({arrow} is better) at {self.length_ratio:g}× ({self.size}, "
                f"eval length {self.eval_len}): {self.mean:.4g} {self.interval()}, n = {self.n} seeds — "
                f"{standing}{doubt}")

    def as_dict(self) -> dict:
        found = {k: v for k, v in asdict(self).items() if k != "values"}
        no_interval = {k: None for k in ("ci_low", "ci_high") if not math.isfinite(found[k])}  # one seed
        return {**found, **no_interval, "few_seeds": self.few_seeds}


@dataclass
class Candidate:
    """One encoding: its evidence, where it ranks, and why."""

    encoding: str
    rows: list[Row]
    rank: int = 0
    tied_with: list[str] = field(default_factory=list)
    sureness: str = NO_EVIDENCE
    marks: list[str] = field(default_factory=list)  # FEW, OTHER_LENGTHS, DISAGREE where they apply
    cost_sureness: str | None = None  # the latency's, where the situation needs one
    overhead_ratio: float | None = None
    latency_ms: float | None = None
    cost_where: str = ""  # device, mode, length and size of the cost row
    extra_params: float | None = None
    verdicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def certain_rows(self) -> list[Row]:
        """Its rows that are not too uncertain to rank."""
        return [r for r in self.rows if not r.uncertain]

    @property
    def ranking_rows(self) -> list[Row]:
        """The rows it is ranked on: its certain rows at the asked length, else (none) its certain fill-in rows."""
        return [r for r in self.certain_rows if not r.fills_in] or self.certain_rows

    @property
    def confidence(self) -> str:
        return self.sureness + (f" ({', '.join(self.marks)})" if self.marks else "")

    def why(self) -> list[str]:
        lines = [f"accuracy/extrapolation.csv: {r.line()}" for r in self.rows]
        lines += [f"verdicts.csv: {v}" for v in self.verdicts]
        cost = []
        if self.overhead_ratio is not None:
            cost.append(f"latency ×{self.overhead_ratio:.3g} vs {BASELINE}")
        if self.latency_ms is not None:
            cost.append(f"{self.latency_ms:.3g} ms")
        source = projection.PROJECTED if self.cost_where.startswith(projection.PROJECTED) else "cost.csv"
        lines += [f"{source}: {', '.join(cost)} ({self.cost_where})"] if cost else []
        if self.extra_params is not None:
            lines.append(f"accuracy.csv: {self.extra_params:+,.0f} parameters vs {BASELINE}")
        return lines + self.notes


def rank(candidates: list[Candidate], verdicts: pd.DataFrame, alpha: float) -> list[str]:
    """The rank over tasks (rule 5): sets rank, tied_with, sureness and marks; returns each ranking task's
    order where two of them disagree."""
    by_task, beaten = _tiers(candidates, verdicts, alpha)
    ranking = [t for t, rows in by_task.items() if not next(iter(rows.values())).fills_in]
    filling = [t for t in by_task if t not in ranking]
    at_length = [c for c in candidates if not c.ranking_rows[0].fills_in]  # evidence at the asked length first
    elsewhere = [c for c in candidates if c.ranking_rows[0].fills_in]
    key = {e: (0, *standing) for e, standing in _standings(at_length, fills_in=False).items()}
    key |= {e: (1, *standing) for e, standing in _standings(elsewhere, fills_in=True).items()}
    groups: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(key[c.encoding], []).append(c)
    for standing, group in groups.items():  # tied at the asked length: the fill-in tasks break it where they can
        fills = _standings(group, fills_in=True)
        if standing[0] == 0 and all(f[0] is not None for f in fills.values()) and len(set(fills.values())) > 1:
            for c in group:
                key[c.encoding] += fills[c.encoding]
                c.notes.append(f"tied at the asked length with {', '.join(o.encoding for o in group if o is not c)}; "
                               f"the fill-in tasks ({', '.join(filling)}) break the tie")
    disagreement, split = _disagreement(by_task, ranking)
    candidates.sort(key=lambda c: (key[c.encoding], c.overhead_ratio if c.overhead_ratio is not None else math.inf,
                                   -np.mean([(1 if r.higher_is_better else -1) * r.mean for r in c.ranking_rows])))
    separated = {(b, w) for t in ranking for b, w in beaten[t]} - {(w, b) for t in ranking for b, w in beaten[t]}
    order = {e: i for i, e in enumerate(_topological([c.encoding for c in candidates], separated))}
    candidates.sort(key=lambda c: order[c.encoding])
    rank, members = 0, []
    for i, c in enumerate(candidates):
        if i == 0 or key[c.encoding] != key[candidates[i - 1].encoding] or any((m, c.encoding) in separated
                                                                                 for m in members):
            rank, members = rank + 1, []
        c.rank = rank
        members.append(c.encoding)
        found = [r.sureness for r in c.ranking_rows] + ([c.cost_sureness] if c.cost_sureness else [])
        c.sureness = max(found, key=SURENESS.index)  # the weakest
        c.marks = ([FEW] * any(r.few_seeds for r in c.ranking_rows) + [OTHER_LENGTHS] * c.ranking_rows[0].fills_in
                   + [DISAGREE] * (c.encoding in split))
    for c in candidates:
        c.tied_with = [o.encoding for o in candidates if o.rank == c.rank and o is not c]
    return disagreement


def _tiers(candidates: list[Candidate], verdicts: pd.DataFrame,
           alpha: float) -> tuple[dict[str, dict[str, Row]], dict[str, set[tuple[str, str]]]]:
    """Task (and budget) -> encoding -> its row, best mean first, each row's tier set (rule 5); and task ->
    the pairs ``(better, worse)`` in which one beats the other there (:func:`_beats`)."""
    by_task, beaten = {}, {}
    for task in dict.fromkeys(r.group for c in candidates for r in c.certain_rows):
        found = {c.encoding: r for c in candidates for r in c.certain_rows if r.group == task}
        sign = 1 if next(iter(found.values())).higher_is_better else -1
        order = sorted(found, key=lambda e: -sign * found[e].mean)
        beaten[task] = _beats(found, verdicts, alpha)
        for encoding, tier in _layers(order, beaten[task]).items():
            found[encoding].tier = tier
        by_task[task] = {e: found[e] for e in order}
    return by_task, beaten


def _beats(rows: dict[str, Row], verdicts: pd.DataFrame, alpha: float) -> set[tuple[str, str]]:
    """The pairs ``(better, worse)`` of one task's rows (one experiment each) in which one beats the other: a
    deciding comparison of that experiment found it better by more than δ (:func:`decisions`), or, where none
    decided the pair, the Welch interval of their difference at ``1 - 2·alpha`` excludes 0."""
    decided = {(d.comparator, d.added) for d in decisions(verdicts, rows) if d.outcome == evidence.BETTER}
    found = set(decided)
    for better, worse in permutations(rows, 2):
        if (worse, better) in decided:
            continue
        x, y = rows[better], rows[worse]
        if x.n >= 2 and y.n >= 2 and statistics.contrast(x.values, y.values, x.higher_is_better, 0.0, alpha).ci_low > 0:
            found.add((better, worse))
    return found


def _layers(order: list[str], beaten: set[tuple[str, str]]) -> dict[str, int]:
    """Encoding -> tier: one below the lowest tier of those that beat it (1 where none does), taken in
    ``order`` (best first) as far as the pairs allow (:func:`_topological`). A pair in which one beats the
    other never shares a tier."""
    tier = {}
    for encoding in _topological(order, beaten):
        tier[encoding] = 1 + max((tier[b] for b, w in beaten if w == encoding and b in tier), default=0)
    return tier


def _topological(order: list[str], before: set[tuple[str, str]]) -> list[str]:
    """``order`` rearranged so that of each pair ``(a, b)`` in ``before`` a comes first, otherwise kept (each
    step takes the first encoding nothing left must precede; in a cycle, the first left)."""
    left, placed = list(order), []
    while left:
        free = [e for e in left if not any(w == e and b in left for b, w in before)]
        placed.append((free or left)[0])
        left.remove(placed[-1])
    return placed


def _standings(candidates: list[Candidate], fills_in: bool) -> dict[str, tuple]:
    """Encoding -> its standing among ``candidates`` over their ranking or their fill-in tasks (lower first):
    ``(compared with none, −(encodings it ranks above − encodings it ranks below))``. Two encodings are
    ordered by the tasks both were measured on (the sum of their tier differences there), so a task that
    measured some encodings and not others orders only those: measuring more tasks promotes nobody (the
    shapes tables measure ``none`` and ``learned`` on a masked-LM task the others never ran). An encoding
    that shares no task with another has ``compared with none`` true and comes after the rest; without rows
    of that kind, ``(None,)``."""
    tiers = {c.encoding: {r.group: r.tier for r in c.certain_rows if r.fills_in == fills_in} for c in candidates}
    standings = {}
    for encoding, mine in tiers.items():
        if not mine:
            standings[encoding] = (None,)
            continue
        orders = [_order(mine, theirs) for other, theirs in tiers.items()
                  if other != encoding and mine.keys() & theirs.keys()]
        standings[encoding] = (not orders, -sum(orders))
    return standings


def _order(mine: dict[str, int], theirs: dict[str, int]) -> int:
    """+1 where task -> tier ``mine`` ranks above ``theirs`` on the tasks both hold, −1 below, 0 level."""
    lead = sum(theirs[task] - mine[task] for task in mine.keys() & theirs.keys())
    return (lead > 0) - (lead < 0)


def _disagreement(by_task: dict[str, dict[str, Row]], ranking: list[str]) -> tuple[list[str], set[str]]:
    """Each ranking task's order where two of them order a pair of encodings oppositely, and those encodings."""
    split = set()
    for first, second in combinations(ranking, 2):
        shared = [e for e in by_task[first] if e in by_task[second]]
        for x, y in combinations(shared, 2):
            if ((by_task[first][x].tier - by_task[first][y].tier)
                    * (by_task[second][x].tier - by_task[second][y].tier)) < 0:
                split |= {x, y}
    if not split:
        return [], split
    lines = []
    for task in ranking:
        rows = by_task[task]
        tiers = sorted({r.tier for r in rows.values()})
        order = " > ".join(" = ".join(e for e in rows if rows[e].tier == tier) for tier in tiers)
        some = next(iter(rows.values()))
        lines.append(f"{task} {some.metric} at {some.length_ratio:g}×: {order}")
    return lines, split


def row_uncertainty(row: Row, fewest: int) -> str:
    """Why ``row`` is too uncertain to rank (rule 2), or "": fewer seeds than ``fewest``, or a 95 % interval
    wider than :data:`UNCERTAIN_SPAN` of its metric's range (:func:`value_range`)."""
    reasons = [f"{row.n} seed{'s' * (row.n != 1)}, fewer than the run's minimum {fewest}"] * (row.n < fewest)
    bottom, top = value_range(row.metric)
    span = (row.ci_high - row.ci_low) / (top - bottom) if math.isfinite(top - bottom) and row.n >= 2 else 0.0
    if span > UNCERTAIN_SPAN:
        reasons.append(f"its interval [{row.ci_low:.3g}, {row.ci_high:.3g}] spans {100 * span:.0f} % of the "
                       "metric's range")
    return "; ".join(reasons)


def uncertainty(candidate: Candidate) -> str:
    """Why an encoding is too uncertain to rank: each of its rows' reasons, by task."""
    return "; ".join(f"{r.group} at {r.length_ratio:g}×: {r.uncertain}" for r in candidate.rows if r.uncertain)


def value_range(metric: str) -> tuple[float, float]:
    """Where a metric's values lie, from its declaration (:data:`posbench.metrics.METRICS`): every metric is a
    ratio of non-negative sums, so at least 0; a share (its numerator counts part of what its denominator
    counts: right targets of the scored, exact sequences of all) at most 1. Unknown metrics: unbounded."""
    if metric not in metrics.METRICS:
        return -math.inf, math.inf
    declared = metrics.get(metric)
    share = SHARE_OF.get(declared.numerator) == declared.denominator and declared.divisor == 1
    return 0.0, 1.0 if share else math.inf


@dataclass(frozen=True)
class Decision:
    """A deciding comparison of ``verdicts.csv`` on one experiment the advice ranks: its comparator found
    better than its added encoding by more than δ, or not better by δ."""

    comparison: str
    size: str
    outcome: str
    comparator: str
    added: str
    task: str
    effect: float
    ci_low: float
    ci_high: float
    margin: float

    def line(self) -> str:
        found = "better than" if self.outcome == evidence.BETTER else "not better than"
        return (f"{self.comparison} ({self.size}) decided {self.comparator} {found} {self.added} by δ {self.margin:g} "
                f"on {self.task} (effect {self.effect:+.3g} [{self.ci_low:+.3g}, {self.ci_high:+.3g}])")


def decisions(verdicts: pd.DataFrame, rows: dict[str, Row]) -> list[Decision]:
    """The deciding comparisons that judged the experiment of ``rows`` (one task's rows, by encoding): its
    task, size and length ratio, both arms among ``rows``, and where verdicts.csv has them, its steps, training
    length and each arm's width; outcome better by more than δ or not better by δ."""
    needed = {"row", "comparison", "task", "size", "length_ratio", "add_arm", "comparator_arm", "outcome"}
    if not rows or verdicts.empty or not needed <= set(verdicts.columns):
        return []
    some = next(iter(rows.values()))
    mine = verdicts[verdicts["decides"].astype(bool)] if "decides" in verdicts.columns else verdicts
    mine = mine[(mine["task"] == some.task) & (mine["size"].astype(str) == some.size)
                & np.isclose(mine["length_ratio"].astype(float), some.length_ratio)
                & mine["outcome"].isin([evidence.BETTER, evidence.NOT_BETTER])]
    found = []
    for v in mine.itertuples(index=False):
        added, comparator = rows.get(v.add_arm), rows.get(v.comparator_arm)
        if added is None or comparator is None or not all(
                _same(getattr(v, column, None), value) for column, value in (
                    ("steps", added.steps), ("steps", comparator.steps), ("train_len", added.train_len),
                    ("train_len", comparator.train_len), ("d_model_added", added.d_model),
                    ("d_model_comparator", comparator.d_model))):
            continue
        found.append(Decision(v.comparison, str(v.size), v.outcome, v.comparator_arm, v.add_arm, v.task,
                              float(v.effect), float(v.ci_low), float(v.ci_high), float(v.margin)))
    return found


def _same(declared, measured) -> bool:
    """Whether a verdicts.csv value names a row's (a value either side lacks: not told apart)."""
    return declared is None or measured is None or pd.isna(declared) or float(declared) == float(measured)
