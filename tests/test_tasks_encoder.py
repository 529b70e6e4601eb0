"""The encoder tasks (issue 18): text classification with a pooled head, order-sensitive
(``text_order``) and mostly not (``text_source``), and the masked LM (``mlm_prose``): balanced,
fixed and disjoint splits, shuffles that keep the bag, BERT's masking rates, a bidirectional model,
NoPE's invariance to order, and a few training steps end to end."""

from pathlib import Path

import numpy as np
import pytest
import torch

from posbench import tasks
from posbench.model import build_model
from posbench.tasks import IGNORE
from posbench.tasks.mlm_prose import mask_windows
from posbench.tasks.text_order import shuffle_within_words
from posbench.train import TrainConfig, model_config, train

CLASSIFIERS = ["text_order", "text_source"]
ENCODER_TASKS = [*CLASSIFIERS, "mlm_prose"]


def marked_text(tmp_path: Path) -> Path:
    """About 5,000 characters of words whose every character says where it is: word k is the letter
    ``"abcdefghij"[k // 100 % 10]`` repeated (k % 7) + 1 times, so a window's characters tell which
    part of the text it was cut from."""
    words = ["abcdefghij"[k // 100 % 10] * (k % 7 + 1) for k in range(1000)]
    path = tmp_path / "prose.txt"
    path.write_text(" ".join(words))
    return path


# ----- classification ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize("split", ["test", "validation"])
def test_evaluation_labels_are_balanced_and_fixed(name, split):
    task = tasks.get(name)
    for length in task.eval_lengths():  # 64, 128, 256
        windows, labels = task.eval_set(length, split)
        again = task.eval_set(length, split)
        assert len(labels) == 32768 // length and np.bincount(labels).tolist() == [len(labels) // 2] * 2
        assert np.array_equal(windows, again[0]) and np.array_equal(labels, again[1])
        assert task.chance(length, split) == {"accuracy": 0.5}
    assert task.eval_lengths() == [64, 128, 256]


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_training_labels_are_balanced_and_fixed_by_the_seed(name):
    task = tasks.get(name)
    first, again = (task.train_batch(np.random.default_rng(7), 2000) for _ in range(2))
    assert torch.equal(first.inputs, again.inputs) and torch.equal(first.targets, again.targets)
    assert first.inputs.shape == (2000, 64) and first.targets.shape == (2000, 1)
    assert abs(first.targets.float().mean().item() - 0.5) < 0.03  # 3 standard deviations of a fair coin: 0.034


def words_of(ids: np.ndarray, spaces: np.ndarray) -> list[np.ndarray]:
    """The words (runs of non-space ids) of a window, in order."""
    is_space = np.isin(ids, spaces)
    pieces = np.split(ids, np.flatnonzero(np.diff(is_space.astype(np.int8))) + 1)
    return [piece for piece in pieces if not np.isin(piece[0], spaces)]


def test_order_scramble_keeps_the_bag_the_spaces_and_each_words_letters():
    task = tasks.get("text_order", perturb="scramble")
    text = task.prose.training_text
    rng = np.random.default_rng(0)
    changed = 0
    for start in rng.integers(0, len(text) - 64, size=200):
        natural = text[start : start + 64]
        spaces = np.isin(natural, task.space_ids)
        shuffled = shuffle_within_words(natural, spaces, 3, rng)
        assert sorted(shuffled.tolist()) == sorted(natural.tolist())  # the same characters: a bag cannot tell
        assert np.array_equal(np.isin(shuffled, task.space_ids), spaces)  # spaces where they were
        for word, moved in zip(words_of(natural, task.space_ids), words_of(shuffled, task.space_ids), strict=True):
            assert sorted(word.tolist()) == sorted(moved.tolist())  # each word keeps its own letters
        changed += not np.array_equal(shuffled, natural)
    assert changed == 200


def test_characters_move_only_within_their_chunk_of_three():
    ids = np.array([1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10, 11, 12, 0, 0, 13])  # 0: a space; words of 5, 7 and 1
    chunks = [[1, 2, 3], [4, 5], [0], [6, 7, 8], [9, 10, 11], [12], [0], [0], [13]]
    seen = set()
    for seed in range(30):
        shuffled = shuffle_within_words(ids, ids == 0, 3, np.random.default_rng(seed))
        pieces = np.split(shuffled, np.cumsum([len(c) for c in chunks])[:-1])
        assert [sorted(p.tolist()) for p in pieces] == chunks
        seen.add(tuple(shuffled[:3].tolist()))
    assert len(seen) == 6  # every order of a chunk of three is drawn


def test_order_labels_say_whether_the_window_is_natural():
    """Natural windows (label 0) are stretches of the test text; perturbed ones (label 1) are reversed stretches."""
    task = tasks.get("text_order")
    text = task.prose.split_text("test")
    stretches = {bytes(text[i : i + 64].astype(np.uint8)) for i in range(len(text) - 63)}
    windows, labels = task.eval_set(64)
    natural = np.array([bytes(w.astype(np.uint8)) in stretches for w in windows])
    assert natural[labels == 0].all() and len(labels) == 512
    assert natural[labels == 1].sum() == 0  # no reversed window of the prose reads as a stretch of it
    reversed_back = [bytes(w[::-1].astype(np.uint8)) in stretches for w in windows[labels == 1]]
    assert all(reversed_back)  # perturb "reverse": read backwards, a shuffled window is a stretch of the text


def letters_of(task, batches) -> set[str]:
    """The marker letters of the windows in ``batches`` (ids decoded through the training alphabet)."""
    alphabet = sorted(set(task.prose.texts()[0]))
    seen = torch.cat([b.inputs.flatten() for b in batches]).unique().tolist()
    return {alphabet[i - 1] for i in seen if i} - {" "}


def test_order_splits_are_disjoint_parts_of_the_text(tmp_path):
    """The text's ten marked parts: training reads parts a … h less its validation end (the last
    5 % of the first 90 %: part i's words ≥ 86x), validation only that end, test the last 10 %."""
    path = marked_text(tmp_path)
    task = tasks.get("text_order", data=str(path), eval_chars=2048, train_length=32)
    text = path.read_text()
    cut = int(len(text) * 0.9)
    validation_from = int(cut * 0.95)
    assert len(task.texts("train")[0]) == validation_from and len(task.texts("validation")[0]) == cut - validation_from
    assert len(task.texts("test")[0]) == len(text) - cut
    train = letters_of(task, [task.train_batch(np.random.default_rng(seed), 64) for seed in range(10)])
    validation = letters_of(task, task.eval_batches(32, "validation"))
    test = letters_of(task, task.eval_batches(32))
    parts = {split: set(text[a:b]) - {" "} for split, (a, b) in
             {"train": (0, validation_from), "validation": (validation_from, cut), "test": (cut, len(text))}.items()}
    assert train <= parts["train"] and validation <= parts["validation"] and test <= parts["test"]
    assert parts["train"].isdisjoint(parts["test"]) and "j" in test and "a" in train


def test_source_splits_are_the_corpora_splits():
    task = tasks.get("text_source")
    prose, code = tasks.get("lm_prose"), tasks.get("lm_code")
    for split in ("train", "validation", "test"):
        ours = task.texts(split)
        theirs = [t.training_text if split == "train" else t.split_text(split) for t in (prose, code)]
        assert [len(t) for t in ours] == [len(t) for t in theirs]  # the same characters of each corpus
    train_files, test_files = code.files()
    assert set(train_files).isdisjoint(test_files)


@pytest.mark.parametrize("name, classes", [("text_order", 2), ("text_source", 2)])
def test_classifiers_get_a_bidirectional_model_with_a_pooled_head(name, classes):
    task = tasks.get(name)
    cfg = model_config(task, "sinusoidal", "tiny")
    assert task.causal is False and task.kind == "classification" and task.metrics == ("accuracy",)
    assert cfg.causal is False and cfg.n_classes == classes and cfg.max_len == 256
    logits = build_model(cfg)(next(task.eval_batches(64)).inputs)
    assert logits.shape == (64, classes)


# ----- masked language model --------------------------------------------------------------------
def test_masking_rates_are_berts():
    windows = np.random.default_rng(0).integers(1, 50, size=(4000, 64))
    batch = mask_windows(windows, np.random.default_rng(1), 0.15, 50, 50)
    selected = (batch.targets != IGNORE).numpy()
    assert (selected.sum(1) == 10).all()  # round(0.15 · 64) in every window: 15.6 %
    inputs = batch.inputs.numpy()
    masked, kept = (inputs == 50)[selected], (inputs == windows)[selected]
    random = ~masked & ~kept
    n = selected.sum()  # 40 000 selected positions: a standard deviation of 0.2 % (80 %) and 0.15 % (10 %)
    assert abs(masked.mean() - 0.8) < 0.01
    assert abs(random.mean() - 0.1 * 48 / 49) < 0.01  # a random draw equal to the original counts as unchanged
    assert abs(kept.mean() - (0.1 + 0.1 / 49)) < 0.01 and n == 40000
    assert (inputs[~selected] == windows[~selected]).all()  # nothing else changes
    assert ((inputs >= 1) & (inputs <= 50)).all()  # replacements are characters or MASK, never UNK


def test_masked_lm_scores_only_the_selected_positions_and_its_evaluation_is_fixed():
    task = tasks.get("mlm_prose")
    batch = task.train_batch(np.random.default_rng(0), 32)
    selected = batch.targets != IGNORE
    assert batch.inputs.shape == batch.targets.shape == (32, 64) and (selected.sum(1) == 10).all()
    assert (batch.inputs[~selected] != task.mask_id).all()
    for length in task.eval_lengths():
        first, again = (list(task.eval_batches(length)) for _ in range(2))
        assert all(torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets) for a, b in zip(first, again))
        scored = sum(int((b.targets != IGNORE).sum()) for b in first)
        assert scored == 16384 // length * round(0.15 * length)
    test, validation = (next(task.eval_batches(64, split)) for split in ("test", "validation"))
    assert not torch.equal(test.inputs, validation.inputs)
    natural = tasks.get("lm_prose")
    assert task.corpus.vocab_size == natural.corpus.vocab_size and task.mask_id == natural.corpus.vocab_size
    assert task.target_prior().tolist() == natural.target_prior().tolist()


def test_masked_lm_gets_a_bidirectional_model_with_a_mask_token():
    task = tasks.get("mlm_prose")
    cfg = model_config(task, "rope", "tiny")
    assert task.causal is False and task.kind == "nlp" and task.metrics == ("bits_per_char", "token_accuracy")
    assert cfg.causal is False and cfg.n_classes is None and cfg.vocab_size == task.mask_id + 1 == 99
    assert cfg.max_len == 512


# ----- NoPE: a bag of tokens --------------------------------------------------------------------
@pytest.mark.parametrize("name", ENCODER_TASKS)
def test_a_nope_encoder_is_blind_to_the_order_of_its_input(name):
    """Without positions a bidirectional model with a pooled head is a function of the bag of
    tokens: its logits do not change when the input is permuted (and a per-token model's logits
    permute with it). A sinusoidal one does change: the test can fail."""
    task = tasks.get(name)
    inputs = next(task.eval_batches(64)).inputs[:8]
    order = torch.randperm(64, generator=torch.Generator().manual_seed(0))
    for encoding, blind in (("none", True), ("sinusoidal", False)):
        torch.manual_seed(0)
        model = build_model(model_config(task, encoding, "tiny")).eval()
        with torch.no_grad():
            plain, permuted = model(inputs), model(inputs[:, order])
        if plain.dim() == 3:  # (B, L, V): per-token logits move with their tokens
            plain = plain[:, order]
        same = torch.allclose(plain, permuted, atol=1e-5)
        assert same == blind


# ----- end to end -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ENCODER_TASKS)
def test_a_few_training_steps_end_to_end(name):
    options = {"train_length": 16, "eval_chars": 1024}
    config = TrainConfig(task=name, encoding="rope", steps=20, batch_size=16, log_every=10, task_options=options)
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and record["task"] == name
    curve = [point["loss"] for point in record["loss_curve"]]
    assert len(curve) == 2 and all(np.isfinite(curve))
    lengths = [e["length"] for e in record["eval"]]
    metric = record["metrics"][0]
    if name == "mlm_prose":
        assert lengths == [16, 20, 24, 32, 64, 128] and metric == "bits_per_char"
        for e in record["eval"]:  # scored: round(0.15 · L) characters of each of 1024 // L windows
            assert e["scored_targets"] == 1024 // e["length"] * round(0.15 * e["length"])
            assert e["metrics"]["bits_per_char"] > 0
    else:
        assert lengths == [16, 32, 64] and metric == "accuracy"
        for e in record["eval"]:
            assert e["sequences"] == e["scored_targets"] == 1024 // e["length"] and e["chance"] == {"accuracy": 0.5}
            assert 0 <= e["metrics"]["accuracy"] <= 1
