"""``table_lookup``: a generated table rendered as CSV or JSON, then queried by (row key, column name).

A table has ``length`` rows with distinct keys (drawn from ``n_keys``), ``n_columns`` named columns
(``c_0 … c_{n-1}``, always in that order) and cells of ``value_digits`` digits. Rendered as tokens,
one token per key, name, digit or punctuation mark:

* ``csv``:  ``ID , c_0 , c_1 NL k_1 , v v , v v NL k_2 , …`` — a row is found by its key, a cell by
  its place along the row: column ``j``'s digits sit a fixed number of tokens after the key, which a
  model must be able to count (precise relative position);
* ``json``: ``{ ID : k_1 , c_0 : v v , c_1 : v v } { ID : k_2 , …`` — every value carries its name,
  so a cell can be found by matching content next to it.

Then ``n_queries`` questions ``QUERY k c`` each followed by the cell's digits, the only scored
tokens. The headline is token accuracy (each answer digit; chance: the commonest digit of the set,
about 0.1); exact match needs all ``n_queries × value_digits`` digits of an example right, which no
arm run at the default budget did (0.000: none at seed 0, sinusoidal and rope at seeds 0–2). Keys
and column names are distinct within a table, so each query has one answer. The problem size is the
number of rows: the sequence grows with rows × columns, and a longer evaluation is a taller table of
the same kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.base import IGNORE
from posbench.tasks.registry import register
from posbench.tasks.sequence import SequenceTask, prompt_then_answer

FORMATS = ("csv", "json")
DIGITS = 10
PUNCTUATION = ("ID", ",", "NL", "{", "}", ":", "QUERY")


@dataclass(frozen=True)
class Table:
    keys: np.ndarray  # (rows,) key indices, distinct
    values: np.ndarray  # (rows, columns, value_digits) digits


@register("table_lookup")
@dataclass(frozen=True)
class TableLookup(SequenceTask):
    """Token ids: digits, keys, column names, :data:`PUNCTUATION`, padding."""

    kind = "structured"
    metrics: ClassVar[tuple[str, ...]] = ("token_accuracy", "exact_match")

    format: str = "csv"
    train_length: int = 6
    min_length: int = 2
    n_columns: int = 3
    n_keys: int = 128
    value_digits: int = 2
    n_queries: int = 4
    steps: int = 2000
    eval_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(f"table_lookup: unknown format {self.format!r}; allowed: {', '.join(FORMATS)}")
        longest = self.valid_length(round(self.train_length * max(self.eval_factors)))
        if longest > self.n_keys:
            raise ValueError(f"table_lookup: n_keys ({self.n_keys}) must cover the tallest table ({longest} rows)")

    def token(self, mark: str) -> int:
        return DIGITS + self.n_keys + self.n_columns + PUNCTUATION.index(mark)

    def key_token(self, key: np.ndarray) -> np.ndarray:
        return DIGITS + key

    def name_token(self, name: np.ndarray) -> np.ndarray:
        return DIGITS + self.n_keys + name

    @property
    def vocab_size(self) -> int:
        return DIGITS + self.n_keys + self.n_columns + len(PUNCTUATION) + 1

    def sequence_length(self, length: int) -> int:
        return self.render_length(length) + self.n_queries * (3 + self.value_digits) - 1

    def render_length(self, rows: int) -> int:
        """Tokens of the rendered table."""
        if self.format == "csv":
            return 2 * self.n_columns + 2 + rows * (2 + self.n_columns * (1 + self.value_digits))
        return rows * (5 + self.n_columns * (3 + self.value_digits))

    def table(self, rng: np.random.Generator, rows: int) -> Table:
        return Table(keys=rng.choice(self.n_keys, size=rows, replace=False),
                     values=rng.integers(0, DIGITS, size=(rows, self.n_columns, self.value_digits)))

    def render(self, table: Table) -> np.ndarray:
        """``(render_length,)`` token ids of ``table`` in this task's format."""
        comma, colon, key_name = self.token(","), self.token(":"), self.token("ID")
        names = self.name_token(np.arange(self.n_columns))
        tokens: list[int] = []
        if self.format == "csv":
            tokens += [key_name]
            for name in names:
                tokens += [comma, name]
            tokens += [self.token("NL")]
        for key, cells in zip(self.key_token(table.keys), table.values):
            if self.format == "csv":
                tokens += [key]
                for cell in cells:
                    tokens += [comma, *cell]
                tokens += [self.token("NL")]
            else:
                tokens += [self.token("{"), key_name, colon, key]
                for name, cell in zip(names, cells):
                    tokens += [comma, name, colon, *cell]
                tokens += [self.token("}")]
        return np.array(tokens, dtype=np.int64)

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        table = self.table(rng, length)
        rows = rng.integers(0, length, size=self.n_queries)
        columns = rng.integers(0, self.n_columns, size=self.n_queries)
        prompt = self.render(table)
        questions = [np.concatenate([[self.token("QUERY"), self.key_token(table.keys[r]),
                                      self.name_token(c)], table.values[r, c]])
                     for r, c in zip(rows, columns)]
        inputs, targets = prompt_then_answer(prompt, np.concatenate(questions))
        block = 3 + self.value_digits  # QUERY k c v…: only the value digits are scored
        scored = len(prompt) + np.concatenate([q * block + 2 + np.arange(self.value_digits)
                                               for q in range(self.n_queries)])  # target i predicts token i + 1
        keep = targets[scored]
        targets[:] = IGNORE
        targets[scored] = keep
        return inputs, targets


@register("table_lookup_json")
@dataclass(frozen=True)
class TableLookupJson(TableLookup):
    """``table_lookup`` rendered as JSON: its own name, so the workflow and the comparisons can ask for it."""

    format: str = "json"
