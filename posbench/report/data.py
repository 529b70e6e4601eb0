"""How the report names a table's metric and its direction (the tables themselves: :mod:`posbench.tables`)."""

from __future__ import annotations

import pandas as pd

from posbench import metrics
from posbench.tables import higher_is_better


def metric_label(frame: pd.DataFrame) -> str:
    """Axis label of the one metric in ``frame`` (with units), or a generic one for a mix."""
    names = frame["metric"].dropna().unique() if "metric" in frame.columns else []
    if len(names) == 1:
        return metrics.METRICS[names[0]].label if names[0] in metrics.METRICS else str(names[0])
    return "metric (see table)"


def direction(frame: pd.DataFrame) -> str:
    return "higher is better" if higher_is_better(frame) else "lower is better"
