"""What the Snakemake workflow asks of posbench: a validated config and the cells it fans out to.

The Snakefile stays thin: it calls :func:`posbench.workflow_config.validate_config` once (every bad config
stops there, with one line naming the key and what is allowed, before any job runs) and asks for the manifest
of every job, :func:`batch_manifests`: a job runs a batch of cells (:mod:`posbench.batch`) and writes one
record per cell (the templates of :mod:`posbench.workflow_paths`; its ``--out`` from
:func:`posbench.workflow_paths.record_template`) and the manifest that lists them.

What is trained (:func:`train_jobs`): the descriptive arms of ``train.tasks`` at ``train.seeds``, and the
arms of the declared comparisons ``train.comparisons`` names (``posbench/comparisons.yaml``) at the
seeds, budget and annealed checkpoints each comparison declares (its first look's seeds; its second
look's too at each size where the judge step of the first look asks for them, :func:`second_looks_wanted`),
and at each other of ``train.lr_factors`` × the arm's learning rate at ``train.seeds`` (a learning-rate
check, which never decides); an arm asked for twice trains the union of its seeds in one job, so every
(task, encoding, size, lr, budget, seed) is one record.

Where a record lies (``TRAIN_RECORD``, ``PROBE_RECORD`` of :mod:`posbench.workflow_paths`) names
everything that tells it from another of the same machine: a train record's device (and its dtype when
not float32), its task, size and encoding, its training length and width where a sweep or comparison
moved them, its training steps (always: a budget is part of a cell, and a folder implied by a task's
default would change its meaning when the default does; ``steps800-1600-3200/`` for a run with annealed
checkpoints at those budgets), and its learning rate where not the task's.
"""

from __future__ import annotations

import functools
import hashlib
import re
import socket
from collections.abc import Collection
from itertools import product
from pathlib import Path

from posbench.comparisons import ArmSpec
from posbench.devices import CPU, FLOAT32, present
from posbench.workflow_paths import AXES_DIR, LIST_SEPARATOR, PROBE_BATCH, PROFILE_BATCH, TRAIN_BATCH, joined

ROOT = Path(__file__).resolve().parent.parent  # the checkout: Snakefile, config.yaml, workflow/
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config the workflow refuses; the message is one line naming the key and what is allowed."""


def tuned_in_run(config: dict) -> list[str]:
    """The sizes whose rates this run tunes before training them: those whose ``train.lr_table`` is the tune
    step's own table in the results folder (``{results}/tuning/lr-{size}.csv``, the checkpoint ``lr_table``),
    so that a preset tunes and trains in one command."""
    return [size for size in config["train"]["sizes"]
            if lr_table_path(config, size) == own_lr_table(config["results"], size)]


def awaits_tuning(config: dict) -> bool:
    """Whether a table of rates this run tunes is not made yet (its jobs are known once it is)."""
    return any(not Path(lr_table_path(config, size)).is_file() for size in tuned_in_run(config))


def own_lr_table(results: str, size: str) -> str:
    """The tune step's table of rates at ``size`` (rule lr_table's output)."""
    return f"{results}/tuning/lr-{size}.csv"


def lr_table_path(config: dict, size: str) -> str | None:
    """``train.lr_table`` for ``size``: with its ``{size}`` filled in (a table per size, as the scale preset's
    parts tune them), else the one table for every size; ``None`` without one."""
    table = config["train"]["lr_table"]
    return None if table is None else table.replace("{size}", size)


# ----- devices and machines ---------------------------------------------------------------------

def resolve_devices(devices) -> tuple[list[str], list[str]]:
    """``auto`` -> the devices this machine has, plus why each other one was dropped; a list is kept."""
    return (list(devices), []) if devices != "auto" else present()


def profile_max_len(config: dict) -> int:
    """Rows of a bounded table for the whole profile sweep: ``profile.max_len``, else the longest length
    (one more when decode cells generate a token after it)."""
    profile = config["profile"]
    return profile["max_len"] or max(profile["seq_lens"], default=1) + ("decode" in profile["modes"])


def eval_scaling_argument(config: dict, encoding: str) -> str:
    """``--eval-scaling …`` for a train job whose encoding has rotary frequencies to scale, else ``""``."""
    from posbench.eval_scaling import check_eval_scaling

    labels = config["train"]["eval_scaling"]
    try:
        check_eval_scaling(encoding, labels)
    except ValueError:  # nothing to scale
        return ""
    return "--eval-scaling " + " ".join(labels) if labels else ""


def machine_label(config: dict) -> str:
    return socket.gethostname().split(".")[0] if config["machine"] == "auto" else config["machine"]


# ----- cells and their record paths -------------------------------------------------------------

def profile_cells(config: dict, devices: list[str] | None = None) -> list[dict]:
    p = config["profile"]
    devices = devices if devices is not None else [CPU]
    return [dict(device=d, mode=m, size=s, encoding=e, seq_len=L)
            for d, m, s, e, L in product(devices, p["modes"], p["sizes"], p["encodings"], p["seq_lens"])]


def profile_jobs(config: dict, devices: list[str] | None = None) -> list[dict]:
    """One entry per profile job: ``device, mode, size, seq_len`` and ``encodings``, the key
    (:func:`encodings_key`) of every configured encoding — a job measures them all at one length and
    times them in alternation, so their latencies are paired."""
    names = config["profile"]["encodings"]
    jobs = {(c["device"], c["mode"], c["size"], c["seq_len"]): None for c in profile_cells(config, devices)}
    return [dict(device=d, mode=m, size=s, seq_len=L, encodings=encodings_key(names)) for d, m, s, L in jobs]


def encodings_key(names: list[str]) -> str:
    """A profile job's encodings as its manifest's name holds them: their count and a digest of the
    list (``E8-3f2a09c1``) — short whatever the list's length, and new when an encoding is added."""
    return f"E{len(names)}-{hashlib.sha256(' '.join(names).encode()).hexdigest()[:8]}"


def profile_job_encodings(config: dict, key: str) -> list[str]:
    """The encodings a profile job's manifest name (:func:`encodings_key`) stands for: the configured ones."""
    names = config["profile"]["encodings"]
    if encodings_key(names) != key:
        raise ConfigError(f"profile job {key!r}: not the key of profile.encodings ({encodings_key(names)}); "
                          "a manifest of another config was asked for")
    return names


def train_jobs(config: dict, second_looks: tuple[tuple[str, str], ...] = ()) -> list[dict]:
    """One entry per train job: ``device, dtype_dir, task, encoding, size, lr, lr_dir, train_length,
    d_model, axes_dir, steps, seeds`` (seeds sorted; ``steps`` as the record path names it: ``500``, or
    ``125-250-500`` with annealed checkpoints).

    The descriptive arms (``train.tasks``) train at their rate (:func:`learning_rate`), ``train.seeds`` and
    ``train.steps`` (or the task's), and so do the sweeps' (``train.sweeps``), at each of their training
    lengths × widths, and the published shapes' arms (``train.shapes``), a tuned shape's at each of
    ``train.lr_factors``, a confirm stage's at its fresh seeds (:func:`shape_runs`); the comparisons' arms
    (:func:`comparison_runs`) at their declared seeds and budgets, a second look's seeds too at each
    (comparison, size) in ``second_looks``.
    An arm asked for twice at one rate, length, width and budget is one job with the union of the seeds;
    a length or width equal to the task's or size's is that arm's plain cell (``None``, no folder). Every
    job trains on ``train.device`` in ``train.dtype``."""
    from posbench import tasks

    t = config["train"]
    plain = [(ArmSpec(task, e), 1, t["seeds"], None) for task, names in t["tasks"].items() for e in names]
    plain += [(ArmSpec(sweep["task"], e, length, width), 1, t["seeds"], None) for sweep in t["sweeps"]
              for e in sweep["encodings"] for length in sweep.get("train_lengths", [None])
              for width in sweep.get("d_models", [None])]
    plain += [(spec, f, seeds, None) for spec, f, seeds in shape_runs(config)]
    runs = list(product(plain, t["sizes"]))
    runs += [(run, size) for size in t["sizes"]
             for run in comparison_runs(config, {c for c, at in second_looks if at == size})]
    jobs: dict[tuple, set] = {}
    for (spec, factor, seeds, steps), size in runs:
        steps = steps or str(t["steps"] or tasks.get(spec.task).steps)
        arm = (spec.task, spec.encoding, size, *spec.resolved(size), int(steps.split(LIST_SEPARATOR)[-1]))
        base = learning_rate(config, spec.task, spec.encoding, arm)
        lr = base if factor == 1 else float(f"{base * factor:.4g}")
        jobs.setdefault((spec.task, spec.encoding, size, lr, *plain_axes(spec, size), steps), set()).update(seeds)
    run = dict(device=t["device"], dtype_dir=dtype_dir(t["dtype"]))
    return [dict(**run, task=task, encoding=e, size=size, lr=lr, lr_dir=lr_dir(task, lr), train_length=length,
                 d_model=width, axes_dir=axes_dir(length, width), steps=steps, seeds=sorted(seeds))
            for (task, e, size, lr, length, width, steps), seeds in jobs.items()]


def comparison_runs(config: dict, second_looks: Collection[str] = ()) -> list[tuple[ArmSpec, float, list, str]]:
    """(arm, rate factor, seeds, steps as a path names it) for each arm of the comparisons ``train.comparisons``
    names, withdrawn ones aside: at factor 1 its comparison's first look's seeds (and the second look's for a
    comparison in ``second_looks``), at each other of ``train.lr_factors`` the pilot seeds ``train.seeds``;
    always at the comparison's budget with its declared annealed checkpoints."""
    from posbench import comparisons

    chosen = config["train"]["comparisons"]
    if chosen == "none":
        return []
    declared = comparisons.load()
    runs = []
    for c in declared.in_preset(chosen):
        if c.withdrawn:  # it decides nothing: its arms train only where another comparison needs them
            continue
        steps = joined(declared.budget_rule.budgets(c.budget))
        seeds = list(c.seeds(2 if c.id in second_looks else 1))
        runs += [(spec, factor, seeds if factor == 1 else config["train"]["seeds"], steps)
                 for spec in c.arms for factor in config["train"]["lr_factors"]]
    return runs


def tuned_comparisons(config: dict, declared: bool = False) -> list:
    """The comparisons ``rule lr_table`` tunes: those that decide in ``train.comparisons`` (none: none), as ids, or
    as :class:`posbench.comparisons.Comparison` at the preset's budgets with ``declared``."""
    from posbench import comparisons

    chosen = config["train"]["comparisons"]
    found = [] if chosen == "none" else [c for c in comparisons.load().in_preset(chosen) if not c.withdrawn]
    return found if declared else [c.id for c in found]


def longest_first(length: int, steps: int, seeds: int) -> int:
    """A job's scheduling priority: the thousands of positions it trains on (its training length × its last
    budget × its seeds; every task draws batches of one size). Snakemake starts the highest first, so the last
    job before a gate (a size's rate table, a look) is a short one and no slot idles for hours beside it."""
    return length * steps * seeds // 1000


def train_priority(task: str, size: str, axes_folders: str, steps: str, seeds: str) -> int:
    """:func:`longest_first` of a train job, from its record path's wildcards."""
    from posbench.tasks import default_axes

    length = folder_axes(axes_folders)[0] or default_axes(task, size)[0]
    return longest_first(int(length), int(steps.split(LIST_SEPARATOR)[-1]), len(seeds.split(LIST_SEPARATOR)))


def tune_priority(comparison: str, size: str) -> int:
    """:func:`longest_first` of a tune job: both arms at their comparison's budget on the pilot seeds, at one
    rate (a grid holds 3 to 5; how many is known only as it runs)."""
    from posbench import comparisons
    from posbench.tune import SEEDS

    declared = comparisons.load()
    tuned = declared.by_id[comparison]
    steps = declared.budget_rule.budgets(tuned.budget)[-1]
    return sum(longest_first(spec.resolved(size)[0], steps, len(SEEDS)) for spec in tuned.arms)


def second_looks_wanted(verdicts: str | Path) -> tuple[tuple[str, str], ...]:
    """(comparison, size) of each deciding comparison whose first look at that size (the judge step's
    ``verdicts.csv`` at ``verdicts``) asks for a second: unclear or unstable there (``second_look_wanted``).
    A size's look is its own: a comparison unclear at tiny trains no second look at another size."""
    import pandas as pd

    frame = pd.read_csv(verdicts)
    if frame.empty or "second_look_wanted" not in frame.columns:
        return ()
    wanted = frame[frame["second_look_wanted"].astype(bool) & frame["decides"].astype(bool)]
    return tuple(sorted(set(zip(wanted["comparison"], wanted["size"]))))


def budget_arguments(steps: str) -> str:
    """``--steps N`` for a plain run's folder (``steps500``); ``--checkpoints … --decay-fraction f`` for one
    with annealed checkpoints (``steps125-250-500``), at the declared decay fraction."""
    from posbench import comparisons

    budgets = steps.split(LIST_SEPARATOR)
    if len(budgets) == 1:
        return f"--steps {steps}"
    return f"--checkpoints {' '.join(budgets)} --decay-fraction {comparisons.load().budget_rule.decay_fraction!r}"


def plain_axes(spec: ArmSpec, size: str) -> tuple[int | None, int | None]:
    """An arm's training length and width, ``None`` where they are the task's and the size's."""
    from posbench.tasks import default_axes

    return tuple(None if own == default else own for own, default in zip(spec.resolved(size),
                                                                           default_axes(spec.task, size)))


def axes_dir(train_length: int | None, d_model: int | None) -> str:
    """The record path's folders for a training length and a width away from the defaults
    (``L256/``, ``d48/``, ``L256/d48/``); nothing at the defaults, so those records keep their paths."""
    return ("" if train_length is None else f"L{train_length}/") + ("" if d_model is None else f"d{d_model}/")


def folder_axes(folders: str) -> tuple[str | None, str | None]:
    """The training length and width :func:`axes_dir`'s ``folders`` name, ``None`` for each at its default."""
    return re.fullmatch(AXES_DIR, folders).groups()


def axes_arguments(folders: str) -> str:
    """``--train-length … --d-model …`` for a train job in :func:`axes_dir`'s ``folders``; nothing at the defaults."""
    length, width = folder_axes(folders)
    return " ".join(([f"--train-length {length}"] if length else []) + ([f"--d-model {width}"] if width else []))


def dtype_dir(dtype: str) -> str:
    """The record path's dtype folder, under the device's: none at float32, ``bfloat16/`` at another."""
    return "" if dtype == FLOAT32 else f"{dtype}/"


def dtype_of(dtype_dir: str) -> str:
    """The dtype of a job in :func:`dtype_dir`'s folder (``--dtype``)."""
    return dtype_dir.removesuffix("/") or FLOAT32


def train_cells(config: dict) -> list[dict]:
    """One cell (a record) per seed of each of :func:`train_jobs`."""
    return [{**{k: v for k, v in job.items() if k != "seeds"}, "seed": seed}
            for job in train_jobs(config) for seed in job["seeds"]]


def shape_runs(config: dict) -> list[tuple[ArmSpec, float, tuple[int, ...]]]:
    """``(arm, rate factor, seeds)`` for the published shapes of ``train.shapes`` (posbench/shapes.yaml;
    none: nothing): their pilots at ``train.seeds`` (tuned ones at each of ``train.lr_factors``), their
    confirm stages at fresh seeds (:meth:`posbench.shapes.DeclaredShapes.runs`)."""
    from posbench import shapes

    t = config["train"]
    return [] if t["shapes"] == "none" else shapes.load().runs(t["shapes"], t["seeds"], t["lr_factors"])


def learning_rate(config: dict, task: str, encoding: str, arm: tuple | None = None) -> float:
    """The rate ``train.lr_table`` chose for ``arm`` (task, encoding, size, training length, width, steps: an
    ``lr.csv`` of :mod:`posbench.tune`) where it has one; else, with ``train.descriptive_lr: tuned``, the rate it
    chose for the added arm tuned at the same task, size, length, width and steps; else ``train.lr``'s rate for
    ``task`` (or for ``encoding`` on it); else the task's default."""
    from posbench import tasks

    table = lr_table_path(config, arm[2]) if arm else None
    tuned = tuned_rates(table).get(arm) if table else None
    if tuned is None and table and config["train"]["descriptive_lr"] == "tuned":
        tuned = added_rates(table).get((arm[0], *arm[2:]))
    if tuned is not None:
        return tuned
    rate = config["train"]["lr"].get(task)
    if isinstance(rate, dict):
        rate = rate.get(encoding)
    return float(rate) if rate is not None else tasks.get(task).lr


@functools.cache
def added_rates(path: str) -> dict[tuple, float]:
    """:func:`posbench.tune.added_rates` of ``path``, read once (:func:`tuned_rates` has checked it)."""
    from posbench import tune

    return tune.added_rates(path)


@functools.cache
def tuned_rates(path: str) -> dict[tuple, float]:
    """:func:`posbench.tune.chosen_rates` of ``path``, read once; a missing or malformed table is a ConfigError."""
    from posbench import tune

    try:
        return tune.chosen_rates(path)
    except ValueError as error:
        raise ConfigError(f"config key 'train.lr_table': {error}") from None


def lr_dir(task: str, lr: float) -> str:
    """The record path's learning-rate folder: none at the task's default rate (so those records keep
    the paths they had before rates were configurable), ``lr0.001/`` at any other."""
    from posbench import tasks

    return "" if lr == tasks.get(task).lr else f"lr{lr!r}/"  # repr: --lr reads back the same float


def lr_argument(lr_dir: str) -> str:
    """``--lr …`` for a train job in a rate's folder; nothing at the task's default (the record's config
    holds the rate either way, so its hash is the same)."""
    return f"--lr {lr_dir.removeprefix('lr').removesuffix('/')}" if lr_dir else ""


def probe_cells(config: dict) -> list[dict]:
    """Random embeddings over ``vocabs``, made on the CPU; trained ones over lm_prose's vocabulary
    (``tokens`` names which), whose language model trains on ``train.device`` in ``train.dtype``."""
    p, t = config["probe"], config["train"]
    on_cpu, as_trained = dict(device=CPU, dtype_dir=""), dict(device=t["device"], dtype_dir=dtype_dir(t["dtype"]))
    random = [dict(**on_cpu, embedding="random", tokens=f"V{v}", encoding=e, seq_len=L, d_model=d, seed=s)
              for e, d, v, L, s in product(p["encodings"], p["random_widths"], p["vocabs"], p["seq_lens"], p["seeds"])]
    trained = [dict(**as_trained, embedding="trained", tokens="lm_prose", encoding=e, seq_len=L, d_model=d, seed=s)
               for e, d, L, s in product(p["encodings"], p["trained_widths"], p["seq_lens"], p["seeds"])]
    return random + trained


def batch_manifests(config: dict, devices: list[str], second_looks: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """The manifest of every job of the sweep (profile, train, probe): what the aggregation waits for;
    with the second looks of the (comparison, size) pairs ``second_looks`` names."""
    q = config["probe"]
    profile = profile_jobs(config, devices)
    train = [{**job, "seeds": joined(job["seeds"])} for job in train_jobs(config, second_looks)]
    probe = [{**cell, "seeds": joined(q["seeds"]), "d_models": joined(probe_widths(config, cell["embedding"]))}
             for cell in probe_cells(config)]
    return (cell_paths(PROFILE_BATCH, config, profile) + cell_paths(TRAIN_BATCH, config, train)
            + cell_paths(PROBE_BATCH, config, probe))


def probe_widths(config: dict, embedding: str) -> list[int]:
    return config["probe"]["random_widths" if embedding == "random" else "trained_widths"]


def cell_paths(template: str, config: dict, cells: list[dict]) -> list[str]:
    """``template`` for each cell, in order, each path once (a batch template names several cells once)."""
    base = dict(results=config["results"], machine=machine_label(config))
    return list(dict.fromkeys(template.format(**base, **cell) for cell in cells))
