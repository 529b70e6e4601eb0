"""One arm's rows of a results table (the extrapolation, checkpoints or items table: one row per seed and
length): which rows are the arm's (:func:`cell_rows`, at its declared seeds and budget :func:`declared_rows`),
which of them finished (:func:`finished`), and what the judge reads of them gathered into an :class:`Arm`
(:func:`arm`): the values per seed, the chance gate's inputs, and the run facts that keep seeds that are not
replicates apart. The judge (:mod:`posbench.evidence`), ``advise`` and the published shapes read arms here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from posbench.comparisons import ArmSpec, Comparison
from posbench.experiments import best_rate

RUN_KEYS = ("device", "dtype", "steps", "batch_size", "lr", "text")  # what an arm's seeds share to be replicates


@dataclass(frozen=True)
class Arm:
    """One encoding's results for one comparison at one size: the seeds that finished, and why others did not."""

    encoding: str
    values: np.ndarray  # (n,) the comparison's metric per ok seed
    seeds: np.ndarray  # (n,) those seeds
    gate_values: np.ndarray  # (m,) the metric the chance gate reads (token accuracy for exact match) at the
    chance: float  # training length, where the arm learned or not, and its chance level there (NaN: unknown)
    diverged: int = 0
    undertrained: int = 0
    overfit: int = 0  # seeds whose annealed validation loss at the last budget is above an earlier checkpoint's
    untrained_positions: bool = False
    lr: float | None = None  # the rate its seeds trained at (None: several, a gate, or no column)
    budget: tuple | None = None  # (steps, batch size) when the tables have them
    eval_len: int | None = None  # the evaluated length, in the task's units
    train_len: int | None = None  # the training length and model width the arm was trained at (its own,
    d_model: int | None = None  # else the task's and the size's): verdicts.csv's columns
    params: float | None = None  # total parameters (the mean over ok seeds), where the tables have them
    gate_at_length: np.ndarray | None = None  # (n,) the gate's metric at the comparison's length, beyond
    chance_at_length: float = math.nan  # the training length only: a note, never a gate
    mixed: tuple[str, ...] = ()  # "device (cpu, cuda)": what differs between its seeds' runs (never pooled)
    text: str = ""  # the text its task read (aggregate's text column; "" where none is recorded)

    @property
    def n(self) -> int:
        return len(self.values)

    def resampled(self, rng: np.random.Generator, times: int) -> np.ndarray:
        """``(times, n)`` seed-bootstrap resamples of the values."""
        return self.values[rng.integers(0, self.n, size=(times, self.n))]


def arm(results: pd.DataFrame, comparison: Comparison, spec: ArmSpec, size: str, seeds: tuple[int, ...] | None = None,
        steps: int | None = None) -> Arm:
    """An arm's rows of ``results`` (the extrapolation table: one row per seed and length) for a
    comparison at ``size``. Judging a declared comparison, only the ``seeds`` it declares at its budget
    ``steps`` (where the table has steps) count, and nothing is chosen: rows at several learning rates
    are seeds that are not replicates (a gate). Without ``seeds`` (advise's descriptive use) every seed
    counts, at the rate with the lowest validation loss where several were run
    (:func:`posbench.experiments.best_rate`).

    Whether the arm learned is read at the training length (where the table has it): an arm that
    learned and fails beyond its training length did not extrapolate, which is the comparison's data,
    not a reason to leave it out (a note says it is at chance there)."""
    cell = declared_rows(results[cell_rows(results, spec, size)], seeds, steps)
    ratios = cell["length_ratio"].astype(float)
    rows = cell[np.isclose(ratios, comparison.length_ratio)]
    if seeds is None:
        rows, lr, _ = best_rate(rows)
        cell = cell[cell["lr"] == lr] if lr is not None else cell
    ok = finished(rows)
    rates = sorted(ok["lr"].dropna().unique()) if "lr" in ok.columns else []
    lr = float(rates[0]) if len(rates) == 1 else None
    gate_column, chance_column = (("token_accuracy", "token_chance") if comparison.metric == "exact_match"
                                  else ("value", "chance"))
    trained = finished(cell[np.isclose(cell["length_ratio"].astype(float), 1.0)])
    beyond = comparison.length_ratio != 1 and len(trained) > 0  # the gate reads the training length's rows
    learned = trained if beyond else ok
    budget = None
    if {"steps", "batch_size"} <= set(rows.columns) and len(ok):
        budget = (int(ok["steps"].max()), int(ok["batch_size"].max()))
    untrained = bool("positions_trained" in ok.columns and (ok["positions_trained"] == False).any())  # noqa: E712
    length, width = spec.resolved(size)
    counted = ok["params_total"].dropna() if "params_total" in ok.columns else ok.iloc[:0]
    params = float(counted.mean()) if len(counted) else None
    return Arm(spec.encoding, ok["value"].to_numpy(float), ok["seed"].to_numpy(),
               learned[gate_column].to_numpy(float), mean_chance(learned, chance_column),
               diverged=int((rows["status"] == "diverged").sum()),
               undertrained=flagged(ok, "undertrained"), overfit=flagged(ok, "overfit"),
               untrained_positions=untrained, lr=lr, budget=budget,
               eval_len=int(ok["eval_len"].iloc[0]) if len(ok) else None, train_len=length, d_model=width,
               params=params, text=", ".join(sorted(map(str, ok["text"].dropna().unique()))) if "text" in ok else "",
               gate_at_length=ok[gate_column].to_numpy(float) if beyond else None,
               chance_at_length=mean_chance(ok, chance_column) if beyond else math.nan, mixed=mixed_runs(ok))


def declared_rows(rows: pd.DataFrame, seeds: tuple[int, ...] | None, steps: int | None) -> pd.DataFrame:
    """The rows of ``seeds`` trained for ``steps`` (where ``rows`` has steps); ``None``: any."""
    if seeds is not None:
        rows = rows[rows["seed"].isin(seeds)]
    return rows[rows["steps"] == steps] if steps is not None and "steps" in rows.columns else rows


def flagged(rows: pd.DataFrame, column: str) -> int:
    """How many of ``rows`` have the flag ``column`` set (a missing column or value: not set)."""
    return int(rows[column].fillna(False).astype(bool).sum()) if column in rows.columns else 0


def mixed_runs(rows: pd.DataFrame) -> tuple[str, ...]:
    """Which of :data:`RUN_KEYS` take more than one value across ``rows`` (one arm's seeds), as
    ``"device (cpu, cuda)"``: seeds run on other devices, dtypes or budgets are not replicates of one another."""
    spread = [(key, sorted(map(str, rows[key].dropna().unique()))) for key in RUN_KEYS if key in rows.columns]
    return tuple(f"{key} ({', '.join(values)})" for key, values in spread if len(values) > 1)


def mean_chance(rows: pd.DataFrame, column: str) -> float:
    """The chance level of ``rows`` (their evaluation sets'), NaN where the table has none."""
    return float(rows[column].mean()) if column in rows.columns and len(rows) else math.nan


def finished(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of seeds that finished with a value, by seed (a table without a status: every row with a value)."""
    ok = rows[rows["status"] == "ok"] if "status" in rows.columns else rows
    return ok.dropna(subset=["value"]).sort_values("seed")


def seed_values(rows: pd.DataFrame) -> np.ndarray:
    """``(seeds,)`` the value of each finished row (:func:`finished`), in seed order."""
    return finished(rows)["value"].to_numpy(float)


def cell_rows(frame: pd.DataFrame, spec: ArmSpec, size: str) -> pd.Series:
    """Which rows of ``frame`` (a results or items table) are the arm's: its task, encoding and size, and
    its training length and width where the table has those columns (so a sweep's cells at other
    lengths or widths never join the plain arm); without them, only an arm at the defaults has rows."""
    chosen = (frame["task"] == spec.task) & (frame["encoding"] == spec.encoding) & (frame["size"] == size)
    for column, declared, value in zip(("train_len", "d_model"), (spec.train_length, spec.d_model),
                                       spec.resolved(size)):
        if column in frame.columns:
            chosen &= frame[column] == value
        elif declared is not None:  # a table that cannot tell lengths or widths apart has no such arm
            chosen &= False
    return chosen
