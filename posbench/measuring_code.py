"""What names the code that measured a record: :func:`code_hash`, a hash of what the measuring
sources *do*, not of how they are described.

A record stands (:mod:`posbench.batch`) while the code that measured it is unchanged, so the hash
decides what an edit costs: a changed docstring must not re-measure a 53-minute sweep, a changed
token must. Python sources are hashed as their token stream (:mod:`tokenize`) without comments,
blank lines, layout and string statements (docstrings); JSON schemas as their parsed content without
``description``, ``title`` and ``$comment``. ``tokenize`` rather than ``ast.dump``: the AST's dump
changes between Python versions (3.11 → 3.12), tokens do not, once 3.12's f-string parts are joined
back into the one string token 3.11 gives.
"""

from __future__ import annotations

import hashlib
import io
import json
import tokenize
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).parent
# Sources that read records or tables and never measure: editing them keeps every record standing.
NOT_MEASURING = ("report/", "cli/report.py", "aggregate.py", "analytic.py", "cli/aggregate.py", "evidence.py",
                 "arms.py", "trajectories.py", "comparisons.py", "verdicts.py", "claims.py", "judge.py", "cli/judge.py",
                 "tables.py", "guidance.py", "workflow.py", "workflow_config.py", "workflow_paths.py", "advise.py",
                 "advice_situations.py", "ranking.py", "cli/advise.py", "schemas/advice.schema.json", "bench/",
                 "cli/bench.py", "measuring_code.py", "axis_check.py", "arm_rule.py", "encodings/hf_config.py",
                 "shapes.py", "ledger.py", "tune.py", "cli/tune.py", "projection.py", "projection_check.py",
                 "cli/project.py", "across_sizes.py")
# Tokens that carry no behaviour: layout and prose.
LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
# Tokens whose text is layout (their kind is kept: an INDENT's depth, not its spaces).
KIND_ONLY = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENDMARKER}
STATEMENT_START = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
STATEMENT_END = {tokenize.NEWLINE, tokenize.ENDMARKER}
SCHEMA_PROSE = {"description", "title", "$comment"}
SCHEMA_NAME_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python >= 3.12
FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def measuring_sources(root: Path = PACKAGE_DIR) -> list[str]:
    """The sources under ``root`` (the posbench package) that take part in measuring, as sorted relative
    POSIX paths: every ``*.py`` and ``*.json`` (schemas included) but those in :data:`NOT_MEASURING`
    and ``__pycache__``."""
    found = (path.relative_to(root).as_posix() for path in root.rglob("*")
             if path.suffix in (".py", ".json") and path.is_file() and "__pycache__" not in path.parts)
    return sorted(name for name in found if not name.startswith(NOT_MEASURING))


@cache
def code_hash(root: Path = PACKAGE_DIR) -> str:
    """SHA-256 over the measuring sources (:func:`measuring_sources`): each one's relative path and its
    :func:`content` in sorted order; hashed once per process and ``root``. An edit to prose (docstrings,
    comments, a schema's descriptions), layout, the report or the docs leaves it, and so the records a
    batch keeps, as they were; an edit to one token changes it, committed or not."""
    digest = hashlib.sha256()
    for name in measuring_sources(root):
        content = CONTENT[Path(name).suffix]((root / name).read_bytes())
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def python_content(source: bytes) -> bytes:
    """A Python source as what it executes: one line per token (kind, text), comments, blank lines,
    layout and string statements (with the NEWLINE that ends them) dropped."""
    text = source.decode("utf-8")
    tokens = _joined_fstrings(tokenize.generate_tokens(io.StringIO(text).readline), text.splitlines(keepends=True))
    kept = [token for token in tokens if token.type not in LAYOUT]
    prose = _string_statements(kept)
    return "\n".join(f"{tokenize.tok_name[token.type]} {'' if token.type in KIND_ONLY else token.string}"
                     for index, token in enumerate(kept) if index not in prose).encode()


def schema_content(source: bytes) -> bytes:
    """A JSON schema as what it checks: its parsed content, canonically dumped, without prose keywords."""
    return json.dumps(_without_prose(json.loads(source)), sort_keys=True, separators=(",", ":")).encode()


CONTENT = {".py": python_content, ".json": schema_content}  # how each kind of measuring source is read


def _string_statements(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Indices of the statements made only of strings (docstrings, strings left as comments) and of the
    NEWLINE that ends each: a run of STRING tokens that starts a statement and is followed by its end."""
    found, index = set(), 0
    while index < len(tokens):
        end = index
        while end < len(tokens) and tokens[end].type == tokenize.STRING:
            end += 1
        starts_statement = index == 0 or tokens[index - 1].type in STATEMENT_START
        if end > index and starts_statement and (end == len(tokens) or tokens[end].type in STATEMENT_END):
            found.update(range(index, end + (end < len(tokens) and tokens[end].type == tokenize.NEWLINE)))
        index = max(end, index + 1)
    return found


def _joined_fstrings(tokens, lines: list[str]):
    """Python 3.12 splits an f-string into FSTRING_START, its parts and FSTRING_END; 3.11 gives one
    STRING token. Join 3.12's back into that one token (its exact source text), so both hash alike."""
    depth, first = 0, None
    for token in tokens:
        if FSTRING_START is not None and token.type == FSTRING_START:
            depth, first = depth + 1, first or token
        if not depth:
            yield token
        elif token.type == FSTRING_END:
            depth -= 1
            if not depth:
                yield tokenize.TokenInfo(tokenize.STRING, _source_between(lines, first.start, token.end),
                                         first.start, token.end, first.line)
                first = None


def _source_between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from ``start`` to ``end``, tokenize's (row from 1, column) positions."""
    (first_row, first_col), (last_row, last_col) = start, end
    if first_row == last_row:
        return lines[first_row - 1][first_col:last_col]
    return lines[first_row - 1][first_col:] + "".join(lines[first_row:last_row - 1]) + lines[last_row - 1][:last_col]


def _without_prose(node, names: bool = False):
    """A schema without :data:`SCHEMA_PROSE` keywords; under a map of names (``properties``) the keys
    are names, never keywords, and are all kept."""
    if isinstance(node, list):
        return [_without_prose(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {name: _without_prose(schema) for name, schema in node.items()}
    return {key: _without_prose(value, names=key in SCHEMA_NAME_MAPS) for key, value in node.items()
            if key not in SCHEMA_PROSE}
