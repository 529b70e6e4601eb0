"""What makes two records of a train table different experiments, and the one rule by which the report's
figures and ``advise`` keep them apart: a mean, a bar, a line or an advice row never pools them.

Two records are one experiment when they share every column of :data:`EXPERIMENT` that their table has
(task and encoding aside): model size and width, training length, steps, batch size, schedule, dtype
and learning rate. Seeds of one experiment are replicates; seeds of two are not (an arm trained 500
steps and the same arm trained 2,000 are two results, not ten seeds of one).

Readers group a table into *panels* (:func:`panels`): what a figure's panel or an advice ranking
compares side by side shares one :data:`BUDGET` (everything but the rate, which is tuned per arm);
where a task was run at several budgets, each is a panel of its own, named by what differs ("lm_prose
· 2,000 steps"). Within a panel, an encoding run at several learning rates keeps the one with the lowest
validation loss (:func:`one_rate`, :func:`best_rate`), as a tuned arm would.
"""

from __future__ import annotations

import pandas as pd

BUDGET = ("size", "train_len", "d_model", "steps", "batch_size", "schedule", "dtype")  # an arm's besides its rate
RATE = "lr"
EXPERIMENT = (*BUDGET, RATE)
COST_BUDGET = ("dtype", "batch", "threads")  # what a latency or memory curve's points share (cost.csv)
PANEL = "panel"
SEPARATOR = " · "
NAMES = {"steps": "{:,.0f} steps", "batch_size": "batch {:g}", "batch": "batch {:g}", "train_len": "length {:g}",
         "d_model": "d_model {:g}", "size": "size {}", "dtype": "{}", "schedule": "{} schedule",
         "threads": "{:g} threads", "lr": "lr {:g}"}  # how a label names a column's value


def present(frame: pd.DataFrame, key: tuple[str, ...] = EXPERIMENT, besides: tuple[str, ...] = ()) -> list[str]:
    """The columns of ``key`` that ``frame`` has, ``besides`` aside."""
    return [c for c in key if c in frame.columns and c not in besides]


def identity(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row naming its values of ``columns`` (missing values included), for grouping."""
    if not columns:
        return pd.Series("", index=frame.index)
    return frame[columns].map(str).agg("|".join, axis=1)  # map(str): a missing value is "nan", never dropped


def label(values: dict) -> str:
    """``{"steps": 2000, "lr": 0.009}`` -> ``"2,000 steps, lr 0.009"``."""
    return ", ".join(NAMES.get(c, c + " {}").format(v) if pd.notna(v) else f"{c} unknown" for c, v in values.items())


def panels(frame: pd.DataFrame, within: tuple[str, ...] = ("task",), besides: tuple[str, ...] = (),
           key: tuple[str, ...] = BUDGET) -> pd.DataFrame:
    """``frame`` with a :data:`PANEL` column: the values of ``within`` (e.g. the task), and where those rows
    hold several budgets (``key``'s columns but ``besides``, e.g. a sweep's axis), the budget's own
    columns that differ among them, so each budget is a panel of its own."""
    if frame.empty:
        return frame.assign(**{PANEL: pd.Series(dtype=str)})
    columns = present(frame, key, (*within, *besides))
    name = identity(frame, list(within)).str.replace("|", SEPARATOR, regex=False)
    budget = identity(frame, columns)
    shown = pd.Series("", index=frame.index)
    for _, rows in frame.groupby(name, sort=False):
        budgets = rows.drop_duplicates(subset=columns) if columns else rows.iloc[:1]
        if len(budgets) < 2:
            continue
        differ = [c for c in columns if budgets[c].map(str).nunique() > 1]
        names = {b: label(dict(zip(differ, values))) for b, values in
                 zip(identity(budgets, columns), budgets[differ].itertuples(index=False, name=None))}
        shown[rows.index] = budget[rows.index].map(names)
    return frame.assign(**{PANEL: name.where(shown == "", name + SEPARATOR + shown)})


def best_rate(rows: pd.DataFrame) -> tuple[pd.DataFrame, float | None, str]:
    """The rows at the learning rate with the lowest mean validation loss, where several were run."""
    if "lr" not in rows.columns or rows["lr"].dropna().empty:
        return rows, None, ""
    rates = sorted(rows["lr"].dropna().unique())
    if len(rates) == 1 or "validation_loss" not in rows.columns:
        return rows[rows["lr"] == rates[0]] if len(rates) == 1 else rows, (rates[0] if len(rates) == 1 else None), ""
    best = rows.groupby("lr")["validation_loss"].mean().idxmin()
    return rows[rows["lr"] == best], float(best), f"lr {best:g} chosen on validation loss among {rates}"


def one_rate(frame: pd.DataFrame, cell: tuple[str, ...] = (PANEL, "encoding")) -> pd.DataFrame:
    """The rows of ``frame`` at one learning rate per ``cell``: the lowest mean validation loss where several
    were run (:func:`best_rate`), the rate with most rows where no loss tells them apart."""
    if RATE not in frame.columns or frame.empty:
        return frame
    kept = []
    for _, rows in frame.groupby(list(cell), sort=False, dropna=False):
        chosen, rate, _ = best_rate(rows)
        if rate is None and chosen[RATE].nunique() > 1:
            rate = chosen[RATE].value_counts().index[0]
            chosen = chosen[chosen[RATE] == rate]
        kept.append(chosen)
    return pd.concat(kept).sort_index() if kept else frame


def one_experiment(frame: pd.DataFrame, within: tuple[str, ...] = ("task",), axis: str | None = None,
                   key: tuple[str, ...] = BUDGET) -> pd.DataFrame:
    """``frame`` split into panels (:func:`panels`) with one rate per encoding of a panel (per value of
    ``axis`` where the axis is itself a budget column, e.g. a width sweep's ``d_model``): every point a
    figure or ranking draws from one panel, encoding and x is the mean of one experiment's seeds."""
    besides = (axis,) if axis else ()
    split = panels(frame, within, besides, key)
    if "encoding" not in split.columns:
        return split
    cell = (PANEL, "encoding", *(a for a in besides if a in split.columns))
    return one_rate(split, cell)


def mixed(frame: pd.DataFrame, point: list[str], key: tuple[str, ...] = EXPERIMENT) -> pd.DataFrame:
    """The groups of ``frame`` by ``point`` (the columns that name one plotted point or ranked row) whose rows
    hold more than one experiment: empty when nothing is pooled. What the tests assert on."""
    columns = present(frame, key, tuple(point))
    if frame.empty or not columns:
        return frame.iloc[:0]
    counts = frame.assign(_experiment=identity(frame, columns)).groupby(point, dropna=False)["_experiment"].nunique()
    return counts[counts > 1].reset_index()
