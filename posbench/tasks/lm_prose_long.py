"""``lm_prose_long``: ``lm_prose``'s model on Python's documentation, evaluated to 32× its training length
on a long text.

Training is ``lm_prose``'s with ``text=python_docs`` exactly (the first 90 % of ``pydoc_data.topics``),
the same validation split and validation set, the same vocabulary, so the same seed trains the same
model. Only the test split differs: ``lm_prose``'s test holds 46,513 characters, at most 22
non-overlapping windows of 2048; here it is the docstrings of the standard library
(:func:`stdlib_docstrings`: 901,437 characters on Python 3.11.7, of which 1,510 are characters the
training text never has, read as ``UNK``), and every length up to 64 × 32 = 2048 reads
``eval_chars`` = 131,072 characters: 64 windows of 2048, 2048 of 64. The test text differs in source
from the training text (docstrings written in the code, not the Language Reference's topics), both
Python documentation English; its chance level is computed on each evaluation set as for
``lm_prose`` (the unigram cross-entropy under the training text's character frequencies). It is also
scored with sliding windows, as every causal character LM (:mod:`posbench.tasks.corpus`).

A learned position table sized for 2048 positions has 2048 × d rows' worth of parameters, more than
the tiny model's blocks, of which training reaches only the first 64: the record's
``positions_beyond_training`` counts the rows that kept their initial values, the accuracy table's
``params_position_trained`` counts only the rows training reached, and the extrapolation figure
marks every mean read past them.

Each record keeps its evaluation time (``wall_time_s.eval``, of which ``sliding``: four windows per
span); measured costs of one tiny model's evaluation are in results/reference/NOTES.md (Lab notes).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from posbench.tasks.lm_code import source_files
from posbench.tasks.lm_prose import ProseLM
from posbench.tasks.registry import register

DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@cache
def stdlib_docstrings() -> str:
    """Every docstring (``ast.get_docstring``, cleaned) of every module, class and function in the
    sorted top-level ``*.py`` files of the running Python's standard library, each file in source
    order, joined by blank lines: deterministic for one Python version."""
    docstrings = []
    for path in source_files(None):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        nodes = sorted((n for n in ast.walk(tree) if isinstance(n, DOCUMENTED)), key=lambda n: getattr(n, "lineno", 0))
        docstrings += [doc for doc in map(ast.get_docstring, nodes) if doc]
    return "\n\n".join(docstrings)


@register("lm_prose_long")
@dataclass(frozen=True)
class LongProseLM(ProseLM):
    """Options: those of ``lm_prose``; ``test_data`` (a path replacing the docstrings as the test
    text) and ``validation_chars`` (what the validation set reads: ``lm_prose``'s ``eval_chars``)."""

    kind = "long"

    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    eval_chars: int = 131072  # 64 windows of the longest length, 2048
    validation_chars: int = 16384
    test_data: str | None = None
    text: str = "python_docs"  # trained on Python's documentation, as its test text is

    def texts(self) -> tuple[str, str]:
        train, _ = super().texts()
        test = Path(self.test_data).read_text(encoding="utf-8") if self.test_data else stdlib_docstrings()
        return train, test

    def chars_read(self, split: str) -> int:
        return self.validation_chars if split == "validation" else self.eval_chars
