"""The page "Across sizes": the judge step's ``scale.csv`` (:mod:`posbench.across_sizes`), each deciding
comparison's verdict at every model size the run trained and its trend in size. Shown only where the tables
hold a ``scale.csv``, which the judge step writes only where a deciding comparison has results at two sizes
or more; page 1's verdict table gains its "across sizes" column from :func:`row_trend` on the same condition.
The page reads the CSVs only.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from posbench.across_sizes import DESCRIPTIVE_ADDED, DESCRIPTIVE_TASK, descriptive_arms
from posbench.report import style
from posbench.report.deciding_runs import deciding_runs, span
from posbench.report.figures import FAVOURS, fit_title, panels
from posbench.report.layout import FAVOURS_NEITHER, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "Across sizes: does each verdict hold as the model grows?"
PANEL_COLUMNS = 2
PANEL_HEIGHT = 2.2  # inches per row of panels


def page(doc: Document, tables: Tables) -> None:
    """The page, or nothing where the tables hold no ``scale.csv``."""
    found = tables.get("scale")
    if found.empty:
        return
    doc.heading(TITLE, H2, page_break=True)
    doc.paragraph("scale.csv: each deciding comparison judged at every size the run trained, sizes ordered by their "
                  "non-embedding parameters N = 12·d²·L (attention's and the feed-forward's projections; no embedding, "
                  "output head, norm or encoding parameter). The trend is the least-squares slope of the effect "
                  "against log10 N with its 95 % t interval (n − 2 degrees of freedom: 1 with three sizes, so only a "
                  "steep, straight trend excludes 0): 'changes at size X' where X is the first size whose verdict "
                  "differs from the smallest size's; else 'gap closing with size' or 'gap widening with size' where "
                  "the interval excludes 0 toward or away from a zero effect; else 'same verdict at every size'.",
                  SMALL)
    doc.paragraph(compute_rule(found), Style(size=8, weight="bold"))
    nrows = -(-found["row"].nunique() // PANEL_COLUMNS)
    doc.figure_block(lambda figure, rect: draw(figure, rect, found), PANEL_HEIGHT * nrows + 0.3,
                     "Effect (comparator minus added, positive: comparator better) against non-embedding parameters, "
                     "one panel per guidance row: points coloured by the verdict at that size, bars its interval at "
                     "the look's level, shaded band ±δ; each panel's title names the row's trend in size.")
    doc.table([size_cells(line) for line in found.itertuples(index=False)], [0.22, 0.12, 0.22, 0.16, 0.07, 0.09, 0.12],
              header=["Row · comparison", "Size (N)", "Effect [interval] vs δ", "Verdict", "Seeds", "Tokens",
                      "Undertrained"])
    doc.paragraph("Cost per size (the deciding runs' mean, from accuracy.csv's train_seconds): " + cost_words(tables),
                  SMALL)
    descriptive_section(doc, descriptive_arms(tables.get("extrapolation"), list(dict.fromkeys(found["size"]))))


def descriptive_section(doc: Document, arms: pd.DataFrame) -> None:
    """The descriptive lm_prose arms at every size (:func:`posbench.across_sizes.descriptive_arms`): their metric
    against N and each one's difference from the added arm; nothing where no arm was trained at two sizes."""
    if arms.empty:
        return
    doc.heading(f"Descriptive: the {DESCRIPTIVE_TASK} arms at every size", Style(size=10, weight="bold"), keep=1.0)
    doc.paragraph(f"Each arm of {DESCRIPTIVE_TASK} trained at its task's length and its size's width at one budget, "
                  "read at the training length (1×) and at 4× it. Not verdicts: no margin was declared and the "
                  "seeds are the preset's pilot seeds (plus the comparison's where the arm is also one). A cell's Δ is "
                  f"the arm's mean minus {DESCRIPTIVE_ADDED}'s at that size, signed so that positive means the arm "
                  "is better, with its Welch 95 % interval; compare each pair's move across sizes with the deciding "
                  "comparisons' above.", SMALL)
    panels_of = list(arms.groupby(["steps", "length_ratio"]).groups)
    doc.figure_block(lambda figure, rect: draw_descriptive(figure, rect, arms, panels_of), 2.4,
                     f"{DESCRIPTIVE_TASK}: each arm's mean over seeds (bars: 95 % t interval) against non-embedding "
                     "parameters, one panel per budget and length.")
    sizes = list(dict.fromkeys(arms.sort_values("params_non_embedding")["size"]))
    doc.table([descriptive_cells(key, lines, sizes) for key, lines in arms.groupby(["steps", "length_ratio",
                                                                                    "encoding"])],
              [0.26, *[0.74 / len(sizes)] * len(sizes)],
              header=["Budget · length · arm", *[f"{size}: Δ vs {DESCRIPTIVE_ADDED} (n)" for size in sizes]])


def draw_descriptive(figure: Figure, rect, arms: pd.DataFrame, keys: list[tuple]) -> None:
    """One panel per (budget, length ratio): each arm's mean and interval against N (log axis)."""
    axes = panels(figure, rect, len(keys), len(keys), left=0.5, bottom=0.45, top=0.4, wspace=0.35)
    colours = style.palette(tuple(arms["encoding"].unique()))
    for ax, (steps, ratio) in zip(axes, keys):
        panel = arms[(arms["steps"] == steps) & (arms["length_ratio"] == ratio)]
        for encoding, lines in panel.groupby("encoding"):
            ax.errorbar(lines["params_non_embedding"], lines["mean"], yerr=[lines["mean"] - lines["low"],
                                                                           lines["high"] - lines["mean"]],
                        fmt="o-", ms=3, capsize=2, lw=1, color=colours[encoding], label=encoding)
        ax.set_xscale("log")
        ticks = dict(zip(panel["params_non_embedding"], panel["size"]))
        ax.set_xticks(list(ticks), [f"{size}\n{n:,.0f}" for n, size in ticks.items()])
        ax.minorticks_off()
        ax.set_xlabel("non-embedding parameters N", fontsize=6.5)
        ax.set_ylabel(panel["metric"].iloc[0], fontsize=6.5)
        ax.tick_params(labelsize=6)
        fit_title(ax, f"{steps:,.0f} steps, at {ratio:g}× the training length")
    axes[0].legend(fontsize=6, frameon=False, loc="best")


def descriptive_cells(key: tuple, lines: pd.DataFrame, sizes: list[str]) -> list:
    """One arm at one budget and length: its difference from the added arm at each size."""
    steps, ratio, encoding = key
    by_size = {line.size: line for line in lines.itertuples(index=False)}
    return [[(f"{steps:,.0f} steps · {ratio:g}× · {encoding}", SMALL)],
            *[[(difference_words(by_size.get(size)), SMALL)] for size in sizes]]


def difference_words(line) -> str:
    """``-0.028 [-0.084, +0.027] (3)``; the arm's own mean where it is the added arm; "—" where not measured."""
    if line is None:
        return "—"
    if line.encoding == DESCRIPTIVE_ADDED or pd.isna(line.vs_added):
        return f"{line.mean:.3f} [{line.low:.3f}, {line.high:.3f}] ({line.seeds})"
    return f"{line.vs_added:+.3f} [{line.vs_low:+.3f}, {line.vs_high:+.3f}] ({line.seeds})"


def compute_rule(found: pd.DataFrame) -> str:
    """The compute the sizes were given: one sentence from each comparison's tokens at each size (the rule
    holds a comparison's tokens fixed across sizes; comparisons differ from one another)."""
    if found["tokens"].isna().any():
        return "Compute rule: tokens per size unknown (accuracy.csv lacks batch_size or train_len)."
    differing = [lines for _, lines in found.groupby("comparison", sort=False) if lines["tokens"].nunique() > 1]
    if not differing:
        return ("Compute rule: each comparison trains the same tokens at every size "
                f"({span(found['tokens'] / 1e6, '{:.3g}')} M tokens a run by comparison: the column Tokens).")
    return "Compute rule: tokens per size differ: " + "; ".join(
        f"{lines['comparison'].iloc[0]}: " + ", ".join(f"{line.size} {millions(line.tokens)}"
                                                      for line in lines.itertuples(index=False))
        for lines in differing) + " a run."


def millions(tokens: float) -> str:
    return f"{tokens / 1e6:.3g} M tokens"


def draw(figure: Figure, rect, found: pd.DataFrame) -> None:
    """One panel per guidance row: each comparison's effect and interval against N (log axis), its ±δ band."""
    rows = list(dict.fromkeys(found["row"]))
    axes = panels(figure, rect, len(rows), min(PANEL_COLUMNS, len(rows)), left=0.5, bottom=0.45, top=0.45,
                  hspace=0.9, wspace=0.4)
    for ax, row in zip(axes, rows):
        lines = found[found["row"] == row]
        for _, comparison in lines.groupby("comparison", sort=False):
            margin = comparison["margin"].iloc[0]
            ax.axhspan(-margin, margin, color="#eeeeee", zorder=0)
            ax.plot(comparison["params_non_embedding"], comparison["effect"], color="#999999", lw=0.8, zorder=1)
            for line in comparison.itertuples(index=False):
                ax.errorbar(line.params_non_embedding, line.effect, yerr=[[line.effect - line.ci_low],
                                                                          [line.ci_high - line.effect]],
                            fmt="o", ms=4, capsize=2, lw=1.2, mec="#333333", mew=0.4, zorder=2,
                            color=FAVOURS.get(line.verdict, (FAVOURS_NEITHER,))[0])
        ax.axhline(0, color="#999999", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.set_xticks(lines["params_non_embedding"].unique(), [f"{size}\n{n:,.0f}" for size, n in dict(
            zip(lines["size"], lines["params_non_embedding"])).items()])
        ax.minorticks_off()
        ax.set_xlabel("non-embedding parameters N", fontsize=6.5)
        ax.set_ylabel("effect", fontsize=6.5)
        ax.tick_params(labelsize=6)
        fit_title(ax, f"{row}: {row_trend(found, row)}")


def size_cells(line) -> list:
    """One line of the table: a comparison at one size."""
    return [[(f"{line.row} · {line.comparison}", SMALL)],
            [(f"{line.size} ({line.params_non_embedding:,.0f})", SMALL)],
            [(f"{line.effect:+.3f} [{line.ci_low:+.3f}, {line.ci_high:+.3f}] vs δ {line.margin:g}", SMALL)],
            [(line.verdict, Style(size=7, badge=FAVOURS.get(line.verdict, (FAVOURS_NEITHER,))[0]))],
            [(f"{line.n_added:g}/{line.n_comparator:g}", SMALL)],
            [(f"{line.tokens / 1e6:.3g} M", SMALL)],
            [(f"{line.undertrained:.0%}", SMALL)]]


def cost_words(tables: Tables) -> str:
    """``micro 41 s a seed, 0.013 s a step (on <CPU>); ...``: per size, the deciding runs' training seconds per
    run and per step, and the CPUs they ran on where scale.csv names them (seconds on two CPUs do not compare)."""
    found, judged = tables.get("scale"), tables.get("verdicts")
    keys = pd.MultiIndex.from_frame(found[["row", "comparison"]])
    lines = judged[judged["decides"].astype(bool) & pd.MultiIndex.from_frame(judged[["row", "comparison"]]).isin(keys)]
    runs = deciding_runs(tables, lines)
    if runs.empty or not {"train_seconds", "steps"} <= set(runs.columns):
        return "accuracy.csv holds no train_seconds of the deciding runs."
    per_size = runs.assign(per_step=runs["train_seconds"] / runs["steps"]).groupby("size")[["train_seconds",
                                                                                           "per_step"]].mean()
    sizes = [size for size in dict.fromkeys(found["size"]) if size in per_size.index]  # parameter order
    cpus = size_cpus(found)
    return "; ".join(f"{size} {per_size.loc[size, 'train_seconds']:,.0f} seed-seconds a run, "
                     f"{per_size.loc[size, 'per_step']:.3g} s a training step"
                     + (f" (on {cpus[size]})" if cpus.get(size) else "") for size in sizes)


def size_cpus(found: pd.DataFrame) -> dict[str, str]:
    """size -> the CPUs scale.csv names for its deciding runs, over all its comparisons; none for a table written
    before it named them."""
    if "cpu_model" not in found:
        return {}
    return {size: "; ".join(sorted({cpu for text in named.dropna().astype(str) for cpu in text.split("; ") if cpu}))
            for size, named in found.groupby("size")["cpu_model"]}


def row_trend(found: pd.DataFrame, row: str) -> str:
    """The trend in size of ``row``'s comparisons in ``scale.csv``: the trend where it has one comparison, else each
    comparison's ("a: same verdict at every size; b: ..."); "—" where the row has no line there."""
    lines = found[found["row"] == row].drop_duplicates("comparison")
    if len(lines) == 1:
        return lines["size_trend"].iloc[0]
    return "; ".join(f"{line.comparison}: {line.size_trend}" for line in lines.itertuples(index=False)) or "—"
