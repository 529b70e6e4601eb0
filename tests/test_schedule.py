"""Learning-rate schedules: the cosine run's factors, and warmup–stable–decay whose checkpoints are
annealed models equal to the runs that stop at them."""

import io
import math

import pytest
import torch

from posbench import records, schedule
from posbench.loss_trend import annealed_trend
from posbench.train import TrainConfig, deterministic, fit, initial_model, resolve, train

SMALL = {"train_length": 6, "eval_examples": 16}


def config(checkpoints, **changes):
    settings = {"batch_size": 8, "log_every": 100, "task_options": SMALL, "checkpoints": tuple(checkpoints), **changes}
    return TrainConfig(task="reverse", encoding="rope", **settings)


def test_cosine_warms_up_linearly_and_ends_at_a_tenth():
    factor = schedule.cosine(100, 0.1)  # warm-up 10 steps
    assert [factor(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert factor(10) == pytest.approx(1.0) and factor(55) == pytest.approx(0.55)  # half-way down the cosine
    assert factor(100) == pytest.approx(0.1)


def test_checkpoints_plan_trunk_branches_and_cost():
    plan = schedule.Checkpoints((800, 1600, 3200), decay_fraction=0.2)
    assert [plan.trunk_steps(b) for b in plan.budgets] == [640, 1280, 2560]
    assert [plan.decay_steps(b) for b in plan.budgets] == [160, 320, 640]
    assert plan.warmup == 80 and plan.total_steps == 3200 + 160 + 320  # 15 % over one run of 3,200
    assert [plan.trunk_factor(s) for s in (0, 39, 79, 2000)] == pytest.approx([1 / 80, 0.5, 1.0, 1.0])
    assert [plan.decay_factor(800, s) for s in (0, 80, 159)] == pytest.approx([1.0, 0.5, 1 / 160])


@pytest.mark.parametrize("budgets, fraction, wrong", [
    ((1600, 800), 0.2, "strictly increasing"), ((800, 800), 0.2, "strictly increasing"), ((), 0.2, "positive"),
    ((800,), 1.0, "decay_fraction 1.0"), ((10, 11), 0.5, "after the previous branch"), ((4,), 0.9, "after the warm-up"),
])
def test_a_bad_plan_is_one_line_naming_what_is_allowed(budgets, fraction, wrong):
    with pytest.raises(ValueError, match=wrong) as raised:
        schedule.Checkpoints(budgets, decay_fraction=fraction)
    assert "\n" not in str(raised.value)


def test_checkpoints_must_end_at_the_steps():
    with pytest.raises(ValueError, match=r"the last must be the run's steps \(30\)"):
        resolve(config((10, 20), steps=30))
    assert resolve(config((10, 20))).steps == 20


def final_weights(cfg):
    job = resolve(cfg)
    with deterministic(1):
        model = initial_model(job)
        fitted = fit(model, job, io.StringIO(), "t", lambda annealed, budget: {"weights": _copy(annealed)})
    return fitted, _copy(model)


def _copy(model):
    return {name: p.detach().clone() for name, p in model.state_dict().items()}


def test_a_checkpoint_is_the_model_of_the_run_that_stops_there_and_branches_leave_the_trunk_alone():
    three, three_final = final_weights(config((8, 16, 24)))
    two, two_final = final_weights(config((8, 24)))  # no branch at 16: the trunk and the end are the same
    first_two, sixteen = final_weights(config((8, 16)))
    assert all(torch.equal(three_final[k], two_final[k]) for k in three_final)
    assert all(torch.equal(three.annealed[1]["weights"][k], sixteen[k]) for k in sixteen)
    assert all(torch.equal(three.annealed[0]["weights"][k], first_two.annealed[0]["weights"][k]) for k in sixteen)
    assert not all(torch.equal(three.annealed[1]["weights"][k], three_final[k]) for k in sixteen)
    assert [(a["steps"], a["trunk_steps"], a["decay_steps"]) for a in three.annealed] == [(8, 6, 2), (16, 13, 3)]
    assert three.losses == two.losses  # the trunk's batches and steps: untouched by the branch at 16
    assert three.curve[-1]["lr"] == pytest.approx(0.003 / 5)  # the last of 24's 5 decay steps


def test_a_record_keeps_every_checkpoint_and_judges_learning_on_them():
    record = records.validate(train(config((8, 16)), log=io.StringIO()))
    assert [c["steps"] for c in record["checkpoints"]] == [8, 16] and record["config"]["checkpoints"] == [8, 16]
    last = record["checkpoints"][-1]
    assert last["validation"] == record["validation"]
    assert [e["metrics"] for e in last["eval"]] == [e["metrics"] for e in record["eval"]]
    assert [e["length"] for e in record["checkpoints"][0]["eval"]] == [6, 8, 9, 12, 24, 48]
    assert record["undertrained"]["rule"] == "annealed_checkpoints"
    losses = [c["validation"]["loss"] for c in record["checkpoints"]]
    assert record["undertrained"]["change"] == pytest.approx((losses[1] - losses[0]) / losses[1])


def test_annealed_trend_flags_a_fall_over_one_percent_and_a_rise_as_overfit():
    def at(*losses):
        return annealed_trend([{"validation": {"loss": loss}} for loss in losses])

    assert at(2.0, 1.5, 1.4)["flag"] and not at(2.0, 1.5, 1.49)["flag"]  # 7 % against 0.7 %
    assert at(2.0, 1.5, 1.6)["overfit"] and not at(2.0, 1.5, 1.49)["overfit"]
    assert math.isclose(at(2.0, 1.5, 1.6)["change"], 0.1 / 1.6) and at(1.0)["change"] is None
