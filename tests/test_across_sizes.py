"""Verdicts across model sizes (posbench.across_sizes, the judge step's scale.csv) and the report's page of
them: planted verdicts at three sizes give each of the four trend outcomes, scale.csv carries each size's
parameters, tokens, seeds and undertrained share, it is written only for two sizes or more, its parameter
count is the built model's, and the report shows the page and page 1's column only when it exists."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_report import SEEDS, make_tables, pdf_text, planted_line, squeeze

import posbench
from posbench import across_sizes, judge
from posbench.report import across_sizes as report_page
from posbench.report import build_report
from posbench.sizes import SIZES, non_embedding_params

LADDER = ("micro", "tiny", "small")  # N = 38,400, 98,304, 786,432: 20× apart
BETTER, NOT_BETTER = "comparator better by more than δ", "comparator not better by δ"
BATCH = {"micro": 32, "tiny": 32, "small": 16}  # small trains half the batch: its tokens differ
STEPS = 1000
TRAIN_SECONDS = {"micro": 10.0, "tiny": 20.0, "small": 80.0}
# row -> (comparison, task, effects at LADDER, outcomes at LADDER, margin)
PLANTED = {
    "standard_nlp": ("scan-rope", "scan", (0.01, 0.03, 0.0), (NOT_BETTER,) * 3, 0.1),
    "precise_position": ("code-brackets-rope", "code_brackets", (0.20, 0.15, 0.05), (BETTER,) * 3, 0.01),
    "long_sequences": ("passkey-alibi", "passkey", (-0.01, -0.03, -0.07), (NOT_BETTER,) * 3, 0.1),
    "fixed_length": ("reverse-t5", "reverse", (0.05, 0.2, 0.3), (NOT_BETTER, BETTER, BETTER), 0.1),
}


def planted_verdicts(rows=PLANTED, sizes=LADDER) -> pd.DataFrame:
    lines = [planted_line(row, comparison, task, "exact_match", outcomes[i], size=size, effect=effects[i],
                          ci_low=effects[i] - 0.01, ci_high=effects[i] + 0.01, margin=margin, steps=STEPS,
                          train_len=48, d_model_added=SIZES[size]["d_model"], d_model_comparator=SIZES[size]["d_model"])
             for row, (comparison, task, effects, outcomes, margin) in rows.items() for i, size in enumerate(sizes)]
    return pd.DataFrame(lines)


def planted_cpu(size: str, seed: int) -> str:
    """micro and tiny on one CPU; small's deciding seeds split between two (a part that spanned machines), its
    pilot on a third that no line may name."""
    if seed < 100:
        return "pilot CPU" if size == "small" else "Xeon"
    return "EPYC" if size == "small" and seed >= 105 else "Xeon"


def planted_accuracy(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Both arms' ten deciding seeds per line, the first ``i`` added-arm runs undertrained at the ``i``-th size
    (0, 1, 2 of 20); and a pilot seed outside the line's seeds, undertrained, that no share may count. The CPUs:
    :func:`planted_cpu`."""
    runs = []
    for line in verdicts.itertuples(index=False):
        flagged = LADDER.index(line.size)
        for arm, encoding in (("added", line.add_arm), ("comparator", line.comparator_arm)):
            for seed in (*range(100, 110), 0):
                runs.append({"status": "ok", "device": "cpu", "cpu_model": planted_cpu(line.size, seed),
                             "task": line.task, "encoding": encoding, "size": line.size, "train_len": 48,
                             "d_model": SIZES[line.size]["d_model"], "lr": 0.003,
                             "steps": STEPS, "batch_size": BATCH[line.size], "seed": seed, "value": 0.5,
                             "params_total": 1000 * (2 if arm == "comparator" else 1) * LADDER.index(line.size) + 1,
                             "undertrained": seed == 0 or (arm == "added" and seed - 100 < flagged),
                             "train_seconds": TRAIN_SECONDS[line.size] * (1 if seed else 100), "metric": "exact_match"})
    return pd.DataFrame(runs)


@pytest.fixture(scope="module")
def scale() -> pd.DataFrame:
    verdicts = planted_verdicts()
    return across_sizes.table(verdicts, planted_accuracy(verdicts))


def trend_of(scale: pd.DataFrame, row: str) -> pd.Series:
    lines = scale[scale["row"] == row]
    assert lines[["slope", "slope_low", "slope_high", "size_trend"]].nunique(dropna=False).max() == 1  # once per row
    return lines.iloc[0]


# Slopes of the effect on log10 N and their 95 % t intervals at 1 degree of freedom (t = 12.706), by hand
# (scipy.stats.linregress's slope and stderr) from the planted effects.
@pytest.mark.parametrize("row, outcome, slope, low, high", [
    ("standard_nlp", "same verdict at every size", -0.011859, -0.258743, 0.235024),
    ("precise_position", "gap closing with size", -0.113783, -0.149057, -0.078509),
    ("long_sequences", "gap widening with size", -0.045513, -0.059623, -0.031403),
])
def test_the_trend_is_read_from_the_slope_when_the_verdict_holds_at_every_size(scale, row, outcome, slope, low, high):
    found = trend_of(scale, row)
    assert found["size_trend"] == outcome
    assert (found["slope"], found["slope_low"], found["slope_high"]) == pytest.approx((slope, low, high), abs=1e-6)


def test_a_verdict_that_differs_from_the_smallest_sizes_names_the_first_size_it_changes_at(scale):
    assert trend_of(scale, "fixed_length")["size_trend"] == "changes at size tiny"  # slope > 0 too: change wins
    assert across_sizes.trend([NOT_BETTER, NOT_BETTER, BETTER], list(LADDER), -0.2, -0.1, 0.5) == \
        "changes at size small"
    assert across_sizes.trend([BETTER] * 3, list(LADDER), 0.1, 0.2, 0.5) == "gap widening with size"
    assert across_sizes.trend([BETTER] * 3, list(LADDER), 0.1, 0.2, -0.5) == "gap closing with size"


def test_each_line_holds_its_sizes_parameters_budget_seeds_and_undertrained_share(scale):
    assert list(scale.columns) == list(across_sizes.COLUMNS)
    nlp = scale[scale["row"] == "standard_nlp"]
    assert list(nlp["size"]) == list(LADDER) and list(nlp["params_non_embedding"]) == [38_400, 98_304, 786_432]
    assert list(nlp["tokens"]) == [1000 * 32 * 48, 1000 * 32 * 48, 1000 * 16 * 48]
    assert list(nlp["undertrained"]) == [0.0, 0.05, 0.1]  # 0, 1, 2 of 20 deciding runs; the pilot not among them
    assert list(nlp["params_total"]) == [1, 2001, 4001]  # the comparator arm's model
    assert list(nlp["n_added"]) == list(nlp["n_comparator"]) == [10, 10, 10]
    assert list(nlp["cpu_model"]) == ["Xeon", "Xeon", "EPYC; Xeon"]  # small's deciding runs span two; its pilot is none
    assert list(nlp["verdict"]) == [NOT_BETTER] * 3 and list(nlp["effect"]) == [0.01, 0.03, 0.0]


def test_scale_csv_has_lines_for_two_sizes_or_more_and_only_its_header_for_one(tmp_path):
    one_size = planted_verdicts(sizes=("tiny",))
    stale = tmp_path / "scale.csv"
    stale.write_text("row\nold\n")
    assert across_sizes.write(tmp_path, one_size, planted_accuracy(one_size)) == stale
    assert stale.read_text().strip() == ",".join(across_sizes.COLUMNS)  # the header alone: nothing stale left
    two = planted_verdicts(sizes=("micro", "tiny"))
    path = across_sizes.write(tmp_path, two, planted_accuracy(two))
    found = pd.read_csv(path)
    assert len(found) == 2 * len(PLANTED) and found["slope_low"].isna().all()  # two sizes: no interval
    assert trend_of(found, "standard_nlp")["slope"] == pytest.approx(0.02 / np.log10(98_304 / 38_400))


@pytest.mark.parametrize("size", LADDER)
def test_non_embedding_parameters_are_the_built_models_block_projections(size):
    model = posbench.build_model(posbench.ModelConfig.from_size(size, encoding="rope"))
    projections = sum(p.numel() for name, p in model.blocks.named_parameters() if "norm" not in name)
    assert projections == non_embedding_params(size)
    norms = sum(p.numel() for name, p in model.named_parameters() if "norm" in name)
    embedding_and_head = model.embed.weight.numel() + model.head.weight.numel()
    assert sum(p.numel() for p in model.parameters()) == projections + norms + embedding_and_head  # nothing else


def planted_tables(tmp_path, extrapolation: pd.DataFrame | None = None):
    """A tables folder of the planted verdicts at three sizes, their runs, and ``scale.csv`` judged from them."""
    folder = tmp_path / "tables"
    folder.mkdir()
    verdicts = planted_verdicts()
    verdicts.to_csv(folder / "verdicts.csv", index=False)
    planted_accuracy(verdicts).to_csv(folder / "accuracy.csv", index=False)
    if extrapolation is not None:
        extrapolation.to_csv(folder / "extrapolation.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"machines": ["box"]}))
    across_sizes.write(folder, verdicts, pd.read_csv(folder / "accuracy.csv"))
    return folder


def test_the_report_shows_the_across_sizes_page_and_page_ones_column_only_with_scale_csv(tmp_path):
    folder = planted_tables(tmp_path)
    build_report(folder, tmp_path / "report.pdf")
    text = pdf_text(tmp_path / "report.pdf")
    page = next(i for i, p in enumerate(text) if squeeze(report_page.TITLE) in p)
    verdict_pages = "".join(text[:page])
    assert page > 0 and "Acrosssizes" in text[0] and squeeze("same verdict at every size") in text[0]
    for trend in ("gap closing with size", "gap widening with size", "changes at size tiny"):
        assert squeeze(trend) in verdict_pages, trend
    for expected in ("Compute rule: tokens per size differ: scan-rope: micro 1.54 M tokens, tiny 1.54 M tokens, "
                     "small 0.768 M tokens; code-brackets-rope: micro 1.54 M tokens", "changes at size tiny",
                     "gap widening with size",
                     "micro 10 seed-seconds a run, 0.01 s a training step (on Xeon)",
                     "small 80 seed-seconds a run, 0.08 s a training step (on EPYC; Xeon)",
                     "+0.150 [+0.140, +0.160] vs δ 0.01", "small (786,432)", "10%"):
        assert squeeze(expected) in "".join(text[page:page + 2]), expected
    (folder / "scale.csv").write_text(",".join(across_sizes.COLUMNS) + "\n")  # one size judged: the header alone
    build_report(folder, tmp_path / "without.pdf")
    without = pdf_text(tmp_path / "without.pdf")
    assert not any(squeeze(report_page.TITLE) in p for p in without)
    assert all(len(p) > len("posbenchreport·box·page10") for p in without)  # no empty page left behind
    assert "Acrosssizes" not in without[0] and squeeze("gap closing with size") not in "".join(without)


def test_smallest_first_keeps_the_comparisons_order_and_puts_each_ones_sizes_by_parameters():
    lines = pd.DataFrame({"comparison": ["b", "b", "a", "a", "a", "b"],
                          "size": ["small", "mystery", "tiny", "small", "micro", "micro"]})
    ordered = across_sizes.smallest_first(lines)
    assert list(zip(ordered["comparison"], ordered["size"])) == [
        ("b", "micro"), ("b", "small"), ("b", "mystery"), ("a", "micro"), ("a", "tiny"), ("a", "small")]
    assert across_sizes.smallest_first(lines.drop(columns="size")).equals(lines.drop(columns="size"))


def test_the_compute_rule_names_each_comparisons_tokens_and_where_they_differ_across_sizes():
    """Comparisons train different tokens (their tasks' lengths and steps); the rule is about one comparison's
    tokens across sizes, so a sentence never averages over comparisons."""
    found = pd.DataFrame({"comparison": ["a", "a", "b", "b"], "size": ["micro", "tiny"] * 2,
                          "tokens": [1.2288e6, 1.2288e6, 8.192e6, 8.192e6]})
    assert report_page.compute_rule(found) == ("Compute rule: each comparison trains the same tokens at every size "
                                               "(1.23–8.19 M tokens a run by comparison: the column Tokens).")
    found.loc[3, "tokens"] = 4.096e6
    assert report_page.compute_rule(found) == ("Compute rule: tokens per size differ: b: micro 8.19 M tokens, "
                                               "tiny 4.1 M tokens a run.")
    found.loc[0, "tokens"] = float("nan")
    assert report_page.compute_rule(found).startswith("Compute rule: tokens per size unknown")


def test_the_judge_step_writes_scale_csv_as_a_header_when_its_verdicts_hold_one_size(tmp_path):
    """The workflow's judge rule names scale.csv as an output: written every time, its lines only where sizes are."""
    make_tables(tmp_path, seeds=SEEDS[:10])  # every run at tiny
    (tmp_path / "scale.csv").write_text(planted_verdicts().to_csv(index=False))  # left by a judgement of 3 sizes
    written = judge.write(tmp_path)
    assert written[-1] == tmp_path / "scale.csv" and pd.read_csv(written[-1]).empty
    assert (tmp_path / "verdicts.csv").exists()


def planted_prose(values: dict, sizes=("micro", "tiny"), steps=2000) -> pd.DataFrame:
    """lm_prose runs at the task's length and each size's width: ``values[encoding][ratio]`` the seeds' bits per
    character, the same at every size but shifted down 0.1 a size (a larger model reads the text better)."""
    runs = []
    for shift, size in enumerate(sizes):
        for encoding, by_ratio in values.items():
            for ratio, seeds in by_ratio.items():
                runs += [{"status": "ok", "task": "lm_prose", "encoding": encoding, "size": size, "seed": seed,
                          "train_len": 64, "d_model": SIZES[size]["d_model"], "steps": steps, "length_ratio": ratio,
                          "eval_scaling": np.nan, "positions_trained": True, "metric": "bits_per_char",
                          "higher_is_better": False, "value": value - 0.1 * shift} for seed, value in enumerate(seeds)]
    return pd.DataFrame(runs)


PROSE = {"sinusoidal": {1.0: (2.0, 2.1, 2.2), 4.0: (4.0, 4.4, 4.2)},
         "alibi": {1.0: (2.05, 2.15, 2.1, 2.2), 4.0: (2.3, 2.2, 2.25, 2.35)}}


def test_the_descriptive_arms_give_each_arms_mean_and_its_difference_from_the_added_arm_per_size():
    from scipy import stats
    extra = planted_prose(PROSE)
    off = extra.iloc[:6].assign(train_len=128)  # another length: a sweep's, not the task's
    scaled = extra.iloc[:6].assign(encoding="rope+yarn:16", eval_scaling="yarn:16")  # no training-free scaling
    untrained = extra.iloc[:6].assign(encoding="learned", positions_trained=False)
    alone = planted_prose({"sinusoidal": PROSE["sinusoidal"]}, steps=500)  # a budget with no pair to read
    found = across_sizes.descriptive_arms(pd.concat([extra, off, scaled, untrained, alone]), ["micro", "tiny", "small"])
    assert list(found.columns) == list(across_sizes.DESCRIPTIVE_COLUMNS)
    assert set(found["encoding"]) == {"sinusoidal", "alibi"} and set(found["steps"]) == {2000}
    assert len(found) == 2 * 2 * 2  # arms x ratios x sizes
    beyond = found[(found["encoding"] == "alibi") & (found["length_ratio"] == 4.0)].set_index("size")
    alibi, sinusoidal = np.array(PROSE["alibi"][4.0]), np.array(PROSE["sinusoidal"][4.0])
    low, high = stats.ttest_1samp(alibi, 0).confidence_interval(0.95)
    assert beyond.loc["micro", "mean"] == pytest.approx(2.275) and beyond.loc["tiny", "mean"] == pytest.approx(2.175)
    assert (beyond.loc["micro", "low"], beyond.loc["micro", "high"]) == pytest.approx((low, high))
    welch = stats.ttest_ind(-alibi, -sinusoidal, equal_var=False).confidence_interval(0.95)  # lower is better
    assert beyond.loc["tiny", "vs_added"] == pytest.approx(4.2 - 2.275)  # positive: alibi reads 4x better
    assert (beyond.loc["tiny", "vs_low"], beyond.loc["tiny", "vs_high"]) == pytest.approx((welch.low, welch.high))
    assert beyond.loc["tiny", "seeds"] == 4 and beyond.loc["tiny", "params_non_embedding"] == 98_304
    assert found.loc[found["encoding"] == "sinusoidal", "vs_added"].isna().all()


def test_the_across_sizes_page_shows_the_descriptive_arms_beside_the_deciding_ones(tmp_path):
    folder = planted_tables(tmp_path, planted_prose(PROSE, sizes=LADDER))
    build_report(folder, tmp_path / "report.pdf")
    text = pdf_text(tmp_path / "report.pdf")
    page = next(i for i, p in enumerate(text) if squeeze(report_page.TITLE) in p)
    shown = "".join(text[page:page + 3])
    for expected in ("Descriptive: the lm_prose arms at every size", "2,000 steps · 4× · alibi",
                     "+1.925", "2,000 steps · 1× · sinusoidal", "2.100 [1.852, 2.348] (3)", "small: Δ vs sinusoidal"):
        assert squeeze(expected) in shown, expected
