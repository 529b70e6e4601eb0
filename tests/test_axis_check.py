"""The axis check (posbench/axis_check.py): one definition for every hook, the figures it gives the
mosaic's arms, and the judge step refusing a declared comparison whose arm is blind on an axis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from helpers import declared_rules

from posbench import axis_check, comparisons, encodings, guidance
from posbench import verdicts as judge
from posbench.comparisons import ArmSpec
from posbench.encodings import registry
from posbench.encodings.rope import MRope
from posbench.model import ModelConfig, build_model
from posbench.positions import IMAGE, TEXT, Positions
from posbench.report import verdicts as report
from posbench.tables import Tables

PLANTED = "planted_column_blind"  # M-RoPE with no pair for columns: blind on them by construction


@pytest.fixture
def planted(monkeypatch):
    """A registered arm that turns rows and text but never columns: (2, 6, 0) of 8 pairs, scaled to any head."""
    monkeypatch.setitem(registry._REGISTRY, PLANTED, (MRope, {"mrope_section": (2, 6, 0), "section_pairs": 8}))
    yield PLANTED
    axis_check.logit_change.cache_clear()


def positions_for(encoding) -> Positions:
    """Twelve tokens as the encoding reads them: a sequence, a 3×4 grid, or 8 patches on a 2×4 grid then 4
    words laid out as the mosaic lays them (text j at (4 + j, 4 + j, 4 + j))."""
    if encoding.axes != "multimodal":
        return encoding.positions(12)
    cells = torch.arange(8)
    patches = torch.stack([torch.zeros_like(cells), cells // 4, cells % 4], 1)  # (8, 3)
    text = (4 + torch.arange(4))[:, None].expand(-1, 3)  # (4, 3)
    return Positions.from_ids(torch.cat([patches, text]), torch.tensor([IMAGE] * 8 + [TEXT] * 4))


@pytest.mark.parametrize("name", encodings.names())
def test_moving_every_key_changes_each_column_as_moving_that_key_alone(name, float64):
    """Why one pass per axis is the definition: at the first layer, logit (i, j) reads query i's and key j's
    positions only, for every registered encoding (its bias included)."""
    torch.manual_seed(0)
    options = {"grid": (3, 4)} if encodings.traits(name).axes == "2d" else {}
    model = build_model(ModelConfig(vocab_size=16, d_model=32, n_layers=1, n_heads=2, max_len=16, encoding=name,
                                    encoding_options=options, causal=False)).eval()
    inputs = torch.randint(0, 16, (2, 12))
    positions = positions_for(model.encoding)
    with torch.no_grad():
        before = axis_check.first_layer_logits(model, inputs, positions, positions)  # (B, h, L, L)
        for axis in range(positions.axes):
            moved = axis_check.stepped(positions, axis)
            every = axis_check.first_layer_logits(model, inputs, positions, moved)
            assert torch.equal(every, before) == (model.encoding.reads != "positions")  # none, or from content
            for key in (0, 5, 11):
                ids = positions.ids.clone()
                ids[key] = moved.ids[key]
                alone = axis_check.first_layer_logits(model, inputs, positions,
                                                      Positions.from_ids(ids, positions.modality))
                torch.testing.assert_close(every[..., key], alone[..., key], atol=1e-9, rtol=0)


def test_a_step_is_one_up_or_one_down_at_the_largest_id():
    ids = torch.tensor([[0, 0, 0], [0, 1, 3], [4, 4, 4], [5, 5, 5]])
    moved = axis_check.stepped(Positions.from_ids(ids), 2)
    assert moved.ids.tolist() == [[0, 0, 1], [0, 1, 4], [4, 4, 5], [5, 5, 4]]
    assert axis_check.stepped(Positions.arange(4), 0).ids.tolist() == [1, 2, 3, 2]
    assert axis_check.stepped(Positions.from_ids(torch.zeros(3, dtype=torch.long)), 0).ids.tolist() == [1, 1, 1]


def test_the_mosaic_arms_figures():
    """Size tiny, seed 0 (a 16-wide head: mrope's sections (2, 3, 3), mrope_qwen3vl's (4, 2, 2) interleaved):
    mrope barely turns with columns, the per-modality arms and the interleaved preset see every axis."""
    figures = {name: axis_check.sensitivity(ArmSpec("mosaic_qa", name), "tiny")
               for name in ("mrope", "mrope_qwen2vl", "mrope_qwen3vl", "rope_per_modality", "sinusoidal", "rope")}
    assert figures["rope"] == {"sequence": 1.0}
    assert list(figures["sinusoidal"]) == ["sequence"] and figures["sinusoidal"]["sequence"] > 0.5
    mrope = figures["mrope"]
    assert list(mrope) == ["text/time", "row", "column"]
    assert 0.002 < mrope["column"] < 0.005 < 0.05 < mrope["row"] < 0.2 < 0.9 < mrope["text/time"] < 1.2
    assert figures["mrope_qwen2vl"]["column"] < mrope["column"]  # base 1e6: the column pairs turn slower still
    assert min(figures["mrope_qwen3vl"].values()) > axis_check.BLIND
    assert min(figures["rope_per_modality"].values()) > 0.1


def test_a_planted_blind_arm_is_exactly_blind_on_its_axis_and_refused(planted):
    figures = axis_check.sensitivity(ArmSpec("mosaic_qa", planted), "tiny")
    assert figures["column"] == 0.0 and figures["row"] > axis_check.BLIND and figures["text/time"] > axis_check.BLIND
    comparison = comparisons.Comparison("planted", "multimodal", "mosaic_qa", "accuracy", 1.0, "sinusoidal", planted,
                                        0.05, 0.05, ("default",))
    with pytest.raises(ValueError) as error:
        axis_check.refuse_blind([comparison], {"mosaic_qa": ["tiny"]})
    assert str(error.value).startswith(
        f"comparison planted: arm {planted} is blind on the column axis of mosaic_qa at tiny: a key moved one step "
        "changes the first layer's logits by 0.00% of what 1-D rope changes them (below 1%)")
    axis_check.refuse_blind([comparison], {"lm_prose": ["tiny"]})  # no results for its task: nothing to refuse
    withdrawn = comparisons.Comparison(*list(comparison.__dict__.values())[:10], withdrawn="axis-blind: planted")
    axis_check.refuse_blind([withdrawn], {"mosaic_qa": ["tiny"]})


def test_an_arm_without_position_is_not_checked():
    comparison = comparisons.Comparison("floor", "multimodal", "mosaic_qa", "accuracy", 1.0, "sinusoidal", "none",
                                        0.05, 0.05, ("full",))
    assert axis_check.sensitivity(ArmSpec("mosaic_qa", "none"), "tiny") == {"sequence": 0.0}
    axis_check.refuse_blind([comparison], {"mosaic_qa": ["tiny"]})


def test_the_shipped_mosaic_mrope_is_refused_unless_withdrawn(tmp_path):
    declared = comparisons.load()
    shipped = declared.by_id["mosaic-mrope"]
    assert shipped.withdrawn.startswith("axis-blind: a key moved one column changes mrope's first-layer logits by "
                                        "0.32 %")
    assert shipped not in judge.deciding("default") and shipped in declared.in_preset("default")
    data = yaml.safe_load(comparisons.PATH.read_text())
    for entry in data["rows"]["multimodal"]:
        entry.pop("withdrawn", None)
    path = tmp_path / "comparisons.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"^comparison mosaic-mrope: arm mrope is blind on the column axis of "
                                         r"mosaic_qa at tiny: .* by 0\.32% of what 1-D rope"):
        axis_check.refuse_blind(list(comparisons.load(path).comparisons), {"mosaic_qa": ["tiny"]})


def mosaic_results(encodings_means: dict[str, float]) -> pd.DataFrame:
    """Twenty deciding seeds (the declared first seed on) around each mean, at mosaic_qa's 4,000 steps."""
    seeds = comparisons.load().seed_rule.first_seed + np.arange(20)
    spread = 0.01 * np.linspace(-1.5, 1.5, len(seeds))
    return pd.DataFrame([{"task": "mosaic_qa", "encoding": encoding, "size": "tiny", "seed": seed, "status": "ok",
                          "metric": "accuracy", "length_ratio": 1.0, "eval_len": 22, "value": mean + wobble,
                          "chance": 0.25, "token_accuracy": np.nan, "token_chance": np.nan, "steps": 4000,
                          "batch_size": 32}
                         for encoding, mean in encodings_means.items() for seed, wobble in zip(seeds, spread)])


def test_the_judge_step_shows_a_withdrawn_comparison_with_its_result_and_lets_it_decide_nothing():
    found = Tables({"extrapolation": mosaic_results({"sinusoidal": 0.80, "mrope": 0.43})}, {}, None)
    table = judge.verdict_tables(found, "default")[0]
    (line,) = table[table["comparison"] == "mosaic-mrope"].itertuples(index=False)
    assert (line.decides, line.withdrawn) == (False, comparisons.load().by_id["mosaic-mrope"].withdrawn)
    row = guidance.BY_KEY["multimodal"]
    assert report.of_row(table, row).empty  # nothing decides the row in the default preset now
    assert report.evidence_lines(report.of_row(table, row), report.of_row(table, row, decides=False)) == [
        f"withdrawn ({line.withdrawn}), its result: {line.line}"]
    assert line.line.startswith("mosaic_qa accuracy at 1× (tiny): mrope vs sinusoidal: effect -0.37")
    (shown,) = report.withdrawn(report.of_row(table, row, decides=False)).itertuples(index=False)  # page 1's line
    assert report.finding(shown) == f"withdrawn, decides nothing: {line.withdrawn}"
    assert report.decided_on(report.withdrawn(report.of_row(table, row, decides=False))) == "mosaic_qa trained at 22"


def test_the_judge_step_refuses_a_declared_blind_arm(planted, tmp_path, monkeypatch):
    entry = {"id": "mosaic-planted", "task": "mosaic_qa", "metric": "accuracy", "length_ratio": 1,
             "added": "sinusoidal", "comparator": planted, "margin": 0.05, "reference_spread": 0.05,
             "presets": ["full"]}
    path = tmp_path / "comparisons.yaml"
    path.write_text(yaml.safe_dump({**declared_rules(), "rows": {"multimodal": [entry]}}))
    monkeypatch.setattr(comparisons, "PATH", path)
    found = Tables({"extrapolation": mosaic_results({"sinusoidal": 0.80, planted: 0.43})}, {}, None)
    with pytest.raises(ValueError, match=rf"^comparison mosaic-planted: arm {planted} is blind on the column axis"):
        judge.verdict_tables(found, "full")[0]
    withdrawn = {**entry, "withdrawn": "axis-blind: planted"}
    path.write_text(yaml.safe_dump({**declared_rules(), "rows": {"multimodal": [withdrawn]}}))
    table = judge.verdict_tables(found, "full")[0]
    assert table[["comparison", "decides", "withdrawn"]].values.tolist() == [
        ["mosaic-planted", False, "axis-blind: planted"]]


def test_the_axes_table_lists_each_multi_axis_arm_once_per_axis():
    """axes.csv on the shipped declarations where mosaic_qa has results at tiny: mrope's three axes (its
    columns blind, as the withdrawal says) and the per-modality arm's; no 1-D arm (one axis)."""
    table = axis_check.table(list(comparisons.load().comparisons), {"mosaic_qa": ["tiny"]})
    mrope = table[table["encoding"] == "mrope"].set_index("axis")
    assert list(mrope.index) == ["text/time", "row", "column"] and mrope["blind"].tolist() == [False, False, True]
    assert mrope.loc["column", "ratio"] == pytest.approx(axis_check.sensitivity(ArmSpec("mosaic_qa", "mrope"),
                                                                                "tiny")["column"])
    assert "sinusoidal" not in set(table["encoding"]) and not table.duplicated(["encoding", "axis"]).any()
    assert set(table["task"]) == {"mosaic_qa"} and set(table["size"]) == {"tiny"}
    assert axis_check.table(list(comparisons.load().comparisons), {}).empty
