"""What ``specperf import`` loads into the store from the files runs wrote before it: the lines
of a history.jsonl (each with its results.json when it is still there), and results.json files
the history does not name (built into history lines as a run builds them), oldest first."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..store.history import HISTORY_FILE, file_runs
from ..store.ingest import results_doc
from .files import history_entry

Run = tuple[dict[str, Any], dict[str, Any] | None]


def runs_in(path: Path) -> list[Run]:
    """The runs under ``path``: a report directory, a history.jsonl or one results.json."""
    if path.is_dir():
        history = path / HISTORY_FILE
        named = [(e, results_doc(path, e)) for e in file_runs(history) if "run_id" in e]
        seen = {e["run_id"] for e, _ in named}
        loose = [r for f in sorted(path.glob("*/results.json")) for r in _documents(f, path)
                 if r[0]["run_id"] not in seen]
        return named + sorted(loose, key=lambda r: str(r[0].get("created", "")))
    if path.name.endswith(".jsonl"):
        return [(e, results_doc(path.parent, e)) for e in file_runs(path) if "run_id" in e]
    if path.is_file():
        return list(_documents(path, path.parent.parent))
    raise ConfigError(f"{path} is neither a report directory, a history.jsonl nor a "
                      "results.json: point specperf import at what a perf run wrote.")


def _documents(path: Path, root: Path) -> Iterator[Run]:
    """A results.json's runs: itself, or each endpoint of a fleet's record."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(doc, Mapping) or "run_id" not in doc:
        return
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    parts = [p["document"] for p in doc.get("endpoints", [])] or [doc]
    for part in parts:
        if "measurements" in part:
            yield history_entry(part, where), dict(part)
