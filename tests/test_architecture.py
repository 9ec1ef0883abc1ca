"""The house: rooms (subpackages) in data-flow order, each importing only from rooms before it.

Data flows one way (settings → plan → probe → measure → verdict → record → views), so a room
imports only from the rooms listed before it — no back-edge, no cycle, whether the import is
top-level, inside a function or under ``TYPE_CHECKING`` (a type-only back-edge is still a
concept defined in the wrong room). The simulator is a separate server: it imports nothing
of the suite, and only its adapter (``servers/simulated.py``) imports it.

The rooms are listed here once; docs/architecture.md draws the same table, and each room's
``__init__.py`` says what it owns and, on a ``May import:`` line, which rooms it uses.

Print the import graph between rooms: ``python tests/test_architecture.py``.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "specperf"
ARCHITECTURE = REPO / "docs" / "architecture.md"

# In data-flow order; a room may import only from rooms before it.
ROOMS: tuple[str, ...] = ("core", "settings", "plan", "servers", "measure", "baselines",
                          "judge", "record", "views", "cli", "plugin", "fleet")
SIMULATOR = "sim"
# The perf cases shipped with the package (pytest --pyargs specperf.perf_tests): a folder
# that may import from any room, and that no room imports. Not a room.
PERF_TESTS = "perf_tests"
SIM_ADAPTER = SRC / "servers" / "simulated.py"
TOP_FLOOR_LIMIT = 10


def _imported_modules(path: Path) -> set[str]:
    """Dotted names (under ``specperf``) that ``path`` imports, resolved from relative form."""
    package = path.relative_to(SRC.parent).with_suffix("").parts
    if path.name != "__init__.py":
        package = package[:-1]
    else:
        package = package[:-1] if package[-1] == "__init__" else package
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1])
            else:
                base = []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if not module.startswith("specperf"):
                continue
            if node.module is None or module == "specperf":
                found.update(f"{module}.{alias.name}" for alias in node.names)
            else:
                found.add(module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("specperf."))
    return found


def _room(dotted: str) -> str | None:
    """``specperf.judge.sweep`` → ``judge``; the top floor is ``None``."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else None


def _room_of_file(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else None


@functools.cache
def edges() -> dict[tuple[str, str], set[str]]:
    """(from room, to room) → the modules that make the edge (parsed once per process)."""
    out: dict[tuple[str, str], set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        here = _room_of_file(path)
        if here is None:
            continue
        for target in _imported_modules(path):
            there = _room(target)
            if there is not None and there != here:
                out.setdefault((here, there), set()).add(str(path.relative_to(SRC)))
    return out


def test_every_folder_is_a_room_and_every_room_a_folder() -> None:
    folders = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert PERF_TESTS in folders
    assert sorted(folders - {SIMULATOR, PERF_TESTS}) == sorted(ROOMS)
    importing = sorted(files for (a, b), files in edges().items() if b == PERF_TESTS)
    assert importing == []


def test_the_top_floor_keeps_at_most_ten_modules() -> None:
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert len(top) <= TOP_FLOOR_LIMIT, top


def test_no_room_imports_from_a_room_after_its_own() -> None:
    order = {room: i for i, room in enumerate(ROOMS)}
    back = [f"{src} ({a}) imports {b}" for (a, b), files in sorted(edges().items())
            if a in order and b in order and order[b] > order[a] for src in sorted(files)]
    assert back == []


def test_only_the_adapter_imports_the_simulator_and_it_imports_nothing_of_the_suite() -> None:
    reaching = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                      if _room_of_file(p) != SIMULATOR
                      and any(_room(m) == SIMULATOR for m in _imported_modules(p)))
    assert reaching == [str(SIM_ADAPTER.relative_to(SRC))]
    for path in sorted((SRC / SIMULATOR).rglob("*.py")):
        suite = {m for m in _imported_modules(path) if _room(m) not in (None, SIMULATOR)}
        assert suite == set(), path.name


def test_only_the_adapter_knows_the_simulators_private_routes() -> None:
    knowing = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                     if _room_of_file(p) != SIMULATOR
                     and re.search(r"/_sim/|sim_time_scale", p.read_text(encoding="utf-8"))
                     and p != SIM_ADAPTER)
    # settings declares the option that sets the embedded simulator's time scale
    assert knowing == ["settings/config.py"]


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_says_what_it_owns_and_imports_only_what_it_declares(room: str) -> None:
    doc = ast.get_docstring(ast.parse((SRC / room / "__init__.py").read_text("utf-8"))) or ""
    declared_line = re.search(r"^May import: (.*)$", doc, re.MULTILINE)
    assert declared_line, f"{room}/__init__.py needs a 'May import:' line"
    declared = set(re.findall(r"\w+", declared_line.group(1))) - {"nothing"}
    assert declared <= set(ROOMS[:ROOMS.index(room)]) | {SIMULATOR}, declared
    used = {b for (a, b) in edges() if a == room}
    assert used <= declared, f"{room} imports {sorted(used - declared)} without declaring it"


def test_the_package_imports_nothing_until_a_name_is_used() -> None:
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    # Top-level statements only: the TYPE_CHECKING block and __getattr__ do not run on import.
    eager = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.level > 0]
    assert eager == []


def test_architecture_doc_lists_the_rooms_in_the_tests_order() -> None:
    rows = re.findall(r"^\|\s*\d+\s*\|\s*`(\w+)/`", ARCHITECTURE.read_text("utf-8"), re.MULTILINE)
    assert tuple(rows) == ROOMS


def test_no_comment_points_at_a_file_outside_the_repository() -> None:
    outside = re.compile(r"DESIGN\.md|shared/[\w-]+\.md|\.\./shared")
    files = [p for top in ("src", "tests", "benchmarks", "ci", ".ci")
             for p in sorted((REPO / top).rglob("*")) if p.suffix in (".py", ".sh", ".md", ".yml")]
    hits = [str(p.relative_to(REPO)) for p in files
            if p.name != "test_architecture.py" and outside.search(p.read_text(encoding="utf-8"))]
    assert hits == []


if __name__ == "__main__":  # the graph between rooms, one line per edge
    for (a, b), files in sorted(edges().items(), key=lambda e: (
            ROOMS.index(e[0][0]) if e[0][0] in ROOMS else -1, e[0][1])):
        print(f"{a:>9} → {b:<9} ({len(files)} module{'s' if len(files) > 1 else ''})",
              file=sys.stdout)
