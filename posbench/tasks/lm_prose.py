"""``lm_prose``: character-level language model on English prose.

``text`` chooses it: ``wikipedia`` (the default) is :mod:`posbench.tasks.english`, about 35 M characters of
Wikipedia's lead paragraphs, split by paragraph into training, validation and test; ``python_docs`` is the
Python documentation's topic help that ships with Python (``pydoc_data.topics``, about 0.46 M characters),
whose last ``test_fraction`` is the test split. ``data=PATH`` uses any UTF-8 text file instead, split as
``python_docs``: no window straddles two splits either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posbench.tasks import english
from posbench.tasks.corpus import LanguageModelTask
from posbench.tasks.registry import register


def builtin_prose() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


TEXTS = ("wikipedia", "python_docs")


@register("lm_prose")
@dataclass(frozen=True)
class ProseLM(LanguageModelTask):
    """Options: ``text`` (:data:`TEXTS`), ``data`` (a text file instead), ``test_fraction`` (of a text the
    corpus does not split itself)."""

    kind = "nlp"

    text: str = "wikipedia"
    test_fraction: float = 0.1

    def __post_init__(self):
        if self.text not in TEXTS:
            raise ValueError(f"{self.name}: text must be one of {', '.join(TEXTS)}; got {self.text!r}")

    def texts(self) -> tuple[str, str]:
        if self._splits_itself():
            train, validation, test = english.splits()
            return train + english.SEPARATOR + validation, test
        text = Path(self.data).read_text(encoding="utf-8") if self.data else builtin_prose()
        cut = int(len(text) * (1 - self.test_fraction))
        return text[:cut], text[cut:]

    def validation_length(self) -> int | None:
        return len(english.splits()[1]) if self._splits_itself() else None

    def _splits_itself(self) -> bool:
        return self.data is None and self.text == "wikipedia"


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
        super().__post_init__()
        if not 1 <= self.min_length <= self.train_length:
            raise ValueError(f"{self.name}: min_length must lie in 1 … train_length ({self.train_length}); "
                             f"got {self.min_length}")

    def window_length(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.min_length, self.train_length + 1))
