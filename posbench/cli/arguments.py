"""Argument types shared by every command, so each mistake is worded once.

argparse prints a type's ``ArgumentTypeError`` as ``argument --flag: MESSAGE``, on one line and with
exit status 2 (:class:`posbench.__main__.OneLineParser`). Every message here reads
``'TEXT' is not allowed; allowed: WHAT`` — for text that is no number at all (``abc``) as for a
number out of range — so a user meets one form whichever command they mistyped.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from pathlib import Path


def not_allowed(text: str, allowed: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}")


def _parser(convert: Callable[[str], object], accept: Callable[[object], bool], allowed: str):
    """A type for argparse: ``convert`` the text, and refuse it unless it converts and is accepted."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise not_allowed(text, allowed) from None
        if not accept(value):
            raise not_allowed(text, allowed)
        return value

    return parse


def integer(minimum: int) -> Callable[[str], int]:
    """Whole numbers >= ``minimum``."""
    allowed = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    return _parser(int, lambda value: value >= minimum, allowed)


def number(minimum: float, *, inclusive: bool) -> Callable[[str], float]:
    """Finite numbers >= ``minimum`` (``inclusive``) or > it; ``nan`` and ``inf`` are refused."""
    if inclusive:
        return _parser(float, lambda value: math.isfinite(value) and value >= minimum, f"a number >= {minimum:g}")
    return _parser(float, lambda value: math.isfinite(value) and value > minimum, f"a number > {minimum:g}")


def power_of_two(minimum: int) -> Callable[[str], int]:
    return _parser(int, lambda value: value >= minimum and not value & (value - 1), f"a power of two >= {minimum}")


def matching(pattern: re.Pattern, allowed: str) -> Callable[[str], str]:
    """Text that ``pattern`` matches in full; ``allowed`` says what that is in words."""
    return _parser(str, pattern.fullmatch, allowed)


def choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    """One of ``choices``."""
    def parse(text: str) -> str:
        if text not in choices:
            raise not_allowed(text, f"one of {', '.join(choices)}")
        return text

    return parse


def comma_list(choices: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """Some of ``choices``, comma-separated, in the order given."""
    allowed = f"one or more of {', '.join(choices)}, comma-separated"

    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [part for part in chosen if part not in choices]
        if unknown or not chosen:
            raise not_allowed(unknown[0] if unknown else text, allowed)
        return chosen

    return parse


positive_int = integer(1)
non_negative_int = integer(0)
positive_number = number(0, inclusive=False)
non_negative_number = number(0, inclusive=True)
existing_folder = _parser(Path, Path.is_dir, "an existing folder")


def _json_object(text: str) -> dict:
    """The JSON object in file ``text``; a missing or unreadable file, bad JSON or another JSON value is a
    ``ValueError``."""
    try:
        value = json.loads(Path(text).read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(str(error)) from None
    if not isinstance(value, dict):
        raise ValueError(f"{type(value).__name__}, not an object")
    return value


json_object_file = _parser(_json_object, lambda value: True, "a readable JSON file holding one object")


def add_hf_config_arguments(encoding: argparse._MutuallyExclusiveGroup, parser: argparse.ArgumentParser) -> None:
    """``--hf-config`` (in ``encoding``, the group of ``--encoding``: one or the other) and ``--hf-layer-type``:
    the RoPE a transformers ``config.json`` describes (:func:`posbench.encodings.from_hf_config`)."""
    encoding.add_argument("--hf-config", type=json_object_file, metavar="PATH.json",
                          help="instead of --encoding: the RoPE (rope or p_rope with its base, rotated part and "
                               "scaling) a transformers config.json describes, on this command's model")
    parser.add_argument("--hf-layer-type", metavar="TYPE",
                        help="with --hf-config whose rope_parameters are per layer type: the one to read, "
                             "e.g. full_attention")


def hf_encoding(args: argparse.Namespace) -> tuple[str, dict | None]:
    """``(encoding, family options or None)`` from ``--encoding`` or ``--hf-config``; a config this
    cannot read, or ``--hf-layer-type`` without one, is a one-line ``ValueError``."""
    from posbench.encodings import hf_encoding_options

    if args.hf_config is None:
        if args.hf_layer_type is not None:
            raise ValueError("argument --hf-layer-type: applies only with --hf-config")
        return args.encoding, None
    try:
        name, options = hf_encoding_options(args.hf_config, args.hf_layer_type)
    except ValueError as error:
        raise ValueError(f"argument --hf-config: {error}") from None
    return name, options or None


def without_rows(folder: Path, command: str) -> bool:
    """Whether the aggregate step's tables under ``folder`` hold no row at all; if so, say it in one line
    on stderr (a command that reads tables has nothing to do, and writes nothing)."""
    import sys

    from posbench.tables import TABLE_NAMES, load

    tables = load(folder)
    if any(not tables.get(name).empty for name in TABLE_NAMES):
        return False
    print(f"posbench {command}: error: argument --tables: no rows in {', '.join(n + '.csv' for n in TABLE_NAMES)} "
          f"under {folder}; run `python -m posbench aggregate` on some records first", file=sys.stderr)
    return True


def unwritable(command: str, flag: str, *paths: Path | None, folder: bool = False) -> bool:
    """Whether an output of ``flag`` cannot be written — each of ``paths`` a file (``folder``: a folder
    files go into; ``None``: not asked for), probed by :func:`posbench.faults.check_writable`; if so, say
    which and why in one line on stderr. Every command that writes asks this before any work, so a path
    that cannot take the result is refused before minutes of measuring, not after."""
    import sys

    from posbench.faults import WriteError, check_writable

    for path in dict.fromkeys(path for path in paths if path is not None):
        try:
            check_writable(path, folder=folder)
        except WriteError as error:
            print(f"posbench {command}: error: argument {flag}: {error}; nothing done", file=sys.stderr)
            return True
    return False
