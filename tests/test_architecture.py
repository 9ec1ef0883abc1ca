"""The import graph: data flows one way (settings → plan → lock → probe → measure → verdict →
record → views), so a module imports only from layers below its own — no back-edge, no
cycle. The layers are listed here once and drawn in docs/architecture.md; a new module takes
the lowest layer above everything it imports.

Every import counts: top-level, inside functions and under ``TYPE_CHECKING`` (a type-only
back-edge is still a concept defined in the wrong place).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "specperf"
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

# Bottom-up. Each line: the layer's role, then its modules.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("errors", "stats", "model", "drift", "sequential", "runkind", "wire",
                    "determinism", "fleetsched")),
    ("rules and primitives", ("limits", "acceptance", "client", "lock", "plots", "workload")),
    ("settings and server kinds", ("config", "repeats", "guard", "llamacpp", "gate", "sample")),
    ("identity and routes", ("fingerprint", "hints", "reuse", "routes", "fleet")),
    ("request shapes", ("digest", "serverkind", "streaming", "attempt")),
    ("probe", ("probe",)),
    ("measure", ("measure",)),
    ("baselines and sessions", ("baseline", "session")),
    ("paths, preflight, verdicts", ("paths", "preflight", "verdict", "baselinediff")),
    ("comparisons and the record", ("compare", "exact", "pathverdict", "results", "sweep")),
    ("the run and the page", ("page", "run")),
    ("run views", ("fixtures", "summary", "sweeprun", "trend", "fleetpage")),
    ("reports and sweep tests", ("report", "sweepfixtures")),
    ("the command and the report plugin", ("cli", "reportplugin")),
    ("the fleet's report", ("fleetreport",)),
    ("the fleet's wiring", ("fleetplugin",)),
    ("the pytest plugin", ("plugin",)),
)
# Outside the layers: the package's public surface (lazy, imports nothing at import time)
# and the simulator, a separate server that imports nothing of the suite.
OUTSIDE = {"__init__", "__main__"}


def _imports(path: Path) -> set[str]:
    """The specperf modules ``path`` imports, by top-level name (``sim`` for the simulator)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1 and module:
                found.add(module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif module.startswith("specperf."):
                found.add(module.split(".")[1])
            elif module == "specperf":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[1] for alias in node.names
                         if alias.name.startswith("specperf."))
    found.discard("__version__")
    return found


def _layer_of() -> dict[str, int]:
    return {module: level for level, (_, modules) in enumerate(LAYERS) for module in modules}


def test_every_module_has_a_layer() -> None:
    modules = {p.stem for p in SRC.glob("*.py")} - OUTSIDE
    layer = _layer_of()
    assert sorted(modules - set(layer)) == [], \
        "new modules need a place in LAYERS (the lowest layer above everything they import)"
    assert sorted(set(layer) - modules) == [], "LAYERS names modules that no longer exist"


def test_a_module_imports_only_from_layers_below_its_own() -> None:
    layer = _layer_of()
    back_edges = []
    for path in sorted(SRC.glob("*.py")):
        if path.stem in OUTSIDE or path.stem not in layer:
            continue
        for target in sorted(_imports(path) - {path.stem, "sim"}):
            if target in layer and layer[target] >= layer[path.stem]:
                back_edges.append(f"{path.stem} ({LAYERS[layer[path.stem]][0]}) imports "
                                  f"{target} ({LAYERS[layer[target]][0]})")
    assert back_edges == []


def test_only_configuration_reaches_into_the_simulator_and_it_imports_nothing_of_the_suite(
) -> None:
    reaching = sorted(p.stem for p in SRC.glob("*.py") if "sim" in _imports(p))
    assert reaching == ["config", "preflight"]  # both only to load a profile by name
    suite = {p.stem for p in SRC.glob("*.py")} - OUTSIDE
    for path in sorted((SRC / "sim").rglob("*.py")):
        assert _imports(path) & suite == set(), path.name


def test_the_package_imports_nothing_until_a_name_is_used() -> None:
    init = SRC / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    # Top-level statements only: the TYPE_CHECKING block and __getattr__ do not run on import.
    eager = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.level > 0]
    assert eager == []


@pytest.mark.parametrize("level", range(len(LAYERS)))
def test_architecture_doc_lists_each_layer_as_the_test_does(level: int) -> None:
    role, modules = LAYERS[level]
    text = ARCHITECTURE.read_text(encoding="utf-8")
    row = next((line for line in text.splitlines()
                if re.match(rf"\|\s*{level}\s*\|", line)), None)
    assert row is not None, f"docs/architecture.md has no row for layer {level} ({role})"
    listed = set(re.findall(r"`(\w+)`", row))
    assert listed == set(modules), row
