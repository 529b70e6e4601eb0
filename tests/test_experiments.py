"""One experiment per plotted point and per advice row (:mod:`posbench.experiments`): on planted tables
where one arm ran at two budgets (lm_prose's sinusoidal at 300 steps and at 1,200 with another rate,
better by 0.3 bits), every report figure's points and every advice row hold the seeds of one experiment,
and the committed reference's lm_prose bars and width sweep show its per-budget means."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seaborn
from matplotlib.figure import Figure
from test_report import make_tables

from posbench import advice_situations, advise, experiments
from posbench.report import figures
from posbench.tables import load

LONGER = {"steps": 1200, "lr": 0.009}  # the second budget of one arm, 0.3 bits better than its first
FIRST = {"steps": 300, "lr": 0.003, "batch_size": 32, "d_model": 64}
DRAWN_DIRECTLY = ("verdicts_forest", "verdicts_trajectory", "passkey", "cost_accuracy", "params_flops")  # no seaborn
REFERENCE = Path(__file__).parents[1] / "results/reference/default/tables"


def with_budgets(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` at the first budget, plus lm_prose's sinusoidal at the second (0.3 better), a width sweep
    (sinusoidal at d_model 32 at the first budget, sinusoidal_concat at 32 at the second) and a training
    length sweep (rope and sinusoidal trained at 128, second budget)."""
    frame = frame.assign(**{k: v for k, v in FIRST.items() if k not in frame.columns or k == "d_model"})
    frame["steps"] = FIRST["steps"]
    prose = frame[(frame["task"] == "lm_prose") & frame["status"].eq("ok")]
    sinusoidal = prose[prose["encoding"] == "sinusoidal"]
    longer = sinusoidal.assign(**LONGER, value=sinusoidal["value"] - 0.3)
    narrow = sinusoidal.assign(d_model=32, value=sinusoidal["value"] + 0.1, params_total=60_000)
    concat = longer.assign(encoding="sinusoidal_concat", d_model=32, value=longer["value"] + 0.01)
    long_train = prose[prose["encoding"].isin(["rope", "sinusoidal"])].assign(**LONGER, train_len=128)
    long_train["value"] -= 0.05
    if "eval_len" in frame.columns:
        long_train = long_train.assign(eval_len=(128 * long_train["length_ratio"]).astype(int))
    return pd.concat([frame, longer, narrow, concat, long_train], ignore_index=True)


def position_rows() -> pd.DataFrame:
    """Loss by position for lm_prose's rope and sinusoidal, sinusoidal at both budgets."""
    rows = [{"machine": "m", "status": "ok", "task": "lm_prose", "encoding": encoding, "size": "tiny", "seed": seed,
             "train_len": 64, "d_model": 64, "batch_size": 32, "eval_len": 512, "start": start, "stop": start + 32,
             "loss": np.log(2) * (2 + seed % 3 - (0.5 if steps == 1200 else 0)), "scored": 512, "steps": steps}
            for encoding, steps in (("rope", 300), ("sinusoidal", 300), ("sinusoidal", 1200))
            for seed in range(3) for start in range(0, 512, 32)]
    return pd.DataFrame(rows)


def passkey_items() -> pd.DataFrame:
    """alibi's passkey items at both budgets: every key found at 1,200 steps, those of odd items at 300."""
    return pd.DataFrame([{"machine": "m", "task": "passkey", "encoding": "alibi", "size": "tiny", "train_len": 64,
                          "d_model": 64, "steps": steps, "seed": seed, "eval_len": length, "item": item,
                          "loss_sum": 1.0, "scored": 4, "correct": 4, "exact": int(steps == 1200 or item % 2)}
                         for steps in (300, 1200) for seed in (0, 1) for length in (64, 128) for item in range(22)])


def judged_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """verdicts.csv and trajectory.csv as the judge step writes them: one row per comparison and size (and budget)."""
    verdicts = pd.DataFrame([{"row": "standard_nlp", "comparison": f"c{i}", "task": "lm_prose",
                              "metric": "bits_per_char", "length_ratio": 1.0, "size": "tiny", "add_arm": "sinusoidal",
                              "comparator_arm": arm,
                              "effect": 0.01 * i, "ci_low": -0.02, "ci_high": 0.03, "margin": 0.05,
                              "outcome": "comparator not better by δ", "row_verdict": "supported", "decides": True}
                             for i, arm in enumerate(("rope", "alibi"))])
    trajectory = pd.DataFrame([{"comparison": "c0", "size": "tiny", "budget": budget, "effect": 0.01, "ci_low": -0.02,
                                "ci_high": 0.04, "margin": 0.05, "metric": "bits_per_char", "decides_row": True}
                               for budget in (100, 200, 300)])
    return verdicts, trajectory


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("experiments")
    make_tables(folder)
    for name in ("accuracy", "extrapolation"):
        with_budgets(pd.read_csv(folder / f"{name}.csv")).to_csv(folder / f"{name}.csv", index=False)
    cost = pd.read_csv(folder / "cost.csv")
    rope = cost[(cost["encoding"] == "rope") & (cost["device"] == "cpu")]
    decode = cost[cost["device"] == "cpu"].assign(mode="decode")
    pd.concat([cost, rope.assign(dtype="bfloat16", latency_median_ms=rope["latency_median_ms"] / 2), decode],
              ignore_index=True).to_csv(folder / "cost.csv", index=False)
    position_rows().to_csv(folder / "positions.csv", index=False)
    passkey_items().to_parquet(folder / "items.parquet", index=False)
    verdicts, trajectory = judged_rows()
    verdicts.to_csv(folder / "verdicts.csv", index=False)
    trajectory.to_csv(folder / "trajectory.csv", index=False)
    return folder


def point_key(data: pd.DataFrame) -> tuple[str, ...]:
    """What one plotted point's rows must share: a cost curve's run, else a train experiment."""
    return (*experiments.COST_BUDGET, "size") if "latency_median_ms" in data.columns else experiments.EXPERIMENT


def test_no_figure_plots_a_point_that_pools_two_experiments(tables, monkeypatch):
    """Every seaborn point (a line's x per hue, a bar's row) is checked as drawn; the figures drawn without
    seaborn through their data functions."""
    drawn: dict[str, list[tuple[pd.DataFrame, list[str]]]] = {}
    figure_name = [""]

    def capture(original, point):
        def draw(data, *args, **kwargs):
            drawn.setdefault(figure_name[0], []).append((data, point(kwargs)))
            return original(data, *args, **kwargs)
        return draw

    monkeypatch.setattr(seaborn, "lineplot", capture(seaborn.lineplot, lambda k: [k["hue"], k["x"]]))
    monkeypatch.setattr(seaborn, "pointplot", capture(seaborn.pointplot, lambda k: [k["y"]]))
    loaded = load(tables)
    for spec in figures.REPORT_FIGURES:
        assert spec.missing(loaded) is None, spec.name
        figure_name[0] = spec.name
        spec.draw(Figure(figsize=(8, spec.height)), (0.0, 0.0, 1.0, 1.0), loaded)
    assert set(drawn) | set(DRAWN_DIRECTLY) == {spec.name for spec in figures.REPORT_FIGURES}
    for name, calls in drawn.items():
        for data, point in calls:
            assert experiments.mixed(data, point, point_key(data)).empty, name
    assert figures.compared_rows(loaded).duplicated(["comparison", "size"]).sum() == 0
    assert figures.trajectory_rows(loaded).duplicated(["comparison", "size", "budget"]).sum() == 0
    rows, summary = figures.cost_accuracy_points(loaded)
    assert experiments.mixed(rows, ["panel", "encoding"]).empty and len(summary) == len(rows.groupby(["panel",
                                                                                                      "encoding"]))


def test_an_arm_at_two_budgets_is_two_panels_each_with_its_budgets_mean(tables):
    loaded = load(tables)
    accuracy = pd.read_csv(tables / "accuracy.csv")
    plain = accuracy[(accuracy["task"] == "lm_prose") & (accuracy["train_len"] == 64) & (accuracy["d_model"] == 64)]
    expected = plain.groupby(["steps", "encoding"])["value"].mean()
    bars = figures.accuracy_rows(loaded)
    shown = bars[bars["task"] == "lm_prose"].groupby(["panel", "encoding"])["value"].mean()
    assert set(shown.index.get_level_values(0)) == {"lm_prose · 300 steps", "lm_prose · 1,200 steps"}
    assert shown["lm_prose · 1,200 steps"].to_dict() == pytest.approx(expected[1200].to_dict())
    assert shown["lm_prose · 300 steps"].to_dict() == pytest.approx(expected[300].to_dict())
    width = figures.swept_rows(loaded, "d_model").groupby(["panel", "encoding", "d_model"])["value"].mean()
    assert set(width["lm_prose · 1,200 steps"].index) == {("sinusoidal", 64), ("sinusoidal_concat", 32)}
    assert {("sinusoidal", 32), ("sinusoidal", 64), ("rope", 64)} <= set(width["lm_prose · 300 steps"].index)
    assert width["lm_prose · 1,200 steps", "sinusoidal", 64] == pytest.approx(expected[1200, "sinusoidal"])
    cells = figures.passkey_cells(loaded).groupby("panel")["exact"].mean()
    assert cells.to_dict() == pytest.approx({"alibi · 300 steps": 0.5, "alibi · 1,200 steps": 1.0})
    curves = figures.position_curves(loaded)
    assert set(curves["panel"]) == {"lm_prose · 300 steps", "lm_prose · 1,200 steps"}


def test_a_panel_names_only_what_differs_and_one_rate_per_arm():
    frame = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 2, "encoding": ["x", "x", "y", "y", "x", "x"],
                          "steps": [100, 100, 100, 100, 100, 200], "dtype": ["float32"] * 5 + ["bfloat16"],
                          "lr": [0.1, 0.2, 0.1, 0.1, 0.1, 0.1], "validation_loss": [2.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                          "value": range(6)})
    split = experiments.one_experiment(frame)
    assert split["panel"].tolist() == ["a", "a", "a", "b · 100 steps, float32", "b · 200 steps, bfloat16"]
    assert split["lr"].tolist() == [0.2, 0.1, 0.1, 0.1, 0.1]  # a's x: the rate with the lower validation loss
    assert experiments.mixed(frame, ["task", "encoding"])["task"].tolist() == ["a", "b"]
    assert experiments.mixed(split, ["panel", "encoding"]).empty


def test_every_advice_row_holds_one_experiments_seeds(tables):
    """Each row advice ranks or lists is the seeds of one experiment at its length (values matched whole)."""
    inputs = advise.load(tables)
    results = inputs.extrapolation
    columns = experiments.present(results)
    for label, situation in advice_situations.SITUATIONS:
        advice = advise.advise(situation, inputs)
        for encoding, row in ((c.encoding, r) for c in [*advice.ranked, *advice.uncertain] for r in c.rows):
            cell = results[(results["task"] == row.task) & (results["encoding"] == encoding)
                           & np.isclose(results["length_ratio"], row.length_ratio)]
            matches = [k for k, seeds in cell.groupby(columns, dropna=False)
                       if sorted(seeds["value"]) == pytest.approx(sorted(row.values))]
            assert len(matches) == 1, (label, row.group, encoding)
    prose = advise.advise(advise.Situation(task="nlp"), inputs)
    sinusoidal = next(c for c in prose.ranked if c.encoding == "sinusoidal")
    assert {r.group for r in sinusoidal.rows if r.task == "lm_prose"} == {"lm_prose · 300 steps",
                                                                            "lm_prose · 1,200 steps"}


def test_the_reference_report_shows_lm_prose_per_budget_means():
    """The accuracy bars and the width sweep of the committed reference equal accuracy.csv's means per
    encoding and budget: no bar averages 2,000-step seeds with 500-step ones."""
    loaded = load(REFERENCE)
    accuracy = pd.read_csv(REFERENCE / "accuracy.csv")
    prose = accuracy[accuracy["task"] == "lm_prose"]
    expected = prose.groupby(["encoding", "train_len", "d_model", "steps"])["value"].mean()
    bars = figures.accuracy_rows(loaded)
    shown = bars[bars["task"] == "lm_prose"].groupby(["encoding", "steps"])["value"].mean()
    assert len(shown) == 7  # six encodings at 500 steps, sinusoidal at 2,000 too
    for (encoding, steps), value in shown.items():
        assert value == pytest.approx(expected[encoding, 64, 64, steps])
    for _, point in figures.swept_rows(loaded, "d_model").groupby(["panel", "encoding", "d_model"]):
        assert point["steps"].nunique() == 1 and point["value"].mean() == pytest.approx(
            expected[point["encoding"].iloc[0], 64, point["d_model"].iloc[0], point["steps"].iloc[0]])
