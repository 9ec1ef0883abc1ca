"""The run history, one way for every reader: the history lines (record/files.py's
history_entry) oldest first, from the results store when it holds runs, else from
``history.jsonl``.

Lenient with the file: a line cut short (a run killed mid-append, a full disk) is passed by
with one warning naming the file and the line, so one bad night does not blind every later
verdict. A store that cannot be read is a :class:`~specperf.core.errors.StoreError`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select

from ..core.errors import StoreError
from ..core.noise import NoiseModel, from_history
from . import engine
from .schema import runs

HISTORY_FILE = "history.jsonl"
# The box every embedded simulator's runs are (each listens on a new port).
SIMULATED_BOX = "SIMULATED"


class HistoryLineSkipped(UserWarning):
    """A history.jsonl line that is not a run was passed by."""


def read_history(history: Path, url: str | None = None) -> list[dict[str, Any]]:
    """The runs of ``history`` (a history.jsonl, or the report directory holding it), oldest
    first: from the store at ``url`` (default: ``results.db`` beside the file, if it exists)
    when it holds any run, else from the file; a missing file is no runs."""
    path = history / HISTORY_FILE if history.is_dir() else history
    url = url or _existing_default(path.parent)
    stored = store_runs(url) if url is not None else []
    return stored if stored else file_runs(path)


def history_despite_store(history: Path, url: str | None) -> tuple[list[dict[str, Any]], str]:
    """A run's own history read (:func:`read_history`), and "" — or, when the store cannot be
    read, the runs of ``history.jsonl`` and why: a store that is down costs the run its write
    at the end, never its verdicts (the file holds every run this report directory wrote)."""
    try:
        return read_history(history, url), ""
    except StoreError as exc:
        return file_runs(history / HISTORY_FILE if history.is_dir() else history), str(exc)


def _existing_default(report_dir: Path) -> str | None:
    """The default SQLite store beside the file, only if a run created it (a reader never
    creates one)."""
    return engine.store_url(None, report_dir) if (report_dir / engine.DEFAULT_NAME).is_file() \
        else None


def store_runs(url: str, label: str | None = None) -> list[dict[str, Any]]:
    """Every run in the store (of ``label`` only, when given) as its history line, in the
    order they were written."""
    def query(connection: Connection) -> list[dict[str, Any]]:
        statement = select(runs.c.entry).order_by(runs.c.id)
        if label is not None:
            statement = statement.where(runs.c.label == label)
        return [dict(row) for row in connection.execute(statement).scalars()]
    return engine.read(url, query)


def file_runs(path: Path) -> list[dict[str, Any]]:
    """The runs in a history.jsonl, oldest first; a line that is not one is skipped with one
    warning naming the first such line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        warnings.warn(HistoryLineSkipped(f"cannot read {path} ({exc}): no history read."),
                      stacklevel=2)
        return []
    entries, bad = [], []
    for number, line in enumerate(lines, 1):
        entry = _entry(line)
        if entry is not None:
            entries.append(entry)
        elif line.strip():
            bad.append(number)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        warnings.warn(HistoryLineSkipped(
            f"{path} line {bad[0]}{more} is not a whole run (cut short?): skipped; the other "
            f"{len(entries)} runs are read."), stacklevel=2)
    return entries


def _entry(line: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    whole = isinstance(entry, dict) and ("run_id" in entry or "cells" in entry)
    return entry if whole else None


def box_noise(entries: Sequence[Mapping[str, Any]], label: str, *, simulated: bool,
              run_noise: float, stated: bool, night_window_h: float) -> NoiseModel:
    """The run-to-run noise of box ``label`` from the history as every reader reads it (the
    gate, the nightly, ``specperf explain``): a simulator's runs are one box, whatever port it
    listened on; ``run_noise``, ``stated`` and ``night_window_h`` are the settings'."""
    if simulated:
        label = SIMULATED_BOX
        entries = [{**e, "label": label} for e in entries if e.get("simulated")]
    return from_history(entries, label, total=run_noise, stated=stated,
                        night_window_h=night_window_h)
