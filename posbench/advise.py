"""Which encoding should I use? Advice from the aggregated tables alone: data in, ranking out.

Inputs (:class:`Inputs`): ``accuracy.csv``, ``cost.csv`` and ``verdicts.csv`` (core), ``extrapolation.csv``
(optional: without it only the training length has evidence); a :class:`Situation` (task kind, training
and deployment lengths, parameter and latency budgets, token-by-token serving). Nothing is measured.

The rule, in order:

1. **The asked length.** The length ratio ``deploy_len / train_len`` (1 unless both are given; a
   long-context question without both: the longest ratio any task of the kind measured, said so).
2. **Evidence.** For each task of the chosen kind (every task in the tables without one), the rows at the
   task's nearest measured ratio at or above the asked one (its longest where none is), at the model size
   with the most ok rows (the largest of sizes with as many); a task run at several budgets (steps, batch,
   dtype: :mod:`posbench.experiments`) is a ranking of its own per budget, named by it ("lm_prose · 500
   steps"), so no row pools two experiments; per encoding (training-free RoPE scalings such as
   ``rope+yarn:4`` are encodings of their own) the mean over seeds with a 95 % t interval kept inside the metric's range
   (:func:`seed_interval`), the learning rate chosen on validation loss where several were run
   (:func:`posbench.arms.arm`). A row with fewer seeds than the run's minimum (the declared seed
   rule's) or whose interval spans more than half a bounded metric's range is *too uncertain to rank*:
   it is listed with the reason and never leads. The tasks measured there *rank*; a task measured only at
   shorter lengths *fills in*, labelled: it breaks ties and places encodings with no evidence at the asked length
   (after every encoding that has some). Where no task reaches the asked ratio, those at the longest
   measured one rank.
3. **Gates.** An encoding that does not beat its task's chance level, diverged, or reads positions that
   training never reached there is left out, with the reason.
4. **Hard constraints.** Extra parameters (``params_total`` minus sinusoidal's, same task and size;
   sinusoidal adds none) above ``param_budget``; median latency (``cost.csv``, mode ``decode`` when
   serving token by token, else ``infer``) on ``device`` at the measured ``seq_len`` nearest to the
   deployment length above ``latency_budget_ms``: left out. An encoding without a row for a constraint
   stays, marked "no evidence"; a constraint that no row measures says so, with the config keys to run.
   For a model architecture or a GPU posbench does not measure (``shape``, ``gpu``), the latency is
   :mod:`posbench.projection`'s roofline at the deployment length, labelled "projected" wherever it shows.
5. **Rank** (:mod:`posbench.ranking`) per task and budget, in tiers: one encoding *beats* another where a
   deciding comparison of ``verdicts.csv`` that judged this very experiment (task, size, length, steps, training
   length, widths) found it better by more than δ, or else where the Welch interval of their difference
   at the run's level (its looks' 1 − 2·alpha, ``verdicts.csv``; 95 % without one) excludes 0; each
   encoding's tier is one below the lowest tier of those that beat it. So no tier holds two encodings of
   which one beats the other, though "tied" is not transitive (a tier may hold two encodings that a
   third sits between). Over the ranking tasks, pair by pair: of two encodings, the one
   in better tiers on the tasks both were measured on (the sum of their tier differences) ranks above;
   each ranks by the encodings it ranks above less those it ranks below, so a task only some encodings ran
   orders only those, and measuring more tasks promotes nobody. Equal standings
   are ties, which the fill-in tasks' standing breaks where every tied encoding has fill-in evidence;
   within a tie, lower overhead (latency vs sinusoidal) first; an encoding that beats another on a ranking
   task and is not beaten by it on another ranks above it (a rank holds no such pair; where the tasks' pairs
   run in a circle, a beats b beats c beats a, the first by standing goes first). Where two
   ranking tasks order a pair of encodings oppositely, the advice says the tasks disagree and shows each
   task's ranking.
6. **Why and how sure.** Each encoding shows its metric rows, the comparisons of the matching guidance
   rows that involve it (``verdicts.csv`` as written, never recomputed here), its overhead ratio and
   extra parameters; its confidence is the weakest of the evidence it is ranked on: measured at this
   length / interpolated (the next longer measured length) / extrapolated beyond the tables / no
   evidence, marked "few seeds" (under :data:`posbench.ranking.FEW_SEEDS`), "other lengths only" and "tasks
   disagree" where they apply. An encoding too uncertain to rank is listed after the ranking with its reasons.
7. **Checked against the verdicts.** :func:`contradictions` lists every deciding comparison that judged an
   experiment the advice ranks and that the ranking goes against (an encoding it found better by more than
   δ placed level or below; one it found not better by δ placed above by more than δ); the judge step
   prints each as a warning and flags its row of ``advice.csv``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from posbench import arms, comparisons, evidence, experiments, guidance, metrics, projection, statistics, tasks
from posbench.across_sizes import smallest_first
from posbench.comparisons import ArmSpec, Comparison
from posbench.devices import ANY_DEVICE, CPU
from posbench.guidance import KINDS
from posbench.ranking import (
    BASELINE,
    EXTRAPOLATED,
    INTERPOLATED,
    MEASURED,
    NO_EVIDENCE,
    UNCERTAIN,
    Candidate,
    Row,
    decisions,
    rank,
    row_uncertainty,
    uncertainty,
    value_range,
)
from posbench.sizes import SIZES, non_embedding_params
from posbench.tables import plain

CORE = ("verdicts", "accuracy", "cost")
OPTIONAL = ("extrapolation",)
DEVICES = ANY_DEVICE.kinds  # a cost row's device is read by its kind (cuda:1 is cuda)
NO_ENCODING = "none"  # the encoding without positions, named so that it never reads as "no encoding"
LONG_CONTEXT = "long"  # the task kind asked, without a deployment length, at the longest measured ratio
PROJECTED_SIZE = "base"  # the model projected on a gpu when no architecture is given: the bench's and profile's
RULE = ("Left out: encodings that do not beat chance or break a budget. Too uncertain to rank: fewer seeds than the "
        "run's minimum ({min_seeds}), or a 95 % interval wider than half the metric's range. Ranked by the task's "
        "metric at the asked length ratio (the nearest measured at or above it; a long-context question without a "
        "deployment length: the longest measured), over the kind's tasks measured there, each budget (steps) a "
        "ranking of its own (mean over seeds, 95 % t interval kept inside the metric's range); tasks measured only "
        "at other lengths fill in, labelled: they break ties and place encodings without evidence at that length "
        "last. One encoding beats another where a deciding comparison of this experiment found it better by more "
        "than δ, or else where the Welch interval of their difference at the run's level ({level} %) excludes "
        "0; each is one tier below the lowest that beats it, so no tier holds a separated pair; over several "
        "tasks, of two encodings the one in better tiers on the tasks both were measured on ranks above; within a "
        "tie, lower overhead first.")


def shown(encoding: str) -> str:
    """An encoding's name as advice prints it: ``none`` says that it is the encoding without positions."""
    return f"{NO_ENCODING} (no positional encoding)" if encoding == NO_ENCODING else encoding


def run_alpha(verdicts: pd.DataFrame) -> float:
    """The run's one-sided alpha: its deciding comparisons' looks' (``alpha_look``, the smallest where they
    differ), so that advice separates encodings at the level the verdicts were read at; else
    :data:`posbench.statistics.ALPHA`."""
    if verdicts.empty or "alpha_look" not in verdicts.columns:
        return statistics.ALPHA
    deciding = verdicts[verdicts["decides"].astype(bool)] if "decides" in verdicts.columns else verdicts
    alphas = deciding["alpha_look"].dropna()
    return float(alphas.min()) if len(alphas) else statistics.ALPHA


def min_seeds() -> int:
    """Seeds a row needs to be ranked: the declared seed rule's minimum (``comparisons.yaml``)."""
    return comparisons.load().seed_rule.min


class MissingTable(ValueError):
    """A core table is not in the folder."""


@dataclass(frozen=True)
class Situation:
    """What the user is choosing for; ``None`` means "not constrained"."""

    task: str | None = None  # a task kind (KINDS)
    train_len: int | None = None
    deploy_len: int | None = None
    param_budget: int | None = None  # most parameters the encoding may add over sinusoidal
    latency_budget_ms: float | None = None
    device: str = CPU
    decode: bool = False
    shape: str | None = None  # a deployed model's architecture (posbench.projection): latency projected, not measured
    gpu: str | None = None  # a datasheet GPU (posbench.projection.DEVICES): latency projected there

    def __post_init__(self):
        if self.task is not None and self.task not in KINDS:
            raise ValueError(f"task {self.task!r} is not allowed; allowed: {', '.join(KINDS)}")
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r} is not allowed; allowed: {', '.join(DEVICES)}")
        if self.shape is not None:
            projection.named_architecture(self.shape)
        if self.gpu is not None:
            projection.named_device(self.gpu)
        if self.shape is not None and self.gpu is None:
            raise ValueError(f"shape {self.shape!r} needs a gpu to project on; allowed: "
                             f"{', '.join(projection.DEVICES)}")
        for name in ("train_len", "deploy_len", "param_budget", "latency_budget_ms"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= (0 if name == "param_budget" else 1e-12)):
                raise ValueError(f"{name} {value!r} is not allowed; allowed: a positive number")

    @property
    def ratio(self) -> float:
        return self.deploy_len / self.train_len if self.train_len and self.deploy_len else 1.0

    @property
    def projected(self) -> bool:
        return self.gpu is not None

    @property
    def mode(self) -> str:
        return "decode" if self.decode else "infer"

    def describe(self) -> str:
        parts = [f"task kind {self.task}" if self.task else "every task in the tables"]
        if self.train_len and self.deploy_len:
            parts.append(f"deploy at {self.ratio:g}× the training length ({self.train_len} -> {self.deploy_len})")
        elif self.train_len or self.deploy_len:
            parts.append(f"length {self.deploy_len or self.train_len} (give both lengths for a length ratio)")
        if self.param_budget is not None:
            parts.append(f"at most {self.param_budget:,} extra parameters")
        where = (f"{self.shape or projection.posbench_architecture(PROJECTED_SIZE).name} on {self.gpu} "
                 f"({projection.PROJECTED})" if self.projected else self.device)
        if self.latency_budget_ms is not None:
            parts.append(f"at most {self.latency_budget_ms:g} ms per {'token' if self.decode else 'forward'} "
                         f"on {where}")
        elif self.decode:
            parts.append(f"served token by token on {where}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Inputs:
    """The tables advice reads; ``extrapolation`` may be empty."""

    accuracy: pd.DataFrame
    cost: pd.DataFrame
    verdicts: pd.DataFrame
    extrapolation: pd.DataFrame = field(default_factory=pd.DataFrame)


def load(folder: str | Path) -> Inputs:
    """The tables under ``folder``; :class:`MissingTable` names the first core table that is absent."""
    folder = Path(folder)
    frames = {}
    for name in (*CORE, *OPTIONAL):
        path = folder / f"{name}.csv"
        if not path.is_file():
            if name in CORE:
                raise MissingTable(name)
            frames[name] = pd.DataFrame()
            continue
        try:
            frames[name] = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            frames[name] = pd.DataFrame()
    return Inputs(**frames)


@dataclass
class Advice:
    situation: Situation
    ranked: list[Candidate]
    excluded: list[tuple[str, str]]  # (encoding, reason)
    guidance: list[str]  # the matching rows' verdicts, from verdicts.csv
    no_evidence: list[tuple[str, str, list[str]]]  # (constraint, what is missing, config keys to run)
    basis: list[str] = field(default_factory=list)  # the length ranked at, the tasks that rank and that fill in
    disagreement: list[str] = field(default_factory=list)  # each ranking task's order, where tasks disagree
    rule: str = RULE
    uncertain: list[Candidate] = field(default_factory=list)  # too uncertain to rank: listed, never ranked
    contradictions: list[str] = field(default_factory=list)  # deciding comparisons the ranking goes against

    def leaders(self) -> list[Candidate]:
        return [c for c in self.ranked if c.rank == 1]

    def runner_up(self) -> Candidate | None:
        return next((c for c in self.ranked if c.rank > 1), None)

    def as_dict(self) -> dict:
        ranked = [{"rank": c.rank, "encoding": c.encoding, "tied_with": c.tied_with, "sureness": c.sureness,
                   "confidence": c.confidence, "overhead_ratio": c.overhead_ratio, "latency_ms": c.latency_ms,
                   "extra_params": c.extra_params, "verdicts": c.verdicts, "why": c.why(),
                   "evidence": [r.as_dict() for r in c.rows]}
                  for c in self.ranked]
        return {"situation": asdict(self.situation), "rule": self.rule, "basis": self.basis,
                "disagreement": self.disagreement, "guidance": self.guidance, "ranked": ranked,
                "excluded": [{"encoding": e, "reason": r} for e, r in self.excluded],
                "too_uncertain": [{"encoding": c.encoding, "reason": uncertainty(c), "why": c.why(),
                                   "evidence": [r.as_dict() for r in c.rows]} for c in self.uncertain],
                "contradictions": self.contradictions,
                "no_evidence": [{"constraint": c, "missing": m, "config_keys": k} for c, m, k in self.no_evidence]}

    def text(self) -> str:
        lines = [f"Situation: {self.situation.describe()}", f"Rule: {self.rule}"]
        lines += [f"Basis: {b}" for b in self.basis]
        lines += [f"Tasks disagree: {d}" for d in self.disagreement]
        lines += [f"Guidance (verdicts.csv): {g}" for g in self.guidance]
        if not self.ranked:
            lines.append("No encoding can be recommended from these tables.")
        for c in self.ranked:
            tie = f" (tied with {', '.join(map(shown, c.tied_with))})" if c.tied_with else ""
            lines.append(f"{c.rank}. {shown(c.encoding)}{tie} — {c.confidence}")
            lines += [f"     {line}" for line in c.why()]
        for c in self.uncertain:
            lines.append(f"Too uncertain to rank: {shown(c.encoding)} — {uncertainty(c)}")
            lines += [f"     {line}" for line in c.why()]
        lines += [f"WARNING: {line}" for line in self.contradictions]
        lines += [f"Left out: {e}: {r}" for e, r in self.excluded]
        lines += [f"No evidence: {c}: {m}; run: {'; '.join(k)}" for c, m, k in self.no_evidence]
        return "\n".join(lines)


# ----- the rule --------------------------------------------------------------------------------------
def advise(situation: Situation, inputs: Inputs) -> Advice:
    """The ranked advice for ``situation`` from ``inputs`` (the rule in the module docstring)."""
    results = _results(inputs)
    chosen = _tasks(situation, results)
    excluded, no_evidence = [], []
    if situation.task is not None and not chosen:
        runnable = [n for n in tasks.names() if tasks.get(n).kind == situation.task]
        keys = [f"train.tasks.{n}: [{BASELINE}, rope, alibi, ...]" for n in runnable] or [
            f"nothing yet: no task of kind {situation.task} is registered in posbench/tasks"]
        no_evidence.append((f"task kind {situation.task}", "no ok rows in the tables for a task of this kind", keys))
    if not math.isclose(situation.ratio, 1.0) and "length_ratio" not in inputs.extrapolation.columns:
        no_evidence.append((f"deployment at {situation.ratio:g}× the training length",
                            "extrapolation.csv is missing: only the training length has evidence",
                            ["train.tasks (the train step evaluates every task's eval_factors; aggregate writes "
                             "extrapolation.csv)"]))
    target, basis = _target(situation, {task: _measured(results[results["task"] == task])[1] for task in chosen})
    by_encoding: dict[str, list[Row]] = {}
    gated, at = [], {}
    for task in chosen:
        rows, gates, at[task] = _task_rows(target, results[results["task"] == task], task)
        gated += gates
        for encoding, found in rows.items():
            by_encoding.setdefault(encoding, []).extend(found)
    basis += _fill_in(target, at, [r for rows in by_encoding.values() for r in rows])
    candidates = [Candidate(e, rows) for e, rows in by_encoding.items()]
    for encoding, reason in gated:  # gated on every task: left out; on some: a note
        if encoding in by_encoding:
            next(c for c in candidates if c.encoding == encoding).notes.append(f"left out on {reason}")
        else:
            excluded.append((encoding, reason))
    _parameters(situation, inputs.accuracy, candidates, excluded, no_evidence)
    _latency(situation, inputs.cost, candidates, excluded, no_evidence)
    kept = [c for c in candidates if c.encoding not in {e for e, _ in excluded}]
    alpha, fewest = run_alpha(inputs.verdicts), min_seeds()
    for row in (r for c in kept for r in c.rows):
        row.uncertain = row_uncertainty(row, fewest)
    ranked = [c for c in kept if c.ranking_rows]
    disagreement = rank(ranked, inputs.verdicts, alpha)
    rows = guidance_rows(situation)
    for c in kept:
        c.verdicts = _comparisons(inputs.verdicts, rows, c.encoding.split("+")[0])
    advice = Advice(situation, ranked, excluded, _row_verdicts(inputs.verdicts, rows), no_evidence, basis,
                    disagreement, RULE.format(min_seeds=fewest, level=f"{100 * (1 - 2 * alpha):.1f}"),
                    [c for c in kept if not c.ranking_rows])
    advice.contradictions = contradictions(advice, inputs.verdicts, alpha)
    return advice


def guidance_rows(situation: Situation) -> list[str]:
    """The article's guidance rows (:data:`posbench.guidance.ROWS`) that speak to ``situation``: those of its
    task kind, then those its lengths and budget bring up."""
    rows = guidance.rows_for_kind(situation.task)
    if situation.ratio > 1:
        rows.append("long_sequences")
    elif situation.deploy_len is not None and situation.deploy_len < 512:
        rows.append("fixed_length")
    if situation.param_budget is not None:
        rows.append("parameter_budget")
    return list(dict.fromkeys(rows))


def _results(inputs: Inputs) -> pd.DataFrame:
    """Per-seed results: the extrapolation table, or accuracy's rows at the training length without it."""
    frame = inputs.extrapolation
    if frame.empty or "length_ratio" not in frame.columns:
        frame = inputs.accuracy.assign(length_ratio=1.0, eval_len=inputs.accuracy.get("train_len"))
    if frame.empty or "task" not in frame.columns:
        return pd.DataFrame(columns=["task", "encoding", "size", "seed", "status", "value", "length_ratio"])
    return frame


def _tasks(situation: Situation, results: pd.DataFrame) -> list[str]:
    present = [t for t in dict.fromkeys(results.loc[results["status"] == "ok", "task"]) if t in tasks.names()]
    return [t for t in present if situation.task is None or tasks.get(t).kind == situation.task]


def _measured(rows: pd.DataFrame) -> tuple[str | None, list[float]]:
    """A task's model size with the most ok rows, and the length ratios measured there (ascending)."""
    ok = rows[rows["status"] == "ok"].dropna(subset=["value"])
    if ok.empty:
        return None, []
    size = _main_size(ok)
    return size, sorted(float(r) for r in ok.loc[ok["size"] == size, "length_ratio"].dropna().unique())


def _main_size(rows: pd.DataFrame) -> str:
    """The model size with the most rows; of sizes with as many, the largest (non-embedding parameters; a
    size posbench does not define counts as the smallest), so tables of several sizes, as the scale preset
    writes them, rank at one size every time and at the one nearest the models asked about."""
    counts = rows.groupby("size").size()
    largest = {size: non_embedding_params(size) if size in SIZES else -1 for size in counts.index}
    return max(counts.index, key=lambda size: (counts[size], largest[size]))


def _target(situation: Situation, measured: dict[str, list[float]]) -> tuple[float, list[str]]:
    """The length ratio to rank at (rule 1), and how it was chosen where the situation does not say."""
    longest = {task: ratios[-1] for task, ratios in measured.items() if ratios}
    if situation.task != LONG_CONTEXT or (situation.train_len and situation.deploy_len) or not longest:
        return situation.ratio, []
    ratio = max(longest.values())
    reached = ", ".join(task for task, r in longest.items() if r == ratio)
    return ratio, [f"a long-context question without a deployment length (give --train-len and --deploy-len): "
                   f"ranked at the longest measured length ratio, {ratio:g}× ({reached})"]


def _reaches(ratio: float, target: float) -> bool:
    return ratio > target or math.isclose(ratio, target, rel_tol=1e-6)


def _at_or_above(target: float, measured: list[float]) -> float:
    """The nearest measured ratio at or above ``target``; the longest where none is (``measured`` ascending)."""
    return next((m for m in measured if _reaches(m, target)), measured[-1])


def _sureness(ratio: float, measured: list[float]) -> str:
    if not measured:
        return NO_EVIDENCE
    if any(math.isclose(ratio, m, rel_tol=1e-6) for m in measured):
        return MEASURED
    return INTERPOLATED if min(measured) < ratio < max(measured) else EXTRAPOLATED


def _nearest(target: float, measured: list[float]) -> float:
    return min(measured, key=lambda m: (abs(math.log(m / target)), m))


def _task_rows(target: float, rows: pd.DataFrame, task: str) -> tuple[dict[str, list[Row]], list[tuple[str, str]],
                                                                     float]:
    """Each encoding's :class:`Row` per budget of ``task`` (one experiment each) at its nearest measured ratio at
    or above ``target``, the gated encodings, and that ratio."""
    size, measured = _measured(rows)
    ok = rows[rows["status"] == "ok"].dropna(subset=["value"])
    rows = experiments.panels(plain(rows[rows["size"] == size]))  # a panel per budget: one experiment per arm
    ratio = _at_or_above(target, measured)
    sureness = _sureness(target, measured)
    metric = str(ok["metric"].dropna().iloc[0]) if "metric" in ok.columns else "value"
    higher = metrics.get(metric).higher_is_better if metric in metrics.METRICS else True
    probe = Comparison("advise", "standard_nlp", task, metric, ratio, BASELINE, BASELINE, 1.0, 1.0, ())
    found, gated = {}, []
    for (panel, encoding), cell in rows.groupby([experiments.PANEL, "encoding"], sort=False):
        budget = panel[len(task) + len(experiments.SEPARATOR):]
        arm = arms.arm(cell, probe, ArmSpec(task, encoding), size)
        where = f"{task}{experiments.SEPARATOR}{budget}" if budget else task
        if arm.n == 0:
            if arm.diverged:
                gated.append((encoding, f"{where}: did not learn ({arm.diverged} seed(s) diverged)"))
            continue
        if arm.untrained_positions:
            gated.append((encoding, f"{where}: positions at {ratio:g}× were never trained"))
            continue
        if evidence.beats_chance(arm, True if metric == "exact_match" else higher) is False:  # exact: token acc.
            gated.append((encoding, f"{where}: did not learn ({metric} does not beat chance {arm.chance:.4g})"))
            continue
        if metric == "exact_match" and not arm.values.any():  # tokens above chance, yet no sequence right
            gated.append((encoding, f"{where}: no sequence right (exact match 0 in all {arm.n} seeds at {ratio:g}×)"))
            continue
        low, high, clipped = seed_interval(arm.values, metric)
        found.setdefault(encoding, []).append(Row(
            task, metric, higher, str(size), ratio, arm.eval_len, float(arm.values.mean()), low, high, arm.n,
            sureness, clipped, budget=budget, steps=arm.budget[0] if arm.budget else None, train_len=arm.train_len,
            d_model=arm.d_model, values=arm.values))
    return found, gated, ratio


def _fill_in(target: float, at: dict[str, float], rows: list[Row]) -> list[str]:
    """Marks the rows of tasks that fill in (rule 2) and says which tasks rank and which fill in."""
    if not at:
        return []
    reached = any(_reaches(r, target) for r in at.values())
    ranking = [t for t, r in at.items() if (_reaches(r, target) if reached else r == max(at.values()))]
    for row in rows:
        row.fills_in = row.task not in ranking
    lines = [f"ranked at {target:g}× the training length on " + ", ".join(f"{t} at {at[t]:g}×" for t in ranking)
             + ("" if reached else f" (the longest measured: no task reaches {target:g}×)")]
    fill = [f"{t} at {r:g}×" for t, r in at.items() if t not in ranking]
    if fill:
        lines.append(f"filling in, measured only at other lengths (ties and encodings without evidence at "
                     f"{target:g}× only): {', '.join(fill)}")
    return lines


def seed_interval(values: np.ndarray, metric: str) -> tuple[float, float, bool]:
    """95 % t interval of the mean over seeds, kept inside the metric's range (:func:`value_range`), and
    whether it had to be clipped to stay there (a t interval on a few widely spread seeds of an accuracy
    reaches past 0 or 1). Exact for seeds without spread; NaN for one seed. The CLI and the report print
    this one interval."""
    if len(values) < 2:
        return math.nan, math.nan, False
    if np.ptp(values) == 0:
        return float(values[0]), float(values[0]), False
    low, high = statistics.mean_interval(values)
    bottom, top = value_range(metric)
    return float(max(low, bottom)), float(min(high, top)), bool(low < bottom or high > top)


def _parameters(situation, accuracy, candidates, excluded, no_evidence) -> None:
    """Extra parameters over sinusoidal per candidate (same task and size, the plain cells); the budget filters."""
    accuracy = plain(accuracy)
    if accuracy.empty or "params_total" not in accuracy.columns or accuracy["params_total"].dropna().empty:
        if situation.param_budget is not None:
            no_evidence.append(("parameter budget", "accuracy.csv has no params_total",
                                ["re-run `python -m posbench aggregate` on train records (train.tasks)"]))
        return
    for c in candidates:
        extras = []
        for row in c.rows:
            cell = accuracy[(accuracy["task"] == row.task) & (accuracy["size"] == row.size)]
            own = cell.loc[cell["encoding"] == c.encoding.split("+")[0], "params_total"].dropna()
            base = cell.loc[cell["encoding"] == BASELINE, "params_total"].dropna()
            if len(own) and len(base):
                extras.append(float(own.mean() - base.mean()))
        c.extra_params = max(extras) if extras else None
        if situation.param_budget is None:
            continue
        if c.extra_params is None:
            c.notes.append(f"parameter budget: no evidence ({BASELINE} or {c.encoding} has no params_total row)")
        elif c.extra_params > situation.param_budget:
            excluded.append((c.encoding, f"adds {c.extra_params:,.0f} parameters over {BASELINE}, budget "
                                         f"{situation.param_budget:,}"))


def _latency(situation, cost, candidates, excluded, no_evidence) -> None:
    """Latency and overhead vs sinusoidal on the device, in the mode, at the nearest measured length."""
    if situation.projected:
        _projected_latency(situation, candidates, excluded)
        return
    keys = [f"devices: [{situation.device}]", f"profile.modes: [{situation.mode}]",
            f"profile.seq_lens: [{situation.deploy_len or situation.train_len or 1024}]",
            f"profile.encodings: [{', '.join(dict.fromkeys(c.encoding.split('+')[0] for c in candidates))}]"]
    needed = situation.latency_budget_ms is not None or situation.decode
    columns = {"device", "mode", "seq_len", "latency_median_ms", "encoding", "status"}
    rows = cost[cost["status"] == "ok"] if columns <= set(cost.columns) else pd.DataFrame(columns=list(columns))
    rows = rows[rows["device"].astype(str).str.split(":").str[0].eq(situation.device)
                & rows["mode"].eq(situation.mode)].dropna(subset=["latency_median_ms"])
    if rows.empty:
        if needed:
            no_evidence.append((f"latency on {situation.device} ({situation.mode})",
                                f"cost.csv has no ok {situation.mode} rows on {situation.device}", keys))
        return
    size = _main_size(rows) if "size" in rows else None
    rows = rows[rows["size"] == size] if size is not None else rows
    measured = sorted(int(x) for x in rows["seq_len"].unique())
    target = situation.deploy_len or situation.train_len or measured[-1]
    seq_len = _nearest(target, measured)
    sureness = _sureness(target, measured)
    at = rows[rows["seq_len"] == seq_len].groupby("encoding")["latency_median_ms"].median()
    where = f"{situation.device} {situation.mode}, seq_len {seq_len}, size {size}" + (
        "" if situation.deploy_len or situation.train_len else " (no length given: the longest measured)")
    for c in candidates:
        base = c.encoding.split("+")[0]
        if base not in at.index:
            if needed:
                c.notes.append(f"latency: no evidence (cost.csv has no {base} row on {where}); run {', '.join(keys)}")
                c.cost_sureness = NO_EVIDENCE
            continue
        c.latency_ms = float(at[base])
        c.overhead_ratio = float(at[base] / at[BASELINE]) if BASELINE in at.index else None
        c.cost_where = where + ("" if sureness == MEASURED or not needed else f"; deploy length {target}: {sureness}")
        if needed:
            c.cost_sureness = sureness
        if situation.latency_budget_ms is not None and c.latency_ms > situation.latency_budget_ms:
            extra = "" if sureness == MEASURED else f" at the nearest measured length {seq_len} ({sureness})"
            excluded.append((c.encoding, f"{c.latency_ms:.3g} ms on {where} exceeds {situation.latency_budget_ms:g} ms"
                                         + extra))


def _projected_latency(situation, candidates, excluded) -> None:
    """Latency and overhead vs sinusoidal projected (:mod:`posbench.projection`) for the architecture on the GPU at the
    deployment length (else the training length, else the projection's longest context)."""
    arch = projection.named_architecture(situation.shape or f"posbench-{PROJECTED_SIZE}")
    device = projection.DEVICES[situation.gpu]
    context = situation.deploy_len or situation.train_len or projection.CONTEXTS[-1]
    where = (f"{projection.PROJECTED}: {arch.name} on {device.label}, {situation.mode}, context {context}, "
             f"batch 1, bf16 roofline from the datasheet")
    latency = {}
    for base in dict.fromkeys([BASELINE, *(c.encoding.split("+")[0] for c in candidates)]):
        try:
            row = projection.project(arch, base, context, device)
        except ValueError as error:  # an encoding the registry lacks (a plugin's) or cannot build at the architecture
            latency[base] = f"latency: no projection ({error})"
            continue
        latency[base] = row.decode_ms_per_token if situation.decode else row.prefill_ms
    for c in candidates:
        found = latency[c.encoding.split("+")[0]]
        if isinstance(found, str):
            c.notes.append(found)
            continue
        c.latency_ms = found
        c.overhead_ratio = found / latency[BASELINE]
        c.cost_where = where
        if situation.latency_budget_ms is not None and c.latency_ms > situation.latency_budget_ms:
            excluded.append((c.encoding, f"{c.latency_ms:.3g} ms {where} exceeds {situation.latency_budget_ms:g} ms"))


# ----- checked against the verdicts ---------------------------------------------------------------
def contradictions(advice: Advice, verdicts: pd.DataFrame, alpha: float) -> list[str]:
    """Each deciding comparison of an experiment the advice ranks (:func:`decisions`) that the ranking goes
    against, in one line: one it found better by more than δ placed level with or below the other, or left
    too uncertain to rank while the other is ranked; one it found not better by δ placed above the other
    with the advice's own evidence there better by more than δ (Welch interval at ``1 - 2·alpha`` above δ)."""
    rank = {c.encoding: c.rank for c in advice.ranked}
    doubtful = {c.encoding for c in advice.uncertain}
    lines = []
    for group in dict.fromkeys(r.group for c in [*advice.ranked, *advice.uncertain] for r in c.rows if not r.fills_in):
        rows = {c.encoding: r for c in [*advice.ranked, *advice.uncertain] for r in c.rows
                if r.group == group and not r.fills_in}
        for d in decisions(verdicts, rows):
            x, y, comparator, added = d.comparator, d.added, rows[d.comparator], rows[d.added]
            if d.outcome == evidence.BETTER and x in rank and y in rank and rank[x] >= rank[y]:
                lines.append(f"ranks {y} {'level with' if rank[x] == rank[y] else 'above'} {x} on {group}, "
                             f"but {d.line()}")
            elif d.outcome == evidence.BETTER and x in doubtful and y in rank:
                lines.append(f"ranks {y} and lists {x} as {UNCERTAIN} on {group}, but {d.line()}")
            elif (d.outcome == evidence.NOT_BETTER and x in rank and y in rank and rank[x] < rank[y]
                  and min(comparator.n, added.n) >= 2
                  and statistics.contrast(comparator.values, added.values, comparator.higher_is_better, 0.0,
                                          alpha).ci_low > d.margin):
                lines.append(f"ranks {x} above {y} by more than δ on {group}, but {d.line()}")
    return lines


def _row_verdicts(verdicts: pd.DataFrame, rows: list[str]) -> list[str]:
    """Each matching guidance row's verdict per size, as verdicts.csv has it."""
    found = []
    for row in rows:
        mine = verdicts[verdicts["row"] == row] if "row" in verdicts.columns else verdicts.iloc[0:0]
        mine = mine[mine["decides"].astype(bool)] if "decides" in mine.columns else mine  # the run's preset decides
        if mine.empty:  # nothing to group: verdicts.csv may hold no comparison, and then no columns to group by
            found.append(f"{row}: no declared comparison of this row has results in verdicts.csv")
            continue
        for size, group in smallest_first(mine).groupby("size", sort=False):
            stability = group["row_stability"].iloc[0] if "row_stability" in group else math.nan
            shown = f"{row} ({size}): {group['row_verdict'].iloc[0]}"
            found.append(shown + (f", stability {stability:.0%}" if pd.notna(stability) else ""))
    return found


def _comparisons(verdicts: pd.DataFrame, rows: list[str], encoding: str) -> list[str]:
    """The matching rows' declared comparisons that have ``encoding`` as an arm, in one line each."""
    if verdicts.empty or "row" not in verdicts.columns:
        return []
    mine = smallest_first(verdicts[verdicts["row"].isin(rows)
                                   & ((verdicts["add_arm"] == encoding) | (verdicts["comparator_arm"] == encoding))])
    lines = []
    for r in mine.itertuples(index=False):
        effect = (f"effect {r.effect:+.3g} [{r.ci_low:+.3g}, {r.ci_high:+.3g}] vs δ {r.margin:g}"
                  if pd.notna(r.effect) else "not compared")
        decides = str(getattr(r, "decides", True)).lower() != "false"  # a column of older tables may be absent
        role = f"row {r.row}: {r.row_verdict}" if decides else f"row {r.row}: descriptive, outside the run's preset"
        lines.append(f"{r.comparison} ({r.size}): {r.comparator_arm} vs {r.add_arm} at {r.length_ratio:g}×, {effect} "
                     f"→ {r.outcome} ({role})")
    return lines
