"""The tables of a run (``results/tables``): what the aggregate step writes (:data:`TABLE_NAMES`) and
what the judge step writes from them (:data:`JUDGED_NAMES`), loaded so that a missing file, an empty
file or a missing column becomes a sentence for the reader, never a crash. What a figure plots comes
through :meth:`Tables.experiments`, one experiment per point (:mod:`posbench.experiments`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from posbench import analytic, experiments

# The tables the aggregate step writes from the records (posbench.aggregate), CSV and Parquet; items is Parquet
# only. It also writes analytic.csv, computed from the code (posbench.analytic).
TABLE_NAMES = ("cost", "accuracy", "extrapolation", "positions", "checkpoints", "probe")

# The tables the judge step writes (posbench.judge.write).
JUDGED_NAMES = ("verdicts", "trajectory", "ledger", "claims", "probe_claim", "advice", "axes", "shapes", "projection",
                "scale")

# The columns of the extrapolation table every judgement reads (results_frame).
RESULT_COLUMNS = ("task", "encoding", "size", "seed", "status", "metric", "length_ratio", "eval_len", "value")


@dataclass
class Tables:
    """The CSV tables by name (absent ones are empty frames; the judge step's among them once it has
    run), the per-item results (``items.parquet``, ``None`` when absent) and ``meta.json`` (or ``{}``)."""

    frames: dict[str, pd.DataFrame]
    meta: dict
    folder: Path
    problems: list[str] = field(default_factory=list)  # files that exist but could not be read
    items: pd.DataFrame | None = None

    def get(self, name: str) -> pd.DataFrame:
        return self.frames.get(name, pd.DataFrame())

    def ok(self, name: str, *columns: str, swept: bool = False) -> pd.DataFrame:
        """Rows of ``name`` with status ok and every listed column present and non-empty; of a train
        table only the cells at their task's length and size's width (:func:`plain`)
        unless ``swept``, which keeps a sweep's other lengths and widths too."""
        frame = self.get(name)
        if frame.empty or any(c not in frame.columns for c in columns):
            return pd.DataFrame(columns=list(dict.fromkeys([*frame.columns, *columns])))
        if "status" in frame.columns:
            frame = frame[frame["status"] == "ok"]
        return (frame if swept else plain(frame)).dropna(subset=list(columns))

    def experiments(self, name: str, *columns: str, within: tuple[str, ...] = ("task",)) -> pd.DataFrame:
        """``ok(name, *columns)`` with one experiment per plotted point
        (:func:`posbench.experiments.one_experiment`): a ``panel`` column names ``within``'s values and,
        where they hold several budgets, the budget; each encoding of a panel at one learning rate."""
        return experiments.one_experiment(self.ok(name, *columns), within)

    def missing(self, name: str, *columns: str) -> str | None:
        """Why ``ok(name, *columns)`` is empty, as a sentence; ``None`` when it has rows."""
        frame = self.get(name)
        if name not in self.frames:
            return f"{name}.csv is not in {self.folder}"
        if frame.empty:
            return f"{name}.csv is empty"
        absent = [c for c in columns if c not in frame.columns]
        if absent:
            return f"{name}.csv has no column {', '.join(absent)}"
        if self.ok(name, *columns).empty:
            return f"{name}.csv has no ok rows with {', '.join(columns)}"
        return None


def results_frame(tables: Tables) -> pd.DataFrame:
    """The per-seed results the comparisons and the published shapes read: the extrapolation table (every
    length, every status); an empty frame of :data:`RESULT_COLUMNS` where it lacks one of them."""
    frame = tables.get("extrapolation")
    if frame.empty or any(c not in frame.columns for c in RESULT_COLUMNS):
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    return frame


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a train table (accuracy, extrapolation, positions, items) trained at their task's
    length and their size's width: what the grid and most comparisons train, without a sweep's other
    lengths and widths (which only the sweep figures and the comparisons that declare them read).
    A table without those columns is returned as it is."""
    if frame.empty or not {"task", "size", "train_len", "d_model"} <= set(frame.columns):
        return frame
    return at_defaults(frame, ("train_len", "d_model"))


def at_defaults(frame: pd.DataFrame, axes: tuple[str, ...]) -> pd.DataFrame:
    """The rows of ``frame`` whose ``axes`` (``train_len``, ``d_model``) hold their task's training length
    and their size's width (:func:`posbench.tasks.default_axes`)."""
    from posbench.tasks import default_axes

    defaults = {cell: default_axes(*cell) for cell in set(zip(frame["task"], frame["size"]))}
    chosen = pd.Series(True, index=frame.index)
    for axis in axes:
        i = ("train_len", "d_model").index(axis)
        default = pd.Series([defaults[cell][i] for cell in zip(frame["task"], frame["size"])], index=frame.index,
                            dtype=float)
        chosen &= frame[axis] == default
    return frame[chosen]


def load(folder: str | Path) -> Tables:
    folder = Path(folder)
    frames, problems = {}, []
    for name in (*TABLE_NAMES, analytic.TABLE, *JUDGED_NAMES):
        path = folder / f"{name}.csv"
        if not path.exists():
            continue
        try:
            frames[name] = pd.read_csv(path)
        except pd.errors.EmptyDataError:  # aggregate writes a bare newline for an empty table
            frames[name] = pd.DataFrame()
        except (pd.errors.ParserError, UnicodeDecodeError) as error:
            problems.append(f"{path.name}: {str(error).splitlines()[0]}")
    meta = {}
    if (folder / "meta.json").exists():
        try:
            meta = json.loads((folder / "meta.json").read_text())
        except json.JSONDecodeError as error:
            problems.append(f"meta.json: {error}")
    return Tables(frames, meta, folder, problems, load_items(folder / "items.parquet", problems))


def load_items(path: Path, problems: list[str]) -> pd.DataFrame | None:
    """Per-item results, for the evaluation set's own sampling error; ``None`` when absent or unreadable."""
    if not path.exists():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as error:
        problems.append(f"{path.name}: {str(error).splitlines()[0]}")
        return None


def higher_is_better(frame: pd.DataFrame) -> bool:
    """The direction of a task's metric (one value per task in the tables; default: higher)."""
    if "higher_is_better" not in frame.columns or frame["higher_is_better"].dropna().empty:
        return True
    value = frame["higher_is_better"].dropna().iloc[0]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return str(value).strip().lower() in ("true", "1", "1.0")
