"""The scale preset (workflow/scale.yaml and its parts) and the ladder of sizes it runs: one rule for depth and
heads, the same training tokens at every size, a comparison's proportions kept, rates tuned per size before
any training, and the cluster's ladder to 170 M planned by Snakemake."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml
from test_tune import tuned_table
from test_workflow_config import ROOT, dry_run

from posbench import comparisons, tasks
from posbench import workflow as pw
from posbench.model import ModelConfig, build_model, count_params
from posbench.sizes import LADDER, SIZES, ladder_shape, non_embedding_params
from posbench.workflow_config import validate_config

PARTS = ("micro", "tiny", "small")


def arguments(job: dict, flag: str) -> list[str]:
    """The values a dry-run job's command line gives ``flag`` (up to the next flag)."""
    return job["shell"].split(f" {flag} ")[1].split(" --")[0].split()


def part(size: str, results) -> dict:
    """A scale part's config with its results folder (and so its own lr tables) under ``results``."""
    config = yaml.safe_load((ROOT / f"workflow/scale-{size}.yaml").read_text())
    return validate_config({**config, "results": str(results), "train": {
        **config["train"], "lr_table": f"{results}/tuning/lr-{{size}}.csv"}})


def test_the_ladder_is_one_rule_and_its_three_cpu_sizes_span_over_16x():
    assert all(LADDER[name] == ladder_shape(shape["d_model"]) for name, shape in LADDER.items())
    assert (SIZES["tiny"], SIZES["small"]) == (dict(d_model=64, n_layers=2, n_heads=4),
                                               dict(d_model=128, n_layers=4, n_heads=4))
    assert [non_embedding_params(s) for s in PARTS] == [38_400, 98_304, 786_432]
    assert non_embedding_params("small") / non_embedding_params("micro") >= 16
    assert non_embedding_params("ladder768") >= 100_000_000


@pytest.mark.parametrize("size", ["micro", "tiny", "small"])
def test_non_embedding_parameters_are_the_blocks_less_their_norms_and_biases(size):
    """12·d²·L counts the blocks' projection weights: a built model's total less its embedding, head, norms
    and biases."""
    model = build_model(ModelConfig.from_size(size, encoding="none", vocab_size=50))
    d = SIZES[size]["d_model"]
    small_terms = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 1)  # norms and biases
    assert count_params(model)["total"] - 2 * 50 * d - small_terms == non_embedding_params(size)


def test_each_part_tunes_its_size_first_and_then_trains_every_deciding_arm_and_the_descriptive_ones(tmp_path):
    for size in PARTS:
        config = part(size, tmp_path)
        assert pw.tuned_in_run(config) == [size] and pw.awaits_tuning(config)
    (tmp_path / "tuning").mkdir()
    for size in PARTS:
        tuned_table(tmp_path / "tuning" / f"lr-{size}.csv", sizes=(size,), best=0.003)
    jobs = {size: pw.train_jobs(part(size, tmp_path)) for size in PARTS}
    declared = [c for c in comparisons.load().in_preset("default") if not c.withdrawn]
    for size, found in jobs.items():
        assert {j["size"] for j in found} == {size} and all(j["lr"] == 0.003 for j in found)
        arms = {(j["task"], j["encoding"], j["train_length"], j["d_model"], j["steps"]) for j in found}
        for comparison in declared:
            steps = "-".join(map(str, comparisons.load().budget_rule.budgets(comparison.budget)))
            for spec in comparison.arms:
                width = spec.resolved(size)[1] if spec.d_model else None
                assert (spec.task, spec.encoding, spec.train_length, width, steps) in arms
        descriptive = {j["encoding"] for j in found if j["steps"] == "2000"}
        assert descriptive == {"none", "learned", "alibi", "rope", "sinusoidal"}


def test_every_size_trains_the_same_tokens_and_naive_concat_stays_at_half_the_width():
    """The compute rule: a comparison's steps, batch and training length, so its tokens, do not depend on size."""
    for comparison in comparisons.load().in_preset("default"):
        task = tasks.get(comparison.task)
        tokens = {comparison.budget * task.batch_size * comparison.arms[0].resolved(size)[0] for size in PARTS}
        assert len(tokens) == 1
    matched = comparisons.load().by_id["prose-naive-concat-matched"]
    assert [[spec.resolved(size)[1] for spec in matched.arms] for size in PARTS] == [[40, 20], [64, 32], [128, 64]]


def test_the_matched_pair_is_within_five_percent_of_parameters_at_every_cpu_size():
    """Naive concat at half the width against adding: the judge compares them only within 5 % (evidence)."""
    matched = comparisons.load().by_id["prose-naive-concat-matched"]
    vocab = tasks.get("lm_prose").model_options()["vocab_size"]
    for size in PARTS:
        totals = [count_params(build_model(ModelConfig.from_size(size, encoding=spec.encoding, vocab_size=vocab,
                                                                 d_model=spec.resolved(size)[1])))["total"]
                  for spec in matched.arms]
        assert abs(totals[0] - totals[1]) <= 0.05 * max(totals)


def test_snakemake_plans_the_cluster_ladder_tuning_at_every_size_up_to_ladder768(tmp_path):
    shutil.copy(ROOT / "workflow/cluster-scale.yaml", tmp_path / "cluster-scale.yaml")
    jobs = dry_run(tmp_path, tmp_path / "cluster-scale.yaml")
    def argument(job, flag):
        return arguments(job, flag)[0]

    tuned = {(argument(job, "--comparison"), argument(job, "--size")) for job in jobs if job["rule"] == "tune"}
    sizes = ["small", "ladder256", "ladder512", "ladder768"]
    config = validate_config(yaml.safe_load((ROOT / "workflow/cluster-scale.yaml").read_text()))
    assert tuned == {(c, s) for c in pw.tuned_comparisons(config) for s in sizes}
    assert all(argument(job, "--device") == "cuda" for job in jobs if job["rule"] == "tune")
    assert all(argument(job, "--start-from") == "results/reference/lr/lr.csv" for job in jobs if job["rule"] == "tune")
    assert sorted(argument(job, "--size") for job in jobs if job["rule"] == "lr_table") == sorted(sizes)
    assert all("--collect" in job["shell"].split() for job in jobs if job["rule"] == "lr_table")  # not a CPU retune
    assert not [job for job in jobs if job["rule"] == "train"]  # its jobs are known once the rates are chosen


def test_naive_concat_at_half_of_micros_width_trains_at_the_width_its_blocks_run_at():
    """micro's matched pair puts naive concat's E at 20: its blocks run at 40 (E and P), which the heads split;
    a width the blocks cannot split is still refused in one line."""
    from posbench.train import TrainConfig, resolve

    narrow = resolve(TrainConfig(task="lm_prose", encoding="sinusoidal_concat", size="micro", d_model=20))
    assert narrow.model.d_model == 20
    with pytest.raises(ValueError, match=r"^d_model 20 does not fit size 'micro': allowed: a positive multiple of 8"):
        resolve(TrainConfig(task="lm_prose", encoding="sinusoidal", size="micro", d_model=20))


def test_a_later_part_plans_its_own_tuning_beside_what_an_earlier_part_left(tmp_path):
    """The parts share one results folder: micro's part must neither take tiny's judged first look for its
    own (and so plan micro's seeds at rates not yet tuned) nor call tiny's tables and report up to date, but
    tune, train and judge again."""
    (tmp_path / "results").mkdir()  # a checkout's working directory: the committed rates the parts start from
    (tmp_path / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    tiny = dry_run(tmp_path, ROOT / "workflow/scale-tiny.yaml")
    for rule in ("train", "first_look", "aggregate", "judge", "report"):  # tiny's part, finished, in this order
        for output in (path for job in tiny if job["rule"] == rule for path in job["output"]):
            (tmp_path / output).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / output).touch()
    look = next(job for job in tiny if job["rule"] == "first_look")["output"][0]
    pd.DataFrame({"comparison": ["prose-rope-L128"], "size": ["tiny"], "decides": [True],
                  "second_look_wanted": [True]}).to_csv(tmp_path / look, index=False)
    # files' times alone, as in a folder whose jobs Snakemake recorded: no missing metadata calls a job stale
    planned = dry_run(tmp_path, ROOT / "workflow/scale-micro.yaml", rerun_triggers=("mtime",))
    micro = [job for job in planned if job["needrun"]]
    config = validate_config(yaml.safe_load((ROOT / "workflow/scale-micro.yaml").read_text()))
    tuned = {job["shell"].split(" --comparison ")[1].split()[0] for job in micro if job["rule"] == "tune"}
    assert tuned == set(pw.tuned_comparisons(config)) and all(" --size micro " in job["shell"]
                                                               for job in micro if job["rule"] == "tune")
    assert not [job for job in micro if job["rule"] == "train"]  # its seeds are planned once its rates are chosen
    assert {"first_look", "aggregate", "judge", "report"} <= {job["rule"] for job in micro}


def test_jobs_start_longest_first_so_no_slot_idles_beside_the_last_one_before_a_gate(tmp_path):
    """Snakemake starts the job of highest priority first; a tune or train job's is the thousands of positions it
    trains on. So small's longest tuning (prose-rope-L128: two arms of 128 positions, 2,000 steps, 3 pilot seeds)
    starts first rather than last, when it would train alone for hours before the rate table lets training in."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "reference").symlink_to(ROOT / "results" / "reference")

    tunes = {arguments(job, "--comparison")[0]: job["priority"]
             for job in dry_run(tmp_path, ROOT / "workflow/scale-small.yaml") if job["rule"] == "tune"}
    assert tunes["prose-rope-L128"] == 2 * 128 * 2000 * 3 // 1000 and max(tunes, key=tunes.get) == "prose-rope-L128"
    trains = [job for job in dry_run(tmp_path, ROOT / "workflow/scale-tiny.yaml") if job["rule"] == "train"]
    assert len(trains) == 17
    for job in trains:
        task = arguments(job, "--task")[0]
        length = int((arguments(job, "--train-length") if " --train-length " in job["shell"]
                      else [tasks.get(task).train_length])[0])
        budget = arguments(job, "--checkpoints") if " --checkpoints " in job["shell"] else arguments(job, "--steps")
        assert job["priority"] == length * int(budget[-1]) * len(arguments(job, "--seed")) // 1000, job["shell"]
