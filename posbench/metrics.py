"""Every metric a train record reports, defined once: its name, what it means, its direction, its
axis label, and how it is computed from the evaluation's sums.

An evaluation scores a fixed set of *items*, one per evaluation sequence, and keeps five sums over
them (:data:`SUMS`). Every metric is a ratio of two of those sums, so the same definition gives the
value in the record (from the whole set) and, later, the value on a bootstrap resample of the items
(from the resample's sums, :func:`sums`). The counts agree exactly either way; the record's
``loss_sum`` is torch's float32 sum per batch (as records had it before items were kept), the items'
float64, so a loss recomputed from all items matches the record's to about 1e-6, not bit for bit.

``accuracy`` and ``exact_match`` are the same ratio, the share of sequences that are right, under
the names their tasks use: ``accuracy`` for a classification task (one label per sequence, so a
sequence is right when its label is), ``exact_match`` for a sequence task (a sequence is right when
every scored target is). ``greedy_exact_match`` is ``exact_match`` with the answer written by the
model itself instead of read with the right earlier answer tokens (:mod:`posbench.free_running`): a
*decoded* metric, whose sum (``greedy_exact``) comes from decoding, not from the one forward pass the
others share. ``token_accuracy`` is always per scored target; on a classification task it would
equal ``accuracy``, and no classification task reports it.

A metric's *chance level* (:attr:`Metric.chance`) is what a model that ignores its input scores on an
evaluation set, from the counts of that set's scored targets: for the accuracies, always predicting
the set's most frequent target (:func:`majority_rate`); for bits per character, predicting every
character by its frequency in the training split (:func:`unigram_bits`). ``exact_match`` and
``greedy_exact_match`` have none: guessing a whole sequence is so unlikely that the report gates it
on token accuracy instead; the loss has none either (``bits_per_char`` is the loss's chance where it matters).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

SUMS = {  # name -> what is summed over the evaluation's items
    "loss_sum": "cross-entropy of the scored targets, in nats",
    "scored": "scored targets (targets that are not IGNORE)",
    "correct": "scored targets whose argmax prediction is right",
    "exact": "sequences whose every scored target is right",
    "sequences": "sequences (items)",
    "greedy_exact": "sequences whose answer the model writes right by itself (posbench.free_running)",
}
ITEM_SUMS = ("loss_sum", "scored", "correct", "exact")  # what each item keeps; "sequences" counts the items


def majority_rate(counts: np.ndarray, prior: np.ndarray | None = None) -> float:
    """The share of the most frequent target among ``counts (K,)``: a constant guess's accuracy on that set."""
    return float(counts.max() / counts.sum())


def unigram_bits(counts: np.ndarray, prior: np.ndarray) -> float:
    """Mean cross-entropy in bits of targets with ``counts (K,)`` under the probabilities ``prior (V,)``, K <= V."""
    return float(-(counts * np.log2(prior[: len(counts)])).sum() / counts.sum())


@dataclass(frozen=True)
class Metric:
    """One metric: ``numerator / denominator / divisor`` of the evaluation's sums."""

    name: str
    meaning: str
    label: str  # axis label, with its unit
    higher_is_better: bool
    numerator: str  # a key of SUMS
    denominator: str  # a key of SUMS
    divisor: float = 1.0  # a change of unit, applied last (nats -> bits)
    chance: Callable[[np.ndarray, np.ndarray | None], float] | None = None  # (target counts, prior) -> chance level
    decoded: bool = False  # from the model's own greedy outputs (posbench.free_running), not one forward pass

    def value(self, sums: Mapping[str, float]) -> float:
        return sums[self.numerator] / sums[self.denominator] / self.divisor


METRICS = {metric.name: metric for metric in (
    Metric("loss", "mean cross-entropy per scored target", "cross-entropy (nats per scored target)", False,
           "loss_sum", "scored"),
    Metric("bits_per_char", "mean cross-entropy per scored character, in bits", "bits per character", False,
           "loss_sum", "scored", math.log(2), unigram_bits),
    Metric("token_accuracy", "share of scored targets predicted right", "token accuracy (fraction)", True,
           "correct", "scored", chance=majority_rate),
    Metric("exact_match", "share of sequences with every scored target right", "exact match (fraction)", True,
           "exact", "sequences"),
    Metric("greedy_exact_match", "share of sequences whose answer the model writes right by itself, greedy and "
           "free-running (posbench.free_running)", "greedy exact match (fraction)", True, "greedy_exact", "sequences",
           decoded=True),
    Metric("accuracy", "share of sequences whose one label is predicted right (classification)",
           "accuracy (fraction)", True, "exact", "sequences", chance=majority_rate),
)}


def get(name: str) -> Metric:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; allowed: {', '.join(METRICS)}")
    return METRICS[name]


def sums(items: Mapping[str, np.ndarray]) -> dict[str, float | int]:
    """The :data:`SUMS` of a set of items (columns :data:`ITEM_SUMS`, and a decoded metric's sum where the
    items have it, one row per item)."""
    return {**{name: np.sum(items[name]).item() for name in SUMS if name in items}, "sequences": len(items["exact"])}
