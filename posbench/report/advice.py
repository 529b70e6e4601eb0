"""The page "Which encoding should I use?": the judge step's ``advice.csv``, one row per common
situation (:data:`posbench.advise.SITUATIONS`), each the first places :func:`posbench.advise.advise`
gives on this run's tables and ``verdicts.csv``. Nothing on it is written by hand: change the rule in
:mod:`posbench.advise` and the page follows.
"""

from __future__ import annotations

from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "Which encoding should I use?"
HEADER = ["Situation", "Recommendation", "Runner-up", "Evidence", "Confidence"]


def page(doc: Document, tables: Tables) -> None:
    doc.heading(TITLE, H2, page_break=True)
    found = tables.get("advice")
    rule = f"Rule: {found['rule'].iloc[0]} '=' marks a tie. " if "rule" in found else ""
    doc.paragraph("Each row asks `python -m posbench advise` about a common situation, on this run's tables. "
                  f"{rule}Ask about your own situation with the command "
                  "(--task, --train-len, --deploy-len, --param-budget, --latency-budget-ms, --device, --decode).",
                  SMALL)
    if found.empty:
        why = "accuracy.csv is missing or empty" if tables.get("accuracy").empty else (
            f"advice.csv is not in {tables.folder}: run `python -m posbench judge` first")
        doc.paragraph(f"Not shown: {why}.", BODY)
        return
    rows = [[[(str(text), Style(size=8, weight="bold") if i in (0, 1) else SMALL)] for i, text in enumerate(r)]
            for r in found.drop(columns="rule", errors="ignore").fillna("—").itertuples(index=False)]  # as HEADER
    doc.table(rows, [0.2, 0.16, 0.13, 0.35, 0.16], header=HEADER)
