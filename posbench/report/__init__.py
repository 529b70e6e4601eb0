"""The report: ``results/report.pdf`` from the tables alone (nothing is re-measured).

Page 1 shows the six rows of the article's guidance as the judge step (:mod:`posbench.verdicts`) judged
them in ``verdicts.csv`` beside the tables (:mod:`.verdicts` words them), page 2 the claims its
``claims.csv`` checks, then the figures (:mod:`.figures`) and an appendix (method, environment, config,
failed cells). :func:`build_report` is the whole pipeline; ``python -m posbench report`` calls it.
"""

from __future__ import annotations

from pathlib import Path

from posbench.report import style
from posbench.tables import Tables, load


def build_report(tables_dir: str | Path, out: str | Path, config: dict | None = None,
                 plots_dir: str | Path | None = None) -> int:
    """Write the PDF (with ``plots_dir``, one PNG and its caption per figure); returns the PDF's page count."""
    from posbench.report import document, figures

    tables = load(tables_dir)
    chinese = style.chinese_available()
    style.apply(chinese)
    if plots_dir is not None:
        for spec in figures.REPORT_FIGURES:
            figures.save_standalone(spec, tables, Path(plots_dir))
    return document.write(Path(out), tables, config, chinese)


__all__ = ["Tables", "build_report", "load"]
