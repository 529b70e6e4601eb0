"""The training loop: it learns with every encoding, repeats itself exactly, evaluates beyond the
training length item by item, says how `learned` met unseen positions, and fails cleanly."""

import copy
import io
import json
import math
import os
import re

import jsonschema
import numpy as np
import pandas as pd
import pytest
import torch

import posbench.evaluation
import posbench.tables
import posbench.train
from posbench import encodings, free_running, loss_trend, metrics, records, tasks
from posbench.__main__ import main
from posbench.aggregate import aggregate
from posbench.evaluation import position_bins
from posbench.model import build_model, count_params
from posbench.train import TrainConfig, deterministic, fit, initial_model, resolve, train

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
        metrics = e["metrics"]
        assert math.isfinite(metrics["loss"]) and 0 <= metrics["exact_match"] <= metrics["token_accuracy"] <= 1


def test_position_bins_by_hand():
    loss_sum, scored = np.array([1.0, 1, 4, 2, 0, 0, 3, 3]), np.array([1, 1, 2, 1, 0, 0, 1, 1])
    assert position_bins(loss_sum, scored, bins=4) == [
        {"start": 0, "stop": 2, "loss": 1.0, "scored": 2}, {"start": 2, "stop": 4, "loss": 2.0, "scored": 3},
        {"start": 6, "stop": 8, "loss": 3.0, "scored": 2}]  # positions 4-5 score nothing: no bin
    assert [b["stop"] for b in position_bins(np.ones(5), np.ones(5), bins=16)] == [1, 2, 3, 4, 5]  # short: one a bin


def test_loss_by_position_adds_up_to_the_loss_and_scores_only_the_answer(runs):
    """reverse at length n scores positions n … 2n − 1 (the answer) of 2n: the bins start at n's run, and
    half of the 16 runs (one position a run below 16 positions) hold a score."""
    for e in runs["rope"]["eval"]:
        bins, n = e["loss_by_position"], e["length"]
        assert sum(b["scored"] for b in bins) == e["scored_targets"] == 16 * n
        assert sum(b["loss"] * b["scored"] for b in bins) / e["scored_targets"] == pytest.approx(e["metrics"]["loss"])
        assert all(a["stop"] <= b["start"] for a, b in zip(bins, bins[1:]))
        assert bins[0]["start"] <= n < bins[0]["stop"] and bins[-1]["stop"] == 2 * n
        assert len(bins) == min(n, 8)
    assert "loss_by_position" not in runs["sinusoidal_2d"]["eval"][0]  # one label a sequence: no positions


@pytest.mark.parametrize("name", ["rope", "sinusoidal_2d"])
def test_items_are_the_evaluation_sequences_and_add_up_to_the_record(runs, name):
    record = runs[name]
    items = record["items"].columns
    assert record["items"]["rows"] == sum(e["sequences"] for e in record["eval"]) == len(items["item"])
    for e in record["eval"]:
        mine = {column: values[items["length"] == e["length"]] for column, values in items.items()}
        assert list(mine["item"]) == list(range(e["sequences"]))
        # reverse scores the n answer tokens of each sequence; digits_2d one label per image
        assert set(mine["scored"]) == ({1} if record["task"] == "digits_2d" else {e["length"]})
        sums = metrics.sums(mine)
        assert (sums["scored"], sums["sequences"]) == (e["scored_targets"], e["sequences"])
        for metric, value in e["metrics"].items():
            if metrics.get(metric).numerator == "loss_sum":  # float64 item sums vs torch's float32 batch sums
                assert metrics.get(metric).value(sums) == pytest.approx(value, rel=1e-6)
            else:
                assert metrics.get(metric).value(sums) == value


def test_train_records_the_curve_of_the_one_loop():
    config = small_config("rope", steps=7, log_every=3)
    job, log = resolve(config), io.StringIO()
    with deterministic(config.threads):
        fitted = fit(initial_model(job), job, log, "mine")
    assert train(config, log=io.StringIO())["loss_curve"] == fitted.curve
    assert [p["step"] for p in fitted.curve] == [3, 6, 7] and len(fitted.losses) == 7 and fitted.status == "ok"
    assert fitted.curve[1]["loss"] == sum(fitted.losses[3:6]) / 3 and fitted.curve[2]["loss"] == fitted.losses[6]
    progress = [line.split()[:3] for line in log.getvalue().splitlines()]
    assert progress == [["[mine]", "step", f"{s}/7"] for s in (3, 6, 7)]


def test_a_non_finite_loss_stops_the_run_before_the_step_updates_anything():
    job = resolve(small_config("rope", steps=6, lr=1e30))
    with deterministic(job.config.threads):
        fitted = fit(initial_model(job), job, io.StringIO(), "diverges")
        trainer = posbench.train.Trainer(initial_model(job), job)
        assert [trainer.step()[0] for _ in fitted.losses] == fitted.losses  # the same steps as fit's
        before = [p.detach().clone() for p in trainer.model.parameters()]
        with pytest.raises(posbench.train.Diverged) as stopped:
            trainer.step()
    failed = len(fitted.losses) + 1
    assert fitted.status == "diverged" and 1 < failed <= 6 and fitted.reason == str(stopped.value)
    assert re.fullmatch(rf"non-finite loss \((nan|inf|-inf)\) at step {failed}", fitted.reason)
    assert all(p.equal(b) for p, b in zip(trainer.model.parameters(), before))
    assert trainer.optimizer.state_dict()["state"][0]["step"].item() == failed - 1  # AdamW did not step


def test_aggregate_collects_the_items_and_reports_a_record_without_them(runs, tmp_path):
    for name in ("rope", "t5"):
        records.write_record(tmp_path / "records" / f"{name}.json", runs[name])
    records.items_path(tmp_path / "records" / "t5.json").unlink()
    meta = aggregate(tmp_path / "records", tmp_path / "tables")
    items = pd.read_parquet(tmp_path / "tables" / "items.parquet")
    assert len(items) == meta["counts"]["items"] == runs["rope"]["items"]["rows"] and meta["counts"]["accuracy"] == 2
    assert set(items["encoding"]) == {"rope"} and set(items["task"]) == {"reverse"}
    assert list(items["eval_len"].unique()) == [e["length"] for e in runs["rope"]["eval"]]
    assert np.array_equal(items["loss_sum"], runs["rope"]["items"].columns["loss_sum"])
    assert len(meta["items_unreadable"]) == 1 and "t5.items.npz unreadable" in meta["items_unreadable"][0]
    positions = pd.read_csv(tmp_path / "tables" / "positions.csv")  # every run of positions of both records
    for name in ("rope", "t5"):
        runs_of_positions = [(e["length"], b["start"], b["loss"])
                             for e in runs[name]["eval"] for b in e["loss_by_position"]]
        rows = positions[positions["encoding"] == name]
        assert list(zip(rows["eval_len"], rows["start"], rows["loss"])) == runs_of_positions
    assert meta["counts"]["positions"] == len(positions)


def test_the_tables_name_where_and_how_long_each_cell_trained(runs, tmp_path):
    """device, dtype and steps are part of a train cell, in every train table and the items: a CUDA
    bfloat16 run of the same arm and seed is a row of its own, never a second copy of the CPU one."""
    on_gpu = copy.deepcopy(runs["rope"])
    on_gpu["config"].update(device="cuda", dtype="bfloat16", steps=60)
    for name, record in (("cpu", runs["rope"]), ("gpu", on_gpu)):
        records.write_record(tmp_path / "records" / f"{name}.json", record)
    aggregate(tmp_path / "records", tmp_path / "tables")
    expected = {("cpu", "float32", 30), ("cuda", "bfloat16", 60)}
    for table in ("accuracy", "extrapolation", "positions", "items"):
        rows = pd.read_parquet(tmp_path / "tables" / f"{table}.parquet")
        assert set(zip(rows["device"], rows["dtype"], rows["steps"])) == expected, table
    items = pd.read_parquet(tmp_path / "tables" / "items.parquet")
    assert len(items) == 2 * runs["rope"]["items"]["rows"]


def test_the_tables_carry_chance_trend_validation_and_whether_positions_were_trained(runs, tmp_path):
    """``positions_trained``: the learned table's rows past the 12 positions reverse trains on kept
    their initial values, so every longer evaluation reads untrained rows; rope has no table."""
    for name in ("rope", "learned", "learned_randomized"):
        records.write_record(tmp_path / "records" / f"{name}.json", runs[name])
    aggregate(tmp_path / "records", tmp_path / "tables")
    rows = pd.read_csv(tmp_path / "tables" / "extrapolation.csv").set_index(["encoding", "eval_len"])
    learned, rope = runs["learned"], runs["rope"]
    assert rows.loc["learned", "positions_trained"].tolist() == [e["positions"] <= 12 for e in learned["eval"]]
    assert rows.loc["learned", "positions_trained"].tolist() == [True, False, False, False, False, False]
    assert rows.loc["rope", "positions_trained"].all()
    unchanged = runs["learned_randomized"]["positions_beyond_training"]["tables"]["weight"]
    assert rows.loc["learned_randomized", "positions_trained"].tolist() == [
        e["positions"] <= 96 - unchanged["rows_beyond_training_unchanged"] for e in runs["learned_randomized"]["eval"]]
    for e in rope["eval"]:
        row = rows.loc[("rope", e["length"])]
        assert math.isnan(row["chance"]) and row["token_chance"] == e["chance"]["token_accuracy"]  # exact_match: none
        assert (row["lr"], row["undertrained"], row["validation_loss"], row["train_seconds"]) == (rope["config"]["lr"],
                rope["undertrained"]["flag"], rope["validation"]["loss"], rope["wall_time_s"]["train"])
    accuracy = pd.read_csv(tmp_path / "tables" / "accuracy.csv").set_index("encoding")
    assert accuracy.loc["rope", "token_chance"] == rope["eval"][0]["chance"]["token_accuracy"]
    assert accuracy.loc["learned", "positions_trained"] and accuracy["undertrained"].dtype == bool
    # a parameter budget counts the learned table's trained rows only: 12 of its 96 (its last 84 never moved)
    learned_params = learned["params"]["position"]
    assert unchanged["rows"] == 96 and learned["positions_beyond_training"]["tables"]["weight"][
        "rows_beyond_training_unchanged"] == 84
    assert accuracy.loc["learned", "params_position_trained"] == pytest.approx(learned_params * 12 / 96)
    assert accuracy.loc["rope", "params_position_trained"] == rope["params"]["position"]


def test_the_items_are_written_before_the_record(runs, tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(np, "savez_compressed", full_disk)
    with pytest.raises(OSError):
        records.write_record(tmp_path / "r.json", runs["rope"])
    assert list(tmp_path.iterdir()) == []


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


# ----- validation curve, trend, chance ------------------------------------------------------------
@pytest.mark.parametrize("name", ["rope", "learned_randomized"])
def test_the_validation_curve_changes_no_training_step(monkeypatch, name):
    """Evaluating in the loop reads neither the data generator nor torch's (randomized positions draw
    from it in training mode only): the losses are the same bit for bit with the curve and without."""
    config = small_config(name, steps=12, log_every=6)
    job = resolve(config)
    with deterministic(config.threads):
        watched = fit(initial_model(job), job, io.StringIO(), "with")
        monkeypatch.setattr(posbench.train, "held_out_loss", lambda *args: 0.0)
        unwatched = fit(initial_model(job), job, io.StringIO(), "without")
    assert watched.losses == unwatched.losses and watched.curve == unwatched.curve
    assert len(watched.validation_curve) == 12 and {p["loss"] for p in unwatched.validation_curve} == {0.0}


def test_the_validation_curve_is_the_held_out_loss_every_fiftieth_of_training():
    config = small_config("rope", steps=105, batch_size=8)
    job = resolve(config)
    model = initial_model(job)
    with deterministic(config.threads):
        fitted = fit(model, job, io.StringIO(), "curve")
    assert [p["step"] for p in fitted.validation_curve] == [*range(2, 105, 2), 105]  # every 105 // 50 = 2, and the last
    held_out = posbench.evaluation.validation_set(job.task, 8)
    validation = torch.cat([b.inputs for b in job.task.eval_batches(6, "validation")])
    assert torch.equal(torch.cat([b.inputs for b in held_out]), validation[:8])
    assert fitted.validation_curve[-1]["loss"] == posbench.evaluation.held_out_loss(model, held_out, "float32")
    assert 0 < fitted.validation_seconds < fitted.seconds


def test_trend_flags_a_loss_still_falling_by_more_than_one_percent():
    steps = range(10, 1001, 10)  # 20 points in the last fifth (steps 810 … 1000)
    falling = [{"step": s, "loss": 2 - 0.001 * s} for s in steps]
    assert loss_trend.trend(falling, 1000) == pytest.approx(
        {"slope_per_1k_steps": -1.0, "ci_low": -1.0, "ci_high": -1.0, "points": 20, "flag": True})
    barely = [{"step": s, "loss": 2 - 1e-6 * s} for s in steps]  # falls 0.0002 over the last fifth: < 1 % of 2
    assert loss_trend.trend(barely, 1000)["flag"] is False and loss_trend.trend(barely, 1000)["ci_high"] < 0
    assert loss_trend.trend(falling[-9:], 1000) == {"slope_per_1k_steps": None, "ci_low": None, "ci_high": None,
                                                        "points": 9, "flag": False}


def test_trend_interval_is_the_students_t_interval_of_the_slope():
    from scipy import stats

    rng = np.random.default_rng(0)
    x = np.arange(410, 501, 10)  # the last fifth of 500 steps: 10 points
    y = 1.5 - 0.0004 * x + rng.normal(0, 0.01, len(x))
    trend = loss_trend.trend([{"step": int(s), "loss": v} for s, v in zip(x, y)], 500)
    fitted = stats.linregress(x, y)
    half_width = stats.t.ppf(0.975, len(x) - 2) * fitted.stderr
    assert trend["slope_per_1k_steps"] == pytest.approx(1000 * fitted.slope)
    assert (trend["ci_low"], trend["ci_high"]) == pytest.approx((1000 * (fitted.slope - half_width),
                                                                 1000 * (fitted.slope + half_width)))
    assert trend["flag"] == (fitted.slope + half_width < 0 and -fitted.slope * 100 > 0.01 * y[-1])


def test_the_record_has_the_validation_metrics_and_each_evaluation_its_chance(runs):
    for name in ("rope", "learned", "sinusoidal_2d"):
        record = runs[name]
        task = resolve(small_config(name)).task
        assert set(record["validation"]) == {"loss", *free_running.teacher_forced(task.metrics)}  # not decoded
        assert len(record["validation_curve"]) == 30 and record["undertrained"]["points"] == 6  # < 10: no line
        assert all(e["chance"] == task.chance(e["length"]) for e in record["eval"])
        assert record["wall_time_s"]["validation_curve"] < record["wall_time_s"]["train"]


def test_records_without_the_new_fields_still_validate_and_new_ones_need_them_all(runs):
    old = {key: value for key, value in runs["rope"].items() if key not in ("validation_curve", "undertrained",
                                                                         "validation")}
    old["eval"] = [{key: value for key, value in e.items() if key != "chance"} for e in old["eval"]]
    records.validate(old)
    for missing in ("undertrained", "validation"):
        with pytest.raises(jsonschema.ValidationError):
            records.validate({key: value for key, value in runs["rope"].items() if key != missing})
    with pytest.raises(jsonschema.ValidationError):
        records.validate({**runs["rope"], "eval": old["eval"]})


def test_non_finite_loss_gives_a_diverged_record(monkeypatch, tmp_path):
    """Divergence is a result (exit 0, kept on a rerun), never an error to retry."""
    real = posbench.train.scored_logits

    def poisoned(*args):
        logits, targets = real(*args)
        return logits * float("nan"), targets

    monkeypatch.setattr(posbench.train, "scored_logits", poisoned)
    out = tmp_path / "r.json"
    args = ["train", "--task", "reverse", "--encoding", "rope", "--steps", "5", "--train-length", "4",
            "--out", str(out)]
    assert main(args) == 0
    record = records.read_record(out)
    assert record["status"] == "diverged" and record["reason"] == "non-finite loss (nan) at step 1"
    assert record["eval"] == [] and record["loss_curve"] == [] and record["validation_curve"] == []
    assert record["undertrained"] is None and record["validation"] is None
    aggregate(tmp_path, tmp_path / "tables")
    for table in ("accuracy", "extrapolation"):
        (row,) = pd.read_csv(tmp_path / "tables" / f"{table}.csv").to_dict("records")
        assert row["status"] == "diverged" and math.isnan(row["value"]) and math.isnan(row["validation_loss"])


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
    assert json.loads(out.read_text()) == record  # no temporary left:
    assert sorted(out.parent.iterdir()) == [out.with_name("r.items.npz"), out]


@pytest.mark.parametrize("args, message", [
    (["--task", "sort", "--encoding", "rope"], "argument --task: invalid choice: 'sort'"),
    (["--task", "copy", "--encoding", "rotary"], "argument --encoding: invalid choice: 'rotary'"),
    (["--task", "copy", "--encoding", "rope", "--size", "huge"], "argument --size: invalid choice: 'huge'"),
    (["--task", "lm_prose", "--encoding", "rope", "--text", "novels"], "argument --text: invalid choice: 'novels'"),
    (["--task", "copy", "--encoding", "rope", "--steps", "0"],
     "argument --steps: '0' is not allowed; allowed: a positive integer"),
    (["--task", "copy", "--encoding", "rope", "--seed", "-1"],
     "argument --seed: '-1' is not allowed; allowed: an integer >= 0"),
    (["--task", "copy", "--encoding", "rope", "--device", "tpu"],
     "argument --device: 'tpu' is not allowed; allowed: cpu, cuda, cuda:N"),
    (["--task", "copy", "--encoding", "rope", "--device", "cuda:x"],
     "argument --device: 'cuda:x' is not allowed; allowed: cpu, cuda, cuda:N"),
    (["--task", "copy", "--encoding", "rope", "--dtype", "float16"],
     "argument --dtype: invalid choice: 'float16'"),
    (["--task", "copy", "--encoding", "rope", "--dtype", "bf16"],
     "argument --dtype: invalid choice: 'bf16'"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exit_:
        main(["train", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and message in err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--task", "copy", "--encoding", "rope_2d"],
     "encoding 'rope_2d' needs a task on a grid; tasks with a grid: digits_2d"),
    (["--task", "copy", "--encoding", "rope", "--data", "x.txt"], "task 'copy' has no option 'data'"),
    (["--task", "lm_prose", "--encoding", "rope", "--data", "/nonexistent.txt"], "No such file"),
    (["--task", "copy", "--encoding", "rope", "--text", "python_docs"], "task 'copy' has no option 'text'"),
    (["--task", "copy", "--encoding", "alibi", "--eval-scaling", "yarn:2"], "Alibi has no rotary frequencies to scale"),
    (["--task", "copy", "--encoding", "rope", "--eval-scaling", "ntk:2"],
     "eval scaling 'ntk:2': expected TYPE:FACTOR with TYPE one of linear, dynamic, yarn, llama3"),
    (["--task", "copy", "--encoding", "rope", "--eval-scaling", "linear:0.5"], "scaling.factor must be >= 1"),
    (["--task", "copy", "--encoding", "rope", "--d-model", "36"],
     "d_model 36 does not fit size 'tiny': allowed: a positive multiple of 8 (its 4 heads, each an even width)"),
])
def test_bad_combinations_exit_2_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "r.json"
    assert main(["train", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and not out.exists()


def test_training_free_scalings_are_evaluated_on_the_trained_model(tmp_path):
    """``--eval-scaling``: the trained RoPE model evaluated again with its frequencies scaled; each
    scaled entry equals evaluating the same weights in a model built with that scaling; the tables
    show it as an arm of its own (``rope+yarn:2``); a config without scalings keeps its old hash."""
    config = TrainConfig(task="reverse", encoding="rope", steps=30, task_options={"train_length": 6},
                         eval_scaling=("linear:2", "yarn:2"))
    record = train(config)
    plain = [e for e in record["eval"] if "eval_scaling" not in e]
    scaled = {(e["eval_scaling"], e["length"]): e for e in record["eval"] if "eval_scaling" in e}
    lengths = [e["length"] for e in plain]
    assert set(scaled) == {(label, n) for label in ("linear:2", "yarn:2") for n in lengths}
    assert scaled[("linear:2", lengths[-1])]["metrics"] != plain[-1]["metrics"]
    job = resolve(config)  # the reference: the same weights in a model built with YaRN at the training length
    reference = posbench.model.build_model(job.model.replace(encoding_options={"scaling": {
        "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": job.task.sequence_length(6)}}))
    with deterministic(config.threads):
        trained = initial_model(job)
        fit(trained, job, io.StringIO(), "again")  # same seed: the same trained weights
        reference.load_state_dict(trained.state_dict())
        again = posbench.evaluation.evaluate(reference, job.task, lengths[-1]).summary()
    assert again["metrics"] == scaled[("yarn:2", lengths[-1])]["metrics"]
    assert "eval_scaling" not in resolve(TrainConfig(task="reverse", encoding="rope")).record_config()
    assert resolve(TrainConfig(task="reverse", encoding="rope", eval_scaling=("yarn:2",))).record_config()[
        "eval_scaling"] == ["yarn:2"]
    out = tmp_path / "records" / "r.json"
    records.write_record(out, record)
    aggregate(tmp_path / "records", tmp_path / "tables")
    rows = pd.read_csv(tmp_path / "tables" / "extrapolation.csv", keep_default_na=False)
    assert set(rows["encoding"]) == {"rope", "rope+linear:2", "rope+yarn:2"}
    assert set(rows.loc[rows["encoding"] == "rope+yarn:2", "eval_scaling"]) == {"yarn:2"}
    accuracy = pd.read_csv(tmp_path / "tables" / "accuracy.csv")
    assert accuracy["value"].tolist() == [plain[0]["metrics"][record["metrics"][0]]]
# ----- device and precision ----------------------------------------------------------------------
def fit_watching(config, monkeypatch):
    """``fit`` then ``evaluate`` on ``config``'s job: the fitted run, the model, its optimizer and the dtype of
    every logits tensor the model returned."""
    job, optimizers, logits = resolve(config), [], []
    real = posbench.train.make_optimizer

    def kept(*args):
        optimizers.append(real(*args))
        return optimizers[-1]

    monkeypatch.setattr(posbench.train, "make_optimizer", kept)
    model = initial_model(job)
    model.head.register_forward_hook(lambda module, inputs, output: logits.append(output.dtype))
    with deterministic(config.threads, config.device):
        fitted = fit(model, job, io.StringIO(), "watched")
        evaluation = posbench.evaluation.evaluate(model, job.task, job.task.train_length, config.dtype)
    return fitted, evaluation, model, optimizers[0], logits


def test_bfloat16_autocasts_the_forward_and_keeps_float32_weights_and_optimizer_state(monkeypatch):
    fitted, evaluation, model, optimizer, logits = fit_watching(small_config("rope", steps=10, dtype="bfloat16"),
                                                                monkeypatch)
    reference, reference_eval, _, _, reference_logits = fit_watching(small_config("rope", steps=10), monkeypatch)
    # 10 steps, 10 curve points, 16 items scored, and reverse's greedy_exact_match decoding them: one forward of
    # the prompts and one per answer token after the first (6, SMALL's train length)
    assert len(logits) == 10 + 10 + 1 + 6 and set(logits) == {torch.bfloat16}
    assert set(reference_logits) == {torch.float32}
    batch = resolve(small_config("rope")).task.train_batch(np.random.default_rng(0), 4)
    assert posbench.evaluation.scored_logits(model, batch, "bfloat16")[0].dtype == torch.float32  # what the loss takes
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    state = [tensor for s in optimizer.state.values() for name, tensor in s.items() if name != "step"]
    assert len(state) == 2 * len(list(model.parameters())) and {t.dtype for t in state} == {torch.float32}
    assert fitted.status == "ok" and all(math.isfinite(loss) for loss in fitted.losses)
    assert fitted.losses != reference.losses  # bfloat16 rounding changes the curve ...
    assert max(abs(a - b) for a, b in zip(fitted.losses, reference.losses)) < 0.02  # ... a little
    assert evaluation.metrics["loss"] != reference_eval.metrics["loss"]
    assert evaluation.metrics["loss"] == pytest.approx(reference_eval.metrics["loss"], abs=0.02)


# A copy cell's config hash as the code wrote it before widths (aa3fe67) and, by the same rule, before --device
# (reverse's, 726cf96180462ec3, moved when its budget became 2,000 steps: task options are part of the config).
PLAIN_COPY_HASH = "7e00741a76e1bd35"


def test_a_default_record_config_keeps_the_hash_it_had_before_device_and_dtype():
    """Fields at cpu / float32 stay out of the record's config, so records written before keep their hash
    (and a batch keeps them); another device or dtype is part of the cell."""
    config = TrainConfig(task="copy", encoding="rope", steps=30, task_options={"train_length": 6})
    recorded = resolve(config).record_config()
    assert "device" not in recorded and "dtype" not in recorded
    assert records.config_hash(recorded) == PLAIN_COPY_HASH
    on_gpu = resolve(TrainConfig(**{**config.__dict__, "device": "cuda", "dtype": "bfloat16"})).record_config()
    assert on_gpu == {**recorded, "device": "cuda", "dtype": "bfloat16"}
    assert records.config_hash(on_gpu) != PLAIN_COPY_HASH


def test_a_width_replaces_the_sizes_and_names_the_cell(tmp_path):
    """``--d-model`` sets the model width (the size's depth and heads kept): lm_prose's 97 characters and
    UNK, 2 layers; per layer 4w² + 8w² + 4w, a final LayerNorm 2w, embedding V·t and head w·V. The plain
    cell's config (and so its hash) is the one it had before widths existed."""
    def total(token_width, width, task="lm_prose"):
        vocab = tasks.get(task).model_options()["vocab_size"]
        return vocab * token_width + 2 * (12 * width**2 + 4 * width) + 2 * width + width * vocab

    for encoding, width, expected in (("sinusoidal", 48, total(48, 48)), ("sinusoidal_concat", 32, total(32, 64)),
                                      ("sinusoidal_concat_fixed", 32, total(16, 32))):
        job = resolve(TrainConfig(task="lm_prose", encoding=encoding, d_model=width))
        assert count_params(build_model(job.model))["total"] == expected
        assert job.record_config()["d_model"] == width
    assert total(64, 64) == 111488 and total(32, 64) == 108352  # the matched pair of prose-naive-concat-matched
    plain = resolve(TrainConfig(task="copy", encoding="rope", steps=30, task_options={"train_length": 6}))
    assert "d_model" not in plain.record_config() and records.config_hash(plain.record_config()) == PLAIN_COPY_HASH
    out = tmp_path / "r.json"
    assert main(["train", "--task", "copy", "--encoding", "rope", "--d-model", "16", "--steps", "2",
                 "--train-length", "3", "--out", str(out)]) == 0
    record = records.read_record(out)
    assert (record["config"]["d_model"], record["model"]["width"], record["params"]["total"]) == (
        16, 16, total(16, 16, "copy"))


def test_a_cuda_device_this_machine_lacks_gives_a_skipped_record(tmp_path):
    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    out = tmp_path / "r.json"
    args = ["train", "--task", "copy", "--encoding", "rope", "--steps", "4", "--train-length", "3",
            "--device", device, "--dtype", "bfloat16", "--out", str(out)]
    assert main(args) == 1  # a failed cell fails its job (no manifest), so a rerun retries it
    record = records.read_record(out)
    assert record["status"] == "skipped" and "CUDA" in record["reason"] and "\n" not in record["reason"]
    assert (record["config"]["device"], record["config"]["dtype"]) == (device, "bfloat16")
    assert record["loss_curve"] == [] and record["eval"] == [] and "params" not in record
    assert sorted(tmp_path.iterdir()) == [out]  # no items


def test_deterministic_on_cuda_fixes_cublas_workspace_and_turns_cudnn_autotuning_off(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    with deterministic(1):
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ and torch.backends.cudnn.benchmark is False
    with deterministic(1, "cuda:0"):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and torch.backends.cudnn.benchmark is False
    assert torch.backends.cudnn.benchmark is True
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # also deterministic: a user's choice is kept
    with deterministic(1, "cuda"):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


@pytest.mark.parametrize("change, message", [
    ({"device": "mps"}, "device 'mps' is not allowed; allowed: cpu, cuda, cuda:N"),
    ({"device": "cuda:"}, "device 'cuda:' is not allowed; allowed: cpu, cuda, cuda:N"),
    ({"dtype": "float16"}, "dtype 'float16' is not allowed; allowed: float32, bfloat16"),
    ({"dtype": "fp32"}, "dtype 'fp32' is not allowed; allowed: float32, bfloat16"),
])
def test_resolve_refuses_a_device_or_dtype_no_job_takes(change, message):
    with pytest.raises(ValueError) as error:
        resolve(small_config("rope", **change))
    assert str(error.value) == message


def test_passkey_trains_and_is_scored_at_every_depth_to_32x():
    """End to end on a small passkey: each length's 22 items (two rounds of the 11 depths) scored on the
    key's four digits."""
    config = TrainConfig(task="passkey", encoding="alibi", steps=20, batch_size=8, log_every=10,
                         task_options={"train_length": 12, "min_length": 8, "eval_examples": 22})
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok"
    lengths = [(e["length"], e["positions"]) for e in record["eval"]]  # haystack, and + the 4 answer digits
    assert lengths == [(12, 16), (24, 28), (48, 52), (96, 100), (192, 196), (384, 388)]
    for evaluation in record["eval"]:
        assert evaluation["sequences"] == 22 and evaluation["scored_targets"] == 22 * 4


def test_the_tables_name_each_cell_by_length_and_width_and_plain_keeps_the_defaults(tmp_path):
    root = tmp_path / "records"
    for name, extra in (("plain", []), ("wide", ["--d-model", "16"]), ("long", ["--train-length", "4"])):
        assert main(["train", "--task", "copy", "--encoding", "rope", "--steps", "2", "--out",
                     str(root / f"{name}.json"), *extra]) == 0
    aggregate(root, tmp_path / "tables")
    default = tasks.get("copy").train_length
    for table in ("accuracy", "extrapolation"):
        frame = pd.read_csv(tmp_path / "tables" / f"{table}.csv")
        cells = sorted(set(zip(frame["train_len"], frame["d_model"], frame["params_total"])))
        assert [cell[:2] for cell in cells] == sorted([(default, 64), (default, 16), (4, 64)])
        assert set(zip(*posbench.tables.plain(frame)[["train_len", "d_model"]].values.T)) == {(default, 64)}
    items = pd.read_parquet(tmp_path / "tables" / "items.parquet")
    assert set(zip(items["train_len"], items["d_model"])) == {(default, 64), (default, 16), (4, 64)}
    assert len(posbench.tables.plain(items)) == (items["d_model"] == 64).sum() - (items["train_len"] == 4).sum()
