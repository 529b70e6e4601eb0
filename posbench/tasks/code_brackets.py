"""``code_brackets``: in Python source, say at each closing bracket how far back its opening one is.

The text is ``lm_code``'s (the standard library's top-level modules, split by file), read as
characters. At every closing bracket ``)`` ``]`` ``}`` the model sees it and must answer the distance
in characters to the bracket it closes, as one of ``max_offset`` classes: a per-token tagging task
(the target sits on the bracket itself, not on the next character). Pairs come from Python's own
:mod:`tokenize`, so brackets inside strings and comments are not brackets and are never scored.

Only pairs whose opening bracket lies inside the window and at most ``max_offset`` characters back
are scored, at every evaluation length: distances never trained would be untrained classes for
every encoding and decide nothing. A longer evaluation window asks the same question further from
the window's start: can the model still measure a distance of up to ``max_offset`` characters when
the absolute positions around it were never trained? Every other position is unscored.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
import torch

from posbench.tasks.base import IGNORE, Batch, check_split
from posbench.tasks.lm_code import FILE_SEPARATOR, CodeLM
from posbench.tasks.registry import register

OPENING, CLOSING = "([{", ")]}"


def bracket_distances(source: str, name: str = "<source>") -> np.ndarray:
    """``(len(source),)`` at each closing bracket the distance in characters back to its opening
    bracket, 0 elsewhere; pairs as Python's tokenizer sees them (strings and comments hold none)."""
    line_starts = np.cumsum([0] + [len(line) for line in source.splitlines(keepends=True)])
    distances = np.zeros(len(source), dtype=np.int64)
    opened: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.OP or token.string not in OPENING + CLOSING:
                continue
            at = int(line_starts[token.start[0] - 1]) + token.start[1]
            if token.string in OPENING:
                opened.append(at)
            else:
                distances[at] = at - opened.pop()
    except (tokenize.TokenError, SyntaxError, IndexError) as error:
        raise ValueError(f"code_brackets: {name} does not tokenize as Python ({error})") from None
    return distances


@register("code_brackets")
@dataclass(frozen=True)
class CodeBrackets(CodeLM):
    """Token ids: ``lm_code``'s characters, then one class per distance ``1 … max_offset``."""

    kind = "code"
    metrics: ClassVar[tuple[str, ...]] = ("token_accuracy",)

    train_length: int = 128
    max_offset: int = 64
    steps: int = 600  # chosen on validation (the measurements: results/reference/NOTES.md, Lab notes)
    eval_chars: int = 131072  # about 1,300 scored brackets at every length
    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)

    def model_options(self) -> dict:
        return {"vocab_size": self.corpus.vocab_size + self.max_offset, "causal": True}

    def target_prior(self) -> None:
        return None  # token accuracy's chance is the majority distance of each evaluation set

    @property
    def distances(self) -> tuple[np.ndarray, np.ndarray]:
        """``(N_train,)``, ``(N_test,)`` bracket distances aligned with the corpus's characters."""
        return _distances(self)

    def split_distances(self, split: str) -> np.ndarray:
        check_split(split)
        train, test = self.distances
        return test if split == "test" else train[self._validation_start() :]

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        text = self.training_text
        starts = rng.integers(0, len(text) - self.train_length, size=batch_size)
        return self.tagged_windows(text, self.distances[0], starts, self.train_length)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        text, starts = self.eval_windows(length, split)
        distances = self.split_distances(split)
        for first in range(0, len(starts), self.eval_batch_size):
            yield self.tagged_windows(text, distances, starts[first : first + self.eval_batch_size], length)

    def tagged_windows(self, text: np.ndarray, distances: np.ndarray, starts: np.ndarray, length: int) -> Batch:
        """Windows of ``length`` characters from ``starts``; targets are distance classes at the
        closing brackets whose opening bracket is inside the window and ``max_offset`` back at most."""
        at = starts[:, None] + np.arange(length)  # (B, length) character indices
        distance = distances[at]  # (B, length)
        scored = (distance > 0) & (distance <= self.max_offset) & (distance <= np.arange(length))
        targets = np.where(scored, self.corpus.vocab_size + distance - 1, IGNORE)  # (B, length)
        return Batch(torch.from_numpy(text[at]), torch.from_numpy(targets))


@cache
def _distances(task: CodeBrackets) -> tuple[np.ndarray, np.ndarray]:
    def joined(files) -> np.ndarray:
        separator = np.zeros(len(FILE_SEPARATOR), dtype=np.int64)
        parts = [bracket_distances(f.read_text(encoding="utf-8", errors="replace"), f.name) for f in files]
        return np.concatenate([p for part in parts for p in (part, separator)][:-1])

    train, test = (joined(files) for files in task.files())
    if (len(train), len(test)) != (len(task.corpus.train), len(task.corpus.test)):
        raise AssertionError("code_brackets: distances and characters out of step")  # texts() changed its joining
    return train, test
