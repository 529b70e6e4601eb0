"""Page 1: the six rows of the article's guidance (section 九), each judged by its declared comparisons.

The comparisons (``posbench/comparisons.yaml``) and the statistics that judge them
(:mod:`posbench.evidence`) live outside the report, so the advice command and the tests use the same
code; this module names the rows, judges them once per set of tables and words the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from posbench import comparisons, evidence
from posbench.comparisons import ADDING_SUFFICES
from posbench.report.data import Tables

USE_ADD, CONSIDER_OTHER = "何时使用相加？", "何时考虑其他方案？"
HEADINGS = {USE_ADD: "When to add?", CONSIDER_OTHER: "When to consider other schemes?"}
RESULT_COLUMNS = ("task", "encoding", "size", "seed", "status", "metric", "length_ratio", "eval_len", "value")


@dataclass(frozen=True)
class GuidanceRow:
    """One line of the article's section 九 and the key of its comparisons in ``comparisons.yaml``."""

    key: str
    heading: str  # 何时使用相加？ or 何时考虑其他方案？
    quote: str  # the row, verbatim
    english: str

    @property
    def claim(self) -> str:
        return comparisons.ROW_CLAIMS[self.key]


ROWS = (
    GuidanceRow("standard_nlp", USE_ADD, "标准NLP任务（文本分类、翻译、问答）",
                "Standard NLP tasks (text classification, translation, question answering)"),
    GuidanceRow("fixed_length", USE_ADD, "序列长度相对固定（< 512）", "Sequence length fairly fixed (< 512)"),
    GuidanceRow("parameter_budget", USE_ADD, "参数预算有限", "Limited parameter budget"),
    GuidanceRow("long_sequences", CONSIDER_OTHER, "超长序列（基因组、长文档）",
                "Very long sequences (genomes, long documents)"),
    GuidanceRow("precise_position", CONSIDER_OTHER, "需要精确位置控制（代码生成、结构化数据）",
                "Precise position control needed (code generation, structured data)"),
    GuidanceRow("multimodal", CONSIDER_OTHER, "多模态融合（视觉+语言）", "Multimodal fusion (vision + language)"),
)


def rule(row: GuidanceRow) -> str:
    """How the row is decided, in one sentence (the numbers behind it are in the module docstrings)."""
    if row.claim == ADDING_SUFFICES:
        return ("Supported when every declared comparator is shown not better than the added encoding by its "
                f"margin δ (95 % Welch interval below δ, Holm across the row, >= {evidence.MIN_SEEDS} seeds per arm); "
                "not supported when one is shown better by more than δ; otherwise inconclusive.")
    return ("Supported when a declared comparator is shown better than the added encoding by more than its margin δ "
            f"(95 % Welch interval above δ, Holm across the row, >= {evidence.MIN_SEEDS} seeds per arm); not "
            "supported when every one is shown not better by δ; otherwise inconclusive.")


def results_frame(tables: Tables) -> pd.DataFrame:
    """The per-seed results the comparisons read: the extrapolation table (every length, every status)."""
    frame = tables.get("extrapolation")
    if frame.empty or any(c not in frame.columns for c in RESULT_COLUMNS):
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    return frame


def deciding(preset: str | None) -> list[comparisons.Comparison]:
    """The comparisons that decide the rows: those the preset that made the tables declares (every one
    for a preset the file does not name, e.g. a custom config)."""
    declared = comparisons.load()
    return declared.in_preset(preset if preset in comparisons.PRESETS else "all")


def judged(tables: Tables, descriptive: bool = False) -> dict[str, list[evidence.RowJudgement]]:
    """Row key -> its judgement at each model size the tables hold (computed once per tables). With
    ``descriptive``, the declared comparisons outside the run's preset instead: shown, never deciding."""
    key = "descriptive" if descriptive else "verdicts"
    if key not in tables.derived:
        chosen = deciding(tables.derived.get("preset"))
        if descriptive:
            chosen = [c for c in comparisons.load().comparisons if c not in chosen]
        found = evidence.judge(comparisons.load(), results_frame(tables), tables.items, chosen)
        tables.derived[key] = {row.key: [j for j in found if j.row == row.key] for row in ROWS}
    return tables.derived[key]


def verdict_table(tables: Tables) -> pd.DataFrame:
    """``verdicts.csv``: one row per comparison and size, with the declaration's hash; ``decides`` is
    false for a comparison outside the run's preset (its row verdict is then its own, descriptive)."""
    frames = [evidence.table([j for by_size in judged(tables, descriptive).values() for j in by_size])
              .assign(decides=not descriptive) for descriptive in (False, True)]
    frame = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else frames[0]
    frame.insert(0, "declaration_sha256", comparisons.load().sha256)
    return frame


def row_verdict(judgements: list[evidence.RowJudgement]) -> str:
    """The row's verdict as printed: per size where the tables hold several."""
    if not judgements:
        return f"{evidence.INCONCLUSIVE}: no declared comparison has results in these tables"
    if len(judgements) == 1:
        return judgements[0].shown
    return "; ".join(f"{j.size}: {j.shown}" for j in judgements)


def evidence_lines(judgements: list[evidence.RowJudgement], descriptive: list[evidence.RowJudgement] = ()) -> list[str]:
    """Each deciding comparison in one line, then each task's verdict where a row has several tasks,
    the notes, then the declared comparisons outside the run's preset (descriptive only)."""
    lines = []
    for judgement in judgements:
        lines += [j.line() for j in judgement.judged]
        if len(judgement.by_task) > 1:
            lines.append(f"by task ({judgement.size}): "
                         + ", ".join(f"{task} {verdict}" for task, verdict in judgement.by_task.items()))
        lines += [f"note: {note}" for note in dict.fromkeys(n for j in judgement.judged for n in j.notes)]
    lines += [f"not in this preset, descriptive: {j.line()}" for judgement in descriptive for j in judgement.judged]
    return lines
