"""Bad usage as one line: the commands' argument parser and the flag types they share.

``executor serve`` (``executor.cli``), ``executor stats`` and ``executor orders``
(``executor.stats``) parse with :class:`OneLineParser`: a wrong flag is one line on stderr naming
it and exit status 2 (:data:`~executor.runtime.exit_codes.EXIT_USAGE`), never a usage dump or a
traceback. argparse names a type function in its own "invalid <name> value" message when the
function raises ValueError; the types here raise ArgumentTypeError with the problem in words.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn, TypeVar

from executor.runtime.exit_codes import EXIT_USAGE

T = TypeVar("T")


class OneLineParser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and exit status 2, never a usage dump or a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """A whole number of at least 1 (a count, a limit)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds, 0 or more (e.g. 0.5), got {text!r}"
        )
    return value


def flag_type(parse: Callable[[str], T], *errors: type[Exception]) -> Callable[[str], T]:
    """``parse`` as an argparse type: one of ``errors`` becomes the usage error, in its words."""

    def parse_flag(text: str) -> T:
        try:
            return parse(text)
        except errors as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse_flag.__name__ = parse.__name__  # argparse's own message names it on a ValueError
    return parse_flag


__all__ = ["OneLineParser", "flag_type", "positive_int", "seconds"]
