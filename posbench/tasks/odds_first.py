"""``odds_first``: write the symbols at odd indices, then those at even ones:
``s_0 s_1 s_2 s_3 s_4 -> s_1 s_3 s_0 s_2 s_4`` (indices from 0).

Ruoss et al. 2023's context-sensitive task (``tasks/cs/odds_first.py`` of their repository): binary
strings, an answer as long as the input. The order is their code's, ``string[1::2]`` then
``string[::2]``, the one their numbers were measured with; its docstring's example
(``00110101 -> 0100 0111``) puts the other half first, a mirror of the same task. Answer token ``j``
reads input ``2j + 1`` in the first half and ``2(j - ⌊n/2⌋)`` in the second: both the stride and the
seam depend on the length. The protocol is :mod:`posbench.tasks.chomsky`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.chomsky import ChomskyTask
from posbench.tasks.registry import register


@register("odds_first")
@dataclass(frozen=True)
class OddsFirst(ChomskyTask):
    kind = "structured"

    def string_and_answer(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        string = rng.integers(0, self.n_symbols, size=length)
        return string, np.concatenate([string[1::2], string[::2]])
