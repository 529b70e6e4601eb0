"""Each task's data is what its docstring says: answers, brackets, motifs, patches, splits."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from posbench import tasks
from posbench.tasks import IGNORE
from posbench.tasks.base import EVAL_SEED, target_counts
from posbench.tasks.dyck import CLOSE, EMPTY, OPEN
from posbench.tasks.lm_code import source_files, split_files
from posbench.tasks.long_range import MOTIFS, to_ids

TASK_MODULES = Path(tasks.__file__).parent


def registered_in_source() -> list[str]:
    """Every name a module of posbench/tasks registers (``@register("name")``), read from the files."""
    found = [re.findall(r'^@register\("(\w+)"\)$', path.read_text(), re.M) for path in TASK_MODULES.glob("*.py")]
    return sorted(name for names in found for name in names)


def test_a_task_registers_under_its_name_once_and_of_a_kind_the_guidance_speaks_to():
    from dataclasses import dataclass

    from posbench.tasks.copy import Copy
    from posbench.tasks.registry import _REGISTRY

    @dataclass(frozen=True)
    class Unjudged(Copy):
        kind = "poetry"

    with pytest.raises(ValueError) as error:
        tasks.register("test_only_poetry")(Unjudged)
    assert str(error.value) == ("task 'test_only_poetry': kind 'poetry' is not allowed; allowed: nlp, classification, "
                                "code, structured, long, multimodal")
    try:
        Twin = tasks.register("test_only_copy")(dataclass(frozen=True)(type("Twin", (Copy,), {})))
        assert tasks.get("test_only_copy").name == Twin.name == "test_only_copy" and Copy.name == "copy"
        with pytest.raises(ValueError) as error:
            tasks.register("test_only_copy")(Twin)
        assert str(error.value) == "task 'test_only_copy' is registered twice"
    finally:
        _REGISTRY.pop("test_only_copy", None)
    assert "test_only_poetry" not in tasks.names() and "test_only_copy" not in tasks.names()


def examples(task, length, count=50, seed=0):
    rng = np.random.default_rng(seed)
    return [task.example(rng, length) for _ in range(count)]


def test_registry_names_and_errors():
    assert tasks.names() == registered_in_source()  # discovery imports every module: no task missed
    with pytest.raises(ValueError, match=r"unknown task 'sort'; allowed: babi, bucket_sort, code_brackets, copy, "):
        tasks.get("sort")
    with pytest.raises(ValueError, match=r"task 'reverse' has no option 'data'; allowed: .*train_length"):
        tasks.get("reverse", data="x.txt")
    with pytest.raises(ValueError, match="train_length must be positive, got 0"):
        tasks.get("copy", train_length=0)


def test_eval_lengths_are_the_training_length_and_its_multiples():
    assert tasks.get("reverse").eval_lengths() == [16, 20, 24, 32, 64, 128]
    assert tasks.get("dyck", train_length=10).eval_lengths() == [10, 12, 14, 20, 40, 80]  # 12.5 -> 12: even only
    assert tasks.get("digits_2d").eval_lengths() == [16]


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_copy_and_reverse_answers(name):
    task = tasks.get(name)
    sep = task.n_symbols
    for inputs, targets in examples(task, 9):
        symbols = inputs[:9]
        assert inputs[9] == sep and len(inputs) == task.sequence_length(9) == 18
        assert (targets[:9] == IGNORE).all()  # predicting the prompt is not scored
        answer = targets[9:]  # predicted at SEP and at each answer token
        expected = symbols if name == "copy" else symbols[::-1]
        assert (answer == expected).all()
        assert (inputs[10:] == answer[:-1]).all()  # teacher forcing feeds the answer back
        if name == "reverse":
            assert (task.transform(task.transform(symbols)) == symbols).all()


def stack_tops(brackets):
    """An independent bracket matcher: the top of the stack after each bracket (None if unbalanced)."""
    stack, tops = [], []
    for b in brackets:
        if b in OPEN:
            stack.append(b)
        elif not stack or stack.pop() != OPEN[CLOSE.index(b)]:
            return None
        tops.append(stack[-1] if stack else EMPTY)
    return tops if not stack else None


def test_dyck_strings_are_balanced_and_targets_are_stack_tops():
    task = tasks.get("dyck")
    seen_types, max_depth = set(), 0
    for brackets, targets in examples(task, 40):
        assert len(brackets) == 40
        assert stack_tops(list(brackets)) == list(targets)
        seen_types |= set(brackets.tolist())
        max_depth = max(max_depth, int(np.cumsum(np.where(np.isin(brackets, OPEN), 1, -1)).max()))
    assert seen_types == {*OPEN, *CLOSE} and max_depth >= 4


def test_index_lookup_answers_the_queried_index():
    task = tasks.get("index_lookup")  # train_length 24
    n = 8 * task.train_length
    for inputs, targets in examples(task, n):
        symbols, queries = inputs[:n], inputs[n + 1 :: 2] - (task.n_symbols + 1)
        assert inputs[n] == task.n_symbols and len(inputs) == task.sequence_length(n)
        assert len(queries) == task.n_queries and ((0 <= queries) & (queries < task.train_length)).all()
        scored = targets[targets != IGNORE]
        assert (scored == symbols[queries]).all() and len(scored) == task.n_queries
    assert task.vocab_size == task.n_symbols + 1 + task.train_length + 1


def motif_positions(sequence, motif):
    return [i for i in range(len(sequence) - len(motif) + 1) if list(sequence[i : i + len(motif)]) == list(motif)]


@pytest.mark.parametrize("length", [64, 512])
def test_long_range_motifs_appear_once_and_labels_follow_order_and_a_fixed_distance(length):
    """"Far" is 32 letters at every length: at 8× the training length the rule is the trained one."""
    task = tasks.get("long_range")
    labels = []
    for sequence, label in examples(task, length, count=200):
        (a,), (b,) = motif_positions(sequence, to_ids(MOTIFS[0])), motif_positions(sequence, to_ids(MOTIFS[1]))
        assert label == 2 * (a < b) + (abs(a - b) >= 32)
        labels.append(label)
    assert sorted(np.bincount(labels))[0] >= 30  # all four classes drawn, roughly balanced
    assert task.valid_length(20) == 38  # room for a far pair: 32 + a motif of 6


def test_passkey_answer_is_the_key_hidden_once_in_filler():
    task = tasks.get("passkey")
    key_id, query_id = task.key_id, task.query_id
    for inputs, targets in examples(task, 40):
        sequence = np.append(inputs, targets[-1])  # the whole sequence: prompt and answer
        answer = targets[targets != IGNORE]
        assert len(answer) == 4 and answer.max() < 10 and np.array_equal(answer, sequence[-4:])
        (key,) = np.flatnonzero(sequence == key_id)
        assert np.array_equal(sequence[key + 1 : key + 5], answer) and sequence[40] == query_id
        where = np.delete(np.arange(40), np.arange(key, key + 5))  # the filler's positions
        phase = (sequence[where] - 10 - where) % 5  # the fixed 5-word sentence from one phase
        assert len(set(phase.tolist())) == 1


def test_passkey_evaluation_cycles_through_depths_and_reaches_32x():
    task = tasks.get("passkey")
    assert task.eval_lengths() == [64, 128, 256, 512, 1024, 2048]
    batch = next(task.eval_batches(256))  # items 0 … 63
    starts = (batch.inputs == task.key_id).int().argmax(dim=1)  # (B,)
    span = 256 - 5  # where KEY d1…d4 can start
    assert starts[:12].tolist() == [round(d * span) for d in np.linspace(0, 1, 11)] + [0]
    assert [task.eval_depth(i) for i in (0, 5, 10, 11)] == [0.0, 0.5, 1.0, 0.0]
    assert task.chance(128) == {"token_accuracy": pytest.approx(0.125)}  # the commonest digit of that set


def test_digits_file_is_sklearns_dataset():
    from posbench.tasks.digits_2d import load_digits

    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and images.min() == 0 and images.max() == 16
    class_counts = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]  # the dataset's
    assert np.bincount(labels).tolist() == class_counts
    assert images[0, 0].tolist() == [0, 0, 5, 13, 9, 1, 0, 0] and labels[:3].tolist() == [0, 1, 2]


def test_digit_patches_reassemble_the_image():
    from posbench.tasks.digits_2d import load_digits, to_patches

    images = load_digits()[0][:5]
    patches = to_patches(images)  # (5, 16, 4)
    rebuilt = np.zeros_like(images)
    for t in range(16):
        row, col = divmod(t, 4)
        rebuilt[:, 2 * row : 2 * row + 2, 2 * col : 2 * col + 2] = patches[:, t].reshape(5, 2, 2)
    assert (rebuilt == images).all()


def test_digits_split_and_batches():
    from posbench.tasks.digits_2d import splits

    task = tasks.get("digits_2d")
    parts = splits()
    (train_x, _), (test_x, test_y), (validation_x, validation_y) = (parts[s] for s in ("train", "test", "validation"))
    assert (len(train_x), len(validation_x), len(test_x)) == (1259, 179, 359)  # 70 %, 10 %, 20 % of 1797
    rows = [{x.tobytes() for x in part} for part in (train_x, validation_x, test_x)]
    assert sum(map(len, rows)) == len(set.union(*rows))  # no image in two splits
    held_out = torch.cat([b.targets for b in task.eval_batches(16, "validation")])[:, 0]
    assert torch.equal(held_out, torch.from_numpy(validation_y))
    assert task.model_options() == {"patch_dim": 4, "n_classes": 10, "causal": False, "grid": (4, 4)}
    batches = list(task.eval_batches(16))
    assert sum(len(b.targets) for b in batches) == 359 and batches[0].inputs.shape[1:] == (16, 4)
    assert torch.equal(torch.cat([b.targets for b in batches])[:, 0], torch.from_numpy(test_y))
    with pytest.raises(ValueError, match="digits_2d has one length"):
        tasks.get("digits_2d", train_length=32)


def test_code_split_never_puts_one_file_on_both_sides():
    files = source_files(None)
    train, test = split_files(files, 10)
    assert len(files) > 100 and set(train).isdisjoint(test) and sorted(train + test) == files
    assert 0.03 < len(test) / len(files) < 0.2
    assert split_files(files, 10) == (train, test)  # stable: by the name's CRC-32, not by chance


def test_prose_override_vocabulary_and_windows(tmp_path: Path):
    path = tmp_path / "text.txt"
    path.write_text("abcab" * 200 + "z" * 50)  # the test split (last 105 chars) ends in 50 'z', unseen in training
    task = tasks.get("lm_prose", data=str(path), train_length=8)
    corpus = task.corpus
    assert corpus.vocab_size == 4  # UNK, a, b, c
    assert set(corpus.train.tolist()) == {1, 2, 3} and set(corpus.test.tolist()) == {0, 1, 2, 3}
    assert (corpus.test == 0).sum() == 50
    batch = task.train_batch(np.random.default_rng(0), 4)
    assert batch.inputs.shape == (4, 8) and torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])


def test_builtin_corpora_load():
    prose, code = tasks.get("lm_prose"), tasks.get("lm_code")
    assert len(prose.corpus.train) > 300_000 and 80 < prose.corpus.vocab_size < 200
    assert len(code.corpus.test) > prose.eval_chars


@pytest.mark.parametrize("name", tasks.names())
def test_batches_have_one_shape_and_fixed_evaluation(name):
    task = tasks.get(name)
    batch = task.train_batch(np.random.default_rng(0), 4)
    assert batch.inputs.shape[0] == batch.targets.shape[0] == 4
    assert batch.targets.shape[1] in (1, batch.inputs.shape[1])
    longest = task.eval_lengths()[-1]
    first, again = next(iter(task.eval_batches(longest))), next(iter(task.eval_batches(longest)))
    assert torch.equal(first.inputs, again.inputs) and torch.equal(first.targets, again.targets)
    assert first.inputs.shape[1] == task.sequence_length(longest)


# ----- validation splits and chance levels ------------------------------------------------------
@pytest.mark.parametrize("name", tasks.names())
def test_a_bad_split_is_one_line_naming_the_allowed(name):
    task = tasks.get(name)
    with pytest.raises(ValueError) as error:
        next(task.eval_batches(task.eval_lengths()[0], "train"))
    assert str(error.value) == "unknown split 'train'; allowed: test, validation"


@pytest.mark.parametrize("name", ["copy", "reverse", "dyck", "index_lookup", "long_range"])
def test_generated_validation_is_its_own_draw_and_test_is_what_it_was(name):
    """Test keeps the generator it always had (records stay comparable); validation has another."""
    task = tasks.get(name)
    n = task.train_length
    test, validation = (next(task.eval_batches(n, split)) for split in ("test", "validation"))
    assert not torch.equal(test.inputs, validation.inputs)
    rng = np.random.default_rng((EVAL_SEED, n))
    first = (task._batch(rng, n, len(test.inputs)) if name == "long_range"
             else task.collate([task.example(rng, n) for _ in range(len(test.inputs))]))
    assert torch.equal(first.inputs, test.inputs) and torch.equal(first.targets, test.targets)


def corpus_task(tmp_path):
    """Train split: 950 characters of ``ab`` then 50 ``c`` (its last 5 %: validation); test: ``abc…``."""
    path = tmp_path / "text.txt"
    path.write_text("ab" * 475 + "c" * 50 + ("abc" * 334)[:1000])
    return tasks.get("lm_prose", data=str(path), train_length=8, test_fraction=0.5, eval_chars=64)


def test_language_model_validation_is_the_end_of_training_text_that_training_never_reads(tmp_path):
    task = corpus_task(tmp_path)
    c = 3  # ids: UNK 0, a 1, b 2, c 3
    assert len(task.training_text) == 950 and (task.training_text != c).all()
    batches = [task.train_batch(np.random.default_rng(seed), 64) for seed in range(20)]
    assert all((b.inputs != c).all() and (b.targets != c).all() for b in batches)  # windows end before validation
    validation = list(task.eval_batches(8, "validation"))
    assert sum(len(b.inputs) for b in validation) == 8 and all((b.targets == c).all() for b in validation)
    assert (torch.cat([b.targets for b in task.eval_batches(8)]) != c).any()  # the test split is elsewhere


def test_unigram_chance_by_hand(tmp_path):
    """Validation is all ``c``, which training's 950 characters never hold: add-one smoothing over
    4 ids gives it 1 / (950 + 4), so the chance cross-entropy is log2(954) bits per character."""
    task = corpus_task(tmp_path)
    assert task.target_prior() == pytest.approx(np.array([1, 476, 476, 1]) / 954)
    assert task.chance(8, "validation") == pytest.approx({"bits_per_char": np.log2(954), "token_accuracy": 1.0})
    test = task.chance(8)  # 8 windows of "abc…": a, b and c in roughly equal shares
    assert 0.3 < test["token_accuracy"] < 0.4 and np.log2(954 / 476) < test["bits_per_char"] < np.log2(954)


@pytest.mark.parametrize("length", [40, 64, 256])
def test_classification_chance_is_the_majority_rate_of_that_set(length):
    task = tasks.get("long_range", eval_examples=100)
    labels = torch.cat([b.targets for b in task.eval_batches(length)])[:, 0].numpy()
    assert task.chance(length) == {"accuracy": np.bincount(labels).max() / 100}


def test_token_chance_is_the_most_frequent_scored_target_and_exact_match_has_none():
    task = tasks.get("reverse", eval_examples=40)
    targets = torch.cat([b.targets.flatten() for b in task.eval_batches(10)]).numpy()
    scored = targets[targets != IGNORE]
    assert len(scored) == 400 and task.chance(10) == {"token_accuracy": np.bincount(scored).max() / 400}
    assert list(target_counts(task.eval_batches(10))) == list(np.bincount(scored))


def test_lm_prose_varlen_trains_on_lengths_from_16_to_64_and_is_evaluated_as_lm_prose():
    varied, fixed = tasks.get("lm_prose_varlen"), tasks.get("lm_prose")
    rng = np.random.default_rng(0)
    lengths = [varied.train_batch(rng, 2).inputs.shape[1] for _ in range(400)]
    assert min(lengths) == 16 and max(lengths) == 64 and len(set(lengths)) == 49  # every length, uniformly
    assert abs(np.mean(lengths) - 40) < 1.5
    batch = varied.train_batch(np.random.default_rng(3), 4)  # windows of the training text: a length, then starts
    rng, text = np.random.default_rng(3), varied.training_text
    length = rng.integers(16, 65)
    windows = text[rng.integers(0, len(text) - length, size=4)[:, None] + np.arange(length + 1)]  # (4, length + 1)
    assert np.array_equal(batch.inputs, windows[:, :-1]) and np.array_equal(batch.targets, windows[:, 1:])
    for length in (64, 256):
        (ours, theirs) = (next(task.eval_batches(length, split)) for task in (varied, fixed) for split in ["test"])
        assert torch.equal(ours.inputs, theirs.inputs) and torch.equal(ours.targets, theirs.targets)
    assert varied.eval_lengths() == fixed.eval_lengths() and varied.chance(64) == fixed.chance(64)
    with pytest.raises(ValueError, match=r"lm_prose_varlen: min_length must lie in 1 … train_length \(64\); got 65"):
        tasks.get("lm_prose_varlen", min_length=65)


def test_default_axes_are_the_tasks_training_length_and_the_sizes_width():
    assert tasks.default_axes("reverse", "tiny") == (16, 64)
    assert tasks.default_axes("lm_prose", "base") == (64, 256)
    assert tasks.default_axes("no_such_task", "no_such_size") == (None, None)
