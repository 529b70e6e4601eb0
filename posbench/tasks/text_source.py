"""``text_source`` (mostly order-insensitive): which corpus a window comes from, prose (label 0,
``lm_prose``'s English text) or code (label 1, ``lm_code``'s standard-library source). A bag
of characters nearly suffices (indentation, ``_``, ``()``, ``=`` against letters and punctuation);
NoPE here is the bag-of-characters control beside ``text_order``.

Splits, evaluation sets and lengths: :mod:`posbench.tasks.window_classification`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from posbench.tasks.base import check_split
from posbench.tasks.corpus import VALIDATION_FRACTION, encode_corpus
from posbench.tasks.lm_code import CodeLM
from posbench.tasks.lm_prose import ProseLM
from posbench.tasks.registry import register
from posbench.tasks.window_classification import WindowClassification


def validation_start(text: np.ndarray) -> int:
    """Where a training split's validation end begins (the corpora's rule)."""
    return int(len(text) * (1 - VALIDATION_FRACTION))


@register("text_source")
@dataclass(frozen=True)
class TextSource(WindowClassification):
    """Options: ``prose`` (a text file replacing the built-in prose), ``code`` (a directory of ``*.py``
    files replacing the standard library)."""

    prose: str | None = None
    code: str | None = None

    @property
    def vocab_size(self) -> int:
        return _sources(self)[1]

    def texts(self, split: str) -> list[np.ndarray]:
        parts = _sources(self)[0]
        if split == "train":
            return [part.train[: part.validation_start] for part in parts]
        check_split(split)
        return [part.test if split == "test" else part.train[part.validation_start :] for part in parts]


@dataclass(frozen=True)
class _Part:
    train: np.ndarray  # the training split with its validation end
    test: np.ndarray
    validation_start: int  # where in ``train`` validation begins: the corpus's own rule


@cache
def _sources(task: TextSource) -> tuple[tuple[_Part, _Part], int]:
    """The prose and code corpora encoded with one vocabulary (the characters of both training
    splits, ``UNK`` for the rest), and its size."""
    prose_task = ProseLM(data=task.prose)
    prose, code = prose_task.texts(), CodeLM(data=task.code).texts()
    corpus = encode_corpus(prose[0] + code[0], prose[1] + code[1])
    prose_train, code_train = corpus.train[: len(prose[0])], corpus.train[len(prose[0]) :]
    own = prose_task.validation_length()
    parts = (_Part(prose_train, corpus.test[: len(prose[1])],
                   validation_start(prose_train) if own is None else len(prose_train) - own),
             _Part(code_train, corpus.test[len(prose[1]) :], validation_start(code_train)))
    return parts, corpus.vocab_size
