"""Character LMs evaluated to 16× and beyond (issue 19): ``lm_prose_long``'s docstring test text and
its training (``lm_prose``'s exactly), and the sliding-window score beside the non-overlapping
headline: which characters it scores, with how much context, and what it comes to on a model."""

import ast
import io
import math
import platform
import sysconfig
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from posbench import records, tasks
from posbench.aggregate import aggregate
from posbench.evaluation import evaluate, evaluate_sliding
from posbench.tasks import IGNORE
from posbench.tasks.corpus import UNK, sliding_starts, sliding_stride, windows
from posbench.tasks.lm_prose_long import stdlib_docstrings
from posbench.train import TrainConfig, deterministic, fit, initial_model, resolve, train

STATED = {"3.11.7": (901_437, 1_510)}  # the docstring: characters of the test text, of which UNK


# ----- lm_prose_long's texts -------------------------------------------------------------------------
def test_the_docstring_corpus_is_deterministic_and_of_the_stated_size():
    text = stdlib_docstrings()
    assert stdlib_docstrings.__wrapped__() == text  # parsed again from the files: the same text
    abc = Path(sysconfig.get_paths()["stdlib"]) / "abc.py"
    assert ast.get_docstring(ast.parse(abc.read_text(encoding="utf-8"))) in text
    if platform.python_version() not in STATED:
        pytest.skip(f"the docstring states the size on Python {', '.join(STATED)}")
    size, unknown = STATED[platform.python_version()]
    task = tasks.get("lm_prose_long")
    assert len(text) == len(task.corpus.test) == size
    assert int((task.corpus.test == UNK).sum()) == unknown


def test_lm_prose_long_trains_on_lm_prose_python_docs_text_validation_and_vocabulary():
    long, prose = tasks.get("lm_prose_long"), tasks.get("lm_prose", text="python_docs")
    assert np.array_equal(long.training_text, prose.training_text)
    assert np.array_equal(long.split_text("validation"), prose.split_text("validation"))
    assert long.corpus.vocab_size == prose.corpus.vocab_size and long.model_options() == prose.model_options()
    for mine, theirs in zip(long.eval_batches(64, "validation"), prose.eval_batches(64, "validation"), strict=True):
        assert torch.equal(mine.inputs, theirs.inputs) and torch.equal(mine.targets, theirs.targets)
    mine, theirs = (task.train_batch(np.random.default_rng(3), 8) for task in (long, prose))
    assert torch.equal(mine.inputs, theirs.inputs) and torch.equal(mine.targets, theirs.targets)
    assert len(long.split_text("test")) > 10 * len(prose.split_text("test")) and long.kind == "long"


def test_lm_prose_long_reads_64_non_overlapping_windows_at_32x():
    task = tasks.get("lm_prose_long")
    assert task.eval_lengths() == [64, 128, 256, 512, 1024, 2048]
    for length in task.eval_lengths():
        _, starts = task.eval_windows(length, "test")
        assert len(starts) == 131072 // length and (np.diff(starts) >= length).all()
    assert len(task.eval_windows(2048, "test")[1]) == 64
    assert tasks.get("lm_code").eval_lengths()[-1] == 1024  # lm_code: to 16×, 16 windows of its 518k test characters
    assert len(tasks.get("lm_code").eval_windows(1024, "test")[1]) == 16


def test_a_length_the_text_cannot_hold_is_one_line_naming_task_and_split(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("a tiny test text\n" * 10)
    task = tasks.get("lm_prose_long", test_data=str(short))
    for batches in (task.eval_batches, task.sliding_batches):
        with pytest.raises(ValueError) as error:
            next(batches(2048))
        assert str(error.value) == "lm_prose_long: test split has 170 characters, too few for windows of 2048"
    with pytest.raises(ValueError, match=r"^lm_prose_long: validation split has 20931 characters, too few for "
                                         r"windows of 32768$"):
        next(tasks.get("lm_prose_long").eval_batches(32768, "validation"))


# ----- the sliding windows -----------------------------------------------------------------------------
@pytest.mark.parametrize(("length", "spans"), [(16, [0, 40, 80]), (10, [0, 30, 41]), (11, [9, 40]), (3, [0, 5, 9])])
def test_sliding_windows_score_every_character_of_the_spans_once_with_enough_context(length, spans):
    """On a text whose ids are their positions, every scored target names the character it is. A
    span with room before it for its earliest window (⌈m/s⌉ - 1 strides) has every target read after
    at least m - s characters; one without (the span at 0; 9 < 10 for m = 11, s = 2) is one window."""
    text = np.arange(200)
    stride = sliding_stride(length)
    starts, scored_from = sliding_starts(np.array(spans), length, stride)
    batch = windows(text, starts, length, scored_from)
    scored = (batch.targets != IGNORE).numpy()  # (K, length)
    expected = sorted(t for p in spans for t in range(p + 1, p + length + 1))
    assert sorted(batch.targets.numpy()[scored]) == expected  # the spans' targets, each once
    context = np.broadcast_to(np.arange(1, length + 1), scored.shape)  # (K, length) characters read before each
    earliest = (-(-length // stride) - 1) * stride
    for start, row, reads in zip(starts, scored, context):
        if start in [p for p in spans if p < earliest]:
            assert row.all()  # its own window alone, as in the headline
        else:
            assert 0 < row.sum() <= stride and row[-1] and (reads[row] >= length - stride).all()
    assert (batch.inputs.numpy()[scored] == batch.targets.numpy()[scored] - 1).all()  # the character before each
    assert stride == max(1, length // 4)


def small_prose(tmp_path, **options) -> dict:
    path = tmp_path / "prose.txt"
    path.write_text((Path(__file__).read_text() * 3)[:12000])  # English-ish ASCII: this file
    return {"data": str(path), "train_length": 16, "test_fraction": 0.5, "eval_chars": 256,
            "eval_factors": (1.0, 2.0, 4.0), **options}


def test_the_sliding_windows_score_the_headlines_characters(tmp_path):
    task = tasks.get("lm_prose", **small_prose(tmp_path))
    for length in task.eval_lengths():
        headline = sum(int((b.targets != IGNORE).sum()) for b in task.eval_batches(length))
        sliding = list(task.sliding_batches(length))
        assert sum(int((b.targets != IGNORE).sum()) for b in sliding) == headline == 256
        assert sum(len(b.targets) for b in sliding) == 1 + 4 * (256 // length - 1)  # the first span: one window
        scored_ids = [torch.cat([b.targets[b.targets != IGNORE] for b in batches]).sort().values
                      for batches in (task.eval_batches(length), sliding)]
        assert torch.equal(*scored_ids)  # the same characters
    assert task.sliding_window and tasks.get("lm_code").sliding_window
    assert not tasks.get("mlm_prose").sliding_window and not tasks.get("code_brackets").sliding_window


def per_character_losses(model, text: np.ndarray, spans: np.ndarray, length: int, stride: int) -> np.ndarray:
    """The loss of every target of the spans (``p + 1 … p + length`` for each ``p``), each read in the
    window ending at the next multiple of ``stride`` back from its span's end (its span's own window
    where the span starts within ``length - stride`` of the text's start): target by target from that
    rule, not from the windows the task builds."""
    losses = []
    model.eval()
    with torch.no_grad():
        for p in spans:
            for target in range(p + 1, p + length + 1):
                start = p if p < length - stride else p - stride * ((p + length - target) // stride)
                window = torch.from_numpy(text[start : start + length])[None]  # (1, length)
                logits = model(window)[0, target - 1 - start]  # (V,)
                losses.append(F.cross_entropy(logits[None], torch.tensor([int(text[target])])).item())
    model.train()
    return np.array(losses)


def test_the_sliding_score_is_the_mean_loss_of_each_character_in_its_own_window(tmp_path):
    job = resolve(TrainConfig(task="lm_prose", encoding="alibi", steps=30, batch_size=8,
                              task_options=small_prose(tmp_path, eval_chars=64)))
    with deterministic(1):
        model = initial_model(job)
        fit(model, job, io.StringIO(), "sliding")
        for length in job.task.eval_lengths():
            sliding = evaluate_sliding(model, job.task, length)
            text, spans = job.task.eval_windows(length, "test")
            expected = per_character_losses(model, text, spans, length, length // 4)
            assert sliding.sums["scored"] == 64
            assert sliding.metrics["bits_per_char"] == pytest.approx(expected.mean() / math.log(2), rel=1e-5)
            own_windows = per_character_losses(model, text, spans, length, length)  # every span in its own window
            headline = evaluate(model, job.task, length).metrics["bits_per_char"]
            assert headline == pytest.approx(own_windows.mean() / math.log(2), rel=1e-5)
            if length == 64:  # one span, at the text's start: its own window, both ways
                assert np.allclose(expected, own_windows)
            else:  # the same characters, read after more context
                assert not np.allclose(expected, own_windows, rtol=1e-3)


# ----- records, tables, end to end --------------------------------------------------------------------
def test_the_sliding_score_is_in_the_record_and_the_tables(tmp_path):
    quiet = io.StringIO()
    causal = train(TrainConfig(task="lm_prose", encoding="rope", steps=20, batch_size=8,
                               task_options=small_prose(tmp_path)), log=quiet)
    masked = train(TrainConfig(task="mlm_prose", encoding="rope", steps=5, batch_size=8,
                               task_options=small_prose(tmp_path)), log=quiet)
    for entry in causal["eval"]:
        sliding = entry["sliding"]
        assert sliding["stride"] == entry["length"] // 4 and sliding["scored_targets"] == entry["scored_targets"]
        assert sliding["windows"] == 1 + 4 * (256 // entry["length"] - 1)
        assert set(sliding["metrics"]) == {"loss", "bits_per_char", "token_accuracy"}
    assert 0 < causal["wall_time_s"]["sliding"] < causal["wall_time_s"]["eval"]
    assert all("sliding" not in e for e in masked["eval"]) and "sliding" not in masked["wall_time_s"]
    for name, record in (("causal", causal), ("masked", masked)):
        records.write_record(tmp_path / "records" / f"{name}.json", record)  # validated against the schema
    aggregate(tmp_path / "records", tmp_path / "tables")
    rows = pd.read_csv(tmp_path / "tables" / "extrapolation.csv")
    lm = rows[rows["task"] == "lm_prose"].set_index("eval_len")
    for entry in causal["eval"]:
        assert lm.loc[entry["length"], "value_sliding"] == entry["sliding"]["metrics"]["bits_per_char"]
        assert lm.loc[entry["length"], "sliding_stride"] == entry["length"] // 4
        assert lm.loc[entry["length"], "value"] == entry["metrics"]["bits_per_char"]
    assert rows.loc[rows["task"] == "mlm_prose", "value_sliding"].isna().all()
    accuracy = pd.read_csv(tmp_path / "tables" / "accuracy.csv").set_index("task")
    assert accuracy.loc["lm_prose", "value_sliding"] == causal["eval"][0]["sliding"]["metrics"]["bits_per_char"]


@pytest.mark.parametrize("encoding", ["none", "learned", "rope", "alibi"])
def test_a_few_steps_of_lm_prose_long_run_end_to_end_to_32x(encoding):
    options = {"eval_chars": 4096, "eval_factors": (1.0, 4.0, 32.0)}
    record = train(TrainConfig(task="lm_prose_long", encoding=encoding, steps=3, batch_size=4, log_every=1,
                               task_options=options), log=io.StringIO())
    records.validate(record)
    assert record["status"] == "ok" and [e["length"] for e in record["eval"]] == [64, 256, 2048]
    longest = record["eval"][-1]
    assert (longest["sequences"], longest["sliding"]["windows"], longest["sliding"]["stride"]) == (2, 5, 512)
    assert longest["scored_targets"] == longest["sliding"]["scored_targets"] == 4096
    assert longest["chance"]["bits_per_char"] > 4  # the unigram cross-entropy on the docstrings
    tables = record["positions_beyond_training"]["tables"]
    if encoding == "learned":  # a table of 2048 rows, of which training reached the first 64
        assert tables["weight"]["rows"] == 2048 and tables["weight"]["rows_beyond_training_unchanged"] == 2048 - 64
    else:
        assert tables == {}
