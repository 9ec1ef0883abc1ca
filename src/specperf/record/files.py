"""The record's files: ``<dir>/<run-id>/results.json`` and one line of ``<dir>/history.jsonl``
per run (read by record/trend.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.contract import REGRESSION
from ..store import ingest
from .persistence import failed_factors, failed_sizes
from .readers import median, median_rel_se
from .schema import SCHEMA_VERSION

HISTORY_METRICS = ("tok_s", "step_ms", "avg_commit", "decode_tok_s", "ttft_ms")


def write(doc: dict[str, Any], report_dir: Path) -> tuple[Path, list[str]]:
    """Write ``<dir>/<run-id>/results.json``, append the run to ``<dir>/history.jsonl`` and
    write it to the results store (store/ingest.py); the results.json and the earlier runs
    the store lacked that the write brought in."""
    run_dir = report_dir / str(doc["run_id"])
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "results.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    entry = history_entry(doc, f"{doc['run_id']}/results.json")
    line = json.dumps(entry, sort_keys=True, ensure_ascii=False)
    with (report_dir / "history.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")  # one write of one line: concurrent runs never interleave
    # Last: a store that is down (StoreError) loses neither results.json nor the line.
    return path, ingest.write_run(entry, doc, report_dir)


def history_entry(doc: Mapping[str, Any], results_path: str) -> dict[str, Any]:
    """One run in a line: per-cell medians, fits, baseline identity and fingerprint."""
    base = doc.get("baseline")
    cells = {cid: {m: median(data, m) for m in HISTORY_METRICS}
             for cid, data in sorted(doc["measurements"].items())}
    # Each median's own request noise, so the run-to-run noise read from the history
    # (core/noise.py) does not count it twice.
    cell_se = {cid: {m: se for m in HISTORY_METRICS if (se := median_rel_se(data, m)) is not None}
               for cid, data in sorted(doc["measurements"].items())}
    return {"schema_version": SCHEMA_VERSION, "run_id": doc["run_id"],
            "created": doc["created"], "results": results_path,
            "label": doc["server"].get("label") or doc["settings"].get("endpoint") or "",
            "simulated": bool(doc["server"].get("simulated", False)),
            "suite_version": doc["suite_version"], "git_revision": doc["git_revision"],
            "fingerprint": doc["fingerprint"],
            # The cases' shape beside their figures (a dashboard's output length, concurrency).
            "output_tokens": doc["settings"].get("output_tokens"),
            "baseline": None if base is None else _baseline(base),
            "concurrency_baseline": _identity(doc.get("concurrency_baseline")),
            "cells": cells, "cell_se": cell_se, "fits": doc["fits"],
            "failed": sorted({v["case_id"] for v in doc["verdicts"]
                              if v["status"] == REGRESSION}),
            "failed_factors": failed_factors(doc["verdicts"]),
            # When the run started (``created`` less this) and what served it, for exports.
            "duration_s": doc.get("duration_s"), "server_kind": doc["server"].get("kind"),
            "failed_sizes": failed_sizes(doc["verdicts"]),
            **run_fields(doc)}


def _baseline(base: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline's identity, and why it was written where its file says (the trend labels
    its boundary with it)."""
    reason = (base.get("reason") or {}).get("text") \
        if (base.get("reason") or {}).get("kind") not in (None, "unrecorded") else None
    return {"deployment": base["deployment"], "version": base["version"],
            **({"reason": reason} if reason else {})}


def _identity(base: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if base is None else {"deployment": base["deployment"],
                                      "version": base["version"], "path": base["path"]}


def run_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The run's kind and its errors for the history line (older records: a full run)."""
    run = doc.get("run") or {}
    errors = [str(e).strip().splitlines()[-1][:300] for e in doc.get("errors", {}).values()
              if str(e).strip()]
    return {"kind": run.get("kind", "full"), "kind_label": run.get("label", ""),
            "interrupted": bool(run.get("interrupted", doc.get("interrupted", False))),
            "outage": bool(run.get("outage", False)), "stopped_by": run.get("stopped_by"),
            "partial": sorted(doc.get("partial") or {}),
            "errors": list(dict.fromkeys(errors))[:10],
            "error_count": len(doc.get("errors", {}))}
