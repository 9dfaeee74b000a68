"""Each name once: a constant or a Protocol of the executor is defined in one module only.

The walk reads every module of ``executor/`` with ``ast`` and lists the module-level constants
(an upper-case name assigned at the top of a module) and the ``Protocol`` classes. Two modules
defining the same constant with the same value, or the same Protocol, are one name written twice:
the second copy drifts. ``executor/fake/`` is left out on purpose: the fake exchange follows
Kalshi's published API on its own (its paths, its default cost), so a wrong path in the client is
caught against it instead of being shared with it.
"""

from __future__ import annotations

import ast
import collections
import textwrap
from pathlib import Path
from typing import Final

import executor

PACKAGE_ROOT: Final = Path(executor.__file__).parent

INDEPENDENT: Final = ("fake",)
"""Subpackages whose names are their own (see the module docstring)."""

SEPARATE_TUNABLES: Final = {
    "CLOSE_TIMEOUT_S": "closing the order pool and closing the stream: two budgets that agree now",
}
"""Constants of one name and value in two modules that are two tunables, each with its reason."""

ORDER_STATE_WORDS: Final = (
    "CANCELLED_AT_SHUTDOWN",
    "GOOD_TILL_CANCELED",
    "OUTCOME_UNKNOWN_PREFIX",
    "RECONCILED_PREFIX",
    "NO_SUCH_ORDER_PREFIX",
    "ADOPTED_MESSAGE",
)
"""The order-state vocabulary issue 33 found written twice (exchange/ and recording/)."""


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split("[")[0].endswith("Protocol") for base in node.bases)


def definitions(package_root: Path) -> dict[str, list[tuple[str, str]]]:
    """Every module-level constant and Protocol, by name: ``(module file, value or 'Protocol')``
    for each module defining it (the independent subpackages left out)."""
    found: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        if relative.parts[0] in INDEPENDENT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and _is_protocol(node):
                found[node.name].append((str(relative), "Protocol"))
                continue
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                name, value = node.target.id, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if not isinstance(target, ast.Name):
                    continue
                name, value = target.id, node.value
            else:
                continue
            if value is not None and name.isupper() and not name.startswith("__"):
                found[name].append((str(relative), ast.unparse(value)))
    return found


def written_twice(found: dict[str, list[tuple[str, str]]]) -> list[str]:
    """The names defined in two modules or more with the same value (or as a Protocol)."""
    twice = []
    for name, places in sorted(found.items()):
        if name in SEPARATE_TUNABLES:
            continue
        by_value = collections.defaultdict(list)
        for module, value in places:
            by_value[value].append(module)
        for modules in by_value.values():
            if len(modules) > 1:
                twice.append(f"{name}: {', '.join(sorted(modules))}")
    return twice


def test_no_constant_or_protocol_of_the_executor_is_written_twice() -> None:
    """No constant (same name, same value) or Protocol is defined in two executor modules."""
    assert written_twice(definitions(PACKAGE_ROOT)) == []


def test_the_order_state_words_live_in_the_recording_vocabulary() -> None:
    """Each order-state word is defined once, in ``executor/recording/orders/terms.py``."""
    found = definitions(PACKAGE_ROOT)
    for name in ORDER_STATE_WORDS:
        assert [module for module, _ in found[name]] == ["recording/orders/terms.py"], name


def test_the_walk_reports_a_name_written_twice_in_a_synthetic_package(tmp_path: Path) -> None:
    """Negative twin: a constant and a Protocol copied into a second module are both reported,
    a same-named constant with another value and the independent fake are not."""
    files = {
        "a.py": """
            from typing import Final, Protocol
            LIMIT: Final = 10
            TIMEOUT_S = 1.0
            class Sink(Protocol): ...
        """,
        "room/b.py": """
            from typing import Final, Protocol
            LIMIT: Final = 10
            TIMEOUT_S = 2.0
            class Sink(Protocol): ...
        """,
        "fake/c.py": "LIMIT = 10\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    assert written_twice(definitions(tmp_path)) == [
        "LIMIT: a.py, room/b.py",
        "Sink: a.py, room/b.py",
    ]
