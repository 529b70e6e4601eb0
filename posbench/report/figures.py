"""The report's figures. Each is a :class:`FigureSpec`: its title, caption and category (the one text
the PDF and ``snakemake --report`` both show), what it needs from the tables, how tall it is, and a
``draw(figure, rect, tables)`` that fills a rectangle of a page (or of a standalone PNG for
``snakemake --report``). Colours come from :func:`posbench.report.style.colour`, one per encoding.

The workflow reads :data:`REPORT_FIGURES` when it parses (``workflow/rules/report.smk``), so seaborn
(and the scipy beneath it) is imported where a figure is drawn, not here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

from posbench import analytic, experiments
from posbench.report.data import direction, metric_label
from posbench.report.layout import FAVOURS_ADDING, FAVOURS_NEITHER, FAVOURS_OTHER, Style, text_width, wrap
from posbench.report.style import colour, palette
from posbench.report.verdicts import BETTER, NOT_BETTER
from posbench.sizes import LADDER, SIZES
from posbench.tables import Tables, at_defaults, plain
from posbench.tasks.digits_2d import PATCH

Rect = tuple[float, float, float, float]  # left, bottom, right, top (figure fractions)
FLOPS_SEQ_LEN = max(analytic.FLOPS_SEQ_LENS)  # the longest length analytic.csv counts FLOPs at


@dataclass(frozen=True)
class FigureSpec:
    name: str  # file stem under results/plots/
    title: str
    caption: str
    category: str  # the section of `snakemake --report` it is listed under
    height: float  # inches on the page
    missing: Callable[[Tables], str | None]
    draw: Callable[[Figure, Rect, Tables], None]


def panels(figure: Figure, rect: Rect, n: int, ncols: int, *, left=0.75, bottom=0.5, top=0.5, hspace=0.6,
           wspace=0.35, sharex=False):
    """``n`` axes in a grid inside ``rect``; margins in inches leave room for labels and the legend."""
    width_in, height_in = figure.get_size_inches()
    nrows = -(-n // ncols)
    grid = figure.add_gridspec(nrows, ncols, left=rect[0] + left / width_in, right=rect[2] - 0.1 / width_in,
                               bottom=rect[1] + bottom / height_in, top=rect[3] - top / height_in,
                               hspace=hspace, wspace=wspace)
    axes = [figure.add_subplot(grid[i // ncols, i % ncols]) for i in range(n)]
    return axes


LEGEND_COLUMNS = 6


def legend_top(encodings) -> float:
    """Inches above the panels that the shared legend (one row per six encodings) and titles need."""
    return 0.3 + 0.2 * -(-len(set(encodings)) // LEGEND_COLUMNS)


def encoding_legend(figure: Figure, rect: Rect, encodings: list[str]) -> None:
    colours = palette(encodings)
    handles = [Patch(color=colours[e], label=e) for e in sorted(encodings, key=list(colours).index)]
    figure.legend(handles=handles, loc="upper center", bbox_to_anchor=((rect[0] + rect[2]) / 2, rect[3]),
                  ncol=min(LEGEND_COLUMNS, len(handles)), frameon=False, fontsize=7, handlelength=1.2,
                  columnspacing=1.0)


def _no_legend(ax) -> None:
    if ax.get_legend():
        ax.get_legend().remove()


SMALLEST_TITLE = 7.0  # points; a panel title shrinks to this before it breaks into lines
EDGE_ROOM = 0.1  # inches a title keeps free at the figure's edge


def title_room(ax) -> float:
    """Inches a title centred over ``ax`` may span: the panel's width and, on either side alike, the least of
    the room to the figure's edge and half the gap to a neighbouring panel in its row."""
    figure_width = ax.figure.get_figwidth()
    box = ax.get_position()
    row = [other.get_position() for other in ax.figure.axes
           if other is not ax and other.get_position().y0 < box.y1 and other.get_position().y1 > box.y0]
    left = [box.x0 - other.x1 for other in row if other.x1 <= box.x0]
    right = [other.x0 - box.x1 for other in row if other.x0 >= box.x1]
    side = min(box.x0 * figure_width - EDGE_ROOM, (1 - box.x1) * figure_width - EDGE_ROOM,
               *(gap * figure_width / 2 for gap in left + right))
    return box.width * figure_width + 2 * max(side, 0.0)


def fit_title(ax, text: str) -> None:
    """``text`` as the panel's title within :func:`title_room`: smaller type first, then broken into lines,
    so a title never runs over its neighbour's or off the page (or off a standalone figure's edge)."""
    width = title_room(ax)
    size = ax.title.get_fontsize()
    size = max(SMALLEST_TITLE, min(size, size * width / text_width(text, Style(size=size))))
    ax.set_title("\n".join(wrap(text, width, Style(size=size))), fontsize=size)


def readable_log(axis) -> None:
    """A log axis labelled at 1, 2 and 5 times each power of ten in plain numbers: one that spans a
    decade or less still shows several values, not a lone ``10^2``."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


# ----- parameters and FLOPs ----------------------------------------------------------------------
def params_and_flops(tables: Tables) -> pd.DataFrame:
    """Parameters and forward FLOPs (L = :data:`FLOPS_SEQ_LEN`, batch 1) of adding, naive and fixed-width concat
    per size of the ladder (one rule from width to depth, so the curves are the width's), read from
    ``analytic.csv`` (the aggregate step computes them): one row per size and encoding it holds both for."""
    frame = tables.get(analytic.TABLE)
    rows = [{"size": size, "d_model": SIZES[size]["d_model"], "encoding": encoding,
             "params": analytic.value(frame, "params_total", encoding, size),
             "flops": analytic.value(frame, "flops_forward", encoding, size, FLOPS_SEQ_LEN)}
            for size in LADDER for encoding in analytic.CONCAT_FAMILY]
    return pd.DataFrame(rows).dropna(subset=["params", "flops"])


def params_flops_missing(tables: Tables) -> str | None:
    if (why := tables.missing(analytic.TABLE, "quantity", "encoding", "size", "value")):
        return f"{why}: `python -m posbench aggregate --analytic-only --out {tables.folder}` writes it"
    return None if len(params_and_flops(tables)) else f"{analytic.TABLE}.csv has no parameters and FLOPs per size"


def draw_params_flops(figure: Figure, rect: Rect, tables: Tables) -> None:
    data = params_and_flops(tables)
    encoding_legend(figure, rect, list(analytic.CONCAT_FAMILY))
    dashes = {"sinusoidal": "-", "sinusoidal_concat": "-", "sinusoidal_concat_fixed": "--"}  # fixed lies on add
    for ax, column, label in zip(panels(figure, rect, 2, 2, wspace=0.4, top=legend_top(analytic.CONCAT_FAMILY)),
                                 ("params", "flops"),
                                 ("parameters (count)", f"FLOPs per forward pass (L={FLOPS_SEQ_LEN}, batch 1)")):
        for encoding, line in data.groupby("encoding"):
            ax.plot(line["d_model"], line[column], dashes[encoding], marker="o", ms=4, color=colour(encoding), lw=1.4)
        ax.set(xscale="log", yscale="log", xlabel="requested width d (d_model)", ylabel=label)
        ax.set_xticks(data["d_model"].unique(), [str(d) for d in data["d_model"].unique()])
        ax.minorticks_off()


# ----- latency and memory ------------------------------------------------------------------------
def memory_column(cost: pd.DataFrame) -> str:
    """Memory above the idle baseline shows the encoding's growth; the raw peak stands in without it."""
    if "memory_above_baseline_mib" in cost.columns and (cost["memory_above_baseline_mib"] > 0).any():
        return "memory_above_baseline_mib"
    return "memory_peak_mib"


def latency_missing(tables: Tables) -> str | None:
    return tables.missing("cost", "encoding", "device", "seq_len", "latency_median_ms")


def _machine_columns(cost: pd.DataFrame) -> pd.Series:
    """``device (device name), mode`` per row, and where those rows were timed at several dtypes, batches or
    thread counts, which (:data:`posbench.experiments.COST_BUDGET`): timings of different GPU models, of
    inference and training, or of different runs never share (or average into) one panel."""
    name = cost["device_name"].fillna("") if "device_name" in cost else pd.Series("", index=cost.index)
    mode = cost["mode"].fillna("infer") if "mode" in cost else pd.Series("infer", index=cost.index)
    label = cost["device"].astype(str).where(name == "", cost["device"].astype(str) + " (" + name.astype(str) + ")")
    machine = cost.assign(machine=label + ", " + mode.astype(str))
    return experiments.panels(machine, ("machine",), key=experiments.COST_BUDGET)[experiments.PANEL]


def draw_latency_memory(figure: Figure, rect: Rect, tables: Tables) -> None:
    import seaborn as sns

    cost = tables.ok("cost", "encoding", "device", "seq_len", "latency_median_ms")
    cost = cost.assign(machine_column=_machine_columns(cost))  # one column per device model and mode
    devices = sorted(cost["machine_column"].unique())
    memory = memory_column(cost)
    axes = panels(figure, rect, 2 * len(devices), len(devices), hspace=0.45, top=legend_top(cost["encoding"]))
    encoding_legend(figure, rect, list(cost["encoding"].unique()))
    memory_label = "memory above baseline (MiB)" if memory == "memory_above_baseline_mib" else "peak memory (MiB)"
    for i, device in enumerate(devices):
        on_device = cost[cost["machine_column"] == device]
        for ax, column, label in ((axes[i], "latency_median_ms", "median latency (ms)"),
                                  (axes[len(devices) + i], memory, memory_label)):
            shown = on_device[pd.to_numeric(on_device.get(column), errors="coerce") > 0]
            if shown.empty:
                ax.text(0.5, 0.5, f"no {column} > 0 on {device}", ha="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            size = shown["size"].value_counts().index[0]  # the size profiled most on this device
            shown = shown[shown["size"] == size]
            sns.lineplot(shown, x="seq_len", y=column, hue="encoding", palette=palette(),
                         marker="o", ax=ax, errorbar=None)
            _no_legend(ax)
            ax.set(xscale="log", yscale="log", xlabel="sequence length (tokens)", ylabel=label)
            fit_title(ax, f"{device}, size {size}")
            lengths = sorted(shown["seq_len"].unique())
            ax.set_xticks(lengths, [str(int(n)) for n in lengths])
            ax.minorticks_off()
            readable_log(ax.yaxis)


# ----- decoding ----------------------------------------------------------------------------------
DECODE_COLUMNS = ("encoding", "device", "mode", "seq_len", "latency_median_ms")


def decode_rows(tables: Tables) -> pd.DataFrame:
    """Ok cost rows of ``profile --mode decode``: ``seq_len`` is the context in the KV cache and the
    latency that of one generated token."""
    cost = tables.ok("cost", *DECODE_COLUMNS)
    return cost[cost["mode"] == "decode"]


def decode_missing(tables: Tables) -> str | None:
    why = tables.missing("cost", *DECODE_COLUMNS)
    if why is None and decode_rows(tables).empty:
        return "cost.csv has no ok rows with mode decode (python -m posbench profile --mode decode)"
    return why


def draw_decode(figure: Figure, rect: Rect, tables: Tables) -> None:
    import seaborn as sns

    cost = decode_rows(tables)
    cost = cost.assign(machine_column=_machine_columns(cost))  # one panel per device model
    devices = sorted(cost["machine_column"].unique())
    encoding_legend(figure, rect, list(cost["encoding"].unique()))
    for ax, device in zip(panels(figure, rect, len(devices), min(2, len(devices)), top=legend_top(cost["encoding"])),
                          devices):
        on_device = cost[cost["machine_column"] == device]
        size = on_device["size"].value_counts().index[0] if "size" in on_device else None  # the most profiled
        shown = on_device[on_device["size"] == size] if size is not None else on_device
        sns.lineplot(shown, x="seq_len", y="latency_median_ms", hue="encoding", palette=palette(), marker="o",
                     ax=ax, errorbar=None)
        _no_legend(ax)
        ax.set(xscale="log", yscale="log", xlabel="context (tokens in the KV cache)",
               ylabel="per-token latency (ms, median)")
        fit_title(ax, f"{device}, size {size}")
        lengths = sorted(shown["seq_len"].unique())
        ax.set_xticks(lengths, [str(int(n)) for n in lengths])
        ax.minorticks_off()


# ----- accuracy ----------------------------------------------------------------------------------
def accuracy_missing(tables: Tables) -> str | None:
    return tables.missing("accuracy", "task", "encoding", "value")


def _bars(ax, rows: pd.DataFrame, label_of=lambda e: e) -> None:
    """Mean over seeds as a diamond, the seed spread (sd) as an error bar, each seed as a grey dot."""
    import seaborn as sns

    order = sorted(rows["encoding"].unique(), key=list(palette()).index)
    rows = rows.assign(label=rows["encoding"].map(label_of))
    labels = [label_of(e) for e in order]
    colours = {label_of(e): colour(e) for e in order}
    sns.stripplot(rows, x="value", y="label", order=labels, color="#999999", size=2.5, ax=ax, jitter=0.12)
    sns.pointplot(rows, x="value", y="label", hue="label", order=labels, palette=colours, errorbar="sd",
                  linestyle="none", markers="D", markersize=5, capsize=0.25, err_kws={"linewidth": 1.2},
                  ax=ax, legend=False)
    ax.set(ylabel="")


def accuracy_rows(tables: Tables) -> pd.DataFrame:
    """accuracy.csv's plain cells, one experiment per bar: a panel per task and budget."""
    return tables.experiments("accuracy", "task", "encoding", "value")


def draw_accuracy(figure: Figure, rect: Rect, tables: Tables) -> None:
    accuracy = accuracy_rows(tables)
    tasks = sorted(accuracy["panel"].unique())
    for ax, task in zip(panels(figure, rect, len(tasks), 2, left=1.35, top=0.3, wspace=0.9, hspace=0.7), tasks):
        rows = accuracy[accuracy["panel"] == task]
        _bars(ax, rows)
        seeds = rows.groupby("encoding")["value"].count()
        seed_text = f"{seeds.min()}–{seeds.max()} seeds" if seeds.min() != seeds.max() else f"{seeds.min()} seeds"
        ax.set(xlabel=metric_label(rows))
        fit_title(ax, f"{task} ({seed_text}; {direction(rows)})")


# ----- extrapolation -----------------------------------------------------------------------------
def _curves(tables: Tables) -> pd.DataFrame:
    rows = tables.experiments("extrapolation", "task", "encoding", "length_ratio", "value")
    spans = rows.groupby("panel")["length_ratio"].nunique()
    return rows[rows["panel"].isin(spans[spans > 1].index)]


def extrapolation_missing(tables: Tables) -> str | None:
    why = tables.missing("extrapolation", "task", "encoding", "length_ratio", "value")
    if why is None and _curves(tables).empty:
        return "extrapolation.csv has no task evaluated at more than one length"
    return why


def task_curves(figure: Figure, rect: Rect, rows: pd.DataFrame, x: str, y: str, **style):
    """The shared encoding legend, then one panel per task (two columns) with a line per encoding (mean,
    ±1 sd band over seeds) of ``y`` against ``x``; yields ``(ax, task, that task's rows)`` for the labels."""
    import seaborn as sns

    tasks = sorted(rows["panel"].unique())  # a task per budget (posbench.experiments)
    encoding_legend(figure, rect, list(rows["encoding"].unique()))
    for ax, task in zip(panels(figure, rect, len(tasks), 2, hspace=0.75, wspace=0.3,
                               top=legend_top(rows["encoding"])), tasks):
        cell = rows[rows["panel"] == task]
        sns.lineplot(cell, x=x, y=y, hue="encoding", palette=palette(rows["encoding"].unique()), errorbar="sd",
                     ax=ax, **style)
        _no_legend(ax)
        yield ax, task, cell


def draw_extrapolation(figure: Figure, rect: Rect, tables: Tables) -> None:
    for ax, task, cell in task_curves(figure, rect, _curves(tables), "length_ratio", "value", marker="o",
                                      markersize=4):
        ax.set(xscale="log", xlabel="evaluation length / training length (×)", ylabel=metric_label(cell))
        fit_title(ax, f"{task} ({direction(cell)})")
        ax.minorticks_off()
        ratios = apart(sorted(cell["length_ratio"].unique()), ax.get_xlim())  # 1.25 and 1.5 would overprint
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.axvline(1.0, color="#888888", lw=0.6, ls=":")
        draw_sliding(ax, cell)
        mark_untrained_positions(ax, cell)


def draw_sliding(ax, cell: pd.DataFrame) -> None:
    """A dashed line per encoding (mean over seeds) of the metric on sliding windows, where the task
    has them (the character LMs): the headline's characters again, each with at least three quarters
    of a window before it."""
    import seaborn as sns

    if "value_sliding" not in cell.columns:
        return
    rows = cell.dropna(subset=["value_sliding"])
    if rows.empty:
        return
    sns.lineplot(rows, x="length_ratio", y="value_sliding", hue="encoding", palette=palette(rows["encoding"].unique()),
                 errorbar=None, ls="--", lw=0.9, ax=ax)
    _no_legend(ax)


def mark_untrained_positions(ax, cell: pd.DataFrame) -> None:
    """A cross over each mean read through rows of a position table that training never reached (a
    learned table past its training length): those points are "no position", not the encoding."""
    if "positions_trained" not in cell.columns:
        return
    untrained = cell[cell["positions_trained"].astype(str).str.lower() == "false"]
    means = untrained.groupby(["encoding", "length_ratio"])["value"].mean().reset_index()
    ax.scatter(means["length_ratio"], means["value"], marker="x", s=30, color="#222222", zorder=5, lw=1)


# ----- loss by position ----------------------------------------------------------------------------
MIN_POSITION_RUNS = 8  # a task whose longest windows score fewer runs of positions (an answer at the end) is left out


def position_curves(tables: Tables) -> pd.DataFrame:
    """Loss-by-position rows at each task's longest evaluation length, for tasks scored along the whole
    window; ``x`` the middle of each run of positions, ``bits`` the loss in bits (nats / ln 2)."""
    rows = tables.experiments("positions", "task", "encoding", "eval_len", "start", "stop", "loss")
    longest = rows[rows["eval_len"] == rows.groupby("panel")["eval_len"].transform("max")]
    runs = longest.groupby("panel")["start"].nunique()
    rows = longest[longest["panel"].isin(runs[runs >= MIN_POSITION_RUNS].index)]
    return rows.assign(x=(rows["start"] + rows["stop"]) / 2, bits=rows["loss"] / np.log(2))


def positions_missing(tables: Tables) -> str | None:
    why = tables.missing("positions", "task", "encoding", "eval_len", "start", "stop", "loss")
    if why is None and position_curves(tables).empty:
        return f"positions.csv has no task scored along {MIN_POSITION_RUNS} or more runs of positions"
    return why


def draw_positions(figure: Figure, rect: Rect, tables: Tables) -> None:
    for ax, task, cell in task_curves(figure, rect, position_curves(tables), "x", "bits", lw=1):
        ax.set(xlabel="position in the window", ylabel="bits per scored target")
        fit_title(ax, f"{task} at {cell['eval_len'].iloc[0]:g} (lower is better)")
        ax.axvline(cell["train_len"].iloc[0], color="#888888", lw=0.6, ls=":")


# ----- the sweeps: training length (row 2) and width (row 3) ---------------------------------------
def swept_rows(tables: Tables, axis: str) -> pd.DataFrame:
    """Accuracy rows (the metric at the training length) of the tasks trained at more than one value of
    ``axis`` (``train_len`` or ``d_model``), the other axis at its default, at the size with most such rows;
    a panel per task and budget (steps, batch, dtype: :mod:`posbench.experiments`), so a line joins one
    budget's widths or lengths only, each point at one learning rate."""
    rows = tables.ok("accuracy", "task", "encoding", "size", "value", "train_len", "d_model", "params_total",
                     swept=True)
    other = "d_model" if axis == "train_len" else "train_len"
    rows = experiments.one_experiment(at_defaults(rows, (other,)), ("task",), axis)
    spans = rows.groupby(["panel", "size"])[axis].nunique()
    swept = spans[spans > 1].reset_index()
    if swept.empty:
        return rows.iloc[:0]
    size = swept["size"].value_counts().index[0]
    return rows[(rows["size"] == size) & rows["panel"].isin(swept.loc[swept["size"] == size, "panel"])]


def sweep_missing(axis: str, what: str) -> Callable[[Tables], str | None]:
    def missing(tables: Tables) -> str | None:
        why = tables.missing("accuracy", "task", "encoding", "value", "train_len", "d_model", "params_total")
        if why is None and swept_rows(tables, axis).empty:
            return f"accuracy.csv has no task trained at more than one {what} (train.sweeps in workflow/full.yaml)"
        return why

    return missing


def draw_frontier(figure: Figure, rect: Rect, tables: Tables) -> None:
    rows = swept_rows(tables, "d_model")
    for ax, task, cell in task_curves(figure, rect, rows, "params_total", "value", marker="o", markersize=4):
        ax.set(xscale="log", xlabel="parameters (total); each point labelled with its width d",
               ylabel=metric_label(cell))
        ax.margins(x=0.12)  # room for the width labels beside the outermost points
        fit_title(ax, f"{task} ({direction(cell)})")
        for (encoding, width), point in cell.groupby(["encoding", "d_model"]):
            ax.annotate(f"d {int(width)}", (point["params_total"].mean(), point["value"].mean()), fontsize=6,
                        color=colour(encoding), xytext=(3, 3), textcoords="offset points")
        ax.minorticks_off()
        ticks = apart(sorted(cell.groupby(["encoding", "d_model"])["params_total"].mean()), ax.get_xlim())
        ax.set_xticks(ticks, thousands(ticks), fontsize=6.5)


TICK_ROOM = 0.1  # the least share of a log axis between two labelled ticks: closer ones would print over each other


def apart(ticks: list[float], limits: tuple[float, float]) -> list[float]:
    """``ticks`` (ascending, positive) without those closer than :data:`TICK_ROOM` of the log axis from
    ``limits[0]`` to ``limits[1]`` to the last one kept: as many labels as the axis has room for, however
    narrow the range it spans."""
    span = np.log(limits[1] / limits[0])
    kept = []
    for tick in ticks:
        if not kept or np.log(tick / kept[-1]) >= TICK_ROOM * span:
            kept.append(tick)
    return kept


def thousands(ticks: list[float]) -> list[str]:
    """Counts in thousands (``109k``), with the fewest decimals (up to two) that tell every two apart."""
    for decimals in range(3):
        labels = [f"{t / 1000:.{decimals}f}k" for t in ticks]
        if len(set(labels)) == len(labels):
            break
    return labels


def draw_training_length(figure: Figure, rect: Rect, tables: Tables) -> None:
    rows = swept_rows(tables, "train_len")
    for ax, task, cell in task_curves(figure, rect, rows, "train_len", "value", marker="o", markersize=4):
        lengths = sorted(cell["train_len"].unique())
        ax.set(xscale="log", xlabel="training length (= evaluation length)", ylabel=metric_label(cell))
        ax.margins(x=0.08)  # the outermost points clear of the frame
        fit_title(ax, f"{task} ({direction(cell)})")
        ax.set_xticks(lengths, [f"{n:g}" for n in lengths])
        ax.minorticks_off()


# ----- grids and multimodal: the tasks with a layout ----------------------------------------------
HOW_POSITION_ENTERS = {"none": "—", "qk": "rotate q/k", "logits": "logit bias",
                       "contextual": "from content"}  # input: its combine
DIMENSIONS = {"2d": "2-D", "multimodal": "per modality"}  # pe_axes -> how the label names it; else 1-D
LAYOUT_TASKS = ("digits_2d", "mosaic_qa")  # image patches on a grid; the mosaic adds a question after them


def grid_labels(rows: pd.DataFrame) -> dict[str, str]:
    """How each encoding sees a task's layout — none, 1-D (the flat sequence), 2-D (the grid) or per
    modality (grid and text each their own) — and where positions enter, from the trait columns."""
    traits = rows.groupby("encoding")[["pe_hook", "pe_combine", "pe_axes"]].first()
    labels = {}
    for encoding, (hook, combine, axes) in traits.iterrows():
        dims = "none" if hook == "none" else DIMENSIONS.get(axes, "1-D")
        how = HOW_POSITION_ENTERS.get(hook, combine.replace("_fixed", " (fixed width)"))
        labels[encoding] = f"{encoding} ({dims}, {how})"
    return labels


def layout_rows(tables: Tables) -> pd.DataFrame:
    accuracy = accuracy_rows(tables)
    return accuracy[accuracy["task"].isin(LAYOUT_TASKS)]


def layout_missing(tables: Tables) -> str | None:
    why = accuracy_missing(tables) or tables.missing("accuracy", "pe_hook", "pe_combine", "pe_axes")
    if why is None and layout_rows(tables).empty:
        return f"accuracy.csv has no ok rows of {' or '.join(LAYOUT_TASKS)}"
    return why


LAYOUT_TITLES = {
    "digits_2d": f"digits_2d: 8×8 images as {(8 // PATCH) ** 2} patches of {PATCH}×{PATCH} pixels",
    "mosaic_qa": "mosaic_qa: 4 digits as 16 patches, then a 6-word question",
}


def draw_layout(figure: Figure, rect: Rect, tables: Tables) -> None:
    rows = layout_rows(tables)
    present = [(task, panel) for task in LAYOUT_TASKS for panel in sorted(set(rows.loc[rows["task"] == task, "panel"]))]
    for ax, (task, panel) in zip(panels(figure, rect, len(present), 1, left=2.6, top=0.25, hspace=0.75), present):
        cell = rows[rows["panel"] == panel]
        budget = panel[len(task):]  # " · 2,000 steps" where the task ran at several budgets
        _bars(ax, cell, grid_labels(cell).get)
        ax.set(xlabel=metric_label(cell))
        fit_title(ax, f"{LAYOUT_TITLES[task]}{budget} ({direction(cell)})")


# ----- passkey: depth × length ---------------------------------------------------------------------
def passkey_cells(tables: Tables) -> pd.DataFrame:
    """Exact-match rate per (panel, evaluation length, key depth) of the passkey task, pooled over
    seeds, from the per-item results (an item's depth is fixed by its index: ``Passkey.eval_depth``); a
    panel per encoding and budget (:mod:`posbench.experiments`)."""
    from posbench.tasks.passkey import Passkey

    items = tables.items
    if items is None or "task" not in items.columns:
        return pd.DataFrame(columns=["panel", "encoding", "eval_len", "depth", "exact"])
    rows = experiments.one_experiment(plain(items[items["task"] == "passkey"]), ("encoding",))
    rows = rows.assign(depth=rows["item"].map(Passkey.eval_depth), exact=rows["exact"].astype(float))
    return rows.groupby(["panel", "encoding", "eval_len", "depth"], as_index=False)["exact"].mean()


def passkey_missing(tables: Tables) -> str | None:
    if tables.items is None:
        return "items.parquet (per-item results) is missing"
    if passkey_cells(tables).empty:
        return "no passkey items in items.parquet (the full preset, workflow/full.yaml, trains passkey)"
    return None


PASSKEY_COLUMNS = 4
HEAT_LABELS = 4  # a heat map with more lengths than this labels every other one


def draw_passkey(figure: Figure, rect: Rect, tables: Tables) -> None:
    cells = passkey_cells(tables)
    encodings = sorted(cells["panel"].unique())  # an encoding per budget
    rect = (rect[0], rect[1], rect[2] - 0.9 / figure.get_size_inches()[0], rect[3])  # room for the colour bar
    axes = panels(figure, rect, len(encodings), PASSKEY_COLUMNS, left=0.55, bottom=0.55, top=0.3, hspace=0.7,
                  wspace=0.25)
    for index, (ax, encoding) in enumerate(zip(axes, encodings)):
        grid = cells[cells["panel"] == encoding].pivot(index="depth", columns="eval_len", values="exact")
        image = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        step = 1 if len(grid.columns) <= HEAT_LABELS else 2  # every other length labelled: none overlap
        ax.set_xticks(range(len(grid.columns)), [short_count(n) if i % step == 0 else ""
                                                 for i, n in enumerate(grid.columns)], fontsize=6.5)
        first = index % PASSKEY_COLUMNS == 0  # the depth axis is labelled once a row of panels
        ax.set_yticks(range(0, len(grid.index), 5), [f"{d:.1f}" for d in grid.index[::5]] if first else [],
                      fontsize=6.5)
        ax.grid(False)
        ax.set_title(encoding, fontsize=7)
        ax.set(xlabel="evaluation length", ylabel="key depth" if index % PASSKEY_COLUMNS == 0 else "")
    bar = figure.colorbar(image, ax=axes, fraction=0.04, pad=0.03)
    bar.set_label("exact match (share of keys)", fontsize=7)
    bar.ax.tick_params(labelsize=6.5)


def short_count(n: float) -> str:
    """``2048`` as ``2k``, ``512`` as ``512``: a tick label that fits a narrow heat-map column."""
    return f"{n / 1024:g}k" if n >= 1024 and n % 1024 == 0 else f"{n:g}"


# ----- cost against accuracy ---------------------------------------------------------------------
def cost_accuracy_missing(tables: Tables) -> str | None:
    return tables.missing("accuracy", "task", "encoding", "value", "wall_time_s")


def cost_accuracy_points(tables: Tables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows (one experiment per point: a panel per task and budget) and each point's means and sds."""
    rows = tables.experiments("accuracy", "task", "encoding", "value", "wall_time_s")
    summary = rows.groupby(["panel", "encoding"]).agg(time=("wall_time_s", "mean"), time_sd=("wall_time_s", "std"),
                                                      mean=("value", "mean"), sd=("value", "std")).reset_index()
    return rows, summary


def draw_cost_accuracy(figure: Figure, rect: Rect, tables: Tables) -> None:
    rows, summary = cost_accuracy_points(tables)
    tasks = sorted(summary["panel"].unique())
    encoding_legend(figure, rect, list(summary["encoding"].unique()))
    for ax, task in zip(panels(figure, rect, len(tasks), 2, hspace=0.8, wspace=0.3,
                               top=legend_top(summary["encoding"])), tasks):
        ax.xaxis.set_major_locator(MaxNLocator(5))
        cell = summary[summary["panel"] == task]
        for _, point in cell.iterrows():
            ax.errorbar(point["time"], point["mean"], xerr=np.nan_to_num(point["time_sd"]),
                        yerr=np.nan_to_num(point["sd"]), fmt="o", color=colour(point["encoding"]), ms=4,
                        capsize=2, lw=0.8)
        ax.set(xlabel="training wall time per run (s)", ylabel=metric_label(rows[rows["panel"] == task]))
        fit_title(ax, f"{task} ({direction(rows[rows['panel'] == task])})")


# ----- the verdicts' forest plot ----------------------------------------------------------------
FAVOURS = {BETTER: (FAVOURS_OTHER, "another scheme (comparator better by more than δ)"),
           NOT_BETTER: (FAVOURS_ADDING, "adding (comparator not better by δ)")}  # else: neither


def compared_rows(tables: Tables) -> pd.DataFrame:
    """The judge step's deciding comparisons (``verdicts.csv``) that have an effect."""
    frame = tables.get("verdicts")
    return frame[frame["decides"].astype(bool)].dropna(subset=["effect"]) if not frame.empty else frame


def forest_missing(tables: Tables) -> str | None:
    return None if not compared_rows(tables).empty else "no declared comparison has two arms with results"


def draw_forest(figure: Figure, rect: Rect, tables: Tables) -> None:
    """Each comparison's effect and 95 % interval in units of its margin δ: the band is ±δ; right of +δ
    the comparator is better by more than δ, left of it not better by δ."""
    data = compared_rows(tables).iloc[::-1].reset_index(drop=True)  # first comparison on top
    (ax,) = panels(figure, rect, 1, 1, left=3.3, bottom=0.7, top=0.15)
    scaled = data[["effect", "ci_low", "ci_high"]].div(data["margin"], axis=0)
    ax.axvspan(-1, 1, color="#eeeeee", zorder=0)
    for x in (0, 1):
        ax.axvline(x, color="#555555" if x else "#999999", lw=0.8, ls="-" if x else ":")
    for y, row in scaled.iterrows():
        shade = FAVOURS.get(data.loc[y, "outcome"], (FAVOURS_NEITHER,))[0]
        ax.errorbar(row["effect"], y, xerr=[[row["effect"] - row["ci_low"]], [row["ci_high"] - row["effect"]]],
                    fmt="o", ms=4.5, capsize=2, lw=1.6, color=shade, mec="#333333", mew=0.4)
    sizes = data["size"].nunique() > 1
    labels = [f"{r.row} · {_arms_label(r)} · {r.task} {r.length_ratio:g}×" + (f" ({r.size})" if sizes else "")
              for r in data.itertuples()]
    ax.set_yticks(range(len(data)), labels, fontsize=6.5)
    ax.set_ylim(-0.7, len(data) - 0.3)
    ax.set_xlabel("effect / δ (positive: comparator better; band: ±δ; Welch interval at the look's level)", fontsize=7)
    handles = [Patch(color=FAVOURS.get(o, (FAVOURS_NEITHER, f"neither ({o})"))[0],
                     label="favours " + FAVOURS.get(o, (FAVOURS_NEITHER, f"neither ({o})"))[1])
               for o in dict.fromkeys(data["outcome"])]
    figure.legend(handles=handles, fontsize=6.5, loc="lower center", ncol=len(handles), frameon=False,
                  bbox_to_anchor=((rect[0] + rect[2]) / 2, rect[1]))  # below the axis label: never over a point


def _arms_label(row) -> str:
    """``comparator vs added`` of a verdicts.csv row, with the widths and training length its comparison
    declares (so prose-rope and prose-rope-L128 read apart)."""
    from posbench import comparisons

    declared = comparisons.load().by_id.get(row.comparison)
    if declared is None:
        return f"{row.comparator_arm} vs {row.add_arm}"
    added, comparator = declared.labels
    return f"{comparator} vs {added}{declared.trained}"


FOREST = FigureSpec("verdicts_forest", "How large is each deciding effect, in units of its margin δ?",
                    "From verdicts.csv: each declared comparison's effect (comparator minus added encoding, signed so "
                    "that positive means the comparator is better) and Welch interval over seeds at its look's level "
                    "(two-sided 1 − 2·alpha_look, Pocock's split of α between two looks; page 1 prints the level), "
                    "divided by its margin δ (the grey band is ±δ); colour = the side of the guidance the outcome "
                    "favours after Holm within the row (blue: adding, orange: another scheme, grey: neither), as on "
                    "page 1.",
                    "Verdicts", 3.0, forest_missing, draw_forest)

def trajectory_rows(tables: Tables) -> pd.DataFrame:
    """trajectory.csv's rows of the deciding comparisons (one per comparison, size and checkpoint budget)."""
    found = tables.ok("trajectory", "comparison", "budget", "effect", "ci_low", "ci_high", "margin", swept=True)
    return found[found["decides_row"].astype(bool)] if "decides_row" in found.columns else found


def trajectory_missing(tables: Tables) -> str | None:
    return None if not trajectory_rows(tables).empty else "no deciding comparison has annealed checkpoints"


def draw_trajectory(figure: Figure, rect: Rect, tables: Tables) -> None:
    """Per deciding comparison, its effect and interval at each annealed checkpoint against the budget."""
    data = trajectory_rows(tables)
    cells = list(data.groupby(["comparison", "size"], sort=False))
    axes = panels(figure, rect, len(cells), min(3, len(cells)), left=0.55, bottom=0.45, top=0.3, hspace=1.0)
    for ax, ((comparison, size), cell) in zip(axes, cells):
        margin = cell["margin"].iloc[0]
        ax.axhspan(-margin, margin, color="#eeeeee", zorder=0)
        ax.axhline(0, color="#999999", lw=0.8, ls=":")
        ax.errorbar(cell["budget"], cell["effect"], yerr=[cell["effect"] - cell["ci_low"],
                                                          cell["ci_high"] - cell["effect"]],
                    fmt="o-", ms=3.5, capsize=2, lw=1.1, color="#1f4e79")
        ax.set_xscale("log")
        ax.set_xticks(cell["budget"], [f"{b:g}" for b in cell["budget"]], fontsize=6)
        ax.minorticks_off()
        ax.tick_params(labelsize=6)
        sizes = "" if data["size"].nunique() == 1 else f" ({size})"
        ax.set_title(f"{comparison}{sizes}: {cell['metric'].iloc[0]}", fontsize=7)
        ax.set_xlabel("training steps (annealed checkpoint)", fontsize=6)


TRAJECTORY = FigureSpec("verdicts_trajectory", "Does each deciding effect hold as training goes on?",
                        "From trajectory.csv: a deciding comparison's effect (comparator minus added, positive: the "
                        "comparator is better) and its Welch interval over the verdict's seeds at each annealed "
                        "checkpoint (warmup-stable-decay, a decay branch per budget), log axis; the grey band is "
                        "±δ. The verdict is made at the last budget; the trend (verdicts.csv) compares the last "
                        "two.", "Verdicts", 2.6, trajectory_missing, draw_trajectory)

FIGURES = (
    FigureSpec("params_flops", "What does concatenation cost in parameters and FLOPs, against adding?",
               "From analytic.csv, which the aggregate step computes with posbench's model on the meta device and "
               f"posbench.flops.analytic_flops (L = {FLOPS_SEQ_LEN}, batch 1) at every size of the ladder "
               "(posbench.sizes.LADDER: depth d/32, at least 2, 4 heads); "
               "naive concat [E;P] runs the whole network at width 2d, fixed-width concat [E_(d-p);P_p] stays at d "
               "(dashed: it lies on the adding line). Log-log axes.", "Cost", 3.2,
               params_flops_missing, draw_params_flops),
    FigureSpec("latency_memory", "How do latency and memory grow with sequence length?",
               "From cost.csv: median latency (ms) and memory above the idle baseline (MiB; the raw peak where no "
               "baseline was recorded) per encoding, one column per device (and its model name) and mode, for the "
               "size profiled most on that device (other sizes: see cost.csv). Log-log axes: the slope shows how "
               "each encoding's cost grows with length.",
               "Cost", 5.4, latency_missing, draw_latency_memory),
    FigureSpec("accuracy", "How well does each encoding do at the training length?",
               "From accuracy.csv: diamond = mean over seeds, error bar = seed standard deviation, grey dots = seeds; "
               "each panel's title says whether higher or lower is better. A task trained at several budgets has a "
               "panel per budget, its title naming the steps (or what else differs): no mean pools two budgets.",
               "Accuracy", 8.2, accuracy_missing, draw_accuracy),
    FigureSpec("extrapolation", "What happens beyond the training length?",
               "From extrapolation.csv: metric against evaluation length / training length (log axis), "
               "mean over seeds with a ±1 sd band; the dotted line marks the training length; a cross marks a "
               "learned table read past the rows training reached (untrained positions). Character LMs: solid = "
               "non-overlapping windows of length m (the headline), dashed = the same characters scored with "
               "sliding windows of m at stride m/4, each window scoring its last m/4 characters, so every scored "
               "character (but the first window's) sees at least 3m/4 characters of context: the gap is context.",
               "Accuracy", 6.5, extrapolation_missing, draw_extrapolation),
    FigureSpec("loss_by_position", "Where in a long window does the loss rise?",
               "From positions.csv: the loss in bits per scored target (bits per character for the language "
               "models) over 16 equal runs of positions of the longest evaluation windows (the non-overlapping "
               "windows every headline uses), mean over seeds with a ±1 sd band; the dotted line marks the "
               "training length. Falling past it: the model uses the longer context; flat: it survives it; "
               "rising: it breaks. Every arm reads the same windows, so ups and downs that all arms share are the "
               "text's own; read the gaps between arms.", "Accuracy", 4.4, positions_missing, draw_positions),
    FigureSpec("training_length", "Does the training length change the ranking?",
               "From accuracy.csv (cells at several training lengths: train.sweeps, or a comparison's train_length): "
               "each task trained and evaluated at one fixed "
               "length per point (log axis), mean over seeds with a ±1 sd band, at the size's width. Descriptive; "
               "the fixed-length row is decided by its declared comparisons.", "Accuracy", 3.4,
               sweep_missing("train_len", "training length"), draw_training_length),
    FigureSpec("parameter_frontier", "What does each parameter buy?",
               "From accuracy.csv (cells at several widths: train.sweeps, or a comparison's d_model): each encoding at "
               "every model width d (the number "
               "by each point; naive concat runs its network at 2d, so its point at d sits near adding's at 2d), "
               "metric against total parameters of the trained model (log axis), mean over seeds with a ±1 sd "
               "band, at the task's training length. Descriptive; the parameter-budget row is decided by its "
               "declared comparisons at matched parameter counts.", "Accuracy", 3.4,
               sweep_missing("d_model", "width"), draw_frontier),
    FigureSpec("layouts", "Do grids and vision + language need 2-D or per-modality positions?",
               "From accuracy.csv: one panel per task with a layout (its title says how images and words are laid "
               "out as one sequence of patches and words), each arm labelled by how it sees the layout (1-D: the flat "
               "sequence, 2-D: the grid, per modality: grid and text each their own) and where positions enter; "
               "diamond = mean over seeds, error bar = seed sd, grey dots = seeds.",
               "Accuracy", 4.4, layout_missing, draw_layout),
    FigureSpec("passkey", "Where does passkey retrieval fail, by key depth and length?",
               "From the passkey runs' per-item results: the share of keys retrieved whole (exact match), pooled "
               "over seeds, per key depth (0: the key opens the sequence, 1: it ends just before the question) and "
               "evaluation length; the colour bar reads 0 (dark) to 1 (yellow). Descriptive: the declared "
               "comparisons pool depths.",
               "Accuracy", 3.4, passkey_missing, draw_passkey),
    FigureSpec("cost_accuracy", "What does accuracy cost in training time?",
               "From accuracy.csv: training wall time of a run (s) against its metric, mean ± seed sd on both "
               "axes. Wall time depends on the machine's load; parameter counts are in the accuracy table.",
               "Cost", 5.6, cost_accuracy_missing, draw_cost_accuracy),
    FigureSpec("decode_latency", "How does per-token generation latency grow with the context?",
               "From cost.csv (mode decode): the median latency (ms) of one generated token against a KV cache "
               "of that many tokens, per encoding, one panel per device (and its model name), for the size "
               "profiled most on it (other sizes: see cost.csv). Log-log axes: the slope shows how each "
               "encoding's per-token cost grows with the context it attends to.",
               "Cost", 3.2, decode_missing, draw_decode),
)
# What `snakemake --report` lists, each from report.smk with its caption.
REPORT_FIGURES = (FOREST, TRAJECTORY, *FIGURES)


def save_standalone(spec: FigureSpec, tables: Tables, folder: Path) -> None:
    """One figure alone for ``snakemake --report``: ``<name>.png`` (a missing-data figure says what is
    missing) and its caption ``<name>.rst``, the title and caption the PDF prints."""
    from posbench import records
    from posbench.report.layout import CONTENT_W

    figure = Figure(figsize=(CONTENT_W, spec.height))
    if (why := spec.missing(tables)) is not None:
        figure.set_size_inches(CONTENT_W, 1.0)
        figure.text(0.5, 0.5, f"{spec.title}: not shown ({why})", ha="center", va="center", fontsize=8)
    else:
        spec.draw(figure, (0.0, 0.0, 1.0, 1.0), tables)
    records.write_atomically(folder / f"{spec.name}.png", lambda file: figure.savefig(file, format="png", dpi=150))
    records.write_atomically(folder / f"{spec.name}.rst", lambda file: file.write(caption_rst(spec).encode()))


def caption_rst(spec: FigureSpec) -> str:
    """The title (bold) and caption as reStructuredText, its markup characters escaped: plain text."""
    return f"**{_rst_text(spec.title)}**\n\n{_rst_text(spec.caption)}\n"


def _rst_text(text: str) -> str:
    return re.sub(r"([\\`*_|])", r"\\\1", text)
