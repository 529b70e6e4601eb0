"""Bad configs are refused before any job runs, with one line naming the key and what is allowed."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import probe_records, profile_records, train_records

from posbench import comparisons, tasks, tune
from posbench.workflow import (
    ConfigError,
    axes_arguments,
    axes_dir,
    batch_manifests,
    budget_arguments,
    dtype_dir,
    dtype_of,
    encodings_key,
    profile_job_encodings,
    profile_jobs,
    resolve_devices,
    second_looks_wanted,
    train_cells,
    train_jobs,
)
from posbench.workflow_config import validate_config
from posbench.workflow_paths import DTYPE_DIR, TRAIN_RECORD, joined, record_template

ROOT = Path(__file__).resolve().parent.parent


def config(**sections):
    base = {"profile": {"encodings": ["rope"], "sizes": ["tiny"], "seq_lens": [64]},
            "train": {"tasks": {"reverse": ["rope"]}, "seeds": [0]}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


BAD = {  # what is wrong -> (config, the words the one-line error must contain)
    "gpu model not a string": (config(gpu_model=100), "config key 'gpu_model': expected string or null, got 100"),
    "gpu model an expression": (config(gpu_model="a100|h100"),
                                "config key 'gpu_model': 'a100|h100' is not allowed; allowed: one SLURM node feature"),
    "unknown encoding": (config(profile={"encodings": ["rotary"]}),
                         "'profile.encodings[0]': unknown 'rotary'; allowed: alibi"),
    "unknown encoding in a task": (config(train={"tasks": {"reverse": ["alibi", "t6"]}}),
                                   "'train.tasks.reverse[1]': unknown 't6'; allowed:"),
    "unknown size": (config(profile={"sizes": ["huge"]}), "'profile.sizes[0]': unknown 'huge'; allowed: base"),
    "zero length": (config(profile={"seq_lens": [0]}), "'profile.seq_lens[0]': 0 is not a positive length"),
    "negative length": (config(profile={"seq_lens": [128, -5]}), "'profile.seq_lens[1]': -5"),
    "a list where a number belongs": (config(profile={"batch": [1, 2]}),
                                      "'profile.batch': expected integer, got [1, 2]"),
    "unknown device": (config(devices=["cpu", "tpu"]), "'devices[1]': unknown device 'tpu'; allowed: cpu, cuda"),
    "missing data file": (config(train={"data": {"lm_prose": "/no/such/file.txt"}}),
                          "'train.data.lm_prose': file '/no/such/file.txt' does not exist"),
    "learned beyond its table": (config(profile={"encodings": ["learned"], "seq_lens": [64, 512], "max_len": 256}),
                                 "'profile.max_len': learned's table of 256 rows is shorter than"),
    "empty sweep": (config(profile={"encodings": []}, train={"tasks": {}}), "empty sweep"),
    "unknown task": (config(train={"tasks": {"translate": ["rope"]}}),
                     "'train.tasks.translate': unknown 'translate'; allowed:"),
    "negative seed": (config(train={"seeds": [0, -1]}), "'train.seeds[1]': -1 is not a pilot seed; allowed: 0 to 99"),
    "seed of the wrong type": (config(train={"seeds": ["one"]}), "'train.seeds[0]': expected integer"),
    "misspelled top-level key": ({**config(), "profle": {}}, "unknown config key 'profle'; allowed: preset, machine"),
    "misspelled nested key": (config(profile={"seq_len": [64]}),
                              "unknown config key 'seq_len' in 'profile'; allowed: encodings"),
    "unknown mode": (config(profile={"modes": ["inference"]}),
                     "'profile.modes[0]': 'inference' is not allowed; allowed: infer, train"),
    "machine label with a slash": (config(machine="lab/gpu 1"),
                                   "'machine': 'lab/gpu 1' is not allowed; allowed: letters, digits"),
    "machine label with a semicolon": (config(machine="a;rm"), "'machine': 'a;rm' is not allowed"),
    "duplicate lengths": (config(profile={"seq_lens": [64, 128, 64]}),
                          "'profile.seq_lens': 64 listed more than once; list each value once"),
    "duplicate seeds": (config(train={"seeds": [0, 1, 1]}), "'train.seeds': 1 listed more than once"),
    "duplicate devices": (config(devices=["cpu", "cpu"]), "'devices': cpu listed more than once"),
    "duplicate widths": (config(probe={"random_widths": [16, 16]}), "'probe.random_widths': 16 listed more than once"),
    "duplicate encodings in a task": (config(train={"tasks": {"reverse": ["rope", "rope"]}}),
                                      "'train.tasks.reverse': rope listed more than once"),
    "unknown eval scaling": (config(train={"eval_scaling": ["ntk:4"]}),
                             "'train.eval_scaling[0]': 'ntk:4' is not allowed; allowed: TYPE:FACTOR with TYPE one of"),
    "a task with no encodings": (config(train={"tasks": {"reverse": []}}),
                                 "'train.tasks.reverse': no encodings listed; list at least one"),
    "unknown training device": (config(train={"device": "mps"}),
                                "'train.device': 'mps' is not allowed; allowed: cpu, cuda, cuda:N"),
    "float16 training": (config(train={"dtype": "float16"}),
                         "'train.dtype': 'float16' is not allowed; allowed: float32, bfloat16"),
    "the short spelling of a dtype": (config(train={"dtype": "bf16"}),
                                      "'train.dtype': 'bf16' is not allowed; allowed: float32, bfloat16"),
    "a profile dtype": (config(profile={"dtype": "fp32"}),
                        "'profile.dtype': 'fp32' is not allowed; allowed: float32, bfloat16, float16"),
    "misspelled comparisons preset": (
        config(train={"comparisons": "defualt"}),
        "'train.comparisons': 'defualt' is not allowed; allowed: default, full, all, none"),
    "preset name with a space": (config(preset="my run"), "'preset': 'my run' is not allowed; allowed: letters"),
    "learning rate as a word": (config(train={"lr": {"reverse": "fast"}}),
                                "'train.lr.reverse': expected a learning rate > 0 or a mapping encoding -> learning "
                                "rate > 0, got 'fast'"),
    "negative learning rate": (config(train={"lr": {"reverse": -0.001}}),
                               "'train.lr.reverse': expected a number > 0, got -0.001"),
    "learning rate of an encoding as a word": (config(train={"lr": {"reverse": {"rope": "x"}}}),
                                               "'train.lr.reverse.rope': expected number, got 'x'"),
    "learning rate of an unknown task": (config(train={"lr": {"revers": 0.001}}),
                                         "'train.lr.revers': unknown 'revers'; allowed: babi, bucket_sort, "
                                         "code_brackets, copy"),
    "learning rate of an unknown encoding": (config(train={"lr": {"reverse": {"rop": 0.001}}}),
                                             "'train.lr.reverse.rop': unknown 'rop'; allowed: alibi"),
    "zero learning-rate factor": (config(train={"lr_factors": [0, 1]}),
                                  "'train.lr_factors[0]': expected a number > 0, got 0"),
    "learning-rate factors without comparisons": (
        config(train={"lr_factors": [1, 3]}), "'train.lr_factors': [1, 3] multiplies the rates of the comparisons'"),
    "an unknown shapes part": (config(train={"shapes": ["lm", "vision"]}),
                               "'train.shapes[1]': unknown 'vision'; allowed: algorithmic, chomsky-a, chomsky-b, lm"),
    "shapes as a word": (config(train={"shapes": "some"}), "'train.shapes'"),
    "size and sizes": (config(train={"size": "tiny", "sizes": ["small"]}),
                       "'train.size': replaced by train.sizes; give train.sizes only"),
    "unknown training size": (config(train={"sizes": ["tiny", "huge"]}),
                              "'train.sizes[1]': unknown 'huge'; allowed: base"),
    "pilot seed among the deciding ones": (config(train={"seeds": [0, 100]}),
                                           "'train.seeds[1]': 100 is not a pilot seed; allowed: 0 to 99 (from 100 "
                                           "on the comparisons' deciding seeds"),
    "the comparisons' seeds are declared": (config(train={"comparisons": "default", "comparison_seeds": [0]}),
                                            "unknown config key 'comparison_seeds' in 'train'; allowed: sizes"),
    "sweep of an unknown task": (config(train={"sweeps": [{"task": "lm_pros", "encodings": ["rope"]}]}),
                                 "'train.sweeps[0].task': unknown 'lm_pros'; allowed: babi"),
    "sweep of an unknown encoding": (config(train={"sweeps": [{"task": "lm_prose", "encodings": ["rope", "rop"]}]}),
                                     "'train.sweeps[0].encodings[1]': unknown 'rop'; allowed: alibi"),
    "sweep without encodings": (config(train={"sweeps": [{"task": "lm_prose"}]}),
                                "'train.sweeps[0]': 'encodings' is a required property"),
    "sweep over a negative length": (
        config(train={"sweeps": [{"task": "lm_prose", "encodings": ["rope"], "train_lengths": [64, -128]}]}),
        "'train.sweeps[0].train_lengths[1]': -128 is not a positive length"),
    "sweep over a width the heads do not split": (
        config(train={"sweeps": [{"task": "lm_prose", "encodings": ["rope"], "d_models": [32, 36]}]}),
        "'train.sweeps[0].d_models[1]': d_model 36 does not fit size 'tiny': allowed: a positive multiple of 8"),
    "sweep over widths as a word": (
        config(train={"sweeps": [{"task": "lm_prose", "encodings": ["rope"], "d_models": "wide"}]}),
        "'train.sweeps[0].d_models': expected array, got 'wide'"),
    "a length no device holds": (config(profile={"seq_lens": [64, 10**9]}),
                                 "'profile.seq_lens[1]': 1000000000 tokens of rope at size tiny (infer, float32, "
                                 "batch 1) need an estimated 2.62 TiB (activations 2.56 TiB, weights 59.6 GiB), more "
                                 "than cpu holds ("),
    "misspelled sweep key": (
        config(train={"sweeps": [{"task": "lm_prose", "encodings": ["rope"], "width": [32]}]}),
        "unknown config key 'width' in 'train.sweeps[0]'; allowed: task, encodings, train_lengths, d_models"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_config_is_refused_in_one_line(case):
    bad, words = BAD[case]
    with pytest.raises(ConfigError) as error:
        validate_config(bad)
    message = str(error.value)
    assert words in message and "\n" not in message


def test_defaults_are_filled_and_cells_derived():
    cfg = validate_config(config())
    assert cfg["profile"]["modes"] == ["infer"] and cfg["train"]["sizes"] == ["tiny"]
    assert (cfg["preset"], cfg["train"]["comparisons"], cfg["train"]["lr"], cfg["train"]["lr_factors"]) == (
        "custom", "none", {}, [1])
    assert (cfg["train"]["device"], cfg["train"]["dtype"]) == ("cpu", "float32")
    cfg["machine"] = "laptop"
    assert profile_records(cfg, ["cpu", "cuda"]) == [
        "results/records/laptop/profile/cpu/infer/tiny/rope/L64.json",
        "results/records/laptop/profile/cuda/infer/tiny/rope/L64.json"]
    assert train_records(cfg) == ["results/records/laptop/train/cpu/reverse/tiny/rope/steps2000/seed0.json"]


def test_a_job_batches_lengths_seeds_and_widths_and_its_out_names_each_cell():
    cfg = validate_config({**config(), "machine": "laptop", "probe": {"encodings": ["sinusoidal"],
                           "random_widths": [16, 32], "trained_widths": [], "seeds": [0, 1]}})
    cfg["profile"]["seq_lens"] = [64, 128]
    cfg["train"]["seeds"] = [0, 1, 2]
    assert batch_manifests(cfg, ["cpu"]) == [  # a profile job per length, over every encoding
        "results/batches/laptop/profile/cpu/infer/tiny/L64/E1-fe4d55b9.json",
        "results/batches/laptop/profile/cpu/infer/tiny/L128/E1-fe4d55b9.json",
        "results/batches/laptop/train/cpu/reverse/tiny/rope/steps2000/seeds0-1-2.json",
        "results/batches/laptop/probe/cpu/random/sinusoidal/V64/L64/d16-32.seeds0-1.json"]
    cfg["profile"]["encodings"].append("alibi")  # so is a new encoding
    assert encodings_key(["rope", "alibi"]) == "E2-7f61ecd9" != encodings_key(["alibi", "rope"])
    assert batch_manifests(cfg, ["cpu"])[:2] == [f"results/batches/laptop/profile/cpu/infer/tiny/L{L}/E2-7f61ecd9.json"
                                                 for L in (64, 128)]
    assert profile_job_encodings(cfg, "E2-7f61ecd9") == ["rope", "alibi"]
    with pytest.raises(ConfigError, match="profile job 'E1-fe4d55b9': not the key of profile.encodings"):
        profile_job_encodings(cfg, "E1-fe4d55b9")
    cfg["train"]["seeds"].append(3)  # a new seed is a new job, whatever Snakemake's rerun triggers
    assert "results/batches/laptop/train/cpu/reverse/tiny/rope/steps2000/seeds0-1-2-3.json" in batch_manifests(
        cfg, ["cpu"])
    assert (record_template(TRAIN_RECORD, results="r", machine="m", device="cuda", dtype_dir="bfloat16/", task="copy",
                            size="tiny", encoding="t5", lr_dir="", axes_dir="", steps=600)
            == "r/records/m/train/cuda/bfloat16/copy/tiny/t5/steps600/seed{seed}.json")


def test_a_sweep_trains_every_length_and_width_in_folders_and_the_defaults_in_the_plain_cell():
    cfg = validate_config(config(machine="m", train={
        "seeds": [0, 1], "tasks": {"lm_prose": ["rope"]},
        "sweeps": [{"task": "lm_prose", "encodings": ["rope", "alibi"], "train_lengths": [64, 128]},
                   {"task": "lm_prose", "encodings": ["sinusoidal_concat"], "d_models": [32, 64]},
                   {"task": "text_order", "encodings": ["none"], "train_lengths": [256], "d_models": [48]}]}))
    jobs = {(j["task"], j["encoding"], j["axes_dir"]): j for j in train_jobs(cfg)}
    assert sorted(jobs) == [("lm_prose", "alibi", ""), ("lm_prose", "alibi", "L128/"), ("lm_prose", "rope", ""),
                            ("lm_prose", "rope", "L128/"), ("lm_prose", "sinusoidal_concat", ""),
                            ("lm_prose", "sinusoidal_concat", "d32/"), ("text_order", "none", "L256/d48/")]
    assert jobs["lm_prose", "rope", ""]["seeds"] == [0, 1]  # the grid's arm and the sweep's 64 are one job
    assert (jobs["text_order", "none", "L256/d48/"]["train_length"], jobs["text_order", "none", "L256/d48/"]["d_model"]
            ) == (256, 48)
    assert (jobs["lm_prose", "rope", ""]["train_length"], jobs["lm_prose", "rope", ""]["d_model"]) == (None, None)
    assert "results/records/m/train/cpu/text_order/tiny/none/L256/d48/steps600/seed1.json" in train_records(cfg)
    assert ("results/batches/m/train/cpu/lm_prose/tiny/sinusoidal_concat/d32/steps500/seeds0-1.json"
            in batch_manifests(cfg, ["cpu"]))
    assert [axes_arguments(d) for d in ("", "L128/", "d32/", "L256/d48/")] == [
        "", "--train-length 128", "--d-model 32", "--train-length 256 --d-model 48"]


def test_a_comparison_at_a_width_or_length_trains_its_arms_there():
    cfg = validate_config(config(machine="m", train={"tasks": {}, "comparisons": "all"}))
    folders = {(j["task"], j["encoding"], j["axes_dir"]) for j in train_jobs(cfg)}
    for c in (c for c in comparisons.load().comparisons if not c.withdrawn):  # a withdrawn one trains nothing
        for arm in c.arms:
            length = "" if arm.train_length in (None, tasks.get(c.task).train_length) else f"L{arm.train_length}/"
            width = "" if arm.d_model in (None, 64) else f"d{arm.d_model}/"
            assert (c.task, arm.encoding, length + width) in folders
    with pytest.raises(ConfigError, match="config key 'train.sizes': d_model 32 does not fit size 'large'"):
        validate_config(config(train={"comparisons": "full", "sizes": ["large"]}))


def test_explicit_devices_are_kept_auto_drops_what_is_missing():
    assert resolve_devices(["cpu", "cuda:1"]) == (["cpu", "cuda:1"], [])
    kept, dropped = resolve_devices("auto")
    assert kept[0] == "cpu" and all("(" in reason for reason in dropped) and len(kept) + len(dropped) == 3


def run_config(device: str, dtype: str) -> dict:
    return validate_config(config(machine="m", train={"device": device, "dtype": dtype},
                                  probe={"encodings": ["sinusoidal"], "random_widths": [16], "trained_widths": [16]}))


def test_records_of_one_cell_on_two_devices_or_dtypes_lie_apart():
    """CPU and CUDA runs under one machine label (and bfloat16 beside float32) never share a record path;
    random-embedding probes run on the CPU whatever train.device says, so theirs stay put."""
    runs = [("cpu", "float32"), ("cuda", "float32"), ("cuda", "bfloat16"), ("cuda:1", "float32")]
    trains = [train_records(run_config(*run)) for run in runs]
    assert [paths[0].split("/train/")[1] for paths in trains] == [
        "cpu/reverse/tiny/rope/steps2000/seed0.json", "cuda/reverse/tiny/rope/steps2000/seed0.json",
        "cuda/bfloat16/reverse/tiny/rope/steps2000/seed0.json", "cuda:1/reverse/tiny/rope/steps2000/seed0.json"]
    probes = [probe_records(run_config(*run)) for run in runs]
    trained = [path for paths in probes for path in paths if "/trained/" in path]
    random = {path for paths in probes for path in paths if "/random/" in path}
    assert len(set(trained)) == len(runs) * 3 and len(random) == 3  # 3 seeds
    assert all(path.startswith("results/records/m/probe/cpu/random/") for path in random)
    assert [path.split("/probe/")[1] for path in trained[3::3]] == [
        "cuda/trained/sinusoidal/lm_prose/L64/d16/seed0.json",
        "cuda/bfloat16/trained/sinusoidal/lm_prose/L64/d16/seed0.json",
        "cuda:1/trained/sinusoidal/lm_prose/L64/d16/seed0.json"]
    assert [dtype_of(dtype_dir(dtype)) for dtype in ("float32", "bfloat16")] == ["float32", "bfloat16"]
    assert [bool(re.fullmatch(DTYPE_DIR, folder)) for folder in ("", "bfloat16/", "float16/", "float32/", "bfloat16")
            ] == [True, True, True, False, False]  # the wildcard reads the folder back


def test_training_steps_are_always_a_folder_of_the_record_path():
    """The task's own steps (reverse: 2,000; copy: 600) or train.steps for every task: two budgets of one
    arm are two records, and a changed task default never reuses an old budget's path."""
    own = validate_config(config(train={"tasks": {"reverse": ["rope"], "copy": ["rope"]}}))
    assert [(job["task"], job["steps"]) for job in train_jobs(own)] == [("reverse", "2000"), ("copy", "600")]
    set_steps = validate_config(config(train={"tasks": {"reverse": ["rope"], "copy": ["rope"]}, "steps": 300}))
    assert [job["steps"] for job in train_jobs(set_steps)] == ["300", "300"]
    assert [path.split("/rope/")[1] for path in train_records(own) + train_records(set_steps)] == [
        "steps2000/seed0.json", "steps600/seed0.json", "steps300/seed0.json", "steps300/seed0.json"]


PRESETS = {"config.yaml": "default", "workflow/full.yaml": "full", "workflow/cluster.yaml": "cluster",
           "workflow/smoke.yaml": "smoke", "workflow/shapes.yaml": "shapes", "workflow/shapes-lm.yaml": "shapes",
           "workflow/shapes-algorithmic.yaml": "shapes", "workflow/shapes-chomsky-a.yaml": "shapes",
           "workflow/shapes-chomsky-b.yaml": "shapes"}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_shipped_configs_are_valid_and_named(preset):
    assert validate_config(yaml.safe_load((ROOT / preset).read_text()))["preset"] == PRESETS[preset]


def shipped(preset: str) -> dict:
    return validate_config(yaml.safe_load((ROOT / preset).read_text()))


GRIDS = yaml.safe_load((ROOT / "workflow" / "grids.yaml").read_text())


def test_the_full_and_cluster_presets_share_the_grids_file_and_cluster_adds_one_length_sweep():
    full, cluster = shipped("workflow/full.yaml"), shipped("workflow/cluster.yaml")
    own = {"mosaic_resolution": ["none", "sinusoidal", "rope", "sinusoidal_per_modality", "rope_per_modality",
                                 "mrope_mosaic"]}  # full's alone: resolution extrapolation (issue 30)
    for cfg, added in ((full, own), (cluster, {})):
        assert "include" not in cfg and cfg["train"]["tasks"] == {**GRIDS["train"]["tasks"], **added}
        assert cfg["profile"]["encodings"] == GRIDS["profile"]["encodings"] and len(GRIDS["train"]["tasks"]) == 14
        assert {k: cfg["probe"][k] for k in GRIDS["probe"]} == GRIDS["probe"]
    assert full["train"]["sweeps"] == GRIDS["train"]["sweeps"] and len(GRIDS["train"]["sweeps"]) == 5
    assert cluster["train"]["sweeps"] == [*GRIDS["train"]["sweeps"], {
        "task": "lm_prose", "encodings": ["sinusoidal", "learned", "rope", "alibi"], "train_lengths": [1024]}]
    assert full["probe"]["trained_widths"] == [16, 32, 64]  # the preset's own, beside the shared grids
    assert cluster["probe"]["trained_widths"] == [16, 32, 64, 128, 256]


def test_an_include_merges_mappings_extends_lists_and_the_presets_own_values_win(tmp_path):
    cfg = validate_config({"include": "workflow/grids.yaml", "machine": "m",
                           "profile": {"encodings": ["rope_randomized"], "seq_lens": [32]},
                           "train": {"tasks": {"copy": ["rope_randomized"], "scan": ["rope"]}}})
    tasks_ = cfg["train"]["tasks"]
    assert tasks_["copy"] == [*GRIDS["train"]["tasks"]["copy"], "rope_randomized"] and tasks_["scan"] == ["rope"]
    assert {k: v for k, v in tasks_.items() if k not in ("copy", "scan")} == {
        k: v for k, v in GRIDS["train"]["tasks"].items() if k != "copy"}
    assert cfg["profile"]["encodings"] == [*GRIDS["profile"]["encodings"], "rope_randomized"]
    assert cfg["profile"]["seq_lens"] == [32] and cfg["probe"]["vocabs"] == [64, 1024]
    with pytest.raises(ConfigError, match="config key 'profile.encodings': t5 listed more than once"):
        validate_config({"include": "workflow/grids.yaml", "profile": {"encodings": ["t5"]}})
    base = tmp_path / "base.yaml"
    base.write_text("machine: a\ntrain: {steps: 5, threads: 2}\n")
    cfg = validate_config({"include": str(base), "train": {"steps": 7}})
    assert (cfg["machine"], cfg["train"]["steps"], cfg["train"]["threads"]) == ("a", 7, 2)


def test_a_bad_include_is_one_line_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"^config key 'include': 'workflow/nothing.yaml' is not a file; allowed: "):
        validate_config({"include": "workflow/nothing.yaml"})
    nested = tmp_path / "nested.yaml"
    nested.write_text("include: workflow/grids.yaml\n")
    with pytest.raises(ConfigError, match="config key 'include': .*nested.yaml must hold a mapping of config keys "
                                          "and include nothing"):
        validate_config({"include": str(nested)})


def test_the_default_sweep_trains_each_comparison_at_its_seeds_and_budget_and_the_rest_of_the_grid_at_7():
    cfg = shipped("config.yaml")
    declared = comparisons.load()
    chosen = [c for c in declared.in_preset("default") if not c.withdrawn]  # mosaic-mrope: withdrawn, not trained
    arms = {(a.task, a.encoding, axes_dir(a.train_length, a.d_model)): c for c in chosen for a in c.arms}
    grid = {(task, e, "") for task, names in cfg["train"]["tasks"].items() for e in names}
    assert len(arms) == 12 and arms.keys() & grid == {("lm_prose", "sinusoidal", "")} and len(grid) == 10
    assert set(arms) - grid == {("scan", "sinusoidal", ""), ("scan", "rope", ""), ("lm_prose", "sinusoidal", "L128/"),
                                ("lm_prose", "rope", "L128/"), ("lm_prose", "sinusoidal_concat", "d32/"),
                                ("passkey", "sinusoidal", ""), ("passkey", "alibi", ""),
                                ("code_brackets", "sinusoidal", ""), ("code_brackets", "rope", ""),
                                ("mosaic_qa", "sinusoidal", ""), ("mosaic_qa", "mrope_mosaic", "")}
    jobs = train_jobs(cfg)
    compared = {(j["task"], j["encoding"], j["axes_dir"], j["steps"]): j["seeds"] for j in jobs}
    for (task, encoding, folder), c in arms.items():
        budgets = joined(declared.budget_rule.budgets(c.budget))
        assert compared[task, encoding, folder, budgets] == list(c.seeds()), (task, encoding)  # from 100, n by power
    assert compared["scan", "rope", "", "800-1600-3200"] == list(range(100, 110))  # SCAN: 10 seeds, 3,200 steps
    assert compared["lm_prose", "sinusoidal", "", "500"] == list(range(7))  # the descriptive arm: its own budget
    assert compared["lm_prose", "sinusoidal", "", "500-1000-2000"] == list(range(100, 107))  # row 3's added arm
    tuned = tune.chosen_rates(ROOT / cfg["train"]["lr_table"])  # the tuning run's choices
    for job in jobs:
        default = tasks.get(job["task"]).lr
        arm = (job["task"], job["encoding"], job["size"], job["train_length"] or tasks.get(job["task"]).train_length,
               job["d_model"] or 64, int(job["steps"].split("-")[-1]))
        assert (arm in tuned) == (job["seeds"][0] >= 100)  # every compared arm tuned, no descriptive one
        lr = tuned.get(arm, cfg["train"]["lr"].get(job["task"], default))  # one rate for a task's descriptive arms
        assert (job["size"], job["lr"], job["lr_dir"]) == ("tiny", lr, "" if lr == default else f"lr{lr:g}/")
    cells = [(c["task"], c["encoding"], c["size"], c["axes_dir"], c["lr"], c["steps"], c["seed"])
             for c in train_cells(cfg)]
    assert len(cells) == len(set(cells)) == len(set(train_records(cfg))) == sum(len(j["seeds"]) for j in jobs)
    assert len(jobs) == 22 and sum(len(j["seeds"]) for j in jobs if j["seeds"][0] < 100) == 10 * 7


def test_an_arm_asked_for_twice_is_one_job_with_the_union_of_seeds():
    cfg = validate_config(config(train={"comparisons": "default", "seeds": [0, 1],
                                        "tasks": {"code_brackets": ["rope", "alibi"]}}))
    by_arm = {(j["task"], j["encoding"], j["steps"]): j["seeds"] for j in train_jobs(cfg)}
    declared = comparisons.load().by_id["code-brackets-rope"]
    assert by_arm[("code_brackets", "rope", "600")] == [0, 1]  # the descriptive arm: a plain run
    assert by_arm[("code_brackets", "rope", "150-300-600")] == list(declared.seeds())  # the compared: checkpoints
    assert by_arm[("code_brackets", "alibi", "600")] == [0, 1]


def test_a_second_look_adds_the_next_seeds_of_the_comparisons_it_names(tmp_path):
    cfg = validate_config(config(train={"comparisons": "default", "tasks": {}}))
    first = {(j["task"], j["encoding"], j["axes_dir"]): j["seeds"] for j in train_jobs(cfg)}
    second = {(j["task"], j["encoding"], j["axes_dir"]): j["seeds"]
              for j in train_jobs(cfg, (("scan-rope", "tiny"),))}
    assert first["scan", "rope", ""] == list(range(100, 110)) and second["scan", "rope", ""] == list(range(100, 120))
    assert {k: v for k, v in second.items() if k[0] != "scan"} == {k: v for k, v in first.items() if k[0] != "scan"}
    verdicts = tmp_path / "verdicts.csv"
    pd.DataFrame({"comparison": ["scan-rope", "scan-rope", "prose-rope", "code-brackets-rope"],
                  "size": ["tiny", "small", "tiny", "tiny"], "decides": [True, True, False, True],
                  "second_look_wanted": [True, False, True, False]}).to_csv(verdicts, index=False)
    # a descriptive comparison gets no second look, and a size's look is its own
    assert second_looks_wanted(verdicts) == (("scan-rope", "tiny"),)


def test_a_second_look_at_one_size_trains_no_more_seeds_at_another():
    cfg = validate_config(config(train={"comparisons": "default", "tasks": {}, "sizes": ["micro", "tiny"]}))
    seeds = {(j["task"], j["encoding"], j["size"], j["axes_dir"]): j["seeds"]
             for j in train_jobs(cfg, (("scan-rope", "tiny"),))}
    assert seeds["scan", "rope", "tiny", ""] == list(range(100, 120))
    assert seeds["scan", "rope", "micro", ""] == list(range(100, 110))
    assert [budget_arguments(steps) for steps in ("500", "125-250-500")] == [
        "--steps 500", "--checkpoints 125 250 500 --decay-fraction 0.2"]


def test_learning_rate_factors_multiply_the_comparisons_rates_at_the_pilot_seeds():
    cfg = validate_config({**config(train={"comparisons": "default", "tasks": {}, "seeds": [0],
                                           "lr_factors": [0.333, 1, 3], "lr": {"lm_prose": {"rope": 0.001}}}),
                           "machine": "m"})
    jobs = train_jobs(cfg)
    rates = {}
    for job in jobs:
        rates.setdefault((job["task"], job["encoding"], job["axes_dir"]), []).append(
            (job["lr"], job["lr_dir"], job["seeds"][:2]))
    assert rates["lm_prose", "sinusoidal", ""] == [(0.000999, "lr0.000999/", [0]), (0.003, "", [100, 101]),
                                                   (0.009, "lr0.009/", [0])]  # a check never decides
    # a rate of its own for rope: ×3 lands on the task's default, whose records have no folder
    assert [r[:2] for r in rates["lm_prose", "rope", "L128/"]] == [(0.000333, "lr0.000333/"), (0.001, "lr0.001/"),
                                                                   (0.003, "")]
    records = train_records(cfg)
    assert "results/records/m/train/cpu/lm_prose/tiny/sinusoidal/steps500-1000-2000/lr0.000999/seed0.json" in records
    assert "results/records/m/train/cpu/lm_prose/tiny/sinusoidal/steps500-1000-2000/seed100.json" in records
    assert ("results/batches/m/train/cpu/lm_prose/tiny/rope/L128/steps500-1000-2000/lr0.001/seeds100-101-102-103-"
            "104-105-106.json" in batch_manifests(cfg, ["cpu"]))


def test_a_learning_rate_per_task_or_per_encoding_and_sizes():
    cfg = validate_config(config(train={"lr": {"reverse": {"rope": 0.01}, "copy": 0.002}, "sizes": ["tiny", "small"],
                                        "tasks": {"reverse": ["rope", "alibi"], "copy": ["t5"]}}))
    assert [(j["task"], j["encoding"], j["size"], j["lr"]) for j in train_jobs(cfg)] == [
        ("reverse", "rope", "tiny", 0.01), ("reverse", "rope", "small", 0.01),
        ("reverse", "alibi", "tiny", 0.003), ("reverse", "alibi", "small", 0.003),
        ("copy", "t5", "tiny", 0.002), ("copy", "t5", "small", 0.002)]


def test_the_deprecated_size_is_read_as_sizes():
    assert validate_config(config(train={"size": "small"}))["train"]["sizes"] == ["small"]


def snakemake(*arguments, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m snakemake ARGUMENTS`` from the repository root (so its workflow profile is read)."""
    return subprocess.run([sys.executable, "-m", "snakemake", *map(str, arguments)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})


def posbench_lines(run: subprocess.CompletedProcess) -> list[str]:
    """What the run said on stderr besides Snakemake's notice of the workflow profile it read."""
    return [line for line in run.stderr.splitlines() if line and not line.startswith("Using workflow specific profile")]


def write_kept_record(results: Path) -> Path:
    kept = results / "records" / "keep.json"
    kept.parent.mkdir(parents=True)
    kept.write_text('{"untouched": true}')
    return kept


@pytest.mark.parametrize("profile, words", [
    ({"encodings": ["rotary"]}, "'profile.encodings[0]': unknown 'rotary'; allowed:"),
    ({"seq_lens": [1000000000]}, "'profile.seq_lens[0]': 1000000000 tokens of none at size base (infer, float32, "
                                 "batch 1) need an estimated 10.2 TiB (activations 10.2 TiB, weights 12.5 MiB), more "
                                 "than cpu holds ("),
])
def test_snakemake_refuses_a_bad_config_before_any_job(tmp_path, profile, words):
    """End to end: exit code non-zero, one line naming the key, existing results untouched."""
    results = tmp_path / "results"
    kept = write_kept_record(results)
    bad = write(tmp_path / "bad.yaml", yaml.safe_dump({"results": str(results), "profile": profile}))
    run = snakemake("--cores", "1", "--configfile", bad)
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.startswith("posbench:")]
    assert lines == [lines[0]] and words in lines[0]
    assert kept.read_text() == '{"untouched": true}' and sorted(results.rglob("*")) == [kept.parent, kept]


UNREADABLE = {  # what --configfile names -> what the one line says after its path
    "missing": (lambda tmp: tmp / "missing.yaml", ": no such file"),
    "a folder": (lambda tmp: write(tmp / "folder", None), ": cannot be read (Is a directory)"),
    "not YAML": (lambda tmp: write(tmp / "bad.yaml", "profile: [\n"),
                 ": not YAML or JSON at line 2 (expected the node content, but found '<stream end>')"),
    "not a mapping": (lambda tmp: write(tmp / "list.yaml", "- 1\n- 2\n"),
                      ": expected a mapping of config keys (profile:, train:, …), got list"),
}


def write(path: Path, text: str | None) -> Path:
    """``text`` into the file ``path``; ``None``: make ``path`` a folder."""
    if text is None:
        path.mkdir()
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_configfile_is_named_in_one_line(tmp_path, case):
    from posbench.workflow_config import configfile_problem

    make, says = UNREADABLE[case]
    path = make(tmp_path)
    assert configfile_problem([ROOT / "workflow/smoke.yaml", path]) == f"--configfile {path}{says}"
    assert configfile_problem([ROOT / "workflow/smoke.yaml", ROOT / "config.yaml"]) is None


SPELLINGS = {  # how a command line names the bad file, given a good one too
    "--configfile BAD": lambda good, bad: ["--configfile", bad],
    "--configfiles GOOD BAD": lambda good, bad: ["--configfiles", good, bad],
    "--configfile=BAD": lambda good, bad: [f"--configfile={bad}"],
}


@pytest.mark.parametrize("case, spelling", [("missing", "--configfile BAD"), ("missing", "--configfiles GOOD BAD"),
                                            ("a folder", "--configfile=BAD")])
def test_snakemake_stops_at_an_unreadable_configfile_in_one_line(tmp_path, case, spelling):
    """End to end, before Snakemake's own loader (which would print a traceback): exit 1, one line naming
    the file, however the option is spelled, and nothing written."""
    results = tmp_path / "results"
    kept = write_kept_record(results)
    good = write(tmp_path / "good.yaml", yaml.safe_dump({"results": str(results)}))
    make, says = UNREADABLE[case]
    bad = make(tmp_path)
    run = snakemake("-n", *SPELLINGS[spelling](good, bad))
    assert run.returncode == 1, run.stderr
    assert posbench_lines(run) == [f"posbench: --configfile {bad}{says}"]
    assert kept.read_text() == '{"untouched": true}' and sorted(results.rglob("*")) == [kept.parent, kept]


def test_a_device_the_config_names_but_this_machine_lacks_stops_the_run_at_preflight(tmp_path):
    """devices: [cuda] without a GPU: the preflight job fails with its one-line reason, no profile job
    runs, no profile record or manifest is written."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    results = tmp_path / "results"
    cfg = tmp_path / "gpu.yaml"
    cfg.write_text(yaml.safe_dump({"results": str(results), "machine": "box", "devices": ["cuda"],
                                   "python": sys.executable,
                                   "profile": {"encodings": ["rope"], "sizes": ["tiny"], "seq_lens": [32]}}))
    target = results / f"batches/box/profile/cuda/infer/tiny/L32/{encodings_key(['rope'])}.json"
    run = snakemake(target, "--cores", "1", "--configfile", cfg, timeout=300)
    assert run.returncode != 0
    reasons = [line for line in run.stderr.splitlines() if line.startswith("posbench preflight: error:")]
    assert reasons == [reasons[0]] and reasons[0].startswith("posbench preflight: error: cuda: no CUDA device visible")
    assert not (results / "records").exists() and not (results / "batches").exists()
    assert not (results / "preflight/box/cuda.json").exists()


def test_eval_scalings_reach_only_the_encodings_with_rotary_frequencies():
    from posbench.workflow import eval_scaling_argument

    cfg = validate_config(config(train={"tasks": {"lm_prose": ["rope", "xpos", "alibi"]},
                                        "eval_scaling": ["yarn:4", "linear:4"]}))
    assert eval_scaling_argument(cfg, "rope") == eval_scaling_argument(cfg, "xpos") == "--eval-scaling yarn:4 linear:4"
    assert eval_scaling_argument(cfg, "alibi") == ""
    assert eval_scaling_argument(validate_config(config()), "rope") == ""
DRY_RUN = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.enums import RerunTrigger
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

snakefile, configfile, workdir = map(Path, sys.argv[1:4])
triggers = {RerunTrigger.parse_choice(name) for name in sys.argv[4:]} or RerunTrigger.all()
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(ResourceSettings(cores=1), ConfigSettings(configfiles=[configfile]),
                            snakefile=snakefile, workdir=workdir)
    workflow.dag(DAGSettings(rerun_triggers=triggers)).execute_workflow(executor="dryrun")
    dag = workflow._workflow._dag
    jobs = dag.jobs  # the command line prints no job's resources


def sbatch(job):  # the line snakemake-executor-plugin-slurm would submit, composed by the plugin itself
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    params = dict(run_uuid="u", slurm_logfile="log", comment_str=f"rule_{job.rule.name}", account="",
                  partition="", workdir=None)
    return get_submit_command(job, params) + set_gres_string(job)


print(json.dumps([{"rule": job.rule.name, "embedding": job.wildcards_dict.get("embedding"),
                   "device": job.wildcards_dict.get("device"), "gpu": job.resources.get("gpu"),
                   "constraint": job.resources.get("constraint"), "shell": job.shellcmd,
                   "output": [str(path) for path in job.output], "needrun": dag.needrun(job), "priority": job.priority,
                   "sbatch": sbatch(job) if job.rule.name in ("profile", "train") else None} for job in jobs]))
"""


def test_the_shapes_parts_train_the_whole_preset_between_them_and_a_tuned_shape_at_every_rate():
    whole = shipped("workflow/shapes.yaml")
    parts = [shipped(f"workflow/shapes-{part}.yaml") for part in ("lm", "algorithmic", "chomsky-a", "chomsky-b")]

    def cells(cfg):
        return {(job["task"], job["encoding"], job["lr"]) for job in train_jobs(cfg)}

    assert set().union(*map(cells, parts)) == cells(whole) and sum(len(train_jobs(p)) for p in parts) == 49
    assert {t for t, _, _ in cells(parts[2])} == {"duplicate_string", "missing_duplicate_string"}
    assert {t for t, _, _ in cells(parts[3])} == {"odds_first", "bucket_sort"}
    grid = [f * 0.027 for f in (0.111, 0.333, 3)]
    prose = {(e, lr) for t, e, lr in cells(parts[0]) if t == "lm_prose"}
    # every lm_prose arm at the preset's 0.027; the tuned shapes' arms (Vaswani's (E), Haviv's causal) also at
    # 0.111×, 0.333× and 3× it; Haviv's masked arms on the same grid
    assert prose == {(e, 0.027) for e in ("alibi", "rope", "none", "learned", "sinusoidal")} | {
        (e, lr) for e in ("learned", "sinusoidal", "none") for lr in grid}
    masked = {(e, lr) for t, e, lr in cells(parts[0]) if t == "mlm_prose"}
    assert masked == {(e, lr) for e in ("learned", "none") for lr in [*grid, 0.027]}
    assert {e for t, e, _ in cells(parts[1]) if t == "scan_length"} == {"none", "t5", "alibi", "rope", "sinusoidal"}
    assert {e for t, e, _ in cells(parts[1]) if t == "counting"} == {"cope", "t5", "learned"}  # CoPE's, now it exists
    # every arm at the pilot's seeds; Vaswani's confirm stage adds 14 fresh ones to its arms at the chosen rate
    confirmed = {(job["encoding"], job["lr"]): job["seeds"] for job in train_jobs(whole)
                 if job["seeds"] != [0, 1, 2, 3, 4]}
    assert confirmed == {(e, 0.027): [0, 1, 2, 3, 4, *range(100, 114)] for e in ("learned", "sinusoidal")}


def dry_run(tmp_path: Path, preset: dict | Path, rerun_triggers: tuple[str, ...] = ()) -> list[dict]:
    """Every job Snakemake would run for ``preset`` (a config, or a preset's file); with ``rerun_triggers``
    (``mtime``, ``params``, …) only those (default: all) call a job whose outputs exist out of date."""
    configfile = preset if isinstance(preset, Path) else tmp_path / "config.yaml"
    if not isinstance(preset, Path):
        configfile.write_text(yaml.safe_dump(preset))
    run = subprocess.run([sys.executable, "-c", DRY_RUN, str(ROOT / "Snakefile"), str(configfile), str(tmp_path),
                          *rerun_triggers], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def dry_run_jobs(tmp_path: Path, preset: dict) -> dict[tuple, dict]:
    """The train and probe jobs Snakemake would run for ``preset``, by (rule, embedding)."""
    return {(job["rule"], job["embedding"]): job for job in dry_run(tmp_path, preset)
            if job["rule"] in ("train", "probe")}


# Jobs per rule of each shipped preset (`snakemake -n`; README's counts); profile jobs per device.
PRESET_JOBS = {
    "config.yaml": dict(train=22, probe=6, profile=3),
    "workflow/full.yaml": dict(train=404, probe=36, profile=14),
    "workflow/cluster.yaml": dict(train=585, probe=36, profile=48),
    "workflow/smoke.yaml": dict(train=3, probe=4, profile=1),
}


@pytest.mark.parametrize("preset", sorted(PRESET_JOBS))
def test_dry_run_job_counts_of_every_preset(tmp_path, preset):
    cfg = shipped(preset)
    devices, _ = resolve_devices(cfg["devices"])
    (tmp_path / "results").mkdir()  # the working directory of a checkout: its committed references (the lr table)
    (tmp_path / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    jobs = dry_run(tmp_path, ROOT / preset)
    counts = {rule: sum(job["rule"] == rule for job in jobs) for rule in ("train", "probe", "profile")}
    expected = PRESET_JOBS[preset]
    assert counts == {**expected, "profile": expected["profile"] * len(devices)}
    assert counts["train"] == len(train_jobs(cfg))
    assert counts["profile"] == len(profile_jobs(cfg, devices))  # one per (device, mode, size, length)
    looks = cfg["train"]["comparisons"] != "none"  # the first look's checkpoint, where comparisons are declared
    assert len(jobs) == sum(counts.values()) + len(devices) + 4 + looks  # a preflight per device, aggregate, judge,
    # report, all


def test_comparison_arms_train_their_declared_seeds_budgets_and_each_rate_in_its_folder(tmp_path):
    preset = {"machine": "m", "profile": {"encodings": []},
              "train": {"comparisons": "default", "lr_factors": [0.333, 1, 3], "tasks": {"reverse": ["alibi"]}}}
    jobs = [job for job in dry_run(tmp_path, preset) if job["rule"] == "train"]
    assert len(jobs) == 12 * 3 + 1  # the withdrawn mosaic-mrope trains nothing
    shells = {job["shell"].split(" --out ")[1].split()[0].strip("'"): job["shell"] for job in jobs}
    arm = "results/records/m/train/cpu/{}/seed{{seed}}.json".format
    at_128 = shells[arm("lm_prose/tiny/rope/L128/steps500-1000-2000")]
    assert " --train-length 128 " in at_128 and " --d-model " not in at_128
    assert " --checkpoints 500 1000 2000 --decay-fraction 0.2 " in at_128
    narrow = shells[arm("lm_prose/tiny/sinusoidal_concat/d32/steps500-1000-2000/lr0.000999")]
    assert " --lr 0.000999 " in narrow and " --d-model 32 " in narrow and " --train-length " not in narrow
    at_default = shells[arm("lm_prose/tiny/sinusoidal/steps500-1000-2000")]
    lower = shells[arm("lm_prose/tiny/sinusoidal/steps500-1000-2000/lr0.000999")]
    assert " --seed 100 101 102 103 104 105 106 " in at_default and " --lr " not in at_default
    assert " --seed 0 1 2 " in lower and " --lr 0.000999 " in lower
    assert " --seed 0 1 2 --device " in shells[arm("reverse/tiny/alibi/steps2000")]
    assert " --steps 2000 " in shells[arm("reverse/tiny/alibi/steps2000")]


@pytest.mark.parametrize("device, dtype, folder, gpu", [
    ("cuda", "bfloat16", "cuda/bfloat16", 1), ("cuda:1", "float32", "cuda:1", 1), ("cpu", "float32", "cpu", 0)])
def test_train_and_probe_jobs_pass_device_and_dtype_from_their_folders_and_claim_a_gpu_on_cuda(
        tmp_path, device, dtype, folder, gpu):
    preset = {"machine": "m", "profile": {"encodings": []},
              "train": {"seeds": [0], "device": device, "dtype": dtype, "tasks": {"reverse": ["rope"]}},
              "probe": {"encodings": ["sinusoidal"], "random_widths": [16], "trained_widths": [16], "seeds": [0]}}
    jobs = dry_run_jobs(tmp_path, preset)
    assert sorted(jobs) == [("probe", "random"), ("probe", "trained"), ("train", None)]
    for key in (("train", None), ("probe", "trained")):
        assert f" --device {device} --dtype {dtype} " in jobs[key]["shell"] and jobs[key]["gpu"] == gpu
    assert (f" --out 'results/records/m/train/{folder}/reverse/tiny/rope/steps2000/seed{{seed}}.json' "
            in jobs[("train", None)]["shell"])
    assert f" --out 'results/records/m/probe/{folder}/trained/sinusoidal/" in jobs[("probe", "trained")]["shell"]
    random = jobs[("probe", "random")]  # trains nothing: runs on the CPU whatever train.device says
    assert " --device cpu --dtype float32 " in random["shell"] and random["gpu"] == 0
    assert " --out 'results/records/m/probe/cpu/random/sinusoidal/" in random["shell"]


def test_a_cuda_profile_job_asks_slurm_for_the_gpu_model_and_one_gpu(tmp_path):
    """With gpu_model set, the sbatch line the SLURM executor plugin composes for a CUDA profile (and train)
    job carries the model as a constraint and one GPU; a CPU job neither."""
    preset = {"machine": "m", "devices": ["cpu", "cuda"], "gpu_model": "h100",
              "profile": {"encodings": ["none", "rope", "alibi"], "sizes": ["tiny"], "seq_lens": [32]},
              "train": {"seeds": [0], "device": "cuda", "tasks": {"reverse": ["rope"]}}}
    jobs = {(job["rule"], job["device"]): job for job in dry_run(tmp_path, preset)
            if job["rule"] in ("profile", "train")}
    assert sorted(jobs) == [("profile", "cpu"), ("profile", "cuda"), ("train", "cuda")]
    for key in (("profile", "cuda"), ("train", "cuda")):
        line = jobs[key]["sbatch"]
        assert " -C h100 " in line and line.endswith(" --gpus=1") and line.count("--gpus") == 1, line
    cpu = jobs[("profile", "cpu")]
    assert " -C " not in cpu["sbatch"] and "--gpus" not in cpu["sbatch"] and "--exclusive" in cpu["sbatch"]
    assert " --encoding none rope alibi --size tiny --seq-len 32 --device cuda " in jobs[("profile", "cuda")]["shell"]
    assert shipped("workflow/cluster.yaml")["gpu_model"] == "h100"
    assert shipped("config.yaml")["gpu_model"] is None
