"""Every benchmark script still imports against the package: a rename in src breaks them
silently otherwise (they run by hand, not in CI). Importing runs no benchmark."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCHMARKS.glob("*.py")))
def test_the_benchmark_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    try:
        importlib.import_module(name)  # raises on a name src no longer has
    finally:
        sys.modules.pop(name, None)
