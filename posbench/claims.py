"""The claims check: each claim of the article that posbench can test (:data:`CLAIMS`), our figure
beside it, a verdict.

Figures come from three places, and each says which: *computed* from posbench's own code (parameter
counts on the meta device, the sinusoid table in float64, the ALiBi bias: the aggregate step's
``analytic.csv``, :mod:`posbench.analytic`, so no claim builds a model here), *measured* in this run's
tables, and *cited* from the paper a claim is about (never a figure we did not read there).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, fields

import pandas as pd

from posbench import analytic, comparisons, evidence, experiments, shapes
from posbench.arms import seed_values
from posbench.evidence import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Entry
from posbench.guidance import ADDING_SUFFICES, OTHER_SCHEME_WINS
from posbench.sizes import SIZES
from posbench.tables import Tables, higher_is_better

D_MODEL = SIZES[analytic.CLAIM_SIZE]["d_model"]  # the width the article's examples use
FLOPS_SEQ_LEN = min(analytic.FLOPS_SEQ_LENS)  # analytic.csv's FLOPs the concat claim reads without cost.csv's
SHIFT_LINEARITY_TOLERANCE = 1e-9
CITED = "cited"
PROBE_MARGIN = 0.02  # two points of probe accuracy: the probe's own seed spread is about 0.01 (reference run)


@dataclass(frozen=True)
class Claim:
    article: str  # the claim as the article makes it (English)
    ours: str  # our figure from this run, or what our code computes
    cited: str  # what the cited source says; "" when the claim cites nothing
    verdict: str
    rule: str


def computed(tables: Tables, *wanted: tuple) -> list[float] | str:
    """Each ``(quantity, encoding)`` or ``(quantity, encoding, seq_len)`` of ``analytic.csv`` at the article's
    size, in order; or, where one is missing, the sentence a claim prints in its place."""
    frame = tables.get(analytic.TABLE)
    found = [analytic.value(frame, quantity, encoding, analytic.CLAIM_SIZE, *length)
             for quantity, encoding, *length in wanted]
    if None not in found:
        return found
    quantity, encoding, *_ = wanted[found.index(None)]
    why = (tables.missing(analytic.TABLE, "quantity", "encoding", "size", "value")
           or f"analytic.csv has no {quantity} of {encoding} at size {analytic.CLAIM_SIZE}")
    return f"not computed: {why} (`python -m posbench aggregate --analytic-only --out {tables.folder}` writes it)"


# ----- 1. concat costs -------------------------------------------------------------------------
def flops_ratios(tables: Tables) -> tuple[dict[str, float], str]:
    """Analytic FLOPs of naive and fixed concat over adding: from cost.csv, else analytic.csv's at the article's
    width and :data:`FLOPS_SEQ_LEN`."""
    cost = tables.ok("cost", "encoding", "size", "seq_len", "flops_analytic")
    cost = cost[cost["encoding"].isin(analytic.CONCAT_FAMILY)]
    keys = [k for k in ("size", "seq_len", "mode", "batch") if k in cost.columns]
    candidates = []  # (model width, group key, FLOPs per encoding)
    for key, cell in cost.groupby(keys):
        flops = cell.groupby("encoding")["flops_analytic"].median()
        if {"sinusoidal", "sinusoidal_concat"} <= set(flops.index):
            candidates.append((cell["d_model"].max() if "d_model" in cell else 0, key, flops))
    if candidates:
        _, key, flops = max(candidates, key=lambda candidate: candidate[0])
        where = ", ".join(f"{k}={v}" for k, v in zip(keys, key))
        return {e: flops[e] / flops["sinusoidal"] for e in flops.index}, f"cost.csv ({where})"
    flops = computed(tables, *[("flops_forward", e, FLOPS_SEQ_LEN) for e in analytic.CONCAT_FAMILY])
    if isinstance(flops, str):
        return {}, f"no FLOPs: cost.csv lacks them and {flops.removeprefix('not computed: ')}"
    flops = dict(zip(analytic.CONCAT_FAMILY, flops))
    return ({e: f / flops["sinusoidal"] for e, f in flops.items()},
            f"posbench.flops, d={D_MODEL}, L={FLOPS_SEQ_LEN}")  # its counts, as analytic.csv holds them


def ratios(tables: Tables, quantity: str) -> dict[str, float] | str:
    """``quantity`` of each concat encoding over adding's, at the article's width (or why it is missing)."""
    values = computed(tables, *[(quantity, e) for e in analytic.CONCAT_FAMILY])
    return values if isinstance(values, str) else {e: v / values[0] for e, v in zip(analytic.CONCAT_FAMILY, values)}


def claim_concat_cost(tables: Tables) -> Claim:
    article = "Concat [E;P] at width 2d costs ~4× the projection parameters and more FLOPs"
    rule = "supported when naive concat's projection params are 3.5–4.5× adding's and its FLOPs higher"
    proj, total = ratios(tables, "params_projection"), ratios(tables, "params_total")
    if isinstance(why := proj if isinstance(proj, str) else total, str):
        return Claim(article, why, "", INCONCLUSIVE, rule)
    flops, source = flops_ratios(tables)
    fixed = flops.get("sinusoidal_concat_fixed", float("nan"))
    flops_text = (f"; FLOPs naive ×{flops['sinusoidal_concat']:.2f}, fixed ×{fixed:.2f} ({source})"
                  if flops else f"; {source}")
    naive_costs = 3.5 <= proj["sinusoidal_concat"] <= 4.5 and flops.get("sinusoidal_concat", math.nan) > 1
    fixed_free = abs(proj["sinusoidal_concat_fixed"] - 1) < 0.01
    verdict = SUPPORTED if naive_costs else NOT_SUPPORTED
    return Claim(
        article,
        f"computed at d={D_MODEL}: projection params naive ×{proj['sinusoidal_concat']:.2f}, "
        f"fixed-width ×{proj['sinusoidal_concat_fixed']:.2f}; total params naive ×{total['sinusoidal_concat']:.2f}, "
        f"fixed ×{total['sinusoidal_concat_fixed']:.2f}{flops_text}",
        "", verdict, rule + ("; true for naive concat only: fixed-width concat stays within 1 %" if fixed_free else ""))


# ----- 2. learned vs sinusoidal ------------------------------------------------------------------
VASWANI = "vaswani2017-e"  # the published shape that reads this claim's arms (posbench/shapes.yaml)


def measured(judged: list) -> str:
    """Each entry of a judged family in a few words: effect [95 % interval] vs δ, seeds, outcome."""
    parts = []
    for entry, numbers, outcome in judged:
        seeds = f"n = {len(entry.added)}/{len(entry.comparator)}"
        if numbers is None:
            parts.append(f"{entry.label}: {seeds}, too few to compare")
            continue
        parts.append(f"{entry.label}: {numbers.effect:+.3g} [{numbers.ci_low:+.3g}, {numbers.ci_high:+.3g}] "
                     f"vs δ {entry.margin:g}, {seeds} → {outcome}")
    return "; ".join(parts)


def claim_learned_vs_sinusoidal(tables: Tables) -> Claim:
    """Learned (comparator) against sinusoidal as the published shape Vaswani (E) reads them, its one home
    (``posbench/shapes.yaml``, the shapes page): lm_prose at the training length, both arms at the task's own
    budget, each at the rate validation chose and at the shape's seeds (its confirm stage's where it declares
    one), at the shape's margin, per model size. Never pooled over rates or budgets: a run that tunes the arms
    or also trains a comparison's longer arm would otherwise set one arm's mixture against the other's."""
    shape = shapes.load().shape(VASWANI)
    results = tables.get("extrapolation")
    entries = []
    for size in shapes.task_sizes(results, shape.task):
        learned, sinusoidal = (shapes.arm_result(results, shape, arm, size).values for arm in ("learned", "sinusoidal"))
        if len(learned) and len(sinusoidal):
            label = f"{shape.task} ({size}, as shape {shape.id} reads it)"
            entries.append(Entry(shape.task, label, learned, sinusoidal, shape.higher_is_better, shape.margin))
    verdict, judged = evidence.judge_family(entries, OTHER_SCHEME_WINS, min_seeds())
    return Claim(
        "Learned is slightly better than sinusoidal (Attention Is All You Need)",
        "measured, learned − sinusoidal: " + (measured(judged)
                                             or f"no results of both arms as shape {VASWANI} reads them"),
        "Vaswani et al. 2017, Table 3 row (E): PPL 4.92 for both; BLEU 25.7 learned vs 25.8 sinusoidal",
        f"cited: {NOT_SUPPORTED}; ours: {verdict}",
        f"ours: read as the shapes page's {VASWANI} reads its arms (each at its chosen rate, the task's budget, the "
        f"shape's seeds); supported when learned beats sinusoidal by more than δ (the shape's margin; 95 % Welch "
        f"interval, Holm over sizes, >= {min_seeds()} seeds), not supported when every size shows it not better by δ")


def min_seeds() -> int:
    """Seeds per arm a claim's comparison needs to decide: the declared seed rule's minimum."""
    return comparisons.load().seed_rule.min


# ----- 3. periods --------------------------------------------------------------------------------
def claim_periods(tables: Tables) -> Claim:
    article = "Low dimensions (small i) change slowly"
    rule = "supported if the lowest pair's period exceeds the highest pair's; the formula gives the opposite"
    periods = computed(tables, ("period_first_pair", "sinusoidal"), ("period_last_pair", "sinusoidal"))
    if isinstance(periods, str):
        return Claim(article, periods, "", INCONCLUSIVE, rule)
    low, high = periods
    return Claim(
        article,
        f"computed at d={D_MODEL}: period of pair i=0 is {low:.2f} positions, of pair i={D_MODEL // 2 - 1} "
        f"{high:,.0f} positions",
        "", NOT_SUPPORTED if low < high else SUPPORTED, rule)


# ----- 4. shift linearity ------------------------------------------------------------------------
def claim_shift_linearity(tables: Tables) -> Claim:
    article = "PE(pos+k) is a linear function of PE(pos)"
    rule = f"supported when the error is below {SHIFT_LINEARITY_TOLERANCE:g}"
    error = computed(tables, ("shift_linearity_error", "sinusoidal", analytic.SHIFT_POSITIONS))
    if isinstance(error, str):
        return Claim(article, error, "", INCONCLUSIVE, rule)
    return Claim(
        article,
        f"computed (float64, d={D_MODEL}, pos < {analytic.SHIFT_POSITIONS}, k in "
        f"{', '.join(map(str, analytic.SHIFTS))}): max error of a rotation per frequency pair = {error[0]:.1e}",
        "", SUPPORTED if error[0] < SHIFT_LINEARITY_TOLERANCE else NOT_SUPPORTED, rule)


# ----- 5. T5 -------------------------------------------------------------------------------------
def claim_t5(tables: Tables) -> Claim:
    cited = ("Raffel et al. 2020 (T5), §2.1: a learned scalar per relative-position bucket is added to the "
             "attention logits, shared across layers; no position vectors are concatenated")
    found = computed(tables, *[(quantity, "t5") for quantity in ("model_width", "bias_heads", "bias_positions",
                                                                  "params_encoding")])
    if isinstance(found, str):
        ours = found
    else:
        width, heads, positions, params = map(int, found)
        ours = (f"computed (posbench t5): width {D_MODEL} -> {width} (nothing concatenated); a logit bias of shape "
                f"{(heads, positions, positions)} from {params} learned scalars")
    return Claim("T5 concatenates position encodings", ours, cited, f"{CITED}: {NOT_SUPPORTED}",
                 "checked against the cited paper")


# ----- 6. ALiBi sign -----------------------------------------------------------------------------
def claim_alibi_sign(tables: Tables) -> Claim:
    article = "ALiBi adds + m·|i−j| to the attention logits"
    cited = "Press et al. 2022: the bias is −m·|i−j| (a penalty on distance)"
    rule = "supported only if the bias for i ≠ j is positive"
    found = computed(tables, ("largest_off_diagonal_bias", "alibi"), ("bias_heads", "alibi"))
    if isinstance(found, str):
        return Claim(article, found, cited, INCONCLUSIVE, rule)
    largest, heads = found
    return Claim(
        article,
        f"computed (posbench alibi, {heads:.0f} heads): largest off-diagonal bias {largest:.4g} (< 0): a penalty "
        "−m·|i−j|",
        cited, NOT_SUPPORTED if largest < 0 else SUPPORTED, rule)


# ----- 7. sinusoidal extrapolation ---------------------------------------------------------------
def claim_sinusoidal_extrapolation(tables: Tables) -> Claim:
    """Sinusoidal at 2× its training length against itself at 1×: extrapolating means 1× is not better by δ.
    One entry per task, model size and budget (a comparison's longer-trained arm is its own entry, never pooled
    with the task's descriptive one), each at the learning rate validation chose where several ran."""
    rows = tables.ok("extrapolation", "task", "encoding", "metric", "length_ratio", "value")
    rows = rows[(rows["encoding"] == "sinusoidal") & rows["length_ratio"].isin([1.0, 2.0])]
    declared = comparisons.load()
    entries = []
    for (task, size, steps), cell in rows.groupby(["task", _column(rows, "size", ""), _column(rows, "steps", 0)]):
        margin = declared.margin(task, cell["metric"].iloc[0])
        cell = experiments.best_rate(cell)[0]
        by = {ratio: seed_values(r) for ratio, r in cell.groupby("length_ratio")}
        if {1.0, 2.0} <= set(by) and margin is not None:
            label = ", ".join([task, *([size] if size else []), *([f"{steps:g} steps"] if steps else [])])
            entries.append(Entry(task, label, by[1.0], by[2.0], higher_is_better(cell), margin))
    verdict, judged = evidence.judge_family(entries, ADDING_SUFFICES, min_seeds())
    return Claim(
        "Sinusoidal can extrapolate to unseen lengths",
        "measured, sinusoidal at 1× − at 2× the training length: "
        + (measured(judged) or "no sinusoidal rows at length ratios 1 and 2 with a declared margin"),
        "", verdict,
        f"supported when, on every task (each size and budget), the metric at 1× is shown not better than at 2× by "
        f"the task's declared δ (95 % Welch interval, Holm over them, >= {min_seeds()} seeds)")


def _column(rows: pd.DataFrame, name: str, missing) -> pd.Series:
    """``rows[name]`` with ``missing`` where it is empty or absent (a table that does not record it), so a
    group-by keeps those rows."""
    return rows[name].fillna(missing) if name in rows.columns else pd.Series(missing, index=rows.index)


# ----- 8. information kept -----------------------------------------------------------------------
PROBE_COLUMNS = ("combine", "d_model", "embedding", "probe", "target", "value")


PROBE_TABLE = "probe_claim"  # the judge step's one row per probe result of the information claim
PROBE_RESULT_COLUMNS = ("target", "embedding", "d_model", "effect", "ci_low", "ci_high", "margin", "n_add",
                        "n_concat_fixed", "seeds_needed", "outcome")


def claim_information(tables: Tables) -> Claim:
    """Add vs the fixed-width concat at the same d (the same vector width, so a fair test of whether
    adding loses something concatenating keeps), read out by a linear probe, per embedding kind. Its
    results, one per cell, are :func:`probe_table`'s rows; the claim states only how many and how they ended."""
    article = "Adding does not lose information"
    rule = (f"supported when, for every embedding kind and target, a linear probe reading E+P is shown not worse "
            f"than reading the fixed-width concat [E;P] at the same d by more than {PROBE_MARGIN} accuracy at every d "
            f"(95 % Welch interval, Holm over the cells, >= {min_seeds()} seeds)")
    if (why := tables.missing("probe", *PROBE_COLUMNS)):
        return Claim(article, f"not measured yet: {why}", "", INCONCLUSIVE, rule)
    verdict, judged, _ = judge_probe(tables)
    return Claim(article, "measured, linear probe, concat − add: " + (outcome_counts(judged) or "no cell has both"),
                 "", verdict, rule)


def judge_probe(tables: Tables) -> tuple[str, list[tuple[Entry, object, str]], list[dict]]:
    """The information claim's verdict, each probe cell's entry, numbers and outcome
    (:func:`posbench.evidence.judge_family`), and each cell's target, embedding kind and width, in the same order."""
    linear = tables.ok("probe", *PROBE_COLUMNS).query("probe == 'linear'")
    entries, cells = [], []
    for (embedding, target, d_model), cell in linear.groupby(["embedding", "target", "d_model"]):
        by = {combine: seed_values(r) for combine, r in cell.groupby("combine")}
        if {"add", "concat_fixed"} <= set(by):
            entries.append(Entry(f"{target}, {embedding}", f"{target}, {embedding} embeddings, d {d_model}",
                                 by["concat_fixed"], by["add"], True, PROBE_MARGIN))
            cells.append({"target": target, "embedding": embedding, "d_model": int(d_model)})
    return *evidence.judge_family(entries, ADDING_SUFFICES, min_seeds()), cells


def outcome_counts(judged: list) -> str:
    """How many results a judged family has and how they ended, e.g. "12 results, one a row of probe_claim.csv:
    12 too few seeds"; "" when it has none."""
    if not judged:
        return ""
    counts = Counter(outcome for *_, outcome in judged)  # in the order the outcomes first occur
    return (f"{len(judged)} results, one a row of {PROBE_TABLE}.csv: "
            + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))


def probe_table(tables: Tables) -> pd.DataFrame:
    """``probe_claim.csv``: one row per probe cell the information claim reads, in :func:`judge_probe`'s
    order: concat − add in linear-probe accuracy with its 95 % Welch interval (NaN under 2 seeds), δ, the
    seeds of each arm, the seeds per arm a result needs to decide, and the outcome."""
    if tables.missing("probe", *PROBE_COLUMNS):
        return pd.DataFrame(columns=PROBE_RESULT_COLUMNS)
    _, judged, cells = judge_probe(tables)
    rows = []
    for cell, (entry, numbers, outcome) in zip(cells, judged):
        interval = (numbers.effect, numbers.ci_low, numbers.ci_high) if numbers else (math.nan,) * 3
        rows.append({**cell, **dict(zip(("effect", "ci_low", "ci_high"), interval)), "margin": entry.margin,
                     "n_add": len(entry.added), "n_concat_fixed": len(entry.comparator), "seeds_needed": min_seeds(),
                     "outcome": outcome})
    return pd.DataFrame(rows, columns=PROBE_RESULT_COLUMNS)


CLAIMS = (claim_concat_cost, claim_learned_vs_sinusoidal, claim_periods, claim_shift_linearity, claim_t5,
          claim_alibi_sign, claim_sinusoidal_extrapolation, claim_information)


def check_all(tables: Tables) -> list[Claim]:
    return [check(tables) for check in CLAIMS]


def table(tables: Tables) -> pd.DataFrame:
    """``claims.csv``: one row per claim, in :data:`CLAIMS` order, with :class:`Claim`'s fields."""
    return pd.DataFrame([asdict(claim) for claim in check_all(tables)], columns=[f.name for f in fields(Claim)])
