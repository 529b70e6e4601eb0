"""``lm_prose``: character-level language model on English prose that ships with Python.

The default text is the Python documentation's topic help (``pydoc_data.topics``, about 0.46 M
characters); ``data=PATH`` uses any UTF-8 text file instead. The last ``test_fraction`` of the
text is the test split, so no window straddles the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from posbench.tasks.corpus import LanguageModelTask
from posbench.tasks.registry import register


def builtin_prose() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


@register
@dataclass(frozen=True)
class ProseLM(LanguageModelTask):
    name = "lm_prose"
    kind = "nlp"

    test_fraction: float = 0.1

    def texts(self) -> tuple[str, str]:
        text = Path(self.data).read_text(encoding="utf-8") if self.data else builtin_prose()
        cut = int(len(text) * (1 - self.test_fraction))
        return text[:cut], text[cut:]
