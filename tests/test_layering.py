"""The house's layering: which room may import which, read from the source itself (every import
statement, at any depth, inside functions too), so a new import across rooms that the table does
not allow fails here, named; and no import cycle between any two application modules, nor
between two modules of the benches, the tests and their support.

    web -> render -> turns -> tools -> search -> chat (domain) -> compaction -> providers -> core

`MAY_IMPORT` is the one table of what each room may import; every room's `__init__.py` says the
same in a line `May import: …`, and a test checks that they agree. Test and bench support
(`support/`, `tests/`, `bench/`) sit above the application; the application never imports them.
Migrations are history and are left out; a compaction boundary's foreign key names its
conversation by string ("chat.Conversation"), which is no import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Room -> the rooms it may import (besides its own modules). Lowest first; a room only ever
# imports rooms listed before it.
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "providers": {"core"},
    "compaction": {"providers", "core"},
    "chat": {"compaction", "providers", "core"},
    "search": {"chat", "providers", "core"},
    "tools": {"search", "chat", "compaction", "core"},
    "turns": {"tools", "chat", "compaction", "providers", "core"},
    "render": {"search", "chat", "compaction", "providers", "core"},
    "web": {"render", "turns", "tools", "search", "chat", "compaction", "providers", "core"},
    "config": {"web", "turns", "core"},
    # Fakes and helpers that tests and benchmarks share: any room of the application.
    "support": {"config", "web", "render", "turns", "tools", "search", "chat"}
    | {"compaction", "providers", "core"},
}
ROOMS = list(MAY_IMPORT)
APPLICATION = [room for room in ROOMS if room != "support"]


def room_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in MAY_IMPORT else None


def module_of(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth, relative ones resolved. For
    `from a import b` both `a` and `a.b` are named: `b` may be a module."""
    module = module_of(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            found.append((node.lineno, target))
    return found


def application_files(root: Path = ROOT, rooms: list[str] = ROOMS) -> list[Path]:
    return [
        path
        for room in rooms
        for path in sorted((root / room).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def forbidden_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in application_files(root):
        importer = room_of(module_of(path, root))
        for line, target in imports_of(path, root):
            imported = room_of(target)
            if imported not in (None, importer) and imported not in MAY_IMPORT[importer]:
                found.append(f"{path.relative_to(root)}:{line} ({importer}) imports {target}")
    return sorted(set(found))


def import_cycles(root: Path = ROOT, rooms: list[str] = APPLICATION) -> list[list[str]]:
    """Every set of modules of `rooms` that import each other, directly or around a circle
    (Tarjan's strongly connected components over the module graph)."""
    files = application_files(root, rooms)
    modules = {module_of(path, root): path for path in files}
    graph = {
        module: sorted({t for _, t in imports_of(path, root) if t in modules and t != module})
        for module, path in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while (top := stack.pop()) != module:
                component.append(top)
            component.append(module)
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def said_may_import(room: str, root: Path = ROOT) -> set[str] | None:
    """The rooms a room's `__init__.py` docstring says it may import (`May import: a, b.` or
    `May import: nothing.`), or None when it says nothing of the kind."""
    doc = ast.get_docstring(ast.parse((root / room / "__init__.py").read_text())) or ""
    said = re.search(r"May import: ([^.]*)\.", " ".join(doc.split()))
    if said is None:
        return None
    words = {word.strip() for word in said.group(1).replace(" and ", ", ").split(",")}
    return set() if words == {"nothing"} else words


def test_imports_follow_the_table():
    assert forbidden_imports() == []


def test_the_table_runs_one_way():
    for rank, room in enumerate(ROOMS):
        assert MAY_IMPORT[room] <= set(ROOMS[:rank]), room


@pytest.mark.parametrize("room", [room for room in ROOMS if room != "config"])
def test_every_room_says_what_it_may_import_as_the_table_does(room):
    assert said_may_import(room) == MAY_IMPORT[room]


def test_no_import_cycle_between_application_modules():
    assert import_cycles() == []


def test_no_import_cycle_in_the_benches_the_tests_and_their_support():
    """An import only for type checking (`if TYPE_CHECKING:`) is read like any other: a circle
    through one is still a circle."""
    assert import_cycles(rooms=["bench", "support", "tests"]) == []


def test_the_checks_find_a_forbidden_import_and_a_cycle_at_any_depth(tmp_path):
    """The checks themselves can fail: a domain module importing the engine (inside a function,
    relatively imported by the engine) is caught both as a forbidden import and as a cycle."""
    for package in ("chat", "turns"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "turns" / "engine.py").write_text("from chat import models\n")
    (tmp_path / "chat" / "models.py").write_text("def f():\n    from turns import engine\n")
    (tmp_path / "chat" / "a.py").write_text("from . import b\n")
    (tmp_path / "chat" / "b.py").write_text("def g():\n    from chat.a import thing\n")
    assert forbidden_imports(tmp_path) == [
        "chat/models.py:2 (chat) imports turns",
        "chat/models.py:2 (chat) imports turns.engine",
    ]
    assert import_cycles(tmp_path) == [["chat.a", "chat.b"], ["chat.models", "turns.engine"]]


def test_the_docstring_check_reads_the_line(tmp_path):
    (tmp_path / "search").mkdir()
    init = tmp_path / "search" / "__init__.py"
    init.write_text('"""Search.\n\nMay import: chat,\nproviders and core.\n"""\n')
    assert said_may_import("search", tmp_path) == {"chat", "providers", "core"}
    init.write_text('"""Search: imports chat."""\n')
    assert said_may_import("search", tmp_path) is None
    init.write_text('"""The base.\n\nMay import: nothing.\n"""\n')
    assert said_may_import("search", tmp_path) == set()


def test_no_application_module_is_over_500_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in application_files()
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
