"""Reading a preset and refusing a bad one: the config the Snakefile validates once, before any job.

:func:`validate_config` reads a preset's ``include``, fills the schema's defaults
(``workflow/schemas/config.schema.yaml``), checks the types and then the names against posbench's registries
(encodings, sizes, tasks, comparisons), the learning-rate tables, the widths and the profile cells' memory. Every
problem is one line naming the key and what is allowed (:class:`posbench.workflow.ConfigError`); nothing runs.
The cells a valid config fans out to are :mod:`posbench.workflow`'s, which this module reads and never the
other way round.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import yaml

from posbench.devices import ANY_DEVICE, TRAINING_DEVICES
from posbench.workflow import (
    ROOT,
    SCHEMA,
    ConfigError,
    awaits_tuning,
    lr_table_path,
    probe_cells,
    profile_cells,
    profile_max_len,
    resolve_devices,
    train_cells,
    tuned_comparisons,
    tuned_in_run,
    tuned_rates,
)


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
