"""The runs behind a run's verdicts, read from its tables: each deciding
comparison's runs (``accuracy.csv``'s rows that ``verdicts.csv`` names), the model they trained, the device,
the training budget and the seeds. Page 1 prints it above the verdicts; nothing here re-measures.
"""

from __future__ import annotations

import pandas as pd

from posbench.across_sizes import arm_runs
from posbench.sizes import SIZES
from posbench.tables import Tables


def deciding_runs(tables: Tables, lines: pd.DataFrame) -> pd.DataFrame:
    """Both arms' deciding runs of every line of ``lines`` (verdicts.csv rows), one accuracy row per run."""
    accuracy = tables.get("accuracy")
    found = [arm_runs(accuracy, line, arm) for line in lines.itertuples(index=False) for arm in ("added", "comparator")]
    found = [frame for frame in found if not frame.empty]
    return pd.concat(found).drop_duplicates() if found else accuracy.iloc[0:0]


def span(values, fmt: str = "{:,.0f}") -> str:
    """``"600–4,000"`` over ``values``, one number when they are all equal."""
    values = sorted(set(pd.Series(values).dropna()))
    if not values:
        return "—"
    low, high = fmt.format(values[0]), fmt.format(values[-1])
    return low if low == high else f"{low}–{high}"


def interval_level(alpha_look) -> str:
    """The two-sided level of an interval whose one-sided tail is ``alpha_look`` at each look: ``97.1 %``."""
    return "—" if pd.isna(alpha_look) else f"{100 * (1 - 2 * alpha_look):.1f} %"


def model_words(runs: pd.DataFrame) -> str:
    """``tiny (d_model 64, 2 layers, 4 heads; 101,248–128,384 parameters)`` per size the runs trained."""
    found = []
    for size, at_size in runs.groupby("size", sort=False):
        dims = SIZES.get(size, {})
        widths = span(at_size["d_model"]) if "d_model" in at_size else str(dims.get("d_model", "—"))
        parts = [f"d_model {widths}"] + [f"{dims[k]} {word}" for k, word in (("n_layers", "layers"),
                                                                             ("n_heads", "heads")) if k in dims]
        params = f"; {span(at_size['params_total'])} parameters" if "params_total" in at_size else ""
        found.append(f"{size} ({', '.join(parts)}{params})")
    return ", ".join(found) or "—"


def device_words(tables: Tables, runs: pd.DataFrame) -> str:
    """``cpu (<its CPU model>, 2 cores, 1 torch thread)``: the runs' devices and the machines' environment."""
    devices = ", ".join(sorted(runs["device"].dropna().astype(str).unique())) if "device" in runs else "device unknown"
    machines = set(runs["machine"].dropna()) if "machine" in runs else set()
    details = []
    for machine, env in (tables.meta.get("environment") or {}).items():
        if machines and machine not in machines:
            continue
        hardware = [env.get("gpu"), env.get("cpu"),  # the machine's, whichever device the runs used
                    f"{env['cpu_count']} cores" if env.get("cpu_count") else None,
                    f"{env['torch_threads']} torch thread{'s' if env['torch_threads'] != 1 else ''}"
                    if env.get("torch_threads") else None]
        details.append(", ".join(str(h) for h in hardware if h))
    return f"{devices} ({'; '.join(details)})" if any(details) else devices


def budget_words(runs: pd.DataFrame) -> str:
    """``600–4,000 steps × batch 32, 0.3–8.2 M tokens seen per run`` (tokens: steps × batch × length)."""
    if "steps" not in runs:
        return "steps unknown"
    text = f"{span(runs['steps'])} steps"
    if "batch_size" in runs:
        text += f" × batch {span(runs['batch_size'])}"
        if "train_len" in runs:
            tokens = runs["steps"] * runs["batch_size"] * runs["train_len"] / 1e6
            text += f", {span(tokens, '{:.2g}')} M tokens seen per run (characters for the character LMs)"
    return text


def scale_line(tables: Tables, lines: pd.DataFrame) -> str:
    """One line: the model, the device, the budget and the seeds behind ``lines`` (the deciding comparisons)."""
    if lines.empty:
        return "Scale: no deciding comparison has results in these tables."
    runs = deciding_runs(tables, lines)
    if runs.empty:
        return "Scale: accuracy.csv holds none of the deciding comparisons' runs."
    seeds = span(pd.concat([lines["n_added"], lines["n_comparator"]]))
    levels = ", ".join(dict.fromkeys(interval_level(a) for a in lines.get("alpha_look", pd.Series([float("nan")]))))
    return (f"Scale: model {model_words(runs)} · device {device_words(tables, runs)} · {budget_words(runs)} · "
            f"{seeds} seeds per arm · {levels} intervals")
