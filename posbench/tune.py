"""Tuning as a step of its own: both arms of a declared comparison on one learning-rate grid, chosen on
validation loss only, written to ``lr.csv``.

A verdict compares encodings, so the arms must not also differ in how well their rate was chosen.
Both arms of a comparison, at one model size, train on one log-spaced grid (each rate :data:`FACTOR` times the one
before, centred on the task's default), :data:`SEEDS` pilot seeds each (below the comparisons' first
deciding seed, so no tuning run ever decides), at the comparison's declared budget and schedule (its
annealed checkpoints). Each arm's rate is the one with the lowest mean validation loss at the last
checkpoint; while either arm's lies at an edge of the grid, the grid grows by one rate past that edge for
both arms, at most :data:`MAX_EXTENSIONS` times. A choice still at an edge after that is marked (``at_edge``) rather
than hidden. The test split is never read.

:func:`tune` runs one comparison (its records under ``out/records/``, kept by :mod:`posbench.batch`
when a rerun finds them); :func:`table` is its rows of ``lr.csv``: one row per arm and rate, with the
grid, the mean validation loss and its seeds, and which rate was chosen. :func:`chosen_rates` reads a
whole ``lr.csv`` back for the workflow (``train.lr_table``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from posbench import comparisons, tasks
from posbench.comparisons import ArmSpec, Comparison

FACTOR = 3  # between neighbouring rates of the grid
SEEDS = (0, 1, 2)  # pilot seeds: below every comparison's first deciding seed
MAX_EXTENSIONS = 2  # times the grid may grow past an edge where the best rate lies
COLUMNS = ("comparison", "size", "task", "encoding", "train_len", "d_model", "steps", "grid", "lr", "validation_loss",
           "seeds", "chosen", "at_edge")

Trainer = Callable[[ArmSpec, float, int], float]  # (arm, rate, seed) -> validation loss at the last checkpoint


def initial_grid(task: str, centre: float | None = None) -> list[float]:
    """``centre`` (the task's default rate unless given) and one :data:`FACTOR` below and above it."""
    centre = tasks.get(task).lr if centre is None else centre
    return [rounded(centre / FACTOR), centre, rounded(centre * FACTOR)]


def grid_centre(arms: tuple[ArmSpec, ...], earlier: dict[str, float]) -> float | None:
    """Where a comparison's grid starts: the rate nearest the geometric mean of the rates its arms were chosen at
    before (``earlier``: encoding -> rate, e.g. at another size), on the task default's lattice of
    :data:`FACTOR` steps, so that a size starts where another ended and needs fewer rates; ``None`` (the task's
    default) where an arm has no earlier rate."""
    if any(arm.encoding not in earlier for arm in arms):
        return None
    default = tasks.get(arms[0].task).lr
    mean_log = sum(math.log(earlier[arm.encoding] / default, FACTOR) for arm in arms) / len(arms)
    return rounded(default * FACTOR ** round(mean_log))


def rounded(rate: float) -> float:
    """A rate to 4 significant digits, as record folders name it (``lr0.000333/``)."""
    return float(f"{rate:.4g}")


def tune_arms(arms: tuple[ArmSpec, ...], run: Trainer, centre: float | None = None
              ) -> tuple[list[float], dict[ArmSpec, dict[float, list[float]]], dict[ArmSpec, float]]:
    """(the one grid, validation losses per arm and rate, each arm's chosen rate) of a comparison's arms: the
    initial grid, grown past an edge where any arm's best lies, at most :data:`MAX_EXTENSIONS` times, every
    arm trained at every rate of it (so no arm's choice had a rate the other's lacked)."""
    grid, losses = initial_grid(arms[0].task, centre), {arm: {} for arm in arms}
    for extension in range(MAX_EXTENSIONS + 1):
        for arm in arms:
            for rate in grid:
                if rate not in losses[arm]:
                    losses[arm][rate] = [run(arm, rate, seed) for seed in SEEDS]
        best = {arm: min(grid, key=lambda rate: mean(losses[arm][rate])) for arm in arms}
        low, high = grid[0] in best.values(), grid[-1] in best.values()
        if not (low or high) or extension == MAX_EXTENSIONS:
            return grid, losses, best
        grid = [*([rounded(grid[0] / FACTOR)] if low else []), *grid, *([rounded(grid[-1] * FACTOR)] if high else [])]
    raise AssertionError("unreachable")


def mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.inf  # a diverged seed cannot make a rate best


def table(comparison: Comparison, run: Trainer, size: str, centre: float | None = None) -> pd.DataFrame:
    """``lr.csv``'s rows of one comparison at one model size: each arm at each rate it was tuned at, the grid
    starting at ``centre`` (:func:`grid_centre`; the task's default unless given)."""
    rows = []
    grid, losses, chosen = tune_arms(comparison.arms, run, centre)
    for arm in comparison.arms:
        length, width = arm.resolved(size)
        for rate in grid:
            rows.append({"comparison": comparison.id, "size": size, "task": arm.task, "encoding": arm.encoding,
                         "train_len": length, "d_model": width,
                         "steps": comparison.budget, "grid": " ".join(f"{r:g}" for r in grid), "lr": rate,
                         "validation_loss": mean(losses[arm][rate]), "seeds": len(losses[arm][rate]),
                         "chosen": rate == chosen[arm], "at_edge": rate == chosen[arm] and rate in (grid[0], grid[-1])})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def chosen_rates(path: str | Path) -> dict[tuple[str, str, str, int, int, int], float]:
    """(task, encoding, size, train_len, d_model, steps) -> the chosen rate, from an ``lr.csv``; a one-line
    ``ValueError`` naming the file when it is missing or lacks a column."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"lr table {path} does not exist; run `python -m posbench tune` (rule tune) to make one")
    frame = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"lr table {path}: no column {', '.join(missing)}; expected: {', '.join(COLUMNS)}")
    chosen = frame[frame["chosen"].astype(bool)]
    return {(r.task, r.encoding, r.size, int(r.train_len), int(r.d_model), int(r.steps)): float(r.lr)
            for r in chosen.itertuples()}


def added_rates(path: str | Path) -> dict[tuple[str, str, int, int, int], float]:
    """(task, size, train_len, d_model, steps) -> the rate chosen for the added arm of the comparison tuned at that
    cell, from an ``lr.csv``: what a descriptive arm trained there takes (``train.descriptive_lr: tuned``), so that
    at each size every descriptive arm trains at one tuned rate, as the comparisons' arms do."""
    frame = pd.read_csv(path)
    added = {c.id: c.added for c in comparisons.load().comparisons}
    chosen = frame[frame["chosen"].astype(bool) & (frame["encoding"] == frame["comparison"].map(added))]
    return {(r.task, r.size, int(r.train_len), int(r.d_model), int(r.steps)): float(r.lr) for r in chosen.itertuples()}


def declared(comparison_id: str, preset: str = "all") -> Comparison:
    """The declared comparison ``comparison_id`` at ``preset``'s budget (``budgets.scale``); a one-line
    ``ValueError`` naming the allowed ids."""
    found = {c.id: c for c in comparisons.load().in_preset(preset)}
    if comparison_id not in found:
        raise ValueError(f"unknown comparison {comparison_id!r} in preset {preset}; allowed: {', '.join(found)}")
    return found[comparison_id]
