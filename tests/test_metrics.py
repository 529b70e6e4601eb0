"""Each metric defined once: its formula on known sums, its direction and label, and every place
that names metrics (tasks, the record schema, the report) agrees with posbench.metrics."""

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from posbench import metrics, records, tasks
from posbench.report.data import metric_label
from posbench.tasks.base import IGNORE, Task

SUMS = {"loss_sum": 6 * math.log(2), "scored": 3, "correct": 2, "exact": 1, "greedy_exact": 0, "sequences": 4}


def test_values_on_known_sums():
    values = {name: metric.value(SUMS) for name, metric in metrics.METRICS.items()}
    assert values == pytest.approx({"loss": 2 * math.log(2), "bits_per_char": 2.0, "token_accuracy": 2 / 3,
                                    "exact_match": 0.25, "greedy_exact_match": 0.0, "accuracy": 0.25})


def test_sums_of_items_count_the_sequences():
    items = {"loss_sum": [0.5, 1.5], "scored": [3, 1], "correct": [3, 0], "exact": [True, False]}
    assert metrics.sums(items) == {"loss_sum": 2.0, "scored": 4, "correct": 3, "exact": 1, "sequences": 2}


def test_only_the_losses_are_lower_is_better_and_every_label_has_its_unit():
    assert [name for name, m in metrics.METRICS.items() if not m.higher_is_better] == ["loss", "bits_per_char"]
    for metric in metrics.METRICS.values():
        assert {metric.numerator, metric.denominator} <= set(metrics.SUMS)
        assert "(" in metric.label or "per" in metric.label
    assert metric_label(pd.DataFrame({"metric": ["bits_per_char", None]})) == "bits per character"


def test_the_train_schema_names_exactly_these_metrics():
    train = records.schema("train")["allOf"][1]["properties"]
    assert train["metrics"]["items"]["enum"] == list(metrics.METRICS)
    assert train["eval"]["items"]["properties"]["metrics"]["propertyNames"]["enum"] == list(metrics.METRICS)
    assert train["validation"]["propertyNames"]["enum"] == list(metrics.METRICS)
    with_chance = [name for name, metric in metrics.METRICS.items() if metric.chance]
    assert train["eval"]["items"]["properties"]["chance"]["propertyNames"]["enum"] == with_chance


def test_chance_levels_on_known_counts():
    counts = np.array([0, 6, 2])  # targets 1 (six times) and 2 (twice)
    prior = np.array([0.5, 0.25, 0.125, 0.125])
    assert metrics.majority_rate(counts) == 0.75
    assert metrics.unigram_bits(counts, prior) == (6 * 2 + 2 * 3) / 8  # -log2 of 1/4 and of 1/8
    chances = {name: metric.chance for name, metric in metrics.METRICS.items()}
    assert chances == {"loss": None, "bits_per_char": metrics.unigram_bits, "token_accuracy": metrics.majority_rate,
                       "exact_match": None, "greedy_exact_match": None, "accuracy": metrics.majority_rate}


@pytest.mark.parametrize("name", tasks.names())
def test_every_task_reports_defined_metrics_and_accuracy_only_with_one_label_per_sequence(name):
    task = tasks.get(name)
    assert all(m in metrics.METRICS for m in task.metrics)
    if "accuracy" in task.metrics:  # accuracy = exact/sequences is the share of labels right only then
        batch = next(task.eval_batches(task.eval_lengths()[0]))
        assert batch.targets.shape[1] == 1 and (batch.targets != IGNORE).all()
        assert "token_accuracy" not in task.metrics and "exact_match" not in task.metrics


def test_a_task_with_an_undefined_metric_is_refused():
    @dataclass(frozen=True)
    class F1Task(Task):
        metrics: ClassVar[tuple[str, ...]] = ("f1",)

    with pytest.raises(ValueError, match="unknown metric 'f1'; allowed: loss, bits_per_char"):
        tasks.register("f1_task")(F1Task)
    assert "f1_task" not in tasks.names()
