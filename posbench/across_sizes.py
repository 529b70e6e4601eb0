"""``scale.csv``: each deciding comparison's verdict across the model sizes the tables hold, and its trend
in size. The judge step writes it (:func:`write`): lines where a deciding comparison has results at two sizes
or more, else only its header; the report's page "Across sizes" reads it where it has lines. Imports no
torch: a size's parameters come from :mod:`posbench.sizes`, the runs' budgets and flags from ``accuracy.csv``.

One line per (row, comparison, size), sizes in parameter order (:data:`COLUMNS`): ``params_non_embedding`` is
:func:`posbench.sizes.non_embedding_params` (12·d²·L: attention's four and the feed-forward's eight d² projections
per layer; no embedding, output head, norm, bias or encoding parameter, so it does not depend on the arm nor the
task's vocabulary); ``params_total`` the comparator arm's whole model as accuracy.csv records it; ``tokens`` steps ×
batch_size × train_len of the deciding runs (their mean: both arms train one budget); ``verdict`` the comparison's
outcome at that size; ``undertrained`` the share of its deciding runs at that size flagged undertrained;
``n_added``, ``n_comparator`` the seeds per arm; ``cpu_model`` the CPUs its deciding runs trained on (a part may
span machines, and a trajectory depends on the CPU's arithmetic). The trend columns, the same on every line of a
comparison: ``slope`` of the effect against log10(params_non_embedding) with its 95 % t interval (``slope_low``,
``slope_high``; n − 2 degrees of freedom, so 1 with three sizes and no interval with two), and ``size_trend``
(:func:`trend`; named apart from verdicts.csv's ``trend``, which is the effect's move between budgets).

Beside them, :func:`descriptive_arms`: lm_prose's arms (none, learned, alibi, rope, sinusoidal in the scale
preset) at every size, each arm's metric and its difference from the added arm, so that a reader sees each
pair's trend beside the deciding one's. Descriptive: no margin, no verdict.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from posbench import statistics
from posbench.records import write_atomically
from posbench.sizes import SIZES, non_embedding_params
from posbench.tables import plain

TABLE = "scale"
COLUMNS = ("row", "comparison", "size", "params_non_embedding", "params_total", "tokens", "steps", "effect", "ci_low",
           "ci_high", "margin", "verdict", "undertrained", "n_added", "n_comparator", "slope", "slope_low",
           "slope_high", "size_trend", "cpu_model")
SAME = "same verdict at every size"
CLOSING = "gap closing with size"
WIDENING = "gap widening with size"
# accuracy column -> verdicts column, per arm (the added arm's encoding is add_arm)
ARM_COLUMNS = {arm: {"encoding": encoding, "d_model": f"d_model_{arm}", "lr": f"lr_{arm}"}
               for arm, encoding in (("added", "add_arm"), ("comparator", "comparator_arm"))}
CELL_COLUMNS = ("task", "size", "train_len", "steps")  # shared by both arms of a comparison
DESCRIPTIVE_TASK = "lm_prose"
DESCRIPTIVE_ADDED = "sinusoidal"  # each descriptive arm's difference is taken from this arm's
DESCRIPTIVE_RATIOS = (1.0, 4.0)  # at the training length, and beyond it where the advice row asks (4x)
DESCRIPTIVE_COLUMNS = ("steps", "length_ratio", "encoding", "size", "params_non_embedding", "metric",
                       "higher_is_better", "mean", "low", "high", "seeds", "vs_added", "vs_low", "vs_high")


def seed_numbers(text) -> set[int]:
    """``"100-106"`` or ``"3, 5, 8-9"`` (verdicts.csv's seeds_added) as the set of seeds it names."""
    found = set()
    for part in str(text).replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            found.update(range(int(low), int(high if high.isdigit() else low) + 1))
    return found


def arm_runs(accuracy: pd.DataFrame, line, arm: str) -> pd.DataFrame:
    """The ok rows of ``accuracy`` that are the deciding runs of ``line``'s ``arm`` ("added" or
    "comparator"): its encoding, width, rate, task, size, training length, steps and seeds."""
    if accuracy.empty:
        return accuracy
    wanted = {column: getattr(line, name, None) for column, name in ARM_COLUMNS[arm].items()}
    wanted.update({column: getattr(line, column, None) for column in CELL_COLUMNS})
    rows = accuracy[accuracy["status"] == "ok"] if "status" in accuracy else accuracy
    for column, value in wanted.items():
        if column in rows.columns and value is not None and not pd.isna(value):
            rows = rows[rows[column] == value]
    seeds = seed_numbers(getattr(line, f"seeds_{arm}", ""))
    return rows[rows["seed"].isin(seeds)] if seeds and "seed" in rows else rows


def trend(verdicts: list[str], sizes: list[str], slope_low: float, slope_high: float, mean_effect: float) -> str:
    """A comparison's trend over ``sizes`` (parameter order) with their ``verdicts``: "changes at size X" where
    X is the first size whose verdict differs from the smallest size's; else "gap closing with size" where
    the slope's interval excludes 0 on the side that takes the effect toward 0 (against ``mean_effect``'s
    sign), "gap widening with size" where it excludes 0 on the other side; else "same verdict at every size"
    (an interval that holds 0, or none: two sizes)."""
    changed = next((size for size, verdict in zip(sizes, verdicts) if verdict != verdicts[0]), None)
    if changed is not None:
        return f"changes at size {changed}"
    if math.isnan(slope_low) or slope_low <= 0 <= slope_high:
        return SAME
    return CLOSING if (slope_low > 0) != (mean_effect > 0) else WIDENING


def smallest_first(lines: pd.DataFrame) -> pd.DataFrame:
    """``lines`` (verdicts.csv's) with each comparison's sizes from the smallest model to the largest, by
    non-embedding parameters (the judge writes them in the names' alphabetical order), sizes posbench does not
    name last; the comparisons in the order they come."""
    if "size" not in lines.columns:
        return lines
    params = lines["size"].map(lambda size: non_embedding_params(size) if size in SIZES else math.inf)
    comparison = (lines.groupby("comparison", sort=False, dropna=False).ngroup() if "comparison" in lines.columns
                  else pd.Series(0, index=lines.index))
    return lines.iloc[np.lexsort((params.to_numpy(float), comparison.to_numpy()))]  # by comparison, then size


def table(verdicts: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """:data:`COLUMNS` for every deciding comparison of ``verdicts`` judged (an effect) at two sizes or more
    that :data:`posbench.sizes.SIZES` names; empty when there is none."""
    if verdicts.empty or not {"decides", "effect", "size"} <= set(verdicts.columns):
        return pd.DataFrame(columns=list(COLUMNS))
    judged = verdicts[verdicts["decides"].astype(bool) & verdicts["effect"].notna() & verdicts["size"].isin(SIZES)]
    found = [comparison_lines(lines, accuracy) for _, lines in judged.groupby(["row", "comparison"], sort=False)
             if lines["size"].nunique() > 1]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(COLUMNS))


def comparison_lines(lines: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """One comparison's lines (one per size) with their size's parameters, budget, flags and the trend."""
    lines = lines.assign(params_non_embedding=lines["size"].map(non_embedding_params))
    lines = lines.sort_values("params_non_embedding").drop_duplicates("size")
    x, y = np.log10(lines["params_non_embedding"].to_numpy(float)), lines["effect"].to_numpy(float)  # (sizes,)
    slope, low, high = (statistics.slope_interval(x, y) if len(x) > 2
                        else (float((y[-1] - y[0]) / (x[-1] - x[0])), math.nan, math.nan))
    trend_columns = {"slope": slope, "slope_low": low, "slope_high": high,
                     "size_trend": trend(list(lines["outcome"]), list(lines["size"]), low, high, float(y.mean()))}
    rows = [size_line(line, accuracy) | trend_columns for line in lines.itertuples(index=False)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def size_line(line, accuracy: pd.DataFrame) -> dict:
    """One comparison's line at one size: its verdicts.csv numbers and its deciding runs' budget and flags."""
    runs = {arm: arm_runs(accuracy, line, arm) for arm in ("added", "comparator")}
    both = pd.concat(runs.values())  # (runs of both arms, accuracy's columns)
    columns = set(both.columns)
    tokens = both["steps"] * both["batch_size"] * both["train_len"] if {"batch_size", "train_len"} <= columns else []
    return ({column: getattr(line, column) for column in ("row", "comparison", "size", "params_non_embedding", "steps",
                                                          "effect", "ci_low", "ci_high", "margin", "n_added",
                                                          "n_comparator")}
            | {"params_total": runs["comparator"]["params_total"].mean() if "params_total" in columns else math.nan,
               "tokens": pd.Series(tokens, dtype=float).mean(), "verdict": line.outcome,
               # a run without the flag (NaN) counts as not undertrained
               "undertrained": both["undertrained"].eq(True).mean() if "undertrained" in columns else math.nan,
               "cpu_model": ("; ".join(sorted(both["cpu_model"].dropna().astype(str).unique()))
                             if "cpu_model" in columns else "")})


def write(tables_dir: str | Path, verdicts: pd.DataFrame, accuracy: pd.DataFrame) -> Path:
    """Write ``scale.csv`` into ``tables_dir`` and return its path: :func:`table`'s lines, or only its header
    where no deciding comparison has two sizes (so the workflow's judge step always has its output, and a file
    left by an earlier judgement of more sizes never speaks for verdicts that no longer hold them)."""
    found = table(verdicts, accuracy)
    return write_atomically(Path(tables_dir) / f"{TABLE}.csv", lambda file: found.to_csv(file, index=False))


def descriptive_arms(extrapolation: pd.DataFrame, sizes: list[str]) -> pd.DataFrame:
    """:data:`DESCRIPTIVE_COLUMNS`: :data:`DESCRIPTIVE_TASK`'s arms at their task's length and their size's width
    (:func:`posbench.tables.plain`), trained (no training-free scaling) at one budget at two or more of
    ``sizes`` beside another arm at that budget, read at :data:`DESCRIPTIVE_RATIOS` of their training length
    where their positions were trained.
    Per (budget, ratio, encoding, size) the mean over seeds with its 95 % t interval, and ``vs_added``: the
    difference from :data:`DESCRIPTIVE_ADDED` at the same budget, ratio and size, signed so that positive means
    the arm is better, with its Welch 95 % interval (NaN for the added arm itself or a side with one seed)."""
    needed = {"task", "encoding", "size", "seed", "status", "value", "length_ratio", "steps", "train_len", "d_model"}
    if extrapolation.empty or not needed <= set(extrapolation.columns):
        return pd.DataFrame(columns=list(DESCRIPTIVE_COLUMNS))
    rows = extrapolation[(extrapolation["task"] == DESCRIPTIVE_TASK) & (extrapolation["status"] == "ok")
                         & extrapolation["size"].isin(sizes) & extrapolation["length_ratio"].isin(DESCRIPTIVE_RATIOS)]
    rows = plain(rows)
    if "eval_scaling" in rows.columns:
        rows = rows[rows["eval_scaling"].isna()]
    if "positions_trained" in rows.columns:
        rows = rows[rows["positions_trained"].ne(False)]  # a learned table read beyond its rows: not a result
    rows = rows.dropna(subset=["value"])
    lines = [arm_lines(arm, rows) for _, arm in rows.groupby(["steps", "encoding"]) if arm["size"].nunique() > 1
             and rows.loc[rows["steps"] == arm["steps"].iloc[0], "encoding"].nunique() > 1]  # a pair to read
    found = pd.DataFrame([line for arm in lines for line in arm], columns=list(DESCRIPTIVE_COLUMNS))
    return found.sort_values(["steps", "length_ratio", "encoding", "params_non_embedding"], ignore_index=True)


def arm_lines(arm: pd.DataFrame, rows: pd.DataFrame) -> list[dict]:
    """One descriptive arm's lines at one budget (one per size and ratio); ``rows`` holds the added arm's runs."""
    found = []
    for (size, ratio), runs in arm.groupby(["size", "length_ratio"]):
        values = runs["value"].to_numpy(float)  # (seeds,)
        higher = bool(runs["higher_is_better"].iloc[0]) if "higher_is_better" in runs else False
        added = rows[(rows["encoding"] == DESCRIPTIVE_ADDED) & (rows["size"] == size)
                     & (rows["length_ratio"] == ratio) & (rows["steps"] == runs["steps"].iloc[0])]
        added = added["value"].to_numpy(float)  # (seeds of the added arm,)
        low, high = statistics.mean_interval(values) if len(values) > 1 else (math.nan, math.nan)
        versus = (statistics.contrast(values, added, higher, 0.0)
                  if runs["encoding"].iloc[0] != DESCRIPTIVE_ADDED and min(len(added), len(values)) > 1 else None)
        found.append({"steps": runs["steps"].iloc[0], "length_ratio": ratio, "encoding": runs["encoding"].iloc[0],
                      "size": size, "params_non_embedding": non_embedding_params(size),
                      "metric": runs["metric"].iloc[0] if "metric" in runs else "", "higher_is_better": higher,
                      "mean": values.mean(), "low": low, "high": high, "seeds": len(values),
                      "vs_added": versus.effect if versus else math.nan,
                      "vs_low": versus.ci_low if versus else math.nan,
                      "vs_high": versus.ci_high if versus else math.nan})
    return found
