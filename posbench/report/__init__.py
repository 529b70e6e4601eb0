"""The report: ``results/report.pdf`` from the tables alone (nothing is re-measured).

Page 1 judges the six rows of the article's guidance (:mod:`.verdicts`; ``verdicts.csv`` beside the
tables holds its numbers), page 2 checks the claims
(:mod:`.claims`), then the figures (:mod:`.figures`) and an appendix (method, environment, config,
failed cells). :func:`build_report` is the whole pipeline; ``python -m posbench report`` calls it.
"""

from __future__ import annotations

from pathlib import Path

from posbench.report import style
from posbench.report.data import Tables, load


def build_report(tables_dir: str | Path, out: str | Path, config: dict | None = None,
                 plots_dir: str | Path | None = None, verdicts_csv: str | Path | None = None) -> int:
    """Write the PDF (with ``plots_dir``, one PNG per figure; with ``verdicts_csv``, the verdicts table,
    one row per declared comparison and size); returns the PDF's page count."""
    import functools

    from posbench import records
    from posbench.report import document, figures, verdicts

    tables = load(tables_dir)
    tables.derived["preset"] = (config or tables.meta.get("config") or {}).get("preset")  # which comparisons decide
    chinese = style.chinese_available()
    style.apply(chinese)
    if verdicts_csv is not None:
        frame = verdicts.verdict_table(tables)
        records.write_atomically(verdicts_csv, functools.partial(frame.to_csv, index=False))
    if plots_dir is not None:
        for spec in (figures.FOREST, *figures.FIGURES):
            figures.save_png(spec, tables, Path(plots_dir) / f"{spec.name}.png")
    return document.write(Path(out), tables, config, chinese)


__all__ = ["Tables", "build_report", "load"]
