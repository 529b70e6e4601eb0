"""Greedy (free-running) exact match: computed by hand on planted models, equal to teacher forcing where
the model reads only the tokens up to each position, refused on items that are not a prompt then its answer."""

import io

import numpy as np
import pytest
import torch
from torch import nn

from posbench import free_running, metrics, records, tasks
from posbench.evaluation import score
from posbench.model import ModelConfig
from posbench.positions import Positions
from posbench.tasks.base import Batch
from posbench.tasks.sequence import prompt_then_answer
from posbench.train import TrainConfig, train

SEP, VOCAB = 4, 6  # symbols 0 … 3, a separator, padding


class PlantedCopier(nn.Module):
    """A fixed rule in place of a trained model, decoding ``x SEP x`` through :func:`posbench.model.generate`:
    after SEP (at index n) the next token is the input n places back. With ``needs_length`` it copies
    right only when the sequence it is *given* is at least 2n long, else it writes 0 — as an encoding
    whose frequencies follow the sequence's length reads more than the tokens before a position."""

    def __init__(self, needs_length: bool = False):
        super().__init__()
        self.cfg = ModelConfig(vocab_size=VOCAB, n_layers=1)
        self.unused = nn.Parameter(torch.zeros(1))  # a device to be on
        self.needs_length = needs_length

    def forward(self, inputs, positions=None, cache=None):  # inputs (B, L) -> logits (B, L, VOCAB)
        past = len(cache) if cache is not None else 0
        seen = inputs if not past else torch.cat([cache.keys[0], inputs], 1)  # (B, past + L)
        if cache is not None:
            cache.keys[0], cache.positions = seen, Positions.arange(seen.shape[1])
        predicted = torch.zeros(seen.shape, dtype=torch.long)  # (B, past + L)
        for row, tokens in enumerate(seen):
            n = int(torch.nonzero(tokens == SEP)[0]) if (tokens == SEP).any() else len(tokens)
            for t in range(n, len(tokens)):
                if not self.needs_length or len(tokens) >= 2 * n:
                    predicted[row, t] = tokens[t - n]
        return nn.functional.one_hot(predicted[:, past:], VOCAB).float()


def copy_batch(*strings: list[int]) -> Batch:
    """Items ``x SEP x`` of one length, as :class:`posbench.tasks.copy.Copy` lays them out."""
    examples = [prompt_then_answer(np.array([*s, SEP]), np.array(s)) for s in strings]
    return Batch(*(torch.tensor(np.stack(column)) for column in zip(*examples)))


def scored(model, batches):
    """The teacher-forced evaluation of ``batches`` with the decoded metric added."""
    evaluation = score(model, batches, ("exact_match",), "float32")
    return free_running.with_decoded(model, batches, ("exact_match", "greedy_exact_match"), "float32", evaluation)


def test_a_model_that_reads_the_given_length_differs_from_teacher_forcing_as_computed_by_hand():
    # Teacher forcing gives the whole 2n-token input at once: every answer token right, 3 of 3 items.
    # Free running gives n + 1 + j tokens when writing answer token j: right only at the last (j = n - 1),
    # so an item of n = 1 is right and items of n = 2, 3 are not (their first token is written as 0).
    batches = [copy_batch([1]), copy_batch([2, 3]), copy_batch([3, 1, 2])]
    evaluation = scored(PlantedCopier(needs_length=True), batches)
    assert evaluation.metrics["exact_match"] == 1.0
    assert evaluation.metrics["greedy_exact_match"] == pytest.approx(1 / 3)
    assert evaluation.items["greedy_exact"].tolist() == [True, False, False]
    assert evaluation.sums["greedy_exact"] == 1


def test_a_model_that_copies_perfectly_scores_one_both_ways():
    batches = [copy_batch([1, 2, 3], [0, 0, 3]), copy_batch([2])]
    evaluation = scored(PlantedCopier(), batches)
    assert evaluation.metrics["exact_match"] == evaluation.metrics["greedy_exact_match"] == 1.0
    assert evaluation.items["greedy_exact"].tolist() == [True, True, True]


def test_a_briefly_trained_causal_model_scores_the_same_item_by_item_both_ways():
    options = {"train_length": 4, "n_symbols": 2, "eval_examples": 64}
    record = train(TrainConfig("copy", "rope", steps=150, task_options=options, log_every=1000), io.StringIO())
    items = record["items"].columns
    assert 0 < items["exact"].sum() < len(items["exact"])  # partly learned: right and wrong items at some lengths
    assert np.array_equal(items["greedy_exact"], items["exact"])
    for entry in record["eval"]:
        assert entry["metrics"]["greedy_exact_match"] == entry["metrics"]["exact_match"]
    assert list(record["eval"][0]["metrics"]) == ["loss", "exact_match", "token_accuracy", "greedy_exact_match"]
    records.validate(record)


@pytest.mark.parametrize("name", [n for n in tasks.names()
                                  if any(metrics.get(m).decoded for m in tasks.get(n).metrics)])
def test_every_task_that_declares_the_metric_lays_its_items_out_as_a_prompt_then_its_answer(name):
    task = tasks.get(name)
    batch = next(task.eval_batches(task.train_length))
    spans = [free_running.answer_span(x, y) for x, y in zip(batch.inputs, batch.targets)]
    assert all(stop - first >= 1 for first, stop in spans)


def test_an_item_that_is_not_a_prompt_then_its_answer_is_refused():
    inputs, targets = torch.tensor([1, 2, 3, 1]), torch.tensor([-100, 3, -100, 2])  # two runs of scored targets
    with pytest.raises(ValueError, match="one run of scored targets, each the next input"):
        free_running.answer_span(inputs, targets)
    with pytest.raises(ValueError, match="one run of scored targets"):
        free_running.answer_span(torch.tensor([1, 2, 3]), torch.tensor([-100, 0, 1]))  # 0 is not the next input 3


def test_a_task_without_the_metric_is_scored_as_before():
    evaluation = score(PlantedCopier(), [copy_batch([1, 2])], ("exact_match",), "float32")
    assert free_running.with_decoded(PlantedCopier(), [], ("exact_match",), "float32", evaluation) is evaluation
    assert free_running.teacher_forced(("exact_match", "greedy_exact_match")) == ("exact_match",)
