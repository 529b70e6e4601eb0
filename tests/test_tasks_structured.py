"""Tables and brackets: each query has one answer, CSV and JSON carry the same table, bracket targets
are Python's own tokenizer's pairs, and both tasks train end to end with every 1-D encoding."""

import io
import tokenize

import numpy as np
import pytest
import torch

from posbench import encodings, tasks
from posbench.tasks import IGNORE
from posbench.tasks.code_brackets import bracket_distances
from posbench.tasks.table_lookup import DIGITS, PUNCTUATION
from posbench.train import TrainConfig, train


# ----- tables -------------------------------------------------------------------------------------
def words(task, ids) -> list[str]:
    """Token ids as text: digits, ``k<key>``, ``c<column>``, punctuation."""
    marks = {task.token(mark): mark for mark in PUNCTUATION}
    return [str(i) if i < DIGITS else f"k{i - DIGITS}" if i < DIGITS + task.n_keys
            else f"c{i - DIGITS - task.n_keys}" if i not in marks else marks[i] for i in ids]


def read_csv(text: list[str]) -> dict[tuple[str, str], str]:
    """An independent reader: (key, column) -> the cell's digits, from ``ID , c0 , c1 NL k , v v , …``."""
    lines = " ".join(text).split(" NL")
    header = [field.strip() for field in lines[0].split(",")]
    assert header[0] == "ID"
    cells = {}
    for line in filter(str.strip, lines[1:]):
        fields = [field.strip() for field in line.split(",")]
        for column, value in zip(header[1:], fields[1:]):
            cells[fields[0], column] = value.replace(" ", "")
    return cells


def read_json(text: list[str]) -> dict[tuple[str, str], str]:
    """The same from ``{ ID : k , c0 : v v , … } { …``."""
    cells = {}
    for record in " ".join(text).replace("{", "").split("}"):
        if not record.strip():
            continue
        pairs = dict(tuple(part.strip() for part in field.split(":")) for field in record.split(","))
        key = pairs.pop("ID")
        cells.update({(key, column): value.replace(" ", "") for column, value in pairs.items()})
    return cells


def split_example(task, inputs, targets):
    """(the rendered table, [(key, column, answer)]) from one example."""
    sequence = words(task, np.append(inputs, targets[-1]))
    first_query = sequence.index("QUERY")
    table, questions = sequence[:first_query], sequence[first_query:]
    block = 3 + task.value_digits
    return table, [(questions[q + 1], questions[q + 2], "".join(questions[q + 3 : q + block]))
                   for q in range(0, len(questions), block)]


@pytest.mark.parametrize("rows", [2, 8, 64])
def test_csv_and_json_carry_the_same_table_and_every_query_has_its_cells_answer(rows):
    csv, json = tasks.get("table_lookup"), tasks.get("table_lookup_json")
    for seed in range(20):
        renderings = []
        for task, reader in ((csv, read_csv), (json, read_json)):
            inputs, targets = task.example(np.random.default_rng(seed), rows)  # one seed: one table, two renderings
            assert len(inputs) == task.sequence_length(rows)
            table, questions = split_example(task, inputs, targets)
            cells = reader(table)
            assert len(cells) == rows * task.n_columns  # keys distinct: every (key, column) once
            scored = words(task, targets[targets != IGNORE])
            assert "".join(scored) == "".join(answer for _, _, answer in questions)
            assert all(cells[key, column] == answer for key, column, answer in questions)
            renderings.append(cells)
        assert renderings[0] == renderings[1]


def test_table_lengths_grow_with_rows_times_columns_and_evaluation_reaches_8x():
    task = tasks.get("table_lookup")  # 3 columns of 2 digits: a CSV row is 11 tokens, a JSON record 20
    assert task.eval_lengths() == [6, 12, 24, 48]
    assert [task.sequence_length(n) for n in (8, 64)] == [8 + 8 * 11 + 19, 8 + 64 * 11 + 19]
    json = tasks.get("table_lookup", format="json", n_columns=4)
    assert json.sequence_length(10) == 10 * (5 + 4 * 5) + 19


@pytest.mark.parametrize("options, message", [
    ({"format": "xml"}, "table_lookup: unknown format 'xml'; allowed: csv, json"),
    ({"n_keys": 40}, r"table_lookup: n_keys \(40\) must cover the tallest table \(48 rows\)"),
])
def test_table_refuses_options_it_cannot_honour(options, message):
    with pytest.raises(ValueError, match=message):
        tasks.get("table_lookup", **options)


# ----- brackets -----------------------------------------------------------------------------------
SOURCE = 'f(a[1], "(", {2: g()})  # )\nx = (\n    1)\n'


def test_bracket_distances_are_the_tokenizers_pairs_and_skip_strings_and_comments():
    distances = bracket_distances(SOURCE)
    closing = {i: SOURCE[i] for i in np.flatnonzero(distances)}
    assert closing == {5: "]", 19: ")", 20: "}", 21: ")", 39: ")"}  # not the "(" string nor the "# )" comment
    assert [distances[i] for i in closing] == [2, 1, 7, 20, 7]  # g() is 1; f( … ) is 21 − 1; ( … 1) spans a line
    assert all(SOURCE[i - distances[i]] == "([{"[")]}".index(SOURCE[i])] for i in closing)
    with pytest.raises(ValueError, match=r"code_brackets: bad.py does not tokenize as Python"):
        bracket_distances("f(\n", "bad.py")


def test_bracket_targets_match_pythons_tokenizer_on_the_corpus():
    """The test split's first file, read by the tokenizer independently (offsets by line lengths), gives
    the task's distances; every scored target of a window is one of them, within the window and the limit."""
    task = tasks.get("code_brackets", eval_chars=4096)
    first_file = task.files()[1][0].read_text(encoding="utf-8", errors="replace")
    lines = first_file.splitlines(keepends=True)
    offset = lambda row, col: sum(len(line) for line in lines[: row - 1]) + col  # noqa: E731
    expected, opened = np.zeros(len(first_file), dtype=np.int64), []
    for token in tokenize.generate_tokens(io.StringIO(first_file).readline):
        if token.type == tokenize.OP and token.string in "([{":
            opened.append(offset(*token.start))
        elif token.type == tokenize.OP and token.string in ")]}":
            expected[offset(*token.start)] = offset(*token.start) - opened.pop()
    assert (expected > 0).sum() >= 20
    assert np.array_equal(task.split_distances("test")[: len(first_file)], expected)

    _, starts = task.eval_windows(512, "test")
    batch = next(task.eval_batches(512, "test"))
    scored = (batch.targets != IGNORE).nonzero().tolist()  # [(row, position)]
    assert len(scored) > 20
    for row, position in scored:
        distance = batch.targets[row, position].item() - task.corpus.vocab_size + 1
        assert 1 <= distance <= min(task.max_offset, position)
        assert task.split_distances("test")[int(starts[row]) + position] == distance
    distances = task.split_distances("test")[starts[:, None] + np.arange(512)]  # (windows, 512)
    unscored = (distances > 0) & (batch.targets.numpy() == IGNORE)  # closing brackets left out: too far back
    assert (distances[unscored] > np.minimum(task.max_offset, np.nonzero(unscored)[1])).all()


def test_bracket_chance_is_the_commonest_distance_and_the_vocabulary_holds_every_class():
    task = tasks.get("code_brackets", eval_chars=8192)
    targets = torch.cat([b.targets.flatten() for b in task.eval_batches(128)])
    scored = targets[targets != IGNORE]
    assert task.chance(128) == {"token_accuracy": pytest.approx(torch.bincount(scored).max().item() / len(scored))}
    assert task.model_options()["vocab_size"] == task.corpus.vocab_size + 64 > scored.max()


# ----- both, end to end, with every encoding a sequence can take ----------------------------------
ONE_D = [name for name in encodings.names() if not name.endswith("_2d") and name != "mrope"]
SHORT = {"table_lookup": {"train_length": 3, "eval_examples": 8, "eval_factors": (1.0, 2.0)},
         "code_brackets": {"train_length": 64, "eval_chars": 4096, "eval_factors": (1.0, 2.0)}}


@pytest.mark.parametrize("task", sorted(SHORT))
@pytest.mark.parametrize("encoding", ONE_D)
def test_a_few_training_steps_with_every_encoding(task, encoding):
    config = TrainConfig(task=task, encoding=encoding, steps=4, batch_size=8, log_every=2, task_options=SHORT[task])
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and all(np.isfinite(p["loss"]) for p in record["loss_curve"])
    lengths = [e["length"] for e in record["eval"]]
    assert lengths == ([3, 6] if task == "table_lookup" else [64, 128])
    assert all(0 <= e["metrics"]["token_accuracy"] <= 1 for e in record["eval"])


# ----- the mosaic: vision + language in one sequence ----------------------------------------------
def mosaic_example(seed=0, split="test"):
    from posbench.tasks.mosaic_qa import MosaicQA

    task = tasks.get("mosaic_qa")
    assert isinstance(task, MosaicQA)
    return task, task.example(np.random.default_rng(seed), split)


def read_question(tokens):
    from posbench.tasks.mosaic_qa import PIXELS, WORDS

    return " ".join(WORDS[i] for i in tokens[16:, PIXELS:].argmax(1))


def test_mosaic_tiles_are_the_split_images_and_answers_are_right_by_construction():
    from posbench.tasks.mosaic_qa import CORNERS, NO, YES, split_images, to_patches

    images, labels = split_images("test")
    for seed in range(200):
        task, (tokens, answer, tile_labels) = mosaic_example(seed)
        assert tokens.shape == (22, 16 + 21) and len(set(tile_labels.tolist())) == 4
        mosaic = tokens[:16, :16]  # (16, 16): 4 × 4 patches of 4 × 4 pixels of the 16 × 16 image, row by row
        for tile, label in enumerate(tile_labels):  # each tile is one test image of its label
            rows, cols = divmod(tile, 2)
            cells = [(2 * rows + r) * 4 + 2 * cols + c for r in range(2) for c in range(2)]
            own = to_patches(images[labels == label], 4)  # (n, 4, 16)
            assert (np.abs(own - mosaic[cells][None]).max(axis=(1, 2)) == 0).any()
        assert (tokens[:16, 16:] == 0).all() and (tokens[16:, :16] == 0).all() and (tokens[16:, 16:].sum(1) == 1).all()
        words = read_question(tokens).split()
        if words[0] == "what":
            assert answer == tile_labels[CORNERS.index(words[4])]
        else:
            a, b = int(words[1]), int(words[4])
            column_of = {int(label): tile % 2 for tile, label in enumerate(tile_labels)}
            assert column_of[a] != column_of[b] and answer == (YES if column_of[a] < column_of[b] else NO)


def test_swapping_the_mosaics_columns_changes_every_answer_that_depends_on_place():
    """Mirroring the tiles left to right changes the answer of every question whose corner holds another
    digit after the swap and of every left-of question: all of them, by construction (measured: 1.0)."""
    from posbench.tasks.mosaic_qa import CORNERS, NO, YES

    changed = 0
    for seed in range(200):
        task, (tokens, answer, tile_labels) = mosaic_example(seed)
        mirrored = tile_labels[[1, 0, 3, 2]]
        words = read_question(tokens).split()
        if words[0] == "what":
            after = mirrored[CORNERS.index(words[4])]
        else:
            column_of = {int(label): tile % 2 for tile, label in enumerate(mirrored)}
            after = YES if column_of[int(words[1])] < column_of[int(words[4])] else NO
        changed += after != answer
    assert changed == 200


def test_mosaic_layout_is_mropes_and_sets_are_fixed_with_the_majority_as_chance():
    task = tasks.get("mosaic_qa")
    layout = task.layout
    assert layout.ids.shape == (22, 3) and layout.ids[9].tolist() == [0, 2, 1] and layout.ids[16].tolist() == [4] * 3
    assert layout.ids[21].tolist() == [9] * 3 and layout.modality.tolist() == [1] * 16 + [0] * 6
    first, again = next(task.eval_batches(22)), next(task.eval_batches(22))
    assert torch.equal(first.inputs, again.inputs) and first.positions is task.layout
    labels = torch.cat([b.targets for b in task.eval_batches(22)])[:, 0]
    assert len(labels) == 1024 and task.chance(22) == {"accuracy": torch.bincount(labels).max().item() / 1024}
    assert 0.2 < task.chance(22)["accuracy"] < 0.3  # yes and no, each about a quarter of the questions
    validation = next(task.eval_batches(22, "validation"))
    assert not torch.equal(validation.inputs, first.inputs)


MOSAIC_ARMS = ["none", "sinusoidal", "learned", "sinusoidal_concat_fixed", "rope", "alibi", "t5",
               "sinusoidal_per_modality", "rope_per_modality", "mrope"]


@pytest.mark.parametrize("encoding", MOSAIC_ARMS)
def test_mosaic_trains_a_few_steps_and_multimodal_encodings_read_the_layout(encoding, monkeypatch):
    from posbench import model as model_module

    seen = []
    forward = model_module.Transformer.forward
    monkeypatch.setattr(model_module.Transformer, "forward",
                        lambda self, inputs, positions=None, cache=None: seen.append(positions)
                        or forward(self, inputs, positions, cache))
    config = TrainConfig(task="mosaic_qa", encoding=encoding, steps=4, batch_size=8, log_every=2,
                         task_options={"eval_examples": 16})
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and [e["length"] for e in record["eval"]] == [22]
    multimodal = encodings.traits(encoding).axes == "multimodal"
    assert all((p is not None and p.ids.shape == (22, 3)) if multimodal else p is None for p in seen)


def test_a_2d_encoding_alone_is_refused_on_the_mosaic():
    with pytest.raises(ValueError, match="encoding 'rope_2d' needs a task on a grid"):
        train(TrainConfig(task="mosaic_qa", encoding="rope_2d", steps=1), log=open("/dev/null", "w"))
