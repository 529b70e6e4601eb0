"""``multikey_niah``: RULER's multi-key needle in a haystack made of needles (Hsieh et al. 2024,
``niah_multikey_2`` in ``NVIDIA/RULER``'s ``scripts/synthetic.yaml``: the haystack is other needles).
RULER's generator was not readable here (not in the stored sources): the task follows its paper's
description, not its code.

Sequence (token ids): needles ``k_1 … k_a : d_1 … d_m ;``, each a key of ``key_tokens`` symbols and a
value of ``n_digits`` digits, back to back, then a question for one key::

    k7 k2 : 4 0 9 ;   k3 k3 : 1 1 5 ;   …   ? k3 k3 :   1 1 5

The keys of one sequence are distinct and every needle is shaped like the answer, so nothing but the
key tells the asked needle from the rest: unlike ``passkey`` (one needle in filler), the model must
match the key, wherever it sits among ever more look-alikes. Only the value's digits are scored:
exact match needs all ``m`` right (guessing: 10^-m), token accuracy is per digit (chance about 1/10).

The problem size ``length`` is the haystack in tokens, a whole number of needles. The asked needle's
*depth* is drawn uniformly in training; an evaluation set cycles through ``passkey``'s depths item by
item (:meth:`MultikeyNiah.eval_depth`), so a depth × length map can be read from per-item results.
Trained on 9 needles (63 tokens: a ``tiny`` model on one core trains on that in a short run) and
evaluated to 16× it (144 needles in 1,008 tokens; 16 key symbols in pairs give 256 distinct keys, so
every needle's key stays unique). The budget, 4,000 steps, is one at which a tiny arm is past 95 %
in distribution; at 600 and 2,000 it was still near chance or learning (results/reference/NOTES.md
(Lab notes)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.passkey import DIGITS, Passkey
from posbench.tasks.registry import register
from posbench.tasks.sequence import FREE_RUNNING_METRICS, SequenceTask, prompt_then_answer

MARKS = (":", ";", "?")  # token ids after the digits and the key symbols


@register("multikey_niah")
@dataclass(frozen=True)
class MultikeyNiah(SequenceTask):
    """Token ids: digits ``0 … 9``, key symbols, :data:`MARKS`, padding."""

    kind = "long"
    metrics: ClassVar[tuple[str, ...]] = FREE_RUNNING_METRICS

    train_length: int = 63  # 9 needles: evaluation lengths are whole multiples of it
    min_length: int = 14
    n_symbols: int = 16  # key symbols
    key_tokens: int = 2
    n_digits: int = 3
    steps: int = 4000
    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)

    eval_depth = staticmethod(Passkey.eval_depth)

    def __post_init__(self):
        needles = max(self.eval_lengths()) // self.needle_size
        if self.n_symbols ** self.key_tokens < needles:
            raise ValueError(f"multikey_niah: n_symbols ** key_tokens ({self.n_symbols ** self.key_tokens}) must "
                             f"cover the {needles} needles of the longest evaluation; raise n_symbols or key_tokens")

    @property
    def needle_size(self) -> int:
        return self.key_tokens + self.n_digits + 2

    def mark(self, mark: str) -> int:
        return DIGITS + self.n_symbols + MARKS.index(mark)

    @property
    def vocab_size(self) -> int:
        return DIGITS + self.n_symbols + len(MARKS) + 1

    def valid_length(self, length: int) -> int:
        return max(length - length % self.needle_size, 2 * self.needle_size)

    def sequence_length(self, length: int) -> int:
        return length + self.key_tokens + 2 + self.n_digits - 1  # the last digit is only a target

    def example(self, rng: np.random.Generator, length: int, depth: float | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        n_needles = length // self.needle_size
        key_numbers = rng.choice(self.n_symbols ** self.key_tokens, size=n_needles, replace=False)
        places = self.n_symbols ** np.arange(self.key_tokens)[::-1]  # (a,) the key's digits in base n_symbols
        keys = DIGITS + key_numbers[:, None] // places % self.n_symbols  # (N, a)
        values = rng.integers(0, DIGITS, size=(n_needles, self.n_digits))  # (N, m)
        colon, semicolon = np.full((n_needles, 1), self.mark(":")), np.full((n_needles, 1), self.mark(";"))
        haystack = np.concatenate([keys, colon, values, semicolon], axis=1).ravel()  # (N · needle_size,)
        depth = float(rng.uniform()) if depth is None else depth
        asked = round(depth * (n_needles - 1))
        prompt = np.concatenate([haystack, [self.mark("?")], keys[asked], [self.mark(":")]])
        return prompt_then_answer(prompt, values[asked])

    def eval_example(self, rng: np.random.Generator, length: int, item: int) -> tuple[np.ndarray, np.ndarray]:
        return self.example(rng, length, self.eval_depth(item))
