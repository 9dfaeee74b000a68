"""Writing a report to stdout, where a reader that stops early (``| head -1``) is a normal end.

A command-line tool whose output is piped into ``head`` sees the pipe close once ``head`` has what
it wants; the next write fails with ``EPIPE`` (Python ignores SIGPIPE, so it is a
``BrokenPipeError``). That is not a failure of the report: the reader chose to stop. The commands
here end quietly with status 0, and stdout is pointed at ``/dev/null`` so the interpreter's own
flush at exit does not raise the same error again (the recipe of Python's ``signal`` docs).
"""

from __future__ import annotations

import os
import sys


def write_report(text: str) -> None:
    """Write ``text`` and a newline to stdout and flush; a closed pipe ends the output quietly."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null: the buffered rest is then discarded at exit."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured in a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)


__all__ = ["write_report"]
