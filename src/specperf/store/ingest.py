"""A run into the store: its history line and its figures as rows, in one transaction, once.

A run is keyed by its run id: writing it again (a re-import, two processes importing one
history) adds nothing. The transaction holds the run row, its cells and its verdicts, so a
process killed halfway leaves no trace of the run (the database rolls it back).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from ..core.contract import RECORDED, STATUSES
from ..core.errors import StoreError
from . import engine, history
from .schema import cells, runs, verdicts


def put_runs(url: str, items: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
             ) -> int:
    """Write each (history line, results document or None) in its own transaction, oldest
    first; returns how many were new."""
    added = 0
    for entry, doc in items:
        with engine.transaction(url) as connection:
            added += put_run(connection, entry, doc)
    return added


def put_run(connection: Connection, entry: Mapping[str, Any],
            doc: Mapping[str, Any] | None) -> int:
    """One run on an open transaction: 1 if it was new, 0 if its run id was there already.
    ``doc`` (its results.json) adds the measured repeats and the verdicts; without it the
    history line's medians are the cells."""
    row = run_row(entry)
    key = connection.execute(_insert_new(connection, row)).scalar_one_or_none()
    if key is None:  # the run id was there: a re-import, or another process wrote it first
        return 0
    for table, rows in ((cells, cell_rows(key, entry, doc)), (verdicts, verdict_rows(key, doc))):
        if rows:
            connection.execute(insert(table), rows)
    return 1


def _insert_new(connection: Connection, row: Mapping[str, Any]) -> Any:
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    return dialect.insert(runs).values(**row).on_conflict_do_nothing(
        index_elements=["run_id"]).returning(runs.c.id)


def run_row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The ``runs`` row of a history line (without its key)."""
    base = entry.get("baseline") or {}
    return {"run_id": str(entry["run_id"]), "created": str(entry.get("created", "")),
            "label": str(entry.get("label") or ""),
            "simulated": bool(entry.get("simulated", False)),
            "deployment": base.get("deployment"), "baseline_version": base.get("version"),
            "fingerprint": dict(entry.get("fingerprint") or {}),
            "kind": str(entry.get("kind", "full")),
            "interrupted": bool(entry.get("interrupted", False)),
            "outage": bool(entry.get("outage", False)),
            "suite_version": str(entry.get("suite_version", "")),
            "git_revision": str(entry.get("git_revision", "")), "entry": dict(entry)}


def cell_rows(key: int, entry: Mapping[str, Any], doc: Mapping[str, Any] | None
              ) -> list[dict[str, Any]]:
    """The ``cells`` rows of run ``key``: the line's medians and SEs, the document's repeats."""
    measurements = (doc or {}).get("measurements") or {}
    ses = entry.get("cell_se") or {}
    out = []
    for case_id, medians in sorted((entry.get("cells") or {}).items()):
        samples = [s for s in (measurements.get(case_id) or {}).get("samples", [])
                   if not s.get("warmup")]
        for metric, median in sorted(medians.items()):
            out.append({"run": key, "case_id": case_id, "metric": metric,
                        "median": None if median is None else float(median),
                        "se": (ses.get(case_id) or {}).get(metric),
                        "repeats": _repeats(samples, metric)})
    return out


def _repeats(samples: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    return [float(s[metric]) for s in samples if isinstance(s.get(metric), int | float)]


def verdict_rows(key: int, doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``verdicts`` rows of run ``key``: one per judged case and factor."""
    out: list[dict[str, Any]] = []
    for verdict in (doc or {}).get("verdicts") or []:
        scope = str(verdict.get("case_id") or verdict.get("scope") or verdict.get("kind") or "")
        details = verdict.get("details") or {"": {}}
        for factor, figures in sorted(details.items()):
            figures = figures if isinstance(figures, Mapping) else {}
            out.append({"run": key, "seq": len(out), "case_id": scope, "factor": factor,
                        "status": _status(verdict),
                        "change": _number(figures.get("change")),
                        "low": _number(figures.get("low")), "high": _number(figures.get("high")),
                        "tolerance": _number(figures.get("limit"))})
    return out


def _status(verdict: Mapping[str, Any]) -> str:
    """The verdict's status word, refused (the run is not stored) unless the contract's."""
    word = str(verdict.get("status", ""))
    if word not in RECORDED:
        raise StoreError(f"verdict {verdict.get('case_id')!r} has status {word!r}, not one of "
                         f"the contract's words ({', '.join(STATUSES)}): the run is not "
                         f"stored.")
    return word


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def write_run(entry: Mapping[str, Any], doc: Mapping[str, Any], report_dir: Path) -> list[str]:
    """The end of a run: its history line and figures into the store its settings name
    (default: SQLite ``<report_dir>/results.db``), in one transaction; returns the run ids
    :func:`backfill` brought in first."""
    return write_runs([(entry, doc)], report_dir)


def write_runs(items: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], report_dir: Path
               ) -> list[str]:
    """The end of a run (a fleet's: one item per endpoint, all into the first one's store):
    first every earlier run of the report directory's history the store lacks (a night the
    store was down, the nights before it existed), then these, one transaction each; returns
    the earlier run ids written."""
    url = engine.store_url((items[0][1].get("settings") or {}).get("results_db"), report_dir)
    missed = backfill(url, report_dir, {str(e["run_id"]) for e, _ in items})
    for entry, doc in items:
        with engine.transaction(url) as connection:
            put_run(connection, entry, doc)
    return missed


def backfill(url: str, report_dir: Path, skip: set[str]) -> list[str]:
    """Every run of ``report_dir``'s history.jsonl (with its results.json) the store at
    ``url`` lacks, oldest first, but those of ``skip``; returns their run ids. Lines cut short
    are passed by in silence here: the readers name them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", history.HistoryLineSkipped)
        earlier = [e for e in history.file_runs(report_dir / history.HISTORY_FILE)
                   if e.get("run_id") is not None and str(e["run_id"]) not in skip]
    if not earlier:
        return []
    there = engine.read(url, lambda c: _stored_ids(c, [str(e["run_id"]) for e in earlier]))
    missed = [e for e in earlier if str(e["run_id"]) not in there]
    added = [e for e in missed if put_runs(url, [(e, results_doc(report_dir, e))])]
    return [str(e["run_id"]) for e in added]


def missed_line(run_ids: Sequence[str]) -> str:
    """The line saying which earlier runs this run's write brought into the store."""
    shown = ", ".join(run_ids[:3]) + (f" and {len(run_ids) - 3} more" if len(run_ids) > 3 else "")
    many = "s" if len(run_ids) != 1 else ""
    return f"results store: also wrote {len(run_ids)} run{many} missed earlier ({shown})."


def _stored_ids(connection: Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), 500):  # bounded IN lists on both engines
        chunk = list(ids[start:start + 500])
        found.update(connection.execute(
            select(runs.c.run_id).where(runs.c.run_id.in_(chunk))).scalars())
    return found


def results_doc(report_dir: Path, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The results.json a history line points at, when it is there and readable."""
    try:
        doc = json.loads((report_dir / str(entry.get("results") or "")).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("run_id") == entry["run_id"] else None
