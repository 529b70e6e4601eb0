"""Tuning as a step: both arms on one grid, grown past an edge at most twice, chosen on validation loss,
and read back by the workflow."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from posbench import comparisons, tasks, tune
from posbench import workflow as pw
from posbench.__main__ import main
from posbench.comparisons import ArmSpec
from posbench.workflow_config import validate_config

SCAN = comparisons.load().by_id["scan-rope"]  # SCAN's default rate 0.003


def valley(best: float, diverge_above: float = math.inf):
    """A planted trainer: validation loss |log3(rate / best)| + seed/100, infinite (diverged) above a rate."""
    calls = []

    def run(arm: ArmSpec, rate: float, seed: int) -> float:
        calls.append((arm.encoding, rate, seed))
        return math.inf if rate > diverge_above else abs(math.log(rate / best, 3)) + seed / 100
    return run, calls


def test_the_grid_is_the_default_and_a_factor_three_either_side():
    assert tune.initial_grid("scan") == [0.001, 0.003, 0.009]
    assert tune.SEEDS == (0, 1, 2) and max(tune.SEEDS) < comparisons.load().seed_rule.first_seed


ROPE = ArmSpec("scan", "rope")


def test_an_inner_best_is_chosen_at_once_on_three_seeds_per_rate():
    run, calls = valley(0.003)
    grid, losses, chosen = tune.tune_arms((ROPE,), run)
    assert (grid, chosen) == ([0.001, 0.003, 0.009], {ROPE: 0.003}) and len(calls) == 9
    assert losses[ROPE][0.003] == pytest.approx([0.0, 0.01, 0.02])


def test_a_best_at_an_edge_grows_the_grid_at_most_twice():
    run, _ = valley(0.0003)  # two steps below the grid: found after two extensions
    grid, _, chosen = tune.tune_arms((ROPE,), run)
    assert grid == [0.0001111, 0.0003333, 0.001, 0.003, 0.009] and chosen == {ROPE: 0.0003333}
    run, _ = valley(1e-6)  # far below: still at the edge after two extensions, and marked so
    table = tune.table(SCAN, run, "tiny")
    rope = table[table["encoding"] == "rope"]
    assert len(rope) == 5 and rope["chosen"].sum() == 1
    assert rope.loc[rope["chosen"], ["lr", "at_edge"]].values.tolist() == [[0.0001111, True]]
    assert set(table["grid"]) == {"0.0001111 0.0003333 0.001 0.003 0.009"}  # one grid for both arms
    assert (table["steps"] == 3200).all() and set(table["encoding"]) == {"sinusoidal", "rope"}


def test_a_diverged_rate_is_never_chosen():
    run, _ = valley(0.02, diverge_above=0.005)  # the best would be above the grid, where the runs diverge
    grid, losses, chosen = tune.tune_arms((ROPE,), run)
    assert chosen == {ROPE: 0.003} and math.isinf(tune.mean(losses[ROPE][0.009])) and grid == [0.001, 0.003, 0.009]


def test_an_edge_of_either_arm_grows_the_one_grid_of_both():
    """rope's best lies below the grid, sinusoidal's above: each extension adds a rate at both ends, and both
    arms train at every rate (5 rates × 3 seeds × 2 arms), each chosen inside the grid."""
    calls = []

    def run(arm: ArmSpec, rate: float, seed: int) -> float:
        calls.append((arm.encoding, rate))
        return abs(math.log(rate / (0.0003333 if arm.encoding == "rope" else 0.027), 3)) + seed / 100

    table = tune.table(SCAN, run, "tiny")
    assert set(table["grid"]) == {"0.0001111 0.0003333 0.001 0.003 0.009 0.027 0.081"}  # both best at an edge twice
    chosen = table[table["chosen"]].set_index("encoding")
    assert chosen.loc["rope", "lr"] == 0.0003333 and chosen.loc["sinusoidal", "lr"] == 0.027
    assert not chosen["at_edge"].any()
    assert len(calls) == 2 * 3 * 7 and len(set(calls)) == 2 * 7


def tuned_table(path, sizes=("tiny",), best: float = 0.009, comparison_ids=None) -> str:
    """An lr.csv of every default comparison (or those named) tuned at ``sizes`` by the planted valley."""
    run, _ = valley(best)
    chosen = [c for c in comparisons.load().in_preset("default") if not c.withdrawn
              and (comparison_ids is None or c.id in comparison_ids)]
    pd.concat([tune.table(c, run, size) for c in chosen for size in sizes]).to_csv(path, index=False)
    return str(path)


def test_the_workflow_trains_each_tuned_arm_at_its_chosen_rate(tmp_path):
    path = tuned_table(tmp_path / "lr.csv")
    rates = tune.chosen_rates(path)
    assert rates[("scan", "sinusoidal", "tiny", 48, 64, 3200)] == rates[("scan", "rope", "tiny", 48, 64, 3200)] == 0.009
    config = validate_config({"train": {"comparisons": "default", "tasks": {"scan": ["rope"]}, "lr_table": path}})
    rates = {(j["task"], j["encoding"], j["steps"]): j["lr"] for j in pw.train_jobs(config)}
    assert rates["scan", "rope", "800-1600-3200"] == 0.009  # tuned at the comparison's budget
    assert rates["scan", "rope", "800"] == 0.003  # the descriptive arm at SCAN's own 800 steps: not tuned there
    with pytest.raises(pw.ConfigError, match=r"^config key 'train.lr_table': lr table .* does not exist"):
        validate_config({"train": {"comparisons": "default", "lr_table": str(tmp_path / "none.csv")}})
    pd.DataFrame({"lr": [0.1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="no column comparison, size, task"):
        tune.chosen_rates(tmp_path / "bad.csv")


def test_a_table_that_lacks_a_deciding_arm_or_a_size_stops_before_any_job(tmp_path):
    """An arm the table has no rate for would train at train.lr unnoticed: validation refuses, naming it."""
    scan_only = tuned_table(tmp_path / "scan.csv", comparison_ids={"scan-rope"})
    with pytest.raises(pw.ConfigError, match=r"^config key 'train.lr_table': .*scan.csv has no rate for "
                                             r"prose-rope-L128's arm sinusoidal at tiny \(2000 steps\); tune it first"):
        validate_config({"train": {"comparisons": "default", "lr_table": scan_only}})
    tuned_table(tmp_path / "lr-tiny.csv")
    per_size = str(tmp_path / "lr-{size}.csv")
    assert validate_config({"train": {"comparisons": "default", "lr_table": per_size}})  # tiny's table exists
    with pytest.raises(pw.ConfigError, match=r"lr table .*lr-micro.csv does not exist"):
        validate_config({"train": {"comparisons": "default", "sizes": ["tiny", "micro"], "lr_table": per_size}})


def test_each_size_reads_its_own_table_and_descriptive_arms_may_take_the_added_arms_rate(tmp_path):
    """The scale preset: a table per size ({size} in the path), each arm at its size's rate (widths declared at
    tiny scale with the size: naive concat at half the adding arm's); with descriptive_lr tuned, a descriptive
    arm at a tuned cell's task, size, length and budget takes that cell's added arm's rate."""
    tuned_table(tmp_path / "lr-tiny.csv", best=0.009)
    tuned_table(tmp_path / "lr-small.csv", sizes=("small",), best=0.001)
    train = {"comparisons": "default", "sizes": ["tiny", "small"], "lr_table": str(tmp_path / "lr-{size}.csv"),
             "tasks": {"lm_prose": ["none"]}, "steps": 2000}
    jobs = pw.train_jobs(validate_config({"train": {**train, "descriptive_lr": "tuned"}}))
    rates = {(j["encoding"], j["size"], j["d_model"], j["steps"]): j["lr"] for j in jobs if j["task"] == "lm_prose"}
    assert rates["sinusoidal_concat", "tiny", 32, "500-1000-2000"] == 0.009
    assert rates["sinusoidal_concat", "small", 64, "500-1000-2000"] == 0.001
    assert rates["none", "tiny", None, "2000"] == 0.009 and rates["none", "small", None, "2000"] == 0.001
    plain = pw.train_jobs(validate_config({"train": train}))
    assert {j["lr"] for j in plain if j["encoding"] == "none"} == {tasks.get("lm_prose").lr}  # config: not tuned


def test_an_unknown_comparison_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["tune", "--comparison", "scan-rop", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("posbench tune: error: unknown comparison 'scan-rop' in preset all; allowed: prose-rope")
    assert error.count("\n") == 1 and not any(tmp_path.iterdir())


def test_a_preset_scales_every_declared_budget_and_tune_reads_it():
    """full trains each comparison at budgets.scale = 4 times its declared steps (SCAN 3,200 -> 12,800, its
    checkpoints 3,200 and 6,400: 4× and 8× the steps before the budget axis); default and all at the declared."""
    declared = comparisons.load()
    assert declared.budget_rule.scale == {"default": 1, "full": 4}
    assert tune.declared("scan-rope").budget == tune.declared("scan-rope", "default").budget == 3200
    full = tune.declared("scan-rope", "full")
    assert full.budget == 12_800 and declared.budget_rule.budgets(full.budget) == (3200, 6400, 12_800)
    assert full.seeds() == declared.by_id["scan-rope"].seeds()  # only the budget changes
    assert tune.declared("reverse-rope", "full").budget == 4 * tasks.get("reverse").steps


@pytest.mark.parametrize(("scale", "message"), [
    ({"nightly": 2}, "budgets.scale = {'nightly': 2}; allowed: a mapping of presets (default, full) to integers >= 1"),
    ({"full": 0.5}, "budgets.scale = {'full': 0.5}; allowed: a mapping of presets (default, full) to integers >= 1"),
    ("4", "budgets.scale = '4' has the wrong type; expected dict"),
])
def test_a_bad_budget_scale_is_one_line_naming_the_key(tmp_path, scale, message):
    import yaml

    data = yaml.safe_load(comparisons.PATH.read_text())
    data["budgets"]["scale"] = scale
    path = tmp_path / "comparisons.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="budgets.scale") as error:
        comparisons.load(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_grid_starts_where_an_earlier_tuning_of_its_arms_ended():
    """Another size's chosen rates start the grid: their geometric mean on the default's lattice of factor 3."""
    prose = comparisons.load().by_id["prose-rope-L128"]  # lm_prose's default rate 0.003
    assert tune.grid_centre(prose.arms, {"sinusoidal": 0.027, "rope": 0.027}) == 0.027
    assert tune.grid_centre(prose.arms, {"sinusoidal": 0.009, "rope": 0.081}) == 0.027  # between: the mean
    assert tune.grid_centre(prose.arms, {"sinusoidal": 0.027}) is None  # an arm without one: the task's default
    assert tune.initial_grid("lm_prose", 0.027) == [0.009, 0.027, 0.081]
    run, calls = valley(0.03)
    table = tune.table(prose, run, "small", 0.027)
    assert set(table["grid"]) == {"0.009 0.027 0.081"} and len(calls) == 2 * 3 * 3  # no rate beyond the three


def test_a_missing_start_table_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["tune", "--comparison", "scan-rope", "--start-from", str(tmp_path / "none.csv"),
                 "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("posbench tune: error: argument --start-from: no file") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_collecting_the_lr_table_concatenates_each_comparisons_table_and_trains_nothing(tmp_path, capsys):
    """The workflow's lr_table step: rows as each comparison's tuning wrote them, even where a tuning again
    (another grid start) would have trained other rates; no record is written."""
    planted = {name: pd.DataFrame({"comparison": [name] * 2, "size": ["micro"] * 2, "encoding": ["sinusoidal", "rope"],
                                   "lr": [0.009, 0.027], "validation_loss": [1.7603563169638317, 1.6801537424325943],
                                   "chosen": [True, True], "at_edge": [False, False]})
               for name in ("scan-rope", "prose-rope-L128")}
    for name, table in planted.items():
        table.to_csv(tmp_path / f"{name}-micro.csv", index=False)
    argv = ["tune", "--comparison", *planted, "--size", "micro", "--out", str(tmp_path), "--collect"]
    assert main([*argv, "--lr-table", str(tmp_path / "lr-micro.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "lr-micro.csv"),
                                  pd.concat(planted.values(), ignore_index=True))
    assert not (tmp_path / "records").exists()
    assert capsys.readouterr().out == f"wrote {tmp_path / 'lr-micro.csv'}: 2 comparison(s), collected\n"


def test_collecting_before_a_comparison_is_tuned_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["tune", "--comparison", "scan-rope", "--size", "micro", "--out", str(tmp_path), "--collect",
                 "--lr-table", str(tmp_path / "lr-micro.csv")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"posbench tune: error: argument --collect: no tuned table {tmp_path}/scan-rope-micro.csv")
    assert error.count("\n") == 1 and not (tmp_path / "lr-micro.csv").exists()
