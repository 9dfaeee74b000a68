"""The layout table (``docs/design/layout.md``), generated from the packages' own docstrings.

``python3 dev.py layout`` writes it; ``python3 dev.py layout --check`` (and
``tests/test_layout_doc.py``) exits 1 when the committed file differs from what the code says
now. For every package of ``executor/`` and ``bench/`` (``bench/results/`` holds raw data and
one-off scripts, not code: left out) the table gives the first paragraph of its ``__init__.py``
docstring (its own section, the whole docstring: what it owns and what it may import), and for
each of its modules the first sentence of the module's docstring. The
docstrings are read with ``ast``: nothing is imported, so the script needs no environment.

A package or module without a docstring is an error (one line naming it): the table would
otherwise have a hole where the code has one.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
"""The checkout: this file is ``tools/layout.py``."""

PACKAGES: Final = ("executor", "bench")
"""The top-level packages whose layout the table gives."""

SKIPPED: Final = frozenset({"results", "__pycache__"})
"""Folders that are not code (``bench/results/``: raw data and the scripts that made it)."""

OUTPUT: Final = Path("docs/design/layout.md")
"""Where the table goes, relative to the checkout."""

_SENTENCE_END: Final = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")
"""A full stop that ends a sentence: followed by a space or the end, not in "e.g." or "i.e."."""

HEADER: Final = """# Layout

Every package (a room) of the executor and the benchmark, what it owns, and its modules. Generated
from the docstrings by `python3 dev.py layout` (`tools/layout.py`); do not edit by hand: a test
fails when this file is stale. The import direction between the rooms is `tests/test_layers.py`'s
`LAYERS`. "The reference" is the system this executor ports,
[anaborne/prediction-market-infra](https://github.com/anaborne/prediction-market-infra).
Summaries citing `PROTOCOL.md`, `SERVICE.md`, `DISPATCH.md`, `TELEMETRY.md`, `SIGNER.md`,
`BENCH.md` or `MEASURED.md` (and their sections) cite the specification this executor was built
to, written from the reference and kept with the project's specification, not in this repository;
what it says of the wire is [the protocol](protocol.md), and every deliberate difference from the
reference is [port fidelity](port-fidelity.md).
"""


class LayoutError(Exception):
    """The layout cannot be written: a package or module without a docstring."""


_ROLE: Final = re.compile(r":[a-z]+:(`[^`]+`)")
"""A Sphinx role (``:class:`Settings```), shown in Markdown as its code alone."""


@dataclass(frozen=True, slots=True)
class Package:
    """One package: its folder, its docstring (first paragraph and whole, each paragraph on one
    line) and its modules' first sentences."""

    folder: str
    summary: str
    description: tuple[str, ...]
    modules: tuple[tuple[str, str], ...]


def docstring(path: Path, root: Path) -> str:
    """The module docstring of ``path``, read without importing it.

    Raises:
        LayoutError: the file has none (the message names it relative to ``root``).
    """
    text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if not text:
        raise LayoutError(f"{path.relative_to(root).as_posix()} has no docstring")
    return text


def paragraphs(text: str) -> tuple[str, ...]:
    """The docstring's paragraphs, each one line (Sphinx roles dropped)."""
    joined = (" ".join(block.split()) for block in text.strip().split("\n\n"))
    return tuple(_ROLE.sub(r"\1", paragraph) for paragraph in joined if paragraph)


def first_paragraph(text: str) -> str:
    """The docstring's first paragraph, its lines joined."""
    return paragraphs(text)[0]


def first_sentence(text: str) -> str:
    """The first sentence of the docstring's first paragraph (the whole paragraph if it has no
    full stop)."""
    paragraph = first_paragraph(text)
    end = _SENTENCE_END.search(paragraph)
    return paragraph if end is None else paragraph[: end.end()]


def packages(root: Path) -> Iterator[Package]:
    """Every package under ``root``'s :data:`PACKAGES`, parents before their subpackages."""
    for name in PACKAGES:
        for init in sorted((root / name).rglob("__init__.py")):
            folder = init.parent
            if SKIPPED & set(folder.relative_to(root).parts):
                continue
            modules = tuple(
                (path.relative_to(root).as_posix(), first_sentence(docstring(path, root)))
                for path in sorted(folder.glob("*.py"))
                if path.name != "__init__.py"
            )
            text = docstring(init, root)
            yield Package(
                f"{folder.relative_to(root).as_posix()}/",
                first_paragraph(text),
                paragraphs(text),
                modules,
            )


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def render(root: Path = ROOT) -> str:
    """The whole of ``docs/design/layout.md`` for the code under ``root``.

    Raises:
        LayoutError: a package or module has no docstring.
    """
    found = list(packages(root))
    lines = [HEADER, "| Package | Modules | What it owns |", "| --- | --- | --- |"]
    lines += [f"| `{p.folder}` | {len(p.modules)} | {_cell(p.summary)} |" for p in found]
    for package in found:
        lines += ["", f"## `{package.folder}`", ""]
        for paragraph in package.description:
            lines += [paragraph, ""]
        if not package.modules:
            lines.append("(no modules of its own)")
            continue
        lines += ["| Module | What it is |", "| --- | --- |"]
        lines += [f"| `{module}` | {_cell(summary)} |" for module, summary in package.modules]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the table, or with ``--check`` say whether the committed one is current."""
    parser = argparse.ArgumentParser(prog="dev.py layout", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    try:
        text = render()
    except LayoutError as error:
        print(f"dev.py layout: {error}", file=sys.stderr)
        return 1
    target = ROOT / OUTPUT
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"dev.py layout: {OUTPUT} is stale; run: python3 dev.py layout", file=sys.stderr)
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
