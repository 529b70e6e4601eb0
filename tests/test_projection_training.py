"""The projected training run: its FLOPs are posbench's analytic training count times whole steps, its GPU-hours
that count over the device's dense peak at the given share of it, the ladder's largest size close to Kaplan's 6·N
a token, and bad input a one-line error naming the flag or argument."""

import math

import pytest

from posbench import projection
from posbench.__main__ import main
from posbench.devices import BFLOAT16
from posbench.flops import analytic_flops
from posbench.sizes import non_embedding_params
from posbench.train import TrainConfig, resolve

PLANTED = projection.Device("planted", "Planted", {BFLOAT16: 2e12}, 1e12, 1e9, "test")


def lm_prose_step(size: str, encoding: str = "rope") -> tuple[int, int, int]:
    """Analytic training FLOPs of one lm_prose step at ``size``, its batch and its sequence length."""
    job = resolve(TrainConfig(task="lm_prose", encoding=encoding, size=size))
    seq_len = job.task.train_length
    return sum(analytic_flops(job.model, job.batch_size, seq_len, "train").values()), job.batch_size, seq_len


def test_flops_are_the_analytic_train_count_times_whole_steps():
    step_flops, batch, seq_len = lm_prose_step("micro")
    run = projection.project_training("micro", "rope", 3.5 * batch * seq_len, PLANTED)
    assert (run.batch_size, run.seq_len, run.steps) == (batch, seq_len, 4)  # 3.5 steps of tokens: 4 whole steps
    assert run.tokens == 4 * batch * seq_len
    assert run.flops == 4 * step_flops
    assert run.label == "projected"


def test_gpu_hours_are_flops_over_the_peak_at_the_efficiency():
    step_flops, batch, seq_len = lm_prose_step("micro")
    run = projection.project_training("micro", "rope", 10 * batch * seq_len, PLANTED, efficiency=0.25)
    assert run.gpu_hours_at_peak == pytest.approx(10 * step_flops / 2e12 / 3600, rel=1e-12)
    assert run.gpu_hours == pytest.approx(10 * step_flops / (2e12 * 0.25) / 3600, rel=1e-12)


def test_training_gpu_hours_totals_the_runs_on_a_named_device():
    step_flops, batch, seq_len = lm_prose_step("tiny", "alibi")
    hours = projection.training_gpu_hours("tiny", 7 * batch * seq_len, runs=3, device="h100", encoding="alibi",
                                          efficiency=0.5)
    assert hours == pytest.approx(3 * 7 * step_flops / (989e12 * 0.5) / 3600, rel=1e-12)


def test_the_ladders_largest_size_costs_about_six_n_a_token():
    """At width 768 and 64 tokens, attention and the head add under 5% to the 6·N of the blocks' matmuls."""
    run = projection.project_training("ladder768", "rope", 8.2e6, projection.DEVICES["h100"])
    per_token = run.flops / run.tokens
    assert 6 * non_embedding_params("ladder768") < per_token < 1.05 * 6 * non_embedding_params("ladder768")
    assert run.steps == math.ceil(8.2e6 / (run.batch_size * run.seq_len))


@pytest.mark.parametrize(("arguments", "message"), [
    (dict(tokens=-1.0), "tokens is -1.0; allowed: a number > 0"),
    (dict(tokens=math.inf), "tokens is inf; allowed: a number > 0"),
    (dict(efficiency=0.0), "efficiency is 0.0; allowed: a number in (0, 1]"),
    (dict(efficiency=1.5), "efficiency is 1.5; allowed: a number in (0, 1]"),
    (dict(runs=0), "runs is 0; allowed: a positive integer"),
])
def test_training_gpu_hours_refuses_bad_arguments_by_name(arguments, message):
    given = dict(size="micro", tokens=1e6, runs=1, device="h100") | arguments
    with pytest.raises(ValueError) as error:
        projection.training_gpu_hours(**given)
    assert str(error.value) == message


def test_cli_prints_one_projected_training_row_per_encoding(capsys):
    argv = ["project", "--shape", "posbench-small", "--device", "h100", "--train-tokens", "8.2e6",
            "--encoding", "rope", "alibi", "--train-efficiency", "0.5"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PROJECTED — not measured. Training posbench-small on lm_prose")
    assert lines[1].split()[-1] == "0.5"  # the GPU-hours column names the share it assumes
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"rope", "alibi"}
    run = projection.project_training("small", "rope", 8.2e6, projection.DEVICES["h100"], efficiency=0.5)
    assert rows["rope"][1:] == [f"{run.flops / run.tokens / 1e9:.4g}", f"{run.flops / 1e15:.4g}",
                                f"{run.gpu_hours_at_peak:.3g}", f"{run.gpu_hours:.3g}"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--shape", "posbench-micro", "--train-tokens", "-5"],
     "argument --train-tokens: '-5' is not allowed; allowed: a number > 0"),
    (["--shape", "posbench-micro", "--train-tokens", "0"],
     "argument --train-tokens: '0' is not allowed; allowed: a number > 0"),
    (["--shape", "posbench-micro", "--train-tokens", "1e6", "--train-efficiency", "0"],
     "argument --train-efficiency: '0' is not allowed; allowed: a number in (0, 1]"),
    (["--shape", "posbench-micro", "--train-tokens", "1e6", "--train-efficiency", "1.01"],
     "argument --train-efficiency: '1.01' is not allowed; allowed: a number in (0, 1]"),
    (["--shape", "posbench-micro", "--train-tokens", "1e6", "--train-efficiency", "nan"],
     "argument --train-efficiency: 'nan' is not allowed; allowed: a number in (0, 1]"),
    (["--shape", "llama-3-8b", "--train-tokens", "1e6"],
     "argument --train-tokens: applies to a posbench-<size> --shape (posbench.flops counts its training FLOPs), "
     "not llama-3-8b"),
    (["--shape", "posbench-micro", "--train-efficiency", "0.5"],
     "argument --train-efficiency: applies only with --train-tokens"),
])
def test_cli_refuses_bad_training_input_in_one_line(argv, message, capsys):
    try:
        code = main(["project", *argv])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2 and message in captured.err and captured.err.count("\n") == 1 and captured.out == ""
