"""What ``specperf import`` loads into the store from the files runs wrote before it: the lines
of a history.jsonl (each with its results.json when it is still there), and results.json files
the history does not name (built into history lines as a run builds them), oldest first."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..store.history import HISTORY_FILE, file_runs
from ..store.ingest import results_doc
from .files import history_entry

Run = tuple[dict[str, Any], dict[str, Any] | None]


def runs_in(path: Path, skipped: list[str] | None = None) -> list[Run]:
    """The runs under ``path``: a report directory, a history.jsonl or one results.json.

    A results.json named as ``path`` that is not a results document raises ConfigError; one
    found in a report directory is passed by, its name and why added to ``skipped``."""
    if path.is_dir():
        history = path / HISTORY_FILE
        named = [(e, results_doc(path, e)) for e in file_runs(history) if "run_id" in e]
        seen = {e["run_id"] for e, _ in named}
        loose = [r for f in sorted(path.glob("*/results.json"))
                 for r in _scanned(f, path, skipped) if r[0]["run_id"] not in seen]
        return named + sorted(loose, key=lambda r: str(r[0].get("created", "")))
    if path.name.endswith(".jsonl"):
        return [(e, results_doc(path.parent, e)) for e in file_runs(path) if "run_id" in e]
    if path.is_file():
        return _documents(path, path.parent.parent)
    raise ConfigError(f"{path} is neither a report directory, a history.jsonl nor a "
                      "results.json: point specperf import at what a perf run wrote.")


def _scanned(path: Path, root: Path, skipped: list[str] | None) -> list[Run]:
    try:
        return _documents(path, root)
    except ConfigError as exc:
        if skipped is not None:
            skipped.append(str(exc))
        return []


def _documents(path: Path, root: Path) -> list[Run]:
    """A results.json's runs: itself, or each endpoint of a fleet's record; ConfigError
    naming the file and why when it is not a results document."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc})") from None
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON ({exc}): cut short or not a results.json"
                          ) from None
    if not isinstance(doc, Mapping) or "run_id" not in doc:
        raise ConfigError(f"{path} is not a results document (no run_id)")
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    parts = [p["document"] for p in doc.get("endpoints", [])] or [doc]
    return [(history_entry(part, where), dict(part)) for part in parts
            if "measurements" in part]
