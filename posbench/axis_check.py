"""Can an arm see each position axis its task uses? A check on the initialised model, before any result.

An encoding may read an axis and hardly turn with it: M-RoPE's contiguous sections give a tiny head's
columns only its three lowest frequencies, so moving a patch one column changes q·k by a fraction of a
percent of what a step does under 1-D RoPE. A comparison with such an arm measures the
layout, not the scheme, so the judge step refuses it (:func:`refuse_blind`).

One definition for every hook: build the arm's model as training does (the task's model at the size and
width, seed :data:`SEED`, initialised), take the first layer's attention logits (``q·k/√d_head`` plus the
encoding's bias, from the model's own :meth:`~posbench.model.Transformer.first_queries_keys` and
``attention_bias``) on a training batch of :data:`EXAMPLES`, move every key one step along one axis of
the positions the model reads, the queries staying where they are, and average ``|Δ logit|`` over
examples, heads, queries and keys. The figure of an axis is that average divided by the same average
for 1-D RoPE (:data:`REFERENCE`) on the same task at the same width, whose one axis is the sequence.
Below :data:`BLIND` the arm is blind on that axis.

* Moving every key at once changes column ``j`` as moving key ``j`` alone would: at the first layer a
  logit reads only its own query's and its own key's position (tested for every encoding).
* A step is +1, or −1 for a key at the axis's largest id (when above 0), so every id stays among those
  the task uses and a learned table has a row for it.
* Axes are those of the positions the model reads (:func:`posbench.evaluation.laid_out`): one (the
  sequence) for a 1-D encoding, which reads a grid or a mosaic row by row; row and column for a 2-D
  one; text/time, row and column for a multimodal encoding on a multimodal task.
* An encoding with no position hook (``none``) is not checked: it is blind by declaration, the floor.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import torch

from posbench import encodings, evaluation, train
from posbench.comparisons import ArmSpec, Comparison
from posbench.positions import Positions

REFERENCE = "rope"
BLIND = 0.01  # below 1 % of 1-D RoPE's change on an axis, an arm is blind on it
SEED = 0
EXAMPLES = 4
AXIS_NAMES = {1: ("sequence",), 2: ("row", "column"), 3: ("text/time", "row", "column")}


def first_layer_logits(model, inputs: torch.Tensor, queries: Positions, keys: Positions) -> torch.Tensor:
    """``(B, h, L, L)`` logits of the first layer before the softmax, queries at ``queries`` and keys at
    ``keys``, no causal mask: every query–key pair is read, those a causal model hides too, but where the
    encoding's bias is ``-inf`` there already (``hides_future_keys``: FIRE's)."""
    q, _ = model.first_queries_keys(inputs, queries)  # (B, h, L, d_head)
    _, k = model.first_queries_keys(inputs, keys)
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, h, L, L)
    bias = model.layer_encodings[0].attention_bias(queries, keys)  # (h, L, L) or None
    return logits if bias is None else logits + bias


def stepped(positions: Positions, axis: int) -> Positions:
    """``positions`` with every token one step along ``axis``: +1, or −1 at the axis's largest id (above 0)."""
    ids = positions.ids if positions.axes > 1 else positions.ids[:, None]  # (L, axes)
    column = ids[:, axis]
    top = column.max()
    moved = ids.clone()
    moved[:, axis] += torch.where((column == top) & (top > 0), -1, 1)
    return Positions.from_ids(moved if positions.axes > 1 else moved[:, 0], positions.modality, positions.offset)


@functools.cache
def logit_change(spec: ArmSpec, size: str, encoding_options: tuple[tuple[str, object], ...] = ()) -> dict[str, float]:
    """Mean ``|Δ logit|`` per axis of the positions ``spec``'s model reads, at ``size`` (once per process);
    ``encoding_options`` (``(key, value)`` pairs) replace the encoding's family options, for an arm not yet
    registered (:mod:`posbench.arm_rule`)."""
    options = {"train_length": spec.train_length} if spec.train_length else {}
    job = train.resolve(train.TrainConfig(spec.task, spec.encoding, size, spec.d_model, SEED, task_options=options,
                                          encoding_options=dict(encoding_options) or None))
    with torch.random.fork_rng():
        model = train.initial_model(job).eval()
    batch = job.task.train_batch(np.random.default_rng(SEED), EXAMPLES)
    inputs = batch.inputs.to(job.config.device)
    positions = batch.positions if evaluation.laid_out(model, batch) else model.encoding.positions(inputs.shape[1])
    positions = positions.to(job.config.device)
    with torch.no_grad():
        before = first_layer_logits(model, inputs, positions, positions)
        return {name: float((first_layer_logits(model, inputs, positions, stepped(positions, axis)) - before)
                            .abs().nanmean())  # -inf − -inf at keys a bias hides in both: not a change
                for axis, name in enumerate(AXIS_NAMES[positions.axes])}


def sensitivity(spec: ArmSpec, size: str, encoding_options: tuple[tuple[str, object], ...] = ()) -> dict[str, float]:
    """Per axis: the arm's mean ``|Δ logit|`` over 1-D RoPE's on the same task at the same width."""
    reference = logit_change(ArmSpec(spec.task, REFERENCE, spec.train_length, spec.d_model), size)["sequence"]
    return {axis: change / reference for axis, change in logit_change(spec, size, encoding_options).items()}


def measured(declared: list[Comparison], sizes: dict[str, list[str]]):
    """``(comparison, size, arm, axis, ratio)`` for every arm that reads position ids (not none, not position
    from content) of every comparison, at each size its task has results for (``sizes``: task -> sizes)."""
    for comparison in declared:
        for size in sizes.get(comparison.task, ()):
            for spec in comparison.arms:
                if encodings.traits(spec.encoding).reads != "positions":
                    continue
                for axis, ratio in sensitivity(spec, size).items():
                    yield comparison, size, spec, axis, ratio


def refuse_blind(declared: list[Comparison], sizes: dict[str, list[str]]) -> None:
    """A one-line ``ValueError`` for the first comparison (withdrawn ones aside) whose arm is blind on an
    axis at a size its task has results for, naming the arm, axis and figure."""
    for comparison, size, spec, axis, ratio in measured([c for c in declared if not c.withdrawn], sizes):
        if ratio < BLIND:
            raise ValueError(
                f"comparison {comparison.id}: arm {spec.encoding} is blind on the {axis} axis of "
                f"{comparison.task} at {size}: a key moved one step changes the first layer's logits by "
                f"{ratio:.2%} of what 1-D {REFERENCE} changes them (below {BLIND:.0%}); mark the "
                f"comparison 'withdrawn: axis-blind …' or declare an arm that sees the axis")


def table(declared: list[Comparison], sizes: dict[str, list[str]]) -> pd.DataFrame:
    """``axes.csv``: each declared arm that reads more than one axis, per axis, once per (task, arm, size):
    its figure against 1-D RoPE's and whether it is blind there; withdrawn comparisons' arms included."""
    rows = [{"task": c.task, "encoding": spec.encoding, "size": size, "axis": axis, "ratio": ratio,
             "blind": ratio < BLIND} for c, size, spec, axis, ratio in measured(declared, sizes)]
    frame = pd.DataFrame(rows, columns=["task", "encoding", "size", "axis", "ratio", "blind"])
    frame = frame.drop_duplicates(["task", "encoding", "size", "axis"])
    axes = frame.groupby(["task", "encoding", "size"])["axis"].transform("count")
    return frame[axes > 1].reset_index(drop=True)
