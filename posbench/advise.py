"""Which encoding should I use? Advice from the aggregated tables alone: data in, ranking out.

Inputs (:class:`Inputs`): ``accuracy.csv``, ``cost.csv`` and ``verdicts.csv`` (core), ``extrapolation.csv``
(optional: without it only the training length has evidence); a :class:`Situation` (task kind, training
and deployment lengths, parameter and latency budgets, token-by-token serving). Nothing is measured.

The rule, in order:

1. **The asked length.** The length ratio ``deploy_len / train_len`` (1 unless both are given; a
   long-context question without both: the longest ratio any task of the kind measured, said so).
2. **Evidence.** For each task of the chosen kind (every task in the tables without one), the rows at the
   task's nearest measured ratio at or above the asked one (its longest where none is), at the model size
   with the most ok rows; per encoding (training-free RoPE scalings such as ``rope+yarn:4`` are encodings
   of their own) the mean over seeds with a 95 % t interval kept inside the metric's range
   (:func:`seed_interval`), the learning rate chosen on validation loss where several were run
   (:func:`posbench.evidence.arm`). The tasks measured there *rank*; a task measured only at shorter
   lengths *fills in*, labelled: it breaks ties and places encodings with no evidence at the asked length
   (after every encoding that has some). Where no task reaches the asked ratio, those at the longest
   measured one rank.
3. **Gates.** An encoding that does not beat its task's chance level, diverged, or reads positions that
   training never reached there is left out, with the reason.
4. **Hard constraints.** Extra parameters (``params_total`` minus sinusoidal's, same task and size;
   sinusoidal adds none) above ``param_budget``; median latency (``cost.csv``, mode ``decode`` when
   serving token by token, else ``infer``) on ``device`` at the measured ``seq_len`` nearest to the
   deployment length above ``latency_budget_ms``: left out. An encoding without a row for a constraint
   stays, marked "no evidence"; a constraint that no row measures says so, with the config keys to run.
   For a model shape or a GPU posbench does not measure (``shape``, ``gpu``), the latency is
   :mod:`posbench.projection`'s roofline at the deployment length, labelled "projected" wherever it shows.
5. **Rank** per task, in tiers: the best mean leads tier 1, every encoding whose 95 % Welch interval of
   the difference to the leader (:func:`posbench.evidence.contrast`) holds 0 is tied with it; the best
   of the rest leads tier 2, and so on. Over the ranking tasks, pair by pair: of two encodings, the one
   in better tiers on the tasks both were measured on (the sum of their tier differences) ranks above;
   each ranks by the encodings it ranks above less those it ranks below (:func:`_standings`), so a task
   only some encodings ran orders only those, and measuring more tasks promotes nobody. Equal standings
   are ties, which the fill-in tasks' standing breaks where every tied encoding has fill-in evidence;
   within a tie, lower overhead (latency vs sinusoidal) first. Where two ranking tasks order a pair of
   encodings oppositely, the advice says the tasks disagree and shows each task's ranking.
6. **Why and how sure.** Each encoding shows its metric rows, the comparisons of the matching guidance
   rows that involve it (``verdicts.csv`` as written, never recomputed here), its overhead ratio and
   extra parameters; its confidence is the weakest of the evidence it is ranked on: measured at this
   length / interpolated (the next longer measured length) / extrapolated beyond the tables / no
   evidence, marked "few seeds" (under :data:`FEW_SEEDS`), "other lengths only" and "tasks disagree"
   where they apply.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from posbench import evidence, guidance, metrics, projection, tasks
from posbench.aggregate import plain
from posbench.comparisons import ArmSpec, Comparison
from posbench.devices import ANY_DEVICE, CPU
from posbench.guidance import KINDS

CORE = ("verdicts", "accuracy", "cost")
OPTIONAL = ("extrapolation",)
DEVICES = ANY_DEVICE.kinds  # a cost row's device is read by its kind (cuda:1 is cuda)
MEASURED, INTERPOLATED, EXTRAPOLATED, NO_EVIDENCE = (
    "measured at this length", "interpolated", "extrapolated beyond the tables", "no evidence")
SURENESS = (MEASURED, INTERPOLATED, EXTRAPOLATED, NO_EVIDENCE)  # best first
FEW_SEEDS = 5  # an interval over fewer seeds is marked "few seeds"
FEW, OTHER_LENGTHS, DISAGREE = "few seeds", "other lengths only", "tasks disagree"  # marks on a confidence
LONG_CONTEXT = "long"  # the task kind asked, without a deployment length, at the longest measured ratio
SHARE_OF = {"correct": "scored", "exact": "sequences", "greedy_exact": "sequences"}  # a count -> what it is part of
BASELINE = "sinusoidal"  # the added encoding every overhead and extra parameter is counted against
PROJECTED_SIZE = "base"  # the model projected on a gpu when no shape is given: the bench's and profile's
RULE = ("Left out: encodings that do not beat chance or break a budget. Ranked by the task's metric at the asked "
        "length ratio (the nearest measured at or above it; a long-context question without a deployment length: "
        "the longest measured), over the kind's tasks measured there (mean over seeds, 95 % t interval kept inside "
        "the metric's range); tasks measured only at other lengths fill in, labelled: they break ties and place "
        "encodings without evidence at that length last. Encodings whose 95 % Welch interval of the difference to "
        "the leader holds 0 are tied with it; over several tasks, of two encodings the one in better tiers on the "
        "tasks both were measured on ranks above; within a tie, lower overhead first.")


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
    shape: str | None = None  # a deployed model's shape (posbench.projection): latency projected, not measured
    gpu: str | None = None  # a datasheet GPU (posbench.projection.DEVICES): latency projected there

    def __post_init__(self):
        if self.task is not None and self.task not in KINDS:
            raise ValueError(f"task {self.task!r} is not allowed; allowed: {', '.join(KINDS)}")
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r} is not allowed; allowed: {', '.join(DEVICES)}")
        if self.shape is not None:
            projection.named_shape(self.shape)
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
        where = (f"{self.shape or projection.posbench_shape(PROJECTED_SIZE).name} on {self.gpu} "
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
    tier: int = 0
    values: np.ndarray | None = field(default=None, repr=False)

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
        role = " — fills in (no evidence at the asked length: breaks ties only)" if self.fills_in else ""
        return (f"{self.task} {self.metric} ({arrow} is better) at {self.length_ratio:g}× ({self.size}, "
                f"eval length {self.eval_len}): {self.mean:.4g} {self.interval()}, n = {self.n} seeds — "
                f"{self.sureness}{role}")

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
    def ranking_rows(self) -> list[Row]:
        """The rows it is ranked on: those at the asked length, else (no such row) the fill-in rows."""
        return [r for r in self.rows if not r.fills_in] or self.rows

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
                "no_evidence": [{"constraint": c, "missing": m, "config_keys": k} for c, m, k in self.no_evidence]}

    def text(self) -> str:
        lines = [f"Situation: {self.situation.describe()}", f"Rule: {self.rule}"]
        lines += [f"Basis: {b}" for b in self.basis]
        lines += [f"Tasks disagree: {d}" for d in self.disagreement]
        lines += [f"Guidance (verdicts.csv): {g}" for g in self.guidance]
        if not self.ranked:
            lines.append("No encoding can be recommended from these tables.")
        for c in self.ranked:
            tie = f" (tied with {', '.join(c.tied_with)})" if c.tied_with else ""
            lines.append(f"{c.rank}. {c.encoding}{tie} — {c.confidence}")
            lines += [f"     {line}" for line in c.why()]
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
        for encoding, row in rows.items():
            by_encoding.setdefault(encoding, []).append(row)
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
    disagreement = _rank(kept)
    rows = guidance_rows(situation)
    for c in kept:
        c.verdicts = _comparisons(inputs.verdicts, rows, c.encoding.split("+")[0])
    return Advice(situation, kept, excluded, _row_verdicts(inputs.verdicts, rows), no_evidence, basis, disagreement)


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
    size = ok.groupby("size").size().sort_values(ascending=False).index[0]
    return size, sorted(float(r) for r in ok.loc[ok["size"] == size, "length_ratio"].dropna().unique())


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


def _task_rows(target: float, rows: pd.DataFrame, task: str) -> tuple[dict[str, Row], list[tuple[str, str]], float]:
    """Each encoding's :class:`Row` for ``task`` at its nearest measured ratio at or above ``target``, the
    gated encodings, and that ratio."""
    size, measured = _measured(rows)
    ok = rows[rows["status"] == "ok"].dropna(subset=["value"])
    rows = rows[rows["size"] == size]
    ratio = _at_or_above(target, measured)
    sureness = _sureness(target, measured)
    metric = str(ok["metric"].dropna().iloc[0]) if "metric" in ok.columns else "value"
    higher = metrics.get(metric).higher_is_better if metric in metrics.METRICS else True
    probe = Comparison("advise", "standard_nlp", task, metric, ratio, BASELINE, BASELINE, 1.0, 1.0, ())
    found, gated = {}, []
    for encoding in dict.fromkeys(rows["encoding"]):
        arm = evidence.arm(rows, probe, ArmSpec(task, encoding), size)
        if arm.n == 0:
            if arm.diverged:
                gated.append((encoding, f"{task}: did not learn ({arm.diverged} seed(s) diverged)"))
            continue
        if arm.untrained_positions:
            gated.append((encoding, f"{task}: positions at {ratio:g}× were never trained"))
            continue
        if evidence.beats_chance(arm, True if metric == "exact_match" else higher) is False:  # exact: token acc.
            gated.append((encoding, f"{task}: did not learn ({metric} does not beat chance {arm.chance:.4g})"))
            continue
        if metric == "exact_match" and not arm.values.any():  # tokens above chance, yet no sequence right
            gated.append((encoding, f"{task}: no sequence right (exact match 0 in all {arm.n} seeds at {ratio:g}×)"))
            continue
        low, high, clipped = seed_interval(arm.values, metric)
        found[encoding] = Row(task, metric, higher, str(size), ratio, arm.eval_len, float(arm.values.mean()), low,
                              high, arm.n, sureness, clipped, values=arm.values)
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
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    bottom, top = value_range(metric)
    return float(max(low, bottom)), float(min(high, top)), bool(low < bottom or high > top)


def value_range(metric: str) -> tuple[float, float]:
    """Where a metric's values lie, from its declaration (:data:`posbench.metrics.METRICS`): every metric is a
    ratio of non-negative sums, so at least 0; a share (its numerator counts part of what its denominator
    counts: right targets of the scored, exact sequences of all) at most 1. Unknown metrics: unbounded."""
    if metric not in metrics.METRICS:
        return -math.inf, math.inf
    declared = metrics.get(metric)
    share = SHARE_OF.get(declared.numerator) == declared.denominator and declared.divisor == 1
    return 0.0, 1.0 if share else math.inf


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
    size = rows.groupby("size").size().sort_values(ascending=False).index[0] if "size" in rows else None
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
    """Latency and overhead vs sinusoidal projected (:mod:`posbench.projection`) for the shape on the GPU at the
    deployment length (else the training length, else the projection's longest context)."""
    shape = projection.named_shape(situation.shape or f"posbench-{PROJECTED_SIZE}")
    device = projection.DEVICES[situation.gpu]
    context = situation.deploy_len or situation.train_len or projection.CONTEXTS[-1]
    where = (f"{projection.PROJECTED}: {shape.name} on {device.label}, {situation.mode}, context {context}, "
             f"batch 1, bf16 roofline from the datasheet")
    latency = {}
    for base in dict.fromkeys([BASELINE, *(c.encoding.split("+")[0] for c in candidates)]):
        try:
            row = projection.project(shape, base, context, device)
        except ValueError as error:  # an encoding the registry lacks (a plugin's) or cannot build at the shape
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


def _rank(candidates: list[Candidate]) -> list[str]:
    """The rank over tasks (rule 5): sets rank, tied_with, sureness and marks; returns each ranking task's
    order where two of them disagree."""
    by_task = _tiers(candidates)
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
    rank = 0
    for i, c in enumerate(candidates):
        if i == 0 or key[c.encoding] != key[candidates[i - 1].encoding]:
            rank += 1
        c.rank = rank
        found = [r.sureness for r in c.ranking_rows] + ([c.cost_sureness] if c.cost_sureness else [])
        c.sureness = max(found, key=SURENESS.index)  # the weakest
        c.marks = ([FEW] * any(r.few_seeds for r in c.ranking_rows) + [OTHER_LENGTHS] * c.ranking_rows[0].fills_in
                   + [DISAGREE] * (c.encoding in split))
    for c in candidates:
        c.tied_with = [o.encoding for o in candidates if o.rank == c.rank and o is not c]
    return disagreement


def _tiers(candidates: list[Candidate]) -> dict[str, dict[str, Row]]:
    """Task -> encoding -> its row, each row's tier set (rule 5: tier 1 is the leader and those tied with it)."""
    by_task = {}
    for task in dict.fromkeys(r.task for c in candidates for r in c.rows):
        found = {c.encoding: r for c in candidates for r in c.rows if r.task == task}
        sign = 1 if next(iter(found.values())).higher_is_better else -1
        rows = by_task[task] = {e: found[e] for e in sorted(found, key=lambda e: -sign * found[e].mean)}  # best first
        left, tier = list(rows), 1
        while left:
            leader = rows[left[0]]
            tied = [e for e in left if e == left[0] or _tied(rows[e], leader)]
            for e in tied:
                rows[e].tier = tier
            left, tier = [e for e in left if e not in tied], tier + 1
    return by_task


def _standings(candidates: list[Candidate], fills_in: bool) -> dict[str, tuple]:
    """Encoding -> its standing among ``candidates`` over their ranking or their fill-in tasks (lower first):
    ``(compared with none, −(encodings it ranks above − encodings it ranks below))``. Two encodings are
    ordered by the tasks both were measured on (the sum of their tier differences there), so a task that
    measured some encodings and not others orders only those: measuring more tasks promotes nobody (the
    shapes tables measure ``none`` and ``learned`` on a masked-LM task the others never ran). An encoding
    that shares no task with another has ``compared with none`` true and comes after the rest; without rows
    of that kind, ``(None,)``."""
    tiers = {c.encoding: {r.task: r.tier for r in c.rows if r.fills_in == fills_in} for c in candidates}
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


def _tied(row: Row, leader: Row) -> bool:
    """Whether the 95 % Welch interval of ``row`` minus ``leader`` holds 0 (no interval: not tied)."""
    if row.n < 2 or leader.n < 2:
        return bool(row.mean == leader.mean)
    x = evidence.contrast(row.values, leader.values, row.higher_is_better, 0.0)
    return x.ci_low <= 0 <= x.ci_high


def _row_verdicts(verdicts: pd.DataFrame, rows: list[str]) -> list[str]:
    """Each matching guidance row's verdict per size, as verdicts.csv has it."""
    found = []
    for row in rows:
        mine = verdicts[verdicts["row"] == row] if "row" in verdicts.columns else verdicts.iloc[0:0]
        mine = mine[mine["decides"].astype(bool)] if "decides" in mine.columns else mine  # the run's preset decides
        if mine.empty:  # nothing to group: verdicts.csv may hold no comparison, and then no columns to group by
            found.append(f"{row}: no declared comparison of this row has results in verdicts.csv")
            continue
        for size, group in mine.groupby("size", sort=False):
            stability = group["row_stability"].iloc[0] if "row_stability" in group else math.nan
            shown = f"{row} ({size}): {group['row_verdict'].iloc[0]}"
            found.append(shown + (f", stability {stability:.0%}" if pd.notna(stability) else ""))
    return found


def _comparisons(verdicts: pd.DataFrame, rows: list[str], encoding: str) -> list[str]:
    """The matching rows' declared comparisons that have ``encoding`` as an arm, in one line each."""
    if verdicts.empty or "row" not in verdicts.columns:
        return []
    mine = verdicts[verdicts["row"].isin(rows)
                    & ((verdicts["add_arm"] == encoding) | (verdicts["comparator_arm"] == encoding))]
    lines = []
    for r in mine.itertuples(index=False):
        effect = (f"effect {r.effect:+.3g} [{r.ci_low:+.3g}, {r.ci_high:+.3g}] vs δ {r.margin:g}"
                  if pd.notna(r.effect) else "not compared")
        decides = str(getattr(r, "decides", True)).lower() != "false"  # a column of older tables may be absent
        role = f"row {r.row}: {r.row_verdict}" if decides else f"row {r.row}: descriptive, outside the run's preset"
        lines.append(f"{r.comparison} ({r.size}): {r.comparator_arm} vs {r.add_arm} at {r.length_ratio:g}×, {effect} "
                     f"→ {r.outcome} ({role})")
    return lines


# ----- the common situations, for the report -------------------------------------------------------
SITUATION_COLUMNS = ("situation", "recommendation", "runner_up", "evidence", "confidence")
SITUATIONS = (  # (label, the situation advise is asked about): the report's page "Which encoding should I use?"
    ("Short, fixed-length NLP", Situation(task="nlp", train_len=256, deploy_len=256)),
    ("Long-context task (the longest measured length)", Situation(task="long")),
    ("Length beyond training (4×)", Situation(task="nlp", train_len=256, deploy_len=1024)),
    ("Code", Situation(task="code")),
    ("Structured data", Situation(task="structured")),
    ("Vision + language", Situation(task="multimodal")),
    ("Tight parameter budget (no extra parameters)", Situation(task="nlp", param_budget=0)),
    ("Token-by-token serving", Situation(task="nlp", decode=True)),
)


def summary_row(label: str, advice: Advice) -> list[str]:
    """label, recommendation, runner-up, evidence in one line, confidence (as the command prints them)."""
    leaders, runner_up = advice.leaders(), advice.runner_up()
    missing = "; ".join(f"{c}: {m}" for c, m, _ in advice.no_evidence)
    if not leaders:
        return [label, "no evidence", "—", missing or "no ok rows for this situation", NO_EVIDENCE]
    best = leaders[0]
    evidence = "; ".join(f"{r.task} {r.metric} {r.mean:.3g} {r.interval()} at {r.length_ratio:g}×, n = {r.n}"
                         + (" (fills in)" if r.fills_in else "") for r in best.rows)
    if advice.disagreement:
        evidence += "; tasks disagree: " + "; ".join(advice.disagreement)
    if best.overhead_ratio is not None:
        evidence += f"; latency ×{best.overhead_ratio:.2g} vs {BASELINE}"
    if missing:
        evidence += f"; no evidence for {missing}"
    return [label, " = ".join(c.encoding for c in leaders), runner_up.encoding if runner_up else "—", evidence,
            best.confidence]


def situations_table(inputs: Inputs) -> pd.DataFrame:
    """``advice.csv``, what the report's page "Which encoding should I use?" shows: one row per
    :data:`SITUATIONS` entry, as the command would answer it on these tables, and the rule it ranks by."""
    found = [summary_row(label, advise(situation, inputs)) for label, situation in SITUATIONS]
    return pd.DataFrame(found, columns=list(SITUATION_COLUMNS)).assign(rule=RULE)
