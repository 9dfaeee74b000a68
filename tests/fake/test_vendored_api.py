"""The vendored published API files are whole and name their source."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.openapi import SPEC_DIR


def test_every_vendored_file_names_its_source_and_parses() -> None:
    """Each vendored file starts with its source line and is a whole OpenAPI or AsyncAPI file."""
    files = sorted(SPEC_DIR.glob("*.yaml"))
    assert len(files) >= 18
    for source in files:
        first_line = source.read_text(encoding="utf-8").splitlines()[0]
        assert first_line.startswith("# source: ammario/kalshi-docs "), source.name
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
        assert "openapi" in document or "asyncapi" in document, source.name


def test_the_vendored_files_live_in_the_repository() -> None:
    """The schema folder is inside the checkout, so a clone with nothing beside it has it."""
    root = Path(__file__).resolve().parents[2]
    assert SPEC_DIR.resolve().is_relative_to(root)
