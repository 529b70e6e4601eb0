"""The page "Which encoding should I use?": the judge step's ``advice.csv``, one row per common
situation (:data:`posbench.advice_situations.SITUATIONS`), each the first places :func:`posbench.advise.advise`
gives on this run's tables and ``verdicts.csv``, the encodings too uncertain to rank, and any deciding
comparison the ranking goes against, flagged (the judge step warned of it). Nothing on it is written by
hand: change the rule in :mod:`posbench.advise` and the page follows.
"""

from __future__ import annotations

from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "Which encoding should I use?"
HEADER = ["Situation", "Recommendation", "Runner-up", "Evidence", "Confidence"]
WIDTHS = [0.18, 0.185, 0.145, 0.36, 0.13]  # of the page: a header, a tie of two or an arm's name on one line
FLAG = "FLAGGED: goes against a deciding comparison"
WARNING = Style(size=8, weight="bold", colour="#b03a2e")


def page(doc: Document, tables: Tables) -> None:
    doc.heading(TITLE, H2, page_break=True)
    found = tables.get("advice")
    rule = f"{found['rule'].iloc[0]} '=' marks a tie. " if "rule" in found else ""
    doc.paragraph("Each row asks `python -m posbench advise` about a common situation, on this run's tables. "
                  f"{rule}Ask about your own situation with the command "
                  "(--task, --train-len, --deploy-len, --param-budget, --latency-budget-ms, --device, --decode).",
                  SMALL)
    if found.empty:
        why = "accuracy.csv is missing or empty" if tables.get("accuracy").empty else (
            f"advice.csv is not in {tables.folder}: run `python -m posbench judge` first")
        doc.paragraph(f"Not shown: {why}.", BODY)
        return
    found = found.astype(object).fillna("")  # an empty column reads back as float NaN
    rows = [[[(text, Style(size=8, weight="bold") if i in (0, 1) else SMALL)] for i, text in enumerate(cells(row))]
            for row in found.itertuples(index=False)]
    doc.table(rows, WIDTHS, header=HEADER)
    for row in found.itertuples(index=False):
        for line in filter(None, str(getattr(row, "contradicts", "")).splitlines()):
            doc.paragraph(f"{FLAG}: {row.situation}: {line}", WARNING)


def cells(row) -> list[str]:
    """One advice.csv row as the table's columns (:data:`HEADER`): the encodings too uncertain to rank follow
    the evidence; a row the judge step flagged says so in its confidence."""
    doubtful = getattr(row, "too_uncertain", "")
    evidence = str(row.evidence or "—") + (f"; too uncertain to rank: {doubtful}" if doubtful else "")
    flagged = f" — {FLAG}" if getattr(row, "contradicts", "") else ""
    return [str(row.situation), str(row.recommendation or "—"), str(row.runner_up or "—"), evidence,
            str(row.confidence or "—") + flagged]
