"""The page "Which published results does this benchmark reproduce?": the judge step's ``shapes.csv``, one
line per published shape (:mod:`posbench.shapes`) — the paper, its figure and what it reports (once per
paper), ours with its intervals, the outcome. The page reads the CSV only.
"""

from __future__ import annotations

from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "Which published results does this benchmark reproduce?"
HEADER = ["Paper · its figure", "Published", "Ours: shape, ordering, mean per arm, intervals", "Outcome"]
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
                  "A paper several shapes read is named once. A tiny model on a CPU: the papers' shapes, never "
                  "their sizes.", SMALL)
    rows, previous = [], None
    for s in found.itertuples(index=False):
        same = previous is not None and previous.paper == s.paper
        paper = [("(as above)", SMALL)] if same else [(s.paper, Style(size=7.5, weight="bold"))]
        figure = [] if same and previous.figure == s.figure else [(s.figure, SMALL)]
        published = [] if same and _text(previous.published) == _text(s.published) else [(_text(s.published), SMALL)]
        rows.append([paper + figure, published,
                     [(f"{s.shape}: {s.task} {s.metric} at {s.length}{f' ({s.size})' if _text(s.size) else ''}: "
                       f"{s.ordering}", Style(size=7, weight="bold")),
                      (_text(s.ours) or "—", SMALL), *([(_text(s.intervals), SMALL)] if _text(s.intervals) else [])],
                     [(s.outcome, Style(size=8, weight="bold", badge=OUTCOME_COLOURS.get(s.outcome, "#dddddd"))),
                      (_text(s.note), SMALL)]])
        previous = s
    doc.table(rows, [0.22, 0.22, 0.36, 0.2], header=HEADER)


def _text(value) -> str:
    """A CSV cell as text: pandas reads an empty cell as NaN."""
    return value if isinstance(value, str) else ""
