"""The commands' shared usage rules: a bad flag is one line and exit status 2, in words."""

from __future__ import annotations

import argparse

import pytest

from executor.runtime.exit_codes import EXIT_USAGE
from executor.runtime.usage import OneLineParser, flag_type, positive_int, seconds


def parser() -> OneLineParser:
    """A parser with one flag of each shared type."""
    made = OneLineParser(prog="executor test")
    made.add_argument("--count", type=positive_int)
    made.add_argument("--wait", type=seconds)
    made.add_argument("--even", type=flag_type(even, LookupError))
    return made


def even(text: str) -> int:
    """A parse of the caller's with an error of its own."""
    if int(text) % 2:
        raise LookupError(f"{text} is odd")
    return int(text)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--count", "0"], "argument --count: must be a whole number of at least 1, got '0'"),
        (["--count", "x"], "argument --count: must be a whole number of at least 1, got 'x'"),
        (["--wait", "-1"], "argument --wait: must be a number of seconds, 0 or more"),
        (["--wait", "nan"], "argument --wait: must be a number of seconds, 0 or more"),
        (["--even", "3"], "argument --even: 3 is odd"),
    ],
)
def test_a_bad_flag_is_one_line_in_words_and_exit_status_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line names the flag and the problem (not argparse's "invalid value"), and no usage."""
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"executor test: error: {words}")
    assert lines[0].endswith("(see --help)")


def test_good_flags_parse_to_their_values() -> None:
    """Each type returns the value it read; an error the parse does not name is not swallowed."""
    args = parser().parse_args(["--count", "3", "--wait", "0.5", "--even", "4"])
    assert (args.count, args.wait, args.even) == (3, 0.5, 4)
    with pytest.raises(argparse.ArgumentError, match="invalid even value"):
        failing = argparse.ArgumentParser(exit_on_error=False)
        failing.add_argument("--even", type=flag_type(even, LookupError))
        failing.parse_args(["--even", "x"])  # int("x"): a ValueError, argparse's own message
