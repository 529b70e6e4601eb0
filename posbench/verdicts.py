"""The judge step: the guidance rows' verdicts, the article's claims and the advice for common
situations, judged once from a run's tables, written beside them as ``verdicts.csv``, ``claims.csv``,
``advice.csv`` and ``axes.csv``.

It runs after aggregation and before the report (its own Snakemake rule, ``python -m posbench
judge``), so ``advise`` and the report read the same judgements and neither computes a statistic:
the declared comparisons (``comparisons.yaml``) are judged by :mod:`posbench.evidence`, the claims by
:mod:`posbench.claims`. ``verdicts.csv`` has one row per comparison and model size; each carries its
row's verdict as printed, how the row is decided, and the comparison's one-line summary, so a reader
needs nothing else to word page 1.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from posbench import advise, axis_check, claims, comparisons, evidence, guidance
from posbench.records import write_atomically
from posbench.tables import Tables, load

RESULT_COLUMNS = ("task", "encoding", "size", "seed", "status", "metric", "length_ratio", "eval_len", "value")


def rule(row: guidance.GuidanceRow) -> str:
    """How the row is decided, in one sentence (the numbers behind it are in :mod:`posbench.evidence`)."""
    how = ("Welch interval at the look's level, Holm across the row, every declared seed of the look: n per arm "
           "from the power rule, a second look with n more where the first is unclear or unstable")
    if row.claim == guidance.ADDING_SUFFICES:
        return ("Supported when every declared comparator is shown not better than the added encoding by its "
                f"margin δ (interval below δ; {how}); not supported when one is shown better by more than δ; "
                "otherwise inconclusive.")
    return ("Supported when a declared comparator is shown better than the added encoding by more than its margin δ "
            f"(interval above δ; {how}); not supported when every one is shown not better by δ; otherwise "
            "inconclusive.")


def results_frame(tables: Tables) -> pd.DataFrame:
    """The per-seed results the comparisons read: the extrapolation table (every length, every status)."""
    frame = tables.get("extrapolation")
    if frame.empty or any(c not in frame.columns for c in RESULT_COLUMNS):
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    return frame


def deciding(preset: str | None) -> list[comparisons.Comparison]:
    """The comparisons that decide the rows: those the preset that made the tables declares (every one
    for a preset the file does not name, e.g. a custom config), withdrawn ones aside."""
    declared = comparisons.load().in_preset(preset if preset in comparisons.PRESETS else "all")
    return [c for c in declared if not c.withdrawn]


def verdict_tables(tables: Tables, preset: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``verdicts.csv``: one row per comparison and size, with the declaration's hash; ``decides`` is
    false for a comparison outside the run's preset or withdrawn (``withdrawn`` says why; its row verdict
    is then its own, descriptive); and ``trajectory.csv``: each compared comparison's effect at every
    annealed checkpoint. A declared comparison with an arm blind on an axis of its task, at a size the
    results hold, is refused (:func:`posbench.axis_check.refuse_blind`)."""
    declared = comparisons.load()
    results = results_frame(tables)
    axis_check.refuse_blind(list(declared.comparisons), sizes_with_results(tables))
    chosen = deciding(preset)
    checkpoints = tables.get("checkpoints")
    frames, trajectories = [], []
    for decides, these in ((True, chosen), (False, [c for c in declared.comparisons if c not in chosen])):
        judgements = evidence.judge(declared, results, tables.items, these, checkpoints)
        frames.append(_with_wording(evidence.table(judgements), judgements).assign(decides=decides))
        trajectories.append(evidence.trajectory_table(judgements).assign(decides_row=decides))
    found = [f for f in frames if not f.empty]
    frame = pd.concat(found, ignore_index=True) if found else frames[0]
    frame.insert(0, "declaration_sha256", declared.sha256)
    return frame, pd.concat(trajectories, ignore_index=True)


def sizes_with_results(tables: Tables) -> dict[str, list[str]]:
    """Task -> the model sizes the results hold for it."""
    return results_frame(tables).dropna(subset=["size"]).groupby("task")["size"].unique().to_dict()


def axes_table(tables: Tables) -> pd.DataFrame:
    """``axes.csv``: what the axis check reads for every declared arm that reads more than one axis, at the
    sizes its task has results for (:func:`posbench.axis_check.table`)."""
    return axis_check.table(list(comparisons.load().comparisons), sizes_with_results(tables))


def _with_wording(frame: pd.DataFrame, judgements: list[evidence.RowJudgement]) -> pd.DataFrame:
    """``evidence.table``'s rows with what page 1 prints: the row's verdict as shown (``row_shown``), the
    row's rule, each comparison's one-line summary and its notes (``gate_notes`` has gates and notes)."""
    if frame.empty:
        return frame
    judged = [(judgement, j) for judgement in judgements for j in judgement.judged]  # evidence.table's order
    return frame.assign(row_shown=[judgement.shown for judgement, _ in judged],
                        row_rule=[rule(guidance.BY_KEY[judgement.row]) for judgement, _ in judged],
                        line=[j.line() for _, j in judged], notes=["\n".join(j.notes) for _, j in judged],
                        withdrawn=[j.comparison.withdrawn or "" for _, j in judged],
                        scope=[scope(j) for _, j in judged])


def scope(judged: evidence.Judged) -> str:
    """What the verdict does not cover, in one sentence: the model it trained and for how long."""
    params = f"{judged.added.params:,.0f} parameters, " if judged.added.params else ""
    return (f"{judged.size} models ({params}{judged.comparison.budget} steps, seeds {judged.added.n}/"
            f"{judged.comparator.n}) on this task; larger models and longer training are not covered "
            "(workflow/cluster.yaml runs them)")


def write(tables_dir: str | Path, preset: str | None = None) -> list[Path]:
    """Judge the tables in ``tables_dir`` with the comparisons of ``preset`` deciding (every declared one
    for ``None`` or a preset the declarations do not name) and write ``verdicts.csv``, then ``claims.csv``
    and ``advice.csv`` (the common situations, which read the verdicts as ``advise`` does) and ``axes.csv``
    (the axis check of every multi-axis arm) beside them."""
    tables = load(tables_dir)
    verdicts, trajectory = verdict_tables(tables, preset)
    written = [_write(tables_dir, "verdicts", verdicts), _write(tables_dir, "trajectory", trajectory)]
    tables.frames["verdicts"] = pd.read_csv(written[0])  # as advise reads it, without loading every table again
    inputs = advise.Inputs(accuracy=tables.get("accuracy"), cost=tables.get("cost"), verdicts=tables.get("verdicts"),
                           extrapolation=tables.get("extrapolation"))
    return written + [_write(tables_dir, "claims", claims.table(tables)),
                      _write(tables_dir, "advice", advise.situations_table(inputs)),
                      _write(tables_dir, "axes", axes_table(tables))]


def _write(tables_dir: str | Path, name: str, frame: pd.DataFrame) -> Path:
    return write_atomically(Path(tables_dir) / f"{name}.csv", functools.partial(frame.to_csv, index=False))
