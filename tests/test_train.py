"""The training loop: it learns with every encoding, repeats itself exactly, evaluates beyond the
training length, says how `learned` met unseen positions, and fails cleanly."""

import json
import math

import numpy as np
import pytest
import torch

import posbench.train
from posbench import encodings, records, tasks
from posbench.__main__ import main
from posbench.train import TrainConfig, train

SMALL = {"train_length": 6, "eval_examples": 16}  # reverse: eval lengths 6 … 48, sequences up to 96 positions


def small_config(encoding, task=None, **changes):
    task = task or ("digits_2d" if encoding.endswith("_2d") else "reverse")
    options = {} if task == "digits_2d" else SMALL
    settings = {"steps": 30, "batch_size": 16, "log_every": 10, "task_options": options, **changes}
    return TrainConfig(task=task, encoding=encoding, **settings)


@pytest.fixture(scope="module")
def runs():
    """One short run per encoding, shared by the tests below."""
    return {name: train(small_config(name), log=open("/dev/null", "w")) for name in encodings.names()}


@pytest.mark.parametrize("name", encodings.names())
def test_a_few_steps_lower_the_loss(runs, name):
    record = runs[name]
    curve = [point["loss"] for point in record["loss_curve"]]
    assert record["status"] == "ok" and len(curve) == 3
    assert curve[-1] < curve[0] - 0.05


@pytest.mark.parametrize("name", encodings.names())
def test_evaluation_at_every_length(runs, name):
    record = records.validate(runs[name])
    if record["task"] == "digits_2d":
        assert [e["length"] for e in record["eval"]] == [16] and record["model"]["encoding_options"] == {"grid": (4, 4)}
        assert 0 <= record["eval"][0]["metrics"]["accuracy"] <= 1
        return
    assert [e["length"] for e in record["eval"]] == [6, 8, 9, 12, 24, 48]  # 7.5 rounds to 8 (half to even)
    assert [e["positions"] for e in record["eval"]] == [12, 16, 18, 24, 48, 96]
    assert record["model"]["max_len"] == 96
    for e in record["eval"]:
        assert e["sequences"] == 16 and e["scored_targets"] == 16 * e["length"]
        assert math.isfinite(e["metrics"]["loss"]) and 0 <= e["metrics"]["exact_match"] <= e["metrics"]["token_accuracy"] <= 1


def test_learned_table_beyond_training_is_untrained_as_the_record_says(runs):
    beyond = runs["learned"]["positions_beyond_training"]
    assert beyond["trained_positions"] == 12 and beyond["max_len"] == 96
    assert beyond["tables"] == {"weight": {"rows": 96, "rows_beyond_training": 84, "rows_beyond_training_unchanged": 84,
                                           "rows_within_training_changed": 12}}
    assert "keep their random initialisation" in beyond["handling"]
    assert runs["learned"]["params"]["position"] == 96 * 64
    for name in ("sinusoidal", "rope", "alibi", "t5"):
        assert runs[name]["positions_beyond_training"]["tables"] == {}
        assert "no per-position parameters" in runs[name]["positions_beyond_training"]["handling"]


def test_same_seed_same_numbers_other_seed_other_numbers():
    quiet = open("/dev/null", "w")
    first, again = (train(small_config("t5", steps=10), log=quiet) for _ in range(2))
    other = train(small_config("t5", steps=10, seed=1), log=quiet)
    assert first["loss_curve"] == again["loss_curve"] and first["eval"] == again["eval"]
    assert first["config_hash"] == again["config_hash"] != other["config_hash"]
    assert other["loss_curve"] != first["loss_curve"]


def test_training_data_follows_the_seed(monkeypatch):
    """The first training batch of seed s is the task's batch from ``default_rng(s)``: seeds 0 and 1
    see different data, and each sees the data of its own seed (not, say, always seed 0's)."""
    options = {"train_length": 6, "eval_examples": 4, "eval_factors": (1.0,)}
    task = tasks.get("reverse", **options)
    real = type(task).train_batch
    seen = []

    def recording(self, rng, batch_size):
        batch = real(self, rng, batch_size)
        seen.append(batch)
        return batch

    monkeypatch.setattr(type(task), "train_batch", recording)
    first = {}
    for seed in (0, 1):
        seen.clear()
        record = train(TrainConfig(task="reverse", encoding="none", seed=seed, steps=1, batch_size=8,
                                   task_options=options), log=open("/dev/null", "w"))
        assert record["status"] == "ok" and len(seen) == 1
        first[seed] = seen[0]
    assert not torch.equal(first[0].inputs, first[1].inputs), "seeds 0 and 1 trained on the same first batch"
    for seed, batch in first.items():
        expected = real(task, np.random.default_rng(seed), 8)
        assert torch.equal(batch.inputs, expected.inputs), f"seed {seed}: first batch is not default_rng({seed})'s"
        assert torch.equal(batch.targets, expected.targets)


def test_non_finite_loss_gives_an_error_record(monkeypatch, tmp_path):
    real = posbench.train.scored_logits

    def poisoned(model, batch):
        logits, targets = real(model, batch)
        return logits * float("nan"), targets

    monkeypatch.setattr(posbench.train, "scored_logits", poisoned)
    out = tmp_path / "r.json"
    args = ["train", "--task", "reverse", "--encoding", "rope", "--steps", "5", "--train-length", "4", "--out", str(out)]
    assert main(args) == 1
    record = records.read_record(out)
    assert record["status"] == "error" and record["reason"] == "non-finite loss (nan) at step 1"
    assert record["eval"] == [] and record["loss_curve"] == []


def test_cli_writes_a_valid_record_and_reports_progress(tmp_path, capsys):
    out = tmp_path / "sub" / "r.json"
    args = ["train", "--task", "copy", "--encoding", "alibi", "--steps", "4", "--train-length", "3",
            "--log-every", "2", "--seed", "3", "--out", str(out)]
    assert main(args) == 0
    record = records.read_record(out)
    assert record["kind"] == "train" and record["config"]["seed"] == 3 and record["config"]["steps"] == 4
    assert [p["step"] for p in record["loss_curve"]] == [2, 4]
    assert record["wall_time_s"]["total"] >= record["wall_time_s"]["train"] > 0
    lines = [line for line in capsys.readouterr().err.splitlines() if " step " in line]
    assert [line.split(" step ")[1].split()[0] for line in lines] == ["2/4", "4/4"]
    assert json.loads(out.read_text()) == record and list(out.parent.iterdir()) == [out]  # no temporary left


@pytest.mark.parametrize("args, message", [
    (["--task", "sort", "--encoding", "rope"], "argument --task: invalid choice: 'sort'"),
    (["--task", "copy", "--encoding", "rotary"], "argument --encoding: invalid choice: 'rotary'"),
    (["--task", "copy", "--encoding", "rope", "--size", "huge"], "argument --size: invalid choice: 'huge'"),
    (["--task", "copy", "--encoding", "rope", "--steps", "0"], "argument --steps: must be a positive integer, got 0"),
    (["--task", "copy", "--encoding", "rope", "--seed", "-1"], "argument --seed: must be >= 0, got -1"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exit_:
        main(["train", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and message in err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--task", "copy", "--encoding", "rope_2d"], "encoding 'rope_2d' needs a task on a grid; tasks with a grid: digits_2d"),
    (["--task", "copy", "--encoding", "rope", "--data", "x.txt"], "task 'copy' has no option 'data'"),
    (["--task", "lm_prose", "--encoding", "rope", "--data", "/nonexistent.txt"], "No such file"),
])
def test_bad_combinations_exit_2_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "r.json"
    assert main(["train", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and not out.exists()
