"""Page 1: the six rows of the article's guidance (section 九), each judged by an explicit rule.

Every rule compares the best *added* encoding (``E + P``: sinusoidal, learned; sinusoidal_2d on the
grid task; read from the tables' ``pe_combine`` trait column) with the best of the other schemes on
that row's measurements, in units of the seed spread (sample standard deviation over seeds):

* ``advantage`` = how much the best other scheme beats the best added one (metric units; negative
  when adding is ahead);
* ``spread``    = the larger of the two encodings' seed spreads.

"Adding suffices" rows are supported when ``advantage <= spread`` and "consider other schemes"
rows when ``advantage > spread``. Only encodings with at least ``MIN_SEEDS`` ok seeds take part;
where a side has none the measurement is inconclusive. A row judged on several measurements
(tasks, length ratios) takes the majority of their verdicts; a tie, or nothing conclusive, is
inconclusive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from posbench.report.data import MIN_SEEDS, Tables, higher_is_better, seed_summary

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
BUDGET_TOLERANCE = 1.01  # "within the budget": at most 1 % more parameters than the added model
LONG_RATIOS = (2.0, 4.0, 8.0)
LONG_TASKS = ("lm_prose", "long_range")
PRECISE_TASKS = ("copy", "reverse", "index_lookup", "dyck", "lm_code")
FIXED_LENGTH_TASKS = ("lm_prose", "lm_code")
FIXED_LENGTH_LIMIT = 512


def is_added(frame: pd.DataFrame) -> pd.Series:
    """Rows of encodings that add ``P`` to ``E`` at the input."""
    return frame["pe_combine"] == "add"


def is_other(frame: pd.DataFrame) -> pd.Series:
    return ~is_added(frame)


def is_concat(frame: pd.DataFrame) -> pd.Series:
    """Rows of encodings that concatenate ``P`` to ``E`` (naive or at fixed width)."""
    return frame["pe_combine"].isin(("concat", "concat_fixed"))


@dataclass(frozen=True)
class Standing:
    """One encoding on one measurement: mean over seeds, seed spread, seed count."""

    encoding: str
    mean: float
    spread: float
    n: int

    def __str__(self) -> str:
        return f"{self.encoding} {self.mean:#.4g} ± {self.spread:.2g} (n={self.n})"


@dataclass(frozen=True)
class Finding:
    verdict: str
    evidence: str


@dataclass(frozen=True)
class Comparison:
    """The best added encoding against the best other one on one measurement (``label``)."""

    label: str
    added: Standing | None
    other: Standing | None
    higher_is_better: bool
    thin: tuple[str, ...] = ()  # encodings left out for having fewer than MIN_SEEDS seeds

    @property
    def advantage(self) -> float:
        sign = 1.0 if self.higher_is_better else -1.0
        return sign * (self.other.mean - self.added.mean)

    @property
    def spread(self) -> float:
        return max(self.added.spread, self.other.spread)

    def missing(self) -> str | None:
        if self.added and self.other:
            return None
        side = "added encoding" if self.added is None else "compared scheme"
        thin = f"; fewer than {MIN_SEEDS} seeds: {', '.join(self.thin)}" if self.thin else ""
        return f"{self.label}: no {side} with >= {MIN_SEEDS} ok seeds{thin}"

    def describe(self) -> str:
        direction = "beats" if self.advantage > 0 else "trails"
        return (f"{self.label}: added {self.added}; other {self.other}; other {direction} added by "
                f"{abs(self.advantage):.2g} vs spread {self.spread:.2g}")


def best(summary: pd.DataFrame, higher: bool) -> Standing | None:
    if summary.empty:
        return None
    row = summary.sort_values("mean", ascending=not higher).iloc[0]
    return Standing(str(row["encoding"]), float(row["mean"]), float(row["spread"]), int(row["n"]))


def compare(rows: pd.DataFrame, label: str, others: Callable[[pd.DataFrame], pd.Series] = is_other) -> Comparison:
    """Rows of one measurement (columns encoding, pe_combine, value, higher_is_better; one row per
    seed); ``others`` selects the comparator encodings' rows."""
    higher = higher_is_better(rows)
    summary = seed_summary(rows, ["encoding", "pe_combine"])
    enough = summary[summary["n"] >= MIN_SEEDS]
    thin = tuple(sorted(summary.loc[summary["n"] < MIN_SEEDS, "encoding"].astype(str)))
    added = best(enough[is_added(enough)], higher)
    other = best(enough[others(enough)], higher)
    return Comparison(label, added, other, higher, thin)


def adding_suffices(comparison: Comparison) -> Finding:
    """Supported when no other scheme beats the best added one by more than the seed spread."""
    if comparison.missing():
        return Finding(INCONCLUSIVE, comparison.missing())
    verdict = SUPPORTED if comparison.advantage <= comparison.spread else NOT_SUPPORTED
    return Finding(verdict, comparison.describe())


def other_scheme_wins(comparison: Comparison) -> Finding:
    """Supported when another scheme beats the best added one by more than the seed spread."""
    if comparison.missing():
        return Finding(INCONCLUSIVE, comparison.missing())
    verdict = SUPPORTED if comparison.advantage > comparison.spread else NOT_SUPPORTED
    return Finding(verdict, comparison.describe())


def majority(findings: list[Finding]) -> str:
    """The verdict most conclusive findings share; a tie or none conclusive: inconclusive."""
    counts = Counter(f.verdict for f in findings if f.verdict != INCONCLUSIVE)
    if not counts or counts[SUPPORTED] == counts[NOT_SUPPORTED]:
        return INCONCLUSIVE
    return counts.most_common(1)[0][0]


@dataclass(frozen=True)
class RowVerdict:
    verdict: str
    evidence: list[str]


@dataclass(frozen=True)
class GuidanceRow:
    """One line of the article's section 九, with the rule that judges it against the tables."""

    heading: str  # 何时使用相加？ or 何时考虑其他方案？
    quote: str  # the row, verbatim
    english: str
    rule: str
    judge: Callable[[Tables], RowVerdict]


# ----- the judges ------------------------------------------------------------------------------
def _task_rows(tables: Tables, task: str) -> pd.DataFrame:
    accuracy = tables.ok("accuracy", "task", "encoding", "pe_combine", "value")
    return accuracy[accuracy["task"] == task]


def _judge_tasks(tables: Tables, tasks: tuple[str, ...], rule: Callable[[Comparison], Finding],
                 others: Callable[[pd.DataFrame], pd.Series] = is_other, extra: list[str] = ()) -> RowVerdict:
    """The rule on each task at its training length; the row takes the majority."""
    if (why := tables.missing("accuracy", "task", "encoding", "pe_combine", "value")):
        return RowVerdict(INCONCLUSIVE, [why])
    present = [t for t in tasks if not _task_rows(tables, t).empty]
    if not present:
        return RowVerdict(INCONCLUSIVE, [f"no ok rows for {', '.join(tasks)} in accuracy.csv", *extra])
    findings = [rule(compare(_task_rows(tables, t), t, others)) for t in present]
    return RowVerdict(majority(findings), [f"{f.verdict}: {f.evidence}" for f in findings] + list(extra))


def judge_standard_nlp(tables: Tables) -> RowVerdict:
    return _judge_tasks(tables, ("lm_prose",), adding_suffices)


def judge_fixed_length(tables: Tables) -> RowVerdict:
    accuracy = tables.ok("accuracy", "task", "train_len")
    long = sorted(set(accuracy.loc[(accuracy["train_len"] >= FIXED_LENGTH_LIMIT)
                                   & accuracy["task"].isin(FIXED_LENGTH_TASKS), "task"]))
    short = tuple(t for t in FIXED_LENGTH_TASKS if t not in long)
    note = [f"left out (trained at >= {FIXED_LENGTH_LIMIT}): {', '.join(long)}"] if long else []
    return _judge_tasks(tables, short, adding_suffices, extra=note)


def judge_budget(tables: Tables) -> RowVerdict:
    """Concat variants that fit the added model's parameter budget; naive concat is reported beside."""
    rows = tables.ok("accuracy", "task", "encoding", "pe_combine", "value", "params_total")
    rows = rows[rows["task"] == "lm_prose"]
    if rows.empty:
        return RowVerdict(INCONCLUSIVE,
                          [tables.missing("accuracy", "params_total") or "no ok lm_prose rows with params_total"])
    params = rows.groupby("encoding")["params_total"].median()
    added = compare(rows, "lm_prose").added
    if added is None:
        return _judge_tasks(tables, ("lm_prose",), adding_suffices, others=is_concat)
    ratio = params / params[added.encoding]
    concats = sorted(set(rows.loc[is_concat(rows), "encoding"]))
    within = [e for e in concats if ratio[e] <= BUDGET_TOLERANCE]
    note = [f"over budget: {e} has {ratio[e]:.2f}× the parameters of {added.encoding}"
            for e in concats if e not in within]
    return _judge_tasks(tables, ("lm_prose",), adding_suffices, others=lambda f: f["encoding"].isin(within),
                        extra=note)


def judge_long_sequences(tables: Tables) -> RowVerdict:
    """Length extrapolation at 2×, 4×, 8× the training length, plus the cost growth as evidence."""
    extrapolation = tables.ok("extrapolation", "task", "encoding", "length_ratio", "value")
    if extrapolation.empty:
        return RowVerdict(INCONCLUSIVE, [tables.missing("extrapolation", "task", "encoding", "length_ratio", "value")
                                         or "no extrapolation rows"])
    findings = []
    for task in LONG_TASKS:
        for ratio in LONG_RATIOS:
            cell = extrapolation[(extrapolation["task"] == task) & (extrapolation["length_ratio"] == ratio)]
            if not cell.empty:
                findings.append(other_scheme_wins(compare(cell, f"{task} at {ratio:g}× length")))
    if not findings:
        return RowVerdict(INCONCLUSIVE, [f"no rows for {', '.join(LONG_TASKS)} at length ratios 2, 4, 8"])
    return RowVerdict(majority(findings), [f"{f.verdict}: {f.evidence}" for f in findings] + cost_growth(tables))


def cost_growth(tables: Tables) -> list[str]:
    """Latency growth from the shortest to the longest profiled length, per device (evidence only)."""
    cost = tables.ok("cost", "encoding", "device", "seq_len", "latency_median_ms")
    lines = []
    for (device, size), cell in cost.groupby(["device", "size"] if "size" in cost.columns else ["device"]):
        lo, hi = cell["seq_len"].min(), cell["seq_len"].max()
        if lo == hi:
            continue
        by_len = cell.groupby(["encoding", "seq_len"])["latency_median_ms"].median().unstack()
        growth = (by_len[hi] / by_len[lo]).dropna().sort_values()
        lines.append(f"latency growth L {lo}→{hi} ({device}, {size}): "
                     + ", ".join(f"{e} ×{g:.3g}" for e, g in growth.items()))
    return lines


def judge_precise_position(tables: Tables) -> RowVerdict:
    return _judge_tasks(tables, PRECISE_TASKS, other_scheme_wins)


def judge_multimodal(tables: Tables) -> RowVerdict:
    return _judge_tasks(tables, ("digits_2d",), other_scheme_wins)


_RULE = ("Supported when {others} beats the best added encoding (E+P) by more than the seed spread "
         "(the larger seed std of the two), each with >= 3 seeds{where}.")
USE_ADD, CONSIDER_OTHER = "何时使用相加？", "何时考虑其他方案？"
HEADINGS = {USE_ADD: "When to add?", CONSIDER_OTHER: "When to consider other schemes?"}

ROWS = (
    GuidanceRow(USE_ADD, "标准NLP任务（文本分类、翻译、问答）",
                "Standard NLP tasks (text classification, translation, question answering)",
                _RULE.format(others="no other scheme", where="; lm_prose bits/char at the training length"),
                judge_standard_nlp),
    GuidanceRow(USE_ADD, "序列长度相对固定（< 512）",
                "Sequence length fairly fixed (< 512)",
                _RULE.format(others="no other scheme", where="; lm_prose and lm_code at their training length "
                                 "(< 512); majority over tasks"),
                judge_fixed_length),
    GuidanceRow(USE_ADD, "参数预算有限",
                "Limited parameter budget",
                _RULE.format(others="no concat variant within the added model's parameter count (+1 %)",
                                 where="; lm_prose; naive concat (over budget) shown beside"),
                judge_budget),
    GuidanceRow(CONSIDER_OTHER, "超长序列（基因组、长文档）",
                "Very long sequences (genomes, long documents)",
                _RULE.format(others="another scheme", where="; lm_prose and long_range evaluated at 2×, 4×, 8× "
                                   "the training length; majority over cells; latency growth is evidence only"),
                judge_long_sequences),
    GuidanceRow(CONSIDER_OTHER, "需要精确位置控制（代码生成、结构化数据）",
                "Precise position control needed (code generation, structured data)",
                _RULE.format(others="another scheme", where="; copy, reverse, index_lookup, dyck, lm_code at "
                                   "the training length; majority over tasks"),
                judge_precise_position),
    GuidanceRow(CONSIDER_OTHER, "多模态融合（视觉+语言）",
                "Multimodal fusion (vision + language)",
                _RULE.format(others="another scheme (1-D or 2-D RoPE, concat, ...)",
                                   where="; digits_2d accuracy; sinusoidal_2d counts as added"),
                judge_multimodal),
)


def judge_all(tables: Tables) -> list[tuple[GuidanceRow, RowVerdict]]:
    return [(row, row.judge(tables)) for row in ROWS]
