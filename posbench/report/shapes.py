"""The page "What this benchmark reproduces": the judge step's ``shapes.csv``, one line per published
shape (:mod:`posbench.shapes`) — the paper, its figure and what it reports, ours, the outcome — then a
closing note with each shape's intervals beside the paper's numbers. The page reads the CSV only.
"""

from __future__ import annotations

from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "What this benchmark reproduces"
HEADER = ["Paper · its figure", "Published", "Ours (ordering: mean per arm, seeds)", "Outcome"]
OUTCOME_COLOURS = {"reproduced": "#b7e1b0", "contradicted": "#f4b6b0"}  # every other outcome: grey


def page(doc: Document, tables: Tables) -> None:
    doc.heading(TITLE, H2, page_break=True)
    found = tables.get("shapes")
    if found.empty:
        doc.paragraph(f"Not shown: shapes.csv is not in {tables.folder}: run `python -m posbench judge` first.", BODY)
        return
    doc.paragraph("Published results declared as orderings of arms on one task, metric and length (posbench/"
                  f"shapes.yaml, SHA-256 {found['declaration_sha256'].iloc[0][:12]}), judged on this run's tables: "
                  "reproduced when every adjacent pair's 95 % Welch interval over seeds lies on the paper's side "
                  "(inside ±margin for a '≈'), contradicted when one lies on the other side, else not shown; not "
                  "reachable when an arm did not beat chance in distribution; not run when an arm has no records. "
                  "A tiny model on a CPU: the papers' shapes, never their sizes.", SMALL)
    rows = [[[(s.paper, Style(size=7.5, weight="bold")), (s.figure, SMALL)], [(_text(s.published), SMALL)],
             [(f"{s.task} {s.metric} at {s.length}{f' ({s.size})' if _text(s.size) else ''}: {s.ordering}", SMALL),
              (_text(s.ours) or "—", SMALL)],
             [(s.outcome, Style(size=8, weight="bold", badge=OUTCOME_COLOURS.get(s.outcome, "#dddddd"))),
              (_text(s.note), SMALL)]]
            for s in found.itertuples(index=False)]
    doc.table(rows, [0.25, 0.25, 0.32, 0.18], header=HEADER)
    doc.heading("Our numbers beside the papers'", H2, keep=1.0)
    for s in found.itertuples(index=False):
        doc.paragraph(f"{s.shape}: paper — {_text(s.published)}; ours — {_text(s.intervals) or _text(s.note) or '—'}",
                      SMALL)


def _text(value) -> str:
    """A CSV cell as text: pandas reads an empty cell as NaN."""
    return value if isinstance(value, str) else ""
