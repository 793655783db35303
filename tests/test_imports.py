"""The import rules of docs/architecture.md, checked against the code.

Every import of every module under ``notifier/`` (at the top, inside a function, for type
checking only, or by name through ``importlib.import_module`` with a string the module spells
out: each is a dependency) is read from its syntax tree, never by importing it. A
module belongs to the deepest package the architecture's table has a row for (``notify/channels``
before ``notify``). Two things must hold:

* each package imports only what its "may import" cell names (``x`` a package, ``x.y`` module
  ``y`` of package ``x`` only, "everything");
* no package cycle between stages: no two top-level packages import each other, directly or
  around a loop (a subpackage belongs to its stage).

The package's own ``__init__`` (its version) is no stage and may be imported by any.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "notifier"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Import:
    source: str
    """The importing module, dotted (``notifier.fleet.state``)."""
    target: str
    """The imported module, dotted, as far as it names a module or package of notifier."""
    where: str
    """``path:line``, for the message."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _strings(tree: ast.Module) -> dict[str, str]:
    """The module's top-level names bound to a string constant (``REGISTRY = "notifier.x"``)."""
    names: dict[str, str] = {}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return names


def _imported_by_name(node: ast.Call, strings: dict[str, str]) -> str | None:
    """The module an ``importlib.import_module(...)`` call names, when the module spells it
    out (a string, or a top-level name bound to one)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.Name):
        return strings.get(argument.id)
    return None


def imports_of(path: Path) -> list[Import]:
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found: list[Import] = []
    tree = ast.parse(path.read_text(), str(path))
    strings = _strings(tree)
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            named = _imported_by_name(node, strings)
            targets = [] if named is None else [named]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from notifier.x import y``: y may be a module of its own (``from notifier
            # import history``) or a name defined in x.
            targets = [
                f"{module}.{alias.name}" if is_module(f"{module}.{alias.name}") else module
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target == "notifier" or target.startswith("notifier."):
                found.append(Import(source, target, where))
    return found


@dataclass(frozen=True)
class Row:
    package: str
    """As the table names it, without ``notifier/`` and the trailing ``/`` or ``.py``:
    ``types``, ``notify/channels``."""
    everything: bool
    packages: frozenset[str]
    modules: frozenset[str]
    """``x.y`` entries: module y of package x only."""


def table() -> dict[str, Row]:
    """The architecture's package table, by package."""
    text = ARCHITECTURE.read_text()
    start = text.index("| package | role | may import |")
    rows: dict[str, Row] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 3, f"{ARCHITECTURE}: a table row without 3 cells: {line}"
        name = re.fullmatch(r"`(?:notifier/)?([\w/]+?)(?:\.py|/)?`", cells[0])
        assert name, f"{ARCHITECTURE}: the package cell {cells[0]!r} is not `path/` or `path.py`"
        allowed = re.findall(r"`([\w/.]+)`", cells[2])
        everything = cells[2].startswith("everything")
        assert everything or allowed or cells[2] == "nothing of notifier", (
            f"{ARCHITECTURE}: the 'may import' cell of {cells[0]} names no package: {cells[2]!r}"
        )
        rows[name.group(1)] = Row(
            name.group(1),
            everything,
            frozenset(a for a in allowed if "." not in a),
            frozenset(a for a in allowed if "." in a),
        )
    return rows


def package_of(module: str, rows: dict[str, Row]) -> str | None:
    """The table's row a module belongs to (the deepest one), None for the package's own
    ``__init__``; fails naming the module when no row covers it."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    for depth in range(len(parts), 0, -1):
        name = "/".join(parts[:depth])
        if name in rows:
            return name
    raise AssertionError(
        f"{module} belongs to no package of the table in {ARCHITECTURE.relative_to(ROOT)}: "
        f"add a row for notifier/{parts[0]}"
    )


def allowed(row: Row, target_package: str, target: str) -> bool:
    if row.everything or target_package in row.packages:
        return True
    # ``x.y``: module y of x (and what it holds), given as ``x.y`` with x a table path.
    for entry in row.modules:
        package, _, module = entry.rpartition(".")
        dotted = "notifier." + package.replace("/", ".") + "." + module
        if target_package == package and (target == dotted or target.startswith(dotted + ".")):
            return True
    return False


@functools.cache
def all_imports() -> tuple[Import, ...]:
    return tuple(found for path in sorted(PACKAGE.rglob("*.py")) for found in imports_of(path))


def test_every_package_imports_only_what_the_architecture_allows():
    rows = table()
    wrong: list[str] = []
    for found in all_imports():
        source = package_of(found.source, rows)
        target = package_of(found.target, rows)
        if source is None or target is None or source == target:
            continue
        if not allowed(rows[source], target, found.target):
            wrong.append(f"{found.where}: {source} imports {found.target} ({target})")
    assert not wrong, (
        f"imports the 'may import' column of {ARCHITECTURE.relative_to(ROOT)} does not allow:\n"
        + "\n".join(wrong)
    )


def test_the_table_names_no_import_the_code_does_not_make():
    """The column is a fact, not a wish: every package it lets a package import is imported."""
    rows = table()
    made: dict[str, set[str]] = defaultdict(set)
    for found in all_imports():
        source, target = package_of(found.source, rows), package_of(found.target, rows)
        if source is not None and target is not None and source != target:
            made[source].add(target)
            made[source].add(found.target)
    stale = []
    for row in rows.values():
        for package in sorted(row.packages - made[row.package]):
            stale.append(f"{row.package} may import {package}, and imports nothing of it")
        for entry in sorted(row.modules):
            package, _, module = entry.rpartition(".")
            dotted = "notifier." + package.replace("/", ".") + "." + module
            if not any(t == dotted or t.startswith(dotted + ".") for t in made[row.package]):
                stale.append(f"{row.package} may import {entry}, and does not")
    assert not stale, "\n".join(stale)


def stage_graph() -> dict[str, set[str]]:
    """Which top-level package imports which (a subpackage is part of its stage)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for found in all_imports():
        source, target = found.source.split("."), found.target.split(".")
        if len(source) < 2 or len(target) < 2 or source[1] == target[1]:
            continue
        graph[source[1]].add(target[1])
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop of ``graph`` (its packages in order, the first repeated), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for after in sorted(graph.get(node, ())):
            found = visit(after, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_no_stage_imports_another_that_imports_it_back():
    loop = cycle(stage_graph())
    assert loop is None, f"package import cycle: {' -> '.join(loop or [])}"


def test_config_does_not_reach_back_into_the_channels():
    """Config is handed the channel kinds by the notify stage (``notifier/notify/config.py``)
    and never imports the channels, by name or otherwise: the channels import config."""
    reaching_back = [
        f"{found.where}: {found.target}"
        for found in all_imports()
        if found.source.startswith("notifier.config") and found.target.startswith("notifier.notify")
    ]
    assert reaching_back == []
    assert "notify" not in stage_graph()["config"]


def test_the_service_and_the_fleet_meet_at_the_sharing_seam_only():
    service_to_fleet = [
        f"{i.where}: {i.target}"
        for i in all_imports()
        if i.source.startswith("notifier.service") and i.target.startswith("notifier.fleet")
    ]
    fleet_to_service = {
        i.target
        for i in all_imports()
        if i.source.startswith("notifier.fleet") and i.target.startswith("notifier.service")
    }
    assert service_to_fleet == []
    assert fleet_to_service == {"notifier.service.sharing"}


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b", "c"}, "c": {"c2"}, "c2": {"c"}}, ["c", "c2", "c"]),
    ],
)
def test_the_cycle_finder_finds_loops_and_only_loops(graph, expected):
    assert cycle(graph) == expected
