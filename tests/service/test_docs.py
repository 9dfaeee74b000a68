"""The user documents stand on their own: no path outside the repository, every link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_DOCUMENTS = (
    "README.md",
    "docs/OPERATIONS.md",
    "docs/PROTOCOL.md",
    "docs/PORT-FIDELITY.md",
    "docs/RELIABILITY.md",
)
"""What a user reads. RESULTS.md and BENCHMARK.md record measurement runs, commands as typed."""

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PARENT_PATH = re.compile(r"(?<![\w.])\.\./[\w./-]+")


@pytest.mark.parametrize("name", USER_DOCUMENTS)
def test_no_path_leaves_the_repository(name: str) -> None:
    """Every ``../`` path in a user document names something that exists in the repository."""
    document = ROOT / name
    escaping = [
        path for path in PARENT_PATH.findall(document.read_text()) if not _inside(document, path)
    ]
    assert escaping == [], escaping


def _inside(document: Path, path: str) -> bool:
    """Whether ``path``, read from ``document``'s folder, exists inside the repository."""
    target = (document.parent / path).resolve()
    return target.is_relative_to(ROOT) and target.exists()


@pytest.mark.parametrize("name", USER_DOCUMENTS)
def test_relative_links_resolve(name: str) -> None:
    """Every relative Markdown link names a file or folder that exists in the repository."""
    document = ROOT / name
    targets = [t for t in LINK.findall(document.read_text()) if "://" not in t]
    missing = [t for t in targets if not (document.parent / t).exists()]
    assert missing == [], missing


def test_the_check_sees_an_escaping_path() -> None:
    """The pattern finds a ``../shared/...`` reference (the check can fail)."""
    found = PARENT_PATH.findall("see `../shared/spec/SERVICE.md` and (../x.md)")
    assert found == ["../shared/spec/SERVICE.md", "../x.md"]
    assert not _inside(ROOT / "docs" / "OPERATIONS.md", found[0])
    assert _inside(ROOT / "docs" / "OPERATIONS.md", "../deploy/systemd/trio-executor.service")
