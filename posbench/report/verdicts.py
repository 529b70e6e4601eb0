"""Page 1's words for the judge step's ``verdicts.csv`` (:mod:`posbench.verdicts`): each row's finding in
its own direction and units, its caveats and scope, and its details. Nothing here judges: every verdict,
interval and line is read from the tables (the caveats from ``accuracy.csv``'s deciding runs too).
"""

from __future__ import annotations

import math

import pandas as pd

from posbench import comparisons, metrics
from posbench.across_sizes import smallest_first
from posbench.guidance import GuidanceRow
from posbench.report.deciding_runs import interval_level

BETTER, NOT_BETTER = "comparator better by more than δ", "comparator not better by δ"  # as verdicts.csv has them
NO_RESULTS = "inconclusive: no deciding comparison has results in these tables"  # withdrawn ones never decide


def of_row(verdicts: pd.DataFrame, row: GuidanceRow, decides: bool = True) -> pd.DataFrame:
    """The table's lines for ``row``: its deciding comparisons, or (``decides`` false) the descriptive ones."""
    if verdicts.empty or "row" not in verdicts.columns:
        return verdicts.iloc[0:0]
    return smallest_first(verdicts[(verdicts["row"] == row.key) & (verdicts["decides"].astype(bool) == decides)])


def row_verdict(lines: pd.DataFrame) -> str:
    """The row's verdict as printed: per size where the table holds several."""
    if lines.empty:
        return NO_RESULTS
    found = list(lines.drop_duplicates("size")[["size", "row_shown"]].itertuples(index=False))
    if len(found) == 1:
        return found[0].row_shown
    return "; ".join(f"{size}: {verdict}" for size, verdict in found)


def reasons(lines: pd.DataFrame) -> pd.Series:
    """Why each of ``lines`` is withdrawn, "" for one that is not (or a verdicts.csv from before the column)."""
    if "withdrawn" not in lines:
        return pd.Series("", index=lines.index, dtype=object)
    return lines["withdrawn"].astype(object).fillna("")


def withdrawn(lines: pd.DataFrame) -> pd.DataFrame:
    """The withdrawn comparisons among ``lines`` (a row's non-deciding ones)."""
    return lines[reasons(lines) != ""]


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


# ----- page 1: what was found, in the row's own direction, and its caveats ---------------------------
CEILING = 0.95  # a fraction metric whose better arm's mean reaches this is flagged as near its ceiling
ADDED = "adding"  # how a sentence names the added arm (position added to the embedding)


def unit(metric: str) -> tuple[float, str, str]:
    """(scale, long unit, short unit) a sentence prints ``metric``'s differences in: fractions as points."""
    found = metrics.METRICS.get(metric)
    if found is not None and found.label.endswith("(fraction)"):
        words = found.label.removesuffix(" (fraction)").replace(" ", "-")
        return 100.0, f"{words} points", "points"
    if metric == "bits_per_char":
        return 1.0, "bits/char", "bits/char"
    return 1.0, found.label if found is not None else metric, ""


def comparator_label(line) -> str:
    """The comparator as its comparison declares it (``sinusoidal_concat (d = 32)``), else its encoding."""
    declared = comparisons.load().by_id.get(line.comparison)
    return declared.labels[1] if declared is not None else str(line.comparator_arm)


def signed(value: float, digits: int) -> str:
    """``−0.002`` / ``+27.3``: a difference with its sign, the minus a true minus sign."""
    return f"{value:+.{digits}f}".replace("-", "\u2212")


def finding(line) -> str:
    """What ``line`` (a deciding comparison) found, worded from the added arm's side, with the interval and
    its level: "adding is within δ = 0.05 bits/char of rope (rope's advantage −0.002 [−0.028, +0.023], 97.1 %
    interval)" or "alibi beats adding by 27.3 exact-match points, more than δ = 10 ([+20.7, +33.9], …)"."""
    reason = getattr(line, "withdrawn", "")
    if isinstance(reason, str) and reason:
        return f"withdrawn, decides nothing: {reason}"
    if math.isnan(line.effect):
        return f"not compared ({line.outcome}): {getattr(line, 'gate_notes', '') or 'no effect'}"
    scale, long_unit, _ = unit(line.metric)
    other, digits = comparator_label(line), 1 if scale == 100 else 3
    margin = f"{line.margin * scale:g}"
    interval = (f"[{signed(line.ci_low * scale, digits)}, {signed(line.ci_high * scale, digits)}], "
                f"{interval_level(getattr(line, 'alpha_look', math.nan))} interval, "
                f"{line.n_added:g}/{line.n_comparator:g} seeds")
    advantage = f"{other}'s advantage {signed(line.effect * scale, digits)} {interval}"
    if line.outcome == BETTER:
        return (f"{other} beats {ADDED} by {line.effect * scale:.{digits}f} {long_unit}, more than δ = {margin} "
                f"({interval})")
    if line.outcome == NOT_BETTER and line.ci_low > -line.margin:
        return f"{ADDED} is within δ = {margin} {long_unit} of {other} ({advantage})"
    if line.outcome == NOT_BETTER:  # the added arm may be better by more than δ: "within" would undersell it
        return f"{other} is not better than {ADDED} by δ = {margin} {long_unit} ({advantage})"
    return f"{line.outcome}: {advantage}; δ = {margin} {long_unit}"


def flags(lines: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """The caveats of a row's deciding comparisons, from the tables: the share of deciding runs flagged
    undertrained (``runs``: their accuracy.csv rows), an arm near the metric's ceiling, the effect's trend
    over the last two annealed checkpoints (verdicts.csv's reading of trajectory.csv); each named by its
    model size where ``lines`` hold several."""
    found = []
    sized = "size" in lines and lines["size"].nunique() > 1
    if "undertrained" in runs and len(runs):
        flagged = runs["undertrained"].astype(str).str.lower().eq("true").sum()
        found.append(f"undertrained: {flagged} of {len(runs)} deciding runs (loss still falling)")
    for line in lines.itertuples(index=False):
        scale, long_unit, _ = unit(line.metric)
        at = f"{line.size}: " if sized else ""
        best, arm = max((line.mean_added, line.add_arm), (line.mean_comparator, line.comparator_arm))
        if scale == 100 and metrics.METRICS[line.metric].higher_is_better and best >= CEILING:
            found.append(f"{at}near the ceiling: {arm} at {best:.3f} of 1 ({line.metric})")
        trend = getattr(line, "trend", "")
        if isinstance(trend, str) and trend:
            digits = 1 if scale == 100 else 3
            found.append(f"{at}gap {trend} from {line.trend_since:g} to {line.steps:g} steps: "
                         f"{signed(line.trend_change * scale, digits)} [{signed(line.trend_ci_low * scale, digits)}, "
                         f"{signed(line.trend_ci_high * scale, digits)}] {long_unit}")
    return found


def decided_on(lines: pd.DataFrame) -> str:
    """``scan at 48`` / ``passkey trained at 64, read at 16×``: the tasks and lengths that decided a row."""
    found = dict.fromkeys(f"{line.task} trained at {line.train_len:g}"
                          + ("" if line.length_ratio == 1 else f", read at {line.length_ratio:g}×")
                          for line in lines.itertuples(index=False))
    return "; ".join(found) or "nothing"


def scope(row: GuidanceRow, lines: pd.DataFrame) -> str:
    """What ``row``'s words cover that no deciding comparison (``lines``) tested, from the row's declared
    situations (their tasks) and lengths: "tested: code generation (code_brackets …); not tested: structured
    data"."""
    tasks = set(lines["task"]) if not lines.empty else set()
    tested = [c.words for c in row.covers if tasks & set(c.tasks)]
    untested = [c.words for c in row.covers if not tasks & set(c.tasks)]
    found = [f"decided on {decided_on(lines)}"]
    if row.covers:
        found.append(f"tested: {', '.join(tested) or 'none of the situations the row names'}")
    if untested:
        found.append(f"not tested: {', '.join(untested)}")
    lengths = set(lines["train_len"]) if not lines.empty else set()
    if row.lengths and (missing := [n for n in row.lengths if n not in lengths]):
        found.append(f"not tested at training lengths {', '.join(map(str, missing))} (the row's words span "
                     f"{row.lengths[0]}–{row.lengths[-1]})")
    return "; ".join(found)
