"""The house's shape: imports run one way, from the web room down to core, read from the source
itself (every import statement, at any depth), so a new upward import fails here, named.

    web -> render -> turns -> tools -> search -> chat (domain) -> compaction -> providers -> core

A room may import its own modules and any room below it, never one above; test and bench
support (`support/`, `tests/`, `bench/`) sit above them all. Migrations are history and are left
out; a compaction boundary's foreign key names its conversation by string
("chat.Conversation"), which is no import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module belongs to the longest prefix that names a room.
ROOMS = [
    "core",
    "providers",
    "compaction",
    "chat",
    "search",
    "tools",
    "chat.turns",
    "chat.render",
    "chat.web",
    "config",
    # What only tests and benchmarks may import: the application never does.
    "support",
    "tests",
    "bench",
]
RANK = {room: rank for rank, room in enumerate(ROOMS)}
# Scanned: the application, and test and bench support (which may import only the application).
PACKAGES = ("core", "providers", "compaction", "chat", "search", "tools", "config", "support")


def room_of(module: str) -> str | None:
    found = [room for room in ROOMS if module == room or module.startswith(room + ".")]
    return max(found, key=len) if found else None


def module_of(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, relative ones resolved."""
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
            # `from chat import turns` imports the module chat.turns, not just the package.
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            found.append((node.lineno, target))
    return found


def application_files(root: Path = ROOT) -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in application_files(root):
        importer = room_of(module_of(path, root))
        for line, target in imports_of(path, root):
            imported = room_of(target)
            if imported is not None and RANK[imported] > RANK[importer]:
                found.append(f"{path.relative_to(root)}:{line} ({importer}) imports {target}")
    return sorted(set(found))


def test_imports_run_one_way_from_the_web_room_down_to_core():
    assert upward_imports() == []


def test_the_check_finds_an_upward_import_at_any_depth(tmp_path):
    """The check itself can fail: a domain module importing the engine (here inside a function,
    relatively) is caught, and a downward import is not."""
    (tmp_path / "chat" / "turns").mkdir(parents=True)
    (tmp_path / "chat" / "__init__.py").write_text("")
    (tmp_path / "chat" / "turns" / "__init__.py").write_text("")
    (tmp_path / "chat" / "turns" / "engine.py").write_text("from chat import models\n")
    (tmp_path / "chat" / "models.py").write_text("def f():\n    from .turns import engine\n")
    assert upward_imports(tmp_path) == [
        "chat/models.py:2 (chat) imports chat.turns",
        "chat/models.py:2 (chat) imports chat.turns.engine",
    ]


@pytest.mark.parametrize("room", ["core", "providers", "compaction", "chat", "search", "tools"])
def test_every_room_says_what_lives_there_and_what_it_may_import(room):
    doc = ast.get_docstring(ast.parse((ROOT / room / "__init__.py").read_text()))
    assert doc and "import" in doc.lower()


@pytest.mark.parametrize("room", ["chat/turns", "chat/render", "chat/web"])
def test_every_sub_room_says_so_too(room):
    doc = ast.get_docstring(ast.parse((ROOT / room / "__init__.py").read_text()))
    assert doc and "import" in doc.lower()


def test_no_application_module_is_over_500_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in application_files()
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
