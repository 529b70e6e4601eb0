"""``variable_tracking``: RULER's variable tracking (Hsieh et al. 2024, ``vt`` in ``NVIDIA/RULER``'s
``scripts/synthetic.yaml``): follow chains of assignments through filler, then name every variable
that holds a value. RULER's generator was not readable here (not in the stored sources): the task
follows its paper's description, not its code.

Sequence (token ids): filler words with assignment statements among them, then a question::

    … x3 = 4 7 ; … x9 = 1 2 ; … x5 = x3 ; … x0 = x9 ; … x8 = x5 ; …   ? 4 7 :   x3 x5 x8

Each of ``n_chains`` chains sets a fresh variable to a value of ``n_digits`` digits, then passes it
on ``hops`` times (``x5 = x3``: one hop), each hop to a fresh variable; the chains' statements keep
their order but interleave at random, and sit at random places in filler (one fixed sentence of
``n_filler`` words from a random phase, like ``passkey``'s). The question gives the value of one
chain; the answer is its variables in the order they were assigned, RULER's "find all variables
that are assigned the value" (RULER's default has one chain in noise; two here, so the value must
be matched, not merely every assignment listed). Every answer token but the first is one hop: find
where the previous variable is read. Only the answer is scored: exact match needs the whole chain,
token accuracy is per variable (chance: the majority variable's share, about ``1 / n_names``).

Training draws ``hops`` from 1 to ``max_hops`` (4, RULER's) per example; an evaluation set cycles
through them item by item (:meth:`VariableTracking.eval_hops`), so per-item results split by hops.
The problem size ``length`` is the context in tokens, filler and statements (the question and answer
come after it). Trained at 64 (two chains of up to 4 hops take 42 tokens of it: a ``tiny`` model on
one core trains on this in a short run) and evaluated to 16× it (1,024 tokens, mostly filler).
The budget, 4,000 steps, is the largest tried; a tiny arm is still learning there (at 600 it stayed
near chance), so a comparison's pilot should check it in distribution first (results/reference/NOTES.md
(Lab notes)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.passkey import DIGITS
from posbench.tasks.registry import register
from posbench.tasks.sequence import FREE_RUNNING_METRICS, VaryingSequenceTask, prompt_then_answer

MARKS = ("=", ";", "?", ":")  # token ids after the digits, the variable names and the filler words


@register("variable_tracking")
@dataclass(frozen=True)
class VariableTracking(VaryingSequenceTask):
    """Token ids: digits ``0 … 9``, ``n_names`` variable names, ``n_filler`` filler words, :data:`MARKS`, padding."""

    kind = "long"
    metrics: ClassVar[tuple[str, ...]] = FREE_RUNNING_METRICS

    train_length: int = 64
    min_length: int = 48
    n_names: int = 16
    n_filler: int = 5
    n_chains: int = 2
    max_hops: int = 4
    n_digits: int = 2
    steps: int = 4000
    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)

    def __post_init__(self):
        if self.max_hops < 1 or self.n_chains < 1:
            raise ValueError(f"variable_tracking: max_hops and n_chains must be >= 1, "
                             f"got {self.max_hops}, {self.n_chains}")
        if self.n_chains * (self.max_hops + 1) > self.n_names:
            raise ValueError(f"variable_tracking: n_names ({self.n_names}) must cover n_chains × (max_hops + 1) "
                             f"= {self.n_chains * (self.max_hops + 1)} distinct variables")
        if DIGITS ** self.n_digits < self.n_chains:
            raise ValueError(f"variable_tracking: n_digits ({self.n_digits}) too few for "
                             f"{self.n_chains} distinct values")
        if not self.statement_tokens() <= self.min_length <= self.train_length:
            raise ValueError(f"variable_tracking: min_length must be {self.statement_tokens()} (the longest chains' "
                             f"statements) … train_length ({self.train_length}), got {self.min_length}")

    def name_id(self, index: np.ndarray) -> np.ndarray:
        return DIGITS + index

    def mark(self, mark: str) -> int:
        return DIGITS + self.n_names + self.n_filler + MARKS.index(mark)

    @property
    def vocab_size(self) -> int:
        return DIGITS + self.n_names + self.n_filler + len(MARKS) + 1

    def statement_tokens(self, hops: int | None = None) -> int:
        """Tokens of all chains' statements at ``hops`` (default ``max_hops``): ``x = d … ;``, then
        ``x = y ;`` per hop."""
        hops = self.max_hops if hops is None else hops
        return self.n_chains * (self.n_digits + 3 + 4 * hops)

    def valid_length(self, length: int) -> int:
        return max(length, self.statement_tokens())

    def sequence_length(self, length: int) -> int:
        return length + self.n_digits + 2 + self.max_hops  # ``? value :`` then the longest answer, less its last token

    def eval_hops(self, item: int) -> int:
        """The chains' hops in item ``item`` of any evaluation set."""
        return 1 + item % self.max_hops

    def example(self, rng: np.random.Generator, length: int, hops: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        hops = int(rng.integers(1, self.max_hops + 1)) if hops is None else hops
        names = self.name_id(rng.choice(self.n_names, size=(self.n_chains, hops + 1), replace=False))  # (C, hops+1)
        values = rng.choice(DIGITS ** self.n_digits, size=self.n_chains, replace=False)
        value_digits = values[:, None] // DIGITS ** np.arange(self.n_digits)[::-1] % DIGITS  # (C, n_digits)
        chains = [[[names[c, 0], self.mark("="), *value_digits[c], self.mark(";")]]
                  + [[names[c, h], self.mark("="), names[c, h - 1], self.mark(";")] for h in range(1, hops + 1)]
                  for c in range(self.n_chains)]
        order = rng.permutation(np.repeat(np.arange(self.n_chains), hops + 1))  # which chain's next statement
        statements = [chains[c].pop(0) for c in order]
        n_filler = length - self.statement_tokens(hops)
        phase = int(rng.integers(0, self.n_filler))
        filler = DIGITS + self.n_names + (phase + np.arange(n_filler)) % self.n_filler  # (n_filler,)
        gaps = np.sort(rng.integers(0, n_filler + 1, size=len(statements)))  # filler tokens before each statement
        pieces, start = [], 0
        for gap, statement in zip(gaps, statements):
            pieces += [filler[start:gap], statement]
            start = gap
        pieces.append(filler[start:])
        asked = int(rng.integers(self.n_chains))
        prompt = np.concatenate([*pieces, [self.mark("?")], value_digits[asked], [self.mark(":")]])
        return prompt_then_answer(prompt, names[asked])

    def eval_example(self, rng: np.random.Generator, length: int, item: int) -> tuple[np.ndarray, np.ndarray]:
        return self.example(rng, length, self.eval_hops(item))
