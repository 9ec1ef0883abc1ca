"""The nightly workflow (ci/nightly.yml), parsed once per test module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WORKFLOW = Path(__file__).resolve().parents[1] / "ci" / "nightly.yml"


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed for the structural check")
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data
