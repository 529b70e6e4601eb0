"""The PDF, section by section: the verdicts (page 1: the runs behind them (:mod:`.deciding_runs`), what each
row's comparisons found and its caveats; then the forest plot, each row's evidence, the ledger), the verdicts
across sizes (:mod:`.across_sizes`, where the tables hold them), the claims check, the advice page
(:mod:`.advice`), the published shapes (:mod:`.shapes`), the projected cost (:mod:`.projection`), the
figures (:mod:`.figures`), the appendix (method and rules, glossary, environment, config, cells that did
not finish). Each rule is printed once, in the appendix; the rows cite it by name."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import yaml
from matplotlib.backends.backend_pdf import PdfPages

from posbench import guidance, measuring_code, records
from posbench.across_sizes import smallest_first
from posbench.report import across_sizes, advice, deciding_runs, figures, layout, projection, shapes, verdicts
from posbench.report.layout import BODY, H1, H2, MONO, QUOTE, RULE, SMALL, Document, Style
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
)
GLOSSARY = (
    ("arm", "one encoding trained on one task at one width, learning rate and budget; its seeds are replicates."),
    ("comparison", "a declared pair of arms, the added encoding and a comparator, on one task, metric and length, "
                   "with a margin δ, written before results were seen (posbench/comparisons.yaml)."),
    ("effect", "the comparator's mean minus the added arm's, signed so that positive means the comparator is "
               "better; fractions are printed as points (0.01 = 1 point)."),
    ("δ", "a comparison's margin, in its metric's units: a difference below δ counts as no better."),
    ("look", "one reading of a comparison's seeds; a second look with more seeds is taken only where the first "
             "is unclear or unstable."),
    ("Pocock", "the rule that splits α equally between the two looks: each look's interval is two-sided at "
               "1 − 2·α_look (verdicts.csv's alpha_look)."),
    ("Holm", "Holm's step-down correction of the p-values of the comparisons within one guidance row."),
    ("annealed checkpoint", "the model at a budget after a decay branch of its warmup–stable–decay schedule: what "
                            "a run trained to that budget would give; a verdict is made at the last one."),
    ("trend", "how the effect moved between the last two annealed checkpoints: closing (toward 0), widening, "
              "steady (within a share of δ) or unclear."),
    ("trend in size", "how a comparison's effect moves from the smallest model size to the largest (page "
                      "'Across sizes'): its slope against log10 of the non-embedding parameters, and whether the "
                      "verdict changes."),
    ("undertrained", "a run whose validation loss was still falling when its budget ended (the slope over its "
                     "last fifth, or between its last annealed checkpoints): a flag, never a gate; its numbers would "
                     "still improve with more steps."),
    ("token accuracy", "the share of scored target tokens the model predicts right (argmax)."),
    ("exact match", "the share of sequences whose every scored target is right."),
    ("rope+yarn:16", "a model trained with RoPE, read with YaRN's rescaled frequencies for 16× its training "
                     "length, without retraining (likewise rope+dynamic:4)."),
    ("shape", "a published result declared as an ordering of arms on one task, metric and length "
              "(posbench/shapes.yaml), judged on this run's tables."),
)
ENVIRONMENT_KEYS = ("machine", "platform", "cpu", "cpu_count", "gpu", "cuda", "torch_threads", "python", "git_commit")
TITLE = "posbench: is adding position to the embedding enough?"
CLAIMS_TITLE = "Which of the article's claims hold?"
SIDE_COLOURS = {guidance.USE_ADD: layout.FAVOURS_ADDING, guidance.CONSIDER_OTHER: layout.FAVOURS_OTHER}
RULES_APPENDIX = "Appendix A"


def verdict_cell(verdict: str, rule: str, size: float = 9, colour_of: Callable[[str], str] | None = None) -> list:
    """One coloured label per verdict ("cited: not supported; ours: supported" gives two), then the rule;
    ``colour_of(verdict)`` colours a label (default: grey)."""
    labels = [(part, Style(size=size, weight="bold",
                           badge=colour_of(part.split(": ")[-1]) if colour_of else layout.FAVOURS_NEITHER))
              for part in verdict.split("; ")]
    return [*labels, (rule, RULE)] if rule else labels


def rule_name(row: guidance.GuidanceRow) -> str:
    """The name the row's rule is printed under in the appendix: its claim."""
    return f"rule '{row.claim}' ({RULES_APPENDIX})"


def verdict_page(doc: Document, tables: Tables, config: dict | None, chinese: bool) -> None:
    """Page 1: what each guidance row's deciding comparisons found, at what scale and with which caveats;
    then the forest plot, the effects against the budget, each row's evidence, the axis check and the ledger."""
    doc.new_page()
    doc.paragraph(TITLE, H1)
    doc.paragraph(run_summary(tables), SMALL)
    section = "section 九" if chinese else "section 9"
    verdicts_table = tables.get("verdicts")
    hashes = verdicts_table["declaration_sha256"].dropna() if "declaration_sha256" in verdicts_table else []
    declared = hashes.iloc[0][:12] if len(hashes) else "—"  # no comparison has results (e.g. the smoke preset)
    preset = run_preset(tables, config) or "not named in the config"
    doc.paragraph(f"Each row of the article's engineering guidance ({section}), judged by the comparisons declared in "
                  f"posbench/comparisons.yaml (SHA-256 {declared}) on this run's tables (preset: {preset}). Terms: "
                  f"Appendix B; each verdict's rule: {RULES_APPENDIX}. Colour: blue, the evidence favours adding; "
                  "orange, another scheme; grey, neither. " + sizes_sentence(tables.get("scale")), SMALL)
    deciding = smallest_first(verdicts_table[verdicts_table["decides"].astype(bool)]
                              if "decides" in verdicts_table else verdicts_table)
    doc.paragraph(deciding_runs.scale_line(tables, deciding), Style(size=8, weight="bold"))
    if "verdicts" not in tables.frames:
        doc.paragraph(f"verdicts.csv is not in {tables.folder}: run `python -m posbench judge --tables "
                      f"{tables.folder}` (the workflow's judge rule) first.", BODY)
    across = tables.get("scale")  # a column of its own only where the run judged two sizes or more
    doc.table([summary_row(row, verdicts_table, tables, chinese) + across_cell(row, across) for row in guidance.ROWS],
              [0.19, 0.15, 0.33, 0.33] if across.empty else [0.16, 0.15, 0.28, 0.27, 0.14],
              header=["Guidance row", "Verdict", "What was found", "Caveats and scope",
                      *([] if across.empty else ["Across sizes"])])
    for spec in (figures.FOREST, figures.TRAJECTORY):
        if spec.missing(tables) is None:
            doc.heading(spec.title, H2, keep=spec.height + 0.4)
            doc.figure_block(lambda fig, rect, spec=spec: spec.draw(fig, rect, tables), spec.height, spec.caption)
    evidence_section(doc, verdicts_table, chinese)
    axis_section(doc, tables)
    ledger_section(doc, tables)


def summary_row(row: guidance.GuidanceRow, verdicts_table: pd.DataFrame, tables: Tables, chinese: bool) -> list:
    """Page 1's line for ``row``: its words, its verdict, what each deciding comparison found, and the caveats
    (undertrained share, ceiling, trend) and scope computed from the tables."""
    lines = verdicts.of_row(verdicts_table, row)
    label = ([(row.quote, Style(size=8))] if chinese else []) + [(row.english, Style(size=7.5, weight="bold"))]
    shown = lines if not lines.empty else verdicts.withdrawn(verdicts.of_row(verdicts_table, row, decides=False))
    sizes = shown["size"].nunique() > 1 if not shown.empty else False
    found = [(("" if not sizes else f"{line.size}: ") + verdicts.finding(line), SMALL)
             for line in shown.itertuples(index=False)] or [("no deciding comparison has results", SMALL)]
    caveats = verdicts.flags(lines, deciding_runs.deciding_runs(tables, lines)) if not lines.empty else []
    caveats.append("scope: " + verdicts.scope(row, lines))
    return [label, verdict_cell(verdicts.row_verdict(lines), "", size=7, colour_of=functools.partial(favours, row)),
            found, [(f"· {text}", SMALL) for text in caveats]]


def sizes_sentence(across: pd.DataFrame) -> str:
    """What page 1 says of other model sizes: where this run judged several, that the last column reads them;
    else where the verdicts at three sizes are made."""
    if across.empty:
        return ("These verdicts hold at one model size: workflow/scale.yaml judges every row at three "
                "(workflow/cluster-scale.yaml up to 170 M parameters on a cluster).")
    return "The last column: each row's verdicts across the model sizes this run judged (page 'Across sizes')."


def across_cell(row: guidance.GuidanceRow, across: pd.DataFrame) -> list:
    """Page 1's "across sizes" cell of ``row`` (its trend in ``scale.csv``, :func:`.across_sizes.row_trend`);
    no cell where ``across`` is empty."""
    return [] if across.empty else [[(across_sizes.row_trend(across, row.key), SMALL)]]


def favours(row: guidance.GuidanceRow, verdict: str) -> str:
    """The colour of the side of the guidance a row's ``verdict`` favours: a supported row its own side, a
    row not supported the other one, anything else neither."""
    side = {"supported": row.side, "not supported": guidance.CONSIDER_OTHER if row.side == guidance.USE_ADD
            else guidance.USE_ADD}.get(verdict)
    return SIDE_COLOURS.get(side, layout.FAVOURS_NEITHER)


def evidence_section(doc: Document, verdicts_table: pd.DataFrame, chinese: bool) -> None:
    """Each row's deciding comparisons in full (means, Holm p, stability, notes), its verdict and the name
    of its rule (the rule itself is printed once, in the appendix)."""
    for side, english in guidance.SIDES.items():
        doc.heading(f"{side}  {english} — what decided each row?" if chinese else f"{english} — what decided each row?",
                    H2)
        rows = []
        for row in (r for r in guidance.ROWS if r.side == side):
            lines = verdicts.of_row(verdicts_table, row)
            claim = ([(row.quote, QUOTE)] if chinese else []) + [(row.english, Style(size=9, weight="bold"))]
            details = verdicts.evidence_lines(lines, verdicts.of_row(verdicts_table, row, decides=False))
            rows.append([claim + [(line, SMALL) for line in details],
                         verdict_cell(verdicts.row_verdict(lines), rule_name(row),
                                      colour_of=functools.partial(favours, row))])
        doc.table(rows, [0.75, 0.25])


def ledger_section(doc: Document, tables: Tables) -> None:
    """Each row's verdict in the previous run the config names beside this run's (``ledger.csv``): one line a
    row, or one sentence when no verdict, deciding comparison or effect moved."""
    found = tables.get("ledger")
    if found.empty:
        return
    found = found.astype(object).fillna("")
    doc.heading("Did any verdict move since the previous reference?", H2, keep=0.6)
    same = (found["previous_verdict"] == found["verdict"]) & (found["previous_decided_by"] == found["decided_by"]) & (
        found["previous_effect"] == found["effect"])
    if same.all():
        changes = "; ".join(dict.fromkeys(str(c) for c in found["changed"] if c)) or "nothing"
        doc.paragraph(f"No: every row's verdict, deciding comparison and effect are as in the previous reference "
                      f"(config key previous_reference; ledger.csv). What changed: {changes}.", SMALL)
        return
    rows = [[[(str(r.row), SMALL)], [(f"{r.previous_verdict} → {r.verdict}", SMALL)],
             [("unchanged" if ok else f"{r.previous_decided_by} {r.previous_effect} → {r.decided_by} {r.effect}",
               SMALL)], [(str(r.changed), SMALL)]]
            for r, ok in zip(found.itertuples(index=False), same)]
    doc.table(rows, [0.16, 0.2, 0.4, 0.24], header=["Row", "Verdict then → now", "Evidence then → now",
                                                     "What changed"])


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
    doc.heading(CLAIMS_TITLE, H2, page_break=True)
    doc.paragraph("Each claim of the article that posbench tests. 'computed': from posbench's own code; "
                  "'measured': from this run's tables; 'cited': checked against the paper the claim is about "
                  "(the judge step's claims.csv); one result a line, the probe's in the table after it. Vaswani et "
                  "al.'s Table 3 (E) with both arms tuned is judged as a published shape (vaswani2017-e).", SMALL)
    found = tables.get("claims")
    if found.empty:
        doc.paragraph(f"claims.csv is not in {tables.folder}: run `python -m posbench judge` first.", BODY)
        return
    rows = [[[(c.article, Style(size=8, weight="bold"))], [(f"· {part}", SMALL) for part in results(c.ours)],
             [(c.cited if isinstance(c.cited, str) and c.cited else "—", SMALL)],
             verdict_cell(c.verdict, c.rule, size=8)]
            for c in found.itertuples(index=False)]
    doc.table(rows, [0.19, 0.37, 0.18, 0.26],
              header=["Claim (article)", "This run", "Cited source", "Verdict and rule"])
    probe_results(doc, tables)


PROBE_TITLE = "Does a linear probe read as much from E+P as from [E;P]?"
PROBE_TABLE = "probe_claim"  # the judge step's table of them (posbench.claims.probe_table)
# probe_claim.csv's columns said once when every row shares them: (the caption's words, the column's header)
PROBE_SHARED = {"margin": ("δ = {:g} accuracy", "δ"), "seeds": ("n = {}", "n (add/concat)"),
                "outcome": ("outcome: {}", "Outcome")}


def probe_results(doc: Document, tables: Tables) -> None:
    """The information claim's results (the judge step's probe_claim.csv), one a row; δ, the seeds and the
    outcome go in the caption where every row shares them, else in a column of their own."""
    found = tables.get(PROBE_TABLE)
    if found.empty:
        return
    found = found.assign(seeds=[f"{a:g}/{c:g} seeds per arm, {n:g} needed"
                                for a, c, n in zip(found["n_add"], found["n_concat_fixed"], found["seeds_needed"])])
    shared = [column for column in PROBE_SHARED if found[column].nunique() == 1]
    own = [column for column in PROBE_SHARED if column not in shared]
    doc.heading(PROBE_TITLE, H2, keep=1.2)
    doc.paragraph("Each row: linear-probe accuracy reading the fixed-width concat [E;P] minus reading E+P, at the "
                  "same width d, with its 95 % Welch interval: the results behind the claim 'Adding does not lose "
                  "information'. "
                  + ("Every row: " + "; ".join(PROBE_SHARED[c][0].format(found[c].iloc[0]) for c in shared) + "."
                     if shared else ""), SMALL)
    rows = [[[(f"{r.d_model:g}", SMALL)], [(r.embedding, SMALL)], [(r.target, SMALL)],
             [(probe_interval(r), SMALL)], *[[(str(getattr(r, c)), SMALL)] for c in own]]
            for r in found.itertuples(index=False)]
    widths = [0.12, 0.16, 0.14, 0.3]
    doc.table(rows, widths + [(1 - sum(widths)) / len(own) for _ in own],
              header=["Width d", "Embeddings", "Recovered", "concat − add [95 % interval]",
                      *[PROBE_SHARED[c][1] for c in own]])


def results(text: str) -> list[str]:
    """A claims.csv cell's results, one each: its '; '-separated parts, the first keeping what was measured."""
    return [part for part in str(text).split("; ") if part]


def probe_interval(row) -> str:
    """concat − add with its interval, or why there is none (fewer than two seeds)."""
    if pd.isna(row.effect):
        return "not compared (under 2 seeds)"
    return f"{row.effect:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"


def figure_sections(doc: Document, tables: Tables) -> None:
    """Every figure the tables can draw; those they cannot are named once, with why, at the end."""
    doc.new_page()
    absent = []
    for spec in figures.FIGURES:
        why = spec.missing(tables)
        if why:
            absent.append(f"{spec.title} ({why})")
            continue
        doc.heading(spec.title, H2, keep=spec.height + 0.4)
        doc.figure_block(lambda fig, rect, spec=spec: spec.draw(fig, rect, tables), spec.height, spec.caption)
    if absent:
        doc.heading("Which figures could these tables not draw?", H2)
        doc.paragraph("Not shown: " + "; ".join(absent) + ".", SMALL)


def accuracy_method(tables: Tables) -> str:
    """The accuracy paragraph of the method, with this run's interval levels and seeds read from verdicts.csv."""
    found = tables.get("verdicts")
    deciding = found[found["decides"].astype(bool)] if "decides" in found else found
    deciding = deciding.dropna(subset=["effect"]) if "effect" in deciding else deciding.iloc[0:0]  # none judged
    if deciding.empty:
        run = "No comparison decided a row in these tables."
    else:
        levels = ", ".join(dict.fromkeys(deciding_runs.interval_level(a) for a in deciding["alpha_look"]))
        alphas = ", ".join(dict.fromkeys(f"{a:.3g}" for a in deciding["alpha_look"]))
        seeds = ", ".join(f"{line.comparison} {line.n_added}/{line.n_comparator} (look {line.look:g})"
                          for line in deciding.itertuples(index=False))
        run = (f"In this run: intervals at {levels} (one-sided α {alphas} per look, Pocock); seeds added/comparator "
               f"per deciding comparison: {seeds}.")
    return ("Accuracy: every (task, encoding) trained with fixed seeds (a seed fixes the initial weights and the "
            "training data order). A verdict rests on declared comparisons (posbench/comparisons.yaml): a Welch "
            "interval on the per-seed means at each look's level, one-sided tests against the margin δ, Holm within "
            "a row, seeds per arm from the power rule; an arm that does not beat its task's chance level, or "
            "diverged, did not learn and is not compared; eval_se in verdicts.csv is the evaluation set's own "
            f"sampling error (items bootstrapped). {run}")


def rules_section(doc: Document, tables: Tables) -> None:
    """Each guidance rule once, under the name the rows cite (:func:`rule_name`), as verdicts.csv states it."""
    found = tables.get("verdicts")
    doc.heading("Rules", Style(size=9.5, weight="bold"), keep=0.6)
    for claim in dict.fromkeys(row.claim for row in guidance.ROWS):
        keys = [row.key for row in guidance.ROWS if row.claim == claim]
        texts = found.loc[found["row"].isin(keys), "row_rule"].dropna() if "row_rule" in found else []
        text = texts.iloc[0] if len(texts) else "no row of this rule has results in these tables"
        doc.paragraph(f"Rule '{claim}' (rows {', '.join(keys)}): {text}", SMALL)


def appendix(doc: Document, tables: Tables, config: dict | None) -> None:
    doc.heading(f"{RULES_APPENDIX}. How was each figure measured and each verdict made?", H2, page_break=True)
    for text in (*METHOD, accuracy_method(tables)):
        doc.paragraph(text, SMALL)
    rules_section(doc, tables)
    doc.heading("Appendix B. What do the report's terms mean?", H2)
    doc.table([[[(term, Style(size=7.5, weight="bold"))], [(meaning, SMALL)]] for term, meaning in GLOSSARY],
              [0.2, 0.8], rules=False)
    doc.heading("Appendix C. On what machine and software did it run?", H2)
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
    doc.heading("Appendix D. With what configuration?", H2)
    config = config if config is not None else tables.meta.get("config")
    if config:
        # a list of plain values on one line ([0, 1, 2]): the dump reads as the config file does, not a value a line
        doc.paragraph(yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=120,
                                     default_flow_style=None).rstrip(), MONO)
    else:
        doc.paragraph("No config: pass --config or run the aggregate step with it.", BODY)
    doc.heading("Appendix E. Which cells did not finish (oom / skipped / error)?", H2)
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
    """Machines, records, the measuring code of the records beside this checkout's, and the tables' folder."""
    meta = tables.meta
    machines = ", ".join(meta.get("machines", [])) or "unknown machine"
    hashes = meta.get("code_hashes") or []
    recorded = ", ".join(c[:12] for c in hashes) or "unknown"
    mixed = " (MIXED code versions)" if meta.get("mixed_code_versions") else ""
    here = measuring_code.code_hash()
    differs = "unknown" if not hashes else "same" if set(hashes) == {here} else "differs"
    return (f"Machines: {machines} · records: {meta.get('n_records', 'unknown')} · measuring code of the records: "
            f"{recorded}{mixed}; of this checkout: {here[:12]} ({differs}) · tables: {tables.folder}")


def run_preset(tables: Tables, config: dict | None) -> str | None:
    """The preset the run was made with: the config passed to the report, else the one the tables recorded."""
    return (config or tables.meta.get("config") or {}).get("preset")


def page_order(preset: str | None, verdicts: Callable[[Document, Tables], None]) -> list:
    """The report's leading pages, each called with (doc, tables): the guidance ``verdicts`` first, then the
    verdicts across sizes (drawn only where the tables hold them); but for the shapes preset, which declares no
    comparison and exists for its published shapes, the shapes page (:data:`.shapes.TITLE`) first."""
    pages = [verdicts, across_sizes.page, claims_page, advice.page, shapes.page, projection.page]
    return [shapes.page, *(p for p in pages if p is not shapes.page)] if preset == "shapes" else pages


def write(out: Path, tables: Tables, config: dict | None, chinese: bool) -> int:
    """Write the PDF atomically (:func:`posbench.records.write_atomically`: a failed write leaves the previous
    report whole); returns the page count."""
    footer = f"posbench report · {', '.join(tables.meta.get('machines', [])) or 'unknown machine'}"
    pages = 0

    def fill(file) -> None:
        nonlocal pages
        with PdfPages(file, metadata={"Title": "posbench report", "Creator": "posbench"}) as pdf:
            doc = Document(pdf, footer)
            verdicts = functools.partial(verdict_page, config=config, chinese=chinese)
            for page in page_order(run_preset(tables, config), verdicts):
                page(doc, tables)
            figure_sections(doc, tables)
            appendix(doc, tables, config)
            doc.close_page()
        pages = doc.pages

    records.write_atomically(out, fill)
    return pages
