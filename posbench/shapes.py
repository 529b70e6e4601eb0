"""Published shapes as declared orderings (``shapes.yaml``): what this benchmark reproduces of the papers.

A *shape* is a paper's result written as an ordering of arms on one task, metric and evaluation
length: ``ordering`` lists ranks best first, a rank being one arm or a list of arms the paper does
not order among themselves, and each arm of a rank should beat each arm of the next. An arm is an
encoding, or a trained encoding with a training-free RoPE scaling (``rope+yarn:4``, as the tables
name it). Each shape cites the paper, its figure or table and the paper's own numbers beside it.
:func:`load` reads and checks the file: a mistake is one ``ValueError`` line naming the shape, the key
and the allowed values. The guidance rows' loader (:mod:`posbench.comparisons`) is not reused: it
refuses arms that are not "added vs other", which most published orderings are.

:func:`judge` reads a run's extrapolation table (one row per seed and length) with
:mod:`posbench.arms`' row selection and :mod:`posbench.statistics`, read-only: for each adjacent pair
of ranks the 95 % Welch interval over seeds of the better arm minus the worse
(:func:`posbench.statistics.contrast`, signed so that positive means better), at each arm's learning rate
chosen on validation loss where several ran.
A pair *holds* when its interval lies above 0 and is *reversed* when it lies below 0; for a shape whose
``relation`` is ``equivalent`` (a paper's "≈"), a pair holds when the interval lies inside ±``margin``
and is reversed when it lies wholly outside it. The outcome, in the order it is decided:

* **not run**: an arm has no finished seed at the shape's length (a ``pending`` shape is not trained:
  an arm of it cannot run yet, and ``pending`` says why);
* **not reachable at this budget**: an arm did not learn in distribution: its chance gate
  (:func:`posbench.statistics.above_chance`: the headline metric against its chance level at the
  training length, token accuracy for a metric without one) fails, or, for a shape scored by exact
  match, it gets no sequence right at the training length; so nothing beyond it says anything;
* **reproduced**: every adjacent pair holds;
* **contradicted**: some pair is reversed;
* **not shown**: otherwise (an interval across the line, or fewer than 2 seeds in an arm); such a pair
  says how many seeds per arm would place its interval on one side at the spread and effect observed
  (:func:`posbench.statistics.seeds_needed`), the power calculation on this run's seeds as a pilot.

Which seeds a shape reads: its pilot's (the preset's ``train.seeds``, below the comparisons' first
deciding seed, :func:`fresh_seed`), unless it declares a ``confirm`` stage: then only that stage's, n fresh
seeds from :func:`fresh_seed` on, sized by the power calculation on the pilot and trained at the rate the
pilot chose (``lr_factors``, of the preset's rate, for a tuned shape) — the pilot's seeds chose n and the
rate, so they do not also decide.

``length_ratio: beyond`` is Ruoss et al.'s score: each seed's mean over the evaluated lengths past
the training length (:meth:`posbench.tasks.chomsky.ChomskyTask.beyond_training`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from posbench import comparisons, encodings, experiments, metrics, statistics, tasks
from posbench.arms import cell_rows, mean_chance
from posbench.comparisons import ArmSpec
from posbench.records import write_atomically
from posbench.tables import load as load_tables
from posbench.tables import results_frame

PATH = Path(__file__).with_name("shapes.yaml")
BEYOND = "beyond"  # length_ratio: the mean over every evaluated length past the training length
ORDERED, EQUIVALENT = "ordered", "equivalent"
REPRODUCED, CONTRADICTED, NOT_SHOWN, UNREACHABLE, NOT_RUN = (
    "reproduced", "contradicted", "not shown", "not reachable at this budget", "not run")
OUTCOMES = (REPRODUCED, CONTRADICTED, NOT_SHOWN, UNREACHABLE, NOT_RUN)
HOLDS, REVERSED, UNCLEAR = "holds", "reversed", "unclear"
FIELDS = {"id": str, "paper": str, "figure": str, "published": str, "task": str, "metric": str,
          "length_ratio": (int, float, str), "ordering": list, "part": str}
OPTIONAL = {"relation": str, "margin": (int, float), "tuned": bool, "pending": str, "confirm": dict}
CONFIRM = {"seeds": int, "pilot": str}  # a confirm stage's keys; a tuned shape's also lr_factors
TABLE_COLUMNS = ("value", "token_accuracy")  # a metric the extrapolation table has a column for, besides decoded ones


@dataclass(frozen=True)
class Confirmation:
    """A shape's confirm stage: ``seeds`` fresh seeds per arm, each arm at ``lr_factors`` × its preset rate."""

    seeds: int
    pilot: str  # what the pilot found that sized the stage (its effect, interval, the n it said)
    lr_factors: tuple[tuple[str, float], ...] = ()  # (trained encoding, factor); none: every arm at 1

    def factor(self, encoding: str) -> float:
        return dict(self.lr_factors).get(encoding, 1.0)

    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(fresh_seed(), fresh_seed() + self.seeds))


@dataclass(frozen=True)
class Shape:
    """One declared published ordering."""

    id: str
    paper: str
    figure: str
    published: str  # the paper's own numbers, as it reports them
    task: str
    metric: str
    length_ratio: float | None  # None: beyond the training length (the mean over every evaluated length past it)
    ranks: tuple[tuple[str, ...], ...]  # best first
    part: str  # the part of the shapes preset that trains its arms
    relation: str = ORDERED
    margin: float = 0.0  # equivalent only: how close counts as "≈", in the metric's units
    tuned: bool = False  # its arms train at train.lr_factors × their rate, each read at the rate validation chose
    pending: str | None = None  # why an arm cannot run yet (an encoding not yet registered); the shape shows "not run"
    confirm: Confirmation | None = None  # read fresh seeds, not the pilot's

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(arm for rank in self.ranks for arm in rank)

    @property
    def higher_is_better(self) -> bool:
        return metrics.get(self.metric).higher_is_better

    @property
    def ordering(self) -> str:
        """``alibi > rope > sinusoidal``; a rank of several arms in braces; ``≈`` for an equivalence."""
        sign = " ≈ " if self.relation == EQUIVALENT else " > "
        return sign.join(rank[0] if len(rank) == 1 else "{" + ", ".join(rank) + "}" for rank in self.ranks)

    @property
    def length(self) -> str:
        return "beyond the training length (mean)" if self.length_ratio is None else f"{self.length_ratio:g}×"

    def trained_arms(self) -> list[ArmSpec]:
        """What the preset trains for it: each arm's encoding (a scaling is evaluated on the plain model);
        nothing for a pending shape, which cannot be judged until it can run whole."""
        return [] if self.pending else [ArmSpec(self.task, name) for name in trained_encodings(self.arms)]

    def read_seeds(self, seeds: pd.Series) -> pd.Series:
        """Which of a table's ``seeds`` this shape reads: its confirm stage's, else the pilot's."""
        return seeds.isin(self.confirm.seed_list()) if self.confirm else pilot_seeds(seeds)


def trained_encodings(arms: tuple[str, ...]) -> list[str]:
    """The encodings that train for ``arms``, each once (a scaling is evaluated on the plain model)."""
    return list(dict.fromkeys(arm.partition("+")[0] for arm in arms))


@functools.cache
def fresh_seed() -> int:
    """The first seed no pilot uses: the comparisons' first deciding seed (posbench/comparisons.yaml)."""
    return comparisons.load().seed_rule.first_seed


def pilot_seeds(seeds: pd.Series) -> pd.Series:
    """Which of ``seeds`` a pilot trains: those below :func:`fresh_seed`."""
    return seeds < fresh_seed()


def task_sizes(results: pd.DataFrame, task: str) -> list[str]:
    """The model sizes ``results`` holds rows of ``task`` at, sorted; none for a table without them."""
    if not len(results) or "size" not in results:
        return []
    return sorted(set(results.loc[results["task"] == task, "size"].dropna()))


@dataclass(frozen=True)
class DeclaredShapes:
    """Every published shape of ``shapes.yaml`` in file order, the parts the preset splits them into, and the
    SHA-256 of the file's parsed content."""

    shapes: tuple[Shape, ...]
    parts: tuple[str, ...]
    sha256: str

    def shape(self, shape_id: str) -> Shape:
        found = [s for s in self.shapes if s.id == shape_id]
        if not found:
            raise KeyError(f"no shape {shape_id!r}; allowed: {', '.join(s.id for s in self.shapes)}")
        return found[0]

    def runs(self, parts: list[str] | str, pilot_seeds: list[int],
             lr_factors: list[float]) -> list[tuple[ArmSpec, float, tuple[int, ...]]]:
        """``(arm, rate factor, seeds)`` the shapes of ``parts`` (or ``"all"``) train: every arm at
        ``pilot_seeds``, at factor 1 or, for a tuned shape, at each of ``lr_factors`` (an arm of several
        shapes once); a confirm stage's arms at its fresh seeds and declared factor."""
        chosen = [s for s in self.shapes if parts == "all" or s.part in parts]
        tuned: dict[ArmSpec, bool] = {}
        for shape in chosen:
            for spec in shape.trained_arms():
                tuned[spec] = tuned.get(spec, False) or shape.tuned
        pilots = [(spec, f, tuple(pilot_seeds)) for spec, t in tuned.items() for f in (lr_factors if t else [1])]
        return pilots + [(spec, s.confirm.factor(spec.encoding), s.confirm.seed_list())
                         for s in chosen if s.confirm for spec in s.trained_arms()]


def load(path: str | Path | None = None) -> DeclaredShapes:
    """The shapes in ``path`` (default: the package's ``shapes.yaml``), every key checked."""
    path = Path(path) if path is not None else PATH
    data = yaml.safe_load(path.read_bytes()) or {}
    if not isinstance(data, dict) or set(data) != {"parts", "shapes"}:
        raise ValueError(f"{path}: needs exactly the keys parts (a list of part names) and shapes (a list of shapes)")
    parts = data["parts"]
    if not isinstance(parts, list) or not parts or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"{path}: parts must be a non-empty list of names, got {parts!r}")
    shapes = [parse(entry, path, tuple(parts)) for entry in data["shapes"] or []]
    ids = [s.id for s in shapes]
    if len(set(ids)) < len(ids):
        raise ValueError(f"{path}: shape ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    content = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
    return DeclaredShapes(tuple(shapes), tuple(parts), hashlib.sha256(content).hexdigest())


def parse(entry, path: Path, parts: tuple[str, ...]) -> Shape:
    """One shape, every key checked (type, known task, metric, arms, length, relation, part)."""
    where = f"{path}: shape {entry.get('id', '?') if isinstance(entry, dict) else entry!r}"
    if not isinstance(entry, dict) or not set(FIELDS) <= set(entry) <= set(FIELDS) | set(OPTIONAL):
        keys = sorted(entry) if isinstance(entry, dict) else []
        raise ValueError(f"{where}: keys {keys}; required: {', '.join(FIELDS)}; optional: {', '.join(OPTIONAL)}")
    for key, kind in {**FIELDS, **OPTIONAL}.items():
        if key in entry and (not isinstance(entry[key], kind) or (kind is not bool and isinstance(entry[key], bool))):
            raise ValueError(f"{where}: {key} = {entry[key]!r} has the wrong type; expected {_kind_name(kind)}")
    if entry["task"] not in tasks.names():
        raise ValueError(f"{where}: unknown task {entry['task']!r}; allowed: {', '.join(tasks.names())}")
    task = tasks.get(entry["task"])
    judged = [m for i, m in enumerate(task.metrics) if i == 0 or m == "token_accuracy" or metrics.get(m).decoded]
    if entry["metric"] not in judged:
        raise ValueError(f"{where}: metric {entry['metric']!r} is not in {task.name}'s tables; allowed: "
                         f"{', '.join(judged)}")
    ratio = _ratio(entry["length_ratio"], task, where)
    ranks = _ranks(entry["ordering"], where, pending="pending" in entry)
    relation = entry.get("relation", ORDERED)
    if relation not in (ORDERED, EQUIVALENT):
        raise ValueError(f"{where}: relation {relation!r}; allowed: {ORDERED}, {EQUIVALENT}")
    if (relation == EQUIVALENT) != ("margin" in entry) or entry.get("margin", 1) <= 0:
        raise ValueError(f"{where}: margin must be given, and positive, exactly when relation is {EQUIVALENT}")
    if entry["part"] not in parts:
        raise ValueError(f"{where}: part {entry['part']!r}; allowed: {', '.join(parts)}")
    tuned = entry.get("tuned", False)
    confirm = _confirmation(entry["confirm"], ranks, tuned, where) if "confirm" in entry else None
    return Shape(entry["id"], entry["paper"], entry["figure"], entry["published"], task.name, entry["metric"], ratio,
                 ranks, entry["part"], relation, float(entry.get("margin", 0.0)), tuned, entry.get("pending"), confirm)


def _confirmation(value: dict, ranks: tuple[tuple[str, ...], ...], tuned: bool, where: str) -> Confirmation:
    """A confirm stage: ``seeds`` (at least 2) and ``pilot`` (what sized it); a tuned shape's also
    ``lr_factors``, the factor its pilot chose for each trained encoding, every one of them."""
    keys = {**CONFIRM, **({"lr_factors": dict} if tuned else {})}
    wrong = [k for k, kind in keys.items() if not isinstance(value.get(k), kind) or isinstance(value.get(k), bool)]
    if set(value) != set(keys) or wrong or value["seeds"] < 2:
        expected = ", ".join(f"{key} ({_kind_name(kind)})" for key, kind in keys.items())
        raise ValueError(f"{where}: confirm needs exactly {expected}, seeds at least 2; got {value!r}")
    factors = value.get("lr_factors", {})
    trained = trained_encodings(tuple(arm for rank in ranks for arm in rank))
    bad = [f for f in factors.values() if isinstance(f, bool) or not isinstance(f, (int, float)) or f <= 0]
    if tuned and (sorted(factors) != sorted(trained) or bad):
        raise ValueError(f"{where}: confirm.lr_factors must give a positive factor for each of {', '.join(trained)}"
                         f"; got {factors!r}")
    return Confirmation(value["seeds"], value["pilot"], tuple((e, float(factors[e])) for e in trained if e in factors))


def _ratio(value, task: tasks.Task, where: str) -> float | None:
    beyond = [n for n in task.eval_lengths() if n > task.train_length]  # a split's long set too (scan_length's 48)
    if value == BEYOND and beyond:
        return None
    if not isinstance(value, str) and value in task.eval_factors:
        return float(value)
    allowed = ", ".join(f"{f:g}" for f in task.eval_factors) + (f", {BEYOND}" if beyond else "")
    raise ValueError(f"{where}: length_ratio {value!r} is not one of {task.name}'s evaluation factors; "
                     f"allowed: {allowed}")


def _ranks(ordering: list, where: str, pending: bool) -> tuple[tuple[str, ...], ...]:
    ranks = tuple((rank,) if isinstance(rank, str) else tuple(rank) if isinstance(rank, list) else ()
                  for rank in ordering)
    arms = [arm for rank in ranks for arm in rank]
    if len(ranks) < 2 or not all(ranks) or not all(isinstance(arm, str) for arm in arms) or len(set(arms)) < len(arms):
        raise ValueError(f"{where}: ordering must list at least two ranks, best first, each an arm or a list of arms, "
                         f"no arm twice; got {ordering!r}")
    for arm in arms:
        name, _, scaling = arm.partition("+")
        if name not in encodings.names():
            if pending:
                continue
            raise ValueError(f"{where}: arm {arm!r} is not an encoding; allowed: {', '.join(encodings.names())} "
                             "(optionally +SCALING, e.g. rope+yarn:4); an encoding still to come needs pending: why")
        if scaling:
            from posbench.eval_scaling import check_eval_scaling

            try:
                check_eval_scaling(name, (scaling,))
            except ValueError as error:
                raise ValueError(f"{where}: arm {arm!r}: {error}") from None
    return ranks


def _kind_name(kind) -> str:
    return " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__


# ----- judging ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmResult:
    """One arm of a shape at one size: its per-seed values at the shape's length, and whether it learned."""

    arm: str
    values: np.ndarray  # (n,) per ok seed
    learned: bool | None  # the chance gate at the training length; None: no chance level known
    gate: str  # what the gate read, for the note

    @property
    def mean(self) -> float:
        return float(self.values.mean()) if len(self.values) else math.nan


@dataclass(frozen=True)
class Pair:
    better: str
    worse: str
    numbers: statistics.Contrast | None  # None: fewer than 2 seeds in an arm
    status: str
    needs_n: int | None = None  # an unclear pair: seeds per arm that would decide it at the observed spread and effect


@dataclass(frozen=True)
class JudgedShape:
    """One published shape at one model size: its outcome, each arm's seeds and each adjacent pair's contrast."""

    shape: Shape
    size: str
    outcome: str
    arms: tuple[ArmResult, ...] = ()
    pairs: tuple[Pair, ...] = ()
    note: str = ""

    def ours(self) -> str:
        """Each arm's mean and seeds, in the ordering's order: ``alibi 2.19 (n = 5); rope 3.62 (n = 5)``."""
        return "; ".join(f"{a.arm} {a.mean:.4g} (n = {len(a.values)})" for a in self.arms if len(a.values))

    def intervals(self) -> str:
        """Each adjacent pair's effect and 95 % interval (positive: the better arm is better) and its status."""
        return "; ".join(f"{p.better} vs {p.worse}: " + (
            "too few seeds" if p.numbers is None else
            f"{p.numbers.effect:+.3g} [{p.numbers.ci_low:+.3g}, {p.numbers.ci_high:+.3g}]") + f" → {p.status}"
            + (f" (needs n ≈ {p.needs_n} seeds per arm)" if p.needs_n else "") for p in self.pairs)

    def seeds_needed(self) -> int | None:
        """Seeds per arm that would decide every unclear pair at its observed spread and effect (None: none is)."""
        return max((p.needs_n for p in self.pairs if p.needs_n), default=None)


def metric_column(shape: Shape) -> str:
    """The table column holding the shape's metric: ``value`` for the task's headline, else the metric's own."""
    return "value" if shape.metric == tasks.get(shape.task).metrics[0] else shape.metric


def arm_result(results: pd.DataFrame, shape: Shape, arm: str, size: str) -> ArmResult:
    """The arm's rows at ``size`` (its task's training length and the size's width), at the seeds the shape
    reads (:meth:`Shape.read_seeds`; a confirm stage's at the rate its pilot chose) and at its task's own
    budget (what the shapes preset trains: a run that also holds a comparison's longer-trained arms never
    sets one arm's 2,000 steps against another's 500), at the learning rate validation chose, read at the
    shape's length and gated at the training length."""
    cell = results[cell_rows(results, ArmSpec(shape.task, arm), size)]
    if "steps" in cell.columns:
        cell = cell[cell["steps"] == tasks.get(shape.task).steps]
    pilot_rate = experiments.best_rate(cell[pilot_seeds(cell["seed"])])[1] if shape.confirm else None
    cell = cell[shape.read_seeds(cell["seed"])]
    if pilot_rate is not None:  # the confirm stage at the rate its pilot chose: no other run's fresh seeds join it
        cell = cell[np.isclose(cell["lr"].astype(float), pilot_rate)]
    rows, _, _ = experiments.best_rate(cell)
    ok = rows[rows["status"] == "ok"]
    ratios = ok["length_ratio"].astype(float)
    values = per_seed(ok[ratios > 1] if shape.length_ratio is None else ok[np.isclose(ratios, shape.length_ratio)],
                      metric_column(shape))
    trained = ok[np.isclose(ratios, 1.0)]
    headline = metrics.get(tasks.get(shape.task).metrics[0])
    gate_column, chance_column, higher = (("value", "chance", headline.higher_is_better) if headline.chance
                                          else ("token_accuracy", "token_chance", True))
    chance = mean_chance(trained, chance_column)
    gate_values = trained[gate_column].to_numpy(float) if gate_column in trained.columns else np.array([])
    learned = statistics.above_chance(gate_values, chance, higher)
    gate_name = headline.name if gate_column == "value" else gate_column
    read = f"{gate_name} {np.mean(gate_values):.4g} at 1×, chance {chance:.4g}" if len(gate_values) else "no seed at 1×"
    if learned is not False and sequence_metric(shape.metric):
        own = per_seed(trained, metric_column(shape))
        if not statistics.above_chance(own, 0.0, True):
            return ArmResult(arm, values, False, f"{shape.metric} {np.mean(own) if len(own) else math.nan:.4g} at 1×, "
                                                 "no sequence right in distribution")
    return ArmResult(arm, values, learned, read)


def sequence_metric(name: str) -> bool:
    """Whether ``name`` scores whole sequences without a chance level (exact match, greedy or teacher-forced):
    an arm that gets no sequence right at the training length has not learned what its shape is about,
    whatever its token accuracy, so it is also gated on the metric itself (one-sided 95 % bound above 0)."""
    metric = metrics.get(name)
    return metric.denominator == "sequences" and metric.chance is None


def per_seed(rows: pd.DataFrame, column: str) -> np.ndarray:
    """``(seeds,)`` the mean of ``column`` over each seed's ``rows`` (one row each at one length), by seed;
    empty where the table has no such column or value."""
    if column not in rows.columns:
        return np.array([])
    return rows.dropna(subset=[column]).groupby("seed")[column].mean().to_numpy(float)


def pair_status(numbers: statistics.Contrast | None, shape: Shape) -> str:
    if numbers is None:
        return UNCLEAR
    low, high = numbers.ci_low, numbers.ci_high
    if shape.relation == EQUIVALENT:
        inside, outside = -shape.margin < low and high < shape.margin, low > shape.margin or high < -shape.margin
        return HOLDS if inside else REVERSED if outside else UNCLEAR
    return HOLDS if low > 0 else REVERSED if high < 0 else UNCLEAR


def pair_needs(better: np.ndarray, worse: np.ndarray, numbers: statistics.Contrast, shape: Shape) -> int:
    """Seeds per arm for 80 % power to decide an unclear pair, taking its observed effect and spread as true:
    to place the interval on one side of 0, or (a '≈') on one side of the margin's edge nearest the effect."""
    if shape.relation == EQUIVALENT:
        return statistics.seeds_needed(better, worse, abs(numbers.effect), shape.margin)
    return statistics.seeds_needed(better, worse, numbers.effect, 0.0)


def judge_shape(shape: Shape, results: pd.DataFrame, size: str) -> JudgedShape:
    """The shape's outcome at ``size`` (see the module's docstring for the rules, in their order)."""
    arms = tuple(arm_result(results, shape, arm, size) for arm in shape.arms)
    missing = [a.arm for a in arms if not len(a.values)]
    if missing:
        return JudgedShape(shape, size, NOT_RUN, arms,
                      note=f"no finished seed of {', '.join(missing)}{_pending(shape)}{_confirming(shape)}")
    unlearned = [a for a in arms if a.learned is False]
    if unlearned:
        return JudgedShape(shape, size, UNREACHABLE, arms,
                      note="did not learn in distribution: " + "; ".join(f"{a.arm} ({a.gate})" for a in unlearned))
    by_arm = {a.arm: a for a in arms}
    pairs = []
    for better_rank, worse_rank in zip(shape.ranks, shape.ranks[1:]):
        for better, worse in ((b, w) for b in better_rank for w in worse_rank):
            x, y = by_arm[better].values, by_arm[worse].values
            numbers = statistics.contrast(x, y, shape.higher_is_better, 0.0) if min(len(x), len(y)) >= 2 else None
            status = pair_status(numbers, shape)
            needs = pair_needs(x, y, numbers, shape) if status == UNCLEAR and numbers is not None else None
            pairs.append(Pair(better, worse, numbers, status, needs))
    statuses = [p.status for p in pairs]
    outcome = (REPRODUCED if all(s == HOLDS for s in statuses) else CONTRADICTED if REVERSED in statuses
               else NOT_SHOWN)
    unknown = [a.arm for a in arms if a.learned is None]
    # how far above chance each arm got in distribution: a difference between arms that barely learned is
    # a difference near chance, and the reader should see it beside the outcome
    gates = "in distribution: " + "; ".join(f"{a.arm} {a.gate}" for a in arms)
    note = "; ".join([*([f"no chance level to gate {', '.join(unknown)}"] if unknown else []), gates])
    return JudgedShape(shape, size, outcome, arms, tuple(pairs), note + _confirming(shape))


def judge(declaration: DeclaredShapes, results: pd.DataFrame) -> list[JudgedShape]:
    """Every shape at every model size its task has results for; a shape whose task has none: not run."""
    judged = []
    for shape in declaration.shapes:
        judged += [judge_shape(shape, results, size) for size in task_sizes(results, shape.task)] or [
            JudgedShape(shape, "", NOT_RUN, note=f"no results on {shape.task}{_pending(shape)}")]
    return judged


def _pending(shape: Shape) -> str:
    return f"; pending: {shape.pending}" if shape.pending else ""


def _confirming(shape: Shape) -> str:
    """What a confirm stage read: its seeds, its rates, and the pilot that sized it."""
    if not shape.confirm:
        return ""
    seeds, factors = shape.confirm.seed_list(), shape.confirm.lr_factors
    rates = f" at {', '.join(f'{e} {f:g}' for e, f in factors)} × the preset's rate" if factors else ""
    return (f"; confirm stage: seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} per arm){rates}, the pilot's seeds not "
            f"read; pilot: {shape.confirm.pilot}")


def table(judged: list[JudgedShape], sha256: str) -> pd.DataFrame:
    """``shapes.csv``: one row per shape and size — the paper, its figure and numbers, ours, the outcome."""
    frame = pd.DataFrame([{
        "shape": j.shape.id, "part": j.shape.part, "paper": j.shape.paper, "figure": j.shape.figure,
        "published": j.shape.published, "task": j.shape.task, "metric": j.shape.metric, "length": j.shape.length,
        "ordering": j.shape.ordering, "relation": j.shape.relation, "margin": j.shape.margin, "size": j.size,
        "outcome": j.outcome, "ours": j.ours(), "intervals": j.intervals(), "seeds_needed": j.seeds_needed(),
        "note": j.note, "declaration_sha256": sha256} for j in judged],
        columns=["shape", "part", "paper", "figure", "published", "task", "metric", "length", "ordering", "relation",
                 "margin", "size", "outcome", "ours", "intervals", "seeds_needed", "note", "declaration_sha256"])
    return frame.astype({"seeds_needed": "Int64"})  # a count, empty where no pair is unclear


def write(tables_dir: str | Path) -> Path:
    """Judge the declared shapes on the tables in ``tables_dir`` and write ``shapes.csv`` beside them."""
    declared = load()
    frame = table(judge(declared, results_frame(load_tables(tables_dir))), declared.sha256)
    return write_atomically(Path(tables_dir) / "shapes.csv", functools.partial(frame.to_csv, index=False))
