"""The results document's schema (``results.schema.json``, shipped beside this module and
documented in docs/results.md) and reading a results file back, validated.

The schema is checked by :mod:`jsonschema` (draft 2020-12), so every keyword it uses —
``minimum``, ``pattern``, ``enum``, ``required`` … — is enforced, never silently passed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from ..core.errors import ConfigError

SCHEMA_VERSION = 1
SCHEMA_NAME = "specperf-results"
SHOWN_PROBLEMS = 5


def schema() -> dict[str, Any]:
    """The JSON Schema of results.json (shipped as package data)."""
    return json.loads(_schema_text())  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("specperf.record").joinpath("results.schema.json").read_text("utf-8")


def validate(value: Any, node: Mapping[str, Any] | None = None) -> list[str]:
    """Every violation of the schema ``node`` (default: :func:`schema`) by ``value``, as
    'where: problem', in document order (empty when valid)."""
    checker = Draft202012Validator(dict(node) if node is not None else schema())
    found = sorted(checker.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_where(e.absolute_path)}: {e.message}" for e in found]


def _where(path: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def load(path: Path) -> dict[str, Any]:
    """Read and validate a results file; a ConfigError names the file and the problem."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read results file {path}: {exc}: point it at the "
                          "results.json a perf run wrote.") from exc
    problems = validate(doc)
    if problems:
        raise ConfigError(f"{path} is not a specperf results file (schema v{SCHEMA_VERSION}): "
                          + "; ".join(problems[:SHOWN_PROBLEMS]) + ".")
    assert isinstance(doc, dict)
    return doc
