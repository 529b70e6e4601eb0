"""The Chomsky-hierarchy tasks (Ruoss et al. 2023's protocol): each answer is what an independent
re-reading of its own input gives, the tape and the lengths are the paper's, chance levels are the
sets' own majority rates, test and validation are disjoint draws, seeds reproduce, and bad options
are one line naming the key."""

from collections import Counter

import numpy as np
import pytest
import torch

from posbench import tasks
from posbench.tasks import IGNORE
from posbench.tasks.chomsky import BEYOND_TRAINING
from posbench.train import TrainConfig, train


def duplicated(string: list[int]) -> list[int]:
    return string + string


def odds_then_evens(string: list[int]) -> list[int]:
    """Odd indices first, counted from 0 (the paper's code): ``01234 -> 13 024``."""
    return [s for i, s in enumerate(string) if i % 2 == 1] + [s for i, s in enumerate(string) if i % 2 == 0]


def buckets(string: list[int]) -> list[int]:
    """Count each symbol, then write each count's worth of it, smallest symbol first."""
    counts = Counter(string)
    return [symbol for symbol in range(max(string) + 1) for _ in range(counts[symbol])]


def blanked_symbol(string: list[int]) -> list[int]:
    """The twin of the MISSING place (id 2) half the string away, FILL (id 3) at the end left out;
    the paper's constant ``1 -> 1`` at length 1."""
    if string == [1]:
        return [1]
    doubled = string[:-1] if string[-1] == 3 else string
    half, blank = len(doubled) // 2, doubled.index(2)
    assert len(doubled) == 2 * half and doubled.count(2) == 1 and 3 not in doubled
    twin = blank + half if blank < half else blank - half
    assert [s for i, s in enumerate(doubled[:half]) if i != blank % half] == [
        s for i, s in enumerate(doubled[half:]) if i != blank % half]  # the other places agree
    return [doubled[twin]]


ANSWERS = {  # task -> an independent reading: the input string (ids) -> the answer
    "bucket_sort": buckets,
    "duplicate_string": duplicated,
    "missing_duplicate_string": blanked_symbol,
    "odds_first": odds_then_evens,
}
NAMES = sorted(ANSWERS)


def tape(task, inputs, targets):
    """The input string and the answer of one example, read off its tape: the string is every
    position before the first EMPTY; EMPTY fills the rest, and only those positions are scored."""
    inputs, targets = list(map(int, inputs)), list(map(int, targets))
    n = inputs.index(task.empty_id)
    assert set(inputs[n:]) == {task.empty_id} and set(targets[:n]) == {IGNORE}
    assert IGNORE not in targets[n:]
    return inputs[:n], targets[n:]


def test_odds_first_reads_the_papers_code_order():
    assert odds_then_evens([0, 0, 1, 1, 0, 1, 0, 1]) == [0, 1, 1, 1, 0, 1, 0, 0]
    assert odds_then_evens([1, 1, 0]) == [1, 1, 0]


def test_missing_duplicate_string_has_the_papers_ids_and_examples():
    task = tasks.get("missing_duplicate_string")
    assert (task.missing_id, task.fill_id, task.empty_id, task.vocab_size, task.steps) == (2, 3, 4, 6, 10_000)
    assert blanked_symbol([0, 1, 1, 0, 0, 2, 1, 0]) == [1] and blanked_symbol([1, 0, 1, 1, 2, 1, 3]) == [0]
    blanks = Counter(tape(task, *task.example(np.random.default_rng(i), 9))[0].index(2) for i in range(800))
    assert sorted(blanks) == list(range(8)) and min(blanks.values()) > 60  # every place of 2 · 4, uniformly


def test_bucket_sort_has_the_papers_five_symbols_and_example():
    assert tasks.get("bucket_sort").n_symbols == 5 and tasks.get("bucket_sort").vocab_size == 7
    assert buckets([1, 0, 2, 0, 4, 1, 1, 2]) == [0, 0, 1, 1, 1, 2, 2, 4]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("length", [1, 2, 7, 40, 143])
def test_every_answer_is_the_independent_reading_of_its_string(name, length):
    task = tasks.get(name)
    rng = np.random.default_rng(length)
    for _ in range(100):
        inputs, targets = task.example(rng, length)
        string, answer = tape(task, inputs, targets)
        assert len(string) == length and len(inputs) == task.sequence_length(length)
        assert answer == ANSWERS[name](string)


@pytest.mark.parametrize("name", NAMES)
def test_the_protocol_is_the_papers(name):
    task = tasks.get(name)
    assert task.kind == "structured" and task.model_options()["causal"] is False
    assert task.metrics[0] == "token_accuracy"
    assert BEYOND_TRAINING == (41, 92, 143, 194, 245, 296, 347, 398, 449, 500)
    assert task.eval_lengths() == [40, *BEYOND_TRAINING]
    assert tasks.get(name, train_length=80).eval_lengths() == [80, *(2 * n for n in BEYOND_TRAINING)]  # factors
    rng = np.random.default_rng(0)
    lengths = []
    for _ in range(2000):  # one length per batch, uniformly over 1 … 40
        batch = task.train_batch(rng, 2)
        string_lengths = {len(tape(task, x, y)[0]) for x, y in zip(batch.inputs, batch.targets)}
        assert len(string_lengths) == 1 and batch.inputs.shape[1] == task.sequence_length(*string_lengths)
        lengths += string_lengths
    counts = Counter(lengths)
    assert sorted(counts) == list(range(1, 41)) and max(counts.values()) < 2 * min(counts.values())
    assert (batch.inputs != task.pad_id).all()  # no padding ever


@pytest.mark.parametrize("name", NAMES)
def test_chance_is_the_majority_rate_of_that_sets_answers(name):
    task = tasks.get(name)
    for length in (40, 92):
        answers = Counter(token for batch in task.eval_batches(length) for x, y in zip(batch.inputs, batch.targets)
                          for token in ANSWERS[name](tape(task, x, y)[0]))
        total = sum(answers.values())
        assert total == task.eval_examples * task.answer_length(length)
        assert task.chance(length) == {"token_accuracy": max(answers.values()) / total}
        spread = np.sqrt((1 - 1 / task.n_symbols) / task.n_symbols / total)  # one symbol's share's standard error
        assert 1 / task.n_symbols <= task.chance(length)["token_accuracy"] < 1 / task.n_symbols + 3 * spread


@pytest.mark.parametrize("name", NAMES)
def test_test_and_validation_are_disjoint_and_reproducible(name):
    task = tasks.get(name)
    sets = {split: torch.cat([b.inputs for b in task.eval_batches(40, split)]) for split in ("test", "validation")}
    rows = {split: {tuple(row.tolist()) for row in inputs} for split, inputs in sets.items()}
    assert len(rows["test"]) == len(rows["validation"]) == task.eval_examples
    assert not rows["test"] & rows["validation"]
    assert torch.equal(sets["test"], torch.cat([b.inputs for b in task.eval_batches(40)]))  # fixed
    first, again = (task.train_batch(np.random.default_rng(7), 8) for _ in range(2))
    assert torch.equal(first.inputs, again.inputs) and torch.equal(first.targets, again.targets)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("options, message", [
    ({"min_length": 0}, r"min_length must lie in 1 … train_length \(40\); got 0"),
    ({"min_length": 41}, r"min_length must lie in 1 … train_length \(40\); got 41"),
    ({"n_symbols": 1}, "n_symbols must be at least 2; got 1"),
])
def test_bad_options_are_one_line_naming_the_key(name, options, message):
    with pytest.raises(ValueError, match=f"^{name}: {message}$"):
        tasks.get(name, **options)


def test_the_score_is_the_mean_beyond_the_training_length():
    task = tasks.get(NAMES[0])
    assert task.beyond_training({40: 1.0, 41: 0.5, 500: 0.25}) == pytest.approx(0.375)
    with pytest.raises(ValueError, match=rf"^{NAMES[0]}: no accuracy beyond train_length \(40\); evaluated: 20, 40$"):
        task.beyond_training({20: 1.0, 40: 1.0})


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("encoding", ["rope", "sinusoidal_randomized"])
def test_a_short_bidirectional_training_runs_end_to_end(name, encoding):
    options = {"train_length": 6, "eval_factors": (1.0, 2.0), "eval_examples": 8}
    config = TrainConfig(task=name, encoding=encoding, steps=4, batch_size=8, log_every=2, task_options=options)
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and [e["length"] for e in record["eval"]] == [6, 12]
    task = tasks.get(name, **options)
    items = record["items"].columns
    assert list(items["scored"]) == [task.answer_length(n) for n in (6, 12) for _ in range(8)]
    for e in record["eval"]:
        assert e["metrics"]["exact_match"] <= e["metrics"]["token_accuracy"]
