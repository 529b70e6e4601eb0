"""Scoring a model on a task's sets: every evaluation sequence (an *item*) on its own as well as the
whole set, so that intervals can include the evaluation set's own sampling error.

:func:`evaluate` scores a test (or validation) set at one length, with the metrics of
:mod:`posbench.metrics` and, unless told not to, the decoded ones of :mod:`posbench.free_running`;
:func:`evaluate_sliding` a causal character LM's sliding windows; :func:`validation_set` and
:func:`held_out_loss` the fixed set and loss of the validation curve :func:`posbench.train.fit` draws.
One scorer (:func:`score`) serves them all, in eval mode: evaluating draws no training randomness.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from posbench import free_running, metrics, records, tasks
from posbench.devices import FLOAT32, autocast
from posbench.tasks.base import IGNORE
from posbench.tasks.corpus import sliding_stride

POSITION_BINS = 16  # loss by position: each evaluation window cut into this many equal runs


def scored_logits(model: nn.Module, batch: tasks.Batch, dtype: str = FLOAT32) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (float32, whatever the forward ran in) and targets flattened to ``(N, classes)`` and
    ``(N,)`` for every task shape, on the model's device; the forward in ``dtype``'s precision."""
    device = next(model.parameters()).device
    positions = batch.positions.to(device) if laid_out(model, batch) else None
    with autocast(device, dtype):
        logits = model(batch.inputs.to(device), positions)  # (B, T, V) or (B, C)
    if logits.dim() == 2:
        logits = logits[:, None]  # (B, 1, C): one target per sequence
    return logits.flatten(0, 1).float(), batch.targets.to(device).flatten()


def laid_out(model: nn.Module, batch: tasks.Batch) -> bool:
    """Whether the model reads the batch's own layout (a multimodal encoding on a multimodal task); otherwise
    its encoding's plain positions (a 1-D encoding reads the layout flat, a 2-D one its grid)."""
    return batch.positions is not None and model.encoding.axes == "multimodal"


def validation_set(task: tasks.Task, size: int) -> list[tasks.Batch]:
    """The first ``size`` (the training batch size) sequences of the task's validation set at its
    training length: the fixed set of the validation curve. One forward of a batch about every
    ``steps // 50`` steps, against a forward and backward (about three forwards) every step, keeps the
    curve under 5 % of training time from 50 steps on (measured: results/reference/NOTES.md, Lab
    notes). Every record keeps its own figure (``wall_time_s.validation_curve``, part of
    ``wall_time_s.train``). Shorter runs pay more: below 50 steps it is a point every step."""
    batches, seen = [], 0
    for batch in task.eval_batches(task.train_length, "validation"):
        batches.append(tasks.Batch(batch.inputs[: size - seen], batch.targets[: size - seen], batch.positions))
        seen += len(batches[-1].targets)
        if seen == size:
            break
    return batches


def held_out_loss(model: nn.Module, batches: list[tasks.Batch], dtype: str) -> float:
    """Mean loss per scored target on ``batches``, in eval mode; the model goes back to training mode."""
    return score(model, batches, (), dtype).metrics["loss"]


@dataclass(frozen=True)
class Evaluation:
    """A model scored on a task's evaluation set at one length, item by item and as a whole."""

    items: dict[str, np.ndarray]  # metrics.ITEM_SUMS, one row per evaluation sequence, in the set's order
    sums: dict[str, float | int]  # metrics.SUMS over the whole set
    metrics: dict[str, float]  # "loss" and the task's metrics
    by_position: dict[str, np.ndarray]  # "loss_sum", "scored": (T,) summed over the set at each position

    def summary(self) -> dict:
        """What the record keeps of it: the metrics, and the loss by position where a sequence has more
        than one scored position."""
        summary = {"metrics": self.metrics, "scored_targets": self.sums["scored"], "sequences": self.sums["sequences"]}
        if len(self.by_position["scored"]) > 1:
            summary["loss_by_position"] = position_bins(self.by_position["loss_sum"], self.by_position["scored"])
        return summary


def position_bins(loss_sum: np.ndarray, scored: np.ndarray, bins: int = POSITION_BINS) -> list[dict]:
    """The mean loss (nats per scored target) over ``bins`` equal runs of positions ``[start, stop)``,
    runs where nothing is scored left out. Beyond the training length it tells a model that *uses* the
    longer context (loss keeps falling with position) from one that only survives it (flat) or breaks."""
    edges = np.unique(np.linspace(0, len(scored), bins + 1).round().astype(int))
    runs = [(int(start), int(stop), int(scored[start:stop].sum())) for start, stop in zip(edges[:-1], edges[1:])]
    return [{"start": start, "stop": stop, "loss": float(loss_sum[start:stop].sum() / n), "scored": n}
            for start, stop, n in runs if n]


def evaluate(model: nn.Module, task: tasks.Task, length: int, dtype: str = FLOAT32, split: str = "test",
             decode: bool = True) -> Evaluation:
    """The task's metrics on its fixed ``split`` set at ``length``, and each sequence's own sums; on
    the model's device, the forward in ``dtype``'s precision (as it was trained); a decoded metric
    (``greedy_exact_match``) by :mod:`posbench.free_running` unless ``decode`` is false (an earlier
    checkpoint's and the validation set's: decoding costs several forwards, and the trained model's own
    test sets are where the papers' score is read)."""
    evaluation = score(model, task.eval_batches(length, split), free_running.teacher_forced(task.metrics), dtype)
    if not decode:
        return evaluation
    return free_running.with_decoded(model, task.eval_batches(length, split), task.metrics, dtype, evaluation)


def evaluate_sliding(model: nn.Module, task: tasks.Task, length: int, dtype: str = FLOAT32) -> Evaluation:
    """The task's metrics on its sliding windows of the test split at ``length``: each scored character
    after the first window reads at least ``length - stride`` characters of context."""
    return score(model, task.sliding_batches(length), task.metrics, dtype)


def sliding_summary(length: int, evaluation: Evaluation) -> dict:
    """What an evaluation entry keeps of the sliding windows: the stride, the windows, the characters
    they score and the metrics (no loss by position: past the first window only the last positions score)."""
    return {"stride": sliding_stride(length), "windows": evaluation.sums["sequences"],
            "scored_targets": evaluation.sums["scored"], "metrics": evaluation.metrics}


def score(model: nn.Module, eval_batches: Iterable[tasks.Batch], names: tuple[str, ...], dtype: str) -> Evaluation:
    """``loss`` and the metrics ``names`` on ``eval_batches``, in eval mode (no randomness drawn); the
    model goes back to training mode. One scorer for the test sets, the validation set and the curve."""
    loss_sum, batches = 0.0, []
    model.eval()
    with torch.no_grad():
        for batch in eval_batches:
            logits, targets = scored_logits(model, batch, dtype)
            # The total as torch reduces each batch, as records have always had it; the items' float64
            # sums agree with it to rounding, not bit for bit.
            loss_sum += F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum").item()
            batches.append(item_sums(logits, targets, batch.targets.shape))
    model.train()
    items = {name: np.concatenate([b[name] for b in batches]) for name in metrics.ITEM_SUMS}
    sums = {**metrics.sums(items), "loss_sum": loss_sum}
    width = max(len(b["position_scored"]) for b in batches)  # sequence tasks pad each batch to its longest
    by_position = {name: sum(np.pad(b[f"position_{name}"], (0, width - len(b[f"position_{name}"]))) for b in batches)
                   for name in ("loss_sum", "scored")}
    return Evaluation(items, sums, {name: metrics.get(name).value(sums) for name in ("loss", *names)}, by_position)


def item_sums(logits: torch.Tensor, targets: torch.Tensor, shape: torch.Size) -> dict[str, np.ndarray]:
    """Each sequence's sums (``metrics.ITEM_SUMS``), and the batch's at each position (``position_loss_sum``,
    ``position_scored``, ``(T,)``): ``logits (B·T, V)`` and ``targets (B·T,)`` from :func:`scored_logits`,
    ``shape`` (B, T)."""
    scored = (targets != IGNORE).view(shape)  # (B, T)
    losses = F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="none").view(shape)  # 0 where ignored
    right = (logits.argmax(-1) == targets).view(shape) | ~scored  # (B, T)
    sums = {"loss_sum": losses.double().sum(1), "scored": scored.sum(1), "correct": (right & scored).sum(1),
            "exact": right.all(1), "position_loss_sum": losses.double().sum(0), "position_scored": scored.sum(0)}
    return {name: value.cpu().numpy() for name, value in sums.items()}


def item_table(evaluations: dict[int, Evaluation]) -> records.Items:
    """Every length's items in one table: ``length``, ``item`` (its index in that length's set) and its sums."""
    columns = {"length": np.concatenate([np.full(e.sums["sequences"], n) for n, e in evaluations.items()]),
               "item": np.concatenate([np.arange(e.sums["sequences"]) for e in evaluations.values()])}
    for name in next(iter(evaluations.values())).items:  # metrics.ITEM_SUMS, and a decoded metric's sum
        columns[name] = np.concatenate([e.items[name] for e in evaluations.values()])
    return records.Items(columns)
