"""``text_order`` (order-sensitive): a window of ``lm_prose``'s text is natural (label 0) or
perturbed (label 1), with exactly the natural window's characters — the same bag — so NoPE cannot
tell the labels apart and sits at chance. ``perturb`` says how: ``reverse`` (the default) reads the
window backwards; ``scramble`` shuffles the characters of every word within consecutive chunks of
``span`` characters (``span`` 3: "position" may come back "sopitino"; words are the runs of
non-space characters, cut words at either end included; spaces and newlines stay in place). A
window no perturbation changes (a rule of ``*``, say) is passed over for the next one. ``scramble``
is too hard for the tiny model's budget (even RoPE stays at chance) and is kept for larger models;
the measurements are in ``results/reference/NOTES.md`` (Lab notes).

Splits, evaluation sets and lengths: :mod:`posbench.tasks.window_classification`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from posbench.tasks.lm_prose import ProseLM
from posbench.tasks.registry import register
from posbench.tasks.window_classification import WindowClassification

SPACES = " \n\t"  # characters that separate words; they stay in place in a shuffled window
PERTURBATIONS = ("reverse", "scramble")  # text_order's label-1 windows: reversed, or letters shuffled within words


def shuffle_within_words(window: np.ndarray, is_space: np.ndarray, span: int,
                        rng: np.random.Generator) -> np.ndarray:
    """``window (L,)`` with the characters of each word permuted within consecutive chunks of
    ``span`` characters counted from the word's start; spaces stay in place. A draw that leaves the
    window as it was is drawn again (up to 20 times), so a window with a chunk of two different
    characters always comes back changed."""
    length = len(window)
    where = np.arange(length)
    starts_run = np.r_[True, is_space[1:] != is_space[:-1]]  # (L,) a run of word or space characters starts
    offset = where - np.maximum.accumulate(np.where(starts_run, where, 0))  # (L,) place inside its run
    chunk = np.cumsum(starts_run) * (length + 1) + np.where(is_space, offset, offset // span)  # (L,) nondecreasing
    for _ in range(20):
        shuffled = window[np.lexsort((rng.random(length), chunk))]
        if not np.array_equal(shuffled, window):
            return shuffled
    return shuffled


@register("text_order")
@dataclass(frozen=True)
class TextOrder(WindowClassification):
    """Options: ``data`` (a text file replacing the built-in prose), ``perturb`` (:data:`PERTURBATIONS`),
    ``span`` (characters shuffled together by ``scramble``)."""

    data: str | None = None
    span: int = 3
    perturb: str = "reverse"

    def __post_init__(self):
        if self.perturb not in PERTURBATIONS:
            raise ValueError(f"text_order: perturb {self.perturb!r}; allowed: {', '.join(PERTURBATIONS)}")
        if self.span < 2:
            raise ValueError(f"text_order: span must be at least 2 characters, got {self.span}")

    @cached_property
    def prose(self) -> ProseLM:
        return ProseLM(data=self.data)

    @property
    def vocab_size(self) -> int:
        return self.prose.corpus.vocab_size

    @cached_property
    def space_ids(self) -> np.ndarray:
        """Ids of the separating characters the training text has."""
        codes = np.frombuffer(SPACES.encode("utf-32-le"), dtype=np.uint32)
        alphabet = np.unique(np.frombuffer(self.prose.texts()[0].encode("utf-32-le"), dtype=np.uint32))
        return np.flatnonzero(np.isin(alphabet, codes)) + 1  # ids are alphabet slots + 1 (UNK is 0)

    def texts(self, split: str) -> list[np.ndarray]:
        text = self.prose.training_text if split == "train" else self.prose.split_text(split)
        return [text, text]

    def window(self, label: int, text: np.ndarray, start: int, length: int, rng: np.random.Generator) -> np.ndarray:
        natural = text[start : start + length]
        if label == 0:
            return natural
        for _ in range(100):  # a window that no shuffle changes (a rule of '*' or '=') gives way to the next one
            if self.perturb == "reverse":
                shuffled = natural[::-1].copy()
            else:
                shuffled = shuffle_within_words(natural, np.isin(natural, self.space_ids), self.span, rng)
            if not np.array_equal(shuffled, natural):
                return shuffled
            start = (start + length) % (len(text) - length + 1)
            natural = text[start : start + length]
        raise ValueError(f"{self.name}: no window of {length} characters near {start} changes when shuffled")
