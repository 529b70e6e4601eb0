"""The page "Across sizes": the judge step's ``scale.csv`` (:mod:`posbench.across_sizes`), each deciding
comparison's verdict at every model size the run trained and its trend in size. Shown only where the tables
hold a ``scale.csv``, which the judge step writes only where a deciding comparison has results at two sizes
or more; page 1's verdict table gains its "across sizes" column from :func:`row_trend` on the same condition.
The page reads the CSVs only.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from posbench.report.deciding_runs import deciding_runs
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


def compute_rule(found: pd.DataFrame) -> str:
    """The compute the sizes were given: one sentence from the tokens per size."""
    per_size = found.groupby("size", sort=False)["tokens"].mean()
    if per_size.isna().any():
        return "Compute rule: tokens per size unknown (accuracy.csv lacks batch_size or train_len)."
    if per_size.nunique() == 1:
        return f"Compute rule: the same training tokens at every size ({millions(per_size.iloc[0])} a run)."
    return "Compute rule: tokens per size differ: " + ", ".join(f"{size} {millions(tokens)}"
                                                                for size, tokens in per_size.items()) + " a run."


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
    """``micro 41 s a seed, 0.013 s a step; ...``: per size, the deciding runs' training seconds per run and
    per step."""
    found, judged = tables.get("scale"), tables.get("verdicts")
    keys = pd.MultiIndex.from_frame(found[["row", "comparison"]])
    lines = judged[judged["decides"].astype(bool) & pd.MultiIndex.from_frame(judged[["row", "comparison"]]).isin(keys)]
    runs = deciding_runs(tables, lines)
    if runs.empty or not {"train_seconds", "steps"} <= set(runs.columns):
        return "accuracy.csv holds no train_seconds of the deciding runs."
    per_size = runs.assign(per_step=runs["train_seconds"] / runs["steps"]).groupby("size")[["train_seconds",
                                                                                           "per_step"]].mean()
    sizes = [size for size in dict.fromkeys(found["size"]) if size in per_size.index]  # parameter order
    return "; ".join(f"{size} {per_size.loc[size, 'train_seconds']:,.0f} seed-seconds a run, "
                     f"{per_size.loc[size, 'per_step']:.3g} s a training step" for size in sizes)


def row_trend(found: pd.DataFrame, row: str) -> str:
    """The trend in size of ``row``'s comparisons in ``scale.csv``: the trend where it has one comparison, else each
    comparison's ("a: same verdict at every size; b: ..."); "—" where the row has no line there."""
    lines = found[found["row"] == row].drop_duplicates("comparison")
    if len(lines) == 1:
        return lines["size_trend"].iloc[0]
    return "; ".join(f"{line.comparison}: {line.size_trend}" for line in lines.itertuples(index=False)) or "—"
