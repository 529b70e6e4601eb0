"""Records: one JSON file per measured cell, the single source of truth for every table and plot.

Every record carries ``schema_version``, ``kind`` (``profile``, ``train``, …), ``status``
(``ok`` | ``oom`` | ``diverged`` | ``skipped`` | ``error``) with a ``reason``, the ``environment`` it
ran in and a ``config_hash`` of its inputs (a new record's common part: :func:`posbench.machine.new_record`,
kept apart because naming the environment imports torch and reading or writing a record does not); the
environment names the code that measured it by :func:`~posbench.measuring_code.code_hash` (and, for
provenance, the ``git_commit``). Each kind has a JSON schema under
``posbench/schemas/`` that extends ``common.schema.json``; records are validated when written and
when read. Writes are atomic (temporary file in the same folder, fsync, rename), so a killed job
leaves either no file or a complete, valid one; :func:`write_atomically` is the one writer for every file posbench
writes that way (records, items, manifests, tables).

A record may carry per-item results (one row per evaluation item, for intervals over the evaluation
set) as :class:`Items`: too many rows for its JSON, they go to a file beside it (:func:`items_path`),
written first, and the record keeps their row count, columns and SHA-256 — so a record on disk
implies its items, and a reader can tell when the file beside it is missing or not its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, fields
from functools import cache
from pathlib import Path
from typing import BinaryIO

import jsonschema
import numpy as np

from posbench.faults import WriteError, failed_write

SCHEMA_VERSION = 2  # 2: the environment carries ``code_hash`` (records of version 1 lack it)
PACKAGE_DIR = Path(__file__).parent
SCHEMA_DIR = PACKAGE_DIR / "schemas"
STATUSES = ("ok", "oom", "diverged", "skipped", "error")  # the first three are results; the others retried


@cache
def schema(kind: str) -> dict:
    """The schema of a record kind: ``common.schema.json`` and ``<kind>.schema.json``, both required."""
    path = SCHEMA_DIR / f"{kind}.schema.json"
    if not path.exists():
        known = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
        raise ValueError(f"unknown record kind {kind!r}; allowed: {', '.join(k for k in known if k != 'common')}")
    common = json.loads((SCHEMA_DIR / "common.schema.json").read_text())
    return {"allOf": [common, json.loads(path.read_text())]}


def validate(record: dict) -> dict:
    """Raise ``jsonschema.ValidationError`` unless ``record`` matches its kind's schema."""
    kind = record.get("kind")
    if not isinstance(kind, str):
        raise jsonschema.ValidationError("record has no 'kind'")
    jsonschema.validate(record, schema(kind))
    return record


class Items(dict):
    """Per-item results of a record: the columns in memory, and the record's reference to them.

    The dict itself is what the record's JSON keeps (``rows``, ``columns``, ``sha256`` of the
    content); the arrays themselves are ``.columns``, written by :func:`write_record` beside the record.
    """

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = {name: np.asarray(column) for name, column in columns.items()}
        rows = {len(column) for column in self.columns.values()}
        if len(rows) != 1:
            raise ValueError(f"item columns differ in length: {sorted(rows)}")
        super().__init__(rows=rows.pop(), columns=list(self.columns), sha256=content_digest(self.columns))


def content_digest(columns: dict[str, np.ndarray]) -> str:
    """SHA-256 of the columns' names, types, shapes and values (not of the file that holds them)."""
    digest = hashlib.sha256()
    for name, column in columns.items():
        digest.update(f"{name}:{column.dtype.str}:{column.shape};".encode())
        digest.update(np.ascontiguousarray(column).tobytes())
    return digest.hexdigest()


def items_path(record_path: str | os.PathLike) -> Path:
    """Where the per-item results of the record at ``record_path`` go: ``x.json`` -> ``x.items.npz``."""
    return Path(record_path).with_suffix(".items.npz")


def read_items(record_path: str | os.PathLike, record: dict) -> dict[str, np.ndarray]:
    """The columns of ``record``'s items; a ``ValueError`` if the file is missing or not the one it names."""
    path = items_path(record_path)
    try:
        with np.load(path, allow_pickle=False) as stored:
            columns = {name: stored[name] for name in record["items"]["columns"]}
    except (OSError, KeyError, ValueError) as error:
        raise ValueError(f"items of {record_path}: {path.name} unreadable ({type(error).__name__}: {error})") from None
    if content_digest(columns) != record["items"]["sha256"]:
        raise ValueError(f"items of {record_path}: {path.name} holds other items than the record names")
    return columns


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate, then write atomically: readers see the old file, or the new one whole. The record's
    :class:`Items`, if any, are written first, beside it."""
    validate(record)
    if isinstance(record.get("items"), Items):
        write_atomically(items_path(path), lambda file: np.savez_compressed(file, **record["items"].columns))
    return write_json(path, record)


def write_json(path: str | os.PathLike, document: dict) -> Path:
    """Write ``document`` atomically as indented JSON with sorted keys."""
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    return write_atomically(path, lambda file: file.write(text.encode()))


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """The one atomic writer: ``write`` fills a temporary file beside ``path`` (opened binary), which is
    fsynced and renamed over ``path``; on any failure the temporary file is removed and ``path`` untouched.
    A failure of the file system (a full disk, an I/O error, no permission) is a one-line
    :class:`~posbench.faults.WriteError` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise failed_write(path, path.parent, error) from None
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, WriteError):
            raise failed_write(path, path.parent, error) from None
        raise
    return path


def read_record(path: str | os.PathLike) -> dict:
    return validate(json.loads(Path(path).read_text()))


def config_hash(config: dict) -> str:
    """A short, stable hash of the inputs that define a cell (keys sorted, JSON-encoded)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def config_fields(config, added: tuple[str, ...]) -> dict:
    """``asdict(config)`` less the ``added`` fields while they hold their defaults: a field added to a
    config after records were written leaves those records' ``config_hash`` (and so whether a batch
    keeps them) as it was."""
    defaults = {f.name: f.default for f in fields(config) if f.name in added}
    return {name: value for name, value in asdict(config).items()
            if name not in defaults or value != defaults[name]}
