"""The report: verdict rules on synthetic tables, the claims' computed figures, and a PDF built from
a small synthetic set of tables (matching the TABLES.md contract) whose text holds every guidance
row and every claim."""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pypdf
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_pdf import PdfPages

from posbench import aggregate, analytic, claims, comparisons, encodings, evidence, guidance, judge, shapes
from posbench.report import build_report, document, figures, layout, style
from posbench.report import shapes as report_shapes
from posbench.report import verdicts as words
from posbench.tables import load

FIRST_SEED = comparisons.load().seed_rule.first_seed
SEEDS = tuple(range(FIRST_SEED, FIRST_SEED + 20))  # deciding seeds, as the comparisons read them
TASKS = {  # task -> (metric, higher_is_better, train_len, {encoding: mean at the training length})
    "lm_prose": ("bits_per_char", False, 64, {"none": 2.6, "sinusoidal": 2.30, "learned": 2.31, "rope": 2.20,
                                              "alibi": 2.33, "sinusoidal_concat": 2.28,
                                              "sinusoidal_concat_fixed": 2.35}),
    "lm_code": ("bits_per_char", False, 64, {"sinusoidal": 2.0, "learned": 2.02, "rope": 1.99, "alibi": 2.01}),
    "reverse": ("exact_match", True, 16, {"none": 0.05, "sinusoidal": 0.40, "learned": 0.35, "rope": 0.90, "t5": 0.7}),
    "index_lookup": ("exact_match", True, 24, {"sinusoidal": 0.5, "learned": 0.45, "rope": 0.8, "alibi": 0.3}),
    "long_range": ("accuracy", True, 64, {"none": 0.5, "sinusoidal": 0.7, "learned": 0.72, "rope": 0.75, "alibi": 0.8}),
    "digits_2d": ("accuracy", True, 16, {"sinusoidal": 0.90, "sinusoidal_2d": 0.93, "rope_2d": 0.932,
                                         "sinusoidal_concat_fixed": 0.89}),
    "passkey": ("exact_match", True, 64, {"sinusoidal": 0.60, "alibi": 0.95, "rope": 0.90}),
}
RATIOS = (1.0, 1.25, 1.5, 2.0, 4.0, 8.0)
TASK_RATIOS = {"digits_2d": (1.0,), "passkey": (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)}  # else RATIOS
DECAY = {"alibi": 0.0, "t5": 0.01, "rope": 0.05, "none": 0.02}  # per doubling of length; others 0.15


Z = np.linspace(-1, 1, len(SEEDS)) / np.linspace(-1, 1, len(SEEDS)).std(ddof=1)  # sample sd 1


def noise(seed: int, scale: float = 0.004) -> float:
    return scale * Z[SEEDS.index(seed)]  # over the seeds: mean 0, sample sd = scale


@functools.cache
def analytic_table() -> pd.DataFrame:
    """``analytic.csv`` as the aggregate step computes it (the same for every tables folder)."""
    return aggregate.analytic_table()


def make_tables(folder, seeds=SEEDS) -> None:
    """cost, accuracy, extrapolation and analytic CSVs and meta.json as `python -m posbench aggregate` writes
    them."""
    common = {"machine": "testbox", "git_commit": "abc1234def", "status": "ok", "reason": ""}
    accuracy, extrapolation = [], []
    for task, (metric, higher, train_len, means) in TASKS.items():
        for encoding, mean in means.items():
            for seed in seeds:
                cell = {**common, **encodings.traits(encoding).as_columns(), "task": task, "encoding": encoding,
                        "size": "tiny", "seed": seed, "metric": metric, "higher_is_better": higher,
                        "train_len": train_len}
                value = mean + noise(seed)
                accuracy.append({**cell, "value": value, "token_accuracy": np.nan,
                                 "params_total": 100_000 * (2 if encoding == "sinusoidal_concat" else 1),
                                 "params_position": 0, "wall_time_s": 20.0 + len(encoding) + seed, "steps": 300,
                                 "final_loss": 1.0})
                for ratio in TASK_RATIOS.get(task, RATIOS):
                    worse = DECAY.get(encoding, 0.15) * np.log2(ratio) * (-1 if higher else 1)
                    extrapolation.append({**cell, "eval_len": int(train_len * ratio), "length_ratio": ratio,
                                          "value": value + worse, "token_accuracy": np.nan})
    accuracy.append({**common, "status": "error", "reason": "loss became nan at step 12", "task": "reverse",
                     "encoding": "alibi", "size": "tiny", "seed": 0, "metric": "exact_match"})
    cost = []
    for device in ("cpu", "cuda"):
        for encoding in ("none", "sinusoidal", "sinusoidal_concat", "sinusoidal_concat_fixed", "rope", "alibi", "t5"):
            for seq_len in (256, 1024, 4096):
                row = {**common, "encoding": encoding, "size": "base", "device": device, "mode": "infer",
                       "seq_len": seq_len, "batch": 1, "dtype": "float32", "threads": 2, "d_model": 256,
                       "width": 512 if encoding == "sinusoidal_concat" else 256,
                       "params_total": 3_300_000 * (4 if encoding == "sinusoidal_concat" else 1),
                       "flops_analytic": 1e9 * seq_len / 256 * (3.7 if encoding == "sinusoidal_concat" else 1),
                       "latency_median_ms": 0.01 * seq_len ** 1.2 * (1.3 if encoding in ("alibi", "t5") else 1),
                       "memory_peak_mib": 300 + seq_len / 10, "memory_above_baseline_mib": 1 + seq_len ** 2 / 2e5}
                if device == "cuda" and seq_len == 4096 and encoding == "t5":
                    row.update(status="oom", reason="CUDA out of memory", latency_median_ms=np.nan,
                               memory_peak_mib=np.nan, memory_above_baseline_mib=np.nan)
                cost.append(row)
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("cost", cost), ("accuracy", accuracy), ("extrapolation", extrapolation)):
        pd.DataFrame(rows).to_csv(folder / f"{name}.csv", index=False)
    analytic_table().to_csv(folder / "analytic.csv", index=False)
    meta = {"machines": ["testbox"], "git_commits": ["abc1234def"], "mixed_code_versions": False,
            "n_records": len(cost) + len(accuracy),
            "environment": {"testbox": {"machine": "testbox", "python": "3.11", "platform": "Linux", "cpu": "x86_64",
                                        "torch_threads": 2, "git_commit": "abc1234def",
                                        "packages": {"torch": "2.13.0"}}},
            "config": {"train": {"seeds": list(seeds)}}}
    (folder / "meta.json").write_text(json.dumps(meta))


def seed_rows(encoding_means: dict[str, float], higher: bool = True, seeds=SEEDS, scale=0.01) -> pd.DataFrame:
    return pd.DataFrame([{"encoding": e, **encodings.traits(e).as_columns(), "value": m + noise(s, scale),
                          "higher_is_better": higher}
                         for e, m in encoding_means.items() for s in seeds])


# ----- verdicts ------------------------------------------------------------------------------------
EXPECTED = {  # the declared comparisons on make_tables' means (seed sd 0.004)
    "standard_nlp": "not supported",  # rope 2.20 beats sinusoidal 2.30 by 0.10 > δ 0.05
    "fixed_length": "supported",  # lm_code: rope 1.99 and alibi 2.01 within δ 0.05 of sinusoidal 2.0
    "parameter_budget": "supported",  # concat_fixed 2.35 is worse than sinusoidal 2.30 and learned 2.31
    "long_sequences": "supported",  # at 4× sinusoidal decays by 0.30, alibi not at all, rope by 0.10; passkey at 16×
    "precise_position": "supported",  # reverse: rope 0.90 vs sinusoidal 0.40
    "multimodal": "supported",  # rope_2d 0.932 beats sinusoidal 0.90 by more than δ 0.02
}


def judged(folder, preset: str | None = None) -> pd.DataFrame:
    """The judge step's verdicts.csv for the tables in ``folder`` (written there), as the report reads it."""
    judge.write(folder, preset)
    return load(folder).get("verdicts")


def row_verdicts(frame: pd.DataFrame) -> dict[str, str]:
    return {row.key: words.row_verdict(words.of_row(frame, row)) for row in guidance.ROWS}


def test_guidance_rows_on_synthetic_tables(tmp_path):
    make_tables(tmp_path)
    frame = judged(tmp_path)
    assert row_verdicts(frame) == EXPECTED
    budget = words.of_row(frame, guidance.BY_KEY["parameter_budget"])
    assert budget["comparison"].tolist() == ["prose-concat-fixed", "prose-learned-concat-fixed"]
    assert (budget["stability"] == 1.0).all()
    declared = comparisons.load().by_id
    assert budget["n_added"].tolist() == [declared[c].n_seeds for c in budget["comparison"]] == [7, 10]


def test_only_the_presets_comparisons_decide_a_row(tmp_path):
    """Run by the default preset, long_sequences is decided by passkey-16x-alibi alone; long_range's
    comparison (full preset only) is shown as descriptive and cannot change the verdict."""
    make_tables(tmp_path)
    rows = pd.read_csv(tmp_path / "extrapolation.csv")
    wrecked = (rows["task"] == "long_range") & (rows["encoding"] == "rope")
    rows.loc[wrecked, "value"] = 0.1  # long_range now contradicts the row (rope far worse than sinusoidal)
    rows.to_csv(tmp_path / "extrapolation.csv", index=False)
    assert row_verdicts(judged(tmp_path))["long_sequences"] == "not supported"
    frame = judged(tmp_path, "default")
    assert row_verdicts(frame)["long_sequences"] == "supported"
    row = guidance.BY_KEY["long_sequences"]
    lines = words.evidence_lines(words.of_row(frame, row), words.of_row(frame, row, decides=False))
    assert any(line.startswith("not in this preset, descriptive: long_range") for line in lines)
    frame = frame.set_index("comparison")
    assert frame.loc["passkey-16x-alibi", "decides"] and not frame.loc["long-range-2x-rope", "decides"]
    assert not frame.loc["prose-4x-alibi", "decides"]


def test_the_verdict_table_lists_every_comparison_with_results(tmp_path):
    make_tables(tmp_path)
    frame = judged(tmp_path)
    assert set(frame["comparison"]) == {"prose-rope", "prose-alibi", "code-rope", "code-alibi", "prose-concat-fixed",
                                        "prose-learned-concat-fixed", "prose-4x-alibi", "prose-4x-rope",
                                        "long-range-2x-rope", "passkey-16x-alibi", "passkey-16x-rope",
                                        "reverse-rope", "digits-rope-2d",
                                        "digits-2d-added-rope-2d", "digits-concat-fixed"}
    prose = frame.set_index("comparison").loc["prose-rope"]
    assert prose["effect"] == pytest.approx(0.10) and prose["outcome"] == "comparator better by more than δ"
    assert (frame["declaration_sha256"] == comparisons.load().sha256).all()


# ----- claims: computed figures ------------------------------------------------------------------
def test_computed_claims_have_reference_values(tmp_path):
    analytic_table().to_csv(tmp_path / "analytic.csv", index=False)  # no measured tables: computed claims only
    found = {c.article: c for c in claims.check_all(load(tmp_path))}
    concat = found["Concat [E;P] at width 2d costs ~4× the projection parameters and more FLOPs"]
    assert "projection params naive ×4.00, fixed-width ×1.00" in concat.ours and concat.verdict == evidence.SUPPORTED
    assert "FLOPs naive ×3.70, fixed ×1.00 (posbench.flops, d=512, L=512)" in concat.ours  # no cost.csv
    periods = found["Low dimensions (small i) change slowly"]
    assert periods.ours == ("computed at d=512: period of pair i=0 is 6.28 positions, of pair i=255 "
                            f"{2 * np.pi * 10000 ** (510 / 512):,.0f} positions")
    assert periods.verdict == evidence.NOT_SUPPORTED
    shift = found["PE(pos+k) is a linear function of PE(pos)"]
    assert "pos < 1024, k in 1, 7, 100, 1000" in shift.ours and shift.verdict == evidence.SUPPORTED
    assert found["T5 concatenates position encodings"].ours == (
        "computed (posbench t5): width 512 -> 512 (nothing concatenated); a logit bias of shape (8, 16, 16) from 256 "
        "learned scalars")
    assert found["ALiBi adds + m·|i−j| to the attention logits"].verdict == evidence.NOT_SUPPORTED
    assert "8 heads): largest off-diagonal bias -0.003906" in found["ALiBi adds + m·|i−j| to the attention logits"].ours
    assert found["Adding does not lose information"].verdict == evidence.INCONCLUSIVE


def test_the_analytic_table_holds_the_sinusoid_and_parameter_figures_the_claims_read():
    frame = analytic_table()
    periods = [analytic.value(frame, f"period_{pair}_pair", "sinusoidal", "medium") for pair in ("first", "last")]
    assert periods == pytest.approx([2 * np.pi, 2 * np.pi * 10000 ** (510 / 512)], rel=1e-12)
    assert analytic.value(frame, "shift_linearity_error", "sinusoidal", "medium", 1024) < 1e-9
    assert analytic.value(frame, "shift_linearity_error", "sinusoidal", "medium") is None  # a length-bound quantity
    params = {e: analytic.value(frame, "params_projection", e, "tiny") for e in analytic.CONCAT_FAMILY}
    assert params == {"sinusoidal": 98_304, "sinusoidal_concat": 4 * 98_304, "sinusoidal_concat_fixed": 98_304}
    assert analytic.value(frame, "largest_off_diagonal_bias", "alibi", "medium") == -2 ** -8  # the 8th head's slope
    assert analytic.value(frame, "largest_off_diagonal_bias", "t5", "medium") is None  # learned: no formula to read


def test_without_the_analytic_table_the_computed_claims_say_so_and_the_cited_verdict_stays(tmp_path):
    found = {c.article: c for c in claims.check_all(load(tmp_path))}
    why = (f"not computed: analytic.csv is not in {tmp_path} (`python -m posbench aggregate --analytic-only --out "
           f"{tmp_path}` writes it)")
    for article in ("Concat [E;P] at width 2d costs ~4× the projection parameters and more FLOPs",
                    "Low dimensions (small i) change slowly", "PE(pos+k) is a linear function of PE(pos)",
                    "ALiBi adds + m·|i−j| to the attention logits"):
        assert (found[article].ours, found[article].verdict) == (why, evidence.INCONCLUSIVE), article
    t5 = found["T5 concatenates position encodings"]
    assert (t5.ours, t5.verdict) == (why, f"{claims.CITED}: {evidence.NOT_SUPPORTED}")


def test_the_params_figure_is_read_from_the_analytic_table_and_not_shown_without_it(tmp_path):
    assert figures.params_flops_missing(load(tmp_path)) == (
        f"analytic.csv is not in {tmp_path}: `python -m posbench aggregate --analytic-only --out {tmp_path}` writes it")
    analytic_table().to_csv(tmp_path / "analytic.csv", index=False)
    drawn = figures.params_and_flops(load(tmp_path))
    assert figures.params_flops_missing(load(tmp_path)) is None and len(drawn) == 18  # the ladder's 6 × 3 encodings
    tiny = drawn[drawn["size"] == "tiny"].set_index("encoding")
    assert list(tiny["params"]) == [131_712, 443_648, 123_520] and tiny.loc["sinusoidal", "d_model"] == 64
    assert tiny.loc["sinusoidal", "flops"] == analytic.value(analytic_table(), "flops_forward", "sinusoidal", "tiny",
                                                             figures.FLOPS_SEQ_LEN)


def planted_probe() -> list[dict]:
    """probe.csv's rows where E+P loses 0.2 linear-probe accuracy at d 16 and nothing at d 64."""
    return [{"status": "ok", "combine": combine, "d_model": d, "embedding": "random", "probe": probe,
             "target": target, "seed": seed,
             "value": 0.95 + noise(seed, 0.01) - (0.2 if combine == "add" and d == 16 and probe == "linear" else 0)}
            for combine in ("add", "concat_fixed", "concat") for d in (16, 64) for target in ("token", "position")
            for probe in ("linear", "mlp") for seed in SEEDS]


def test_probe_table_decides_the_information_claim(tmp_path):
    rows = planted_probe()
    pd.DataFrame(rows).to_csv(tmp_path / "probe.csv", index=False)
    claim = claims.claim_information(load(tmp_path))
    assert claim.verdict == evidence.NOT_SUPPORTED
    assert claim.ours.endswith("4 results, one a row of probe_claim.csv: 2 comparator better by more than δ, "
                               "2 comparator not better by δ")
    results = claims.probe_table(load(tmp_path)).set_index(["target", "d_model"])
    assert len(results) == 4 and set(results["embedding"]) == {"random"} and set(results["margin"]) == {0.02}
    assert list(results["effect"]) == pytest.approx([0.2, 0, 0.2, 0], abs=0.01)  # position then token, d 16 and 64
    assert list(results["outcome"]) == [evidence.BETTER, evidence.NOT_BETTER] * 2
    assert (results["ci_low"] < results["effect"]).all() and (results["effect"] < results["ci_high"]).all()
    assert (results["n_add"] == len(SEEDS)).all() and (results["n_concat_fixed"] == len(SEEDS)).all()
    pd.DataFrame([r for r in rows if r["d_model"] == 64]).to_csv(tmp_path / "probe.csv", index=False)
    assert claims.claim_information(load(tmp_path)).verdict == evidence.SUPPORTED
    pd.DataFrame([r for r in rows if r["d_model"] == 64 and r["seed"] < 2]).to_csv(tmp_path / "probe.csv", index=False)
    assert claims.claim_information(load(tmp_path)).verdict == evidence.INCONCLUSIVE


def test_probe_results_are_a_table_of_one_result_a_row(tmp_path):
    """Each probe result is a row with its interval; δ and the seeds, the same in every row, are said once
    (the caption); the outcome, which differs, is a column."""
    pd.DataFrame(planted_probe()).to_csv(tmp_path / "probe.csv", index=False)
    results = claims.probe_table(load(tmp_path))
    results.to_csv(tmp_path / "probe_claim.csv", index=False)
    with PdfPages(tmp_path / "probe.pdf") as pdf:
        doc = layout.Document(pdf, "test")
        document.probe_results(doc, load(tmp_path))
        doc.close_page()
    (text,) = pdf_text(tmp_path / "probe.pdf")
    assert squeeze(document.PROBE_TITLE) in text and squeeze("Outcome") in text
    assert text.count(squeeze(f"n = {len(SEEDS)}/{len(SEEDS)} seeds per arm, {claims.min_seeds()} needed")) == 1
    assert text.count("δ=0.02") == 1
    for row in results.itertuples():
        assert squeeze(f"{row.d_model} random {row.target} {row.effect:+.3f} [{row.ci_low:+.3f}, "
                       f"{row.ci_high:+.3f}] {row.outcome}") in text


# ----- the PDF -----------------------------------------------------------------------------------
def pdf_text(path) -> list[str]:
    return ["".join(page.extract_text().split()) for page in pypdf.PdfReader(path).pages]


def squeeze(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def built_report(tmp_path_factory):
    """The report of make_tables' tables: its folder and page count; ``documents`` keeps the Document it
    was laid out in (its lines of running text per page)."""
    folder = tmp_path_factory.mktemp("report")
    make_tables(folder / "tables")
    judge.write(folder / "tables")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(document, "Document", keeping(document.Document))
        pages = build_report(folder / "tables", folder / "report.pdf", plots_dir=folder / "plots")
    return folder, pages


documents: list = []


def keeping(cls):
    """``cls`` whose every instance is appended to :data:`documents`."""
    class Kept(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            documents.append(self)

    return Kept


def test_report_pages_hold_every_guidance_row_and_claim(built_report):
    folder, pages = built_report
    text = pdf_text(folder / "report.pdf")
    assert len(text) == pages == 15  # summary, forest and row details (2), claims, advice, shapes (2: 14 of
    # them), projected cost (judge.write writes projection.csv), 5 figure pages, appendix (2)
    claims_page = next(i for i, page in enumerate(text) if squeeze(document.CLAIMS_TITLE) in page)
    assert style.cjk_family() is not None, "install fonts-wqy-microhei (CI needs it)"
    verdict_pages = "".join(text[:claims_page])
    for row in guidance.ROWS:  # the Chinese row, its English line, its verdict
        assert squeeze(row.quote) in verdict_pages and squeeze(row.english) in verdict_pages
    for verdict in EXPECTED.values():
        assert squeeze(verdict) in verdict_pages
    assert squeeze(figures.FOREST.title) in verdict_pages and comparisons.load().sha256[:12] in text[0]
    for claim in claims.check_all(load(folder / "tables")):
        assert squeeze(claim.article) in text[claims_page]
    assert "Vaswani" in text[claims_page] and "PPL4.92" in text[claims_page] and "vaswani2017-e" in text[claims_page]
    everything = "".join(text)
    for spec_title in (figures.FIGURES[3].title, figures.FIGURES[-2].title, "Appendix E"):
        assert squeeze(spec_title) in everything
    assert "CUDAoutofmemory" in text[-1] and "lossbecamenanatstep12" in text[-1]


def test_the_shapes_preset_leads_with_its_shapes_page_and_every_other_preset_with_the_verdicts():
    verdicts = document.verdict_page
    assert document.page_order("shapes", verdicts)[0] is report_shapes.page
    assert document.page_order("default", verdicts)[0] is document.page_order(None, verdicts)[0] is verdicts
    assert sorted(map(id, document.page_order("shapes", verdicts))) == sorted(
        map(id, document.page_order("default", verdicts)))
    recorded = SimpleNamespace(meta={"config": {"preset": "shapes"}})  # tables whose meta.json holds the config
    assert document.run_preset(recorded, None) == "shapes"
    assert document.run_preset(recorded, {"preset": "full"}) == "full"  # the config passed wins
    assert document.run_preset(SimpleNamespace(meta={}), None) is None


def test_the_shapes_page_has_one_line_per_declared_shape_and_its_outcome(built_report):
    folder, _ = built_report
    text = pdf_text(folder / "report.pdf")
    everything = "".join(text)
    page = everything[everything.index(squeeze(report_shapes.TITLE)):]  # the page and its continuation
    found = pd.read_csv(folder / "tables" / "shapes.csv")
    assert list(found["shape"]) == [s.id for s in shapes.load().shapes]
    for row in found.itertuples():
        assert squeeze(row.outcome) in page and squeeze(row.shape) in page  # the closing note names each shape
    assert squeeze("Table 3, row (E)") in page and shapes.load().sha256[:12] in page


ALPHA_LOOK = 0.0147  # one-sided, each of two looks: a 97.1 % interval


def planted_line(row: str, comparison: str, task: str, metric: str, outcome: str, **values) -> dict:
    """A deciding line of verdicts.csv as the judge step writes it, with ``values`` over the defaults."""
    line = {"declaration_sha256": "ab" * 32, "row": row, "row_verdict": "supported", "row_shown": "supported",
            "row_rule": f"the rule of {row}", "comparison": comparison, "task": task, "metric": metric,
            "length_ratio": 1.0, "size": "tiny", "add_arm": "sinusoidal", "comparator_arm": "rope", "train_len": 48,
            "d_model_added": 64, "d_model_comparator": 64, "lr_added": 0.003, "lr_comparator": 0.003,
            "n_added": 10, "n_comparator": 10, "mean_added": 0.98, "mean_comparator": 0.978, "effect": -0.002,
            "ci_low": -0.01, "ci_high": 0.006, "margin": 0.1, "outcome": outcome, "task_verdict": "supported",
            "stability": 1.0, "steps": 3200, "look": 1, "alpha_look": ALPHA_LOOK, "seeds_added": "100-109",
            "seeds_comparator": "100-109", "trend_since": 1600, "trend_change": -0.05, "trend_ci_low": -0.07,
            "trend_ci_high": -0.03, "trend": "closing", "line": f"{comparison}: the judge step's line",
            "notes": "", "withdrawn": "", "decides": True, "gate_notes": ""}
    return {**line, **values}


def planted_runs(line: dict, undertrained: int) -> list[dict]:
    """accuracy.csv's rows of both arms' deciding seeds of ``line``, the first ``undertrained`` of them
    flagged; then a pilot seed and a run at another budget that the line does not read."""
    runs = [{"machine": "box", "status": "ok", "device": "cpu", "task": line["task"], "encoding": line[encoding],
             "size": "tiny", "train_len": line["train_len"], "d_model": line[f"d_model_{arm}"],
             "lr": line[f"lr_{arm}"], "steps": line["steps"], "batch_size": 32, "seed": seed,
             "params_total": 101_760, "metric": line["metric"], "value": 0.5}
            for arm, encoding in (("added", "add_arm"), ("comparator", "comparator_arm")) for seed in range(100, 110)]
    for index, run in enumerate(runs):
        run["undertrained"] = index < undertrained
    pilot = {**runs[0], "seed": 0, "undertrained": False}
    other_budget = {**runs[0], "steps": 500, "params_total": 5, "undertrained": False}
    return [*runs, pilot, other_budget]


def test_page_one_states_the_scale_and_each_rows_finding_flags_and_scope_from_the_tables(tmp_path):
    """Planted tables: standard_nlp decided by scan alone (within δ, near the ceiling, 15 of 20 runs
    undertrained, the gap closing), precise_position by code_brackets (rope better by 50 points): page 1
    prints the scale line, each row's finding in its own direction and units, its flags and what its
    words name that no deciding task tested, all read from the tables."""
    folder = tmp_path / "tables"
    folder.mkdir()
    nlp = planted_line("standard_nlp", "scan-rope", "scan", "exact_match", "comparator not better by δ")
    code = planted_line("precise_position", "code-brackets-rope", "code_brackets", "token_accuracy",
                        "comparator better by more than δ", train_len=128, steps=600, mean_added=0.35,
                        mean_comparator=0.85, effect=0.5, ci_low=0.47, ci_high=0.53, trend="widening",
                        trend_since=300, trend_change=0.04, trend_ci_low=0.02, trend_ci_high=0.06)
    pd.DataFrame([nlp, code]).to_csv(folder / "verdicts.csv", index=False)
    pd.DataFrame(planted_runs(nlp, 15) + planted_runs(code, 20)).to_csv(folder / "accuracy.csv", index=False)
    ledger = [{"row": r, "previous_verdict": "supported", "previous_decided_by": c, "previous_effect": "e",
               "verdict": "supported", "decided_by": c, "effect": "e", "changed": "measuring code aaa -> bbb"}
              for r, c in (("standard_nlp", "scan-rope"), ("precise_position", "code-brackets-rope"))]
    pd.DataFrame(ledger).to_csv(folder / "ledger.csv", index=False)
    meta = {"machines": ["box"], "environment": {"box": {"cpu": "PlantedCPU", "cpu_count": 8, "torch_threads": 4}}}
    (folder / "meta.json").write_text(json.dumps(meta))
    build_report(folder, tmp_path / "report.pdf")
    text = pdf_text(tmp_path / "report.pdf")
    first = text[0]
    # the pilot seed and the 500-step run are not deciding runs: one parameter count, 15 of 20 undertrained
    for expected in ("Scale: model tiny (d_model 64, 2 layers, 4 heads; 101,760 parameters)",
                     "device cpu (PlantedCPU, 8 cores, 4 torch threads)", "600–3,200 steps × batch 32",
                     "2.5–4.9 M tokens seen per run", "10 seeds per arm", "97.1 % intervals",
                     "adding is within δ = 10 exact-match points of rope (rope's advantage −0.2 [−1.0, +0.6], "
                     "97.1 % interval, 10/10 seeds)",
                     "undertrained: 15 of 20 deciding runs", "near the ceiling: sinusoidal at 0.980 of 1",
                     "gap closing from 1600 to 3200 steps: −5.0 [−7.0, −3.0] exact-match points",
                     "decided on scan trained at 48; tested: translation; not tested: text classification, "
                     "question answering",
                     "rope beats adding by 50.0 token-accuracy points, more than δ = 10",
                     "undertrained: 20 of 20 deciding runs", "gap widening from 300 to 600 steps",
                     "tested: code generation; not tested: structured data"):
        assert squeeze(expected) in first, expected
    assert "near the ceiling: rope" not in first  # 0.85 of token accuracy is not near it
    everything = "".join(text)
    assert "Noverdict" not in everything and squeeze("No: every row's verdict, deciding comparison and effect are "
                                                      "as in the previous reference") in everything
    assert everything.count(squeeze("the rule of standard_nlp")) == 1  # each rule once, in the appendix


def test_scope_names_the_rows_situations_and_lengths_no_deciding_comparison_tested():
    fixed = guidance.BY_KEY["fixed_length"]
    lines = pd.DataFrame([{"task": "lm_prose", "train_len": 128, "length_ratio": 1.0}])
    assert words.scope(fixed, lines) == ("decided on lm_prose trained at 128; not tested at training lengths 64, 256 "
                                         "(the row's words span 64–256)")
    precise = guidance.BY_KEY["precise_position"]
    both = pd.DataFrame([{"task": "code_brackets", "train_len": 128, "length_ratio": 1.0},
                         {"task": "table_lookup", "train_len": 64, "length_ratio": 2.0}])
    assert words.scope(precise, both) == ("decided on code_brackets trained at 128; table_lookup trained at 64, "
                                          "read at 2×; tested: code generation, structured data")


@pytest.mark.parametrize("row, verdict, colour", [
    ("standard_nlp", "supported", layout.FAVOURS_ADDING), ("standard_nlp", "not supported", layout.FAVOURS_OTHER),
    ("long_sequences", "supported", layout.FAVOURS_OTHER), ("long_sequences", "not supported", layout.FAVOURS_ADDING),
    ("multimodal", "inconclusive", layout.FAVOURS_NEITHER)])
def test_a_verdict_is_coloured_by_the_side_of_the_guidance_it_favours(row, verdict, colour):
    assert document.favours(guidance.BY_KEY[row], verdict) == colour


def test_the_forest_plot_colours_by_side_and_keeps_its_legend_off_the_data(built_report):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    folder, _ = built_report
    tables = load(folder / "tables")
    figure = Figure(figsize=(layout.CONTENT_W, figures.FOREST.height))
    figures.draw_forest(figure, (0.0, 0.0, 1.0, 1.0), tables)
    (ax,), (legend,) = figure.axes, figure.legends
    renderer = FigureCanvasAgg(figure).get_renderer()
    assert legend.get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0  # below the axes
    data = figures.compared_rows(tables).iloc[::-1].reset_index(drop=True)
    expected = {words.BETTER: layout.FAVOURS_OTHER, words.NOT_BETTER: layout.FAVOURS_ADDING}
    points = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(points) == len(data) > 0
    for point, outcome in zip(points, data["outcome"]):
        assert point.get_color() == expected.get(outcome, layout.FAVOURS_NEITHER)


def test_every_caption_names_only_tasks_its_figure_draws(built_report):
    """A task named in a caption is a panel of the figure drawn from the same tables."""
    from matplotlib.figure import Figure

    from posbench import tasks

    folder, _ = built_report
    tables = load(folder / "tables")
    for spec in figures.REPORT_FIGURES:
        if spec.missing(tables) is not None:
            continue
        figure = Figure(figsize=(layout.CONTENT_W, spec.height))
        spec.draw(figure, (0.0, 0.0, 1.0, 1.0), tables)
        titles = " ".join(ax.get_title() for ax in figure.axes)
        named = {task for task in tasks.names() if re.search(rf"\b{task}\b", spec.caption)}
        assert {task for task in named if not re.search(rf"\b{task}\b", titles)} == set(), spec.name


def test_no_page_holds_more_running_text_than_a_reader_takes_in(built_report):
    (laid_out,) = documents
    assert 0 < max(laid_out.body_lines) <= layout.MAX_BODY_LINES


def test_the_appendix_states_the_runs_interval_levels_and_seeds(built_report):
    folder, _ = built_report
    text = pdf_text(folder / "report.pdf")
    appendix = "".join(text[next(i for i, page in enumerate(text) if "AppendixA.How" in page):])
    deciding = load(folder / "tables").get("verdicts").query("decides").dropna(subset=["effect"])
    assert squeeze(f"intervals at {100 * (1 - 2 * deciding['alpha_look'].iloc[0]):.1f} %") in appendix
    for line in deciding.itertuples():
        assert squeeze(f"{line.comparison} {line.n_added}/{line.n_comparator} (look {line.look:g})") in appendix
    assert "95%Welchinterval" not in appendix and ">=10seeds" not in appendix


def test_a_word_wider_than_its_column_is_broken_not_spilled():
    narrow = layout.text_width("rope_per_mo", layout.SMALL)
    lines = layout.wrap("rope_per_modality = mrope_mosaic", narrow, layout.SMALL)
    assert "".join(lines).replace(" ", "") == "rope_per_modality=mrope_mosaic"
    assert len(lines) > 2 and all(layout.text_width(line, layout.SMALL) <= narrow for line in lines)
    assert lines[0] == "rope_per_"  # cut after an underscore


def test_report_writes_each_figure_as_a_png_and_its_caption_from_the_spec(built_report):
    """The caption file, rendered as ``snakemake --report`` renders it (Jinja, then reStructuredText),
    reads exactly as the spec's title and caption: markup characters in a caption stay text."""
    import docutils.core
    import jinja2

    from posbench.report.figures import REPORT_FIGURES

    folder, _ = built_report
    names = sorted(s.name for s in REPORT_FIGURES)
    assert sorted(p.stem for p in (folder / "plots").glob("*.png")) == names
    assert sorted(p.stem for p in (folder / "plots").glob("*.rst")) == names
    assert any("_" in spec.caption or "*" in spec.caption for spec in REPORT_FIGURES)  # escaping is exercised
    for spec in REPORT_FIGURES:
        rst = jinja2.Environment().from_string((folder / "plots" / f"{spec.name}.rst").read_text()).render()
        tree = docutils.core.publish_doctree(rst, settings_overrides={"report_level": 5})
        paragraphs = [p.astext() for p in tree.findall(docutils.nodes.paragraph)]
        assert paragraphs == [spec.title, spec.caption]


# The report rule's outputs flagged for `snakemake --report`, as Snakemake parses the workflow.
REPORT_OUTPUTS = """
import json, os, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import is_flagged
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

snakefile, configfile, workdir = map(Path, sys.argv[1:])
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(ResourceSettings(cores=1), ConfigSettings(configfiles=[configfile]),
                            snakefile=snakefile, workdir=workdir)
    rule = workflow._workflow.get_rule("report")
    flagged = [(f, f.flags["report"]) for f in rule.output if is_flagged(f, "report")]
    print(json.dumps({"flagged": [[str(f), os.path.normpath(r.caption.get_path_or_uri(secret_free=True)), r.category]
                                  for f, r in flagged],
                      "captions": [str(f) for f in rule.output.captions]}))
"""


def test_the_workflow_reports_every_figure_with_its_spec_caption_and_category_and_no_other(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from posbench.report.figures import REPORT_FIGURES

    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, "-c", REPORT_OUTPUTS, str(root / "Snakefile"),
                          str(root / "workflow" / "smoke.yaml"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    plots = "results/smoke/plots"
    assert found["flagged"][0] == ["results/smoke/report.pdf", str(root / "workflow" / "report" / "report_pdf.rst"),
                                   "Report"]
    assert found["flagged"][1:] == [[f"{plots}/{s.name}.png", str(tmp_path / plots / f"{s.name}.rst"), s.category]
                                    for s in REPORT_FIGURES]
    assert found["captions"] == [f"{plots}/{s.name}.rst" for s in REPORT_FIGURES]  # the job's outputs


def test_fewer_than_ten_seeds_make_every_row_inconclusive(tmp_path):
    make_tables(tmp_path / "tables", seeds=SEEDS[:3])
    frame = judged(tmp_path / "tables")
    assert set(row_verdicts(frame).values()) == {"inconclusive"}
    lines = [line for row in guidance.ROWS for line in words.evidence_lines(words.of_row(frame, row), frame.iloc[0:0])]
    assert all("descriptive only" in line and "n = 3/3 seeds" in line for line in lines if "effect" in line)


def test_missing_tables_give_sentences_not_crashes(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "accuracy.csv").write_text("\n")  # what aggregate writes for no rows
    build_report(tmp_path / "tables", tmp_path / "report.pdf")
    everything = "".join(pdf_text(tmp_path / "report.pdf"))
    absent = everything[everything.index("Notshown:" + squeeze(figures.FIGURES[0].title)):]  # one line names them
    assert "(analytic.csvisnotin" in absent and "(cost.csvisnotin" in absent and "(accuracy.csvisempty" in absent
    for spec in figures.FIGURES[:2]:  # no empty section
        assert squeeze(spec.title) not in everything[:everything.index("Notshown:")]


def test_a_verdicts_table_that_judged_nothing_gives_a_sentence_in_the_method(tmp_path):
    (tmp_path / "tables").mkdir()  # a smoke run's judge step: comparisons declared, none with results
    (tmp_path / "tables" / "verdicts.csv").write_text("declaration_sha256,decides\n")
    build_report(tmp_path / "tables", tmp_path / "report.pdf")
    assert squeeze("No comparison decided a row in these tables.") in "".join(pdf_text(tmp_path / "report.pdf"))


def test_without_a_cjk_font_english_lines_and_one_warning(tmp_path, monkeypatch):
    (tmp_path / "tables").mkdir()  # no tables: page 1 still lists every row
    monkeypatch.setattr(style, "cjk_family", lambda: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_report(tmp_path / "tables", tmp_path / "report.pdf")
    assert [str(w.message) for w in caught if "CJK" in str(w.message)] == [
        "posbench report: no CJK font found (install fonts-wqy-microhei); the guidance rows are shown in English only"]
    first = pdf_text(tmp_path / "report.pdf")[0]
    assert "标准" not in first and squeeze(guidance.ROWS[0].english) in first


def test_cli_bad_folder_is_one_line_and_exit_2(tmp_path, capsys):
    from posbench.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["report", "--tables", str(tmp_path / "nope"), "--out", str(tmp_path / "r.pdf")])
    error = capsys.readouterr().err
    assert stop.value.code == 2
    assert error.count("\n") == 1 and "--tables" in error and not (tmp_path / "r.pdf").exists()


def test_aggregate_and_report_refuse_empty_inputs_in_one_line(tmp_path, capsys):
    from posbench.__main__ import main

    (tmp_path / "records").mkdir()
    assert main(["aggregate", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "tables")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no *.json records under" in err[0] and not (tmp_path / "tables").exists()
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "cost.csv").write_text("\n")  # what aggregate writes for an empty table
    assert main(["report", "--tables", str(tmp_path / "tables"), "--out", str(tmp_path / "report.pdf")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --tables: no rows in" in err[0] and not (tmp_path / "report.pdf").exists()


def test_aggregate_analytic_only_adds_the_table_to_a_folder_without_records(tmp_path, capsys):
    from posbench.__main__ import main

    assert main(["aggregate", "--out", str(tmp_path)]) == 1  # neither records nor --analytic-only
    assert capsys.readouterr().err == ("posbench aggregate: error: argument --records: required unless "
                                       "--analytic-only; nothing written\n")
    (tmp_path / "cost.csv").write_text("kept\n")
    assert main(["aggregate", "--out", str(tmp_path), "--analytic-only"]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'analytic.csv'}\n"
    written = pd.read_csv(tmp_path / "analytic.csv")
    pd.testing.assert_frame_equal(written, pd.read_csv(io.StringIO(analytic_table().to_csv(index=False))))
    assert set(written["quantity"]) == set(analytic.QUANTITIES) and (tmp_path / "cost.csv").read_text() == "kept\n"


def test_a_training_free_scaling_is_an_arm_of_the_extrapolation_figure(tmp_path):
    """``rope+yarn:4`` rows (eval_scaling) get a colour and a legend entry of their own."""
    from posbench.report import figures

    make_tables(tmp_path)
    rows = pd.read_csv(tmp_path / "extrapolation.csv")
    arm = rows[rows["encoding"] == "rope"].assign(encoding="rope+yarn:4", value=lambda r: r["value"] - 0.01)
    pd.concat([rows, arm]).to_csv(tmp_path / "extrapolation.csv", index=False)
    figure = figures.Figure(figsize=(8, 10))
    figures.draw_extrapolation(figure, (0.05, 0.05, 0.95, 0.95), load(tmp_path))
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert "rope+yarn:4" in labels and "rope" in labels
    assert style.palette(["rope+yarn:4"])["rope+yarn:4"] not in {style.colour(e) for e in ("rope", "none")}


def test_the_sliding_score_is_a_dashed_line_beside_each_character_lm_curve(tmp_path):
    """Each lm_prose arm gets a dashed line through its seeds' mean sliding score at every length; a
    task without one (reverse: NaN) gets none."""
    from posbench.report import figures

    make_tables(tmp_path)
    rows = pd.read_csv(tmp_path / "extrapolation.csv")
    lm = rows["task"] == "lm_prose"
    rows.loc[lm, "value_sliding"] = rows.loc[lm, "value"] - 0.1 * np.log2(rows.loc[lm, "length_ratio"])
    rows.to_csv(tmp_path / "extrapolation.csv", index=False)
    figure = figures.Figure(figsize=(8, 10))
    figures.draw_extrapolation(figure, (0.05, 0.05, 0.95, 0.95), load(tmp_path))
    panels = {ax.get_title().split(" (")[0]: ax for ax in figure.axes}
    def dashed_lines(ax):  # (seaborn's legend handles are lines without data)
        return [line for line in ax.get_lines() if line.get_linestyle() == "--" and len(line.get_xdata())]

    dashed = dashed_lines(panels["lm_prose"])
    means = rows[lm].groupby(["encoding", "length_ratio"])["value_sliding"].mean()
    assert len(dashed) == rows.loc[lm, "encoding"].nunique()
    for line in dashed:
        encoding = next(e for e in means.index.levels[0] if style.palette([e])[e] == line.get_color())
        assert np.allclose(line.get_ydata(), means[encoding].to_numpy())
    assert not dashed_lines(panels["reverse"])


def test_cost_panels_never_mix_gpu_models_or_modes():
    from posbench.report import figures

    cost = pd.DataFrame({"device": ["cuda", "cuda", "cuda", "cpu"], "mode": ["infer", "infer", "train", "infer"],
                         "device_name": ["NVIDIA H200", "NVIDIA A100", "NVIDIA H200", "AMD EPYC"]})
    assert figures._machine_columns(cost).tolist() == [
        "cuda (NVIDIA H200), infer", "cuda (NVIDIA A100), infer", "cuda (NVIDIA H200), train", "cpu (AMD EPYC), infer"]


def test_passkey_heat_map_pools_seeds_per_depth_and_length(tmp_path):
    """Items 0 and 11 share depth 0: the cell is their mean over both seeds; depth 1.0 is items 10 and 21."""
    from posbench.report import figures

    make_tables(tmp_path)
    items = pd.DataFrame([{"machine": "m", "task": "passkey", "encoding": "alibi", "size": "tiny", "seed": seed,
                           "eval_len": length, "item": item, "loss_sum": 1.0, "scored": 4, "correct": 4,
                           "exact": int(item % 11 == 10 or (item == 0 and seed == 0 and length == 128))}
                          for seed in (0, 1) for length in (128, 256) for item in range(22)])
    items.to_parquet(tmp_path / "items.parquet", index=False)
    tables = load(tmp_path)
    cells = figures.passkey_cells(tables).set_index(["eval_len", "depth"])["exact"]
    assert cells[128, 0.0] == 0.25 and cells[256, 0.0] == 0.0  # item 0 right once in 4 (2 items × 2 seeds)
    assert cells[128, 1.0] == cells[256, 1.0] == 1.0 and len(cells) == 2 * 11
    assert figures.passkey_missing(tables) is None
    figure = figures.Figure(figsize=(8, 4))
    figures.draw_passkey(figure, (0.0, 0.0, 1.0, 1.0), tables)
    ax, bar = figure.axes
    assert ax.get_title() == "alibi" and ax.images[0].get_array().shape == (11, 2)
    assert bar.get_ylabel() == "exact match (share of keys)" and bar.get_ylim() == (0.0, 1.0)
    # five encodings: two rows of panels, the y label on the first column only, one colour bar for all
    pd.concat([items.assign(encoding=name) for name in ("alibi", "none", "rope", "sinusoidal", "t5")]).to_parquet(
        tmp_path / "items.parquet", index=False)
    figure = figures.Figure(figsize=(8, 4))
    figures.draw_passkey(figure, (0.0, 0.0, 1.0, 1.0), load(tmp_path))
    *panels, bar = figure.axes
    assert [ax.get_ylabel() for ax in panels] == ["key depth", "", "", "", "key depth"]
    assert bar.get_ylabel() == "exact match (share of keys)" and not bar.images
    (tmp_path / "items.parquet").unlink()
    assert figures.passkey_missing(load(tmp_path)) == "items.parquet (per-item results) is missing"


def test_loss_by_position_curves_take_each_tasks_longest_windows_in_bits(tmp_path):
    """lm_prose at 512 (16 runs) is drawn and its 64-position windows are not; passkey, scored at the end
    only (one run), is left out; the loss in nats becomes bits."""
    from posbench.report import figures

    make_tables(tmp_path)
    rows = [{"machine": "m", "status": "ok", "task": task, "encoding": encoding, "seed": seed, "train_len": 64,
             "eval_len": length, "start": start, "stop": start + length // runs, "loss": np.log(2) * (2 + seed),
             "scored": 16 * length // runs}
            for task, runs in (("lm_prose", 16), ("passkey", 1)) for encoding in ("rope", "alibi")
            for seed in (0, 1) for length in (64, 512) for start in range(0, length, length // runs)]
    pd.DataFrame(rows).to_csv(tmp_path / "positions.csv", index=False)
    tables = load(tmp_path)
    curves = figures.position_curves(tables)
    assert set(curves["task"]) == {"lm_prose"} and set(curves["eval_len"]) == {512}
    assert len(curves) == 2 * 2 * 16 and curves["bits"].tolist()[:2] == pytest.approx([2.0, 2.0])
    assert curves["x"].min() == 16 and curves["x"].max() == 512 - 16
    assert figures.positions_missing(tables) is None
    figure = figures.Figure(figsize=(8, 4))
    figures.draw_positions(figure, (0.0, 0.0, 1.0, 1.0), tables)
    (ax,) = figure.axes
    assert ax.get_title() == "lm_prose at 512 (lower is better)" and len(ax.lines) >= 3  # two means and the mark
    (tmp_path / "positions.csv").unlink()
    assert figures.positions_missing(load(tmp_path)) == f"positions.csv is not in {tmp_path}"


def test_sweep_figures_read_the_swept_cells_and_every_other_figure_the_plain_ones(tmp_path):
    """Width and length sweeps are drawn against parameters and training length; the accuracy figure
    (and every other reader of ``Tables.ok``) keeps the cells at the task's length and the size's width."""
    from posbench.report import figures

    make_tables(tmp_path)
    accuracy = pd.read_csv(tmp_path / "accuracy.csv").assign(d_model=64)
    base = {"machine": "m", "status": "ok", "size": "tiny", "metric": "bits_per_char", "higher_is_better": False,
            "steps": 300}  # the plain cells' budget: one experiment per line (posbench.experiments)
    swept = [{**base, "task": "lm_prose", "encoding": encoding, "seed": seed, "train_len": 64, "d_model": width,
              "params_total": params, "value": 3.0 - width / 100 + seed / 1000}
             for encoding, width, params in (("sinusoidal", 32, 31552), ("sinusoidal", 128, 421120),
                                             ("sinusoidal_concat", 32, 108928)) for seed in (0, 1)]
    swept += [{**base, "task": "lm_prose", "encoding": "rope", "seed": seed, "train_len": length, "d_model": 64,
               "params_total": 112256, "value": 2.0 + length / 1000} for length in (128, 256) for seed in (0, 1)]
    pd.concat([accuracy, pd.DataFrame(swept)]).to_csv(tmp_path / "accuracy.csv", index=False)
    tables = load(tmp_path)
    plain = tables.ok("accuracy", "task", "value").query("task == 'lm_prose'")
    assert len(plain) == 7 * len(SEEDS) and set(zip(plain["train_len"], plain["d_model"])) == {(64, 64)}
    frontier = figures.swept_rows(tables, "d_model")
    assert set(frontier["task"]) == {"lm_prose"} and set(frontier["train_len"]) == {64}
    assert {("sinusoidal", 32), ("sinusoidal", 64), ("sinusoidal", 128), ("sinusoidal_concat", 32),
            ("sinusoidal_concat", 64)} <= set(zip(frontier["encoding"], frontier["d_model"]))
    assert ("rope", 64) in set(zip(frontier["encoding"], frontier["d_model"]))  # the grid's plain cell
    lengths = figures.swept_rows(tables, "train_len")
    assert set(lengths["task"]) == {"lm_prose"} and set(lengths["d_model"]) == {64}
    assert sorted(set(lengths.loc[lengths["encoding"] == "rope", "train_len"])) == [64, 128, 256]
    figure = figures.Figure(figsize=(8, 4))
    figures.draw_frontier(figure, (0.0, 0.0, 1.0, 1.0), tables)
    ax = next(a for a in figure.axes if a.get_title())
    assert ax.get_xscale() == "log" and ax.get_title() == "lm_prose (lower is better)"
    assert {t.get_text() for t in ax.texts} >= {"d 32", "d 64", "d 128"}
    figure = figures.Figure(figsize=(8, 4))
    figures.draw_training_length(figure, (0.0, 0.0, 1.0, 1.0), tables)
    ax = next(a for a in figure.axes if a.get_title())
    assert ax.get_title() == "lm_prose (lower is better)" and ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "128", "256"]
    for axis, what in (("d_model", "width"), ("train_len", "training length")):
        assert figures.sweep_missing(axis, what)(tables) is None
        assert figures.sweep_missing(axis, what)(load(tmp_path.parent)) is not None
    make_tables(tmp_path / "plain")
    assert figures.sweep_missing("d_model", "width")(load(tmp_path / "plain")) == (
        "accuracy.csv has no column d_model")


def test_layout_figure_names_how_each_arm_sees_the_grid_and_the_text():
    from posbench.report import figures

    names = ["none", "sinusoidal", "sinusoidal_concat_fixed", "rope_2d", "mrope", "sinusoidal_per_modality"]
    traits = [encodings.traits(name) for name in names]  # the columns aggregate writes from each encoding's traits
    rows = pd.DataFrame({"encoding": names, "pe_hook": [t.hook for t in traits],
                         "pe_combine": [t.combine for t in traits], "pe_axes": [t.axes for t in traits]})
    assert figures.grid_labels(rows) == {
        "none": "none (none, —)", "sinusoidal": "sinusoidal (1-D, add)",
        "sinusoidal_concat_fixed": "sinusoidal_concat_fixed (1-D, concat (fixed width))",
        "rope_2d": "rope_2d (2-D, rotate q/k)", "mrope": "mrope (per modality, rotate q/k)",
        "sinusoidal_per_modality": "sinusoidal_per_modality (per modality, add)",
    }


def test_no_report_module_judges_it_reads_the_judge_steps_tables():
    """The report words verdicts.csv, claims.csv and advice.csv: no module under posbench/report/ imports
    a statistics package or a module that judges (posbench.evidence, .advise, .verdicts, .claims)."""
    import ast
    from pathlib import Path

    import posbench.report

    judging = {"scipy", "statsmodels", "posbench.evidence", "posbench.advise", "posbench.verdicts", "posbench.claims",
               "posbench.shapes", "posbench.statistics", "posbench.arms", "posbench.trajectories"}
    for path in Path(posbench.report.__file__).parent.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        assert not {name for name in imported if name.split(".")[0] in judging or name in judging}, path.name


# Modules the report and the claims may import although torch lies behind them, each with why; the walk below
# stops at them. Everything else they reach, at any depth, imports no torch: no model, FLOP count, encoding or
# device code runs when the report is drawn or a claim judged (their numbers come from analytic.csv). The
# package's own __init__ is not walked: it re-exports the model's API (posbench.build_model, ...), so at run time
# any posbench import still loads torch through it.
READ_THROUGH_TORCH = {
    "posbench.encodings": "the registry of encoding names and traits: its entries are torch modules",
    "posbench.tasks": "the registry of tasks (a task's default training length): its entries are torch modules",
}


def posbench_imports(name: str) -> tuple[set[str], bool]:
    """The posbench modules ``name`` imports anywhere in its source, with the packages above them (importing a
    module runs its packages' __init__; the root's aside) and a package's own modules; and whether ``name``
    imports torch itself."""
    from test_imports import MODULES, containing_module

    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found, torch = set(), False
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            sources, names = [], [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (parent, node.module) if part)
            sources, names = [source], [f"{source}.{alias.name}" for alias in node.names]
        else:
            continue
        torch |= any(imported.split(".")[0] == "torch" for imported in sources + names)
        for module in filter(None, (containing_module(imported, MODULES) for imported in names)):
            parts = module.split(".")
            found |= {".".join(parts[:end]) for end in range(2, len(parts) + 1)}
    return {module for module in found if module in MODULES and module != name}, torch


def torch_walk(start: str, stop: set[str]) -> tuple[list[str], set[str]]:
    """Each import path from ``start`` to a module that imports torch, not entering ``stop`` nor a module below
    one; and the modules of ``stop`` the walk met."""
    def stop_of(name: str) -> str | None:
        return next((s for s in stop if name == s or name.startswith(f"{s}.")), None)

    parent, queue, found, met = {start: None}, [start], [], set()
    while queue:
        name = queue.pop(0)
        imported, torch = posbench_imports(name)
        if torch:
            path = [name]
            while parent[path[-1]]:
                path.append(parent[path[-1]])
            found.append(" <- ".join(path))
        for target in sorted(imported - set(parent)):
            if stop_of(target):
                met.add(stop_of(target))
            else:
                parent[target] = name
                queue.append(target)
    return found, met


def read_only_modules() -> list[str]:
    from test_imports import MODULES

    return [name for name in MODULES if name == "posbench.claims" or name.split(".")[:2] == ["posbench", "report"]]


@pytest.mark.parametrize("name", read_only_modules())
def test_the_report_and_the_claims_import_no_torch_at_any_depth(name):
    assert torch_walk(name, set(READ_THROUGH_TORCH))[0] == []


def test_each_module_read_through_is_met_and_has_torch_behind_it():
    met = set().union(*(torch_walk(name, set(READ_THROUGH_TORCH))[1] for name in read_only_modules()))
    assert met == set(READ_THROUGH_TORCH)
    assert all(torch_walk(module, set())[0] for module in READ_THROUGH_TORCH)


def test_the_torch_walk_finds_a_path_behind_a_package_and_stops_where_told(tmp_path, monkeypatch):
    import test_imports

    package = tmp_path / "posbench"
    (package / "reg").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "reader.py").write_text("def f():\n    from posbench import reg\n")
    (package / "reg" / "__init__.py").write_text("from posbench.reg.entry import E\n")
    (package / "reg" / "entry.py").write_text("import torch.nn\n")
    monkeypatch.setattr(test_imports, "MODULES", test_imports.modules_of(package))
    assert torch_walk("posbench.reader", set()) == (["posbench.reg.entry <- posbench.reg <- posbench.reader"], set())
    assert torch_walk("posbench.reader", {"posbench.reg"}) == ([], {"posbench.reg"})


def test_the_learned_vs_sinusoidal_claim_reads_its_arms_as_the_vaswani_shape_does(tmp_path):
    # the shape's confirm stage (seeds from 100) at 0.027, the rate its pilot (seeds 0-6, two rates) chose, and
    # sinusoidal also at 2,000 steps (a comparison's arm): the claim reads the stage's 500-step seeds only
    def arm(encoding, values, lr, steps=500, first_seed=100, validation_loss=1.6):
        return [{"task": "lm_prose", "encoding": encoding, "size": "tiny", "seed": seed, "status": "ok",
                 "length_ratio": 1.0, "value": value, "token_accuracy": 0.5, "chance": 4.7, "token_chance": 0.01,
                 "lr": lr, "validation_loss": validation_loss, "steps": steps}
                for seed, value in enumerate(values, first_seed)]
    rows = (arm("learned", [2.2 + 0.01 * k for k in range(7)], 0.027) + arm("learned", [2.5] * 7, 0.027, first_seed=0)
            + arm("learned", [3.0] * 7, 0.009, first_seed=0, validation_loss=1.9)
            + arm("sinusoidal", [2.6] * 7, 0.027, first_seed=0)
            + arm("sinusoidal", [2.21 + 0.01 * k for k in range(7)], 0.027)
            + arm("sinusoidal", [1.5] * 7, 0.027, steps=2000))
    pd.DataFrame(rows).to_csv(tmp_path / "extrapolation.csv", index=False)
    claim = claims.claim_learned_vs_sinusoidal(load(tmp_path))
    assert claim.ours.startswith("measured, learned − sinusoidal: lm_prose (tiny, as shape vaswani2017-e reads it): "
                                 "+0.01 [") and "n = 7/7 → comparator not better by δ" in claim.ours
    assert claim.verdict == f"cited: {evidence.NOT_SUPPORTED}; ours: {evidence.NOT_SUPPORTED}"


def test_the_extrapolation_claim_reads_each_budget_apart_at_its_chosen_rate(tmp_path):
    # sinusoidal on lm_prose at 500 steps (two rates; validation prefers 0.027) and, as a comparison's arm, at
    # 2,000: two entries, never one pool, the 500-step one at 0.027 alone
    def arm(values_by_ratio, lr, validation_loss, steps):
        return [{"task": "lm_prose", "encoding": "sinusoidal", "size": "tiny", "seed": seed, "status": "ok",
                 "metric": "bits_per_char", "higher_is_better": False, "length_ratio": ratio, "value": value, "lr": lr,
                 "validation_loss": validation_loss, "steps": steps}
                for ratio, values in values_by_ratio.items() for seed, value in enumerate(values)]
    rows = (arm({1.0: [2.0] * 7, 2.0: [2.01, 2.02, 2.0, 2.01, 2.02, 2.0, 2.01]}, 0.027, 1.6, 500)
            + arm({1.0: [2.5] * 7, 2.0: [4.0] * 7}, 0.009, 1.9, 500)
            + arm({1.0: [1.8] * 7, 2.0: [3.0, 3.1, 3.2, 3.0, 3.1, 3.2, 3.0]}, 0.027, 1.4, 2000))
    pd.DataFrame(rows).to_csv(tmp_path / "extrapolation.csv", index=False)
    claim = claims.claim_sinusoidal_extrapolation(load(tmp_path))
    first, second = claim.ours.split("; ")
    assert first.endswith("lm_prose, tiny, 500 steps: +0.01 [+0.00245, +0.0176] vs δ 0.05, n = 7/7 → "
                          "comparator not better by δ")
    assert second.startswith("lm_prose, tiny, 2000 steps: +1.29 [") and second.endswith("→ comparator better by more "
                                                                                       "than δ")


# ----- presentation: what a reader sees at 100 % ----------------------------------------------------
def test_a_long_panel_title_shrinks_then_breaks_within_its_room_and_a_short_one_is_kept():
    figure = figures.Figure(figsize=(6, 3))
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    long = "lm_prose · 2,000 steps at widths 32, 64, 128 (7–20 seeds; lower is better)"
    figures.fit_title(right, long)
    room = figures.title_room(right)
    renderer = figure.canvas.get_renderer()
    assert right.title.get_window_extent(renderer).width / figure.dpi <= room
    assert right.title.get_fontsize() == figures.SMALLEST_TITLE and right.get_title().replace("\n", " ") == long
    figures.fit_title(left, "scan (lower is better)")
    assert left.get_title() == "scan (lower is better)" and left.title.get_fontsize() > figures.SMALLEST_TITLE
    # the room: the panel and, alike on both sides, the nearer of the figure's edge and half the gap between panels
    gap = (right.get_position().x0 - left.get_position().x1) * 6
    edge = (1 - right.get_position().x1) * 6 - figures.EDGE_ROOM
    assert room == pytest.approx(right.get_position().width * 6 + 2 * min(gap / 2, edge))


def test_width_ticks_keep_every_value_a_narrow_axis_has_room_for_each_labelled_apart():
    close = [108_928.0, 112_256.0]  # adding at d = 64 and concat at d = 32: 3 % apart
    assert figures.apart(close, (105_000.0, 116_000.0)) == close  # the axis spans only them: both labelled
    assert figures.apart(close, (1e5, 1e7)) == close[:1]  # two decades: they would print over each other
    assert figures.thousands(close) == ["109k", "112k"]
    assert figures.thousands([108_928.0, 109_100.0]) == ["108.9k", "109.1k"]


def test_log_axes_label_one_two_and_five_times_each_power_of_ten():
    figure = figures.Figure(figsize=(3, 3))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot([256, 4096], [14.0, 190.0])
    ax.set(xscale="log", yscale="log")
    figures.readable_log(ax.yaxis)
    figure.canvas.draw()
    shown = [t.get_text() for t in ax.get_yticklabels() if ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]]
    assert shown == ["20", "50", "100", "200"]  # the data span 14 to 190, the axis a little more


def test_every_registered_encoding_and_a_few_scaled_arms_have_colours_of_their_own():
    arms = ["rope+yarn:16", "rope+yarn:4", "rope+dynamic:4"]
    colours = style.palette(arms)
    named = [*encodings.names(), *arms]
    assert len({colours[name] for name in named}) == len(named)


def test_a_heading_wider_than_the_page_breaks_into_lines_inside_the_margins(tmp_path):
    from matplotlib.backends.backend_pdf import PdfPages

    title = "What would each encoding cost at deployed architectures? (projected, not measured) " * 2
    with PdfPages(tmp_path / "h.pdf") as pdf:
        doc = layout.Document(pdf, "footer")
        doc.new_page()
        doc.heading(title, layout.H2)
        lines = [text.get_text() for text in doc.figure.texts]
        doc.close_page()
    assert len(lines) > 1 and " ".join(lines) == title.strip()
    assert max(layout.text_width(line, layout.H2) for line in lines) <= layout.CONTENT_W


def test_the_advice_tables_headers_and_arm_names_each_fit_one_line():
    from posbench.report import advice

    columns = [w * layout.CONTENT_W - 2 * layout.CELL_PAD - layout.COLUMN_GAP for w in advice.WIDTHS]
    assert sum(advice.WIDTHS) == pytest.approx(1.0)
    header = layout.Style(size=7.5, weight="bold")
    assert all(layout.text_width(h, header) <= width for h, width in zip(advice.HEADER, columns))
    arm = layout.Style(size=8, weight="bold")
    assert layout.text_width("sinusoidal = rope", arm) <= columns[1]  # a tie of two, the reference's widest
    assert layout.text_width("rope+dynamic:4", layout.SMALL) <= columns[2]  # the longest scaled arm's name

