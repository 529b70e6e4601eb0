"""``lm_prose``: character-level language model on English prose that ships with Python.

The default text is the Python documentation's topic help (``pydoc_data.topics``, about 0.46 M
characters); ``data=PATH`` uses any UTF-8 text file instead. The last ``test_fraction`` of the
text is the test split, so no window straddles the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posbench.tasks.corpus import LanguageModelTask
from posbench.tasks.registry import register


def builtin_prose() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


@register("lm_prose")
@dataclass(frozen=True)
class ProseLM(LanguageModelTask):
    kind = "nlp"

    test_fraction: float = 0.1

    def texts(self) -> tuple[str, str]:
        text = Path(self.data).read_text(encoding="utf-8") if self.data else builtin_prose()
        cut = int(len(text) * (1 - self.test_fraction))
        return text[:cut], text[cut:]


@register("lm_prose_varlen")
@dataclass(frozen=True)
class VariableLengthProseLM(ProseLM):
    """``lm_prose_varlen``: lm_prose trained on windows whose length varies, evaluated as lm_prose.

    Each training batch draws one length uniformly from ``min_length … train_length`` (16 … 64 by
    default; every window of a batch has it, so nothing is padded); evaluation, test and validation
    are lm_prose's, at fixed lengths from the training length up. The fixed-length row asks whether
    adding stays as good when lengths vary: this is lm_prose with only that changed. At the same steps a
    batch holds fewer characters on average ((16 + 64) / 2 = 40 of 64): training on varied lengths
    at the same budget, as a user who pads less would."""

    min_length: int = 16

    def __post_init__(self):
        if not 1 <= self.min_length <= self.train_length:
            raise ValueError(f"{self.name}: min_length must lie in 1 … train_length ({self.train_length}); "
                             f"got {self.min_length}")

    def window_length(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.min_length, self.train_length + 1))
