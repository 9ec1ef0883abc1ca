"""Reports of a perf run: ``reports/<run-id>/`` with results.json, report.html and the history
(``specperf report RESULTS``, which renders a run's page outside it, is cli/report.py).

Where reports go: ``--specperf-report-dir``, else ``$SPECPERF_REPORT_DIR``, else ``reports``,
relative to where pytest was started. This module renders only from the record (results.json,
history.jsonl) and imports no pytest: the pytest side, which builds the record at the end of a
run, is :mod:`specperf.plugin.reporting`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from ..record import files as record_files
from . import page

REPORT_DIR_ENV = "SPECPERF_REPORT_DIR"


def report_dir(setting: Path | None = None, start: Path | None = None) -> Path:
    """Where reports go (--specperf-report-dir, else $SPECPERF_REPORT_DIR, else ``reports``),
    relative to ``start`` (where pytest was started)."""
    path = setting or Path(os.environ.get(REPORT_DIR_ENV) or "reports")
    return path if path.is_absolute() else (start or Path.cwd()) / path


def write_report(doc: dict[str, Any], directory: Path) -> tuple[Path, list[str]]:
    """results.json, the history line, the results store and report.html of one run; returns
    the page's path and the earlier runs the store write brought in. A store that is down
    (StoreError) is raised after the page is written: it loses no file."""
    out = directory / str(doc["run_id"]) / "report.html"
    try:
        _, missed = record_files.write(doc, directory)
    except StoreError:
        out.write_text(page.render(doc), encoding="utf-8")
        raise
    out.write_text(page.render(doc), encoding="utf-8")
    return out, missed
