"""Where a run's reports go: ``--specperf-report-dir``, else ``$SPECPERF_REPORT_DIR``, else
``reports``, relative to where pytest (or the command) was started."""

from __future__ import annotations

import os
from pathlib import Path

REPORT_DIR_ENV = "SPECPERF_REPORT_DIR"


def report_dir(setting: Path | None = None, start: Path | None = None) -> Path:
    """Where reports go (--specperf-report-dir, else $SPECPERF_REPORT_DIR, else ``reports``),
    relative to ``start`` (where pytest was started)."""
    path = setting or Path(os.environ.get(REPORT_DIR_ENV) or "reports")
    return path if path.is_absolute() else (start or Path.cwd()) / path
