"""Reports of a perf run: ``reports/<run-id>/`` with results.json, report.html and the history,
and the command that renders a run's page outside it (``specperf report RESULTS``).

Where reports go: ``--specperf-report-dir``, else ``$SPECPERF_REPORT_DIR``, else ``reports``,
relative to where pytest was started. This module renders only from the record (results.json,
history.jsonl) and imports no pytest: the pytest side, which builds the record at the end of a
run, is :mod:`specperf.plugin.reporting`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import SpecperfError, StoreError
from ..record import files as record_files
from ..record import schema as record_schema
from . import page

REPORT_DIR_ENV = "SPECPERF_REPORT_DIR"
USAGE_ERROR = 2


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


# -- the command line -----------------------------------------------------------------------------
def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf report`` (``specperf trend`` is cli/trend.py's)."""
    rep = subparsers.add_parser("report", help="re-render report.html from a results.json",
                                description="Render the HTML report of a run done elsewhere.")
    rep.add_argument("results", type=Path, help="a results.json written by a perf run")
    rep.add_argument("--out", type=Path, default=None,
                     help="where to write the page (default: report.html beside RESULTS)")
    rep.set_defaults(run=run_report)


def _read(command: str, load: Callable[[Path], Any], path: Path) -> Any:
    """What ``load`` reads from ``path``, or None after one line on stderr saying why not."""
    try:
        return load(path)
    except SpecperfError as exc:
        print(f"specperf {command}: {exc}", file=sys.stderr)
        return None


def run_report(args: argparse.Namespace) -> int:
    """``specperf report``: 0 when written, 2 when the results file is unusable."""
    doc = _read("report", record_schema.load, args.results)
    if doc is None:
        return USAGE_ERROR
    out = args.out or args.results.with_name("report.html")
    out.write_text(page.render(doc), encoding="utf-8")
    print(f"specperf: report {out}")
    return 0
