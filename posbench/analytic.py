"""``analytic.csv``: what posbench's own code computes, as opposed to what a run measured: parameters and
analytic FLOPs per (encoding, size, length) cell, and the sinusoid, T5 and ALiBi quantities the article's
claims are checked against. The aggregate step computes it (:func:`posbench.aggregate.analytic_table`); the
judge and the report read it through :func:`value` and so never build a model or an encoding. This module
declares the table and reads it, and imports no torch.

One row per quantity (:data:`COLUMNS`): ``quantity`` (:data:`QUANTITIES`), the ``encoding``, ``size`` and
``seq_len`` it is of (empty where it does not depend on a length) and its ``value``. Nothing in it depends on a
run's records, so a tables folder without them gets it too (``python -m posbench aggregate --analytic-only``).
"""

from __future__ import annotations

import pandas as pd

TABLE = "analytic"
COLUMNS = ("quantity", "encoding", "size", "seq_len", "value")
# Adding against naive concat [E;P] at width 2d and fixed-width concat [E_(d-p);P_p] at d, at every size.
CONCAT_FAMILY = ("sinusoidal", "sinusoidal_concat", "sinusoidal_concat_fixed")
FLOPS_SEQ_LENS = (512, 1024)  # forward passes of batch 1 at these lengths
CLAIM_SIZE = "medium"  # the size whose width (512) the article's examples use
SHIFTS = (1, 7, 100, 1000)  # the shifts k of PE(pos + k) checked against a rotation of PE(pos)
SHIFT_POSITIONS = 1024  # positions pos checked at each shift
BIAS_ENCODINGS = ("t5", "alibi")  # whose attention bias the claims read
BIAS_POSITIONS = 16  # query and key positions of the bias matrices read
BIAS_MAX_LEN = 64  # the longest sequence the bias encodings are built for
QUANTITIES = {
    "params_total": "every parameter of the model (meta device)",
    "params_projection": "weights of the attention and feed-forward projections: the part that grows with width²",
    "flops_forward": "analytic FLOPs of one forward pass, batch 1, at seq_len (posbench.flops)",
    "period_first_pair": "period in positions of the sinusoid table's first (sin, cos) pair, at the size's width",
    "period_last_pair": "period in positions of its last pair",
    "shift_linearity_error": "max |R(k·ω) PE(pos) − PE(pos + k)| over pos < seq_len and k in SHIFTS, in float64",
    "model_width": "the width the encoding runs the network at, for the size's d_model",
    "params_encoding": "the encoding's own learned parameters at the size's width and heads",
    "bias_heads": "the first dimension (heads) of the encoding's attention bias (h, q, k)",
    "bias_positions": "its query and key dimensions: the positions it was built for",
    "largest_off_diagonal_bias": "the largest entry of the bias away from its diagonal (i ≠ j), for an encoding "
                                 "that learns nothing (its bias is the formula's)",
}


def value(frame: pd.DataFrame, quantity: str, encoding: str, size: str, seq_len: int | None = None) -> float | None:
    """One quantity of ``frame`` (``analytic.csv`` as loaded), or ``None`` where the table lacks it."""
    if frame.empty or any(c not in frame.columns for c in COLUMNS):
        return None
    rows = frame[(frame["quantity"] == quantity) & (frame["encoding"] == encoding) & (frame["size"] == size)]
    rows = rows[rows["seq_len"].isna()] if seq_len is None else rows[rows["seq_len"] == seq_len]
    return float(rows["value"].iloc[0]) if len(rows) else None
