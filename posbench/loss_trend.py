"""Whether a run's validation loss was still falling when training stopped: :func:`trend` fits a line
through the validation curve's last fifth; :func:`annealed_trend` compares the annealed checkpoints'
losses, where the last fifth is a decay whose falling loss says nothing of it. Both are flags a reader
weighs beside a cell's numbers, never gates.
"""

from __future__ import annotations

import numpy as np

from posbench import statistics

LAST_PART = 0.2  # the part of training (the last fifth) whose validation trend is tested
MIN_TREND_POINTS = 10  # fewer points in the last fifth and no trend is fitted
TREND_DROP = 0.01  # a fitted fall over the last fifth above this share of the final validation loss counts


def trend(validation_curve: list[dict], steps: int) -> dict:
    """Whether the validation loss was still falling when training stopped: a least-squares line
    through the curve's points in the last fifth of training (``MIN_TREND_POINTS`` at least, else no
    line), its slope per 1,000 steps with a 95 % confidence interval, and ``flag``: the interval
    lies below 0 *and* the line falls over the last fifth by more than ``TREND_DROP`` of the final
    validation loss. A flag, never a gate: every cell trains for its task's budget, so dropping or
    retraining the flagged ones would compare encodings at different budgets; the flag says that
    cell's numbers would still improve with more steps, which a reader weighs beside them."""
    last = [point for point in validation_curve if point["step"] > steps * (1 - LAST_PART)]
    if len(last) < MIN_TREND_POINTS:
        return {"slope_per_1k_steps": None, "ci_low": None, "ci_high": None, "points": len(last), "flag": False}
    x, y = (np.array([point[key] for point in last], dtype=np.float64) for key in ("step", "loss"))  # (n,) each
    slope, low, high = statistics.slope_interval(x, y)
    falls = -slope * steps * LAST_PART > TREND_DROP * y[-1]
    return {"slope_per_1k_steps": 1000 * slope, "ci_low": 1000 * low, "ci_high": 1000 * high, "points": len(last),
            "flag": bool(high < 0 and falls)}


def annealed_trend(checkpoints: list[dict]) -> dict:
    """With annealed checkpoints, whether the model was still learning at the last budget: the annealed
    validation loss fell over the last step of budgets by more than ``TREND_DROP`` of the last one
    (``change``: that fall's share, negative when it fell). The last fifth of such a run is its decay,
    whose falling loss says nothing of that, so :func:`trend`'s line is not fitted. ``overfit``: the
    last budget's validation loss is above the lowest of the checkpoints' (the text was read too often)."""
    losses = [c["validation"]["loss"] for c in checkpoints]
    change = (losses[-1] - losses[-2]) / losses[-1] if len(losses) > 1 else None
    return {"slope_per_1k_steps": None, "ci_low": None, "ci_high": None, "points": len(losses),
            "flag": change is not None and -change > TREND_DROP, "rule": "annealed_checkpoints",
            "change": change, "overfit": losses[-1] > min(losses)}
