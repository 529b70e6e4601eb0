"""The judge step, whole: a run's tables in, every judged table (:data:`posbench.tables.JUDGED_NAMES`) written
beside them, and nothing measured. The guidance rows' verdicts and their trajectory and ledger
(:mod:`posbench.verdicts`), the article's claims (:mod:`posbench.claims`), the advice for common situations
(:mod:`posbench.advise`), the axis check (:mod:`posbench.axis_check`), the published shapes
(:mod:`posbench.shapes`) and the projected cost at deployed shapes (:mod:`posbench.projection`) are each
written here, so ``python -m posbench judge`` and the workflow's judge rule make the same files, and the
report and ``advise`` read the same judgements.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from posbench import across_sizes, advice_situations, advise, claims, projection, shapes, verdicts
from posbench.records import write_atomically
from posbench.tables import load


def write(tables_dir: str | Path, preset: str | None = None, previous: str | Path | None = None) -> list[Path]:
    """Judge the tables in ``tables_dir`` with the comparisons of ``preset`` deciding (every declared one for
    ``None`` or a preset the declarations do not name; :func:`posbench.verdicts.deciding`) and write, in this
    order, ``verdicts.csv``, ``trajectory.csv``, ``ledger.csv`` (against the tables folder ``previous``; no rows
    without one), ``claims.csv``, ``probe_claim.csv`` (the information claim's probe results, one a
    row), ``advice.csv`` (which reads the verdicts as ``advise`` does; a row whose
    ranking goes against a deciding comparison names it in ``contradicts``), ``axes.csv``, ``shapes.csv`` and
    ``projection.csv`` and ``scale.csv`` (:mod:`posbench.across_sizes`: lines where a deciding comparison has
    results at two sizes or more, else only its header); returns their paths in that order."""
    tables = load(tables_dir)
    verdict_frame, trajectory = verdicts.verdict_tables(tables, preset)
    written = [_write(tables_dir, "verdicts", verdict_frame), _write(tables_dir, "trajectory", trajectory),
               _write(tables_dir, "ledger", verdicts.ledger_table(verdict_frame, tables.meta, previous))]
    tables.frames["verdicts"] = pd.read_csv(written[0])  # as advise reads it, without loading every table again
    inputs = advise.Inputs(accuracy=tables.get("accuracy"), cost=tables.get("cost"), verdicts=tables.get("verdicts"),
                           extrapolation=tables.get("extrapolation"))
    return written + [_write(tables_dir, "claims", claims.table(tables)),
                      _write(tables_dir, claims.PROBE_TABLE, claims.probe_table(tables)),
                      _write(tables_dir, "advice", advice_situations.situations_table(inputs)),
                      _write(tables_dir, "axes", verdicts.axes_table(tables)),
                      shapes.write(tables_dir), projection.write_table(tables_dir),
                      across_sizes.write(tables_dir, verdict_frame, tables.get("accuracy"))]


def _write(tables_dir: str | Path, name: str, frame: pd.DataFrame) -> Path:
    return write_atomically(Path(tables_dir) / f"{name}.csv", functools.partial(frame.to_csv, index=False))
