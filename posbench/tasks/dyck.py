"""``dyck``: bracket matching over two bracket types (Dyck-2).

Input: a random balanced string of ``n`` brackets (``n`` even). Target at every position: the
opening bracket a closing bracket would have to match there (the top of the stack), or ``EMPTY``
when every bracket so far is closed. Finding the innermost unmatched bracket needs the depth of
each earlier position, so the task rewards precise positional bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.registry import register
from posbench.tasks.sequence import SequenceTask

OPEN = (0, 1)  # "(" and "["
CLOSE = (2, 3)  # ")" and "]"
EMPTY = 4


@register("dyck")
@dataclass(frozen=True)
class Dyck(SequenceTask):
    """Token ids: ``( [ ) ]``, ``EMPTY`` (a target only), padding."""

    kind = "structured"

    train_length: int = 32
    min_length: int = 2

    @property
    def vocab_size(self) -> int:
        return 6

    def valid_length(self, length: int) -> int:
        return max(2, length - length % 2)

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        brackets, tops, stack = [], [], []
        for step in range(length):
            remaining = length - step
            must_close = len(stack) == remaining
            opens = not must_close and (not stack or rng.random() < 0.5)
            if opens:
                stack.append(int(rng.integers(0, len(OPEN))))
                brackets.append(OPEN[stack[-1]])
            else:
                brackets.append(CLOSE[stack.pop()])
            tops.append(OPEN[stack[-1]] if stack else EMPTY)
        return np.array(brackets), np.array(tops)
