"""``counting``: CoPE's counting task (Golovneva et al. 2024): how often was a variable incremented?

A program of ``length`` statements over ``n_vars`` variables, then a question::

    a = 0 ;   pass ;   a ++ ;   b = 0 ;   pass ;   a ++ ;   …   print a   →   2

As in the paper's generator (``facebookresearch/RAM``, ``projects/cope/scripts/count_data_gen.py``)
each statement is drawn with weights :data:`OP_WEIGHTS` — a reset ``v = 0 ;`` (1), ``pass ;`` (50),
an increment ``v ++ ;`` of a variable already set (7); a draw that cannot be made (an increment with
no variable set, or one past :data:`MAX_VALUE`) is drawn again, and a program that never sets a
variable is drawn again whole. The question prints a variable that was set; its value, one token
``0 … MAX_VALUE``, is the only scored target. Counting the increments since the last reset of one
variable, among many ``pass`` statements, is a count by content, the paper's case for contextual
positions: its 1-, 3- and 5-variable versions are ``n_vars`` 1, 3 and 5 (3, the generator's default,
here). Chance: the majority answer's share of the set (``Task.chance``).

The problem size is the number of statements (the generator's ``nsteps``, drawn from 3 to the
training length); statements take 2 to 4 tokens, so :meth:`Counting.sequence_length` is the bound
``4 · length + 2`` and an example is usually about half of it. The generator draws up to 512
statements; 64 here, because a ``tiny`` model on one core trains on sequences of a few hundred
tokens in a short run, and evaluating to 8× (512 statements, the generator's default
``--max-steps``) asks whether counting survives the length. 600 steps, the sequence tasks' default
budget, untuned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.registry import register
from posbench.tasks.sequence import VaryingSequenceTask, prompt_then_answer

MAX_VALUE = 10  # the generator's MAX_VAL: no variable is incremented past it
OP_WEIGHTS = {"set": 1, "pass": 50, "increment": 7}  # the generator's statement weights
MAX_VARS = 26  # the generator names variables a … z
WORDS = ("=", ";", "pass", "++", "print")  # token ids after the values 0 … MAX_VALUE and the variables


@register("counting")
@dataclass(frozen=True)
class Counting(VaryingSequenceTask):
    """Token ids: values ``0 … MAX_VALUE``, ``n_vars`` variables, :data:`WORDS`, padding."""

    kind = "structured"

    train_length: int = 64
    min_length: int = 3
    n_vars: int = 3

    def __post_init__(self):
        if not 1 <= self.n_vars <= MAX_VARS:
            raise ValueError(f"counting: n_vars must be 1 … {MAX_VARS} (the paper's: 1, 3, 5), got {self.n_vars}")
        if not 3 <= self.min_length <= self.train_length:
            raise ValueError(f"counting: min_length must be 3 … train_length ({self.train_length}), "
                             f"got {self.min_length}")

    def variable(self, index: int) -> int:
        return MAX_VALUE + 1 + index

    def word(self, word: str) -> int:
        return MAX_VALUE + 1 + self.n_vars + WORDS.index(word)

    @property
    def vocab_size(self) -> int:
        return MAX_VALUE + 1 + self.n_vars + len(WORDS) + 1

    def sequence_length(self, length: int) -> int:
        return 4 * length + 2  # every statement a 4-token reset, then ``print v``; inputs drop the answer

    def valid_length(self, length: int) -> int:
        return max(length, 3)

    def statement(self, rng: np.random.Generator, values: dict[int, int]) -> list[int]:
        """One statement drawn as the generator draws it, applied to ``values`` (variable -> value)."""
        ops, weights = list(OP_WEIGHTS), np.array(list(OP_WEIGHTS.values())) / sum(OP_WEIGHTS.values())
        while True:
            op = ops[rng.choice(len(ops), p=weights)]
            if op == "set":
                var = int(rng.integers(self.n_vars))
                values[var] = 0
                return [self.variable(var), self.word("="), 0, self.word(";")]
            if op == "pass":
                return [self.word("pass"), self.word(";")]
            if values:
                var = list(values)[rng.integers(len(values))]
                if values[var] < MAX_VALUE:
                    values[var] += 1
                    return [self.variable(var), self.word("++"), self.word(";")]

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        while True:
            values: dict[int, int] = {}
            program = [token for _ in range(length) for token in self.statement(rng, values)]
            if values:
                break
        var = list(values)[rng.integers(len(values))]
        prompt = np.array([*program, self.word("print"), self.variable(var)])
        return prompt_then_answer(prompt, np.array([values[var]]))
