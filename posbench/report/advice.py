"""The page "Which encoding should I use?": one row per common situation, each the first places of
:func:`posbench.advise.advise` on this run's tables and the judge step's ``verdicts.csv``, as the
command reads them. Nothing on it is written by hand: change the rule in
:mod:`posbench.advise` and the page follows.
"""

from __future__ import annotations

from posbench import advise
from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "Which encoding should I use?"
SITUATIONS = (  # (label, the situation advise is asked about)
    ("Short, fixed-length NLP", advise.Situation(task="nlp", train_len=256, deploy_len=256)),
    ("Long-context task (the longest measured length)", advise.Situation(task="long")),
    ("Length beyond training (4×)", advise.Situation(task="nlp", train_len=256, deploy_len=1024)),
    ("Code", advise.Situation(task="code")),
    ("Structured data", advise.Situation(task="structured")),
    ("Vision + language", advise.Situation(task="multimodal")),
    ("Tight parameter budget (no extra parameters)", advise.Situation(task="nlp", param_budget=0)),
    ("Token-by-token serving", advise.Situation(task="nlp", decode=True)),
)


def inputs(tables: Tables) -> advise.Inputs:
    return advise.Inputs(accuracy=tables.get("accuracy"), cost=tables.get("cost"),
                         verdicts=tables.get("verdicts"), extrapolation=tables.get("extrapolation"))


def row(label: str, advice: advise.Advice) -> list[str]:
    """label, recommendation, runner-up, evidence in one line, confidence (as the command prints them)."""
    leaders, runner_up = advice.leaders(), advice.runner_up()
    missing = "; ".join(f"{c}: {m}" for c, m, _ in advice.no_evidence)
    if not leaders:
        return [label, "no evidence", "—", missing or "no ok rows for this situation", advise.NO_EVIDENCE]
    best = leaders[0]
    evidence = "; ".join(f"{r.task} {r.metric} {r.mean:.3g} {r.interval()} at {r.length_ratio:g}×, n = {r.n}"
                         + (" (fills in)" if r.fills_in else "") for r in best.rows)
    if advice.disagreement:
        evidence += "; tasks disagree: " + "; ".join(advice.disagreement)
    if best.overhead_ratio is not None:
        evidence += f"; latency ×{best.overhead_ratio:.2g} vs {advise.BASELINE}"
    if missing:
        evidence += f"; no evidence for {missing}"
    return [label, " = ".join(c.encoding for c in leaders), runner_up.encoding if runner_up else "—", evidence,
            best.confidence]


def rows(tables: Tables) -> list[list[str]]:
    data = inputs(tables)
    return [row(label, advise.advise(situation, data)) for label, situation in SITUATIONS]


def page(doc: Document, tables: Tables) -> None:
    doc.heading(TITLE, H2, page_break=True)
    doc.paragraph("Each row asks `python -m posbench advise` about a common situation, on this run's tables. "
                  f"Rule: {advise.RULE} '=' marks a tie. Ask about your own situation with the command "
                  "(--task, --train-len, --deploy-len, --param-budget, --latency-budget-ms, --device, --decode).",
                  SMALL)
    if tables.get("accuracy").empty:
        doc.paragraph("Not shown: accuracy.csv is missing or empty.", BODY)
        return
    found = [[[(text, Style(size=8, weight="bold") if i in (0, 1) else SMALL)] for i, text in enumerate(r)]
             for r in rows(tables)]
    doc.table(found, [0.2, 0.16, 0.13, 0.35, 0.16],
              header=["Situation", "Recommendation", "Runner-up", "Evidence", "Confidence"])
