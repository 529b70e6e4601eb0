"""``advice.csv``, the report's page "Which encoding should I use?": the common situations
(:data:`SITUATIONS`), each answered by :func:`posbench.advise.advise` on the run's tables and summed up in
one row as the command prints it (:func:`summary_row`)."""

from __future__ import annotations

import pandas as pd

from posbench.advise import Advice, Inputs, Situation, advise, shown
from posbench.ranking import BASELINE, NO_EVIDENCE, UNCERTAIN

SITUATION_COLUMNS = ("situation", "recommendation", "runner_up", "evidence", "confidence", "too_uncertain",
                     "contradicts")
SITUATIONS = (  # (label, the situation advise is asked about): the report's page "Which encoding should I use?"
    ("Short, fixed-length NLP", Situation(task="nlp", train_len=256, deploy_len=256)),
    ("Long-context task (the longest measured length)", Situation(task="long")),
    ("Length beyond training (4×)", Situation(task="nlp", train_len=256, deploy_len=1024)),
    ("Code", Situation(task="code")),
    ("Structured data", Situation(task="structured")),
    ("Vision + language", Situation(task="multimodal")),
    ("Tight parameter budget (no extra parameters)", Situation(task="nlp", param_budget=0)),
    ("Token-by-token serving", Situation(task="nlp", decode=True)),
)


def summary_row(label: str, advice: Advice) -> list[str]:
    """label, recommendation, runner-up, evidence in one line (each row with its model size: tables of several
    sizes rank at the one with most rows), confidence, the encodings too uncertain to rank
    (with their seeds) and the deciding comparisons the ranking goes against (as the command prints them)."""
    leaders, runner_up = advice.leaders(), advice.runner_up()
    missing = "; ".join(f"{c}: {m}" for c, m, _ in advice.no_evidence)
    doubtful = ", ".join(f"{shown(c.encoding)} (n = {'/'.join(str(r.n) for r in c.rows)})" for c in advice.uncertain)
    flagged = "\n".join(advice.contradictions)  # one a line
    if not leaders:
        why = f"every encoding measured here is {UNCERTAIN}" if advice.uncertain else "no ok rows for this situation"
        return [label, "no evidence", "—", missing or why, NO_EVIDENCE, doubtful, flagged]
    best = leaders[0]
    evidence = "; ".join(f"{r.group} {r.metric} {r.mean:.3g} {r.interval()} at {r.length_ratio:g}× ({r.size}), "
                         f"n = {r.n}" + (" (fills in)" if r.fills_in else "") for r in best.ranking_rows)
    if advice.disagreement:
        evidence += "; tasks disagree: " + "; ".join(advice.disagreement)
    if best.overhead_ratio is not None:
        evidence += f"; latency ×{best.overhead_ratio:.2g} vs {BASELINE}"
    if missing:
        evidence += f"; no evidence for {missing}"
    return [label, " = ".join(shown(c.encoding) for c in leaders), shown(runner_up.encoding) if runner_up else "—",
            evidence, best.confidence, doubtful, flagged]


def situations_table(inputs: Inputs) -> pd.DataFrame:
    """``advice.csv``, what the report's page "Which encoding should I use?" shows: one row per
    :data:`SITUATIONS` entry, as the command would answer it on these tables, and the rule it ranks by."""
    answers = [(label, advise(situation, inputs)) for label, situation in SITUATIONS]
    found = [summary_row(label, advice) for label, advice in answers]
    return pd.DataFrame(found, columns=list(SITUATION_COLUMNS)).assign(rule=answers[0][1].rule)
