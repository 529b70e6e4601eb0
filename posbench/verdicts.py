"""The guidance rows' verdicts, judged once from a run's tables: ``verdicts.csv``, ``trajectory.csv``,
``ledger.csv`` and ``axes.csv``, which :mod:`posbench.judge` writes beside them with the step's other tables.

The declared comparisons (``comparisons.yaml``) are judged by :mod:`posbench.evidence`; ``advise`` and the
report read what is written and compute no statistic. ``verdicts.csv`` has one row per comparison and model
size; each carries its row's verdict as printed, how the row is decided, and the comparison's one-line summary,
so a reader needs nothing else to word page 1.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from posbench import axis_check, comparisons, evidence, guidance, ledger
from posbench.arms import cell_rows, declared_rows
from posbench.tables import Tables, load, results_frame


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
    deciding_ids = {c.id for c in chosen}  # chosen at the preset's budgets (comparisons.Comparison.scaled)
    for decides, these in ((True, chosen), (False, [c for c in declared.comparisons if c.id not in deciding_ids])):
        judgements = evidence.judge(declared, results, tables.items, these, checkpoints)
        frames.append(_with_wording(evidence.table(judgements), judgements).assign(decides=decides))
        trajectories.append(evidence.trajectory_table(judgements).assign(decides_row=decides))
    found = [f for f in frames if not f.empty]
    frame = pd.concat(found, ignore_index=True) if found else frames[0]
    frame.insert(0, "declaration_sha256", declared.sha256)
    return with_registration(frame, results, declared), pd.concat(trajectories, ignore_index=True)


def with_registration(frame: pd.DataFrame, results: pd.DataFrame, declared: comparisons.Declaration) -> pd.DataFrame:
    """``frame`` with each comparison's declaring commit (:func:`posbench.comparisons.declaring_commits`)
    and the commits of its records that are older than that (``measured_before_declaration``): a record
    measured before its comparison took its present form is one the declaration could have been fitted to."""
    if frame.empty or "comparison" not in frame.columns:
        return frame
    commits = comparisons.declaring_commits(declared.path)
    older = [measured_before(commits.get(row.comparison), records_of(results, declared.by_id[row.comparison],
                                                                      row.size, row.look))
             for row in frame.itertuples()]
    before = [", ".join(c[:10] for c in found) for found in older]
    warned = [f"records measured before this declaration took its form (commit {commits[c][:10]}): {b}" if b else ""
              for c, b in zip(frame["comparison"], before)]
    notes = ["\n".join(n for n in (str(note) if isinstance(note, str) else "", warning) if n)
             for note, warning in zip(frame.get("notes", [""] * len(frame)), warned)]
    frame = frame.assign(declared_commit=[commits.get(c, "") for c in frame["comparison"]],
                         measured_before_declaration=before, notes=notes)
    return frame[[c for c in frame.columns if c != "decides"] + ["decides"]]  # decides stays last


def registration_warnings(verdicts_csv: Path) -> list[str]:
    """One line per deciding comparison with records older than its declaration (verdicts.csv as written)."""
    frame = pd.read_csv(verdicts_csv)
    if frame.empty or "measured_before_declaration" not in frame.columns:
        return []
    late = frame[frame["decides"].astype(bool) & frame["measured_before_declaration"].notna()]
    return [f"{row.comparison} ({row.size}): records measured before its declaration ({row.declared_commit[:10]}): "
            f"{row.measured_before_declaration}" for row in late.itertuples()]


def advice_warnings(tables_dir: str | Path) -> list[str]:
    """One line per deciding comparison an advice row goes against (``advice.csv`` as written, its
    ``contradicts`` column: :func:`posbench.advise.contradictions`); the run goes on."""
    path = Path(tables_dir) / "advice.csv"
    frame = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    if frame.empty or "contradicts" not in frame.columns:
        return []
    return [f"advice '{row.situation}' {line}" for row in frame.dropna(subset=["contradicts"]).itertuples()
            for line in str(row.contradicts).splitlines()]


def records_of(results: pd.DataFrame, comparison: comparisons.Comparison, size: str, look: float) -> set[str]:
    """The git commits of the records a comparison's look read (its arms' declared seeds at its budget)."""
    if "git_commit" not in results.columns:
        return set()
    seeds = comparison.seeds(int(look) if look == look else 1)
    rows = [declared_rows(results[cell_rows(results, spec, size)], seeds, comparison.budget)
            for spec in comparison.arms]
    return set(pd.concat(rows)["git_commit"].dropna().astype(str))


def measured_before(declaration: str | None, records: set[str]) -> list[str]:
    """The commits of ``records`` that are strict ancestors of ``declaration`` (``git merge-base
    --is-ancestor``); none where the declaration is unknown or not committed, or git cannot tell."""
    if not declaration or declaration == comparisons.UNCOMMITTED:
        return []
    older = []
    for commit in sorted(records - {declaration}):
        check = subprocess.run(["git", "merge-base", "--is-ancestor", commit, declaration], cwd=comparisons.PATH.parent,
                               capture_output=True)
        if check.returncode == 0:
            older.append(commit)
    return older


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


def ledger_table(verdicts: pd.DataFrame, meta: dict, previous: str | Path | None) -> pd.DataFrame:
    """``ledger.csv`` against the run in ``previous`` (a tables folder); no rows without one."""
    if previous is None:
        return pd.DataFrame(columns=list(ledger.COLUMNS))
    before = load(previous)
    return ledger.table(before.get("verdicts"), verdicts, before.meta, meta)

