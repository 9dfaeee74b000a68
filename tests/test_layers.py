"""The package's imports run one way: no circle between modules, no layer importing one above it.

The walk reads every module of ``executor/`` with ``ast`` (nothing is imported, so an import that
only runs in a function, under ``if TYPE_CHECKING:`` or on one platform counts the same as one at
the top) and draws an arrow from the module to each ``executor`` module it names: ``import a.b``,
``from a.b import c`` (to ``a.b.c`` when that is a module, else to ``a.b``), ``from a import b``
and relative imports (``from . import b``, ``from ..c import d``). A parent package's
``__init__`` that Python runs on the way to a submodule gets no arrow of its own.

:data:`LAYERS` is the one place the layer order is written (STYLE.md and the subpackages'
docstrings describe it in words). Modules of one layer may import each other; the circle check
still applies to them.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, TypeAlias

import executor

Graph: TypeAlias = dict[str, set[str]]
"""Module name -> the package's modules it imports."""

Layers: TypeAlias = Sequence[Sequence[str]]
"""Lowest layer first; each layer names modules and subpackages (a subpackage covers every module
under it, the root package only its own ``__init__``)."""

LAYERS: Final[Layers] = (
    # the foundation
    ("executor", "executor.clock", "executor.logs", "executor.signer"),
    ("executor.config",),
    ("executor.runtime",),
    ("executor.recording",),
    ("executor.telemetry",),
    ("executor.wire",),
    ("executor.decide",),
    ("executor.fake",),
    # the exchange: its face, then its rooms
    ("executor.exchange",),
    ("executor.exchange.follow",),
    ("executor.exchange.orders",),
    ("executor.exchange.stream",),
    ("executor.exchange.book",),
    ("executor.fire",),
    ("executor.trading",),
    ("executor.stats",),
    ("executor.server",),
    ("executor.cli", "executor.main", "executor.__main__"),
)
"""The executor's layers, lowest first: a module may import its own layer and those below."""

PACKAGE_ROOT: Final = Path(executor.__file__).parent


# ---------------------------------------------------------------- the checker


def module_files(package_root: Path) -> dict[str, Path]:
    """Every module of the package under ``package_root``, by dotted name."""
    modules: dict[str, Path] = {}
    for path in sorted(package_root.rglob("*.py")):
        parts = path.relative_to(package_root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _nearest_module(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` itself when it is a module of the package, else its nearest ancestor that is."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _import_targets(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that the import statements anywhere in one file name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(_nearest_module(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(part for part in (*parts, node.module or "") if part)
            for alias in node.names:
                # ``from a import b``: the submodule a.b when there is one, else a itself.
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else _nearest_module(base, modules))
    return {target for target in targets if target is not None and target != module}


def import_graph(package_root: Path) -> Graph:
    """The package's modules and, for each, the package's modules it imports (itself excluded)."""
    modules = module_files(package_root)
    return {module: _import_targets(module, path, modules) for module, path in modules.items()}


def layer_of(module: str, layers: Layers) -> int | None:
    """The index of the layer holding ``module``, or None when no layer names it."""
    root = layers[0][0].partition(".")[0]
    best: tuple[int, int] | None = None  # (length of the matching entry, layer)
    for index, layer in enumerate(layers):
        for entry in layer:
            covers = module == entry or (entry != root and module.startswith(entry + "."))
            if covers and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def unplaced_modules(graph: Mapping[str, set[str]], layers: Layers) -> list[str]:
    """The modules no layer names, sorted."""
    return sorted(module for module in graph if layer_of(module, layers) is None)


def upward_imports(graph: Mapping[str, set[str]], layers: Layers) -> list[str]:
    """Every arrow from a module to one in a higher layer, as ``"a -> b"``, sorted."""
    found = []
    for module, targets in graph.items():
        here = layer_of(module, layers)
        for target in targets:
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                found.append(f"{module} -> {target}")
    return sorted(found)


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, each sorted; iterative, so a deep chain cannot hit the stack limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _one_circle(graph: Mapping[str, set[str]], members: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as the path walked (start again
    at the end)."""
    inside = set(members)
    start = members[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & inside):
                if child == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = came_from[node]
                    return [start, *reversed(path[1:]), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # pragma: no cover - a component has one


def circles(graph: Mapping[str, set[str]]) -> list[str]:
    """One circle per group of modules that import each other, as ``"a -> b -> a"``, sorted."""
    found = []
    for members in _strongly_connected(graph):
        if len(members) > 1:
            found.append(" -> ".join(_one_circle(graph, members)))
    return sorted(found)


# ---------------------------------------------------------------- the executor package


def test_no_module_of_the_executor_imports_itself_in_a_circle() -> None:
    """No group of executor modules imports each other round in a circle."""
    assert circles(import_graph(PACKAGE_ROOT)) == []


def test_no_module_of_the_executor_imports_a_layer_above_its_own() -> None:
    """Every import in executor/ goes to the importer's own layer or one below it."""
    assert upward_imports(import_graph(PACKAGE_ROOT), LAYERS) == []


def test_every_module_of_the_executor_has_a_layer() -> None:
    """A module the layer order does not name fails, so a new module must be placed."""
    assert unplaced_modules(import_graph(PACKAGE_ROOT), LAYERS) == []


def test_the_walk_sees_every_kind_of_import_in_the_executor() -> None:
    """The graph holds a top-level, a function-level and a TYPE_CHECKING import of the package."""
    graph = import_graph(PACKAGE_ROOT)
    assert "executor.telemetry" in graph["executor.wire.connection"]  # top level
    assert "executor.stats.command" in graph["executor.main"]  # inside main()
    assert "executor.trading.factory" in graph["executor.server"]  # under TYPE_CHECKING only
    assert "executor.logs" in graph["executor.server"]  # from executor import logs
    assert len(graph) > 40  # the walk found the package, not an empty folder


def test_the_fire_path_imports_no_room_only_to_gather_its_counters() -> None:
    """The order path's counters are gathered by the composition root: the fire path imports
    neither the account poll, adoption, nor the stream."""
    graph = import_graph(PACKAGE_ROOT)
    fire = {
        target
        for module in graph
        if module.startswith("executor.fire.")
        for target in graph[module]
    }
    gatherers = {
        "executor.exchange.follow.account",
        "executor.exchange.follow.adoption",
        "executor.exchange.stream.client",
        "executor.exchange.stream.orders",
    }
    assert fire & gatherers == set()
    assert gatherers <= graph["executor.trading.counters"] | graph["executor.trading.assembly"]


IO_MODULES: Final = frozenset(
    {
        *("argparse", "fcntl", "io", "os", "pathlib", "shutil", "socket"),
        *("sqlite3", "stat", "subprocess", "sys", "tempfile", "trio"),
    }
)
"""Standard modules (and trio) that read files, the environment or the command line, or await."""


def standard_imports(path: Path) -> set[str]:
    """The top-level names of every module one file imports (``os`` for ``os.path``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def test_the_decision_layer_imports_nothing_that_does_io() -> None:
    """``executor/decide/`` is pure: none of its modules imports a file, environment, command-line
    or Trio module (the kill switch's file and command live in runtime/ and trading/)."""
    decide = PACKAGE_ROOT / "decide"
    found = {
        f"{path.name}: {name}"
        for path in sorted(decide.glob("*.py"))
        for name in standard_imports(path) & IO_MODULES
    }
    assert found == set()


ROOM_MODULES_MAX: Final = 12
"""Most modules a room (a package folder, its subpackages apart) holds: past it, it is two rooms."""

OVERSIZED_ROOMS: Final[dict[str, int]] = {}
"""Rooms past the limit, each held at its size until it is split: none since recording, the fake,
the order path and the bench's scenarios were split (issue 33). A module added to a held room, or a
new room past the limit, fails."""

LAYERS_THE_ROOT_KNOWS: Final = (
    "executor.config",
    "executor.decide",
    "executor.recording",
    "executor.exchange.orders",
    "executor.exchange.follow",
    "executor.exchange.stream",
    "executor.exchange.book",
    "executor.fire",
)
"""The layers a composition root builds from: configuration, the decision, recording, every room
of the exchange and the fire path."""


def room_sizes(roots: Iterable[Path]) -> dict[str, int]:
    """Modules per package folder under ``roots`` (``bench/results/`` left out: not code)."""
    sizes: dict[str, int] = {}
    for root in roots:
        for init in sorted(root.rglob("__init__.py")):
            folder = init.parent
            if "results" in folder.relative_to(root.parent).parts:
                continue
            name = folder.relative_to(root.parent).as_posix()
            sizes[name] = sum(1 for path in folder.glob("*.py") if path.name != "__init__.py")
    return sizes


def rooms_over_the_limit(sizes: Mapping[str, int]) -> list[str]:
    """The rooms past :data:`ROOM_MODULES_MAX` (or past their held size), as ``"room: N"``."""
    return sorted(
        f"{room}: {count}"
        for room, count in sizes.items()
        if count > OVERSIZED_ROOMS.get(room, ROOM_MODULES_MAX)
    )


def test_no_room_holds_more_than_about_twelve_modules() -> None:
    """No package of executor/ or bench/ holds more than 12 modules."""
    sizes = room_sizes((PACKAGE_ROOT, PACKAGE_ROOT.parent / "bench"))
    assert rooms_over_the_limit(sizes) == []
    assert set(OVERSIZED_ROOMS) <= set(sizes)  # a split room leaves this list


def test_a_room_past_the_limit_is_reported() -> None:
    """Negative twin: a 13-module room and a 19-module one are both named; 12 is not."""
    sizes = {"executor/new": 13, "executor/recording": 19, "executor/wire": 12}
    assert rooms_over_the_limit(sizes) == ["executor/new: 13", "executor/recording: 19"]


def layer_name(module: str) -> str:
    """The entry of :data:`LAYERS` that holds ``module`` (its room, or itself at the top)."""
    entries = [entry for layer in LAYERS for entry in layer]
    covering = [entry for entry in entries if module == entry or module.startswith(entry + ".")]
    return max(covering, key=len, default=module)


def packages_knowing(graph: Mapping[str, set[str]], layers: Sequence[str]) -> list[str]:
    """The layers (rooms, or top-level modules) whose modules together import each of
    ``layers`` other than themselves."""
    imported: dict[str, set[str]] = {}
    for module, targets in graph.items():
        owner = layer_name(module)
        for target in targets:
            for layer in layers:
                if (target == layer or target.startswith(layer + ".")) and layer != owner:
                    imported.setdefault(owner, set()).add(layer)
    return sorted(
        owner
        for owner, known in imported.items()
        if known >= {layer for layer in layers if layer != owner}
    )


def test_the_composition_root_is_the_only_package_that_knows_every_layer() -> None:
    """Only ``executor.trading`` imports configuration, the decision, recording, every room of
    the exchange and the fire path."""
    graph = import_graph(PACKAGE_ROOT)
    assert packages_knowing(graph, LAYERS_THE_ROOT_KNOWS) == ["executor.trading"]


# ---------------------------------------------------------------- the checker's negative twins

_SYNTHETIC_LAYERS: Final[Layers] = (
    ("pkg", "pkg.low"),
    ("pkg.mid",),
    ("pkg.top",),
)

_SYNTHETIC_PACKAGE: Final = {
    "__init__.py": '"""A tiny package."""\n',
    "low.py": "SOMETHING = 1\n",
    "mid/__init__.py": "",
    "mid/a.py": """
        import pkg.low
        from . import b  # relative, inside the subpackage: allowed, but half of the circle
    """,
    "mid/b.py": """
        def late() -> None:
            from pkg.mid.a import b  # function level: the circle's other half
    """,
    "mid/c.py": """
        from __future__ import annotations

        from typing import TYPE_CHECKING

        from ..low import SOMETHING  # relative, two levels up: downward, allowed
        from .b import late

        if TYPE_CHECKING:
            from pkg.top import Top  # the one upward import, type-only
    """,
    "top.py": """
        from pkg import low, mid

        class Top: ...
    """,
}


def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``files`` as package ``pkg`` under ``root``; return the package folder."""
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return package


def test_the_checker_reports_exactly_the_upward_import_of_a_synthetic_package(
    tmp_path: Path,
) -> None:
    """Negative twin: a type-only import of a higher layer is the one arrow reported."""
    graph = import_graph(_write_package(tmp_path, _SYNTHETIC_PACKAGE))
    assert upward_imports(graph, _SYNTHETIC_LAYERS) == ["pkg.mid.c -> pkg.top"]


def test_the_checker_reports_exactly_the_circle_of_a_synthetic_package(tmp_path: Path) -> None:
    """Negative twin: two modules importing each other (relative and in a function) are named."""
    graph = import_graph(_write_package(tmp_path, _SYNTHETIC_PACKAGE))
    assert circles(graph) == ["pkg.mid.a -> pkg.mid.b -> pkg.mid.a"]


def test_the_checker_resolves_every_import_form_of_a_synthetic_package(tmp_path: Path) -> None:
    """Relative, ``from pkg import x``, ``import pkg.x`` and attribute imports land on modules."""
    graph = import_graph(_write_package(tmp_path, _SYNTHETIC_PACKAGE))
    assert graph == {
        "pkg": set(),
        "pkg.low": set(),
        "pkg.mid": set(),
        "pkg.mid.a": {"pkg.mid.b", "pkg.low"},
        "pkg.mid.b": {"pkg.mid.a"},
        "pkg.mid.c": {"pkg.low", "pkg.mid.b", "pkg.top"},
        "pkg.top": {"pkg.low", "pkg.mid"},
    }


def test_the_checker_reports_a_module_no_layer_names(tmp_path: Path) -> None:
    """Negative twin: a module outside the layer order is reported by name."""
    files = {**_SYNTHETIC_PACKAGE, "stray.py": "from pkg import low\n"}
    graph = import_graph(_write_package(tmp_path, files))
    assert unplaced_modules(graph, _SYNTHETIC_LAYERS) == ["pkg.stray"]
