"""Published shapes: every outcome on planted tables (intervals as computed by hand), the shipped
declaration, and a one-line error for each kind of mistake in a shapes file."""

import math

import pandas as pd
import pytest
import yaml
from scipy import stats

from posbench import shapes, tasks, workflow
from posbench.comparisons import POWER_Z
from posbench.workflow_config import validate_config

CHANCE_BITS = 4.7  # lm_prose's unigram chance, about what the tables hold


def rows(task, encoding, values_by_ratio, chance=CHANCE_BITS, lr=0.003, validation_loss=1.0, token=0.9, steps=None,
         first_seed=0):
    """Extrapolation-table rows of one arm: ``values_by_ratio`` maps a length ratio to the per-seed values
    (seeds from ``first_seed``); trained for the task's own steps unless ``steps`` says otherwise."""
    steps = steps or tasks.get(task).steps
    return [{"task": task, "encoding": encoding, "size": "tiny", "seed": seed, "status": "ok", "length_ratio": ratio,
             "value": value, "token_accuracy": token, "chance": chance, "token_chance": 0.25, "lr": lr,
             "validation_loss": validation_loss, "steps": steps}
            for ratio, values in values_by_ratio.items() for seed, value in enumerate(values, first_seed)]


def shape(**changes):
    entry = {"id": "planted", "paper": "P", "figure": "Fig. 1", "published": "a > b", "task": "lm_prose",
             "metric": "bits_per_char", "length_ratio": 4, "ordering": ["alibi", "rope", "sinusoidal"], "part": "lm"}
    return shapes.parse({**entry, **changes}, "shapes.yaml", ("lm",))


def judged(shape_, *arms):
    return shapes.judge_shape(shape_, pd.DataFrame([row for arm in arms for row in arm]), "tiny")


GOOD = {1: [2.0, 2.0, 2.0]}  # every arm learned: far below chance in bits/char at 1×


def test_every_adjacent_pair_holding_is_reproduced_with_the_welch_interval():
    alibi, rope, sinusoidal = [2.1, 2.2, 2.3], [3.0, 3.2, 3.4], [4.0, 4.1, 4.2]
    result = judged(shape(), rows("lm_prose", "alibi", {**GOOD, 4: alibi}), rows("lm_prose", "rope", {**GOOD, 4: rope}),
                    rows("lm_prose", "sinusoidal", {**GOOD, 4: sinusoidal}))
    assert result.outcome == shapes.REPRODUCED
    first = result.pairs[0].numbers  # bits/char: lower is better, so the effect is rope - alibi
    welch = stats.ttest_ind(rope, alibi, equal_var=False).confidence_interval(0.95)
    assert first.effect == pytest.approx(1.0) and (first.ci_low, first.ci_high) == pytest.approx(tuple(welch))
    assert result.ours() == "alibi 2.2 (n = 3); rope 3.2 (n = 3); sinusoidal 4.1 (n = 3)"
    assert [p.status for p in result.pairs] == [shapes.HOLDS, shapes.HOLDS]
    assert result.note == ("in distribution: alibi bits_per_char 2 at 1×, chance 4.7; rope bits_per_char 2 at 1×, "
                           "chance 4.7; sinusoidal bits_per_char 2 at 1×, chance 4.7")


def test_one_pair_shown_reversed_contradicts_and_an_overlap_is_not_shown():
    alibi = rows("lm_prose", "alibi", {**GOOD, 4: [2.1, 2.2, 2.3]})
    rope = rows("lm_prose", "rope", {**GOOD, 4: [3.0, 3.2, 3.4]})
    reversed_ = judged(shape(ordering=["rope", "alibi"]), alibi, rope)
    assert reversed_.outcome == shapes.CONTRADICTED and reversed_.pairs[0].status == shapes.REVERSED
    overlapping = rows("lm_prose", "rope", {**GOOD, 4: [2.0, 2.3, 2.6]})
    unclear = judged(shape(ordering=["alibi", "rope"]), alibi, overlapping)
    assert unclear.outcome == shapes.NOT_SHOWN
    # the power calculation on these seeds: spread sqrt((0.1² + 0.3²) / 2), effect 2.3 - 2.2 = 0.1 from the line at 0
    assert unclear.pairs[0].needs_n == math.ceil(2 * (POWER_Z * math.sqrt(0.05) / 0.1) ** 2) == 79
    assert unclear.seeds_needed() == 79 and "(needs n ≈ 79 seeds per arm)" in unclear.intervals()
    assert judged(shape(ordering=["rope", "alibi"]), alibi, rope).pairs[0].needs_n is None  # decided: nothing needed
    one_seed = rows("lm_prose", "rope", {**GOOD, 4: [3.0]})
    few = judged(shape(ordering=["alibi", "rope"]), alibi, one_seed)
    assert few.outcome == shapes.NOT_SHOWN and "too few seeds" in few.intervals()


def test_an_arm_at_chance_in_distribution_makes_the_shape_unreachable_before_any_interval():
    at_chance = rows("lm_prose", "rope", {1: [4.7, 4.8, 4.6], 4: [5.0, 5.1, 5.2]})
    result = judged(shape(ordering=["alibi", "rope"]), rows("lm_prose", "alibi", {**GOOD, 4: [2.1, 2.2, 2.3]}),
                    at_chance)
    assert result.outcome == shapes.UNREACHABLE and result.pairs == ()
    assert "rope (bits_per_char 4.7 at 1×, chance 4.7)" in result.note


def test_a_missing_arm_is_not_run_and_a_pending_one_says_why():
    alibi = rows("lm_prose", "alibi", {**GOOD, 4: [2.1, 2.2, 2.3]})
    assert judged(shape(ordering=["alibi", "rope"]), alibi).outcome == shapes.NOT_RUN
    pending = shape(ordering=["cope", "alibi"], pending="the counting task's variables are not a workflow option yet")
    result = judged(pending, alibi)
    assert result.outcome == shapes.NOT_RUN
    assert result.note == ("no finished seed of cope; pending: the counting task's variables are not a workflow "
                           "option yet")
    assert pending.trained_arms() == []  # a pending shape trains nothing until it can run whole
    assert [a.encoding for a in shape().trained_arms()] == ["alibi", "rope", "sinusoidal"]


def test_an_equivalence_holds_inside_the_margin_and_is_contradicted_outside_it():
    near = shape(ordering=["none", "learned"], relation="equivalent", margin=0.05, length_ratio=1)
    none = rows("lm_prose", "none", {1: [2.00, 2.01, 2.02]})
    assert judged(near, none, rows("lm_prose", "learned", {1: [2.00, 2.01, 2.03]})).outcome == shapes.REPRODUCED
    assert judged(near, none, rows("lm_prose", "learned", {1: [2.30, 2.31, 2.32]})).outcome == shapes.CONTRADICTED
    wide = judged(near, none, rows("lm_prose", "learned", {1: [1.9, 2.0, 2.2]}))
    assert wide.outcome == shapes.NOT_SHOWN
    # inside the margin: seeds for the effect's distance to the margin's edge, 0.05 - |2.0333 - 2.01|, at the
    # arms' pooled spread (variances 0.0001 and 0.0233)
    spread, distance = math.sqrt((0.0001 + 0.07 / 3) / 2), 0.05 - 0.07 / 3
    assert wide.seeds_needed() == math.ceil(2 * (POWER_Z * spread / distance) ** 2) == 259


def test_beyond_is_each_seeds_mean_past_the_training_length_and_the_gate_reads_token_accuracy_without_chance():
    beyond = shapes.parse({"id": "r", "paper": "P", "figure": "T1", "published": "+12 %", "task": "duplicate_string",
                           "metric": "token_accuracy", "length_ratio": "beyond",
                           "ordering": ["rope_randomized", "rope"], "part": "c"}, "shapes.yaml", ("c",))
    randomized = rows("duplicate_string", "rope_randomized", {1.0: [0.99, 0.99], 1.025: [0.8, 0.7], 12.5: [0.6, 0.5]},
                      chance=0.5)
    plain = rows("duplicate_string", "rope", {1.0: [0.99, 0.98], 1.025: [0.6, 0.5], 12.5: [0.5, 0.5]}, chance=0.5)
    result = judged(beyond, randomized, plain)
    assert result.arms[0].values.tolist() == pytest.approx([0.7, 0.6])  # (0.8 + 0.6) / 2, (0.7 + 0.5) / 2
    assert result.arms[1].values.tolist() == pytest.approx([0.55, 0.5])
    exact = shapes.parse({"id": "e", "paper": "P", "figure": "F", "published": "x", "task": "copy",
                          "metric": "greedy_exact_match", "length_ratio": 2, "ordering": ["none", "rope"], "part": "c"},
                         "shapes.yaml", ("c",))
    unlearned = [{**row, "greedy_exact_match": 0.0, "token_accuracy": 0.25}
                 for row in rows("copy", "rope", {1: [0.0] * 3, 2: [0.0] * 3})]
    learned = [{**row, "greedy_exact_match": 0.9} for row in rows("copy", "none", {1: [0.9] * 3, 2: [0.9] * 3})]
    gated = judged(exact, learned, unlearned)
    assert gated.outcome == shapes.UNREACHABLE and "rope (token_accuracy 0.25 at 1×, chance 0.25)" in gated.note
    # well above token chance, yet no sequence right at 1× (as NoPE on copy): not learned what the shape scores
    tokens_only = [{**row, "greedy_exact_match": 0.0, "token_accuracy": 0.63}
                   for row in rows("copy", "rope", {1: [0.0] * 3, 2: [0.0] * 3})]
    gated = judged(exact, learned, tokens_only)
    assert gated.outcome == shapes.UNREACHABLE
    assert "rope (greedy_exact_match 0 at 1×, no sequence right in distribution)" in gated.note
    some = [{**row, "greedy_exact_match": value, "token_accuracy": 0.9}
            for row, value in zip(rows("copy", "rope", {1: [0.0] * 3, 2: [0.0] * 3}), [0.2, 0.3, 0.25, 0, 0, 0])]
    assert judged(exact, learned, some).outcome == shapes.REPRODUCED  # learned at 1×, lost at 2×: none beats it
    assert [shapes.sequence_metric(m) for m in ("exact_match", "greedy_exact_match", "token_accuracy", "accuracy",
                                                "bits_per_char")] == [True, True, False, False, False]


def test_an_arm_is_read_at_its_tasks_own_budget_never_at_a_comparisons_longer_one():
    # a default-preset run: learned at lm_prose's 500 steps, sinusoidal at 500 and (a comparison's arm) at 2,000,
    # where validation loss is lower; the shape sets 500 against 500
    near = shape(ordering=["learned", "sinusoidal"], relation="equivalent", margin=0.05, length_ratio=1, tuned=True)
    sinusoidal = (rows("lm_prose", "sinusoidal", {1: [2.2, 2.21, 2.22]}, lr=0.027, validation_loss=1.5)
                  + rows("lm_prose", "sinusoidal", {1: [1.8, 1.81, 1.82]}, lr=0.009, validation_loss=1.3, steps=2000))
    result = judged(near, rows("lm_prose", "learned", {1: [2.2, 2.21, 2.23]}, lr=0.027), sinusoidal)
    assert result.arms[1].values.tolist() == [2.2, 2.21, 2.22] and result.outcome == shapes.REPRODUCED


def test_a_tuned_arm_is_read_at_the_rate_with_the_lowest_validation_loss():
    tuned = shape(ordering=["learned", "sinusoidal"], relation="equivalent", margin=0.05, length_ratio=1, tuned=True)
    learned = (rows("lm_prose", "learned", {1: [2.0, 2.01, 2.02]}, lr=0.009, validation_loss=1.0)
               + rows("lm_prose", "learned", {1: [2.8, 2.81, 2.82]}, lr=0.003, validation_loss=1.5))
    result = judged(tuned, learned, rows("lm_prose", "sinusoidal", {1: [2.0, 2.01, 2.03]}))
    assert result.arms[0].values.tolist() == [2.0, 2.01, 2.02] and result.outcome == shapes.REPRODUCED


CONFIRM = {"seeds": 3, "lr_factors": {"learned": 1, "sinusoidal": 1}, "pilot": "n ≈ 3"}


def test_a_confirm_stage_is_judged_on_its_fresh_seeds_alone_and_a_pilot_shape_never_reads_them():
    # the pilot (seeds 0-2, two rates) put learned far from sinusoidal; the confirm stage (seeds 100-102, the
    # pilot's rate) finds them within the margin: the stage decides, the pilot's seeds are not read
    confirmed = shape(ordering=["learned", "sinusoidal"], relation="equivalent", margin=0.05, length_ratio=1,
                      tuned=True, confirm=CONFIRM)
    learned = (rows("lm_prose", "learned", {1: [2.5, 2.51, 2.52]}, lr=0.027)
               + rows("lm_prose", "learned", {1: [2.9, 2.91, 2.92]}, lr=0.009, validation_loss=2.0)
               + rows("lm_prose", "learned", {1: [2.2, 2.21, 2.22]}, lr=0.027, first_seed=100))
    sinusoidal = (rows("lm_prose", "sinusoidal", {1: [2.2, 2.21, 2.22]}, lr=0.027)
                  + rows("lm_prose", "sinusoidal", {1: [2.21, 2.22, 2.23]}, lr=0.027, first_seed=100))
    result = judged(confirmed, learned, sinusoidal)
    assert [a.values.tolist() for a in result.arms] == [[2.2, 2.21, 2.22], [2.21, 2.22, 2.23]]
    assert result.outcome == shapes.REPRODUCED
    assert result.note.endswith("; confirm stage: seeds 100–102 (3 per arm) at learned 1, sinusoidal 1 × the "
                                "preset's rate, the pilot's seeds not read; pilot: n ≈ 3")
    pilot = judged(shape(ordering=["learned", "sinusoidal"], relation="equivalent", margin=0.05, length_ratio=1,
                         tuned=True), learned, sinusoidal)
    assert [a.values.tolist() for a in pilot.arms] == [[2.5, 2.51, 2.52], [2.2, 2.21, 2.22]]
    assert pilot.outcome == shapes.CONTRADICTED
    unrun = judged(confirmed, learned[:6], sinusoidal)
    assert unrun.outcome == shapes.NOT_RUN and unrun.note.startswith("no finished seed of learned; confirm stage")
    # another run's fresh seeds at a rate the pilot did not choose (a comparison's, say) never join the stage
    other = rows("lm_prose", "learned", {1: [1.0, 1.0, 1.0]}, lr=0.081, validation_loss=0.5, first_seed=100)
    assert judged(confirmed, learned + other, sinusoidal).arms[0].values.tolist() == [2.2, 2.21, 2.22]


def test_the_confirm_stage_trains_each_arm_at_its_declared_factor_and_fresh_seeds():
    confirmed = shape(ordering=["learned", "sinusoidal"], relation="equivalent", margin=0.05, length_ratio=1,
                      tuned=True, confirm={**CONFIRM, "lr_factors": {"learned": 3, "sinusoidal": 1}})
    runs = shapes.DeclaredShapes((confirmed,), ("lm",), "sha").runs("all", [0, 1], [0.333, 1, 3])
    assert [(spec.encoding, factor, seeds) for spec, factor, seeds in runs] == [
        ("learned", 0.333, (0, 1)), ("learned", 1, (0, 1)), ("learned", 3, (0, 1)),
        ("sinusoidal", 0.333, (0, 1)), ("sinusoidal", 1, (0, 1)), ("sinusoidal", 3, (0, 1)),
        ("learned", 3.0, (100, 101, 102)), ("sinusoidal", 1.0, (100, 101, 102))]


def test_the_shipped_shapes_load_cover_the_issue_and_every_scaling_is_in_the_preset():
    declared = shapes.load()
    ids = {s.id for s in declared.shapes}
    assert {"press2022-alibi", "kazemnejad2023-copy", "kazemnejad2023-reverse", "kazemnejad2023-scan",
            "haviv2022-causal", "haviv2022-mlm", "ruoss2023-duplicate-string", "ruoss2023-odds-first",
            "ruoss2023-missing-duplicate-string", "ruoss2023-bucket-sort", "peng2023-yarn", "ntk2023-dynamic",
            "golovneva2024-counting", "vaswani2017-e"} == ids
    preset = validate_config(yaml.safe_load(open(workflow.ROOT / "workflow" / "shapes.yaml")))
    scalings = {arm.partition("+")[2] for s in declared.shapes for arm in s.arms} - {""}
    assert scalings <= set(preset["train"]["eval_scaling"])
    assert {s.id for s in declared.shapes if s.tuned} == {"vaswani2017-e", "haviv2022-causal", "haviv2022-mlm"}
    # lm_prose's arms at the default preset's rate for the task (the hand check's best at 500 steps), not 0.003;
    # mlm_prose's tuned arms on the same grid
    default = yaml.safe_load(open(workflow.ROOT / "config.yaml"))
    assert preset["train"]["lr"]["lm_prose"] == default["train"]["lr"]["lm_prose"] == 0.027
    assert preset["train"]["lr"]["mlm_prose"] == 0.027


def test_the_judged_table_has_one_row_per_shape_when_nothing_ran():
    declared = shapes.load()
    empty = pd.DataFrame(columns=["task", "encoding", "size", "seed", "status", "length_ratio", "value"])
    frame = shapes.table(shapes.judge(declared, empty), declared.sha256)
    assert len(frame) == len(declared.shapes) and set(frame["outcome"]) == {shapes.NOT_RUN}
    assert frame["shape"].tolist() == [s.id for s in declared.shapes]
    assert frame["declaration_sha256"].eq(declared.sha256).all()


@pytest.mark.parametrize("change, message", [
    ({"colour": "red"}, r"keys \[.*'colour'.*\]; required: id, paper, .*; optional: relation, margin, tuned, pending"),
    ({"task": "chess"}, r"unknown task 'chess'; allowed: .*lm_prose"),
    ({"metric": "exact_match"}, r"metric 'exact_match' is not in lm_prose's tables; allowed: bits_per_char, "
                                r"token_accuracy"),
    ({"length_ratio": 3}, r"length_ratio 3 is not one of lm_prose's evaluation factors; allowed: 1, 1.25, 1.5, 2, 4, "
                          r"8, beyond"),
    ({"ordering": ["alibi"]}, r"ordering must list at least two ranks"),
    ({"ordering": ["alibi", "alibi"]}, r"no arm twice"),
    ({"ordering": ["alibi", "cope_v2"]}, r"arm 'cope_v2' is not an encoding; allowed: alibi, .*needs pending: why"),
    ({"ordering": ["rope", "alibi+yarn:4"]}, r"arm 'alibi\+yarn:4': Alibi has no rotary frequencies to scale; eval "
                                             r"scaling applies to the RoPE family \(rope, "),
    ({"ordering": ["rope", "rope+warp:4"]}, r"arm 'rope\+warp:4': eval scaling 'warp:4': expected TYPE:FACTOR with "
                                            r"TYPE one of linear, "),
    ({"relation": "better"}, r"relation 'better'; allowed: ordered, equivalent"),
    ({"relation": "equivalent"}, r"margin must be given, and positive, exactly when relation is equivalent"),
    ({"margin": 0.05}, r"margin must be given"),
    ({"part": "z"}, r"part 'z'; allowed: lm"),
    ({"tuned": "yes"}, r"tuned = 'yes' has the wrong type; expected bool"),
    ({"confirm": {"seeds": 14}}, r"confirm needs exactly seeds \(int\), pilot \(str\), seeds at least 2; got "),
    ({"confirm": {"seeds": 1, "pilot": "p"}}, r"confirm needs exactly seeds \(int\), pilot \(str\), seeds at least 2"),
    ({"confirm": {"seeds": 5, "pilot": "p"}, "tuned": True},
     r"confirm needs exactly seeds \(int\), pilot \(str\), lr_factors \(dict\)"),
    ({"confirm": {"seeds": 5, "pilot": "p", "lr_factors": {"alibi": 1, "rope": 0}}, "tuned": True},
     r"confirm.lr_factors must give a positive factor for each of alibi, rope, sinusoidal; got "),
])
def test_a_bad_shape_is_one_line_naming_the_key_and_the_allowed_values(change, message):
    with pytest.raises(ValueError, match=message) as error:
        shape(**change)
    assert "\n" not in str(error.value) and "shape 'planted'" in str(error.value)


def test_a_bad_file_is_one_line(tmp_path):
    path = tmp_path / "shapes.yaml"
    path.write_text("shapes: []\n")
    with pytest.raises(ValueError, match="needs exactly the keys parts .* and shapes"):
        shapes.load(path)
    entry = {"id": "a", "paper": "P", "figure": "F", "published": "x", "task": "lm_prose", "metric": "bits_per_char",
             "length_ratio": 1, "ordering": ["alibi", "rope"], "part": "lm"}
    path.write_text(yaml.safe_dump({"parts": ["lm"], "shapes": [entry, entry]}))
    with pytest.raises(ValueError, match=r"shape ids repeat: \['a'\]"):
        shapes.load(path)
