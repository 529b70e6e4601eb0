"""The PDF, section by section: the verdicts (page 1: the summary table, the forest plot, each row's
details), the claims check, the advice page (:mod:`.advice`), the published shapes (:mod:`.shapes`), the
projected cost (:mod:`.projection`), the figures (:mod:`.figures`), the appendix (method, environment,
config, cells that did not finish)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import yaml
from matplotlib.backends.backend_pdf import PdfPages

from posbench import guidance
from posbench.report import advice, figures, projection, shapes, verdicts
from posbench.report.layout import BODY, H1, H2, MONO, QUOTE, RULE, SMALL, VERDICT_COLOURS, Document, Style
from posbench.tables import Tables

METHOD = (
    "Latency: the model in eval and inference mode, warm-up calls, then at least min_repeats timed calls and at "
    "least min_seconds; CUDA timed with events and a synchronize per call, CPU with perf_counter around a "
    "synchronize; raw samples kept, median / p90 / mean / sd / CV reported; threads and the attention kernel "
    "that ran are recorded.",
    "Memory: a pass of its own, before the latency pass. CPU: the kernel's resident high-water mark (VmHWM), "
    "reset at the start of the measured work, cross-checked by sampling /proc/self/statm every millisecond. "
    "CUDA: the torch allocator's peaks after a reset, and NVML's per-process figure on the device matched by "
    "UUID. An out-of-memory (even a kill by the kernel) becomes status oom. Units: MiB (2^20 bytes).",
    "FLOPs: an analytic count (2 per multiply-add of every matmul, 1 per element of the encoding's own adds and "
    "the residual adds) is the headline; fvcore and torch.utils.flop_counter are given handles so all three "
    "follow one convention, and are reported beside it in cost.csv. Above 256 tokens the counters run at four "
    "short lengths only: every count is a quadratic in L, so the quadratic through three of them, checked at "
    "the fourth, gives the full-length count exactly without a full-size pass.",
    "Accuracy: every (task, encoding) trained with fixed seeds (a seed fixes the initial weights and the training "
    "data order). A verdict rests on declared comparisons (posbench/comparisons.yaml): a 95 % Welch interval on "
    "the per-seed means, one-sided tests against the margin delta, Holm within a row, >= 10 seeds per arm; an arm "
    "that does not beat its task's chance level, or diverged, is 'did not learn' and is not compared; "
    "eval_se in verdicts.csv is the evaluation set's own sampling error (items bootstrapped).",
)
ENVIRONMENT_KEYS = ("machine", "platform", "cpu", "cpu_count", "gpu", "cuda", "torch_threads", "python", "git_commit")


def verdict_cell(verdict: str, rule: str, size: float = 9) -> list:
    """One coloured label per verdict ("cited: not supported; ours: supported" gives two), then the rule."""
    labels = [(part, Style(size=size, weight="bold", badge=VERDICT_COLOURS.get(part.split(": ")[-1], "#dddddd")))
              for part in verdict.split("; ")]
    return [*labels, (rule, RULE)] if rule else labels


def verdict_page(doc: Document, tables: Tables, config: dict | None, chinese: bool) -> None:
    """Page 1: the summary table (a row, its verdict, what decided it), the forest plot, then each row's details."""
    doc.new_page()
    doc.paragraph("posbench: is adding position to the embedding enough?", H1)
    doc.paragraph(run_summary(tables), SMALL)
    section = "section 九" if chinese else "section 9"
    verdicts_table = tables.get("verdicts")
    hashes = verdicts_table["declaration_sha256"].dropna() if "declaration_sha256" in verdicts_table else []
    declared = hashes.iloc[0][:12] if len(hashes) else "—"  # no comparison has results (e.g. the smoke preset)
    preset = run_preset(tables, config) or "not named in the config"
    doc.paragraph(f"The article's engineering guidance ({section}), row by row, judged by the comparisons declared "
                  f"in posbench/comparisons.yaml (SHA-256 {declared}) on this run's tables (preset: {preset}); the "
                  "judge step wrote verdicts.csv. Effect: the comparator minus the added encoding, positive when the "
                  "comparator is better; [low, high] is the Welch interval over seeds at the look's level (each "
                  "comparison's own seeds, a second look only where the first was unclear; comparisons.yaml splits "
                  "α between looks); seeds: added/comparator and the look; budget: the steps of the annealed model "
                  "judged, and the trend of the effect over the last two checkpoints.",
                  BODY)
    if "verdicts" not in tables.frames:
        doc.paragraph(f"verdicts.csv is not in {tables.folder}: run `python -m posbench judge --tables "
                      f"{tables.folder}` (the workflow's judge rule) first.", BODY)
    header = ["Guidance row", "Verdict", "Decided by", "Effect [CI] vs δ", "Seeds", "Budget, trend", "Scope"]
    summary = []
    for row in guidance.ROWS:  # a line per deciding comparison; the row and its verdict on the first
        lines = verdicts.of_row(verdicts_table, row)
        label = ([(row.quote, Style(size=8))] if chinese else []) + [(row.english, Style(size=7.5, weight="bold"))]
        heads = [label, verdict_cell(verdicts.row_verdict(lines), "", size=7.5)]
        shown = lines if not lines.empty else verdicts.withdrawn(verdicts.of_row(verdicts_table, row, decides=False))
        for decided in verdicts.summary(shown) or [("—",) * 5]:
            summary.append([*heads, *[[(part, SMALL)] for part in decided]])
            heads = [[], []]
    doc.table(summary, [0.16, 0.15, 0.2, 0.16, 0.07, 0.13, 0.13], header=header)
    scopes = verdicts_table["scope"].dropna().unique() if "scope" in verdicts_table else []
    if len(scopes):
        doc.paragraph("Not covered: " + "; ".join(dict.fromkeys(str(s).split(" on this task;")[0] for s in scopes))
                      + ". Larger models and longer training are not covered (workflow/cluster.yaml runs them).",
                      SMALL)
    for spec in (figures.FOREST, figures.TRAJECTORY):
        if spec.missing(tables) is None:
            doc.heading(spec.title, H2, keep=spec.height + 0.4)
            doc.figure_block(lambda fig, rect, spec=spec: spec.draw(fig, rect, tables), spec.height, spec.caption)
    for side, english in guidance.SIDES.items():
        doc.heading(f"{side}  {english}" if chinese else english, H2)
        rows = []
        for row in (r for r in guidance.ROWS if r.side == side):
            lines = verdicts.of_row(verdicts_table, row)
            claim = ([(row.quote, QUOTE)] if chinese else []) + [(row.english, Style(size=9, weight="bold"))]
            details = verdicts.evidence_lines(lines, verdicts.of_row(verdicts_table, row, decides=False))
            rule = lines["row_rule"].iloc[0] if not lines.empty else ""
            rows.append([claim + [(line, SMALL) for line in details], verdict_cell(verdicts.row_verdict(lines), rule)])
        doc.table(rows, [0.67, 0.33])
    axis_section(doc, tables)
    ledger_section(doc, tables)


def ledger_section(doc: Document, tables: Tables) -> None:
    """Each row's verdict in the previous run the config names beside this run's, and what changed (``ledger.csv``)."""
    found = tables.get("ledger")
    if found.empty:
        return
    doc.heading("Ledger: each verdict then and now", H2, keep=1.0)
    doc.paragraph("ledger.csv: the previous run's (config key previous_reference) deciding comparisons and verdict "
                  "per guidance row beside this run's, and what changed between them.", SMALL)
    rows = [[[(str(r.row), SMALL)],
             [(f"{r.previous_verdict}", SMALL), (f"{r.previous_decided_by}: {r.previous_effect}", SMALL)],
             [(f"{r.verdict}", SMALL), (f"{r.decided_by}: {r.effect}", SMALL)], [(str(r.changed), SMALL)]]
            for r in found.fillna("").itertuples(index=False)]
    doc.table(rows, [0.14, 0.3, 0.3, 0.26], header=["Row", "Then", "Now", "What changed"])


def axis_section(doc: Document, tables: Tables) -> None:
    """The judge step's axis check of every declared arm that reads more than one axis (``axes.csv``)."""
    doc.heading("Can each arm see its task's axes?", H2, keep=1.0)
    doc.paragraph("axes.csv: a key moved one step along each axis the arm's initialised model reads changes the "
                  "first layer's logits by this share of what one step changes under 1-D RoPE on the same task "
                  "and width (seed 0); below 1 % an arm is blind there and the judge step refuses a comparison "
                  "that declares it.", SMALL)
    found = tables.get("axes")
    if found.empty:
        doc.paragraph("No declared multi-axis arm has results in these tables" + (
            "" if "axes" in tables.frames else f" (axes.csv is not in {tables.folder})") + ".", BODY)
        return
    rows = [[[(f"{task} · {encoding} ({size})", SMALL)],
             [(", ".join(f"{a.axis} {a.ratio:.2%}" + (" — blind" if a.blind else "") for a in arm.itertuples()),
               SMALL)]]
            for (task, encoding, size), arm in found.groupby(["task", "encoding", "size"], sort=False)]
    doc.table(rows, [0.35, 0.65], header=["Task · arm (size)", "Change per step against 1-D RoPE's, per axis"])


def claims_page(doc: Document, tables: Tables) -> None:
    doc.heading("Claims check", H2, page_break=True)
    doc.paragraph("Each claim of the article that posbench tests. 'computed': from posbench's own code; "
                  "'measured': from this run's tables; 'cited': checked against the paper the claim is about "
                  "(the judge step's claims.csv). Vaswani et al.'s Table 3 (E) with both arms tuned is judged as a "
                  "published shape: see 'What this benchmark reproduces' (vaswani2017-e).", SMALL)
    found = tables.get("claims")
    if found.empty:
        doc.paragraph(f"claims.csv is not in {tables.folder}: run `python -m posbench judge` first.", BODY)
        return
    rows = [[[(c.article, Style(size=8, weight="bold"))], [(c.ours, SMALL)],
             [(c.cited if isinstance(c.cited, str) and c.cited else "—", SMALL)],
             verdict_cell(c.verdict, c.rule, size=8)]
            for c in found.itertuples(index=False)]
    doc.table(rows, [0.2, 0.36, 0.2, 0.24], header=["Claim (article)", "This run", "Cited source", "Verdict and rule"])


def figure_sections(doc: Document, tables: Tables) -> None:
    doc.new_page()
    for spec in figures.FIGURES:
        doc.heading(spec.title, H2, keep=spec.height + 0.4 if spec.missing(tables) is None else 0.4)
        why = spec.missing(tables)
        if why:
            doc.paragraph(f"Not shown: {why}.", BODY)
            continue
        doc.figure_block(lambda fig, rect, spec=spec: spec.draw(fig, rect, tables), spec.height, spec.caption)


def appendix(doc: Document, tables: Tables, config: dict | None) -> None:
    doc.heading("Appendix A. Method", H2, page_break=True)
    for text in METHOD:
        doc.paragraph(text, SMALL)
    doc.heading("Appendix B. Environment", H2)
    environments = tables.meta.get("environment") or {}
    if not environments:
        doc.paragraph("meta.json is missing or lists no environment.", BODY)
    for machine, env in environments.items():
        rows = [[[(key, SMALL)], [(str(env.get(key, "—")), SMALL)]] for key in ENVIRONMENT_KEYS if key in env]
        packages = env.get("packages") or {}
        if packages:
            rows.append([[("packages", SMALL)], [(", ".join(f"{k} {v}" for k, v in sorted(packages.items())), SMALL)]])
        doc.paragraph(f"machine {machine}", Style(size=8.5, weight="bold"))
        doc.table(rows, [0.2, 0.8])
    doc.heading("Appendix C. Configuration", H2)
    config = config if config is not None else tables.meta.get("config")
    if config:
        doc.paragraph(yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=120).rstrip(), MONO)
    else:
        doc.paragraph("No config: pass --config or run the aggregate step with it.", BODY)
    doc.heading("Appendix D. Cells that did not finish (oom / skipped / error)", H2)
    failures = failed_cells(tables)
    if failures.empty:
        doc.paragraph("None: every cell in the tables has status ok." + (
            f" Unreadable tables: {'; '.join(tables.problems)}." if tables.problems else ""), BODY)
    else:
        rows = [[[(str(v), SMALL)] for v in record] for record in failures.itertuples(index=False)]
        doc.table(rows, [0.1, 0.14, 0.34, 0.08, 0.34], header=list(failures.columns))


def describe_cell(table: str, row: pd.Series) -> str:
    keys = (("encoding", "size", "seq_len", "device", "mode") if table == "cost"
            else ("task", "encoding", "size", "seed"))
    return " ".join(f"{k}={row[k]}" for k in keys if k in row and pd.notna(row[k]))


def failed_cells(tables: Tables) -> pd.DataFrame:
    """Every row of cost.csv, accuracy.csv and probe.csv whose status is not ok (extrapolation repeats
    accuracy's)."""
    rows = []
    for table in ("cost", "accuracy", "probe"):
        frame = tables.get(table)
        if "status" not in frame.columns:
            continue
        for _, row in frame[frame["status"] != "ok"].iterrows():
            rows.append({"table": table, "machine": row.get("machine", ""), "cell": describe_cell(table, row),
                         "status": row["status"],
                         "reason": row.get("reason", "") if pd.notna(row.get("reason")) else ""})
    return pd.DataFrame(rows, columns=["table", "machine", "cell", "status", "reason"])


def run_summary(tables: Tables) -> str:
    meta = tables.meta
    machines = ", ".join(meta.get("machines", [])) or "unknown machine"
    commits = ", ".join(c[:10] for c in meta.get("code_hashes", meta.get("git_commits", []))) or "unknown"
    mixed = " (MIXED code versions)" if meta.get("mixed_code_versions") else ""
    return (f"Machines: {machines} · records: {meta.get('n_records', 'unknown')} · code: {commits}{mixed} · "
            f"tables: {tables.folder}")


def run_preset(tables: Tables, config: dict | None) -> str | None:
    """The preset the run was made with: the config passed to the report, else the one the tables recorded."""
    return (config or tables.meta.get("config") or {}).get("preset")


def page_order(preset: str | None, verdicts: Callable[[Document, Tables], None]) -> list:
    """The report's leading pages, each called with (doc, tables): the guidance ``verdicts`` first, but for the
    shapes preset, which declares no comparison and exists for its published shapes, the page "What this
    benchmark reproduces" first."""
    pages = [verdicts, claims_page, advice.page, shapes.page, projection.page]
    return [shapes.page, *(p for p in pages if p is not shapes.page)] if preset == "shapes" else pages


def write(out: Path, tables: Tables, config: dict | None, chinese: bool) -> int:
    """Write the PDF; returns the page count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    footer = f"posbench report · {', '.join(tables.meta.get('machines', [])) or 'unknown machine'}"
    with PdfPages(out, metadata={"Title": "posbench report", "Creator": "posbench"}) as pdf:
        doc = Document(pdf, footer)
        verdicts = functools.partial(verdict_page, config=config, chinese=chinese)
        for page in page_order(run_preset(tables, config), verdicts):
            page(doc, tables)
        figure_sections(doc, tables)
        appendix(doc, tables, config)
        doc.close_page()
    return doc.pages
