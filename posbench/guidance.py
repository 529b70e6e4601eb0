"""The article's engineering guidance (section 九), one table that the comparisons, the judge step,
the report and ``advise`` all read, and the task kinds a user names (``advise --task``).

Each row says when adding position to the embedding suffices, or when to consider another scheme;
a row's *claim* is what its declared comparisons (``comparisons.yaml``) test, and its task kinds are
the situations ``advise`` brings it up for. No imports beyond the standard library: the command-line
parser reads this module before anything heavy loads.
"""

from __future__ import annotations

from dataclasses import dataclass

ADDING_SUFFICES, OTHER_SCHEME_WINS = "adding suffices", "another scheme wins"
USE_ADD, CONSIDER_OTHER = "何时使用相加？", "何时考虑其他方案？"  # the two sides of the guidance
SIDES = {USE_ADD: "When to add?", CONSIDER_OTHER: "When to consider other schemes?"}  # each side in English
KINDS = ("nlp", "classification", "code", "structured", "long", "multimodal")  # what a task stands for


@dataclass(frozen=True)
class Cover:
    """A situation a row's words name (``words``, as the report prints it) and the registered tasks that
    test it; no task: nothing in posbench can test it yet."""

    words: str
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class GuidanceRow:
    """One line of the article's section 九: its key in ``comparisons.yaml``, its side, its words."""

    key: str
    side: str  # USE_ADD or CONSIDER_OTHER
    quote: str  # the row, verbatim
    english: str
    task_kinds: tuple[str, ...]  # the kinds of task (KINDS) the row speaks to in ``advise``
    covers: tuple[Cover, ...] = ()  # situations the words name; the report says which no deciding task tested
    lengths: tuple[int, ...] = ()  # training lengths the words span; the report says which no comparison decided at

    @property
    def claim(self) -> str:
        """What the row's comparisons test: the side that says "add" claims adding suffices."""
        return ADDING_SUFFICES if self.side == USE_ADD else OTHER_SCHEME_WINS


ROWS = (
    GuidanceRow("standard_nlp", USE_ADD, "标准NLP任务（文本分类、翻译、问答）",
                "Standard NLP tasks (text classification, translation, question answering)", ("nlp", "classification"),
                (Cover("text classification", ("text_order", "text_source")),
                 Cover("translation", ("scan", "scan_length")), Cover("question answering", ("babi",)))),
    GuidanceRow("fixed_length", USE_ADD, "序列长度相对固定（< 512）", "Sequence length fairly fixed (< 512)",
                ("code",), lengths=(64, 128, 256)),  # below 512, the design's L in {64 ...}
    GuidanceRow("parameter_budget", USE_ADD, "参数预算有限", "Limited parameter budget", ()),
    GuidanceRow("long_sequences", CONSIDER_OTHER, "超长序列（基因组、长文档）",
                "Very long sequences (genomes, long documents)", ("long",),
                (Cover("very long sequences", ("passkey", "multikey_niah", "variable_tracking", "long_range",
                                               "lm_prose_long")),
                 Cover("long documents", ("lm_prose_long",)), Cover("genomes"))),
    GuidanceRow("precise_position", CONSIDER_OTHER, "需要精确位置控制（代码生成、结构化数据）",
                "Precise position control needed (code generation, structured data)", ("code", "structured"),
                (Cover("code generation", ("code_brackets", "lm_code")),
                 Cover("structured data", ("table_lookup", "table_lookup_json")))),
    GuidanceRow("multimodal", CONSIDER_OTHER, "多模态融合（视觉+语言）", "Multimodal fusion (vision + language)",
                ("multimodal",), (Cover("vision + language", ("mosaic_qa", "mosaic_resolution")),)),
)
BY_KEY = {row.key: row for row in ROWS}


def rows_for_kind(kind: str | None) -> list[str]:
    """The keys of the rows that speak to a task of ``kind``, in the article's order."""
    return [row.key for row in ROWS if kind in row.task_kinds]
