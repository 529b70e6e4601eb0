"""``lm_code``: character-level language model on Python source from the standard library.

Train and test are split by *file* (a stable hash of the file name), never by line, so no file
contributes to both sides. The default corpus is the top-level ``*.py`` modules of the running
Python's standard library; ``data=DIR`` uses every ``*.py`` file under a directory instead. Its test
split (518,036 characters) holds the ``eval_chars`` (16,384) side by side at every length, so it is
evaluated to 16× its training length (1024: 16 windows).
"""

from __future__ import annotations

import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path

from posbench.tasks.base import EXTRAPOLATION_FACTORS
from posbench.tasks.corpus import LanguageModelTask
from posbench.tasks.registry import register

FILE_SEPARATOR = "\n\n"


def source_files(directory: Path | None) -> list[Path]:
    if directory is None:
        return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    return sorted(Path(directory).rglob("*.py"))


def split_files(files: list[Path], test_percent: int) -> tuple[list[Path], list[Path]]:
    """(train, test): a file is a test file when the CRC-32 of its name falls in the lowest ``test_percent`` %."""
    is_test = [zlib.crc32(f.name.encode()) % 100 < test_percent for f in files]
    return ([f for f, t in zip(files, is_test) if not t], [f for f, t in zip(files, is_test) if t])


@register("lm_code")
@dataclass(frozen=True)
class CodeLM(LanguageModelTask):
    kind = "code"

    test_percent: int = 10
    eval_factors: tuple[float, ...] = (*EXTRAPOLATION_FACTORS, 16.0)

    def files(self) -> tuple[list[Path], list[Path]]:
        files = source_files(Path(self.data) if self.data else None)
        if not files:
            raise ValueError(f"lm_code: no *.py files under {self.data}")
        return split_files(files, self.test_percent)

    def texts(self) -> tuple[str, str]:
        def read(files: list[Path]) -> str:
            return FILE_SEPARATOR.join(f.read_text(encoding="utf-8", errors="replace") for f in files)

        train, test = self.files()
        return read(train), read(test)
