"""The house: rooms (subpackages) in data-flow order, each importing only what docs/architecture.md
allows it, no import cycle anywhere, and benchmarks that use the public API only.

docs/architecture.md's room table is the one list: its order (a room imports only from rooms
above it) and its "may import" column (which of them) are read here, compared with each room's
``May import:`` line and with every import in the source — top-level, inside a function or under
``TYPE_CHECKING`` (a type-only back-edge is still a concept defined in the wrong room). The
simulator is a separate server: it imports nothing of the suite, and only its adapter
(``servers/simulated.py``) imports it.

Print the import graph between rooms and the cycles between modules:
``python tests/test_architecture.py``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "specperf"
BENCHMARKS = REPO / "benchmarks"
ARCHITECTURE = REPO / "docs" / "architecture.md"

SIMULATOR = "sim"
# The perf cases shipped with the package (pytest --pyargs specperf.perf_tests): a folder
# that may import from any room, and that no room imports. Not a room.
PERF_TESTS = "perf_tests"
SIM_ADAPTER = SRC / "servers" / "simulated.py"
TOP_FLOOR_LIMIT = 10

# Benchmarks that import private modules, and why.
PRIVATE_BENCHMARKS = {
    # Benchmarks of one private piece itself, below any API:
    "sim_cost.py": "measures the simulator's scheduler step, which has no HTTP route",
    "drift_cusum.py": "compares an alternative with core/drift.py's own constants and series",
    "store_scale.py": "bulk-loads millions of rows straight into the results store's tables "
                      "(store/) and runs the drift scan the trend page runs",
    "bisect_power.py": "drives bisect's own search and classification on a modelled box",
    "record_power.py": "answers the plugin's one request (measure/loop.py Measurer.attempt) "
                       "from the box's model and counts the record as views/decision.py "
                       "decides it",
}


# --- the source's imports -------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their own name)."""
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imported_modules(path: Path, package: tuple[str, ...]) -> set[str]:
    """The ``specperf`` modules ``path`` imports, anywhere in the file, resolved from relative
    form; ``from pkg import name`` counts module ``pkg.name`` when it is one, else ``pkg``."""
    known = modules()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if module.split(".")[0] != "specperf":
                continue
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known
                          else module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "specperf")
    return found


@functools.cache
def module_graph() -> dict[str, frozenset[str]]:
    """Module → the package modules it imports (parsed once per process)."""
    graph = {}
    for name, path in modules().items():
        package = tuple(name.split(".")) if path.name == "__init__.py" \
            else tuple(name.split(".")[:-1])
        graph[name] = frozenset(_imported_modules(path, package) - {name})
    return graph


def _room(dotted: str) -> str | None:
    """``specperf.judge.sweep`` → ``judge``; the top floor is ``None``."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else None


@functools.cache
def edges() -> dict[tuple[str, str], set[str]]:
    """(from room, to room) → the modules that make the edge."""
    out: dict[tuple[str, str], set[str]] = {}
    for name, targets in module_graph().items():
        here = _room(name)
        if here is None:
            continue
        for target in targets:
            there = _room(target)
            if there is not None and there != here:
                out.setdefault((here, there), set()).add(str(modules()[name].relative_to(SRC)))
    return out


def cycles(graph: Mapping[str, frozenset[str]] | None = None) -> list[list[str]]:
    """Every set of modules that import each other round a loop (Tarjan's strongly connected
    components of more than one module), each sorted, in name order."""
    graph = module_graph() if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


# --- the doc's room table -------------------------------------------------------------------


@functools.cache
def room_table() -> tuple[tuple[str, frozenset[str]], ...]:
    """docs/architecture.md's rooms in order, each with the rooms its "may import" cell allows."""
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*`(\w+)/`\s*\|[^|\n]*\|([^|\n]*)\|\s*$",
                      ARCHITECTURE.read_text("utf-8"), re.MULTILINE)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(rows) + 1)), rows
    table: list[tuple[str, frozenset[str]]] = []
    for _, room, cell in rows:
        table.append((room, _allowed(cell.strip(), [r for r, _ in table])))
    return tuple(table)


def _allowed(cell: str, above: list[str]) -> frozenset[str]:
    """"nothing", "every room above", "every room above but a, b", or a list of rooms."""
    if cell == "nothing":
        return frozenset()
    every = re.fullmatch(r"every room above(?: but (.*))?", cell)
    if every:
        excluded = set(re.findall(r"\w+", every.group(1) or ""))
        assert excluded <= set(above), f"'{cell}' excludes rooms that are not above"
        return frozenset(set(above) - excluded)
    return frozenset(re.findall(r"\w+", cell))


def rooms() -> tuple[str, ...]:
    return tuple(room for room, _ in room_table())


def _declared(room: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((SRC / room / "__init__.py").read_text("utf-8"))) or ""
    line = re.search(r"^May import: (.*)$", doc, re.MULTILINE)
    assert line, f"{room}/__init__.py needs a 'May import:' line"
    return set(re.findall(r"\w+", line.group(1))) - {"nothing"}


# --- the rooms ------------------------------------------------------------------------------


def test_every_folder_is_a_room_of_the_doc_and_every_room_a_folder() -> None:
    folders = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert PERF_TESTS in folders
    assert sorted(folders - {SIMULATOR, PERF_TESTS}) == sorted(rooms())
    importing = sorted(files for (a, b), files in edges().items() if b == PERF_TESTS)
    assert importing == []


def test_the_doc_lets_each_room_import_only_rooms_above_it() -> None:
    above: set[str] = set()
    for room, allowed in room_table():
        extra = allowed - above - ({SIMULATOR} if room == "servers" else set())
        assert extra == set(), f"{room} may import {sorted(extra)}, which are not above it"
        above.add(room)


@pytest.mark.parametrize("room", [r for r, _ in room_table()])
def test_each_room_imports_only_what_the_doc_allows_and_says_so_itself(room: str) -> None:
    allowed = dict(room_table())[room]
    assert _declared(room) == allowed, f"{room}/__init__.py's 'May import:' line differs " \
        f"from docs/architecture.md"
    used = {(b, f) for (a, b), files in edges().items() if a == room for f in files}
    forbidden = sorted(f"{f} imports {b}" for b, f in used if b not in allowed)
    assert forbidden == []


def test_the_perf_cases_import_only_rooms() -> None:
    reached = {b for (a, b) in edges() if a == PERF_TESTS}
    assert reached <= set(rooms()), reached


def test_no_import_cycle_between_modules() -> None:
    assert cycles() == []


def test_the_cycle_search_finds_a_cycle_inside_a_room() -> None:
    # The search itself: a loop of two modules in one room, and one of three.
    graph = {"a": frozenset({"b"}), "b": frozenset({"a"}), "c": frozenset({"d"}),
             "d": frozenset({"e"}), "e": frozenset({"c"}), "f": frozenset({"a"})}
    assert cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_only_the_adapter_imports_the_simulator_and_it_imports_nothing_of_the_suite() -> None:
    graph = module_graph()
    reaching = sorted(str(modules()[m].relative_to(SRC)) for m, targets in graph.items()
                      if _room(m) != SIMULATOR and any(_room(t) == SIMULATOR for t in targets))
    assert reaching == [str(SIM_ADAPTER.relative_to(SRC))]
    suite = sorted(f"{m} imports {t}" for m, targets in graph.items() if _room(m) == SIMULATOR
                   for t in targets if _room(t) not in (None, SIMULATOR))
    assert suite == []


def test_only_the_adapter_knows_the_simulators_private_routes() -> None:
    knowing = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                     if _room(_module_name(p)) != SIMULATOR
                     and re.search(r"/_sim/|sim_time_scale", p.read_text(encoding="utf-8"))
                     and p != SIM_ADAPTER)
    # settings declares the option that sets the embedded simulator's time scale
    assert knowing == ["settings/config.py", "settings/options.py"]


def test_the_top_floor_keeps_at_most_ten_modules() -> None:
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert len(top) <= TOP_FLOOR_LIMIT, top


def test_the_package_imports_nothing_until_a_name_is_used() -> None:
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    # Top-level statements only: the TYPE_CHECKING block and __getattr__ do not run on import.
    eager = [node.module for node in tree.body if isinstance(node, ast.ImportFrom)
             and node.level > 0]
    assert eager == ["core.version"]  # a constant: __version__


# --- the public API and the benchmarks ------------------------------------------------------


@functools.cache
def public_names() -> frozenset[str]:
    """The names ``specperf/__init__.py`` lists in ``_PUBLIC`` (read, not imported)."""
    for node in ast.parse((SRC / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == "_PUBLIC" and isinstance(node.value, ast.Dict):
            return frozenset(ast.literal_eval(k) for k in node.value.keys if k is not None)
    raise AssertionError("specperf/__init__.py has no _PUBLIC table")


def private_imports(path: Path) -> list[str]:
    """What a script imports of specperf besides ``import specperf`` and public names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "specperf":
            names = {a.name for a in node.names}
            if node.module != "specperf" or not names <= public_names():
                out.append(f"from {node.module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Import):
            out += [f"import {a.name}" for a in node.names
                    if a.name.startswith("specperf.")]
    return out


def test_the_doc_lists_the_public_api() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    paragraph = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`(\w+)`", paragraph)) - {"specperf"} == public_names()


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")
                                          if p.name not in PRIVATE_BENCHMARKS))
def test_benchmarks_use_only_the_public_api(script: str) -> None:
    assert private_imports(BENCHMARKS / script) == []


def test_every_private_benchmark_entry_still_needs_it() -> None:
    stale = sorted(s for s in PRIVATE_BENCHMARKS
                   if not (BENCHMARKS / s).is_file() or not private_imports(BENCHMARKS / s))
    assert stale == []


def test_no_comment_points_at_a_file_outside_the_repository() -> None:
    outside = re.compile(r"DESIGN\.md|shared/[\w-]+\.md|\.\./shared")
    files = [p for top in ("src", "tests", "benchmarks", "ci", ".ci")
             for p in sorted((REPO / top).rglob("*")) if p.suffix in (".py", ".sh", ".md", ".yml")]
    hits = [str(p.relative_to(REPO)) for p in files
            if p.name != "test_architecture.py" and outside.search(p.read_text(encoding="utf-8"))]
    assert hits == []


if __name__ == "__main__":  # the graph between rooms, one line per edge; then the cycles
    order = rooms()
    for (a, b), files in sorted(edges().items(), key=lambda e: (
            order.index(e[0][0]) if e[0][0] in order else -1, e[0][1])):
        print(f"{a:>9} → {b:<9} ({len(files)} module{'s' if len(files) > 1 else ''})")
    loops = cycles()
    print(f"import cycles between modules: {len(loops) or 'none'}")
    for loop in loops:
        print(f"  {' <-> '.join(loop)}")


# --- one name, one path -----------------------------------------------------------------------


def _resolve(node: ast.ImportFrom, package: tuple[str, ...]) -> str:
    base = list(package[:len(package) - node.level + 1]) if node.level else []
    return ".".join([*base, *(node.module.split(".") if node.module else [])])


@functools.cache
def imported_only() -> dict[str, frozenset[str]]:
    """Module (not a package) → the names it binds by importing them (``from X import n``)."""
    out = {}
    for name, path in modules().items():
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out[name] = frozenset(a.asname or a.name for node in ast.walk(tree)
                              if isinstance(node, ast.ImportFrom) for a in node.names)
    return out


def reexport_uses(paths: list[Path]) -> list[str]:
    """Each ``from specperf.M import n`` (or relative) where M only imports n from elsewhere:
    one name reached under two paths. The public API (``specperf``) and a package's
    ``__init__`` may gather names; a module may not pass another's on."""
    bound, known, found = imported_only(), modules(), []
    for path in paths:
        try:
            here = _module_name(path)
            package = tuple(here.split(".")) if path.name == "__init__.py" \
                else tuple(here.split(".")[:-1])
        except ValueError:  # tests, benchmarks, examples: absolute imports only
            package = ()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or (node.level and not package):
                continue
            module = _resolve(node, package)
            for alias in node.names:
                if alias.name in bound.get(module, ()) and f"{module}.{alias.name}" not in known:
                    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                    found.append(f"{where}:{node.lineno}: {alias.name} "
                                 f"through {module}")
    return found


def test_no_module_passes_on_a_name_it_imports() -> None:
    paths = [p for d in (SRC, REPO / "tests", BENCHMARKS, REPO / "examples")
             for p in sorted(d.rglob("*.py")) if SIMULATOR not in p.relative_to(REPO).parts[2:3]]
    assert reexport_uses(paths) == []


def test_the_reexport_search_finds_one(tmp_path: Path) -> None:
    # Sample is defined in measure/sample.py and imported by measure/loop.py.
    probe = tmp_path / "probe.py"
    probe.write_text("from specperf.measure.loop import Sample\n"
                     "from specperf.measure.sample import Sample as S2\n", encoding="utf-8")
    found = reexport_uses([probe])
    assert len(found) == 1 and found[0].endswith("Sample through specperf.measure.loop")


def test_the_public_api_names_each_module_that_defines_the_name() -> None:
    for node in ast.parse((SRC / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == "_PUBLIC":
            table = ast.literal_eval(node.value)
    through = sorted(f"{name}: {attr} through {module}"
                     for name, (module, attr) in table.items()
                     if attr in imported_only().get(f"specperf.{module}", ()))
    assert through == []


def test_views_only_render() -> None:
    # Views read the record or an outcome a command hands them: they never reach a server,
    # a baseline file or the results store themselves (cli/ is the use-case layer).
    reached = sorted(f"{f} imports {b}" for (a, b), files in edges().items()
                     if a == "views" and b in ("servers", "baselines", "store") for f in files)
    assert reached == []
