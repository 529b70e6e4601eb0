"""The declared comparisons (``comparisons.yaml``): which arms decide each guidance row, and how.

A comparison is written down before the runs that decide it: one added arm, one comparator, the
task, metric, evaluation length and margin δ. :func:`load` reads and checks the file (a mistake is a
one-line ``ValueError`` naming the comparison, the key and the allowed values) and keeps its SHA-256,
which the report prints, so a reader can tell which declaration a verdict was judged against.

>>> declared = load()
>>> [c.id for c in declared.of_row("standard_nlp") if "default" in c.presets]
['scan-rope']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from posbench import encodings, metrics, tasks
from posbench.guidance import BY_KEY as ROWS
from posbench.sizes import SIZES
from posbench.statistics import POWER_Z, power_seeds

PATH = Path(__file__).with_name("comparisons.yaml")
PRESETS = ("default", "full")
DECLARED_SIZE = "tiny"  # the size a comparison's declared widths (added_d_model, comparator_d_model) are stated at
FIELDS = {"id": str, "task": str, "metric": str, "length_ratio": (int, float), "added": str, "comparator": str,
          "margin": (int, float), "reference_spread": (int, float), "presets": list}
# Where an arm is trained away from its task's length or its size's width (rows 2 and 3): the training
# length of both arms, and each arm's model width (d_model; a naive concat's E width). Left out: the defaults.
AXES = {"train_length": int, "added_d_model": int, "comparator_d_model": int}
# A comparison found unfit after its result was known stays declared (pre-registration forbids deleting it),
# marked with the reason; it never decides and is shown as withdrawn beside its old result. ``steps``: the
# declared budget both arms train (default: the task's steps).
OPTIONAL = {**AXES, "steps": int, "withdrawn": str}
LOOK_RULES = ("pocock", "obrien_fleming")  # how α is split between a comparison's two looks (statistics.boundaries)
# The file's sections besides ``rows``, each key with its type.
SEED_RULE = {"alpha": float, "power": float, "min": int, "max": int, "first_seed": int, "looks": str}
BUDGET_RULE = {"checkpoints": int, "spacing": (int, float), "decay_fraction": float, "scale": dict}
TREND_RULE = {"steady": float}


@dataclass(frozen=True)
class SeedRule:
    """How many seeds a comparison runs and which: n from its declared spread s and margin δ by the power
    calculation, ``ceil(2 (z_{1-α} + z_{power})² s² / δ²)`` within [min, max]; its first look's seeds
    are ``first_seed + 0 … n - 1`` (never a pilot's or a tuning run's, which use seeds below it), a
    second look's the next n; ``looks`` names how the one-sided ``alpha`` is split between the looks."""

    alpha: float
    power: float
    min: int
    max: int
    first_seed: int
    looks: str

    def n(self, spread: float, margin: float) -> int:
        from scipy.stats import norm

        z = norm.ppf(1 - self.alpha) + norm.ppf(self.power)
        return min(self.max, max(self.min, power_seeds(z, spread, margin)))


@dataclass(frozen=True)
class BudgetRule:
    """The annealed checkpoints of a deciding arm: ``checkpoints`` budgets, each ``spacing`` times the one
    before, the last the comparison's steps; each a decay branch of ``decay_fraction`` of its budget.
    ``scale``: per preset, the factor on every declared budget (``full``'s 4 runs rows 1–3 at 16× the
    steps they had before the budget axis, its checkpoints at 4× and 8×); a preset it omits: 1."""

    checkpoints: int
    spacing: float
    decay_fraction: float
    scale: dict = field(default_factory=dict)  # preset -> factor on each comparison's steps

    def budgets(self, steps: int) -> tuple[int, ...]:
        return tuple(round(steps / self.spacing ** (self.checkpoints - 1 - k)) for k in range(self.checkpoints))


@dataclass(frozen=True)
class ArmSpec:
    """What one arm trains: an encoding on a task, at a training length and a model width (``None``:
    the task's length, the size's width). A width stated ``width_at`` a size scales with the size's
    width (a comparison's widths are stated at :data:`DECLARED_SIZE`, so that its arms keep their
    proportions at every size: naive concat at half the adding arm's width stays at half); without
    ``width_at`` it is the width at every size (a width sweep's)."""

    task: str
    encoding: str
    train_length: int | None = None
    d_model: int | None = None
    width_at: str | None = None

    def resolved(self, size: str) -> tuple[int, int]:
        """The training length and model width this arm trains at: its own, else the task's and the size's."""
        length, width = tasks.default_axes(self.task, size)
        if self.d_model is None:
            return self.train_length or length, width
        if self.width_at is None:
            return self.train_length or length, self.d_model
        return self.train_length or length, self.d_model * width // SIZES[self.width_at]["d_model"]


@dataclass(frozen=True)
class Comparison:
    """One declared comparison. The effect is positive when ``comparator`` is better than ``added``."""

    id: str
    row: str
    task: str
    metric: str
    length_ratio: float
    added: str
    comparator: str
    margin: float
    reference_spread: float  # the larger seed spread of the two arms in the reference the margin was sized on
    presets: tuple[str, ...]
    train_length: int | None = None  # both arms' training length; None: the task's
    added_d_model: int | None = None  # the added arm's model width; None: the size's
    comparator_d_model: int | None = None
    steps: int | None = None  # the declared budget of both arms; None: the task's steps
    withdrawn: str | None = None  # why the comparison no longer decides (e.g. "axis-blind: …"); None: it may
    n_seeds: int = 10  # seeds per arm at each look (SeedRule.n of reference_spread and margin)
    first_seed: int = 0  # its first look's first seed

    def seeds(self, look: int = 1) -> tuple[int, ...]:
        """The seeds per arm that look ``look`` (1 or 2) reads: the first n, then the next n as well."""
        return tuple(range(self.first_seed, self.first_seed + look * self.n_seeds))

    @property
    def budget(self) -> int:
        """The steps both arms train: declared, else the task's."""
        return self.steps or tasks.get(self.task).steps

    def scaled(self, factor: int) -> Comparison:
        """This comparison at ``factor`` times its budget (a preset's ``budgets.scale``)."""
        return self if factor == 1 else dataclasses.replace(self, steps=self.budget * factor)

    @property
    def claim(self) -> str:
        return ROWS[self.row].claim

    @property
    def higher_is_better(self) -> bool:
        return metrics.get(self.metric).higher_is_better

    @property
    def arms(self) -> tuple[ArmSpec, ArmSpec]:
        return tuple(ArmSpec(self.task, encoding, self.train_length, width, None if width is None else DECLARED_SIZE)
                     for encoding, width in ((self.added, self.added_d_model),
                                             (self.comparator, self.comparator_d_model)))

    def detectable(self, seeds: int, spread: float | None = None) -> float:
        """The smallest difference a one-sided 2.5 % test finds with 80 % power at ``seeds`` per
        arm, for a seed spread ``spread`` (default: the reference spread the margin was sized on)."""
        spread = self.reference_spread if spread is None else spread
        return POWER_Z * (2 / seeds) ** 0.5 * spread

    @property
    def trained(self) -> str:
        """``", trained at 128"`` for a declared training length, else nothing."""
        return "" if self.train_length is None else f", trained at {self.train_length}"

    @property
    def labels(self) -> tuple[str, str]:
        """The added arm's and the comparator's names, each with its width where the comparison declares one."""
        return tuple(arm.encoding + ("" if arm.d_model is None else f" (d = {arm.d_model})") for arm in self.arms)

    def describe(self) -> str:
        at = "" if self.length_ratio == 1 else f" at {self.length_ratio:g}× the training length"
        added, comparator = self.labels
        return f"{self.task} {self.metric}{at}{self.trained}: {added} (added) vs {comparator}, δ = {self.margin:g}"


@dataclass(frozen=True)
class Declaration:
    """Every declared comparison, in file order, and the SHA-256 of the file's parsed content (its
    comments and layout are prose: editing them keeps the hash)."""

    comparisons: tuple[Comparison, ...]
    sha256: str
    path: Path
    seed_rule: SeedRule | None = None
    budget_rule: BudgetRule | None = None
    steady: float = 0.5  # the trend rule: a change within ± steady·δ between the last two checkpoints is steady

    def of_row(self, row: str) -> list[Comparison]:
        return [c for c in self.comparisons if c.row == row]

    def in_preset(self, preset: str) -> list[Comparison]:
        """The comparisons a preset runs; ``all`` for every one."""
        if preset != "all" and preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}, all")
        factor = self.budget_rule.scale.get(preset, 1) if self.budget_rule else 1
        return [c.scaled(factor) for c in self.comparisons if preset == "all" or preset in c.presets]

    def arms(self, preset: str) -> list[ArmSpec]:
        """The arms a preset must train for its comparisons, each once, in first appearance order."""
        return list(dict.fromkeys(arm for comparison in self.in_preset(preset) for arm in comparison.arms))

    @cached_property
    def by_id(self) -> dict[str, Comparison]:
        return {c.id: c for c in self.comparisons}

    def margin(self, task: str, metric: str) -> float | None:
        """The margin declared for ``task`` and ``metric`` at the training length (the smallest, if
        several), which the claims page uses for its own comparisons; ``None`` when none is declared."""
        margins = [c.margin for c in self.comparisons if (c.task, c.metric, c.length_ratio) == (task, metric, 1.0)]
        return min(margins) if margins else None


def load(path: str | Path | None = None) -> Declaration:
    """The declaration in ``path`` (default: the package's ``comparisons.yaml``), checked."""
    path = Path(path) if path is not None else PATH
    if not path.is_file():
        raise ValueError(f"comparisons file {path} does not exist")
    text = path.read_bytes()
    data = yaml.safe_load(text) or {}
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, dict):
        raise ValueError(f"{path}: needs a mapping 'rows' with keys among {', '.join(ROWS)}")
    seed_rule = SeedRule(**section(data, "seeds", SEED_RULE, path))
    budget_rule = BudgetRule(**section(data, "budgets", BUDGET_RULE, path))
    steady = section(data, "trend", TREND_RULE, path)["steady"]
    check_rules(seed_rule, budget_rule, path)
    comparisons = [parse(row, entry, path, seed_rule) for row, entries in rows.items()
                   for entry in _entries(row, entries, path)]
    ids = [c.id for c in comparisons]
    if len(set(ids)) < len(ids):
        raise ValueError(f"{path}: comparison ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    content = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
    return Declaration(tuple(comparisons), hashlib.sha256(content).hexdigest(), path, seed_rule, budget_rule, steady)


def section(data: dict, name: str, keys: dict, path: Path) -> dict:
    """The mapping ``name`` of the file with exactly ``keys``, each of its type (an int is a float too)."""
    found = data.get(name)
    if not isinstance(found, dict) or set(found) != set(keys):
        raise ValueError(f"{path}: {name} needs exactly the keys {', '.join(keys)}; found "
                         f"{sorted(found) if isinstance(found, dict) else found!r}")
    for key, kind in keys.items():
        accepted = (int, float) if kind is float else kind
        if not isinstance(found[key], accepted) or isinstance(found[key], bool):
            raise ValueError(f"{path}: {name}.{key} = {found[key]!r} has the wrong type; expected {_kind_name(kind)}")
    return found


def check_rules(seeds: SeedRule, budgets: BudgetRule, path: Path) -> None:
    """One line naming the first rule out of range."""
    problems = [("seeds.alpha", seeds.alpha, 0 < seeds.alpha < 0.5, "in (0, 0.5)"),
                ("seeds.power", seeds.power, 0.5 <= seeds.power < 1, "in [0.5, 1)"),
                ("seeds.min", seeds.min, 2 <= seeds.min <= seeds.max, "at least 2 and at most seeds.max"),
                ("seeds.first_seed", seeds.first_seed, seeds.first_seed >= 0, "at least 0"),
                ("seeds.looks", seeds.looks, seeds.looks in LOOK_RULES, f"one of {', '.join(LOOK_RULES)}"),
                ("budgets.checkpoints", budgets.checkpoints, budgets.checkpoints >= 1, "at least 1"),
                ("budgets.spacing", budgets.spacing, budgets.spacing > 1, "above 1"),
                ("budgets.decay_fraction", budgets.decay_fraction, 0 < budgets.decay_fraction < 1, "in (0, 1)"),
                ("budgets.scale", budgets.scale, set(budgets.scale) <= set(PRESETS) and all(
                    isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in budgets.scale.values()),
                 f"a mapping of presets ({', '.join(PRESETS)}) to integers >= 1")]
    for key, value, fine, allowed in problems:
        if not fine:
            raise ValueError(f"{path}: {key} = {value!r}; allowed: {allowed}")


def _entries(row: str, entries, path: Path) -> list:
    if row not in ROWS:
        raise ValueError(f"{path}: unknown row {row!r}; allowed: {', '.join(ROWS)}")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: row {row!r} must be a list of comparisons")
    return entries


def parse(row: str, entry, path: Path, seed_rule: SeedRule | None = None) -> Comparison:
    """One entry of ``row``, every key checked (type, known task/metric/encodings, sensible numbers)."""
    where = f"{path}: row {row!r}, comparison {entry.get('id', '?') if isinstance(entry, dict) else entry!r}"
    if not isinstance(entry, dict) or not set(FIELDS) <= set(entry) <= set(FIELDS) | set(OPTIONAL):
        keys = sorted(entry) if isinstance(entry, dict) else []
        raise ValueError(f"{where}: keys {keys}; required exactly: {', '.join(FIELDS)}; "
                         f"optional: {', '.join(OPTIONAL)}")
    for key, kind in {**FIELDS, **OPTIONAL}.items():
        if key in entry and (not isinstance(entry[key], kind) or isinstance(entry[key], bool)):
            raise ValueError(f"{where}: {key} = {entry[key]!r} has the wrong type; expected {_kind_name(kind)}")
    for key in (*AXES, "steps"):
        if entry.get(key, 1) <= 0:
            raise ValueError(f"{where}: {key} must be positive, got {entry[key]}")
    if entry["task"] not in tasks.names():
        raise ValueError(f"{where}: unknown task {entry['task']!r}; allowed: {', '.join(tasks.names())}")
    task = tasks.get(entry["task"])
    if entry["metric"] not in task.metrics:
        raise ValueError(f"{where}: task {task.name} has no metric {entry['metric']!r}; allowed: "
                         f"{', '.join(task.metrics)}")
    for key in ("added", "comparator"):
        if entry[key] not in encodings.names():
            allowed = ", ".join(encodings.names())
            raise ValueError(f"{where}: {key} {entry[key]!r} is not an encoding; allowed: {allowed}")
    if encodings.traits(entry["added"]).combine != "add":
        added = [n for n in encodings.names() if encodings.traits(n).combine == "add"]
        raise ValueError(f"{where}: added {entry['added']!r} does not add P to E; allowed: {', '.join(added)}")
    if (entry["added"], entry.get("added_d_model")) == (entry["comparator"], entry.get("comparator_d_model")):
        raise ValueError(f"{where}: added and comparator are both {entry['added']!r} at one width")
    if entry["length_ratio"] not in task.eval_factors:
        raise ValueError(f"{where}: length_ratio {entry['length_ratio']} is not one of {task.name}'s evaluation "
                         f"factors; allowed: {', '.join(f'{f:g}' for f in task.eval_factors)}")
    for key in ("margin", "reference_spread"):
        if entry[key] <= 0:
            raise ValueError(f"{where}: {key} must be positive, got {entry[key]}")
    if "withdrawn" in entry and not entry["withdrawn"].strip():
        raise ValueError(f"{where}: withdrawn must say why (e.g. 'axis-blind: …'), got {entry['withdrawn']!r}")
    unknown = [p for p in entry["presets"] if p not in PRESETS]
    if unknown or not entry["presets"]:
        raise ValueError(f"{where}: presets {entry['presets']}; allowed: a non-empty list of {', '.join(PRESETS)}")
    seeds = ({} if seed_rule is None else
             {"n_seeds": seed_rule.n(entry["reference_spread"], entry["margin"]), "first_seed": seed_rule.first_seed})
    return Comparison(entry["id"], row, entry["task"], entry["metric"], float(entry["length_ratio"]), entry["added"],
                      entry["comparator"], float(entry["margin"]), float(entry["reference_spread"]),
                      tuple(entry["presets"]), *(entry.get(key) for key in OPTIONAL), **seeds)


ENTRY_START = re.compile(r"^\s*- \{id: ([A-Za-z0-9_.-]+),")
UNCOMMITTED = "0" * 40  # git blame's name for lines not yet committed


def declaring_commits(path: Path = PATH) -> dict[str, str]:
    """Comparison id -> the commit of the newest change to its entry in ``path`` (``git blame``, newest by
    the file's history, ``git log``): when its declaration took its present form. :data:`UNCOMMITTED` for
    an entry with uncommitted changes; ``{}`` outside a git checkout (a tarball), where pre-registration
    cannot be checked."""
    try:
        blame, history = (subprocess.run(["git", *command, path.name], cwd=path.parent, capture_output=True,
                                         text=True, check=True).stdout
                          for command in (("blame", "--porcelain"), ("log", "--format=%H", "--")))
    except (OSError, subprocess.CalledProcessError):
        return {}
    age = {commit: rank for rank, commit in enumerate(history.split())}  # 0: the newest
    age[UNCOMMITTED] = -1
    line_commit, commit = [], None
    for line in blame.splitlines():
        head = line.split(" ")
        if line.startswith("\t"):
            line_commit.append(commit)
        elif len(head[0]) == 40 and len(head) >= 3:
            commit = head[0]
    found, current = {}, None
    for number, text in enumerate(path.read_text().splitlines()):
        start = ENTRY_START.match(text)
        current = start.group(1) if start else current
        if current is not None and number < len(line_commit):
            candidate, newest = line_commit[number], found.get(current)
            if newest is None or age.get(candidate, len(age)) < age.get(newest, len(age)):
                found[current] = candidate
        if text.rstrip().endswith("}"):
            current = None
    return found


def _kind_name(kind) -> str:
    return " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
