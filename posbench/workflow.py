"""What the Snakemake workflow asks of posbench: a validated config and the cells it fans out to.

The Snakefile stays thin: it calls :func:`validate_config` once (every bad config stops there,
with one line naming the key and what is allowed, before any job runs) and asks for the manifest of
every job, :func:`batch_manifests`: a job runs a batch of cells (:mod:`posbench.batch`) and writes one
record per cell (the templates of :mod:`posbench.workflow_paths`; its ``--out`` from
:func:`posbench.workflow_paths.record_template`) and the manifest that lists them.

What is trained (:func:`train_jobs`): the descriptive arms of ``train.tasks`` at ``train.seeds``, and the
arms of the declared comparisons ``train.comparisons`` names (``posbench/comparisons.yaml``) at the
seeds, budget and annealed checkpoints each comparison declares (its first look's seeds; its second
look's too once the judge step of the first look asks for them, :func:`second_look_ids`), and at each
other of ``train.lr_factors`` × the arm's learning rate at ``train.seeds`` (a learning-rate check, which
never decides); an arm asked for twice trains the union of its seeds in one job, so every (task,
encoding, size, lr, budget, seed) is one record.

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
import sys
from itertools import product
from pathlib import Path

import jsonschema
import yaml

from posbench.comparisons import ArmSpec
from posbench.devices import ANY_DEVICE, CPU, FLOAT32, TRAINING_DEVICES, present
from posbench.workflow_paths import AXES_DIR, LIST_SEPARATOR, PROBE_BATCH, PROFILE_BATCH, TRAIN_BATCH, joined

ROOT = Path(__file__).resolve().parent.parent  # the checkout: Snakefile, config.yaml, workflow/
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config the workflow refuses; the message is one line naming the key and what is allowed."""


def validate_config(config: dict, schema_path: Path = SCHEMA) -> dict:
    """Read a preset's ``include``, fill defaults, check types against the schema and names against
    posbench's registries."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    config = _size_alias(with_included(config))
    error = jsonschema.exceptions.best_match(_DefaultFillingValidator(schema).iter_errors(config))
    if error is not None:
        raise ConfigError(_one_line(error))
    _check_names(config)
    _check_memory(config)
    return config


def with_included(config: dict) -> dict:
    """``config`` over the file its ``include`` names (a path from the checkout, e.g. ``workflow/grids.yaml``,
    the grids the full and cluster presets share): mappings merge key by key, a list of the preset's
    extends the file's, any other value of the preset's replaces the file's. One level: the file
    includes nothing. Without ``include``, ``config`` as it is."""
    config = dict(config)
    name = config.pop("include", None)
    if name is None:
        return config
    path = ROOT / name if isinstance(name, str) else None
    if path is None or not path.is_file():
        raise ConfigError(f"config key 'include': {name!r} is not a file; allowed: a YAML file's path from the "
                          f"checkout {ROOT}, e.g. workflow/grids.yaml")
    included = yaml.safe_load(path.read_text()) or {}
    if not isinstance(included, dict) or "include" in included:
        raise ConfigError(f"config key 'include': {name} must hold a mapping of config keys and include nothing")
    return _merged(included, config)


def _merged(base, over):
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{key: _merged(base[key], value) if key in base else value for key, value in over.items()}}
    if isinstance(base, list) and isinstance(over, list):
        return base + over
    return over


def stop_on_unreadable_configfile(argv: list[str] | None = None) -> None:
    """Exit with one line when a ``--configfile`` of this ``snakemake`` command line cannot be read as a config.

    Snakemake reads every ``--configfile`` before it parses any Snakefile, and a missing or unreadable one
    ends in its traceback (9.27: ``snakemake.common.configfile._load_configfile`` opens the file outside the
    ``try`` whose ``except FileNotFoundError`` would turn it into one line). The one file of this workflow
    Snakemake reads before that is its workflow profile, ``profiles/default/config.yaml``, rendered with YTE:
    its ``__definitions__`` call this. The arguments are parsed by Snakemake's own parser, so every spelling
    it accepts (``--configfiles``, ``--configfile=…``, several files) is read as it reads it."""
    from snakemake.cli import get_argument_parser

    args, _ = get_argument_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    problem = configfile_problem(args.configfile or [])
    if problem:
        sys.exit(f"posbench: {problem}")


def configfile_problem(paths: list) -> str | None:
    """Why one of ``paths`` is not a config file Snakemake could load (a YAML or JSON mapping), or ``None``."""
    for path in paths:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return f"--configfile {path}: no such file"
        except (OSError, UnicodeDecodeError) as error:
            return f"--configfile {path}: cannot be read ({getattr(error, 'strerror', None) or error})"
        except yaml.YAMLError as error:
            where = getattr(error, "problem_mark", None)
            line = f" at line {where.line + 1}" if where else ""
            return f"--configfile {path}: not YAML or JSON{line} ({getattr(error, 'problem', None) or error})"
        if not isinstance(loaded, dict):
            return (f"--configfile {path}: expected a mapping of config keys (profile:, train:, …), "
                    f"got {type(loaded).__name__}")
    return None


def _size_alias(config: dict) -> dict:
    """``train.size: X`` (deprecated) is read as ``train.sizes: [X]``."""
    train = config.get("train")
    if isinstance(train, dict) and "size" in train:
        if "sizes" in train:
            raise ConfigError("config key 'train.size': replaced by train.sizes; give train.sizes only")
        train = dict(train)
        train["sizes"] = [train.pop("size")]
        config["train"] = train
    return config


def _fill_defaults(validator_class):
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = _copy(sub["default"])
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


def _copy(value):
    return yaml.safe_load(yaml.safe_dump(value))


_DefaultFillingValidator = _fill_defaults(jsonschema.Draft202012Validator)


def _one_line(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = ", ".join(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        where = f" in '{key}'" if key else ""
        return f"unknown config key '{unknown[0]}'{where}; allowed: {allowed}"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"config key '{key}': expected {expected}, got {error.instance!r}"
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"config key '{key}': {error.instance!r} is not allowed; allowed: {allowed}"
    if error.validator == "oneOf" and key == "devices":
        return f"config key 'devices': expected auto or a list of {ANY_DEVICE.allowed}, got {error.instance!r}"
    if error.validator == "pattern" and key in ("machine", "preset"):
        what = "(it names a folder), or auto" if key == "machine" else "(a name, e.g. default, full, cluster, smoke)"
        return (f"config key '{key}': {error.instance!r} is not allowed; allowed: letters, digits, '.', '_' "
                f"and '-' {what}")
    if error.validator == "pattern" and key == "gpu_model":
        return (f"config key 'gpu_model': {error.instance!r} is not allowed; allowed: one SLURM node feature "
                f"(letters, digits, '.', '_', '-', e.g. h100), or null for any GPU")
    if error.validator == "pattern" and key.startswith("train.eval_scaling"):
        return (f"config key '{key}': {error.instance!r} is not allowed; allowed: TYPE:FACTOR with TYPE one of "
                f"linear, dynamic, yarn, llama3 (e.g. yarn:4)")
    if error.validator == "uniqueItems":
        repeated = sorted({str(v) for v in error.instance if error.instance.count(v) > 1})
        return f"config key '{key}': {', '.join(repeated)} listed more than once; list each value once"
    if error.validator == "minItems" and key.startswith("train.tasks."):
        return f"config key '{key}': no encodings listed; list at least one, or remove the task"
    if error.validator == "oneOf" and key.startswith("train.lr."):
        return (f"config key '{key}': expected a learning rate > 0 or a mapping encoding -> learning rate > 0, "
                f"got {error.instance!r}")
    if error.validator == "exclusiveMinimum" and key.startswith("train.lr"):
        return f"config key '{key}': expected a number > 0, got {error.instance!r}"
    if error.validator == "minProperties" and key.startswith("train.lr."):
        return f"config key '{key}': no encodings listed; give a rate, or remove the task"
    if error.validator == "pattern" and key == "train.device":
        return f"config key 'train.device': {error.instance!r} is not allowed; allowed: {TRAINING_DEVICES.allowed}"
    if error.validator == "pattern" and key.startswith("devices"):
        return f"config key '{key}': unknown device {error.instance!r}; allowed: {ANY_DEVICE.allowed}"
    return f"config key '{key}': {error.message}"


def _key(path) -> str:
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key


def _check_names(config: dict) -> None:
    from posbench import SIZES, comparisons, encodings, tasks

    profile, train = config["profile"], config["train"]
    _check_members("train.sizes", train["sizes"], SIZES)
    _check_lr_table(config)
    previous = config["previous_reference"]
    if previous is not None:
        folder = Path(previous) if Path(previous).is_absolute() else ROOT / previous  # a committed reference
        if not folder.is_dir():
            raise ConfigError(f"config key 'previous_reference': {previous} is not a folder of the checkout; allowed: "
                              "a previous run's tables folder (verdicts.csv, meta.json), or null")
        config["previous_reference"] = str(folder)
    _check_members("profile.encodings", profile["encodings"], encodings.names())
    _check_members("profile.sizes", profile["sizes"], SIZES)
    _check_members("train.tasks", list(train["tasks"]), tasks.names())
    for task, names in train["tasks"].items():
        _check_members(f"train.tasks.{task}", names, encodings.names())
    _check_sweeps(train)
    _check_members("train.lr", list(train["lr"]), tasks.names())
    for task, rates in train["lr"].items():
        if isinstance(rates, dict):
            _check_members(f"train.lr.{task}", list(rates), encodings.names())
    if train["shapes"] not in ("all", "none"):
        from posbench import shapes

        _check_members("train.shapes", train["shapes"], shapes.load().parts)
    if train["comparisons"] == train["shapes"] == "none" and train["lr_factors"] != [1]:
        raise ConfigError(f"config key 'train.lr_factors': {train['lr_factors']} multiplies the rates of the "
                          "comparisons' arms (and tuned shapes' arms), and train.comparisons and train.shapes are "
                          "none; set one of them, or lr_factors to [1]")
    _check_members("train.data", list(train["data"]), tasks.names())
    for i, length in enumerate(profile["seq_lens"]):
        if length <= 0:
            raise ConfigError(f"config key 'profile.seq_lens[{i}]': {length} is not a positive length")
    first_deciding = comparisons.load().seed_rule.first_seed
    for i, seed in enumerate(train["seeds"]):
        if not 0 <= seed < first_deciding:
            raise ConfigError(f"config key 'train.seeds[{i}]': {seed} is not a pilot seed; allowed: 0 to "
                              f"{first_deciding - 1} (from {first_deciding} on the comparisons' deciding seeds, "
                              "posbench/comparisons.yaml)")
    if train["steps"] is not None and train["steps"] <= 0:
        raise ConfigError(f"config key 'train.steps': {train['steps']} is not a positive step count")
    for task, path in train["data"].items():
        if not Path(path).is_file():
            raise ConfigError(f"config key 'train.data.{task}': file {path!r} does not exist")
    bounded = [e for e in profile["encodings"] if encodings.traits(e).bounded]
    longest = max(profile["seq_lens"], default=0) + ("decode" in profile["modes"])  # decode: one token more
    if bounded and profile["max_len"] is not None and profile["max_len"] < longest:
        raise ConfigError(f"config key 'profile.max_len': {bounded[0]}'s table of {profile['max_len']} rows is "
                          f"shorter than profile.seq_lens up to {longest}; set it >= {longest} or null")
    from posbench.probe import probe_encodings

    _check_members("probe.encodings", config["probe"]["encodings"], probe_encodings())
    if not profile_cells(config) and not (awaits_tuning(config) or train_cells(config)) and not probe_cells(config):
        raise ConfigError("empty sweep: profile.encodings × sizes × seq_lens × modes, train.tasks, "
                          "train.comparisons and probe.encodings × widths select no cell; list at least one")


def _check_lr_table(config: dict) -> None:
    """With ``train.lr_table`` set, a table for each of ``train.sizes`` that chose a rate for every arm of the
    deciding comparisons at that size: a missing table, or an arm it lacks (which would silently train at
    ``train.lr``), stops here, before any job. A table this run tunes itself (:func:`tuned_in_run`) is checked
    once it exists."""
    if config["train"]["lr_table"] is None:
        return
    made_here = tuned_in_run(config)
    for size in config["train"]["sizes"]:
        path = lr_table_path(config, size)
        if size in made_here and not Path(path).is_file():
            continue
        rates = tuned_rates(path)
        for comparison in tuned_comparisons(config, declared=True):
            steps = comparison.budget
            for spec in comparison.arms:
                if (spec.task, spec.encoding, size, *spec.resolved(size), steps) not in rates:
                    raise ConfigError(f"config key 'train.lr_table': {path} has no rate for {comparison.id}'s arm "
                                      f"{spec.encoding} at {size} ({steps} steps); tune it first: snakemake "
                                      f"{path} (rule lr_table), or python -m posbench tune --size {size}")


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


def _check_memory(config: dict) -> None:
    """Every profile cell fits its device: its analytic memory (:func:`posbench.profile.memory_problem`)
    against what the device holds, for each device this machine sees; a cell on a device it cannot see
    (cuda on a CPU-only login node) is left to its job, which records it ``oom`` without running it. The
    longest lengths are checked first: one too long for every cell's table (``profile_max_len``) is named."""
    from posbench.profile import ProfileConfig, memory_problem

    profile = config["profile"]
    devices, _ = resolve_devices(config["devices"])
    for cell in sorted(profile_cells(config, devices), key=lambda cell: -cell["seq_len"]):
        problem = memory_problem(ProfileConfig(**cell, max_len=profile_max_len(config), batch=profile["batch"],
                                               dtype=profile["dtype"]))
        if problem:
            raise ConfigError(f"config key 'profile.seq_lens[{profile['seq_lens'].index(cell['seq_len'])}]': "
                              f"{problem}; allowed: lengths whose cells fit their device")


def _check_sweeps(train: dict) -> None:
    """Each sweep's task and encodings are known, its lengths positive, its widths fit every train size
    (the comparisons' widths too)."""
    from posbench import encodings, tasks

    for i, sweep in enumerate(train["sweeps"]):
        _check_members(f"train.sweeps[{i}].task", [sweep["task"]], tasks.names(), single=True)
        _check_members(f"train.sweeps[{i}].encodings", sweep["encodings"], encodings.names())
        for j, length in enumerate(sweep.get("train_lengths", [])):
            if length <= 0:
                raise ConfigError(f"config key 'train.sweeps[{i}].train_lengths[{j}]': {length} is not a positive "
                                  "length")
        for j, width in enumerate(sweep.get("d_models", [])):
            _check_width(f"train.sweeps[{i}].d_models[{j}]", width, train["sizes"])
    if train["comparisons"] != "none":
        from posbench import comparisons

        for spec in comparisons.load().arms(train["comparisons"]):
            if spec.d_model is not None:
                _check_width("train.sizes", spec.d_model, train["sizes"],
                             f" (an arm of the comparisons '{train['comparisons']}' is at d_model {spec.d_model})")


def _check_width(key: str, width: int, sizes: list[str], why: str = "") -> None:
    """``width`` fits every one of ``sizes`` (:func:`posbench.train.check_width`), else a one-line error at ``key``."""
    from posbench.train import check_width

    for size in sizes:
        try:
            check_width(size, width)
        except ValueError as error:
            raise ConfigError(f"config key '{key}': {error}{why}") from None


def _check_members(key: str, values, allowed, single: bool = False) -> None:
    for i, value in enumerate(values):
        if value not in allowed:
            keyed = key.endswith(("tasks", "data")) or key.startswith("train.lr")  # a mapping's keys
            where = key if single else f"{key}.{value}" if keyed else f"{key}[{i}]"
            raise ConfigError(f"config key '{where}': unknown {value!r}; allowed: {', '.join(sorted(allowed))}")


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
    from posbench.train import check_eval_scaling

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


def train_jobs(config: dict, second_looks: tuple[str, ...] = ()) -> list[dict]:
    """One entry per train job: ``device, dtype_dir, task, encoding, size, lr, lr_dir, train_length,
    d_model, axes_dir, steps, seeds`` (seeds sorted; ``steps`` as the record path names it: ``500``, or
    ``125-250-500`` with annealed checkpoints).

    The descriptive arms (``train.tasks``) train at their rate (:func:`learning_rate`), ``train.seeds`` and
    ``train.steps`` (or the task's), and so do the sweeps' (``train.sweeps``), at each of their training
    lengths × widths, and the published shapes' arms (``train.shapes``), a tuned shape's at each of
    ``train.lr_factors``, a confirm stage's at its fresh seeds (:func:`shape_runs`); the comparisons' arms
    (:func:`comparison_runs`) at their declared seeds and budgets.
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
    jobs: dict[tuple, set] = {}
    for (spec, factor, seeds, steps), size in product(plain + comparison_runs(config, second_looks), t["sizes"]):
        steps = steps or str(t["steps"] or tasks.get(spec.task).steps)
        arm = (spec.task, spec.encoding, size, *spec.resolved(size), int(steps.split(LIST_SEPARATOR)[-1]))
        base = learning_rate(config, spec.task, spec.encoding, arm)
        lr = base if factor == 1 else float(f"{base * factor:.4g}")
        jobs.setdefault((spec.task, spec.encoding, size, lr, *plain_axes(spec, size), steps), set()).update(seeds)
    run = dict(device=t["device"], dtype_dir=dtype_dir(t["dtype"]))
    return [dict(**run, task=task, encoding=e, size=size, lr=lr, lr_dir=lr_dir(task, lr), train_length=length,
                 d_model=width, axes_dir=axes_dir(length, width), steps=steps, seeds=sorted(seeds))
            for (task, e, size, lr, length, width, steps), seeds in jobs.items()]


def comparison_runs(config: dict, second_looks: tuple[str, ...] = ()) -> list[tuple[ArmSpec, float, list, str]]:
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


def second_look_ids(verdicts: str | Path) -> tuple[str, ...]:
    """The deciding comparisons whose first look (the judge step's ``verdicts.csv`` at ``verdicts``) asks for
    a second: unclear or unstable there (``second_look_wanted``)."""
    import pandas as pd

    frame = pd.read_csv(verdicts)
    if frame.empty or "second_look_wanted" not in frame.columns:
        return ()
    wanted = frame[frame["second_look_wanted"].astype(bool) & frame["decides"].astype(bool)]
    return tuple(sorted(set(wanted["comparison"])))


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


def axes_arguments(folders: str) -> str:
    """``--train-length … --d-model …`` for a train job in :func:`axes_dir`'s ``folders``; nothing at the defaults."""
    length, width = re.fullmatch(AXES_DIR, folders).groups()
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


def batch_manifests(config: dict, devices: list[str], second_looks: tuple[str, ...] = ()) -> list[str]:
    """The manifest of every job of the sweep (profile, train, probe): what the aggregation waits for;
    with the second looks of the comparisons ``second_looks`` names."""
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
