"""Page 1's words for the judge step's ``verdicts.csv`` (:mod:`posbench.verdicts`): the summary table
and each row's details. Nothing here judges: every verdict, interval and line is read from the table.
"""

from __future__ import annotations

import math

import pandas as pd

from posbench.guidance import GuidanceRow

NO_RESULTS = "inconclusive: no deciding comparison has results in these tables"  # withdrawn ones never decide


def of_row(verdicts: pd.DataFrame, row: GuidanceRow, decides: bool = True) -> pd.DataFrame:
    """The table's lines for ``row``: its deciding comparisons, or (``decides`` false) the descriptive ones."""
    if verdicts.empty or "row" not in verdicts.columns:
        return verdicts.iloc[0:0]
    return verdicts[(verdicts["row"] == row.key) & (verdicts["decides"].astype(bool) == decides)]


def row_verdict(lines: pd.DataFrame) -> str:
    """The row's verdict as printed: per size where the table holds several."""
    if lines.empty:
        return NO_RESULTS
    found = list(lines.drop_duplicates("size")[["size", "row_shown"]].itertuples(index=False))
    if len(found) == 1:
        return found[0].row_shown
    return "; ".join(f"{size}: {verdict}" for size, verdict in found)


def interval(line) -> str:
    """``+0.230 [+0.149, +0.312] vs δ 0.1``, or why there is no effect."""
    if math.isnan(line.effect):
        return f"not compared (δ {line.margin:g})"
    return f"{line.effect:+.3f} [{line.ci_low:+.3f}, {line.ci_high:+.3f}] vs δ {line.margin:g}"


def reasons(lines: pd.DataFrame) -> pd.Series:
    """Why each of ``lines`` is withdrawn, "" for one that is not (or a verdicts.csv from before the column)."""
    if "withdrawn" not in lines:
        return pd.Series("", index=lines.index, dtype=object)
    return lines["withdrawn"].astype(object).fillna("")


def withdrawn(lines: pd.DataFrame) -> pd.DataFrame:
    """The withdrawn comparisons among ``lines`` (a row's non-deciding ones)."""
    return lines[reasons(lines) != ""]


def summary(lines: pd.DataFrame) -> list[tuple[str, str, str, str, str]]:
    """Per comparison: (comparison in a few words, effect [interval] vs δ, seeds and look, budget and trend,
    scope); a withdrawn one says so and why."""
    found = []
    for line, reason in zip(lines.itertuples(index=False), reasons(lines)):
        at = "" if line.length_ratio == 1 else f" at {line.length_ratio:g}×"
        gone = f" — withdrawn, decides nothing ({reason})" if reason else ""
        what = f"{line.comparison}: {line.add_arm} → {line.comparator_arm}, {line.metric}{at}{gone}"
        trained = "" if pd.isna(line.train_len) else f", trained at {int(line.train_len)}"
        look = getattr(line, "look", None)
        seeds = f"{line.n_added}/{line.n_comparator}" + ("" if pd.isna(look) or look is None else f", look {look:g}")
        found.append((what, interval(line), seeds, budget(line), f"{line.task}, {line.size}{trained}"))
    return found


def budget(line) -> str:
    """``2000 steps; closing −0.031 [−0.05, −0.01] from 1000``: the judged budget and the effect's trend."""
    steps = getattr(line, "steps", None)
    if steps is None or pd.isna(steps):
        return "—"
    trend = getattr(line, "trend", "")
    if not isinstance(trend, str) or not trend:
        return f"{steps:g} steps"
    return (f"{steps:g} steps; {trend} {line.trend_change:+.3f} [{line.trend_ci_low:+.3f}, {line.trend_ci_high:+.3f}] "
            f"from {line.trend_since:g}")


def evidence_lines(lines: pd.DataFrame, descriptive: pd.DataFrame) -> list[str]:
    """Each deciding comparison in one line, then each task's verdict where a row has several tasks,
    the notes, then the declared comparisons that do not decide: withdrawn ones with their reason and
    result, those outside the run's preset (descriptive only)."""
    found = [] if lines.empty else deciding_lines(lines)
    return found + [f"withdrawn ({reason}), its result: {line}" if reason
                    else f"not in this preset, descriptive: {line}" for line, reason in
                    zip(descriptive.get("line", []), reasons(descriptive))]


def deciding_lines(lines: pd.DataFrame) -> list[str]:
    found = list(lines["line"])
    for size, at_size in lines.groupby("size", sort=False):
        by_task = at_size.drop_duplicates("task")
        if len(by_task) > 1:
            found.append(f"by task ({size}): " + ", ".join(f"{t} {v}" for t, v in zip(by_task["task"],
                                                                                   by_task["task_verdict"])))
    notes = (note for text in lines["notes"].dropna() for note in str(text).split("\n") if note)
    return found + [f"note: {note}" for note in dict.fromkeys(notes)]
