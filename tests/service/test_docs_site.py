"""The documents build as a site with ``mkdocs build --strict`` (what ``dev.py check``, and so
CI, runs): every link and anchor resolves and every page is in the nav."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BUILD_TIMEOUT_S = 90
"""A build of the whole site takes 1-2 s here; the bound only stops a hung build."""

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (it is in the dev extra: pip install -e '.[dev]')",
)


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the site whose ``mkdocs.yml`` is in ``root``, into ``site``."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "mkdocs", "build", "--strict"),
            *("--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site)),
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )


@needs_mkdocs
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """The repository's documents build with no warning, the nav's pages included."""
    built = build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr[-3000:]
    for page in ("index.html", "operations/failure-modes/index.html", "performance/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def copied_site(tmp_path: Path) -> Path:
    """A copy of the site's sources (``mkdocs.yml`` and ``docs/``) to break."""
    root = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


BREAKAGES = {
    "a link to a missing page": ("operations/data.md", "\n[gone](missing.md)\n", "missing.md"),
    "an anchor no heading makes": ("operations/data.md", "\n[gone](data.md#no-such)\n", "#no-such"),
    "a page left out of the nav": ("operations/orphan.md", "# Nobody links here\n", "orphan.md"),
}
"""What a strict build must refuse: the page written to, what is appended to it, and what the
build's complaint names."""


@needs_mkdocs
@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_the_strict_build_fails_on(tmp_path: Path, breakage: str) -> None:
    """Negative twin: the same documents with one broken link, anchor or unlisted page fail the
    build, naming what broke."""
    root = copied_site(tmp_path)
    page, text, named = BREAKAGES[breakage]
    with (root / "docs" / page).open("a") as written:
        written.write(text)
    built = build(root, tmp_path / "site")
    assert built.returncode != 0
    assert named in built.stderr
