"""One argument checker for every command: one wording per mistake, on one line, exit 2."""

import argparse

import pytest

from posbench.__main__ import main
from posbench.cli import arguments


@pytest.mark.parametrize("parse, text, value", [
    (arguments.positive_int, "7", 7),
    (arguments.positive_int, "+7", 7),
    (arguments.non_negative_int, "0", 0),
    (arguments.integer(4), "4", 4),
    (arguments.positive_number, "3e-4", 3e-4),
    (arguments.non_negative_number, "0", 0.0),
    (arguments.power_of_two(1024), "4096", 4096),
    (arguments.comma_list(("paths", "overhead", "peer")), " peer,paths ", ("peer", "paths")),
])
def test_accepted_text_becomes_its_value(parse, text, value):
    parsed = parse(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("parse, text, allowed", [
    (arguments.positive_int, "0", "a positive integer"),
    (arguments.positive_int, "abc", "a positive integer"),
    (arguments.positive_int, "1.5", "a positive integer"),
    (arguments.non_negative_int, "-1", "an integer >= 0"),
    (arguments.integer(4), "3", "an integer >= 4"),
    (arguments.positive_number, "0", "a number > 0"),
    (arguments.positive_number, "abc", "a number > 0"),
    (arguments.non_negative_number, "-0.5", "a number >= 0"),
    (arguments.non_negative_number, "nan", "a number >= 0"),
    (arguments.non_negative_number, "inf", "a number >= 0"),
    (arguments.power_of_two(1024), "3000", "a power of two >= 1024"),
    (arguments.power_of_two(1024), "512", "a power of two >= 1024"),
    (arguments.comma_list(("paths", "peer")), "peer,speed", "one or more of paths, peer, comma-separated"),
    (arguments.existing_folder, "/nonexistent", "an existing folder"),
])
def test_refused_text_is_quoted_beside_what_is_allowed(parse, text, allowed):
    with pytest.raises(argparse.ArgumentTypeError) as error:
        parse(text)
    refused = "speed" if "," in text else text
    assert str(error.value) == f"{refused!r} is not allowed; allowed: {allowed}"


@pytest.mark.parametrize("argv, flag, allowed", [
    (["profile", "--encoding", "rope", "--size", "tiny", "--seq-len", "abc"], "--seq-len", "a positive integer"),
    (["profile", "--encoding", "rope", "--size", "tiny", "--seq-len", "8", "--min-seconds", "abc"], "--min-seconds",
     "a number >= 0"),
    (["train", "--task", "copy", "--encoding", "rope", "--lr", "abc"], "--lr", "a number > 0"),
    (["probe", "--encoding", "learned", "--d-model", "abc"], "--d-model", "an integer >= 4"),
    (["bench", "--rounds", "abc"], "--rounds", "a positive integer"),
    (["aggregate", "--records", "abc"], "--records", "an existing folder"),
    (["report", "--tables", "abc"], "--tables", "an existing folder"),
])
def test_every_command_words_a_bad_value_the_same_in_one_line(argv, flag, allowed, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # "abc" is no folder here either
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", "out"])
    assert stop.value.code == 2
    expected = f"posbench {argv[0]}: error: argument {flag}: 'abc' is not allowed; allowed: {allowed}\n"
    assert capsys.readouterr().err == expected
    assert list(tmp_path.iterdir()) == []

