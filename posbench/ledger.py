"""The verdict ledger: each guidance row's verdict now beside the verdict of a previous run (the last
committed reference), and what changed between them.

A verdict that changes is news only when the reader can see why: another comparison decides the row,
the arms trained longer, on another text or at other learning rates, more seeds, other code. :func:`table`
reads two ``verdicts.csv`` (the judge step's, :mod:`posbench.verdicts`) and the two runs' ``meta.json`` and
writes one row per guidance row (``ledger.csv``); the report prints it. Nothing here judges anything again:
both sides are as their judge steps wrote them.
"""

from __future__ import annotations

import math

import pandas as pd

from posbench import guidance

COLUMNS = ("row", "previous_verdict", "previous_decided_by", "previous_effect", "verdict", "decided_by", "effect",
           "changed")


def deciding(verdicts: pd.DataFrame, row: str) -> pd.DataFrame:
    """The comparisons that decide ``row`` in a verdicts.csv (all of the row's where it has no ``decides``)."""
    if verdicts.empty or "row" not in verdicts.columns:
        return pd.DataFrame(columns=["row", "comparison", "row_shown", "decides"])
    rows = verdicts[verdicts["row"] == row]
    return rows[rows["decides"].astype(bool)] if "decides" in rows.columns else rows


def effect_text(line) -> str:
    """``+0.230 [+0.149, +0.312] vs δ 0.1 (10/10 seeds)`` of one verdicts.csv row; ``—`` without numbers."""
    if pd.isna(getattr(line, "effect", math.nan)):
        return "—"
    return (f"{line.effect:+.3f} [{line.ci_low:+.3f}, {line.ci_high:+.3f}] vs δ {line.margin:g} "
            f"({line.n_added:g}/{line.n_comparator:g} seeds)")


def changes(before: pd.DataFrame, after: pd.DataFrame, code: tuple[str, str]) -> list[str]:
    """What differs between a row's deciding comparisons before and after: which comparison decides,
    its budget, its seeds, the text its task read, its arms' learning rates, the declaration and the
    measuring code."""
    found = []
    ids = (list(before["comparison"]), list(after["comparison"]))
    if ids[0] != ids[1]:
        found.append(f"decided by {', '.join(ids[1]) or 'nothing'} instead of {', '.join(ids[0]) or 'nothing'}")
    for name, label in (("steps", "steps"), ("n_added", "seeds per arm")):
        values = [sorted(set(frame[name].dropna().astype(int))) if name in frame.columns else [] for frame in
                  (before, after)]
        if values[0] != values[1]:
            found.append(f"{label} {_listed(values[0])} -> {_listed(values[1])}")
    texts = [sorted(set(frame["text"].fillna("").replace("", "not recorded"))) if "text" in frame.columns
             else ["not recorded"] for frame in (before, after)]
    if texts[0] != texts[1]:
        found.append(f"training text {_listed(texts[0])} -> {_listed(texts[1])}")
    rates = [_rates(frame) for frame in (before, after)]
    if rates[0] != rates[1]:
        found.append(f"learning rates (added/comparator) {_listed(rates[0])} -> {_listed(rates[1])}")
    declarations = [set(frame["declaration_sha256"].str[:12]) if "declaration_sha256" in frame.columns else set()
                    for frame in (before, after)]
    if declarations[0] != declarations[1]:
        found.append(f"declarations {_listed(sorted(declarations[0]))} -> {_listed(sorted(declarations[1]))}")
    if code[0] != code[1]:
        found.append(f"measuring code {code[0]} -> {code[1]}")
    return found


def _rates(frame: pd.DataFrame) -> list[str]:
    """Each deciding comparison's two learning rates, ``0.009/0.027`` (added/comparator)."""
    if not {"lr_added", "lr_comparator"} <= set(frame.columns):
        return []
    pairs = frame[["lr_added", "lr_comparator"]].dropna()
    return sorted({f"{added:g}/{comparator:g}" for added, comparator in pairs.itertuples(index=False)})


def _listed(values: list) -> str:
    return ", ".join(map(str, values)) if values else "not recorded"


def code_of(meta: dict) -> str:
    """The measuring code a run's records share (``meta.json``'s code hashes, 12 characters each)."""
    hashes = meta.get("code_hashes") or meta.get("git_commits") or []
    return ", ".join(h[:12] for h in hashes) or "unknown"


def table(previous: pd.DataFrame, current: pd.DataFrame, previous_meta: dict, current_meta: dict) -> pd.DataFrame:
    """``ledger.csv``: one row per guidance row, the previous run's verdict and deciding effect beside this
    run's, and what changed (:func:`changes`)."""
    code = (code_of(previous_meta), code_of(current_meta))
    rows = []
    for row in guidance.ROWS:
        before, after = deciding(previous, row.key), deciding(current, row.key)
        rows.append({"row": row.key,
                     "previous_verdict": before["row_shown"].iloc[0] if len(before) else "no deciding comparison",
                     "previous_decided_by": ", ".join(before["comparison"]),
                     "previous_effect": "; ".join(effect_text(line) for line in before.itertuples()),
                     "verdict": after["row_shown"].iloc[0] if len(after) else "no deciding comparison",
                     "decided_by": ", ".join(after["comparison"]),
                     "effect": "; ".join(effect_text(line) for line in after.itertuples()),
                     "changed": "; ".join(changes(before, after, code)) or "nothing"})
    return pd.DataFrame(rows, columns=list(COLUMNS))
