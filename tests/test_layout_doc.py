"""docs/design/layout.md is generated from the packages' docstrings and never stale."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tools.layout import OUTPUT, ROOT, LayoutError, main, render


def test_the_committed_layout_is_what_the_code_says_now() -> None:
    """The committed table equals a fresh render (run ``python3 dev.py layout`` when it is not)."""
    assert (ROOT / OUTPUT).read_text(encoding="utf-8") == render(), (
        "docs/design/layout.md is stale: run python3 dev.py layout"
    )


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` (path: text) under ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


TREE = {
    "executor/__init__.py": '"""The product.\n\nMore that the table leaves out."""\n',
    "executor/room/__init__.py": '"""A room: owns | a thing,\nsaid on two lines.\n\nDetails."""\n',
    "executor/room/alpha.py": '"""Alpha does one job, e.g. this. A second sentence."""\n',
    "bench/__init__.py": '"""The benchmark."""\n',
    "bench/results/old/__init__.py": "",
    "bench/results/old/script.py": "x = 1\n",
}


def test_a_synthetic_tree_renders_each_room_and_module(tmp_path: Path) -> None:
    """A package's row shows its first paragraph (lines joined, pipes escaped) and its section
    the whole docstring; a module shows its first sentence; bench/results/ is left out."""
    write_tree(tmp_path, TREE)
    text = render(tmp_path)
    assert "| `executor/room/` | 1 | A room: owns \\| a thing, said on two lines. |" in text
    assert "## `executor/room/`\n\nA room: owns | a thing, said on two lines.\n\nDetails.\n" in text
    assert "| `executor/room/alpha.py` | Alpha does one job, e.g. this. |" in text
    assert "A second sentence" not in text
    assert "results" not in text


def test_a_module_added_changes_the_table(tmp_path: Path) -> None:
    """Negative twin: the render follows the code, so a new module makes the old file stale."""
    write_tree(tmp_path, TREE)
    before = render(tmp_path)
    write_tree(tmp_path, {"executor/room/beta.py": '"""Beta, new."""\n'})
    after = render(tmp_path)
    assert before != after and "`executor/room/beta.py` | Beta, new. |" in after


def test_a_module_without_a_docstring_is_named(tmp_path: Path) -> None:
    """A module with no docstring stops the render with its path, instead of a hole."""
    write_tree(tmp_path, {**TREE, "executor/room/gamma.py": "VALUE = 1\n"})
    with pytest.raises(LayoutError, match=re.escape("executor/room/gamma.py has no docstring")):
        render(tmp_path)


def test_check_says_stale_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dev.py layout --check`` exits 1 with one line when the file differs, 0 when it matches."""
    write_tree(tmp_path, TREE)
    monkeypatch.setattr("tools.layout.ROOT", tmp_path)
    monkeypatch.setattr("tools.layout.render", lambda: render(tmp_path))
    assert main(["--check"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert main([]) == 0
    assert main(["--check"]) == 0
    assert (tmp_path / OUTPUT).read_text(encoding="utf-8") == render(tmp_path)
