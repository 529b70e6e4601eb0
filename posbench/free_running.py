"""Greedy (free-running) exact match: the model writes the answer itself, token after token.

Teacher-forced ``exact_match`` (:mod:`posbench.metrics`) reads every answer token's argmax with the
*right* earlier answer tokens as input; a model that gets token 3 wrong is still shown the right
token 3 when it predicts token 4. The papers that report exact match on copying, reversal, SCAN or
retrieval (Kazemnejad et al. 2023, RULER, CoPE) score free-running outputs instead: the prompt is
given, then each answer token is the model's own greedy choice fed back as the next input
(:func:`posbench.model.generate`, with its KV cache). An item is right when all its answer tokens
are.

What the two can differ by: for a model whose output at a position depends only on the tokens up to
it, they are equal item by item (by induction: while the run is right, its inputs are the
teacher-forced ones, so its first wrong token is the first token teacher forcing gets wrong too).
They differ where that fails: an encoding whose frequencies follow the length of the sequence it is
given (dynamic NTK, LongRoPE: the teacher-forced forward reads the whole answer's length at every
position, a free run only the length written so far; :class:`posbench.cache.KVCache`), an
argmax tie that the cached forward's rounding breaks the other way. So the metric is the papers'
score, and beside ``exact_match`` it shows where a teacher-forced number is not one a model could
produce by itself.

An item can be decoded when it is a prompt followed by its answer (:func:`posbench.tasks.sequence.
prompt_then_answer`): its scored targets are one run of positions ``first … last``, and each is the
next input (``targets[t] == inputs[t + 1]`` inside the run), so the prompt is ``inputs[: first + 1]``
and the answer ``targets[first : last + 1]``. Items that share a prompt length and an answer length
are decoded together as a batch (no padding reaches them: the model has no padding mask). A task
declares the metric (``greedy_exact_match`` among its metrics); an item it cannot decode is an error
naming the task's layout, never a silent zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
import torch

from posbench import metrics
from posbench.devices import FLOAT32, autocast
from posbench.model import generate
from posbench.tasks.base import IGNORE, Batch


def teacher_forced(names: tuple[str, ...]) -> tuple[str, ...]:
    """The metrics of ``names`` that one forward pass over the given inputs computes (not decoded)."""
    return tuple(name for name in names if not metrics.get(name).decoded)


def answer_span(inputs: torch.Tensor, targets: torch.Tensor) -> tuple[int, int]:
    """``(first, stop)``: the scored run ``targets[first:stop]`` of one item ``inputs (T,)``, ``targets (T,)``;
    a ``ValueError`` unless the item is a prompt then its answer (see the module's docstring)."""
    scored = torch.nonzero(targets != IGNORE).flatten()  # (A,)
    if len(scored) == 0:
        raise ValueError("free-running decoding needs scored targets; this item has none")
    first, stop = int(scored[0]), int(scored[-1]) + 1
    answer_inputs = inputs[first + 1:stop]  # the answer as the next inputs (the last answer token is never input)
    if len(scored) != stop - first or not torch.equal(answer_inputs, targets[first:stop - 1]):
        raise ValueError("free-running decoding needs a prompt then its answer: one run of scored targets, each "
                         "the next input (tasks.sequence.prompt_then_answer)")
    return first, stop


def greedy_exact(model: torch.nn.Module, batch: Batch, dtype: str = FLOAT32) -> np.ndarray:
    """``(B,)`` bool: whether the model, decoding greedily from each item's prompt, writes its whole answer."""
    spans = [answer_span(x, y) for x, y in zip(batch.inputs, batch.targets)]
    right = np.zeros(len(spans), dtype=bool)
    device = next(model.parameters()).device
    for first, stop in dict.fromkeys(spans):
        rows = [row for row, span in enumerate(spans) if span == (first, stop)]
        prompts = batch.inputs[rows, : first + 1].to(device)  # (b, first + 1)
        with autocast(device, dtype):
            written = generate(model, prompts, stop - first)[:, first + 1:]  # (b, stop - first)
        right[rows] = (written.cpu() == batch.targets[rows, first:stop]).all(1).numpy()
    return right


def with_decoded(model: torch.nn.Module, eval_batches: Iterable[Batch], names: tuple[str, ...], dtype: str,
                 evaluation):
    """``evaluation`` (a :class:`posbench.evaluation.Evaluation` of the same batches) with the decoded metrics of
    ``names`` added: each item's ``greedy_exact``, its sum, and ``greedy_exact_match``. Unchanged when
    ``names`` has none. The model is decoded in eval mode and goes back to training mode."""
    decoded = [name for name in names if metrics.get(name).decoded]
    if not decoded:
        return evaluation
    model.eval()
    try:
        exact = np.concatenate([greedy_exact(model, batch, dtype) for batch in eval_batches])  # (items,)
    finally:
        model.train()
    sums = {**evaluation.sums, "greedy_exact": int(exact.sum())}
    return dataclasses.replace(evaluation, items={**evaluation.items, "greedy_exact": exact}, sums=sums,
                               metrics={**evaluation.metrics, **{n: metrics.get(n).value(sums) for n in decoded}})
